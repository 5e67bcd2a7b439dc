"""The ``agent.*`` methods: agent targets, start, prompt, waits, ``agent.explain`` and the
per-client views (``agent.view.*``).

An agent target is one terminal surface (a pane's background tabs included; see
:func:`~cmux_core.agents.targets.resolve_agent_target`). ``events.wait`` and
the pane-scoped subscriptions live in ``methods.events``, hook reports and metadata in
``methods.pane.reports``.

Waits are woken by hub events, never by a poll, and end cleanly when their client
disconnects. ``agent.prompt`` and ``agent.send_keys`` to a managed launch that is still
``launch_pending`` first wait for it to settle (see :mod:`cmux_core.agents.tracker`).

"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import time
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator

from cmux_core.agents.launch import LAUNCH_TIMEOUT_S
from cmux_core.agents.record import AgentStatus
from cmux_core.agents.scheduler import DetectionScheduler
from cmux_core.agents.targets import resolve_agent_target
from cmux_core.agents.tracker import AgentTracker
from cmux_core.agents.views import (
    ViewBook,
    check_plugins,
    inactive,
    parse_source,
    parse_view,
    project_for,
)
from cmux_core.api import wire
from cmux_core.api.context import Call, ServerInfo
from cmux_core.api.dispatch import MethodTable, Result, services
from cmux_core.api.methods.shared.creation import spawning, trimmed
from cmux_core.api.methods.shared.reading import ReadOptions, read_result
from cmux_core.api.methods.shared.waiting import (
    deadline_of,
    next_batch,
    served,
    watching,
)
from cmux_core.detect.shapes import find_dialog
from cmux_core.errors import CmuxError, WaitTimeout
from cmux_core.events import EventHub, Published
from cmux_core.hookspecs import Params
from cmux_core.model.events import PaneUpdated
from cmux_core.model.mux import Mux
from cmux_core.model.pane_io import check_keys, keys_for, launch_env, paste_bytes
from cmux_core.model.tree import Pane, Surface
from cmux_core.plugin_host.host import PluginHost


@services
class AgentServices:
    mux: Mux
    agents: AgentTracker
    events: EventHub
    info: ServerInfo
    detection: DetectionScheduler
    views: ViewBook
    plugins: PluginHost


methods = MethodTable()


AGENT_NAME_RE = re.compile(r"[a-z][a-z0-9_-]{0,31}")


DEFAULT_UNTIL: tuple[AgentStatus, ...] = ("idle", "done", "blocked")


PROMPT_ENTER_DELAY_S = 0.3
"""Pause between a prompt's text and its Enter, so the program sees them as two inputs."""


PROMPT_EFFECT_LIMIT_MS = 5000
"""Longest a prompt may go without an observed state change before it counts as stalled."""


PROMPT_TAKEN_LIMIT_S = 2.0
"""Without ``wait``: longest ``agent.prompt`` looks for the prompt to be taken after Enter."""


PROMPT_SETTLE_S = 0.5
"""Without ``wait``: once the screen changed after Enter, how long detection is given to
see it (its debounce and the ``working`` -> ``idle`` hold are shorter)."""


READY_TIMEOUT_MS = 30000
"""Default bound of the wait for a pending launch in ``agent.prompt``/``agent.send_keys``."""


START_TIMEOUT_MS = (3000, 300000)
"""``agent.start`` ``timeout_ms`` must lie in (low, high]."""


class AgentTarget(Params):
    target: str


class AgentListParams(Params):
    view: bool | str | None = None


@methods.method("agent.list", AgentListParams)
async def agent_list(call: Call[AgentServices], p: AgentListParams) -> Result:
    """Every agent terminal, in workspace, tab and layout order, those in a pane's
    background tabs included (``shown: false``, after the pane's shown one in tab order);
    with ``view``, projected through the caller's agent view (true) or that
    ``client_id``'s (a string)."""
    tracker = call.ctx.agents
    rows = [wire.agent_info(call.ctx.mux, tracker, x) for x in tracker.agent_surfaces()]
    return {"type": "agent_list", "agents": await project_for(
        call.ctx.views, call.connection, rows, p.view, call.ctx.mux, call.ctx.plugins)}


@methods.method("agent.get", AgentTarget)
async def agent_get(call: Call[AgentServices], p: AgentTarget) -> Result:
    tracker = call.ctx.agents
    surface = resolve_agent_target(tracker, p.target)
    return {"type": "agent_info", "agent": wire.agent_info(call.ctx.mux, tracker, surface)}


