"""The cmux v2 ``window.*`` methods: list, current, create, focus, close.

A window holds an ordered list of workspaces, one of them selected; one window is the
active one, where calls without a ``window_id`` go. Results carry the window's UUID in
``window_id`` and its short ref in ``window_ref``.
"""

from __future__ import annotations

from cmux_core.api.context import Call
from cmux_core.api.dispatch import MethodTable, Result, services
from cmux_core.api.methods.shared.creation import creation_focus, resolve_cwd, spawning
from cmux_core.api.methods.shared.params import Empty
from cmux_core.api.methods.shared.routing import window_keys
from cmux_core.api.methods.shared.rows import window_row
from cmux_core.api.methods.shared.workspace_routing import Routing, route_window
from cmux_core.config import Settings
from cmux_core.errors import InvalidParams
from cmux_core.hookspecs import Params
from cmux_core.model import windows
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Window


@services
class WindowServices:
    mux: Mux
    settings: Settings


methods = MethodTable()


def required_window(mux: Mux, text: str | None) -> Window:
    """The window ``text`` names; ``invalid_params`` when it is absent or blank."""
    if text is None or not text.strip():
        raise InvalidParams("window_id", "Missing or invalid window_id")
    return mux.window(text)


@methods.method("window.list", Empty)
async def window_list(call: Call[WindowServices], p: Empty) -> Result:
    """Every window in creation order; ``key`` marks the active one."""
    mux = call.ctx.mux
    return {"type": "window_list",
            "windows": [window_row(mux, w, i) for i, w in enumerate(mux.windows)]}


class CurrentParams(Routing):
    pass


@methods.method("window.current", CurrentParams)
async def window_current(call: Call[WindowServices], p: CurrentParams) -> Result:
    """The window a call would be routed to: ``window_id``, the window holding
    ``workspace_id``, else the active window."""
    window = route_window(call.ctx.mux, p, missing="Current window not found")
    return {"type": "window", **window_keys(window)}


class CreateParams(Params):
    focus: bool | None = None
    cwd: str | None = None
    working_directory: str | None = None


@methods.method("window.create", CreateParams)
async def window_create(call: Call[WindowServices], p: CreateParams) -> Result:
    """A new window with one workspace holding one terminal; active only with ``focus``
    (or ``[cmux] focus_on_create``)."""
    mux = call.ctx.mux
    cwd = resolve_cwd(p.cwd, "cwd") or resolve_cwd(p.working_directory, "working_directory")
    with spawning("window_create_failed"):
        window = windows.create_window(mux, cwd=cwd, focus=creation_focus(call.ctx.settings,
                                                                          p.focus))
    ws = window.workspaces[0]
    return {"type": "window", **window_keys(window), "workspace_id": ws.uuid,
            "workspace_ref": ws.ref}


class WindowTarget(Params):
    window_id: str | None = None


@methods.method("window.focus", WindowTarget)
async def window_focus(call: Call[WindowServices], p: WindowTarget) -> Result:
    """Make the window the active one."""
    mux = call.ctx.mux
    window = required_window(mux, p.window_id)
    windows.focus_window(mux, window)
    return {"type": "window", **window_keys(window)}


@methods.method("window.close", WindowTarget)
async def window_close(call: Call[WindowServices], p: WindowTarget) -> Result:
    """Close the window, its workspaces and their terminals."""
    mux = call.ctx.mux
    window = required_window(mux, p.window_id)
    keys = window_keys(window)
    windows.close_window(mux, window)
    return {"type": "ok", **keys}
