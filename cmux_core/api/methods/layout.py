"""Layout methods: pane geometry reads, swap, move, zoom, resize, directional focus,
split ratios, portable layouts, and tab/workspace order.

Handlers resolve ids (raising the not-found errors) and leave every change to
:mod:`cmux_core.model.arrange`; :mod:`cmux_core.api.wire` projects its typed results.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from cmux_core.agents.tracker import AgentTracker
from cmux_core.api import wire
from cmux_core.api.context import Call
from cmux_core.api.dispatch import MethodTable, Result
from cmux_core.api.methods.pane import NOMINAL_CELL_PX
from cmux_core.api.methods.routing import pane_keys
from cmux_core.api.methods.workspace import workspace_row
from cmux_core.errors import CmuxError, InvalidParams
from cmux_core.hookspecs import Params
from cmux_core.model import arrange, surfaces
from cmux_core.model.layout import DEFAULT_RATIO, DEFAULT_RESIZE_AMOUNT, Direction, PaneDirection
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Tab, Workspace

methods = MethodTable()


class OptionalPane(Params):
    pane_id: str | None = None


class DirectionParams(Params):
    pane_id: str | None = None
    direction: PaneDirection


@methods.method("pane.layout", OptionalPane)
async def pane_layout(call: Call, p: OptionalPane) -> Result:
    """The snapshot (rects and split ids) of the tab holding the pane."""
    mux = call.ctx.mux
    return {"type": "pane_layout", "layout": wire.layout_snapshot(mux, mux.pane(p.pane_id).tab)}


@methods.method("pane.neighbor", DirectionParams)
async def pane_neighbor(call: Call, p: DirectionParams) -> Result:
    """The nearest pane of the same tab in a direction (null when none)."""
    mux = call.ctx.mux
    found = arrange.neighbor(mux, mux.pane(p.pane_id), p.direction)
    return {"type": "pane_neighbor", "neighbor": wire.neighbor(mux, found)}


@methods.method("pane.edges", OptionalPane)
async def pane_edges(call: Call, p: OptionalPane) -> Result:
    """Which sides of the area the pane touches."""
    mux = call.ctx.mux
    return {"type": "pane_edges", "edges": wire.edges(mux, arrange.edges(mux, mux.pane(p.pane_id)))}


@methods.method("pane.focus_direction", DirectionParams)
async def pane_focus_direction(call: Call, p: DirectionParams) -> Result:
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
async def pane_resize(call: Call, p: ResizeParams) -> Result:
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
async def pane_swap(call: Call, p: SwapParams) -> Result:
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
        return arrange.ToNewTab(ws, (d.label or "").strip() or None)
    return arrange.ToNewWorkspace((d.label or "").strip() or None,
                                  (d.tab_label or "").strip() or None)


@methods.method("pane.move", MoveParams)
async def pane_move(call: Call, p: MoveParams) -> Result:
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
async def pane_zoom(call: Call, p: ZoomParams) -> Result:
    """Focus the pane, then zoom its tab in or out."""
    mux = call.ctx.mux
    done = arrange.zoom(mux, mux.pane(p.pane_id), p.mode)
    return {"type": "pane_zoom", "zoom": wire.zoom(mux, done)}


# -- portable layouts -------------------------------------------------------------------


class TabOrPane(Params):
    tab_id: str | None = None
    pane_id: str | None = None


def layout_tab(mux: Mux, tab_id: str | None, pane_id: str | None) -> Tab:
    """``tab_id``'s tab, ``pane_id``'s tab, or the active tab; else ``layout_not_found``."""
    tab: Tab | None
    if tab_id is not None and pane_id is not None:
        raise CmuxError("layout_not_found", "give either tab_id or pane_id, not both")
    if tab_id is not None:
        tab = mux.find_tab(tab_id)
    elif pane_id is not None:
        pane = mux.find_pane(pane_id)
        tab = pane.tab if pane is not None else None
    else:
        ws = mux.active_workspace()
        tab = ws.active_tab if ws is not None else None
    if tab is None:
        raise CmuxError("layout_not_found", "layout not found")
    return tab


@methods.method("layout.export", TabOrPane)
async def layout_export(call: Call, p: TabOrPane) -> Result:
    """The tab as a portable tree: splits, ratios, and each pane's label, cwd and command."""
    mux = call.ctx.mux
    return {"type": "layout_export",
            "layout": arrange.describe(mux, layout_tab(mux, p.tab_id, p.pane_id))}


