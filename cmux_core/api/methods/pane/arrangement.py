"""The ``pane.*`` methods that arrange panes: geometry reads, swap, move, zoom, resize,
directional focus.

Handlers resolve ids (raising the not-found errors) and leave every change to
:mod:`cmux_core.model.arrange`; :mod:`cmux_core.api.wire` projects its typed results.

"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from cmux_core.agents.tracker import AgentTracker
from cmux_core.api import wire
from cmux_core.api.context import Call
from cmux_core.api.dispatch import MethodTable, Result, services
from cmux_core.api.methods.shared.creation import trimmed
from cmux_core.api.methods.shared.routing import pane_keys
from cmux_core.api.methods.shared.rows import NOMINAL_CELL_PX
from cmux_core.errors import CmuxError, InvalidParams
from cmux_core.hookspecs import Params
from cmux_core.model import arrange, surfaces
from cmux_core.model.layout import DEFAULT_RATIO, DEFAULT_RESIZE_AMOUNT, Direction, PaneDirection
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Workspace


@services
class ArrangementServices:
    mux: Mux
    agents: AgentTracker


methods = MethodTable()


class OptionalPane(Params):
    pane_id: str | None = None


class DirectionParams(Params):
    pane_id: str | None = None
    direction: PaneDirection


@methods.method("pane.layout", OptionalPane)
async def pane_layout(call: Call[ArrangementServices], p: OptionalPane) -> Result:
    """The snapshot (rects and split ids) of the tab holding the pane."""
    mux = call.ctx.mux
    return {"type": "pane_layout", "layout": wire.layout_snapshot(mux, mux.pane(p.pane_id).tab)}


@methods.method("pane.neighbor", DirectionParams)
async def pane_neighbor(call: Call[ArrangementServices], p: DirectionParams) -> Result:
    """The nearest pane of the same tab in a direction (null when none)."""
    mux = call.ctx.mux
    found = arrange.neighbor(mux, mux.pane(p.pane_id), p.direction)
    return {"type": "pane_neighbor", "neighbor": wire.neighbor(mux, found)}


@methods.method("pane.edges", OptionalPane)
async def pane_edges(call: Call[ArrangementServices], p: OptionalPane) -> Result:
    """Which sides of the area the pane touches."""
    mux = call.ctx.mux
    return {"type": "pane_edges", "edges": wire.edges(mux, arrange.edges(mux, mux.pane(p.pane_id)))}


@methods.method("pane.focus_direction", DirectionParams)
async def pane_focus_direction(call: Call[ArrangementServices], p: DirectionParams) -> Result:
    """Focus the nearest pane in a direction; ``no_neighbor`` when there is none."""
    mux = call.ctx.mux
    done = arrange.focus_direction(mux, mux.pane(p.pane_id), p.direction)
    return {"type": "pane_focus_direction", "focus": wire.focus_move(mux, done)}


class ResizeParams(DirectionParams):
    amount: int | float = DEFAULT_RESIZE_AMOUNT
    workspace_id: str | None = None
    window_id: str | None = None


def pixel_share(mux: Mux, direction: PaneDirection, pixels: int) -> float:
    """cmux's resize amount (pixels of the nominal cells ``pane.list`` reports) as a
    share of the area's width or height."""
    horizontal = direction in ("left", "right")
    cell = NOMINAL_CELL_PX[0 if horizontal else 1]
    extent = mux.area.width if horizontal else mux.area.height
    return max(1, round(pixels / cell)) / max(extent, 1)


@methods.method("pane.resize", ResizeParams)
async def pane_resize(call: Call[ArrangementServices], p: ResizeParams) -> Result:
    """Move the divider beside the pane by ``amount`` of its split. An integer amount of
    1 or more is cmux's form: pixels of nominal cells, measured against the whole area;
    the result then carries cmux's id/ref twins too."""
    mux = call.ctx.mux
    pane = mux.pane(p.pane_id)
    cmux_form = isinstance(p.amount, int) and p.amount >= 1
    amount = pixel_share(mux, p.direction, int(p.amount)) if cmux_form else p.amount
    done = arrange.resize(mux, pane, p.direction, amount)
    result: Result = {"type": "pane_resize", "resize": wire.resize(mux, done)}
    if cmux_form:
        result.update({**pane_keys(pane), "direction": p.direction, "amount": p.amount,
                       "changed": done.changed})
    return result


class SwapParams(Params):
    pane_id: str | None = None
    direction: PaneDirection | None = None
    source_pane_id: str | None = None
    target_pane_id: str | None = None
    workspace_id: str | None = None
    window_id: str | None = None
    focus: bool = False


SWAP_FORMS = ("provide either direction with optional pane_id, or source_pane_id and "
              "target_pane_id")
"""herdr's message, word for word; cmux's form (pane_id with target_pane_id) is a third."""


