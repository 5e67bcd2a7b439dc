"""Rearranging the model: swap, move, zoom, resize, directional focus, split ratios,
portable layouts, and the order of tabs and workspaces.

Every function here works on a :class:`~cmux_core.model.mux.Mux` already holding resolved
objects: the method handlers (``cmux_core.api.methods``: ``pane.arrangement``, ``layout``,
``tab``, ``workspace``) resolve ids and raise the not-found errors first. A function
either raises before changing anything or finishes the whole change; it then sizes every
terminal of the tabs it touched to its rect (``Mux.apply_sizes``), publishes its events in
the documented order and returns its result: a typed record that ``cmux_core.api.wire``
projects, or the portable LayoutDescription (:func:`describe`). No-ops return a
``reason`` (``changed: False`` on the wire) and publish nothing.

Focus events (``workspace_focused``, ``tab_focused``, ``pane_focused``) always come
last, after the layout and structure events of the same change, except for
``pane.zoom``, which focuses its pane before it zooms.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cmux_core import ids
from cmux_core.errors import CmuxError
from cmux_core.model import layout
from cmux_core.model.events import (
    LayoutUpdated,
    PaneClosed,
    PaneCreated,
    PaneMoved,
    TabClosed,
    TabCreated,
    TabMoved,
    WorkspaceClosed,
    WorkspaceCreated,
    WorkspaceMoved,
    WorkspaceReordered,
)
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Pane, Tab, Window, Workspace
from cmux_core.terminal import procfs

Result = dict[str, Any]
ZoomMode = Literal["toggle", "on", "off"]


# -- shared pieces --------------------------------------------------------------------


def _focused_id(mux: Mux, tab: Tab) -> str:
    return mux.panes[tab.focused].id


def _publish_layout(mux: Mux, tab: Tab) -> None:
    mux.events.publish(LayoutUpdated(tab))


def _active_tab(mux: Mux) -> Tab:
    ws = mux.active_workspace()
    if ws is None or ws.active_tab is None:
        raise CmuxError("pane_layout_unavailable", "no active tab")
    return ws.active_tab


def current_cwd(mux: Mux, pane: Pane) -> str | None:
    """The directory the pane's program works in now.

    A cwd the program reported (OSC 7) wins, then the live shell's own cwd, then the
    directory it was launched in.
    """
    if pane.cwd:
        return pane.cwd
    term = pane.terminal
    if not term.exited and term.pid:
        cwd = procfs.cwd(term.pid)
        if cwd is not None:
            return cwd
    return pane.terminal_surface.launch_cwd


# -- reads ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Neighbor:
    """The pane nearest to ``pane`` in ``direction`` (None at the edge)."""

    pane: Pane
    direction: layout.PaneDirection
    neighbor: Pane | None


def neighbor(mux: Mux, pane: Pane, direction: layout.PaneDirection) -> Neighbor:
    other = layout.neighbor(pane.tab.tree, mux.area, pane.key, direction)
    return Neighbor(pane, direction, mux.panes[other] if other else None)


@dataclass(frozen=True, slots=True)
class Edges:
    """Which sides of the area ``pane`` touches: keys left, right, up, down."""

    pane: Pane
    touching: dict[str, bool]


def edges(mux: Mux, pane: Pane) -> Edges:
    return Edges(pane, layout.edges(pane.tab.tree, mux.area, pane.key))


# -- swap -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Swap:
    """A swap in ``tab`` (``reason`` None) or why none happened; the pane ids are as the
    request named them when a handle did not resolve."""

    tab: Tab
    reason: str | None
    source_pane_id: str
    target_pane_id: str | None


def swap_direction(mux: Mux, source: Pane, direction: layout.PaneDirection) -> Swap:
    """Swap ``source`` with its nearest neighbour in ``direction`` (reason ``no_neighbor``)."""
    tab = source.tab
    other = layout.neighbor(tab.tree, mux.area, source.key, direction)
    if other is None:
        return Swap(tab, "no_neighbor", source.id, None)
    return _swap(mux, source, mux.panes[other])


def swap_panes(mux: Mux, source_text: str, target_text: str) -> Swap:
    """Swap two panes named by handles.

    Unresolvable handles give reason ``not_found`` (echoing the raw text), one pane
    twice ``same_pane``, panes of different tabs ``cross_tab``. Raises
    ``pane_layout_unavailable`` only when neither pane resolves and no tab is active.
    """
    source, target = mux.find_pane(source_text), mux.find_pane(target_text)
    if source is None or target is None:
        known = source or target
        tab = known.tab if known is not None else _active_tab(mux)
        return Swap(tab, "not_found", source.id if source else source_text,
                    target.id if target else target_text)
    if source is target:
        return Swap(source.tab, "same_pane", source.id, target.id)
    if source.tab is not target.tab:
        return Swap(source.tab, "cross_tab", source.id, target.id)
    return _swap(mux, source, target)


def _swap(mux: Mux, source: Pane, target: Pane) -> Swap:
    """Exchange the two leaves and focus ``source`` (now where ``target`` was)."""
    tab = source.tab
    before = mux._focus_key()
    tab.tree = layout.swap(tab.tree, source.key, target.key)
    mux._place_focus(source)
    mux.apply_sizes(tab)
    _publish_layout(mux, tab)
    mux._emit_focus_if_changed(before)
    return Swap(tab, None, source.id, target.id)


# -- focus, zoom, resize, ratios --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FocusMove:
    """Focus moved from ``source`` to its neighbour (``changed``), or had nowhere to go."""

    source: Pane
    changed: bool


def focus_direction(mux: Mux, source: Pane, direction: layout.PaneDirection) -> FocusMove:
    """Focus the nearest pane in ``direction``; ``no_neighbor`` leaves focus alone."""
    tab = source.tab
    other = layout.neighbor(tab.tree, mux.area, source.key, direction)
    if other is None:
        return FocusMove(source, False)
    before = mux._focus_key()
    mux._place_focus(mux.panes[other])
    mux.apply_sizes(tab)
    _publish_layout(mux, tab)
    mux._emit_focus_if_changed(before)
    return FocusMove(source, True)


@dataclass(frozen=True, slots=True)
class Zoom:
    pane: Pane
    zoom_changed: bool
    focus_changed: bool
    reason: str | None


def zoom(mux: Mux, pane: Pane, mode: ZoomMode) -> Zoom:
    """Focus ``pane`` (switching workspace and tab), then zoom its tab in or out.

    ``changed`` is ``zoom_changed or focus_changed``. Zoom needs two panes or more
    (reason ``single_pane``); ``on``/``off`` when already so give ``already_zoomed`` /
    ``already_unzoomed``. Events: the focus triple, then ``layout_updated``.
    """
    tab = pane.tab
    before = mux._focus_key()
    mux._place_focus(pane)
    focus_changed = mux._focus_key() != before
    several = len(layout.panes(tab.tree)) > 1
    reason: str | None = None
    if mode == "off" or (mode == "toggle" and tab.zoomed):
        wanted = False
        if not tab.zoomed:
            reason = "already_unzoomed"
    else:
        wanted = True
        if not several:
            reason = "single_pane"
        elif tab.zoomed:
            reason = "already_zoomed"
    zoom_changed = reason is None
    if zoom_changed:
        tab.zoomed = wanted
    mux.apply_sizes(tab)
    mux._emit_focus_if_changed(before)
    if zoom_changed or focus_changed:
        _publish_layout(mux, tab)
    return Zoom(pane, zoom_changed, focus_changed, reason)


@dataclass(frozen=True, slots=True)
class Resize:
    pane: Pane
    changed: bool


def resize(mux: Mux, pane: Pane, direction: layout.PaneDirection, amount: float) -> Resize:
    """Move the divider beside ``pane`` (digest §k.6); ``unchanged`` when no ratio moved."""
    tab = pane.tab
    tree = layout.resize(tab.tree, mux.area, pane.key, direction, amount)
    changed = tree is not tab.tree
    if changed:
        tab.tree = tree
        mux.apply_sizes(tab)
        _publish_layout(mux, tab)
    return Resize(pane, changed)


def set_split_ratio(mux: Mux, tab: Tab, path: Sequence[bool], ratio: float) -> Result:
    """Set one split's ratio (clamped); publishes ``layout_updated`` even when unchanged.

    Raises ``invalid_ratio`` (non-finite) or ``split_not_found`` before any change.
    """
    tab.tree = layout.set_split_ratio(tab.tree, path, ratio)
    mux.apply_sizes(tab)
    _publish_layout(mux, tab)
    return describe(mux, tab)


# -- portable layouts -----------------------------------------------------------------


def describe(mux: Mux, tab: Tab) -> Result:
    """The tab as a LayoutDescription (``layout.export``); leaves never carry ``env``."""

    def leaf(key: str) -> dict[str, Any]:
        pane = mux.panes[key]
        fields: dict[str, Any] = {"pane_id": pane.id}
        if pane.label:
            fields["label"] = pane.label
        cwd = current_cwd(mux, pane)
        if cwd:
            fields["cwd"] = cwd
        if pane.terminal_surface.command:
            fields["command"] = list(pane.terminal_surface.command)
        return fields

    return {"workspace_id": tab.workspace.id, "tab_id": tab.id, "zoomed": tab.zoomed,
            "focused_pane_id": _focused_id(mux, tab), "root": layout.to_portable(tab.tree, leaf)}


def _leaf_cwd(spec: Mapping[str, Any], base: str) -> str:
    raw = spec.get("cwd")
    if not raw:
        return base
    path = Path(base) / Path(raw).expanduser()
    try:
        is_dir = path.is_dir()
    except (OSError, ValueError) as exc:  # a name too long, a NUL
        raise CmuxError("layout_apply_failed", f"working directory {raw!r}: {exc}") from None
    if not is_dir:
        raise CmuxError("layout_apply_failed", f"working directory {raw} does not exist")
    return str(path)


def apply(mux: Mux, ws: Workspace, root: object, *, replace: Tab | None = None,
          tab_label: str | None = None, focus: bool = False) -> Result:
    """Build a new tab in ``ws`` from a LayoutNode tree; with ``replace``, swap it in.

    The tree is validated first (``invalid_layout`` / ``invalid_env``) and every leaf's
    cwd checked; then every pane is spawned at its final size. When any spawn fails,
    every pane created so far is closed and ``layout_apply_failed`` raised: nothing
    was published and the workspace is as before. On success the new tab takes
    ``replace``'s place in the tab order (else it is appended) and its left-most pane
    is focused within it; it becomes the workspace's active tab when ``focus``, when
    ``replace`` was active, or when the workspace had none, and ``focus`` also selects
    the workspace. Events: ``tab_created``, ``pane_created`` per pane in creation
    order, ``layout_updated``, then for ``replace`` its ``pane_closed`` events and
    ``tab_closed``, then the focus triple.
    """
    steps = layout.plan_apply(root)
    if replace is not None:
        old_focus = mux.panes[replace.focused]
        base = current_cwd(mux, old_focus) or ws.cwd
    else:
        base = mux._workspace_cwd(ws)
    if not Path(base).is_dir():
        base = ws.cwd
    cwds = {step.leaf: _leaf_cwd(step.spec, base) for step in steps}

    # Lay the tree out with stand-in keys so each terminal starts at its final size.
    stand_in = {step.leaf: f"\0{step.leaf}" for step in steps}
    probe = _build_tree(steps, stand_in)
    sizes = layout.rects(probe, mux.area)

    label = tab_label or (replace.label if replace is not None else None)
    tab = Tab(ids.new_uuid(), ws.next_tab_number, ws, layout.Leaf(""), "", label=label)
    first_number = ws.next_pane_number
    created: dict[int, Pane] = {}
    try:
        for step in steps:
            rect = sizes[stand_in[step.leaf]]
            created[step.leaf] = mux._new_pane(
                tab, cwd=cwds[step.leaf], command=step.spec.get("command"),
                env=step.spec.get("env"), size=(max(rect.width, 2), max(rect.height, 1)))
    except CmuxError as exc:
        for pane in created.values():
            mux._discard_pane(pane)
        # The rolled-back panes were never published, so their numbers are free again.
        ws.next_pane_number = first_number
        raise CmuxError("layout_apply_failed", exc.message) from None
    for step in steps:
        created[step.leaf].label = step.spec.get("label") or None

    before = mux._focus_key()
    tab.tree = _build_tree(steps, {leaf: pane.key for leaf, pane in created.items()})
    tab.focused = created[0].key
    index = ws.tabs.index(replace) + 1 if replace is not None else len(ws.tabs)
    _add_tab(mux, tab, index)
    if focus or ws.active_tab is None or (replace is not None and ws.active_tab is replace):
        ws.active_tab = tab
    if focus:
        mux._select_workspace(ws)
    mux.apply_sizes(tab)
    mux.events.publish(TabCreated(tab))
    for step in steps:
        mux.events.publish(PaneCreated(created[step.leaf]))
    _publish_layout(mux, tab)
    if replace is not None:
        for pane in mux.tab_panes(replace):
            mux._discard_pane(pane)
            mux.events.publish(PaneClosed(pane))
        mux._remove_tab(replace)
    mux._emit_focus_if_changed(before)
    return describe(mux, tab)


def _build_tree(steps: Sequence[layout.BuildStep], keys: Mapping[int, str]) -> layout.Node:
    tree: layout.Node = layout.Leaf(keys[steps[0].leaf])
    for step in steps[1:]:
        assert step.split_of is not None and step.direction is not None
        tree = layout.split(tree, keys[step.split_of], keys[step.leaf], step.direction,
                            step.ratio if step.ratio is not None else layout.DEFAULT_RATIO)
    return tree


# -- tabs and workspaces without events (pane.move publishes its own) ----------------------


def _add_tab(mux: Mux, tab: Tab, index: int | None = None) -> None:
    """Put a built tab (numbered ``ws.next_tab_number``) into its workspace."""
    ws = tab.workspace
    ws.next_tab_number = max(ws.next_tab_number, tab.number + 1)
    ws.tabs.insert(len(ws.tabs) if index is None else index, tab)
    if ws.active_tab is None:
        ws.active_tab = tab
    mux._by_uuid[tab.uuid] = tab


def _drop_tab(mux: Mux, tab: Tab) -> None:
    """Take an emptied tab out of its workspace, moving the active tab to a neighbour."""
    ws = tab.workspace
    index = ws.tabs.index(tab)
    ws.tabs.remove(tab)
    mux._by_uuid.pop(tab.uuid, None)
    if ws.active_tab is tab:
        ws.active_tab = ws.tabs[min(index, len(ws.tabs) - 1)] if ws.tabs else None


def _add_workspace(mux: Mux, window: Window, cwd: str, label: str | None) -> Workspace:
    """Append an empty workspace to ``window``; the caller gives it a tab at once."""
    ws = Workspace(ids.workspace_id(mux._next_workspace), "", "", window, cwd, {},
                   label=label or None)
    mux._next_workspace += 1
    ws.uuid, ws.ref = mux._mint("workspace", ws)
    window.workspaces.append(ws)
    if window.selected is None:
        mux._select_workspace(ws)
    return ws


# -- pane.move -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToTab:
    """Split ``target`` (a pane of ``tab``) and put the moved pane second."""

    tab: Tab
    target: Pane
    split: layout.Direction
    ratio: float = layout.DEFAULT_RATIO


@dataclass(frozen=True, slots=True)
class ToNewTab:
    workspace: Workspace
    label: str | None = None


@dataclass(frozen=True, slots=True)
class ToNewWorkspace:
    label: str | None = None
    tab_label: str | None = None


Destination = ToTab | ToNewTab | ToNewWorkspace


@dataclass(frozen=True, slots=True)
class MoveResult:
    """A PaneMoveResult: the move (for a no-op, the pane where it stays), or the ``reason``
    nothing moved; ``source_tab`` is None when the move closed it."""

    moved: PaneMoved
    reason: str | None
    source_tab: Tab | None
    target_tab: Tab


def move(mux: Mux, pane: Pane, dest: Destination, *, focus: bool = False) -> MoveResult:
    """Move ``pane`` with its running terminal to ``dest``.

    No-ops: the pane's own tab as destination (``same_tab``); a zoomed source or
    destination tab (``zoomed_tab``). Crossing workspaces gives the pane a new number
    in the destination workspace and keeps its old public id as an alias. The source
    tab closes when emptied, and the source workspace too when the move crossed
    workspaces. Focus follows the pane only with ``focus`` (or when nothing is focused
    afterwards). Events: ``tab_closed``?, ``workspace_closed`` (no snapshot)?,
    ``workspace_created``?, ``tab_created``?, ``pane_moved``, ``layout_updated`` for the
    source tab if it remains, ``layout_updated`` for the destination, the focus triple.
    """
    src_tab = pane.tab
    src_ws = src_tab.workspace
    previous = (pane.id, src_ws.id, src_tab.id)
    reason = None
    if isinstance(dest, ToTab) and dest.tab is src_tab:
        reason = "same_tab"
    elif src_tab.zoomed or (isinstance(dest, ToTab) and dest.tab.zoomed):
        reason = "zoomed_tab"
    if reason is not None:
        shown = dest.tab if isinstance(dest, ToTab) else src_tab
        return MoveResult(PaneMoved(pane, *previous), reason, src_tab, shown)

    before = mux._focus_key()
    cwd = current_cwd(mux, pane) or src_ws.cwd
    remaining = layout.remove(src_tab.tree, pane.key)
    if remaining is not None:
        mux._shrink_tree(src_tab, pane.key, remaining)
    dest_tab, created_ws, created_tab = _destination(mux, pane, dest, src_ws.window, cwd)
    dest_ws = dest_tab.workspace
    if dest_ws is not src_ws:
        mux.aliases[pane.id] = pane.key
        pane.number = dest_ws.next_pane_number
        dest_ws.next_pane_number += 1
    pane.tab = dest_tab

    closed_tab_id = closed_ws_id = None
    if remaining is None:
        _drop_tab(mux, src_tab)
        closed_tab_id = src_tab.id
        if not src_ws.tabs and dest_ws is not src_ws:
            mux._detach_workspace(src_ws)
            closed_ws_id = src_ws.id
    if focus or mux.focused_pane() is None:
        mux._place_focus(pane)
    if remaining is not None:
        mux.apply_sizes(src_tab)
    mux.apply_sizes(dest_tab)

    if closed_tab_id is not None:
        mux.events.publish(TabClosed(src_tab))
    if closed_ws_id is not None:
        mux.events.publish(WorkspaceClosed(src_ws, snapshot=False))
    if created_ws is not None:
        mux.events.publish(WorkspaceCreated(created_ws))
    if created_tab is not None:
        mux.events.publish(TabCreated(created_tab))
    moved = PaneMoved(pane, *previous, created_workspace=created_ws, created_tab=created_tab,
                      closed_workspace_id=closed_ws_id, closed_tab_id=closed_tab_id)
    mux.events.publish(moved)
    if remaining is not None:
        mux.events.publish(LayoutUpdated(src_tab))
    mux.events.publish(LayoutUpdated(dest_tab))
    mux._emit_focus_if_changed(before)
    return MoveResult(moved, None, src_tab if remaining is not None else None, dest_tab)


def _destination(mux: Mux, pane: Pane, dest: Destination, window: Window, cwd: str
                 ) -> tuple[Tab, Workspace | None, Tab | None]:
    """Put ``pane`` (already out of its tab's tree) into the tree of ``dest``'s tab, making
    that tab (and its workspace, in ``window`` with ``cwd``) when ``dest`` asks for new
    ones. Returns the tab, then the workspace and the tab made (None: none)."""
    if isinstance(dest, ToTab):
        dest.tab.tree = layout.split(dest.tab.tree, dest.target.key, pane.key, dest.split,
                                     dest.ratio)
        return dest.tab, None, None
    created_ws: Workspace | None = None
    if isinstance(dest, ToNewTab):
        home, tab_label = dest.workspace, dest.label
    else:
        created_ws = home = _add_workspace(mux, window, cwd, dest.label)
        tab_label = dest.tab_label
    tab = Tab(ids.new_uuid(), home.next_tab_number, home, layout.Leaf(pane.key), pane.key,
              label=tab_label or None)
    _add_tab(mux, tab)
    return tab, created_ws, tab


# -- tab and workspace order ------------------------------------------------------------


def _reinsert(items: list[Any], item: Any, insert_index: int) -> bool:
    """Move ``item`` to gap ``insert_index`` (0..len) of ``items``; True when it moved."""
    current = items.index(item)
    target = insert_index - 1 if insert_index > current else insert_index
    if target == current:
        return False
    items.remove(item)
    items.insert(target, item)
    return True


def move_tab(mux: Mux, tab: Tab, insert_index: int) -> bool:
    """Reorder ``tab`` within its workspace; ``tab_move_failed`` past the end.

    Publishes ``tab_moved`` only when the order changed; returns whether it did.
    """
    ws = tab.workspace
    if insert_index > len(ws.tabs):
        raise CmuxError("tab_move_failed",
                        f"insert_index {insert_index} is past the end ({len(ws.tabs)})")
    if not _reinsert(ws.tabs, tab, insert_index):
        return False
    mux.events.publish(TabMoved(tab, insert_index))
    return True


def move_workspace(mux: Mux, ws: Workspace, insert_index: int) -> bool:
    """Reorder ``ws`` within its window; ``workspace_move_failed`` past the end.

    Publishes ``workspace_moved`` only when the order changed; returns whether it did.
    """
    order = ws.window.workspaces
    if insert_index > len(order):
        raise CmuxError("workspace_move_failed",
                        f"insert_index {insert_index} is past the end ({len(order)})")
    if not _reinsert(order, ws, insert_index):
        return False
    mux.events.publish(WorkspaceMoved(ws, insert_index))
    return True


def move_workspace_block(mux: Mux, block: Sequence[Workspace],
                         before: Workspace | None) -> bool:
    """Re-insert ``block`` in its given order before ``before`` (else at the end).

    Raises ``workspace_move_block_failed`` for an empty block, a workspace named twice,
    an anchor inside the block, or workspaces of different windows. Publishes
    ``workspace_reordered`` only when the order changed; returns whether it did.
    """
    if not block:
        raise CmuxError("workspace_move_block_failed", "workspace_ids must not be empty")
    if len({id(ws) for ws in block}) != len(block):
        raise CmuxError("workspace_move_block_failed", "a workspace is listed twice")
    if before is not None and any(ws is before for ws in block):
        raise CmuxError("workspace_move_block_failed",
                        "before_workspace_id is one of the moved workspaces")
    window = block[0].window
    if any(ws.window is not window for ws in block) or (
            before is not None and before.window is not window):
        raise CmuxError("workspace_move_block_failed", "workspaces are in different windows")
    rest = [ws for ws in window.workspaces if all(ws is not b for b in block)]
    at = rest.index(before) if before is not None else len(rest)
    order = [*rest[:at], *block, *rest[at:]]
    if order == window.workspaces:
        return False
    window.workspaces[:] = order
    mux.events.publish(WorkspaceReordered(tuple(block), before))
    return True