@methods.method("agent.focus", AgentTarget)
async def agent_focus(call: Call[AgentServices], p: AgentTarget) -> Result:
    """Show the agent's terminal in its pane (selecting its tab there) and focus that pane
    (switching workspace and tab), which marks it seen."""
    tracker = call.ctx.agents
    surface = resolve_agent_target(tracker, p.target)
    pane = surface.pane
    if pane.selected is not surface:
        pane.selected = surface
        call.ctx.events.publish(PaneUpdated(pane))
    call.ctx.mux.focus_pane(pane)
    return {"type": "agent_info", "agent": wire.agent_info(call.ctx.mux, tracker, surface)}


class AgentReadParams(ReadOptions):
    target: str


@methods.method("agent.read", AgentReadParams)
async def agent_read(call: Call[AgentServices], p: AgentReadParams) -> Result:
    """``pane.read`` on the agent's terminal; reading never marks anything seen."""
    surface = resolve_agent_target(call.ctx.agents, p.target)
    return {"type": "pane_read",
            "read": read_result(surface.pane, p.source, p.lines, p.format, surface)}


class AgentRenameParams(Params):
    target: str
    name: str | None = None


def check_agent_name(name: str) -> str:
    if not AGENT_NAME_RE.fullmatch(name):
        raise CmuxError("invalid_agent_name",
                        f"agent name {name!r} must match ^[a-z][a-z0-9_-]{{0,31}}$")
    return name


@methods.method("agent.rename", AgentRenameParams)
async def agent_rename(call: Call[AgentServices], p: AgentRenameParams) -> Result:
    """Set (or with an empty/null name clear) the agent name, and the pane's manual label
    when the pane shows the agent's terminal (a background tab's name is its own)."""
    tracker = call.ctx.agents
    surface = resolve_agent_target(tracker, p.target)
    name = trimmed(p.name)
    if name is not None:
        check_agent_name(name)
        if tracker.name_taken(name, other_than=surface):
            raise CmuxError("agent_name_taken", f"agent name {name} is already taken")
    if surface.pane.terminal_surface is surface:
        surface.pane.label = name
    tracker.set_name(surface, name)
    return {"type": "agent_info", "agent": wire.agent_info(call.ctx.mux, tracker, surface)}


async def ready_agent(call: Call[AgentServices], target: str, timeout_ms: int | None) -> Surface:
    """Resolve ``target`` to an agent whose terminal can take input now.

    A pending launch is waited for first (woken by its events, at most ``timeout_ms``,
    default :data:`READY_TIMEOUT_MS`; cancelled if the client goes away). Raises
    ``agent_not_running`` when the agent exits or leaves meanwhile, ``agent_not_ready``
    when the bound passes or the process has exited.
    """
    tracker = call.ctx.agents
    surface = resolve_agent_target(tracker, target)
    if tracker.launch_pending(surface):
        bound = READY_TIMEOUT_MS if timeout_ms is None else timeout_ms
        pin = Pinned.of(tracker, surface, target)
        await served(call.ctx.info, call.connection, until_launched(call, pin, bound))
    if surface.terminal.exited:
        raise CmuxError("agent_not_ready", "the agent's process has exited")
    return surface


def refuse_unanswered(tracker: AgentTracker, surface: Surface, target: str) -> None:
    """Raise ``agent_not_ready`` when typing now would answer something else than the
    agent's prompt: a ``blocked`` agent (a dialog, named by its first line), or an agent
    started by name whose screen was never recognised (``unknown``: its launch timed out,
    maybe on a dialog no rule knows)."""
    status = tracker.status(surface)
    name = tracker.record(surface).name or target
    if status == "blocked":
        lines = surface.terminal.read("detection", None, "text")[0].splitlines()
        dialog = find_dialog(lines)
        shown = dialog.heading if dialog is not None else next(
            (line.strip() for line in reversed(lines) if line.strip()), "")
        raise CmuxError("agent_not_ready",
                        f"agent {name} is blocked on a dialog: {shown!r}; answer it first "
                        "(agent.send_keys); nothing was sent")
    if status == "unknown" and tracker.record(surface).name is not None:
        raise CmuxError("agent_not_ready",
                        f"agent {name} is not ready: its screen is not recognised (state "
                        "unknown), it may be showing a dialog; nothing was sent")