def swap_surfaces(mux: Mux, p: SwapParams) -> Result:
    """cmux's form: the two panes exchange their selected surfaces; the panes stay."""
    assert p.pane_id is not None and p.target_pane_id is not None
    source, target = mux.pane(p.pane_id), mux.pane(p.target_pane_id)
    if source is target:
        raise InvalidParams("target_pane_id", "must be another pane than pane_id")
    if source.tab.workspace is not target.tab.workspace:
        raise InvalidParams("target_pane_id", "must be a pane of the same workspace")
    moved, replaced = source.surface, target.surface
    surfaces.swap_selected(mux, source, target, focus=p.focus)
    return {"type": "pane_swap", **pane_keys(source),
            "target_pane_id": target.key, "target_pane_ref": target.ref,
            "source_surface_id": moved.uuid, "source_surface_ref": moved.ref,
            "target_surface_id": replaced.uuid, "target_surface_ref": replaced.ref}


@methods.method("pane.swap", SwapParams)
async def pane_swap(call: Call[ArrangementServices], p: SwapParams) -> Result:
    """Swap two panes of one tab, by direction or by naming both (focus follows the
    source); cmux's form (``pane_id`` with ``target_pane_id``) exchanges the two panes'
    selected surfaces instead, focusing only with ``focus``."""
    mux = call.ctx.mux
    if (p.pane_id is not None and p.target_pane_id is not None and p.direction is None
            and p.source_pane_id is None):
        return swap_surfaces(mux, p)
    explicit = p.source_pane_id is not None or p.target_pane_id is not None
    if p.direction is not None:
        if explicit:
            raise CmuxError("invalid_pane_swap", SWAP_FORMS)
        swap = arrange.swap_direction(mux, mux.pane(p.pane_id), p.direction)
    elif p.source_pane_id is None or p.target_pane_id is None:
        raise CmuxError("invalid_pane_swap", SWAP_FORMS)
    else:
        swap = arrange.swap_panes(mux, p.source_pane_id, p.target_pane_id)
    return {"type": "pane_swap", "swap": wire.swap(mux, swap)}


class ToTabDestination(Params):
    type: Literal["tab"]
    tab_id: str
    target_pane_id: str | None = None
    split: Direction
    ratio: float | None = None


class ToNewTabDestination(Params):
    type: Literal["new_tab"]
    workspace_id: str | None = None
    label: str | None = None


class ToNewWorkspaceDestination(Params):
    type: Literal["new_workspace"]
    label: str | None = None
    tab_label: str | None = None


class MoveParams(Params):
    pane_id: str
    destination: Annotated[ToTabDestination | ToNewTabDestination | ToNewWorkspaceDestination,
                           Field(discriminator="type")]
    focus: bool = False


def _destination(mux: Mux, d: ToTabDestination | ToNewTabDestination
                 | ToNewWorkspaceDestination, source_ws: Workspace) -> arrange.Destination:
    if isinstance(d, ToTabDestination):
        tab = mux.tab(d.tab_id)
        if d.target_pane_id is None:
            target = mux.panes[tab.focused]
        else:
            found = mux.find_pane(d.target_pane_id)
            if found is None or found.tab is not tab:
                raise CmuxError("target_pane_not_found",
                                f"target pane {d.target_pane_id} is not in tab {tab.id}")
            target = found
        ratio = DEFAULT_RATIO if d.ratio is None else d.ratio
        return arrange.ToTab(tab, target, d.split, ratio)
    if isinstance(d, ToNewTabDestination):
        ws = mux.workspace(d.workspace_id) if d.workspace_id is not None else source_ws
        return arrange.ToNewTab(ws, trimmed(d.label))
    return arrange.ToNewWorkspace(trimmed(d.label), trimmed(d.tab_label))


@methods.method("pane.move", MoveParams)
async def pane_move(call: Call[ArrangementServices], p: MoveParams) -> Result:
    """Move a pane and its running terminal to another tab, a new tab or a new workspace."""
    mux = call.ctx.mux
    pane = mux.pane(p.pane_id)
    dest = _destination(mux, p.destination, pane.tab.workspace)
    done = arrange.move(mux, pane, dest, focus=p.focus)
    return {"type": "pane_move", "move_result": wire.move_result(mux, call.ctx.agents, done)}


class ZoomParams(Params):
    pane_id: str | None = None
    mode: Literal["toggle", "on", "off"] = "toggle"


@methods.method("pane.zoom", ZoomParams)
async def pane_zoom(call: Call[ArrangementServices], p: ZoomParams) -> Result:
    """Focus the pane, then zoom its tab in or out."""
    mux = call.ctx.mux
    done = arrange.zoom(mux, mux.pane(p.pane_id), p.mode)
    return {"type": "pane_zoom", "zoom": wire.zoom(mux, done)}
