"""The tools: what an MCP client sees, does and waits for, each a cmux call or two.

Every tool is a :class:`Tool`: its params model (the input schema), its output model, whether
it only reads, and the coroutine that runs it against :class:`~cmux_mcp.bridge.Cmux`. The
readers (``list_*``, ``read_pane``, ``explain_agent`` and the ``wait_*`` tools) change
nothing; the others type into panes or run programs. With a confining workspace every tool
sees and touches only that workspace.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import anyio
from pydantic import BaseModel, ConfigDict, Field

from cmux_core.errors import CmuxError
from cmux_mcp import shapes
from cmux_mcp.bridge import Cmux, Row

Status = Literal["idle", "working", "blocked", "done", "unknown"]
Source = Literal["visible", "recent"]

MAX_WAIT_S = 3600.0
TURN_END: list[Status] = ["idle", "done", "blocked"]
"""The statuses that end an agent's turn."""
SCREEN_LINES = 40
"""How many lines a wait returns with its answer, unless told."""


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoParams(Params):
    pass


class PaneTarget(Params):
    pane_id: str = Field(description="a pane id from list_panes (w1:p2)")


class AgentTarget(Params):
    target: str = Field(description="an agent's name, its pane id, or its kind (claude)")


class ListPanesParams(Params):
    workspace_id: str | None = Field(default=None, description="only this workspace's panes")


class ReadPaneParams(PaneTarget):
    source: Source = Field(default="visible", description="visible: the screen as shown; recent: "
                           "the last lines, scrollback included")
    lines: int = Field(default=80, ge=1, le=1000, description="at most this many lines (recent)")


class OpenPaneParams(Params):
    command: str | None = Field(default=None, description="a shell command line the pane runs "
                                "(default: an interactive shell)")
    cwd: str | None = Field(default=None, description="working directory (default: that of the "
                            "pane it splits)")
    split_from: str | None = Field(default=None, description="the pane to split (default: the "
                                   "focused pane of the workspace)")
    direction: Literal["right", "down"] = "right"
    label: str | None = Field(default=None, description="a label shown for the pane")


class TypeTextParams(PaneTarget):
    text: str = Field(description="typed as is (pasted when the program asked for pastes)")
    submit: bool = Field(default=False, description="press Enter after the text")


class PressKeysParams(PaneTarget):
    keys: list[str] = Field(min_length=1, description="combos such as enter, ctrl+c, esc, "
                            "up, shift+tab, f5, or single characters")


class StartAgentParams(Params):
    name: str = Field(description="a new agent name: ^[a-z][a-z0-9_-]{0,31}$")
    command: list[str] = Field(min_length=1, description="the agent's argv, e.g. "
                               "[\"claude\"] or [\"codex\", \"--model\", \"o3\"]")
    cwd: str | None = None
    split: Literal["right", "down"] = "right"


class PromptAgentParams(AgentTarget):
    text: str = Field(description="the prompt; Enter is pressed after it")
    wait: bool = Field(default=False, description="hold the call until the turn the prompt starts "
                       "has ended (idle, done or blocked) and return the end of the screen")
    timeout_s: float = Field(default=600.0, gt=0, le=MAX_WAIT_S, description="with wait: how long "
                             "the turn may take")
    lines: int = Field(default=SCREEN_LINES, ge=1, le=1000, description="with wait: lines of its "
                       "screen to return")


class WaitOutputParams(PaneTarget):
    regex: str = Field(description="a line matching this (RE2 / Rust regex syntax) ends the "
                       "wait")
    source: Source = "recent"
    timeout_s: float = Field(default=60.0, gt=0, le=MAX_WAIT_S)


class WaitAgentParams(AgentTarget):
    until: list[Status] = Field(default_factory=lambda: list(TURN_END),
                                min_length=1, description="statuses that end the wait")
    timeout_s: float = Field(default=600.0, gt=0, le=MAX_WAIT_S)
    lines: int = Field(default=SCREEN_LINES, ge=1, le=1000, description="lines of its screen to "
                       "return")


class WaitBlockedParams(Params):
    timeout_s: float = Field(default=600.0, gt=0, le=MAX_WAIT_S)
    lines: int = Field(default=SCREEN_LINES, ge=1, le=1000, description="lines of its screen to "
                       "return")


Run = Callable[[Cmux, Any], Awaitable[BaseModel]]
R = TypeVar("R", bound=Run)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    params: type[Params]
    output: type[BaseModel]
    run: Run
    reads_only: bool


TOOLS: list[Tool] = []
"""Every tool, in the order they are listed (the order they are defined below)."""


def tool(params: type[Params], output: type[BaseModel], *, reads_only: bool
         ) -> Callable[[R], R]:
    """Add the decorated coroutine to :data:`TOOLS` under its name; its docstring, on one
    line, is the tool's description."""
    def register(run: R) -> R:
        description = " ".join((inspect.getdoc(run) or "").split())
        TOOLS.append(Tool(run.__name__, description, params, output, run, reads_only))
        return run
    return register


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


