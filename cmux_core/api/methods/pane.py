"""Pane methods: structure, focus, input, reads, output waits, process info."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field, field_validator

from cmux_core.agents.tracker import AgentTracker
from cmux_core.api import wire
from cmux_core.api.context import Call
from cmux_core.api.dispatch import MethodTable, Result
from cmux_core.api.methods.routing import (
    Routing,
    given,
    pane_of,
    surface_keys,
    surface_of,
    workspace_of,
)
from cmux_core.api.methods.routing import pane_keys as cmux_pane_keys
from cmux_core.api.methods.surface import (
    NewTerminalParams,
    SurfaceSplitParams,
    split_here,
    surface_title,
)
from cmux_core.api.methods.workspace import (
    ExecString,
    command_argv,
    creation_focus,
    resolve_cwd,
    trimmed,
    workspace_keys,
)
from cmux_core.detect.pattern import Pattern, compile_pattern
from cmux_core.errors import CmuxError, InvalidParams, NotFound, WaitTimeout
from cmux_core.hookspecs import Params
from cmux_core.model import surfaces
from cmux_core.model.mux import Mux, spawn_error
from cmux_core.model.tree import Pane, Surface
from cmux_core.terminal import procfs
from cmux_core.terminal.keys import encode_keys
from cmux_core.terminal.process import validate_env

STRIP_ANSI = Field(True, description=(
    "accepted for compatibility with herdr clients and ignored: format decides "
    "(text is plain, ansi keeps escape sequences)"))


methods = MethodTable()

MAX_READ_LINES = 1000
DEFAULT_READ_LINES = 80
WAIT_RECHECK_S = 0.01
"""Least time between two re-reads of one waiter while output keeps flowing."""
WAIT_BURST = 8
"""Quick wakes a waiter serves at once before pacing itself."""

ReadSource = Literal["visible", "recent", "recent_unwrapped", "detection"]
NOMINAL_CELL_PX = (8, 16)
"""A cell's size in pixels as the screens report it to programs (``CSI 16 t``): a headless
pane has no pixels, so its ``pixel_frame`` is its cell rectangle in this unit."""


def pane_row(mux: Mux, agents: AgentTracker, pane: Pane, index: int) -> dict[str, Any]:
    """PaneInfo plus the cmux family's pane row keys."""
    info = wire.pane_info(mux, agents, pane)
    info.update({
        "id": pane.key,
        "index": index,
        "surface_ids": [s.uuid for s in pane.surfaces],
        "surface_refs": [s.ref for s in pane.surfaces],
        "selected_surface_id": pane.surface.uuid,
        "selected_surface_ref": pane.surface.ref,
        "surface_count": len(pane.surfaces),
    })
    rect = mux.pane_rects(pane.tab).get(pane.key)
    if rect is not None:
        width, height = NOMINAL_CELL_PX
        info.update({"pixel_frame": {"x": rect.x * width, "y": rect.y * height,
                                     "width": rect.width * width,
                                     "height": rect.height * height},
                     "cell_width_px": width, "cell_height_px": height})
    return info


def pane_keys(pane: Pane) -> dict[str, Any]:
    return {**workspace_keys(pane.tab.workspace), "pane_uuid": pane.key, "pane_ref": pane.ref}


# -- structure ------------------------------------------------------------------------


class PaneSplitParams(Params):
    target_pane_id: str | None = None
    pane_id: str | None = None
    workspace_id: str | None = None
    direction: Literal["right", "down"] = "right"
    ratio: float | None = None
    cwd: str | None = None
    location: str | None = None
    focus: bool = False
    env: dict[str, str] | None = None
    command: list[ExecString] | None = None


@methods.method("pane.split", PaneSplitParams)
async def pane_split(call: Call, p: PaneSplitParams) -> Result:
    """Split a pane; the new pane is the second child (right of or below the target)."""
    mux = call.ctx.mux
    if p.cwd is not None and p.location is not None:
        raise InvalidParams("location", "give either cwd or location, not both")
    target_text = p.target_pane_id or p.pane_id
    if target_text is not None:
        target = mux.pane(target_text)
    elif p.workspace_id is not None:
        ws = mux.workspace(p.workspace_id)
        focused = mux.focused_pane_of(ws)
        if focused is None:
            raise NotFound("pane", message="workspace has no focused pane")
        target = focused
    else:
        target = mux.pane(None)
    env = validate_env(p.env)
    cwd = resolve_cwd(p.cwd if p.cwd is not None else p.location, "cwd")
    command = command_argv(p.command, "command")
    try:
        pane = mux.split_pane(target, p.direction, ratio=p.ratio, cwd=cwd, env=env,
                              command=command, focus=p.focus)
    except CmuxError as exc:
        raise spawn_error(exc, "pane_split_failed") from None
    return {"type": "pane_info", "pane": wire.pane_info(mux, call.ctx.agents, pane)}