async def until_launched(call: Call[AgentServices], pin: Pinned, bound_ms: int) -> None:
    """Return once ``pin``'s launch is no longer pending (see ``ready_agent``)."""
    mux = call.ctx.mux
    tracker = call.ctx.agents
    deadline = time.monotonic() + bound_ms / 1000
    with watching(call.ctx.events) as sub:
        while True:
            if not tracker.live(pin.surface) or pin.surface.terminal.exited:
                raise CmuxError("agent_not_running", "agent exited before it was ready")
            pin.check(mux, tracker)
            if not tracker.launch_pending(pin.surface):
                if tracker.status(pin.surface) == "unknown":
                    raise CmuxError(
                        "agent_not_ready",
                        f"agent {pin.name or pin.pane.id} did not become ready: its launch "
                        "ended with its screen not recognised (state unknown); nothing was "
                        "sent")
                return
            try:
                await next_batch(sub, deadline)
            except TimeoutError:
                if tracker.launch_pending(pin.surface):
                    raise CmuxError(
                        "agent_not_ready",
                        f"agent {pin.name or pin.pane.id} is still starting (launch_pending) "
                        f"after {bound_ms} ms; wait longer with timeout_ms; nothing was "
                        "sent") from None


class AgentSendKeysParams(Params):
    target: str
    keys: list[str]
    timeout_ms: int | None = Field(default=None, ge=0)


@methods.method("agent.send_keys", AgentSendKeysParams)
async def agent_send_keys(call: Call[AgentServices], p: AgentSendKeysParams) -> Result:
    """Send key combos to the agent in one write; an invalid key rejects them all. A
    pending launch is waited for first (``timeout_ms`` bounds that wait)."""
    check_keys(p.keys)
    surface = await ready_agent(call, p.target, p.timeout_ms)
    # Encoded only now: a program that just started may have changed its key modes.
    data = b"".join(keys_for(surface, p.keys))
    try:
        surface.terminal.write(data)
    except CmuxError as exc:
        raise CmuxError("agent_send_keys_failed", exc.message) from None
    return {"type": "ok"}


class AgentStartParams(Params):
    name: str
    argv: list[str] | None = None
    kind: str | None = None
    args: list[str] = []
    pane_id: str | None = None
    workspace_id: str | None = None
    tab_id: str | None = None
    cwd: str | None = None
    location: str | None = None
    split: Literal["right", "down"] = "right"
    focus: bool = False
    env: dict[str, Any] | None = None
    timeout_ms: int | None = None


def check_argv(argv: list[str]) -> list[str]:
    if not argv or not argv[0].strip():
        raise CmuxError("invalid_agent_argv", "argv must be a non-empty list of strings")
    for i, arg in enumerate(argv):
        if "\0" in arg:
            raise CmuxError("invalid_agent_argv", f"argv[{i}] must not contain NUL")
    return list(argv)


def start_location(p: AgentStartParams) -> str | None:
    if p.cwd is not None and p.location is not None:
        raise CmuxError("agent_placement_conflict", "give either cwd or location, not both")
    value = p.cwd if p.cwd is not None else p.location
    if value is None or not value.strip():
        return None
    path = os.path.expanduser(value.strip())
    if not os.path.isabs(path) or not os.path.isdir(path):
        raise CmuxError("invalid_agent_location", f"{value} is not an existing directory")
    return path


@methods.method("agent.start", AgentStartParams)
async def agent_start(call: Call[AgentServices], p: AgentStartParams) -> Result:
    """Start a named agent: split the focused pane of the target tab (or create the first
    workspace), or with ``pane_id`` type the command into that pane's idle shell.

    Returns at once with ``launch_pending``; the launch may stay pending ``timeout_ms``
    (``invalid_agent_timeout`` outside 3000 < t <= 300000; default 30 s).
    """
    tracker = call.ctx.agents
    mux = call.ctx.mux
    name = check_agent_name(p.name.strip())
    if tracker.name_taken(name):
        raise CmuxError("agent_name_taken", f"agent name {name} is already taken")
    if p.argv is not None:
        argv = check_argv(p.argv)
    elif p.kind is not None and p.kind.strip():
        argv = check_argv([tracker.canonical(p.kind), *p.args])
    else:
        raise CmuxError("invalid_agent_argv", "give argv (or kind and args)")
    env = launch_env(p.env)
    cwd = start_location(p)
    low, high = START_TIMEOUT_MS
    if p.timeout_ms is not None and not low < p.timeout_ms <= high:
        raise CmuxError("invalid_agent_timeout",
                        f"timeout_ms must be above {low} and at most {high}")
    if p.pane_id is not None and p.workspace_id is None and p.tab_id is None:
        pane = type_into_shell(mux, tracker, p.pane_id, argv)
    else:
        pane = place_agent(mux, p, argv, env, cwd)
    pane.label = name
    tracker.begin_launch(pane, name, LAUNCH_TIMEOUT_S if p.timeout_ms is None
                         else p.timeout_ms / 1000)
    if p.focus:
        mux.focus_pane(pane)
    return {"type": "agent_started", "agent": wire.agent_info(mux, tracker, pane), "argv": argv}


