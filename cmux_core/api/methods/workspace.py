"""The ``workspace.*`` methods, answering both method families on one name.

Where the herdr and cmux families share a name (``workspace.list``,
``workspace.create``, ...), params are the union of both and results carry both
shapes: herdr clients read ``type`` and the ``workspace``/``workspaces`` objects,
cmux clients read the ``*_id``/``*_ref`` twins.

"""

from __future__ import annotations

import logging
import time
from typing import Any, Literal

from pydantic import Field, field_validator

from cmux_core.agents.tracker import AgentTracker
from cmux_core.api.context import Call
from cmux_core.api.dispatch import MethodTable, Result
from cmux_core.api.methods.shared.creation import (
    ExecString,
    command_argv,
    create_from_layout,
    created_result,
    creation_focus,
    resolve_cwd,
    spawning,
    terminal_started,
    trimmed,
)
from cmux_core.api.methods.shared.reports import check_source, check_tokens, check_ttl
from cmux_core.api.methods.shared.routing import window_keys, workspace_keys
from cmux_core.api.methods.shared.rows import workspace_row
from cmux_core.api.methods.shared.services import ModelServices
from cmux_core.api.methods.shared.workspace_routing import Routing as WorkspaceRouting
from cmux_core.api.methods.shared.workspace_routing import route_window, route_workspace
from cmux_core.errors import CmuxError, InvalidParams
from cmux_core.hookspecs import Params
from cmux_core.model import arrange, cmux_v2_layout, windows
from cmux_core.model.events import WorkspaceRenamed
from cmux_core.model.mux import Mux
from cmux_core.model.pane_io import launch_env
from cmux_core.model.tree import Workspace


class WorkspaceServices(ModelServices):
    """What these ``workspace.*`` handlers use."""


methods = MethodTable()


log = logging.getLogger(__name__)


PREVIEW_CHARS = 120
"""Characters of a submitted prompt echoed back in ``message_preview``."""


class WorkspaceCreateParams(Params):
    cwd: str | None = None
    working_directory: str | None = None
    label: str | None = None
    title: str | None = None
    name: str | None = None
    focus: bool | None = None
    env: dict[str, str] | None = None
    workspace_env: dict[str, str] | None = None
    initial_env: dict[str, str] | None = None
    command: list[ExecString] | ExecString | None = None
    initial_command: ExecString | None = None
    initial_input: str | None = None
    description: str | None = None
    window_id: str | None = None
    layout: dict[str, Any] | None = None


@methods.method("workspace.create", WorkspaceCreateParams)
async def workspace_create(call: Call[WorkspaceServices], p: WorkspaceCreateParams) -> Result:
    """Create a workspace with one tab and one pane, or laid out as cmux's ``layout``
    tree (then ``command``, ``initial_command`` and ``initial_env`` are ignored); focus
    only with ``focus`` (or ``[cmux] focus_on_create``)."""
    mux = call.ctx.mux
    focus = creation_focus(call.ctx.settings, p.focus)
    cwd = resolve_cwd(p.cwd, "cwd")
    wd = resolve_cwd(p.working_directory, "working_directory")
    if cwd and wd and cwd != wd:
        raise InvalidParams("working_directory", "conflicts with cwd")
    env = launch_env(p.env if p.env is not None else p.workspace_env)
    if p.layout is not None:
        window = mux.window(p.window_id) if p.window_id else None
        ws = create_from_layout(mux, p.layout, window=window, cwd=cwd or wd,
                                label=trimmed(p.label or p.title or p.name), env=env,
                                description=p.description or "", focus=focus)
        focused = mux.focused_pane_of(ws)
        if p.initial_input and focused is not None:
            focused.terminal.write(p.initial_input.encode())
        return created_result(mux, call.ctx.agents, ws)
    pane_env = launch_env(p.initial_env, "initial_env")
    command = command_argv(p.command, "command") or command_argv(p.initial_command,
                                                                 "initial_command")
    window = mux.window(p.window_id) if p.window_id else None
    with spawning("workspace_create_failed"):
        ws, _tab, pane = mux.create_workspace(
            cwd=cwd or wd, label=trimmed(p.label or p.title or p.name), env=env,
            pane_env=pane_env, command=command, focus=focus, window=window)
    if p.description:
        ws.description = p.description
    terminal_started(pane.surface, p.initial_input, p.command, p.initial_command)
    return created_result(mux, call.ctx.agents, ws)