async def _read(cmux: Cmux, pane_id: str, source: str = "recent", lines: int = SCREEN_LINES
                ) -> shapes.Screen:
    read = (await cmux.call("pane.read", {"pane_id": pane_id, "source": source,
                                          "lines": lines}))["read"]
    return shapes.screen(read)


async def _agents(cmux: Cmux) -> list[Row]:
    return [a for a in (await cmux.call("agent.list"))["agents"] if await cmux.allows(a)]


# -- see ----------------------------------------------------------------------------------


@tool(NoParams, shapes.WorkspaceList, reads_only=True)
async def list_workspaces(cmux: Cmux, _: NoParams) -> shapes.WorkspaceList:
    """List the workspaces: label, status, pane count, cwd."""
    rows = (await cmux.call("workspace.list"))["workspaces"]
    return shapes.WorkspaceList(workspaces=[shapes.workspace(r) for r in rows
                                            if await cmux.allows(r)])


@tool(ListPanesParams, shapes.PaneList, reads_only=True)
async def list_panes(cmux: Cmux, params: ListPanesParams) -> shapes.PaneList:
    """List the panes with what runs in them: agent and its status (idle, working, blocked,
    done), agent name, cwd, time of the last change, exit code."""
    wanted = params.workspace_id
    if cmux.workspace is not None:
        try:
            wanted = await cmux.workspace_id()
        except CmuxError as exc:
            if exc.code != "workspace_not_found":
                raise
            return shapes.PaneList(panes=[])
    workspaces = [wanted] if wanted else [
        w["workspace_id"] for w in (await cmux.call("workspace.list"))["workspaces"]]
    panes: list[shapes.Pane] = []
    names = {a["pane_id"]: a.get("name") for a in await _agents(cmux)}
    for workspace_id in workspaces:
        for row in (await cmux.call("pane.list", {"workspace_id": workspace_id}))["panes"]:
            panes.append(shapes.pane({**row, "name": names.get(row["pane_id"])}))
    return shapes.PaneList(panes=panes)


@tool(NoParams, shapes.AgentList, reads_only=True)
async def list_agents(cmux: Cmux, _: NoParams) -> shapes.AgentList:
    """List the agents (Claude Code, Codex, ... in any pane) with status, name, cwd and time
    of the last change."""
    return shapes.AgentList(agents=[shapes.agent(a) for a in await _agents(cmux)])


@tool(ReadPaneParams, shapes.Screen, reads_only=True)
async def read_pane(cmux: Cmux, params: ReadPaneParams) -> shapes.Screen:
    """Read a pane's text: the visible screen, or the recent N lines."""
    await cmux.check_pane(params.pane_id)
    return await _read(cmux, params.pane_id, params.source, params.lines)


@tool(AgentTarget, shapes.Explanation, reads_only=True)
async def explain_agent(cmux: Cmux, params: AgentTarget) -> shapes.Explanation:
    """Explain why an agent has its status: which screen rule matched."""
    await cmux.check_agent(params.target)
    result = await cmux.call("agent.explain", {"target": params.target})
    return shapes.explanation(result["explain"])


# -- act ----------------------------------------------------------------------------------


@tool(OpenPaneParams, shapes.PaneResult, reads_only=False)
async def open_pane(cmux: Cmux, params: OpenPaneParams) -> shapes.PaneResult:
    """Open a pane (a split) running a shell command or a shell; returns the pane. Read it
    back with read_pane or wait_for_output."""
    request: dict[str, Any] = {"direction": params.direction}
    if params.command is not None:
        request["command"] = ["/bin/sh", "-c", params.command]
    if params.cwd is not None:
        request["cwd"] = params.cwd
    if params.split_from is not None:
        await cmux.check_pane(params.split_from)
        request["target_pane_id"] = params.split_from
    elif cmux.workspace is not None:
        request["workspace_id"] = await cmux.workspace_id(create=True)
    pane = (await cmux.call("pane.split", request))["pane"]
    if params.label:
        pane = (await cmux.call("pane.rename", {"pane_id": pane["pane_id"],
                                                "label": params.label}))["pane"]
    return shapes.PaneResult(pane=shapes.pane(pane))


@tool(TypeTextParams, shapes.Done, reads_only=False)
async def type_text(cmux: Cmux, params: TypeTextParams) -> shapes.Done:
    """Type text into a pane, with submit=true pressing Enter after it."""
    await cmux.check_pane(params.pane_id)
    await cmux.call("pane.send_input", {"pane_id": params.pane_id, "text": params.text,
                                        "keys": ["enter"] if params.submit else []})
    return shapes.Done()


@tool(PressKeysParams, shapes.Done, reads_only=False)
async def press_keys(cmux: Cmux, params: PressKeysParams) -> shapes.Done:
    """Press keys in a pane: enter, ctrl+c, esc, up, tab, y, ..."""
    await cmux.check_pane(params.pane_id)
    await cmux.call("pane.send_keys", {"pane_id": params.pane_id, "keys": params.keys})
    return shapes.Done()


@tool(PaneTarget, shapes.Done, reads_only=False)
async def close_pane(cmux: Cmux, params: PaneTarget) -> shapes.Done:
    """Close a pane; its processes get SIGHUP."""
    await cmux.check_pane(params.pane_id)
    await cmux.call("pane.close", {"pane_id": params.pane_id})
    return shapes.Done()


