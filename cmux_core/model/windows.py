"""Windows and the workspaces in them: closing a window, moving a workspace to another
window, and stepping the selection through a window's workspaces.

Functions over :class:`~cmux_core.model.mux.Mux` (the only owner of the model), in the
manner of :mod:`cmux_core.model.arrange`. Every change publishes its events and, when
the active workspace or focused pane changed, the focus triple, as the mux's own
methods do.
"""

from __future__ import annotations

from typing import Literal

from cmux_core.errors import CmuxError
from cmux_core.model import layout
from cmux_core.model.events import LayoutUpdated, WorkspaceMoved
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Window, Workspace

Step = Literal["next", "previous"]


def create_window(mux: Mux, *, cwd: str | None = None, focus: bool = False) -> Window:
    """A new window holding one workspace with one terminal. It becomes the active window
    only with ``focus`` (or when there was none). Raises ``spawn_failed`` and leaves no
    window behind when the terminal cannot start."""
    window = mux.create_window()
    try:
        mux.create_workspace(cwd=cwd, window=window)
    except CmuxError:
        mux.windows.remove(window)
        mux._forget(window.uuid, window.ref)
        if mux.active_window is window:
            mux.active_window = None
        raise
    if focus:
        focus_window(mux, window)
    return window


def focus_window(mux: Mux, window: Window) -> None:
    """Make ``window`` the active one (its selected workspace becomes the active one)."""
    before = mux._focus_key()
    mux.active_window = window
    mux._emit_focus_if_changed(before)
    if window.selected is not None and window.selected.active_tab is not None:
        mux._viewed(window.selected.active_tab)


def close_window(mux: Mux, window: Window) -> None:
    """Close every workspace of ``window`` (and their terminals), then the window. When
    it was the active window, the window that takes its place in the list (else the one
    before it) becomes active."""
    before = mux._focus_key()
    for ws in list(window.workspaces):
        mux.close_workspace(ws)
    index = mux.windows.index(window)
    mux.windows.remove(window)
    mux._forget(window.uuid, window.ref)
    if mux.active_window is window:
        mux.active_window = (mux.windows[min(index, len(mux.windows) - 1)]
                             if mux.windows else None)
    mux._emit_focus_if_changed(before)


def _detach(window: Window, ws: Workspace) -> None:
    """Take ``ws`` out of ``window``; a selected one gives way to its neighbour (the one
    that takes its place, else the one before it)."""
    index = window.workspaces.index(ws)
    window.workspaces.remove(ws)
    if window.previous is ws:
        window.previous = None
    if window.selected is ws:
        window.selected = (window.workspaces[min(index, len(window.workspaces) - 1)]
                           if window.workspaces else None)


def move_to_window(mux: Mux, ws: Workspace, dest: Window, *, focus: bool = False) -> bool:
    """Append ``ws`` to ``dest``'s workspaces; its panes and surfaces keep their ids.

    The workspace is selected in ``dest`` when ``focus`` (which also makes ``dest`` the
    active window) or when ``dest`` had no selected workspace. Publishes
    ``workspace_moved`` when the workspace changed window; returns whether it did.
    """
    before = mux._focus_key()
    moved = ws.window is not dest
    if moved:
        _detach(ws.window, ws)
        dest.workspaces.append(ws)
        ws.window = dest
        if dest.selected is None:
            dest.selected = ws
    if focus:
        mux._select_workspace(ws)
    if moved:
        mux.events.publish(WorkspaceMoved(ws, dest.workspaces.index(ws)))
    mux._emit_focus_if_changed(before)
    return moved


def step(mux: Mux, window: Window, direction: Step) -> Workspace:
    """Select the workspace after (or before) the selected one in ``window``, wrapping
    around; raises ``not_found`` when the window has no selected workspace."""
    current = window.selected
    if current is None:
        raise CmuxError("not_found", "No workspace selected")
    order = window.workspaces
    offset = 1 if direction == "next" else -1
    target = order[(order.index(current) + offset) % len(order)]
    mux.focus_workspace(target)
    return target


def select_last(mux: Mux, window: Window) -> Workspace:
    """Select the workspace that was selected in ``window`` before the current one;
    raises ``not_found`` when there is none (or it has closed)."""
    previous = window.previous
    if previous is None or previous not in window.workspaces:
        raise CmuxError("not_found", "No previous workspace in history")
    mux.focus_workspace(previous)
    return previous


def equalize(mux: Mux, ws: Workspace, orientation: layout.Direction | None = None) -> bool:
    """Set every split of ``ws``'s tabs (of one orientation, when given) to an even
    share; publishes ``layout_updated`` per changed tab and returns whether any did."""
    changed = False
    for tab in ws.tabs:
        tree = _even(tab.tree, orientation)
        if tree is tab.tree:
            continue
        tab.tree = tree
        changed = True
        mux.apply_sizes(tab)
        mux.events.publish(LayoutUpdated(tab))
    return changed


def _even(node: layout.Node, orientation: layout.Direction | None) -> layout.Node:
    if isinstance(node, layout.Leaf):
        return node
    first = _even(node.first, orientation)
    second = _even(node.second, orientation)
    ratio = node.ratio
    if orientation is None or node.direction == orientation:
        ratio = layout.DEFAULT_RATIO
    if first is node.first and second is node.second and ratio == node.ratio:
        return node
    return layout.Split(node.direction, ratio, first, second)