class WorkspaceListParams(Params):
    window_id: str | None = None


@methods.method("workspace.list", WorkspaceListParams)
async def workspace_list(call: Call[WorkspaceServices], p: WorkspaceListParams) -> Result:
    """The workspaces of one window in display order: ``window_id``'s, else the active
    window's, as cmux routes a call without a window (with one window, every workspace)."""
    mux = call.ctx.mux
    window = mux.window(p.window_id) if p.window_id else mux.active_window
    rows = [workspace_row(mux, call.ctx.agents, ws) for ws in mux.workspaces()
            if ws.window is window]
    result: dict[str, Any] = {"type": "workspace_list", "workspaces": rows}
    if window is not None:
        result.update(window_keys(window))
    return result


class WorkspaceTarget(Params):
    workspace_id: str


@methods.method("workspace.get", WorkspaceTarget)
async def workspace_get(call: Call[WorkspaceServices], p: WorkspaceTarget) -> Result:
    mux = call.ctx.mux
    ws = mux.workspace(p.workspace_id)
    return {"type": "workspace_info", "workspace": workspace_row(mux, call.ctx.agents, ws)}


@methods.method("workspace.focus", WorkspaceTarget)
async def workspace_focus(call: Call[WorkspaceServices], p: WorkspaceTarget) -> Result:
    """Make the workspace the active one (and its window the active window)."""
    mux = call.ctx.mux
    ws = mux.workspace(p.workspace_id)
    mux.focus_workspace(ws)
    return {"type": "workspace_info", "workspace": workspace_row(mux, call.ctx.agents, ws),
            **workspace_keys(ws)}


class WindowScopedTarget(WorkspaceTarget):
    window_id: str | None = None


@methods.method("workspace.select", WindowScopedTarget)
async def workspace_select(call: Call[WorkspaceServices], p: WindowScopedTarget) -> Result:
    """cmux-family name of ``workspace.focus``; with ``window_id``, the workspace must
    be in that window."""
    mux = call.ctx.mux
    ws = mux.workspace(p.workspace_id)
    if p.window_id is not None and ws.window is not mux.window(p.window_id):
        raise CmuxError("workspace_not_found",
                        f"workspace {p.workspace_id} is not in window {p.window_id}")
    return await workspace_focus(call, p)


@methods.method("workspace.current", WorkspaceRouting)
async def workspace_current(call: Call[WorkspaceServices], p: WorkspaceRouting) -> Result:
    """The selected workspace of ``window_id``, else of the window holding
    ``workspace_id``, else of the active window."""
    mux = call.ctx.mux
    ws = route_window(mux, p).selected
    if ws is None:
        raise CmuxError("not_found", "No workspace selected")
    return {"type": "workspace_info", "workspace": workspace_row(mux, call.ctx.agents, ws),
            **workspace_keys(ws)}


class WorkspaceRenameParams(Params):
    workspace_id: str
    label: str | None = None
    title: str | None = None

    @field_validator("label", "title")
    @classmethod
    def _strip(cls, v: str | None) -> str | None:
        return v.strip() if v is not None else None


@methods.method("workspace.rename", WorkspaceRenameParams)
async def workspace_rename(call: Call[WorkspaceServices], p: WorkspaceRenameParams) -> Result:
    """Set the label (``label`` or cmux ``title``); an empty label restores the automatic one."""
    mux = call.ctx.mux
    if p.label is None and p.title is None:
        raise InvalidParams("label", "field required")
    ws = mux.workspace(p.workspace_id)
    mux.rename_workspace(ws, p.label if p.label is not None else p.title)
    return {"type": "workspace_info", "workspace": workspace_row(mux, call.ctx.agents, ws),
            "title": mux.workspace_label(ws), **workspace_keys(ws)}