class PaneListParams(Params):
    workspace_id: str | None = None


@methods.method("pane.list", PaneListParams)
async def pane_list(call: Call, p: PaneListParams) -> Result:
    """Panes in workspace, tab and layout order (all workspaces unless one is named)."""
    mux = call.ctx.mux
    if p.workspace_id is not None:
        ws = mux.workspace(p.workspace_id)
        panes = mux.workspace_panes(ws)
        extra: dict[str, Any] = workspace_keys(ws)
    else:
        panes = mux.all_panes()
        active = mux.active_workspace()
        extra = workspace_keys(active) if active else {}
    extra["container_frame"] = {"width": mux.area.width, "height": mux.area.height}
    return {"type": "pane_list", "panes": [pane_row(mux, call.ctx.agents, x, i)
                                          for i, x in enumerate(panes)],
            **extra}


class PaneTarget(Params):
    pane_id: str


class OptionalPaneTarget(Params):
    pane_id: str | None = None


@methods.method("pane.get", PaneTarget)
async def pane_get(call: Call, p: PaneTarget) -> Result:
    mux = call.ctx.mux
    return {"type": "pane_info", "pane": wire.pane_info(mux, call.ctx.agents, mux.pane(p.pane_id))}


class PaneCurrentParams(Params):
    caller_pane_id: str | None = None


@methods.method("pane.current", PaneCurrentParams)
async def pane_current(call: Call, p: PaneCurrentParams) -> Result:
    """The caller's pane when ``caller_pane_id`` is given, else the focused pane."""
    mux = call.ctx.mux
    pane = mux.find_pane(p.caller_pane_id) if p.caller_pane_id else mux.focused_pane()
    if pane is None:
        raise NotFound("pane", message="pane not found")
    return {"type": "pane_current", "pane": wire.pane_info(mux, call.ctx.agents, pane)}


@methods.method("pane.focus", PaneTarget)
async def pane_focus(call: Call, p: PaneTarget) -> Result:
    """Focus the pane, switching the active workspace and tab to it."""
    mux = call.ctx.mux
    pane = mux.pane(p.pane_id)
    mux.focus_pane(pane)
    return {"type": "pane_info", "pane": wire.pane_info(mux, call.ctx.agents, pane),
            **pane_keys(pane)}


class PaneRenameParams(Params):
    pane_id: str
    label: str | None = Field(default=None, max_length=256)


@methods.method("pane.rename", PaneRenameParams)
async def pane_rename(call: Call, p: PaneRenameParams) -> Result:
    """Set the manual label (trimmed); empty or null clears it."""
    mux = call.ctx.mux
    pane = mux.pane(p.pane_id)
    pane.label = (p.label or "").strip() or None
    return {"type": "pane_info", "pane": wire.pane_info(mux, call.ctx.agents, pane)}


@methods.method("pane.close", PaneTarget)
async def pane_close(call: Call, p: PaneTarget) -> Result:
    """Close the pane and end its process group; the tab closes with its last pane."""
    mux = call.ctx.mux
    mux.close_pane(mux.pane(p.pane_id))
    return {"type": "ok"}


# -- input ----------------------------------------------------------------------------


class SendTextParams(Params):
    pane_id: str
    text: str


def write(surface: Surface, data: bytes) -> None:
    if surface.terminal.exited:
        raise CmuxError("pane_send_failed", "the pane's process has exited")
    surface.terminal.write(data)


@methods.method("pane.send_text", SendTextParams)
async def pane_send_text(call: Call, p: SendTextParams) -> Result:
    """Write ``text`` as raw UTF-8: no bracketed paste, no Enter."""
    pane = call.ctx.mux.pane(p.pane_id)
    write(pane.terminal_surface, p.text.encode())
    return {"type": "ok"}


class SendKeysParams(Params):
    pane_id: str
    keys: list[str]


@methods.method("pane.send_keys", SendKeysParams)
async def pane_send_keys(call: Call, p: SendKeysParams) -> Result:
    """Send key combos in order; one invalid key rejects the request before any byte."""
    pane = call.ctx.mux.pane(p.pane_id)
    encoded = encode_keys(p.keys, pane.terminal.emulator.modes)
    for data in encoded:
        write(pane.terminal_surface, data)
    return {"type": "ok"}


