"""The objects the mux holds: windows, workspaces, tabs, panes and surfaces.

Plain dataclasses compared by identity; only ``Mux`` creates, links and changes them.
A pane's and a tab's public id is derived from its workspace's id and its number, so
it follows a move.

:data:`LIVE_PANES` holds every pane object not yet freed, weakly: a closed pane that
stays in it is kept alive by something that forgot to let it go.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from cmux_core import ids
from cmux_core.errors import CmuxError
from cmux_core.model import layout
from cmux_core.terminal.process import Terminal


@dataclass(eq=False)
class Surface:
    """A tab of a pane (the cmux API's unit of input and output): a terminal, or a
    markdown surface showing a file (``path``), which has no process."""

    uuid: str
    ref: str
    term: Terminal | None
    """The surface's terminal; None for a markdown surface."""
    pane: Pane
    command: list[str] | None
    launch_cwd: str
    created_at: float = field(default_factory=time.time)
    title: str | None = None
    """A name given by ``tab.action rename``; it wins over the terminal's own title."""
    pinned: bool = False
    unread: bool = False
    flash_count: int = 0
    """How many times the surface was flashed (``surface.trigger_flash``)."""
    tty: str | None = None
    """The terminal device its shell reported (``surface.report_tty``)."""
    shell_state: str | None = None
    """What its shell last reported it is doing (``surface.report_shell_state``)."""
    env: dict[str, str] | None = None
    """The env its creator asked for (besides the workspace's and cmux's own), kept so a
    restored session starts it with the same."""
    path: str | None = None
    """The absolute path of the file a markdown surface shows (None for a terminal)."""
    requested_command: str | None = None
    """The command as its creator wrote it (``initial_command``, a layout surface's
    ``command``), which ``layout.save`` keeps; None when none was given as text."""

    @property
    def kind(self) -> str:
        """``"terminal"`` or ``"markdown"``, as the cmux API names surface types."""
        return "terminal" if self.term is not None else "markdown"

    @property
    def terminal(self) -> Terminal:
        """The surface's terminal; ``invalid_params`` "Surface is not a terminal" for a
        markdown surface, so input and screen reads refuse it with cmux's error."""
        if self.term is None:
            raise CmuxError("invalid_params", "Surface is not a terminal",
                            {"surface_id": self.uuid, "type": self.kind})
        return self.term

    @terminal.setter
    def terminal(self, term: Terminal) -> None:
        self.term = term

    @property
    def own_title(self) -> str:
        """The title the content gives: the terminal's (OSC) title, or the file name."""
        if self.term is None:
            return Path(self.path or "").name
        return self.term.emulator.title or ""


@dataclass(eq=False)
class Pane:
    key: str
    number: int
    ref: str
    tab: Tab
    surfaces: list[Surface] = field(default_factory=list)
    selected: Surface | None = None
    label: str | None = None
    title_revision: int = 0
    last_title_stripped: str | None = None
    cwd: str | None = None

    def __post_init__(self) -> None:
        LIVE_PANES.add(self)

    @property
    def id(self) -> str:
        return ids.pane_id(self.tab.workspace.id, self.number)

    @property
    def surface(self) -> Surface:
        assert self.selected is not None
        return self.selected

    @property
    def terminal_surface(self) -> Surface:
        """The surface the pane's terminal belongs to: the selected one, or when a
        markdown surface is selected the first terminal surface in tab order (a pane
        always keeps one)."""
        selected = self.surface
        if selected.term is not None:
            return selected
        return next(s for s in self.surfaces if s.term is not None)

    @property
    def terminal(self) -> Terminal:
        """The pane's terminal (the herdr family's pane is this terminal)."""
        return self.terminal_surface.terminal


@dataclass(eq=False)
class Tab:
    uuid: str
    number: int
    workspace: Workspace
    tree: layout.Node
    focused: str
    previous_focus: str | None = None
    zoomed: bool = False
    label: str | None = None

    @property
    def id(self) -> str:
        return ids.tab_id(self.workspace.id, self.number)


@dataclass(eq=False)
class Workspace:
    id: str
    uuid: str
    ref: str
    window: Window
    cwd: str
    env: dict[str, str]
    label: str | None = None
    tabs: list[Tab] = field(default_factory=list)
    active_tab: Tab | None = None
    next_tab_number: int = 1
    next_pane_number: int = 1
    description: str = ""
    pinned: bool = False
    """A pinned workspace refuses ``workspace.close`` (cmux's sidebar pin)."""
    color: str | None = None
    auto_title: str | None = None
    """A title an agent's hook proposed; the label wins over it, the cwd name loses."""
    last_prompt: str | None = None
    last_prompt_at: float | None = None


@dataclass(eq=False)
class Window:
    uuid: str
    ref: str
    workspaces: list[Workspace] = field(default_factory=list)
    selected: Workspace | None = None
    previous: Workspace | None = None


LIVE_PANES: weakref.WeakSet[Pane] = weakref.WeakSet()
"""Every :class:`Pane` created and not yet freed (closed ones until the collector runs)."""


def auto_label(cwd: str) -> str:
    """Workspace name when none was given: git repo name, ``~``, or the cwd basename."""
    path = Path(cwd)
    home = Path.home()
    for p in (path, *path.parents):
        if (p / ".git").exists():
            return p.name or "workspace"
        if p == home:
            break
    if path == home:
        return "~"
    return path.name or "workspace"