def place_agent(mux: Mux, p: AgentStartParams, argv: list[str], env: dict[str, str],
                cwd: str | None) -> Pane:
    """The seed's placement rules; spawn failures become ``agent_start_failed``."""
    with spawning("agent_start_failed"):
        if not any(True for _ in mux.workspaces()):
            _ws, _tab, pane = mux.create_workspace(cwd=cwd, command=argv, pane_env=env,
                                                   focus=p.focus)
            return pane
        if p.tab_id is not None:
            tab = mux.find_tab(p.tab_id)
            if tab is None:
                raise CmuxError("agent_placement_not_found", f"tab {p.tab_id} not found")
            if p.workspace_id is not None and mux.find_workspace(p.workspace_id) \
                    is not tab.workspace:
                raise CmuxError("agent_placement_conflict",
                                f"tab {p.tab_id} is not in workspace {p.workspace_id}")
        else:
            ws = (mux.find_workspace(p.workspace_id) if p.workspace_id is not None
                  else mux.active_workspace())
            if ws is None or ws.active_tab is None:
                raise CmuxError("agent_placement_not_found",
                                f"workspace {p.workspace_id or '(active)'} not found")
            tab = ws.active_tab
        source = mux.panes.get(tab.focused) or mux.tab_panes(tab)[0]
        return mux.split_pane(source, p.split, cwd=cwd, env=env, command=argv, focus=p.focus)


def type_into_shell(mux: Mux, tracker: AgentTracker, pane_id: str, argv: list[str]) -> Pane:
    """Type ``argv`` (shell-quoted) and Enter into ``pane_id``'s shell, which must be idle."""
    pane = mux.find_pane(pane_id)
    if pane is None:
        raise CmuxError("agent_pane_not_found", f"pane {pane_id} not found")
    if tracker.is_agent(pane):
        raise CmuxError("agent_pane_busy", f"pane {pane.id} already hosts an agent")
    term = pane.terminal
    if term.exited:
        raise CmuxError("agent_pane_unavailable", f"pane {pane.id} has exited")
    if term.foreground_pgid() not in (None, term.pid):
        raise CmuxError("agent_pane_busy", f"pane {pane.id} is running a command")
    try:
        term.write(shlex.join(argv).encode() + b"\r")
    except CmuxError as exc:
        raise CmuxError("agent_start_input_failed", exc.message) from None
    return pane


@dataclass(slots=True)
class Pinned:
    """The identity a wait follows: the same terminal surface, terminal, name and agent."""

    surface: Surface
    terminal_id: str
    name: str | None
    by_name: bool
    agent: str | None

    @property
    def pane(self) -> Pane:
        """The pane holding the terminal now."""
        return self.surface.pane

    @classmethod
    def of(cls, tracker: AgentTracker, surface: Surface, target: str) -> Pinned:
        name = tracker.record(surface).name
        return cls(surface, surface.terminal.id, name,
                   name is not None and name == target.strip(),
                   tracker.effective_agent(surface))

    def check(self, mux: Mux, tracker: AgentTracker) -> None:
        """Raise ``agent_not_running`` when the terminal no longer runs the same agent."""
        if not self.running(mux, tracker):
            raise CmuxError("agent_not_running",
                            "agent is no longer running in the target pane")

    def running(self, mux: Mux, tracker: AgentTracker) -> bool:
        surface = self.surface
        if not tracker.live(surface) or surface.terminal.id != self.terminal_id \
                or not tracker.is_agent(surface):
            return False
        name = tracker.record(surface).name
        if self.by_name and name != self.name:
            return False
        agent = tracker.effective_agent(surface)
        if self.agent is not None and agent != self.agent:
            return agent is None and name is not None
        return True

    def concerns(self, mux: Mux, event: Published) -> bool:
        data = event.data
        if event.kind in ("surface_agent_status_changed", "surface_agent_detected"):
            return bool(data.get("terminal_id") == self.terminal_id)
        if event.kind == "pane_exited" and self.pane.terminal_surface is not self.surface:
            return False
        if event.kind == "pane_moved":
            return bool(data.get("previous_pane_id") == self.pane.id
                        or data.get("pane", {}).get("terminal_id") == self.terminal_id)
        if event.kind == "pane_updated":
            return bool(data.get("pane", {}).get("terminal_id") == self.terminal_id)
        return mux.find_pane(str(data.get("pane_id", ""))) is self.pane or \
            data.get("pane_id") == self.pane.id