@methods.method("workspace.close", WorkspaceTarget)
async def workspace_close(call: Call[WorkspaceServices], p: WorkspaceTarget) -> Result:
    """Close the workspace and every pane in it."""
    mux = call.ctx.mux
    ws = mux.workspace(p.workspace_id)
    keys = workspace_keys(ws)
    if ws.pinned:
        raise CmuxError("protected", "Workspace is pinned; unpin it first",
                        {**keys, "pinned": True})
    mux.close_workspace(ws)
    return {"type": "ok", **keys}


def _selected_result(mux: Mux, agents: AgentTracker, ws: Workspace) -> Result:
    return {"type": "workspace_info", "workspace": workspace_row(mux, agents, ws),
            **workspace_keys(ws)}


@methods.method("workspace.next", WorkspaceRouting)
async def workspace_next(call: Call[WorkspaceServices], p: WorkspaceRouting) -> Result:
    """Select the workspace after the selected one in the routed window (wrapping)."""
    mux = call.ctx.mux
    ws = windows.step(mux, route_window(mux, p), "next")
    return _selected_result(mux, call.ctx.agents, ws)


@methods.method("workspace.previous", WorkspaceRouting)
async def workspace_previous(call: Call[WorkspaceServices], p: WorkspaceRouting) -> Result:
    """Select the workspace before the selected one in the routed window (wrapping)."""
    mux = call.ctx.mux
    ws = windows.step(mux, route_window(mux, p), "previous")
    return _selected_result(mux, call.ctx.agents, ws)


@methods.method("workspace.last", WorkspaceRouting)
async def workspace_last(call: Call[WorkspaceServices], p: WorkspaceRouting) -> Result:
    """Select the workspace that was selected before the current one in that window."""
    mux = call.ctx.mux
    ws = windows.select_last(mux, route_window(mux, p))
    return _selected_result(mux, call.ctx.agents, ws)


class MoveToWindowParams(Params):
    workspace_id: str
    window_id: str
    focus: bool = False


@methods.method("workspace.move_to_window", MoveToWindowParams)
async def workspace_move_to_window(call: Call[WorkspaceServices], p: MoveToWindowParams) -> Result:
    """Move the workspace to the end of another window's list; surfaces keep their ids.
    Selected (and its window made active) only with ``focus``."""
    mux = call.ctx.mux
    ws = mux.workspace(p.workspace_id)
    dest = mux.window(p.window_id)
    moved = windows.move_to_window(mux, ws, dest, focus=p.focus)
    return {"type": "workspace_info", "workspace": workspace_row(mux, call.ctx.agents, ws),
            **workspace_keys(ws), "moved": moved}


class ReorderParams(WorkspaceRouting):
    workspace_id: str | None = None
    index: int | None = None
    before_workspace_id: str | None = None
    after_workspace_id: str | None = None
    dry_run: bool = False


def _plan(old: list[Workspace], new: list[Workspace]) -> list[dict[str, Any]]:
    """The workspaces whose index changes, with their old and new index."""
    return [{"workspace_id": ws.uuid, "workspace_ref": ws.ref, "from_index": old.index(ws),
             "to_index": i} for i, ws in enumerate(new) if old.index(ws) != i]


def _same_window(mux: Mux, anchor_text: str, field: str, ws: Workspace) -> Workspace:
    anchor = mux.workspace(anchor_text)
    if anchor.window is not ws.window:
        raise InvalidParams(field, "names a workspace of another window")
    if anchor is ws:
        raise InvalidParams(field, "names the workspace being moved")
    return anchor


