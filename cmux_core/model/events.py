"""The events the model publishes: one frozen dataclass per kind.

Each names the objects a change is about; ``cmux_core.api.wire`` projects it to its wire
data when it is published, so ids, labels and snapshots are those of that moment. A
publisher that must report an earlier state prepares the event first
(:meth:`cmux_core.events.EventHub.prepare`): :class:`WorkspaceClosed` with ``snapshot``
shows the workspace as it was before its tabs closed.
"""

from __future__ import annotations

from cmux_core.events import Event, Notice, event, notice
from cmux_core.model.tree import Pane, Surface, Tab, Workspace

__all__ = [
    "LayoutUpdated", "PaneClosed", "PaneCreated", "PaneCwdChanged", "PaneExited",
    "PaneFocused", "PaneMoved", "PaneNotification", "PaneProgressChanged", "PaneUpdated",
    "TabClosed", "TabCreated", "TabFocused", "TabMoved", "TabRenamed", "TabViewed",
    "TerminalStarted", "WorkspaceClosed", "WorkspaceCreated", "WorkspaceFocused",
    "WorkspaceMoved", "WorkspaceRenamed", "WorkspaceReordered",
]


# -- workspaces -----------------------------------------------------------------------------


@event("workspace_created")
class WorkspaceCreated(Event):
    workspace: Workspace


@event("workspace_closed")
class WorkspaceClosed(Event):
    """``snapshot``: the data carries the workspace's info (prepared before it closed)."""

    workspace: Workspace
    snapshot: bool = True


@event("workspace_renamed")
class WorkspaceRenamed(Event):
    workspace: Workspace


@event("workspace_moved")
class WorkspaceMoved(Event):
    """``workspace`` moved to gap ``insert_index``; the data lists every workspace."""

    workspace: Workspace
    insert_index: int


@event("workspace_reordered")
class WorkspaceReordered(Event):
    """``block`` moved, in its order, before ``before`` (None: to the end)."""

    block: tuple[Workspace, ...]
    before: Workspace | None


@event("workspace_focused")
class WorkspaceFocused(Event):
    workspace: Workspace


# -- tabs -----------------------------------------------------------------------------------


@event("tab_created")
class TabCreated(Event):
    tab: Tab


@event("tab_closed")
class TabClosed(Event):
    tab: Tab


@event("tab_renamed")
class TabRenamed(Event):
    tab: Tab


@event("tab_moved")
class TabMoved(Event):
    """``tab`` moved to gap ``insert_index``; the data lists its workspace's tabs."""

    tab: Tab
    insert_index: int


@event("tab_focused")
class TabFocused(Event):
    tab: Tab


# -- panes ----------------------------------------------------------------------------------


@event("pane_created")
class PaneCreated(Event):
    pane: Pane


@event("pane_closed")
class PaneClosed(Event):
    pane: Pane


@event("pane_updated")
class PaneUpdated(Event):
    pane: Pane


@event("pane_focused")
class PaneFocused(Event):
    pane: Pane


@event("pane_exited")
class PaneExited(Event):
    """The process of the pane's selected surface ended."""

    pane: Pane
    exit_code: int | None


@event("pane_cwd_changed")
class PaneCwdChanged(Event):
    pane: Pane
    cwd: str


@event("pane_progress_changed")
class PaneProgressChanged(Event):
    """``progress`` as the program sent it (OSC 9;4): ``"<state>;<percent>"``."""

    pane: Pane
    progress: str


@event("pane_notification")
class PaneNotification(Event):
    """``dropped``: notifications the terminal sent since the previous event that were
    discarded by its rate limit (:mod:`cmux_core.model.throttle`). ``surface``: the
    terminal that sent it (None when it is not known: the pane's shown terminal)."""

    pane: Pane
    body: str
    title: str | None = None
    dropped: int = 0
    surface: Surface | None = None


@event("pane_moved")
class PaneMoved(Event):
    """``pane`` (now in its new tab) came from the ``previous_*`` ids; the move created
    and closed what the other fields name."""

    pane: Pane
    previous_pane_id: str
    previous_workspace_id: str
    previous_tab_id: str
    created_workspace: Workspace | None = None
    created_tab: Tab | None = None
    closed_workspace_id: str | None = None
    closed_tab_id: str | None = None


# -- layout ---------------------------------------------------------------------------------


@event("layout_updated")
class LayoutUpdated(Event):
    tab: Tab


# -- notices (never on the wire) ------------------------------------------------------------


@notice
class TabViewed(Notice):
    """A focus call showed ``tab`` to the user, even when focus did not move."""

    tab: Tab


@notice
class TerminalStarted(Notice):
    """``surface`` got its terminal in ``pane`` (new, or moved there); published before
    any of the terminal's output is read."""

    pane: Pane
    surface: Surface
