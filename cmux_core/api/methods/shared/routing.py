"""Where a cmux-family call lands, and the id/ref twins its result carries.

cmux routes a surface or pane call by the handles it is given: ``surface_id`` (or its
``tab_id`` alias) names a surface, ``pane_id`` a pane, ``workspace_id`` a workspace,
``window_id`` a window whose selected workspace is meant; without any of them the
active workspace's focused surface is meant. Each handle may be a UUID, a short ref
(``surface:3``, ``tab:3``) or our own public id. A bare number is what cmux's own
client sends when it means "no handle" (``pane_id: "0"``), so it counts as absent;
any other handle that names nothing is a not-found error.

"""

from __future__ import annotations

from typing import Any

from cmux_core.errors import CmuxError
from cmux_core.hookspecs import Params
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Pane, Surface, Window, Workspace


class Routing(Params):
    """The handles every cmux-family surface and pane call accepts."""

    surface_id: str | None = None
    tab_id: str | None = None
    pane_id: str | None = None
    workspace_id: str | None = None
    window_id: str | None = None


def given(text: str | None) -> str | None:
    """``text`` as a handle, or None when it is absent, blank or a bare number."""
    if text is None:
        return None
    text = text.strip()
    return None if not text or text.isdigit() else text


def surface_handle(p: Routing) -> str | None:
    """The surface handle a call gives: ``surface_id``, else its ``tab_id`` alias."""
    return given(p.surface_id) or given(p.tab_id)


def window_of(mux: Mux, p: Routing) -> Window | None:
    text = given(p.window_id)
    return mux.window(text) if text else mux.active_window


def workspace_of(mux: Mux, p: Routing) -> Workspace:
    """The workspace a call means: named, or holding the named surface or pane, or the
    selected workspace of the named (else active) window."""
    text = given(p.workspace_id)
    if text:
        return mux.workspace(text)
    sid = surface_handle(p)
    if sid:
        return mux.surface(sid).pane.tab.workspace
    pid = given(p.pane_id)
    if pid:
        return mux.pane(pid).tab.workspace
    window = window_of(mux, p)
    if window is None or window.selected is None:
        raise CmuxError("not_found", "No workspace selected")
    return window.selected


def pane_of(mux: Mux, p: Routing) -> Pane:
    """The named pane, the pane of the named surface, or the focused pane of the
    workspace the call means."""
    pid = given(p.pane_id)
    if pid:
        return mux.pane(pid)
    sid = surface_handle(p)
    if sid:
        return mux.surface(sid).pane
    ws = workspace_of(mux, p)
    pane = mux.focused_pane_of(ws)
    if pane is None:
        raise CmuxError("not_found", "No focused pane")
    return pane


def surface_of(mux: Mux, p: Routing) -> Surface:
    """The named surface, or the selected surface of the pane the call means."""
    sid = surface_handle(p)
    if sid:
        return mux.surface(sid)
    if given(p.pane_id):
        return mux.pane(given(p.pane_id)).surface
    ws = workspace_of(mux, p)
    pane = mux.focused_pane_of(ws)
    if pane is None:
        raise CmuxError("not_found", "No focused surface")
    return pane.surface


def herdr_workspace(mux: Mux, workspace_id: str | None) -> Workspace:
    """The workspace ``workspace_id`` names, else the active one (``workspace_not_found``
    when there is none): where the herdr family puts a new tab."""
    if workspace_id is not None:
        return mux.workspace(workspace_id)
    active = mux.active_workspace()
    if active is None:
        raise CmuxError("workspace_not_found", "no active workspace")
    return active


def pane_keys(pane: Pane) -> dict[str, Any]:
    """Window, workspace and pane twins of a cmux result (``pane_id`` is the UUID)."""
    return {**workspace_keys(pane.tab.workspace), "pane_id": pane.key, "pane_ref": pane.ref}


def surface_keys(surface: Surface) -> dict[str, Any]:
    """:func:`pane_keys` of the surface's pane plus the surface twins."""
    return {**pane_keys(surface.pane), "surface_id": surface.uuid,
            "surface_ref": surface.ref}


def surface_tab_keys(surface: Surface) -> dict[str, Any]:
    """A surface named as cmux's tab actions name it (``tab:<n>`` twin of its ref)."""
    return {"tab_id": surface.uuid, "tab_ref": "tab:" + surface.ref.split(":", 1)[1]}


def window_keys(window: Window) -> dict[str, Any]:
    return {"window_id": window.uuid, "window_ref": window.ref}


def workspace_keys(ws: Workspace) -> dict[str, Any]:
    return {"workspace_id": ws.uuid, "workspace_ref": ws.ref, **window_keys(ws.window)}