@methods.method("workspace.reorder", ReorderParams)
async def workspace_reorder(call: Call[WorkspaceServices], p: ReorderParams) -> Result:
    """Move one workspace within its window to ``index`` (0-based, clamped to the list),
    or just before or after another; ``dry_run`` answers the plan without moving."""
    mux = call.ctx.mux
    if p.workspace_id is None:
        raise InvalidParams("workspace_id", "Missing or invalid workspace_id")
    ws = mux.workspace(p.workspace_id)
    if p.window_id and ws.window is not mux.window(p.window_id):
        raise CmuxError("workspace_not_found",
                        f"workspace {p.workspace_id} is not in window {p.window_id}")
    targets = [p.index is not None, p.before_workspace_id is not None,
               p.after_workspace_id is not None]
    if sum(targets) != 1:
        raise InvalidParams("index", "give exactly one of index, before_workspace_id and "
                            "after_workspace_id")
    order = ws.window.workspaces
    rest = [w for w in order if w is not ws]
    if p.index is not None:
        if p.index < 0:
            raise InvalidParams("index", "must be 0 or more")
        to = min(p.index, len(rest))
    elif p.before_workspace_id is not None:
        to = rest.index(_same_window(mux, p.before_workspace_id, "before_workspace_id", ws))
    else:
        assert p.after_workspace_id is not None
        to = rest.index(_same_window(mux, p.after_workspace_id, "after_workspace_id", ws)) + 1
    old = list(order)
    new = [*rest[:to], ws, *rest[to:]]
    frm = old.index(ws)
    events: list[str] = []
    if not p.dry_run and arrange.move_workspace(mux, ws, to + 1 if to > frm else to):
        events.append("workspace_moved")
    return {"type": "workspace_reorder", **workspace_keys(ws), "from_index": frm,
            "to_index": to, "index": to, "dry_run": p.dry_run, "plan": _plan(old, new),
            "events": events}


class ReorderManyParams(Params):
    workspace_ids: list[str] | str | None = None
    order: str | None = None
    window_id: str | None = None
    dry_run: bool = False


@methods.method("workspace.reorder_many", ReorderManyParams)
async def workspace_reorder_many(call: Call[WorkspaceServices], p: ReorderManyParams) -> Result:
    """Put the listed workspaces (``workspace_ids``, or ``order`` as ``"a,b,c"``) first
    in their window, in the order given; the others follow in their present order."""
    mux = call.ctx.mux
    raw = p.workspace_ids if p.workspace_ids is not None else p.order
    field = "workspace_ids" if p.workspace_ids is not None else "order"
    names = raw.split(",") if isinstance(raw, str) else list(raw or [])
    names = [n.strip() for n in names if n.strip()]
    if not names:
        raise InvalidParams(field, "list at least one workspace")
    block = [mux.workspace(n) for n in names]
    if len({id(ws) for ws in block}) != len(block):
        raise InvalidParams(field, "a workspace is listed twice")
    window = mux.window(p.window_id) if p.window_id else block[0].window
    if any(ws.window is not window for ws in block):
        raise InvalidParams(field, "the workspaces must all be in one window")
    old = list(window.workspaces)
    rest = [ws for ws in old if all(ws is not b for b in block)]
    new = [*block, *rest]
    events: list[str] = []
    before = rest[0] if rest else None
    if not p.dry_run and arrange.move_workspace_block(mux, block, before):
        events.append("workspace_reordered")
    return {"type": "workspace_reorder", **window_keys(window), "dry_run": p.dry_run,
            "plan": _plan(old, new), "events": events, "workspace_ids": [ws.uuid for ws in new]}


WorkspaceAction = Literal[
    "pin", "unpin", "rename", "clear_name", "set_description", "clear_description",
    "set_color", "clear_color", "move_up", "move_down", "move_top", "move_bottom",
    "close_others", "mark_read", "mark_unread"]


class ActionParams(WorkspaceRouting):
    action: str
    title: str | None = None
    description: str | None = None
    color: str | None = None


def _action_name(text: str) -> str:
    return text.strip().lower().replace("-", "_")