class SendInputParams(Params):
    pane_id: str
    text: str = ""
    keys: list[str] = []


def paste_bytes(surface: Surface, text: str) -> bytes:
    """``text`` wrapped in bracketed paste when the program enabled it."""
    data = text.encode()
    if data and surface.terminal.emulator.modes.bracketed_paste:
        return b"\x1b[200~" + data + b"\x1b[201~"
    return data


@methods.method("pane.send_input", SendInputParams)
async def pane_send_input(call: Call, p: SendInputParams) -> Result:
    """Paste ``text`` (bracketed when enabled) then send ``keys``, in one write."""
    pane = call.ctx.mux.pane(p.pane_id)
    encoded = encode_keys(p.keys, pane.terminal.emulator.modes)
    surface = pane.terminal_surface
    write(surface, paste_bytes(surface, p.text) + b"".join(encoded))
    return {"type": "ok"}


# -- reads and waits ------------------------------------------------------------------


class ReadParams(Params):
    pane_id: str
    source: ReadSource = "visible"
    lines: int | None = Field(default=None, ge=0)
    format: Literal["text", "ansi"] = "text"
    strip_ansi: bool = STRIP_ANSI

    @field_validator("lines")
    @classmethod
    def _clamp(cls, v: int | None) -> int | None:
        return None if v is None else min(v, MAX_READ_LINES)


def read_result(pane: Pane, source: ReadSource, lines: int | None,
                fmt: Literal["text", "ansi"], surface: Surface | None = None) -> dict[str, Any]:
    """A ``pane.read`` result of the pane's terminal, or of ``surface``'s (one of its tabs)."""
    term = surface.terminal if surface is not None else pane.terminal
    text, truncated = term.read(source, lines, fmt)
    return {"pane_id": pane.id, "workspace_id": pane.tab.workspace.id, "tab_id": pane.tab.id,
            "source": source, "format": fmt, "text": text, "revision": 0,
            "truncated": truncated}


@methods.method("pane.read", ReadParams)
async def pane_read(call: Call, p: ReadParams) -> Result:
    """Read the screen, scrollback or detection snapshot as text or ANSI."""
    pane = call.ctx.mux.pane(p.pane_id)
    return {"type": "pane_read", "read": read_result(pane, p.source, p.lines, p.format)}


class OutputMatch(Params):
    type: Literal["substring", "regex"]
    value: str


class WaitForOutputParams(Params):
    pane_id: str
    source: ReadSource = "recent"
    lines: int | None = Field(default=None, ge=0)
    match: OutputMatch
    timeout_ms: int | None = Field(default=None, ge=0)
    strip_ansi: bool = STRIP_ANSI

    @field_validator("lines")
    @classmethod
    def _clamp(cls, v: int | None) -> int | None:
        return None if v is None else min(v, MAX_READ_LINES)


REGEX_INLINE_COST = 1 << 19
"""Largest ``characters * program size`` of a regex search run on the event loop; a
costlier search runs on a thread of its own (RE2 lets go of the GIL while it matches),
so a pattern that is slow on a long read delays only the wait that asked for it."""


class LineFinder:
    """Finds the first line of a read that matches one ``match`` (see :func:`line_matcher`)."""

    def __init__(self, find: Callable[[str], str | None], pattern: Pattern | None = None) -> None:
        self._find = find
        self._size = 0 if pattern is None else pattern.size

    def __call__(self, text: str) -> str | None:
        """The first matching line of ``text``, searched on the calling thread."""
        return self._find(text)

    async def find(self, text: str) -> str | None:
        """The first matching line of ``text``; a search that may be long (see
        REGEX_INLINE_COST) runs on a daemon thread while the loop serves others.
        Cancelling abandons its result: the thread ends when its search does."""
        if len(text) * self._size <= REGEX_INLINE_COST:
            return self._find(text)
        return await _on_thread(self._find, text)


