"""The events the model publishes: one frozen dataclass per kind.

Each names the objects a change is about; ``cmux_core.api.wire`` projects it to its wire
data when it is published, so ids, labels and snapshots are those of that moment. A
publisher that must report an earlier state prepares the event first
(:meth:`cmux_core.events.EventHub.prepare`): :class:`WorkspaceClosed` with ``snapshot``
shows the workspace as it was before its tabs closed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from cmux_core.events import Event, Notice
from cmux_core.model.tree import Pane, Surface, Tab, Workspace

__all__ = [
    "LayoutUpdated", "PaneClosed", "PaneCreated", "PaneCwdChanged", "PaneExited",
    "PaneFocused", "PaneMoved", "PaneNotification", "PaneProgressChanged", "PaneUpdated",
    "TabClosed", "TabCreated", "TabFocused", "TabMoved", "TabRenamed", "TabViewed",
    "TerminalStarted", "WorkspaceClosed", "WorkspaceCreated", "WorkspaceFocused",
    "WorkspaceMoved", "WorkspaceRenamed", "WorkspaceReordered",
]


# -- workspaces -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkspaceCreated(Event):
    kind: ClassVar[str] = "workspace_created"
    workspace: Workspace


@dataclass(frozen=True, slots=True)
class WorkspaceClosed(Event):
    """``snapshot``: the data carries the workspace's info (prepared before it closed)."""

    kind: ClassVar[str] = "workspace_closed"
    workspace: Workspace
    snapshot: bool = True


@dataclass(frozen=True, slots=True)
class WorkspaceRenamed(Event):
    kind: ClassVar[str] = "workspace_renamed"
    workspace: Workspace


@dataclass(frozen=True, slots=True)
class WorkspaceMoved(Event):
    """``workspace`` moved to gap ``insert_index``; the data lists every workspace."""

    kind: ClassVar[str] = "workspace_moved"
    workspace: Workspace
    insert_index: int


@dataclass(frozen=True, slots=True)
class WorkspaceReordered(Event):
    """``block`` moved, in its order, before ``before`` (None: to the end)."""

    kind: ClassVar[str] = "workspace_reordered"
    block: tuple[Workspace, ...]
    before: Workspace | None


@dataclass(frozen=True, slots=True)
class WorkspaceFocused(Event):
    kind: ClassVar[str] = "workspace_focused"
    workspace: Workspace


# -- tabs -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TabCreated(Event):
    kind: ClassVar[str] = "tab_created"
    tab: Tab


@dataclass(frozen=True, slots=True)
class TabClosed(Event):
    kind: ClassVar[str] = "tab_closed"
    tab: Tab


@dataclass(frozen=True, slots=True)
class TabRenamed(Event):
    kind: ClassVar[str] = "tab_renamed"
    tab: Tab


@dataclass(frozen=True, slots=True)
class TabMoved(Event):
    """``tab`` moved to gap ``insert_index``; the data lists its workspace's tabs."""

    kind: ClassVar[str] = "tab_moved"
    tab: Tab
    insert_index: int


@dataclass(frozen=True, slots=True)
class TabFocused(Event):
    kind: ClassVar[str] = "tab_focused"
    tab: Tab


# -- panes ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PaneCreated(Event):
    kind: ClassVar[str] = "pane_created"
    pane: Pane


@dataclass(frozen=True, slots=True)
class PaneClosed(Event):
    kind: ClassVar[str] = "pane_closed"
    pane: Pane


@dataclass(frozen=True, slots=True)
class PaneUpdated(Event):
    kind: ClassVar[str] = "pane_updated"
    pane: Pane


@dataclass(frozen=True, slots=True)
class PaneFocused(Event):
    kind: ClassVar[str] = "pane_focused"
    pane: Pane


@dataclass(frozen=True, slots=True)
class PaneExited(Event):
    """The process of the pane's selected surface ended."""

    kind: ClassVar[str] = "pane_exited"
    pane: Pane
    exit_code: int | None


@dataclass(frozen=True, slots=True)
class PaneCwdChanged(Event):
    kind: ClassVar[str] = "pane_cwd_changed"
    pane: Pane
    cwd: str


@dataclass(frozen=True, slots=True)
class PaneProgressChanged(Event):
    """``progress`` as the program sent it (OSC 9;4): ``"<state>;<percent>"``."""

    kind: ClassVar[str] = "pane_progress_changed"
    pane: Pane
    progress: str


@dataclass(frozen=True, slots=True)
class PaneNotification(Event):
    """``dropped``: notifications the terminal sent since the previous event that were
    discarded by its rate limit (:mod:`cmux_core.model.throttle`). ``surface``: the
    terminal that sent it (None when it is not known: the pane's shown terminal)."""

    kind: ClassVar[str] = "pane_notification"
    pane: Pane
    body: str
    title: str | None = None
    dropped: int = 0
    surface: Surface | None = None


@dataclass(frozen=True, slots=True)
class PaneMoved(Event):
    """``pane`` (now in its new tab) came from the ``previous_*`` ids; the move created
    and closed what the other fields name."""

    kind: ClassVar[str] = "pane_moved"
    pane: Pane
    previous_pane_id: str
    previous_workspace_id: str
    previous_tab_id: str
    created_workspace: Workspace | None = None
    created_tab: Tab | None = None
    closed_workspace_id: str | None = None
    closed_tab_id: str | None = None


# -- layout ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LayoutUpdated(Event):
    kind: ClassVar[str] = "layout_updated"
    tab: Tab


# -- notices (never on the wire) ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TabViewed(Notice):
    """A focus call showed ``tab`` to the user, even when focus did not move."""

    tab: Tab


@dataclass(frozen=True, slots=True)
class TerminalStarted(Notice):
    """``surface`` got its terminal in ``pane`` (new, or moved there); published before
    any of the terminal's output is read."""

    pane: Pane
    surface: Surface