@methods.method("workspace.action", ActionParams)
async def workspace_action(call: Call[WorkspaceServices], p: ActionParams) -> Result:
    """One of the sidebar's workspace actions (``pin``, ``rename``, ``move_top``, ...)
    on ``workspace_id`` (default: the routed window's selected workspace)."""
    mux = call.ctx.mux
    ws = route_workspace(mux, p)
    action = _action_name(p.action)
    extra: dict[str, Any] = {}
    order = ws.window.workspaces
    if action in ("mark_read", "mark_unread"):
        raise CmuxError("not_supported", f"{action}: a workspace's read state is the cmux "
                        "app's sidebar badge, which this headless server does not keep")
    if action in ("pin", "unpin"):
        ws.pinned = action == "pin"
    elif action in ("rename", "clear_name"):
        title = trimmed(p.title) if action == "rename" else None
        if action == "rename" and title is None:
            raise InvalidParams("title", "rename needs a non-empty title")
        mux.rename_workspace(ws, title)
    elif action in ("set_description", "clear_description"):
        ws.description = (p.description or "").strip() if action == "set_description" else ""
    elif action in ("set_color", "clear_color"):
        color = trimmed(p.color) if action == "set_color" else None
        if action == "set_color" and color is None:
            raise InvalidParams("color", "set_color needs a color")
        ws.color = color
    elif action in ("move_up", "move_down", "move_top", "move_bottom"):
        at = order.index(ws)
        to = {"move_up": max(at - 1, 0), "move_down": min(at + 1, len(order) - 1),
              "move_top": 0, "move_bottom": len(order) - 1}[action]
        arrange.move_workspace(mux, ws, to + 1 if to > at else to)
    elif action == "close_others":
        others = [w for w in order if w is not ws and not w.pinned]
        for other in others:
            mux.close_workspace(other)
        extra["closed"] = len(others)
    else:
        raise InvalidParams("action", f"unknown workspace action {p.action!r}")
    return {"type": "workspace_info", "workspace": workspace_row(mux, call.ctx.agents, ws),
            **workspace_keys(ws), "action": action, "pinned": ws.pinned,
            "title": mux.workspace_label(ws), **extra}


@methods.method("workspace.env", WorkspaceRouting)
async def workspace_env(call: Call[WorkspaceServices], p: WorkspaceRouting) -> Result:
    """The environment the workspace adds to every terminal started in it."""
    mux = call.ctx.mux
    ws = route_workspace(mux, p)
    return {"type": "workspace_env", **workspace_keys(ws), "env": dict(ws.env)}


class EqualizeParams(WorkspaceRouting):
    orientation: Literal["horizontal", "vertical"] | None = None


@methods.method("workspace.equalize_splits", EqualizeParams)
async def workspace_equalize_splits(call: Call[WorkspaceServices], p: EqualizeParams) -> Result:
    """Give every split of the workspace (of one ``orientation``, when given) an even
    share."""
    mux = call.ctx.mux
    ws = route_workspace(mux, p)
    orientation = cmux_v2_layout.DIRECTIONS[p.orientation] if p.orientation else None
    changed = windows.equalize(mux, ws, orientation)
    return {"type": "workspace_equalized", **workspace_keys(ws), "equalized": changed}


class AutoTitleParams(WorkspaceRouting):
    surface_id: str | None = None
    title: str | None = None
    probe: bool = False
    failure: str | None = None
    agent: str | None = None


@methods.method("workspace.set_auto_title", AutoTitleParams)
async def workspace_set_auto_title(call: Call[WorkspaceServices], p: AutoTitleParams) -> Result:
    """An agent hook's proposed workspace title: shown unless the workspace was named by
    hand. ``probe`` asks whether a title would be used; ``failure`` records (logs) why
    the hook could not make one."""
    mux = call.ctx.mux
    ws = (mux.surface(p.surface_id).pane.tab.workspace if p.surface_id
          else route_workspace(mux, p))
    user_owned = ws.label is not None
    if p.probe:
        return {"type": "auto_title", **workspace_keys(ws), "enabled": True,
                "summarizer_agent": None, "workspace_user_owned": user_owned}
    if p.failure is not None:
        log.info("auto title for %s failed: %s (agent %s)", ws.id, p.failure, p.agent,
                 extra={"cmux_workspace": ws.id})
        return {"type": "auto_title", **workspace_keys(ws), "recorded": True,
                "enabled": True}
    title = trimmed(p.title)
    if title is None:
        raise InvalidParams("title", "Missing or invalid title")
    applied = not user_owned and ws.auto_title != title
    if applied:
        ws.auto_title = title
        mux.events.publish(WorkspaceRenamed(ws))
    return {"type": "auto_title", **workspace_keys(ws), "enabled": True,
            "workspace_applied": not user_owned, "surface_applied": False,
            "title": mux.workspace_label(ws)}