@tool(StartAgentParams, shapes.AgentResult, reads_only=False)
async def start_agent(cmux: Cmux, params: StartAgentParams) -> shapes.AgentResult:
    """Start an agent (an argv such as ["claude"]) in a new pane under a name; prompt_agent
    may follow at once (it waits for the agent to be ready)."""
    request: dict[str, Any] = {"name": params.name, "argv": params.command,
                               "split": params.split}
    if params.cwd is not None:
        request["cwd"] = params.cwd
    if cmux.workspace is not None:
        request["workspace_id"] = await cmux.workspace_id(create=True)
    started = await cmux.call("agent.start", request)
    return shapes.AgentResult(agent=shapes.agent(started["agent"]))


@tool(PromptAgentParams, shapes.Prompted, reads_only=False)
async def prompt_agent(cmux: Cmux, params: PromptAgentParams) -> shapes.Prompted:
    """Send an agent a prompt and press Enter; returns the status it led to, or with
    wait=true the end of the turn and its screen (the answer)."""
    # Without ``wait`` the answer comes once the prompt was taken, with the status it led
    # to; with ``wait``, cmux first waits for the prompt to change the agent's state (so a
    # turn that has not begun yet is not taken for one that ended), then for the turn's end.
    await cmux.check_agent(params.target)
    request: dict[str, Any] = {"target": params.target, "text": params.text}
    if not params.wait:
        prompted = await cmux.call("agent.prompt", request)
        return shapes.Prompted(agent=shapes.agent(prompted["agent"]))
    request["wait"] = {"until": TURN_END, "timeout_ms": _ms(params.timeout_s)}
    prompted = await cmux.call("agent.prompt", request, wait_s=params.timeout_s)
    agent = prompted["agent"]
    return shapes.Prompted(agent=shapes.agent(agent),
                           screen=await _read(cmux, agent["pane_id"], lines=params.lines))


# -- wait ---------------------------------------------------------------------------------


@tool(WaitOutputParams, shapes.OutputMatch, reads_only=True)
async def wait_for_output(cmux: Cmux, params: WaitOutputParams) -> shapes.OutputMatch:
    """Wait until a line of a pane's text matches a regex; returns the line and the text."""
    await cmux.check_pane(params.pane_id)
    result = await cmux.call("pane.wait_for_output", {
        "pane_id": params.pane_id, "source": params.source,
        "match": {"type": "regex", "value": params.regex},
        "timeout_ms": _ms(params.timeout_s)}, wait_s=params.timeout_s)
    return shapes.OutputMatch(pane_id=params.pane_id, matched_line=result["matched_line"],
                              screen=shapes.screen(result["read"]))


@tool(WaitAgentParams, shapes.AgentTurn, reads_only=True)
async def wait_for_agent(cmux: Cmux, params: WaitAgentParams) -> shapes.AgentTurn:
    """Wait until an agent's status is idle, done or blocked (or one in until), at once if it
    already is; returns the agent and the end of its screen. Right after a prompt use
    prompt_agent with wait=true instead."""
    await cmux.check_agent(params.target)
    waited = await cmux.call("agent.wait", {
        "target": params.target, "until": params.until,
        "timeout_ms": _ms(params.timeout_s)}, wait_s=params.timeout_s)
    agent = waited["agent"]
    return shapes.AgentTurn(agent=shapes.agent(agent),
                            screen=await _read(cmux, agent["pane_id"], lines=params.lines))


STATUS_EVENTS = [{"type": "pane.agent_status_changed"}, {"type": "surface.agent_status_changed"}]


async def _first_blocked(cmux: Cmux) -> Row:
    """The first agent (of the workspace) that is, or becomes, ``blocked``. The status
    events are subscribed to before the agents are listed, so an agent that blocks in
    between is not missed."""
    async with cmux.lines("events.subscribe", {"subscriptions": STATUS_EVENTS}) as events:
        for row in await _agents(cmux):
            if row.get("agent_status") == "blocked":
                return row
        async for event in events:
            data = event.get("data") or {}
            if data.get("agent_status") == "blocked" and await cmux.allows(data):
                # The terminal names the agent of a pane's background tab too.
                target = data.get("terminal_id") or data["pane_id"]
                return dict((await cmux.call("agent.get", {"target": target}))["agent"])
    raise CmuxError("server_unavailable", "the cmux server ended the event stream")


@tool(WaitBlockedParams, shapes.AgentTurn, reads_only=True)
async def wait_for_blocked(cmux: Cmux, params: WaitBlockedParams) -> shapes.AgentTurn:
    """Wait until any agent is blocked (asking for a permission or an answer); returns which
    one and its screen."""
    try:
        with anyio.fail_after(params.timeout_s):
            agent = await _first_blocked(cmux)
    except TimeoutError:
        raise CmuxError("timeout", f"no agent was blocked within {params.timeout_s:g} s"
                        ) from None
    return shapes.AgentTurn(agent=shapes.agent(agent),
                            screen=await _read(cmux, agent["pane_id"], lines=params.lines))