async def wait_for_status(call: Call[AgentServices], pin: Pinned, until: set[str],
                          deadline: float | None,
                          *, transient: bool = True) -> dict[str, Any]:
    """Follow ``pin``'s events until its status is in ``until``; returns its AgentInfo.

    Raises ``agent_not_running`` when the pane closes, exits, moves away or changes its
    agent, and ``timeout`` at the deadline (after a last look).
    """
    mux = call.ctx.mux
    tracker = call.ctx.agents
    with watching(call.ctx.events) as sub:
        while True:
            pin.check(mux, tracker)
            if tracker.status(pin.surface) in until:
                return wire.agent_info(mux, tracker, pin.surface)
            try:
                batch = await next_batch(sub, deadline)
            except TimeoutError:
                pin.check(mux, tracker)
                if tracker.status(pin.surface) in until:
                    return wire.agent_info(mux, tracker, pin.surface)
                raise WaitTimeout(message="timed out waiting for agent status") from None
            for event in batch:
                if not pin.concerns(mux, event):
                    continue
                kind, data = event.kind, event.data
                if kind in ("pane_closed", "pane_exited", "pane_moved"):
                    raise CmuxError("agent_not_running",
                                    "agent is no longer running in the target pane")
                if kind == "surface_agent_detected" and data.get("released"):
                    final = data.get("final_status")
                    if final in until:
                        return {**wire.agent_info(mux, tracker, pin.surface),
                                "agent_status": final}
                    raise CmuxError("agent_not_running",
                                    "agent is no longer running in the target pane")
                if transient and kind == "surface_agent_status_changed" \
                        and data.get("agent_status") in until:
                    pin.check(mux, tracker)
                    return {**wire.agent_info(mux, tracker, pin.surface),
                            "agent_status": data["agent_status"]}


class AgentWaitParams(Params):
    target: str
    until: list[AgentStatus] = []
    timeout_ms: int | None = Field(default=None, ge=0)


@methods.method("agent.wait", AgentWaitParams)
async def agent_wait(call: Call[AgentServices], p: AgentWaitParams) -> Result:
    """Hold the request until the agent's status is in ``until`` (default idle, done,
    blocked); returns at once when it already is."""
    tracker = call.ctx.agents
    surface = resolve_agent_target(tracker, p.target)
    pin = Pinned.of(tracker, surface, p.target)
    until: set[str] = set(p.until or DEFAULT_UNTIL)
    waited = wait_for_status(call, pin, until, deadline_of(p.timeout_ms))
    info = await served(call.ctx.info, call.connection, waited)
    return {"type": "agent_info", "agent": info}


class PromptWait(Params):
    until: list[AgentStatus] = []
    timeout_ms: int | None = Field(default=None, ge=0)


class AgentPromptParams(Params):
    target: str
    text: str
    wait: PromptWait | None = None
    timeout_ms: int | None = Field(default=None, ge=0)