class PromptSubmitParams(WorkspaceRouting):
    message: str | None = None
    prompt: str | None = None
    text: str | None = None
    body: str | None = None


@methods.method("workspace.prompt_submit", PromptSubmitParams)
async def workspace_prompt_submit(call: Call[WorkspaceServices], p: PromptSubmitParams) -> Result:
    """Record the prompt last submitted in the workspace (``latest_submitted_message``
    and ``latest_submitted_at`` of its row); the order is left alone."""
    mux = call.ctx.mux
    ws = route_workspace(mux, p)
    message = next((m for m in (p.message, p.prompt, p.text, p.body) if m is not None), None)
    if message is None or not message.strip():
        raise InvalidParams("message", "Missing or invalid message")
    ws.last_prompt = message
    ws.last_prompt_at = time.time()
    return {"type": "prompt_submitted", **workspace_keys(ws),
            "i_message_mode_enabled": False, "message_recorded": True,
            "message_preview": message.strip()[:PREVIEW_CHARS], "reordered": False,
            "index": ws.window.workspaces.index(ws)}


class WorkspaceMoveParams(Params):
    workspace_id: str
    insert_index: int = Field(ge=0)


def _workspace_list(mux: Mux, agents: AgentTracker) -> Result:
    return {"type": "workspace_list",
            "workspaces": [workspace_row(mux, agents, ws) for ws in mux.workspaces()]}


@methods.method("workspace.move", WorkspaceMoveParams)
async def workspace_move(call: Call[WorkspaceServices], p: WorkspaceMoveParams) -> Result:
    """Move a workspace to gap ``insert_index`` (0..number of workspaces) of its window."""
    mux = call.ctx.mux
    arrange.move_workspace(mux, mux.workspace(p.workspace_id), p.insert_index)
    return _workspace_list(mux, call.ctx.agents)


class MoveBlockParams(Params):
    workspace_ids: list[str]
    before_workspace_id: str | None = None


@methods.method("workspace.move_block", MoveBlockParams)
async def workspace_move_block(call: Call[WorkspaceServices], p: MoveBlockParams) -> Result:
    """Move several workspaces, in the given order, before another (or to the end)."""
    mux = call.ctx.mux
    block = [mux.workspace(text) for text in p.workspace_ids]
    before = mux.workspace(p.before_workspace_id) if p.before_workspace_id else None
    arrange.move_workspace_block(mux, block, before)
    return _workspace_list(mux, call.ctx.agents)


class WorkspaceMetadataParams(Params):
    workspace_id: str
    source: str
    tokens: dict[str, Any] | None = None
    seq: int | None = Field(default=None, ge=0)
    ttl_ms: int | None = None


@methods.method("workspace.report_metadata", WorkspaceMetadataParams)
async def workspace_report_metadata(call: Call[WorkspaceServices],
                                    p: WorkspaceMetadataParams) -> Result:
    """Set or clear a workspace's tokens (shown in WorkspaceInfo ``tokens``)."""
    tracker = call.ctx.agents
    ws = call.ctx.mux.workspace(p.workspace_id)
    source = check_source(p.source)
    ttl_s = check_ttl(p.ttl_ms)
    if not p.tokens:
        raise CmuxError("invalid_metadata_tokens", "missing token to set or clear")
    tokens = check_tokens(p.tokens)
    tracker.report_workspace_metadata(ws, source, tokens, seq=p.seq, ttl_s=ttl_s)
    return {"type": "ok"}
