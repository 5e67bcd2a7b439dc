"""Where a cmux-family window or workspace call lands: the window named, else the window
holding the workspace named, else the active window."""

from __future__ import annotations

from cmux_core.errors import CmuxError
from cmux_core.hookspecs import Params
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Window, Workspace


class Routing(Params):
    """cmux routing: the window named, else the window holding the workspace named, else
    the active window."""

    window_id: str | None = None
    workspace_id: str | None = None


def route_window(mux: Mux, p: Routing, missing: str = "No window") -> Window:
    """The routed window; ``not_found`` with the message ``missing`` when the call names
    none and there is no active window."""
    if p.window_id:
        return mux.window(p.window_id)
    if p.workspace_id:
        return mux.workspace(p.workspace_id).window
    if mux.active_window is None:
        raise CmuxError("not_found", missing)
    return mux.active_window


def route_workspace(mux: Mux, p: Routing) -> Workspace:
    """``workspace_id``, else the selected workspace of the routed window."""
    if p.workspace_id:
        return mux.workspace(p.workspace_id)
    ws = route_window(mux, p).selected
    if ws is None:
        raise CmuxError("not_found", "No workspace selected")
    return ws