@methods.method("agent.prompt", AgentPromptParams)
async def agent_prompt(call: Call[AgentServices], p: AgentPromptParams) -> Result:
    """Paste the prompt (bracketed when enabled), then Enter 300 ms later.

    A pending launch is waited for first (``timeout_ms`` bounds that wait). Without
    ``wait``, the reply follows the prompt being taken (:func:`prompt_taken`), so its
    status is the one the prompt led to, not the one before it. With ``wait``: the prompt
    must then visibly take effect (a state change within 5 s, else
    ``agent_prompt_stalled``), then the status must reach ``until``.
    """
    if not p.text.strip():
        raise CmuxError("empty_agent_prompt", "prompt text must not be empty")
    tracker = call.ctx.agents
    surface = await ready_agent(call, p.target, p.timeout_ms)
    refuse_unanswered(tracker, surface, p.target)
    term = surface.terminal
    pin = Pinned.of(tracker, surface, p.target)
    before_seq = tracker.record(surface).state_change_seq
    data = paste_bytes(surface, p.text)
    enter = b"".join(keys_for(surface, ["enter"]))
    try:
        term.write(data)
    except CmuxError as exc:
        raise CmuxError("agent_prompt_failed", exc.message) from None
    loop = asyncio.get_running_loop()
    entered: asyncio.Future[int | None] = loop.create_future()
    loop.call_later(PROMPT_ENTER_DELAY_S, submit, term, enter, entered)
    if p.wait is None:
        taken = prompt_taken(call, pin, before_seq, entered)
        info = await served(call.ctx.info, call.connection, taken)
        return {"type": "agent_prompted", "agent": info}
    until: set[str] = set(p.wait.until or DEFAULT_UNTIL)
    waited = prompt_wait(call, pin, before_seq, until, p.wait.timeout_ms)
    info = await served(call.ctx.info, call.connection, waited)
    return {"type": "agent_prompted", "agent": info}


def submit(term: Any, enter: bytes, entered: asyncio.Future[int | None]) -> None:
    """Write Enter; ``entered`` gets the terminal's output count at that moment (None when
    it could not be written). Runs even when the prompting client has gone away."""
    seq = None
    if not term.exited:
        try:
            term.write(enter)
            seq = term.output_seq
        except CmuxError:
            seq = None
    if not entered.done():
        entered.set_result(seq)


