"""The cmux v2 family's system.* methods and auth.login (``surface.*`` is in ``surface.py``).

Results carry UUIDs in ``*_id`` and short refs in ``*_ref``; absent values are
``null``. Every result also has a ``type`` so herdr-style clients can read it.
"""

from __future__ import annotations

from typing import Any

from cmux_core.api.context import Call
from cmux_core.api.dispatch import MethodTable, Result
from cmux_core.api.methods.cmux_catalog import NOT_SUPPORTED
from cmux_core.api.methods.surface import surface_row
from cmux_core.api.methods.workspace import workspace_keys
from cmux_core.errors import InvalidParams
from cmux_core.hookspecs import Params
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Pane, Surface, Window, Workspace

methods = MethodTable()


class Empty(Params):
    pass


@methods.method("system.ping", Empty)
async def system_ping(call: Call, p: Empty) -> Result:
    return {"type": "pong", "pong": True}


@methods.method("system.capabilities", Empty)
async def system_capabilities(call: Call, p: Empty) -> Result:
    """Every method this server answers, sorted; the cmux methods that only answer
    ``not_supported`` are left out."""
    return {"type": "capabilities", "protocol": "cmux-socket", "version": 2,
            "socket_path": str(call.ctx.info.socket_path), "access_mode": "automation",
            "methods": [m for m in call.ctx.info.method_names() if m not in NOT_SUPPORTED]}


class AuthParams(Params):
    password: str | None = None


@methods.method("auth.login", AuthParams)
async def auth_login(call: Call, p: AuthParams) -> Result:
    """Password mode is not enabled: every same-user connection is already trusted."""
    return {"type": "auth", "authenticated": True, "required": False}


def focused_keys(mux: Mux, ws: Workspace | None, surface: Surface | None) -> dict[str, Any]:
    if ws is None:
        window = mux.active_window
        return {"window_id": window.uuid if window else None,
                "window_ref": window.ref if window else None}
    out: dict[str, Any] = {**workspace_keys(ws), "pane_id": None, "pane_ref": None,
                           "surface_id": None, "surface_ref": None, "tab_id": None,
                           "tab_ref": None, "surface_type": None, "is_browser_surface": False}
    if surface is not None:
        out.update({"pane_id": surface.pane.key, "pane_ref": surface.pane.ref,
                    "surface_id": surface.uuid, "surface_ref": surface.ref,
                    "tab_id": surface.uuid, "tab_ref": surface.ref, "surface_type": "terminal"})
    return out


class Caller(Params):
    workspace_id: str | None = None
    surface_id: str | None = None
    tab_id: str | None = None


class IdentifyParams(Params):
    caller: Caller | None = None


@methods.method("system.identify", IdentifyParams)
async def system_identify(call: Call, p: IdentifyParams) -> Result:
    """Where focus is, and where the caller (a pane's own ids) sits."""
    mux = call.ctx.mux
    pane = mux.focused_pane()
    focused = focused_keys(mux, mux.active_workspace(), pane.surface if pane else None)
    caller = None
    if p.caller is not None and p.caller.workspace_id:
        ws = mux.find_workspace(p.caller.workspace_id)
        if ws is not None:
            sid = p.caller.surface_id or p.caller.tab_id
            surface = mux.find_surface(sid) if sid else None
            caller = focused_keys(mux, ws, surface)
    return {"type": "identify", "socket_path": str(call.ctx.info.socket_path),
            "focused": focused, "caller": caller, "app_executable_path": None,
            "version": call.ctx.info.version}


def pane_node(mux: Mux, pane: Pane, index: int) -> dict[str, Any]:
    return {"id": pane.key, "ref": pane.ref, "index": index, "focused": mux.is_focused(pane),
            "surface_ids": [s.uuid for s in pane.surfaces],
            "surface_refs": [s.ref for s in pane.surfaces],
            "selected_surface_id": pane.surface.uuid, "selected_surface_ref": pane.surface.ref,
            "surface_count": len(pane.surfaces),
            "surfaces": [surface_row(mux, s, i) for i, s in enumerate(pane.surfaces)]}


def workspace_node(mux: Mux, ws: Workspace, index: int) -> dict[str, Any]:
    panes = mux.workspace_panes(ws)
    return {"id": ws.uuid, "ref": ws.ref, "index": index, "title": mux.workspace_label(ws),
            "description": ws.description, "selected": ws.window.selected is ws,
            "pinned": False, "workspace_id": ws.id,
            "panes": [pane_node(mux, x, i) for i, x in enumerate(panes)]}


def window_row(mux: Mux, window: Window, index: int) -> dict[str, Any]:
    sel = window.selected
    return {"id": window.uuid, "ref": window.ref, "index": index,
            "key": mux.active_window is window, "visible": True,
            "workspace_count": len(window.workspaces),
            "selected_workspace_id": sel.uuid if sel else None,
            "selected_workspace_ref": sel.ref if sel else None}


class TreeParams(Params):
    workspace_id: str | None = None
    window_id: str | None = None
    all_windows: bool = False


@methods.method("system.tree", TreeParams)
async def system_tree(call: Call, p: TreeParams) -> Result:
    """Windows → workspaces → panes → surfaces (the active window unless asked)."""
    mux = call.ctx.mux
    if p.window_id and p.all_windows:
        raise InvalidParams("all_windows", "cannot be combined with window_id")
    if p.all_windows:
        windows = mux.windows
    elif p.window_id:
        windows = [mux.window(p.window_id)]
    elif p.workspace_id:
        windows = [mux.workspace(p.workspace_id).window]
    else:
        windows = [mux.active_window] if mux.active_window else []
    nodes = []
    for window in windows:
        node = window_row(mux, window, mux.windows.index(window))
        node["workspaces"] = [workspace_node(mux, ws, i)
                              for i, ws in enumerate(window.workspaces)
                              if not p.workspace_id or ws is mux.workspace(p.workspace_id)]
        nodes.append(node)
    pane = mux.focused_pane()
    active = focused_keys(mux, mux.active_workspace(), pane.surface if pane else None)
    return {"type": "tree", "active": active, "caller": None, "windows": nodes}