class ApplyParams(Params):
    workspace_id: str | None = None
    tab_id: str | None = None
    tab_label: str | None = None
    focus: bool = False
    root: Any


@methods.method("layout.apply", ApplyParams)
async def layout_apply(call: Call, p: ApplyParams) -> Result:
    """Build a new tab from a portable tree, or replace ``tab_id`` with it; all or nothing."""
    mux = call.ctx.mux
    if p.tab_id is not None and p.workspace_id is not None:
        raise CmuxError("invalid_target", "give either workspace_id or tab_id, not both")
    replace = mux.tab(p.tab_id) if p.tab_id is not None else None
    if replace is not None:
        ws = replace.workspace
    elif p.workspace_id is not None:
        ws = mux.workspace(p.workspace_id)
    else:
        active = mux.active_workspace()
        if active is None:
            raise CmuxError("workspace_not_found", "no active workspace")
        ws = active
    label = (p.tab_label or "").strip() or None
    return {"type": "layout_apply",
            "layout": arrange.apply(mux, ws, p.root, replace=replace, tab_label=label,
                                    focus=p.focus)}


class SplitRatioParams(TabOrPane):
    path: list[bool]
    ratio: float


@methods.method("layout.set_split_ratio", SplitRatioParams)
async def layout_set_split_ratio(call: Call, p: SplitRatioParams) -> Result:
    """Set the ratio of the split at ``path`` (false = first child) from the root."""
    mux = call.ctx.mux
    tab = layout_tab(mux, p.tab_id, p.pane_id)
    return {"type": "layout_split_ratio_set",
            "layout": arrange.set_split_ratio(mux, tab, p.path, p.ratio)}


# -- order ----------------------------------------------------------------------------


class TabMoveParams(Params):
    tab_id: str
    insert_index: int = Field(ge=0)


@methods.method("tab.move", TabMoveParams)
async def tab_move(call: Call, p: TabMoveParams) -> Result:
    """Move a tab to gap ``insert_index`` (0..number of tabs) of its workspace."""
    mux = call.ctx.mux
    tab = mux.tab(p.tab_id)
    arrange.move_tab(mux, tab, p.insert_index)
    agents = call.ctx.agents
    return {"type": "tab_list", "tabs": [wire.tab_info(mux, agents, t) for t in tab.workspace.tabs]}


class WorkspaceMoveParams(Params):
    workspace_id: str
    insert_index: int = Field(ge=0)


def _workspace_list(mux: Mux, agents: AgentTracker) -> Result:
    return {"type": "workspace_list",
            "workspaces": [workspace_row(mux, agents, ws) for ws in mux.workspaces()]}


@methods.method("workspace.move", WorkspaceMoveParams)
async def workspace_move(call: Call, p: WorkspaceMoveParams) -> Result:
    """Move a workspace to gap ``insert_index`` (0..number of workspaces) of its window."""
    mux = call.ctx.mux
    arrange.move_workspace(mux, mux.workspace(p.workspace_id), p.insert_index)
    return _workspace_list(mux, call.ctx.agents)


class MoveBlockParams(Params):
    workspace_ids: list[str]
    before_workspace_id: str | None = None


@methods.method("workspace.move_block", MoveBlockParams)
async def workspace_move_block(call: Call, p: MoveBlockParams) -> Result:
    """Move several workspaces, in the given order, before another (or to the end)."""
    mux = call.ctx.mux
    block = [mux.workspace(text) for text in p.workspace_ids]
    before = mux.workspace(p.before_workspace_id) if p.before_workspace_id else None
    arrange.move_workspace_block(mux, block, before)
    return _workspace_list(mux, call.ctx.agents)