async def prompt_taken(call: Call[AgentServices], pin: Pinned, before_seq: int,
                       entered: asyncio.Future[int | None]) -> dict[str, Any]:
    """The agent's info once its prompt was taken, for ``agent.prompt`` without ``wait``.

    Taken means: its state changed since ``before_seq`` (it went ``working``, or asked
    something), or its screen changed after Enter and detection then had
    :data:`PROMPT_SETTLE_S` to report a change. After :data:`PROMPT_TAKEN_LIMIT_S` with
    neither, the info is what it is then: a prompt without ``wait`` never fails for want
    of an effect. An agent that exits or leaves the pane meanwhile is ``agent_not_running``.
    """
    mux = call.ctx.mux
    tracker = call.ctx.agents
    surface = pin.surface
    seq_at_enter = await asyncio.shield(entered)
    deadline = time.monotonic() + PROMPT_TAKEN_LIMIT_S
    screen_changed = seq_at_enter is None
    with watching(call.ctx.events) as sub:
        while (pin.running(mux, tracker)
               and tracker.record(surface).state_change_seq <= before_seq):
            if not screen_changed and seq_at_enter is not None \
                    and surface.terminal.output_seq > seq_at_enter:
                screen_changed = True
                deadline = min(deadline, time.monotonic() + PROMPT_SETTLE_S)
            left = deadline - time.monotonic()
            if left <= 0:
                break
            wakes: list[asyncio.Future[Any]] = [asyncio.ensure_future(sub.next_batch())]
            if not screen_changed:
                wakes.append(asyncio.ensure_future(mux.output_signal(surface.pane).wait()))
            try:
                await asyncio.wait(wakes, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for wake in wakes:
                    wake.cancel()
    if not pin.running(mux, tracker):
        raise CmuxError("agent_not_running",
                        "the agent exited (or left the pane) while taking the prompt")
    return wire.agent_info(mux, tracker, surface)


async def prompt_wait(call: Call[AgentServices], pin: Pinned, before_seq: int, until: set[str],
                      timeout_ms: int | None) -> dict[str, Any]:
    mux = call.ctx.mux
    tracker = call.ctx.agents
    deadline = deadline_of(timeout_ms)
    pin.check(mux, tracker)
    rec = tracker.record(pin.surface)
    if rec.state != "working":
        gate_ms = PROMPT_EFFECT_LIMIT_MS if timeout_ms is None else min(timeout_ms,
                                                                         PROMPT_EFFECT_LIMIT_MS)
        gate = time.monotonic() + gate_ms / 1000
        with watching(call.ctx.events) as sub:
            while rec.state_change_seq <= before_seq:
                pin.check(mux, tracker)
                try:
                    await next_batch(sub, gate)
                except TimeoutError:
                    if rec.state_change_seq > before_seq:
                        break
                    if timeout_ms is not None and timeout_ms <= PROMPT_EFFECT_LIMIT_MS:
                        raise WaitTimeout(message="timed out waiting for agent status") from None
                    raise CmuxError(
                        "agent_prompt_stalled",
                        f"agent prompt produced no observed state change within {gate_ms} ms; "
                        f"status is {rec.status} and state_change_seq remained "
                        f"{rec.state_change_seq}") from None
                rec = tracker.record(pin.surface)
        pin.check(mux, tracker)
        if tracker.status(pin.surface) in until:
            return wire.agent_info(mux, tracker, pin.surface)
    return await wait_for_status(call, pin, until, deadline, transient=False)


async def _runtime(call: Call[AgentServices]) -> DetectionScheduler:
    """The server's detection runtime once its manifests are loaded."""
    runtime = call.ctx.detection
    await runtime.registry.loaded.wait()
    return runtime


class AgentTargetParams(Params):
    target: str = Field(min_length=1)


@methods.method("agent.explain", AgentTargetParams)
async def agent_explain(call: Call[AgentServices], p: AgentTargetParams) -> Result:
    """Why the agent's screen reads as its state: the manifest in force, every rule's
    evidence and the last ignored hook report. ``agent_explain_unavailable`` when the pane
    has no agent with a manifest and no ignored report; a pane that is not an agent but
    has an ignored report is explained too."""
    runtime = await _runtime(call)
    tracker = call.ctx.agents
    try:
        surface = resolve_agent_target(tracker, p.target)
    except CmuxError as exc:
        # A terminal that is not an agent may be one whose reports were all ignored.
        found = call.ctx.mux.find_surface(p.target)
        if (exc.code != "agent_not_found" or found is None or found.term is None
                or tracker.record(found).last_ignored is None):
            raise
        surface = found
    return {"type": "agent_explain", "explain": await runtime.explain(surface)}


_CLIENT_ID_RE = re.compile(r"^[A-Za-z0-9:._-]{1,120}$")


class _ClientParams(Params):
    client_id: str | None = None

    @field_validator("client_id")
    @classmethod
    def _client_id(cls, value: str | None) -> str | None:
        if value is not None and not _CLIENT_ID_RE.match(value):
            raise ValueError("must be 1-120 ASCII letters, digits or : . _ -")
        return value


class AgentViewSetParams(_ClientParams):
    source: str
    label: str | None = None
    filter: Any = None
    sort: Any = None


class AgentViewClearParams(_ClientParams):
    source: str | None = None


class AgentViewGetParams(_ClientParams):
    pass


@methods.method("agent.view.set", AgentViewSetParams)
async def agent_view_set(call: Call[AgentServices], p: AgentViewSetParams) -> Result:
    """Replace the calling client's agent view (filter and sort of the agent list).

    Invalid input leaves the previous view in place. A ``plugin:<id>`` source needs that
    plugin installed and enabled, and so does every ``{"plugin": ...}`` reference.
    """
    view = parse_view(p.source, p.label, p.filter, p.sort)
    check_plugins(view, call.ctx.plugins)
    book = call.ctx.views
    book.set(book.client(call.connection, p.client_id), view)
    return view.to_wire()


@methods.method("agent.view.clear", AgentViewClearParams)
async def agent_view_clear(call: Call[AgentServices], p: AgentViewClearParams) -> Result:
    """Clear the calling client's view; with ``source``, only a view with that source.

    Returns the view active afterwards (a non-matching source leaves it active).
    """
    source = parse_source(p.source) if p.source is not None else None
    book = call.ctx.views
    remaining = book.clear(book.client(call.connection, p.client_id), source)
    return remaining.to_wire() if remaining is not None else inactive()


@methods.method("agent.view.get", AgentViewGetParams)
async def agent_view_get(call: Call[AgentServices], p: AgentViewGetParams) -> Result:
    """The calling client's view: ``agent_view`` plus its ``filter`` and ``sort`` as set."""
    book = call.ctx.views
    view = book.get(book.client(call.connection, p.client_id))
    if view is None:
        return inactive()
    return {**view.to_wire(), **view.spec}