async def _on_thread(find: Callable[[str], str | None], text: str) -> str | None:
    # A daemon thread, not the loop's executor: that one is joined when the server stops,
    # which would hold a SIGTERM until the search ends.
    loop = asyncio.get_running_loop()
    done: asyncio.Future[str | None] = loop.create_future()

    def deliver(line: str | None, error: Exception | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(line)

    def run() -> None:
        line, error = None, None
        try:
            line = find(text)
        except Exception as exc:
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop has closed meanwhile
            loop.call_soon_threadsafe(deliver, line, error)

    threading.Thread(target=run, name="cmux-regex-search", daemon=True).start()
    return await done


def line_matcher(match: OutputMatch) -> LineFinder:
    """A finder of the first line of a read that matches; ``invalid_regex`` for a
    pattern that does not compile. A regex is in the Rust dialect and runs on RE2
    (:mod:`cmux_core.detect.pattern`): a search is linear in the line's length.

    Lines are split on ``\n`` with one trailing ``\r`` removed. A substring is
    looked for in the whole text first, so a read without it costs one scan.
    """
    if match.type == "substring":
        value = match.value
        if not value or "\r" in value:
            return LineFinder(lambda text: first_match(text, lambda line: value in line))
        if "\n" in value:
            return LineFinder(lambda text: None)
        return LineFinder(lambda text: _line_at(text, text.find(value)))
    try:
        pattern = compile_pattern(match.value)
    except ValueError as exc:
        raise CmuxError("invalid_regex", f"match.value: invalid regex: {exc}",
                        {"field": "match.value"}) from None
    return LineFinder(lambda text: first_match(text, pattern.search), pattern)


def _line_at(text: str, at: int) -> str | None:
    """The line holding offset ``at`` of ``text`` (``None`` for -1), without its ``\r``."""
    if at < 0:
        return None
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    return text[start:end if end >= 0 else len(text)].removesuffix("\r")


def first_match(text: str, matches: Callable[[str], bool]) -> str | None:
    for line in text.split("\n"):
        line = line.removesuffix("\r")
        if matches(line):
            return line
    return None


async def next_output(changed: asyncio.Event, checked: float, burst: int,
                      timeout: float | None = None) -> int:
    """Wait until ``changed`` fires (TimeoutError after ``timeout`` seconds).

    Wakes return at once unless output has kept coming: after WAIT_BURST quick wakes
    in a row, each returns no sooner than WAIT_RECHECK_S after ``checked``, so a
    flooding pane cannot make its readers burn the loop, while short exchanges are
    seen batch by batch. Returns the new count of quick wakes (``burst``).
    """
    async with asyncio.timeout(timeout):
        await changed.wait()
    elapsed = time.monotonic() - checked
    if elapsed >= WAIT_RECHECK_S:
        return 0
    if burst >= WAIT_BURST:
        await asyncio.sleep(WAIT_RECHECK_S - elapsed)
    return burst + 1


@methods.method("pane.wait_for_output", WaitForOutputParams)
async def pane_wait_for_output(call: Call, p: WaitForOutputParams) -> Result:
    """Hold the request until a line of the pane's output matches, woken by new output."""
    mux = call.ctx.mux
    pane = mux.pane(p.pane_id)
    find_line = line_matcher(p.match)
    source: ReadSource = "recent_unwrapped" if p.source == "recent" else p.source
    deadline = None if p.timeout_ms is None else time.monotonic() + p.timeout_ms / 1000

    async def wait() -> Result:
        burst = 0
        while True:
            if pane.key not in mux.panes:
                raise NotFound("pane", pane.id)
            changed = mux.output_signal(pane)
            read = read_result(pane, source, p.lines, "text")
            try:
                # A search on the loop always finishes; one on a thread is cut off here.
                async with asyncio.timeout(None if deadline is None
                                           else deadline - time.monotonic()):
                    line = await find_line.find(read["text"])
            except TimeoutError:
                raise WaitTimeout(message="timed out waiting for output match") from None
            if line is not None:
                return {"type": "output_matched", "pane_id": pane.id, "revision": 0,
                        "matched_line": line, "read": read}
            checked = time.monotonic()
            remaining = None if deadline is None else deadline - checked
            if remaining is not None and remaining <= 0:
                raise WaitTimeout(message="timed out waiting for output match")
            try:
                burst = await next_output(changed, checked, burst, remaining)
            except TimeoutError:
                raise WaitTimeout(message="timed out waiting for output match") from None

    call.ctx.info.pending_waits += 1
    try:
        if call.connection is None:
            return await wait()
        return await call.connection.until_gone(wait())
    finally:
        call.ctx.info.pending_waits -= 1


class ProcessInfoParams(Params):
    pane_id: str | None = None


def process_entry(pid: int) -> dict[str, Any] | None:
    """One row of ``foreground_processes``; None when the process is gone."""
    process = procfs.read_process(pid)
    if process is None:
        return None
    entry: dict[str, Any] = {"pid": pid, "name": process.comm.strip()}
    # Empty arguments (the padding left by a program that rewrote its title) are not shown.
    argv = [a for a in process.argv if a]
    if argv:
        entry.update({"argv0": argv[0], "argv": argv, "cmdline": " ".join(argv)})
    cwd = procfs.cwd(pid)
    if cwd is not None:
        entry["cwd"] = cwd
    return entry


@methods.method("pane.process_info", ProcessInfoParams)
async def pane_process_info(call: Call, p: ProcessInfoParams) -> Result:
    """The pane's shell pid and the processes of its terminal's foreground group."""
    pane = call.ctx.mux.pane(p.pane_id)
    term = pane.terminal
    info: dict[str, Any] = {"pane_id": pane.id}
    if not term.exited:
        info["shell_pid"] = term.pid
        pgid = term.foreground_pgid()
        if pgid is not None:
            info["foreground_process_group_id"] = pgid
            procs = [e for pid in procfs.group_members(pgid) if (e := process_entry(pid))]
            info["foreground_processes"] = procs
    return {"type": "pane_process_info", "process_info": info}


# -- cmux-family pane methods -----------------------------------------------------------


class PaneCreateParams(NewTerminalParams):
    direction: str = "right"
    initial_divider_position: float | None = Field(default=None, ge=0.1, le=0.9)


@methods.method("pane.create", PaneCreateParams)
async def pane_create(call: Call, p: PaneCreateParams) -> Result:
    """cmux's form of a split: a new pane with a new terminal beside the source surface
    (``surface_id``, default the focused one) on the ``direction`` side."""
    return await split_here(call, SurfaceSplitParams.model_validate(p.model_dump()))


@methods.method("pane.surfaces", Routing)
async def pane_surfaces(call: Call, p: Routing) -> Result:
    """The surfaces of a pane (default: the focused pane) in tab order."""
    mux = call.ctx.mux
    pane = pane_of(mux, Routing(pane_id=p.pane_id, workspace_id=p.workspace_id,
                                window_id=p.window_id))
    rows = [{"id": s.uuid, "ref": s.ref, "index": i, "title": surface_title(s),
             "type": s.kind, "selected": pane.selected is s,
             **({"path": s.path} if s.path is not None else {}),
             **wire.surface_agent_fields(call.ctx.agents, s)}
            for i, s in enumerate(pane.surfaces)]
    return {"type": "pane_surfaces", **cmux_pane_keys(pane), "surfaces": rows}


@methods.method("pane.last", Routing)
async def pane_last(call: Call, p: Routing) -> Result:
    """Focus the pane that had focus before the current one, in the workspace the call
    means; ``not_found`` when there is none."""
    mux = call.ctx.mux
    ws = workspace_of(mux, Routing(workspace_id=p.workspace_id, window_id=p.window_id))
    tab = ws.active_tab
    previous = mux.panes.get(tab.previous_focus) if tab and tab.previous_focus else None
    if previous is None or previous.tab is not tab:
        raise CmuxError("not_found", "No alternate pane available")
    mux.focus_pane(previous)
    return {"type": "pane", **surface_keys(previous.surface)}


class PaneBreakParams(Routing):
    title: str | None = None
    focus: bool | None = None


@methods.method("pane.break", PaneBreakParams)
async def pane_break(call: Call, p: PaneBreakParams) -> Result:
    """Move a surface (``surface_id``, else ``pane_id``'s selected one, else the focused
    one) into a new workspace at the end of its window; selected only with ``focus`` (or
    ``[cmux] focus_on_create``)."""
    mux = call.ctx.mux
    surface = surface_of(mux, p)
    pane = surfaces.break_out(mux, surface, title=trimmed(p.title),
                              focus=creation_focus(call, p.focus))
    return {"type": "pane", **surface_keys(pane.surface)}


class PaneJoinParams(Routing):
    target_pane_id: str
    focus: bool = False


@methods.method("pane.join", PaneJoinParams)
async def pane_join(call: Call, p: PaneJoinParams) -> Result:
    """Move a surface (``surface_id``, else ``pane_id``'s selected one) into
    ``target_pane_id`` as its last tab, selected there; an emptied pane closes."""
    mux = call.ctx.mux
    target = mux.pane(p.target_pane_id)
    if not (given(p.surface_id) or given(p.tab_id) or given(p.pane_id)):
        raise InvalidParams("surface_id", "give surface_id or pane_id")
    surface = surface_of(mux, p)
    if surface.pane is target:
        raise InvalidParams("target_pane_id", "the surface is already in this pane")
    surfaces.move(mux, surface, target, focus=p.focus)
    return {"type": "pane", **surface_keys(surface)}
