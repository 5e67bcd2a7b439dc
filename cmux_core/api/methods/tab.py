"""The herdr ``tab.*`` methods, and cmux's ``tab.action``, whose tab is a surface.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import Field

from cmux_core.api import wire
from cmux_core.api.context import Call
from cmux_core.api.dispatch import MethodTable, Result
from cmux_core.api.methods.shared.creation import ExecString, herdr_launch, spawning, trimmed
from cmux_core.api.methods.shared.routing import herdr_workspace
from cmux_core.api.methods.shared.services import ModelServices
from cmux_core.api.methods.shared.surface_actions import SurfaceActionParams, run_action
from cmux_core.hookspecs import Params
from cmux_core.model import arrange
from cmux_core.model.tree import Tab


class TabServices(ModelServices):
    """What these ``tab.*`` handlers use."""


methods = MethodTable()


def tab_result(ctx: TabServices, tab: Tab) -> Result:
    return {"type": "tab_info", "tab": wire.tab_info(ctx.mux, ctx.agents, tab)}


def tabs_result(ctx: TabServices, tabs: Iterable[Tab]) -> Result:
    return {"type": "tab_list", "tabs": [wire.tab_info(ctx.mux, ctx.agents, t) for t in tabs]}


class TabCreateParams(Params):
    workspace_id: str | None = None
    cwd: str | None = None
    focus: bool = False
    label: str | None = None
    env: dict[str, str] | None = None
    command: list[ExecString] | None = None


@methods.method("tab.create", TabCreateParams)
async def tab_create(call: Call[TabServices], p: TabCreateParams) -> Result:
    """Append a tab with one pane to a workspace (default: the active one)."""
    mux = call.ctx.mux
    ws = herdr_workspace(mux, p.workspace_id)
    cwd, command, env = herdr_launch(p.cwd, p.env, p.command)
    with spawning("tab_create_failed"):
        tab, pane = mux.create_tab(ws, cwd=cwd, label=trimmed(p.label), env=env,
                                   command=command, focus=p.focus)
    return {"type": "tab_created", "tab": wire.tab_info(mux, call.ctx.agents, tab),
            "root_pane": wire.pane_info(mux, call.ctx.agents, pane)}


class TabListParams(Params):
    workspace_id: str | None = None


@methods.method("tab.list", TabListParams)
async def tab_list(call: Call[TabServices], p: TabListParams) -> Result:
    mux = call.ctx.mux
    if p.workspace_id is not None:
        tabs = mux.workspace(p.workspace_id).tabs
    else:
        tabs = list(mux.all_tabs())
    return tabs_result(call.ctx, tabs)


class TabTarget(Params):
    tab_id: str


@methods.method("tab.get", TabTarget)
async def tab_get(call: Call[TabServices], p: TabTarget) -> Result:
    mux = call.ctx.mux
    return tab_result(call.ctx, mux.tab(p.tab_id))


@methods.method("tab.focus", TabTarget)
async def tab_focus(call: Call[TabServices], p: TabTarget) -> Result:
    mux = call.ctx.mux
    tab = mux.tab(p.tab_id)
    mux.focus_tab(tab)
    return tab_result(call.ctx, tab)


class TabRenameParams(TabTarget):
    label: str = Field(max_length=256)


@methods.method("tab.rename", TabRenameParams)
async def tab_rename(call: Call[TabServices], p: TabRenameParams) -> Result:
    """Set the tab label; empty restores the positional default."""
    mux = call.ctx.mux
    tab = mux.tab(p.tab_id)
    mux.rename_tab(tab, p.label.strip())
    return tab_result(call.ctx, tab)


@methods.method("tab.close", TabTarget)
async def tab_close(call: Call[TabServices], p: TabTarget) -> Result:
    """Close the tab; the workspace closes with its last tab."""
    mux = call.ctx.mux
    mux.close_tab(mux.tab(p.tab_id))
    return {"type": "ok"}


class TabMoveParams(TabTarget):
    insert_index: int = Field(ge=0)


@methods.method("tab.move", TabMoveParams)
async def tab_move(call: Call[TabServices], p: TabMoveParams) -> Result:
    """Move a tab to gap ``insert_index`` (0..number of tabs) of its workspace."""
    mux = call.ctx.mux
    tab = mux.tab(p.tab_id)
    arrange.move_tab(mux, tab, p.insert_index)
    return tabs_result(call.ctx, tab.workspace.tabs)


@methods.method("tab.action", SurfaceActionParams)
async def tab_action(call: Call[TabServices], p: SurfaceActionParams) -> Result:
    """A tab context-menu action on a surface (``tab_id`` or ``surface_id``): rename,
    clear_name, close_left/right/others, new_terminal_right, duplicate, pin, unpin,
    mark_unread, mark_read, move_to_new_workspace."""
    return await run_action(call.ctx.mux, call.ctx.settings, p)
