"""Workspace and tab methods, answering both method families on one name.

Where the herdr and cmux families share a name (``workspace.list``,
``workspace.create``, ...), params are the union of both and results carry both
shapes: herdr clients read ``type`` and the ``workspace``/``workspaces`` objects,
cmux clients read the ``*_id``/``*_ref`` twins.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, field_validator

from cmux_core.agents.tracker import AgentTracker
from cmux_core.api import wire
from cmux_core.api.context import Call
from cmux_core.api.dispatch import MethodTable, Result
from cmux_core.errors import CmuxError, InvalidParams
from cmux_core.hookspecs import Params
from cmux_core.model.mux import Mux, spawn_error
from cmux_core.model.tree import Workspace
from cmux_core.terminal.process import validate_env

methods = MethodTable()


def workspace_row(mux: Mux, agents: AgentTracker, ws: Workspace) -> dict[str, Any]:
    """A workspace as both families list it."""
    info = wire.workspace_info(mux, agents, ws)
    info.update({
        "id": ws.uuid,
        "ref": ws.ref,
        "index": ws.window.workspaces.index(ws),
        "title": info["label"],
        "description": ws.description,
        "selected": ws.window.selected is ws,
        "pinned": False,
        "current_directory": mux._workspace_cwd(ws),
    })
    return info


def window_keys(ws: Workspace) -> dict[str, Any]:
    return {"window_id": ws.window.uuid, "window_ref": ws.window.ref}


def workspace_keys(ws: Workspace) -> dict[str, Any]:
    return {"workspace_id": ws.uuid, "workspace_ref": ws.ref, **window_keys(ws)}


def resolve_cwd(value: str | None, field: str) -> str | None:
    """Expand ``~``; a path that is not a directory, or cannot be looked up (a NUL, a name
    over the filesystem's limits, a parent that may not be searched), is invalid_params
    naming ``field``."""
    if value is None or not value.strip():
        return None
    if "\0" in value:
        raise InvalidParams(field, "must not contain NUL")
    path = Path(value.strip()).expanduser()
    if not path.is_absolute():
        path = Path.cwd() / path
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InvalidParams(field, f"directory {value} does not exist") from None
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InvalidParams(field, f"cannot use directory {value}: {reason}") from None
    if not stat.S_ISDIR(mode):
        raise InvalidParams(field, f"{value} is not a directory")
    return str(path)


def _exec_string(value: str) -> str:
    if "\0" in value:
        raise ValueError("must not contain NUL")
    return value


ExecString = Annotated[str, AfterValidator(_exec_string)]
"""A params string that reaches ``exec`` (a command or one of its arguments): no NUL."""


def command_argv(value: list[str] | str | None, field: str) -> list[str] | None:
    """An argv list, or a command string run by ``sh -c``."""
    if value is None:
        return None
    if isinstance(value, str):
        if not value.strip():
            return None
        return ["/bin/sh", "-c", value]
    if not value or not value[0]:
        raise InvalidParams(field, "must be a non-empty argv list")
    return value


def trimmed(value: str | None) -> str | None:
    return value.strip() or None if value is not None else None


# -- workspaces --------------------------------------------------------------------


class Empty(Params):
    pass


class WorkspaceCreateParams(Params):
    cwd: str | None = None
    working_directory: str | None = None
    label: str | None = None
    title: str | None = None
    name: str | None = None
    focus: bool = False
    env: dict[str, str] | None = None
    workspace_env: dict[str, str] | None = None
    initial_env: dict[str, str] | None = None
    command: list[ExecString] | ExecString | None = None
    initial_command: ExecString | None = None
    initial_input: str | None = None
    description: str | None = None
    window_id: str | None = None


@methods.method("workspace.create", WorkspaceCreateParams)
async def workspace_create(call: Call, p: WorkspaceCreateParams) -> Result:
    """Create a workspace with one tab and one pane; focus only with ``focus``."""
    mux = call.ctx.mux
    cwd = resolve_cwd(p.cwd, "cwd")
    wd = resolve_cwd(p.working_directory, "working_directory")
    if cwd and wd and cwd != wd:
        raise InvalidParams("working_directory", "conflicts with cwd")
    env = validate_env(p.env if p.env is not None else p.workspace_env)
    pane_env = validate_env(p.initial_env, "initial_env")
    command = command_argv(p.command, "command") or command_argv(p.initial_command,
                                                                 "initial_command")
    window = mux.window(p.window_id) if p.window_id else None
    try:
        ws, tab, pane = mux.create_workspace(
            cwd=cwd or wd, label=trimmed(p.label or p.title or p.name), env=env,
            pane_env=pane_env, command=command, focus=p.focus, window=window)
    except CmuxError as exc:
        raise spawn_error(exc, "workspace_create_failed") from None
    if p.description:
        ws.description = p.description
    if p.initial_input:
        pane.terminal.write(p.initial_input.encode())
    agents = call.ctx.agents
    return {"type": "workspace_created", "workspace": wire.workspace_info(mux, agents, ws),
            "tab": wire.tab_info(mux, agents, tab), "root_pane": wire.pane_info(mux, agents, pane),
            **workspace_keys(ws),
            "pane_id": pane.key, "pane_ref": pane.ref,
            "surface_id": pane.surface.uuid, "surface_ref": pane.surface.ref}


class WorkspaceListParams(Params):
    window_id: str | None = None


@methods.method("workspace.list", WorkspaceListParams)
async def workspace_list(call: Call, p: WorkspaceListParams) -> Result:
    """Every workspace in display order (one window unless ``window_id`` picks another)."""
    mux = call.ctx.mux
    rows = [workspace_row(mux, call.ctx.agents, ws) for ws in mux.workspaces()
            if p.window_id is None or ws.window is mux.window(p.window_id)]
    result: dict[str, Any] = {"type": "workspace_list", "workspaces": rows}
    window = mux.window(p.window_id) if p.window_id else mux.active_window
    if window is not None:
        result.update({"window_id": window.uuid, "window_ref": window.ref})
    return result


class WorkspaceTarget(Params):
    workspace_id: str


@methods.method("workspace.get", WorkspaceTarget)
async def workspace_get(call: Call, p: WorkspaceTarget) -> Result:
    mux = call.ctx.mux
    ws = mux.workspace(p.workspace_id)
    return {"type": "workspace_info", "workspace": workspace_row(mux, call.ctx.agents, ws)}


@methods.method("workspace.focus", WorkspaceTarget)
async def workspace_focus(call: Call, p: WorkspaceTarget) -> Result:
    """Make the workspace the active one (and its window the active window)."""
    mux = call.ctx.mux
    ws = mux.workspace(p.workspace_id)
    mux.focus_workspace(ws)
    return {"type": "workspace_info", "workspace": workspace_row(mux, call.ctx.agents, ws),
            **workspace_keys(ws)}


@methods.method("workspace.select", WorkspaceTarget)
async def workspace_select(call: Call, p: WorkspaceTarget) -> Result:
    """cmux-family name of ``workspace.focus``."""
    return await workspace_focus(call, p)


@methods.method("workspace.current", Empty)
async def workspace_current(call: Call, p: Empty) -> Result:
    mux = call.ctx.mux
    ws = mux.active_workspace()
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
async def workspace_rename(call: Call, p: WorkspaceRenameParams) -> Result:
    """Set the label (``label`` or cmux ``title``); an empty label restores the automatic one."""
    mux = call.ctx.mux
    if p.label is None and p.title is None:
        raise InvalidParams("label", "field required")
    ws = mux.workspace(p.workspace_id)
    mux.rename_workspace(ws, p.label if p.label is not None else p.title)
    return {"type": "workspace_info", "workspace": workspace_row(mux, call.ctx.agents, ws),
            "title": mux.workspace_label(ws), **workspace_keys(ws)}


@methods.method("workspace.close", WorkspaceTarget)
async def workspace_close(call: Call, p: WorkspaceTarget) -> Result:
    """Close the workspace and every pane in it."""
    mux = call.ctx.mux
    ws = mux.workspace(p.workspace_id)
    keys = workspace_keys(ws)
    mux.close_workspace(ws)
    return {"type": "ok", **keys}


# -- tabs -----------------------------------------------------------------------------


class TabCreateParams(Params):
    workspace_id: str | None = None
    cwd: str | None = None
    focus: bool = False
    label: str | None = None
    env: dict[str, str] | None = None
    command: list[ExecString] | None = None


@methods.method("tab.create", TabCreateParams)
async def tab_create(call: Call, p: TabCreateParams) -> Result:
    """Append a tab with one pane to a workspace (default: the active one)."""
    mux = call.ctx.mux
    if p.workspace_id is not None:
        ws = mux.workspace(p.workspace_id)
    else:
        active = mux.active_workspace()
        if active is None:
            raise CmuxError("workspace_not_found", "no active workspace")
        ws = active
    env = validate_env(p.env)
    cwd = resolve_cwd(p.cwd, "cwd")
    command = command_argv(p.command, "command")
    try:
        tab, pane = mux.create_tab(ws, cwd=cwd, label=trimmed(p.label), env=env,
                                   command=command, focus=p.focus)
    except CmuxError as exc:
        raise spawn_error(exc, "tab_create_failed") from None
    return {"type": "tab_created", "tab": wire.tab_info(mux, call.ctx.agents, tab),
            "root_pane": wire.pane_info(mux, call.ctx.agents, pane)}


class TabListParams(Params):
    workspace_id: str | None = None


@methods.method("tab.list", TabListParams)
async def tab_list(call: Call, p: TabListParams) -> Result:
    mux = call.ctx.mux
    if p.workspace_id is not None:
        tabs = mux.workspace(p.workspace_id).tabs
    else:
        tabs = list(mux.all_tabs())
    return {"type": "tab_list", "tabs": [wire.tab_info(mux, call.ctx.agents, t) for t in tabs]}


class TabTarget(Params):
    tab_id: str


@methods.method("tab.get", TabTarget)
async def tab_get(call: Call, p: TabTarget) -> Result:
    mux = call.ctx.mux
    return {"type": "tab_info", "tab": wire.tab_info(mux, call.ctx.agents, mux.tab(p.tab_id))}


@methods.method("tab.focus", TabTarget)
async def tab_focus(call: Call, p: TabTarget) -> Result:
    mux = call.ctx.mux
    tab = mux.tab(p.tab_id)
    mux.focus_tab(tab)
    return {"type": "tab_info", "tab": wire.tab_info(mux, call.ctx.agents, tab)}


class TabRenameParams(Params):
    tab_id: str
    label: str = Field(max_length=256)


@methods.method("tab.rename", TabRenameParams)
async def tab_rename(call: Call, p: TabRenameParams) -> Result:
    """Set the tab label; empty restores the positional default."""
    mux = call.ctx.mux
    tab = mux.tab(p.tab_id)
    mux.rename_tab(tab, p.label.strip())
    return {"type": "tab_info", "tab": wire.tab_info(mux, call.ctx.agents, tab)}


@methods.method("tab.close", TabTarget)
async def tab_close(call: Call, p: TabTarget) -> Result:
    """Close the tab; the workspace closes with its last tab."""
    mux = call.ctx.mux
    mux.close_tab(mux.tab(p.tab_id))
    return {"type": "ok"}
