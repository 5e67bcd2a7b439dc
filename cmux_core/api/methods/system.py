"""The cmux v2 family: system.*, auth.login and the terminal surface.* methods.

Results carry UUIDs in ``*_id`` and short refs in ``*_ref``; absent values are
``null``. Every result also has a ``type`` so herdr-style clients can read it.
"""

from __future__ import annotations

from typing import Any

from cmux_core.api.context import Call
from cmux_core.api.dispatch import MethodTable, Result
from cmux_core.api.methods.pane import write
from cmux_core.api.methods.workspace import workspace_keys
from cmux_core.errors import CmuxError, InvalidParams
from cmux_core.hookspecs import Params
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Pane, Surface, Window, Workspace
from cmux_core.terminal.emulator import read_text
from cmux_core.terminal.keys import encode_keys

methods = MethodTable()


class Empty(Params):
    pass


@methods.method("system.ping", Empty)
async def system_ping(call: Call, p: Empty) -> Result:
    return {"type": "pong", "pong": True}


@methods.method("system.capabilities", Empty)
async def system_capabilities(call: Call, p: Empty) -> Result:
    """Every method this server answers, sorted."""
    return {"type": "capabilities", "protocol": "cmux-socket", "version": 2,
            "socket_path": str(call.ctx.info.socket_path), "access_mode": "automation",
            "methods": call.ctx.info.method_names()}


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


def surface_row(mux: Mux, surface: Surface, index: int) -> dict[str, Any]:
    pane = surface.pane
    focused = mux.is_focused(pane) and pane.selected is surface
    return {"id": surface.uuid, "ref": surface.ref, "index": index, "type": "terminal",
            "title": surface.terminal.emulator.title or "", "focused": focused,
            "selected": pane.selected is surface, "selected_in_pane": pane.selected is surface,
            "pane_id": pane.key, "pane_ref": pane.ref,
            "index_in_pane": pane.surfaces.index(surface), "tty": None, "url": None,
            "terminal_id": surface.terminal.id, "public_pane_id": pane.id}


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


# -- surfaces --------------------------------------------------------------------------


class SurfaceRouting(Params):
    surface_id: str | None = None
    workspace_id: str | None = None


def route_surface(mux: Mux, p: SurfaceRouting) -> Surface:
    """``surface_id``, else the focused surface of ``workspace_id`` or the active workspace."""
    if p.surface_id:
        return mux.surface(p.surface_id)
    ws = mux.workspace(p.workspace_id) if p.workspace_id else mux.active_workspace()
    pane = mux.focused_pane_of(ws) if ws else None
    if pane is None:
        raise CmuxError("not_found", "No focused surface")
    return pane.surface


def surface_keys(surface: Surface) -> dict[str, Any]:
    pane = surface.pane
    return {**workspace_keys(pane.tab.workspace), "pane_id": pane.key, "pane_ref": pane.ref,
            "surface_id": surface.uuid, "surface_ref": surface.ref}


@methods.method("surface.list", SurfaceRouting)
async def surface_list(call: Call, p: SurfaceRouting) -> Result:
    mux = call.ctx.mux
    ws = mux.workspace(p.workspace_id) if p.workspace_id else mux.active_workspace()
    if ws is None:
        raise CmuxError("not_found", "No workspace selected")
    surfaces = [s for pane in mux.workspace_panes(ws) for s in pane.surfaces]
    return {"type": "surface_list", **workspace_keys(ws),
            "surfaces": [surface_row(mux, s, i) for i, s in enumerate(surfaces)]}


@methods.method("surface.current", SurfaceRouting)
async def surface_current(call: Call, p: SurfaceRouting) -> Result:
    surface = route_surface(call.ctx.mux, SurfaceRouting(workspace_id=p.workspace_id))
    return {"type": "surface", **surface_keys(surface), "surface_type": "terminal"}


class SurfaceFocusParams(Params):
    surface_id: str


@methods.method("surface.focus", SurfaceFocusParams)
async def surface_focus(call: Call, p: SurfaceFocusParams) -> Result:
    mux = call.ctx.mux
    surface = mux.surface(p.surface_id)
    surface.pane.selected = surface
    mux.focus_pane(surface.pane)
    return {"type": "surface", **surface_keys(surface)}


class SurfaceTextParams(SurfaceRouting):
    text: str


@methods.method("surface.send_text", SurfaceTextParams)
async def surface_send_text(call: Call, p: SurfaceTextParams) -> Result:
    """Type ``text`` into the terminal as-is; a newline acts like Enter."""
    surface = route_surface(call.ctx.mux, p)
    write(surface, p.text.encode())
    return {"type": "ok", **surface_keys(surface), "queued": False}


class SurfaceKeyParams(SurfaceRouting):
    key: str


_CMUX_KEY_ALIASES = {"sigint": "ctrl+c", "eof": "ctrl+d", "sigtstp": "ctrl+z",
                     "sigquit": "ctrl+\\", "kill-line": "ctrl+u"}


@methods.method("surface.send_key", SurfaceKeyParams)
async def surface_send_key(call: Call, p: SurfaceKeyParams) -> Result:
    surface = route_surface(call.ctx.mux, p)
    name = p.key.strip()
    name = _CMUX_KEY_ALIASES.get(name.lower(), name)
    if name.lower().startswith("ctrl-") and len(name) > 5:
        name = "ctrl+" + name[5:]
    try:
        encoded = encode_keys([name], surface.terminal.emulator.modes)
    except CmuxError:
        raise CmuxError("invalid_params", "Unknown key", {"key": p.key}) from None
    write(surface, b"".join(encoded))
    return {"type": "ok", **surface_keys(surface), "queued": False}


class SurfaceReadParams(SurfaceRouting):
    scrollback: bool = False
    lines: int | None = None


@methods.method("surface.read_text", SurfaceReadParams)
async def surface_read_text(call: Call, p: SurfaceReadParams) -> Result:
    """The visible screen, or screen plus scrollback (last ``lines``) when asked."""
    import base64

    surface = route_surface(call.ctx.mux, p)
    if p.lines is not None and p.lines <= 0:
        raise InvalidParams("lines", "must be greater than 0")
    emulator = surface.terminal.emulator
    if p.scrollback or p.lines is not None:
        text, _ = read_text(emulator, "recent", p.lines or 10_000, "text")
    else:
        text, _ = read_text(emulator, "visible", None, "text")
    return {"type": "surface_text", "text": text,
            "base64": base64.b64encode(text.encode()).decode(), **surface_keys(surface)}
