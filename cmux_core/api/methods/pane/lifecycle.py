"""The ``pane.*`` methods that make, list, name, focus, break out, join and close panes.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from cmux_core.api import wire
from cmux_core.api.context import Call
from cmux_core.api.dispatch import MethodTable, Result
from cmux_core.api.methods.shared.creation import (
    ExecString,
    SurfaceSplitParams,
    creation_focus,
    herdr_launch,
    spawning,
    split_here,
    trimmed,
)
from cmux_core.api.methods.shared.projections import row_cache
from cmux_core.api.methods.shared.routing import (
    Routing,
    given,
    pane_of,
    surface_handle,
    surface_keys,
    surface_of,
    workspace_keys,
    workspace_of,
)
from cmux_core.api.methods.shared.routing import pane_keys as cmux_pane_keys
from cmux_core.api.methods.shared.rows import pane_row, surface_title
from cmux_core.api.methods.shared.services import ModelServices
from cmux_core.errors import CmuxError, InvalidParams, NotFound
from cmux_core.hookspecs import Params
from cmux_core.model import surfaces
from cmux_core.model.tree import Pane


class LifecycleServices(ModelServices):
    """What these ``pane.*`` handlers use."""


methods = MethodTable()


def pane_result(ctx: LifecycleServices, pane: Pane) -> Result:
    return {"type": "pane_info", "pane": wire.pane_info(ctx.mux, ctx.agents, pane)}


def pane_keys(pane: Pane) -> dict[str, Any]:
    return {**workspace_keys(pane.tab.workspace), "pane_uuid": pane.key, "pane_ref": pane.ref}


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
async def pane_split(call: Call[LifecycleServices], p: PaneSplitParams) -> Result:
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
    cwd, command, env = herdr_launch(p.cwd if p.cwd is not None else p.location, p.env,
                                     p.command)
    with spawning("pane_split_failed"):
        pane = mux.split_pane(target, p.direction, ratio=p.ratio, cwd=cwd, env=env,
                              command=command, focus=p.focus)
    return pane_result(call.ctx, pane)


class PaneListParams(Params):
    workspace_id: str | None = None


@methods.method("pane.list", PaneListParams)
async def pane_list(call: Call[LifecycleServices], p: PaneListParams) -> Result:
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
    rows = await row_cache(mux, "pane_row", pane_row).rows(mux, call.ctx.agents, panes)
    return {"type": "pane_list", "panes": rows, **extra}


class PaneTarget(Params):
    pane_id: str


class OptionalPaneTarget(Params):
    pane_id: str | None = None


@methods.method("pane.get", PaneTarget)
async def pane_get(call: Call[LifecycleServices], p: PaneTarget) -> Result:
    mux = call.ctx.mux
    return pane_result(call.ctx, mux.pane(p.pane_id))


class PaneCurrentParams(Params):
    caller_pane_id: str | None = None


@methods.method("pane.current", PaneCurrentParams)
async def pane_current(call: Call[LifecycleServices], p: PaneCurrentParams) -> Result:
    """The caller's pane when ``caller_pane_id`` is given, else the focused pane."""
    mux = call.ctx.mux
    pane = mux.find_pane(p.caller_pane_id) if p.caller_pane_id else mux.focused_pane()
    if pane is None:
        raise NotFound("pane", message="pane not found")
    return {"type": "pane_current", "pane": wire.pane_info(mux, call.ctx.agents, pane)}


@methods.method("pane.focus", PaneTarget)
async def pane_focus(call: Call[LifecycleServices], p: PaneTarget) -> Result:
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
async def pane_rename(call: Call[LifecycleServices], p: PaneRenameParams) -> Result:
    """Set the manual label (trimmed); empty or null clears it."""
    mux = call.ctx.mux
    pane = mux.pane(p.pane_id)
    pane.label = trimmed(p.label)
    return pane_result(call.ctx, pane)


@methods.method("pane.close", PaneTarget)
async def pane_close(call: Call[LifecycleServices], p: PaneTarget) -> Result:
    """Close the pane and end its process group; the tab closes with its last pane."""
    mux = call.ctx.mux
    mux.close_pane(mux.pane(p.pane_id))
    return {"type": "ok"}


class PaneCreateParams(SurfaceSplitParams):
    direction: str = "right"


@methods.method("pane.create", PaneCreateParams)
async def pane_create(call: Call[LifecycleServices], p: PaneCreateParams) -> Result:
    """cmux's form of a split: a new pane with a new terminal beside the source surface
    (``surface_id``, default the focused one) on the ``direction`` side."""
    return await split_here(call.ctx.mux, call.ctx.settings, p)


@methods.method("pane.surfaces", Routing)
async def pane_surfaces(call: Call[LifecycleServices], p: Routing) -> Result:
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
async def pane_last(call: Call[LifecycleServices], p: Routing) -> Result:
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
async def pane_break(call: Call[LifecycleServices], p: PaneBreakParams) -> Result:
    """Move a surface (``surface_id``, else ``pane_id``'s selected one, else the focused
    one) into a new workspace at the end of its window; selected only with ``focus`` (or
    ``[cmux] focus_on_create``)."""
    mux = call.ctx.mux
    surface = surface_of(mux, p)
    pane = surfaces.break_out(mux, surface, title=trimmed(p.title),
                              focus=creation_focus(call.ctx.settings, p.focus))
    return {"type": "pane", **surface_keys(pane.surface)}


class PaneJoinParams(Routing):
    target_pane_id: str
    focus: bool = False


@methods.method("pane.join", PaneJoinParams)
async def pane_join(call: Call[LifecycleServices], p: PaneJoinParams) -> Result:
    """Move a surface (``surface_id``, else ``pane_id``'s selected one) into
    ``target_pane_id`` as its last tab, selected there; an emptied pane closes."""
    mux = call.ctx.mux
    target = mux.pane(p.target_pane_id)
    if not (surface_handle(p) or given(p.pane_id)):
        raise InvalidParams("surface_id", "give surface_id or pane_id")
    surface = surface_of(mux, p)
    if surface.pane is target:
        raise InvalidParams("target_pane_id", "the surface is already in this pane")
    surfaces.move(mux, surface, target, focus=p.focus)
    return {"type": "pane", **surface_keys(surface)}
