"""Notifications: what programs and clients asked to bring to the user's attention.

The :class:`NotificationBook` keeps the list the cmux family's ``notification.*`` methods
read. Entries come from ``notification.create*`` calls and from terminal notifications
(OSC 9, OSC 777, kitty's OSC 99), which the mux publishes as ``pane_notification`` events;
a created one is published as such an event too, so subscribers see both kinds alike.

cmux's rules, kept here: a notification for the surface the user is looking at (the
focused surface while the app is active) is not kept; a new notification replaces the
older ones of the same surface; a focus call that shows a surface with an unread
notification flashes it and leaves it unread. Headless, "the app is active" is what the
client says (``app.focus_override.set``, ``app.simulate_active``, ``debug.app.activate``);
nothing is active until one of them says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from cmux_core import ids
from cmux_core.events import Event
from cmux_core.model.events import PaneNotification
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Surface, Tab, Workspace


@dataclass(eq=False)
class Notification:
    id: str
    workspace: Workspace
    surface: Surface | None
    title: str
    subtitle: str = ""
    body: str = ""
    created_at: float = field(default_factory=time.time)
    is_read: bool = False
    source: str = "api"
    """``api`` for notification.create*, ``terminal`` for an escape sequence."""


class NotificationBook:
    """The notifications of one server, newest last. Runs on the event loop."""

    def __init__(self, mux: Mux) -> None:
        self.mux = mux
        self.items: list[Notification] = []
        self.focus_override: bool | None = None
        """The app's focus as a client forced it (None: not forced)."""
        self.app_became_active = False
        self._publishing = False

    @property
    def app_active(self) -> bool:
        if self.focus_override is not None:
            return self.focus_override
        return self.app_became_active

    def _in_view(self, surface: Surface | None, ws: Workspace) -> bool:
        if not self.app_active or self.mux.active_workspace() is not ws:
            return False
        if surface is None:
            return True
        return self.mux.is_focused(surface.pane) and surface.pane.selected is surface

    def add(self, ws: Workspace, surface: Surface | None, title: str, subtitle: str = "",
            body: str = "", *, source: str = "api") -> Notification | None:
        """Record a notification; None when it was not kept (the user is looking at its
        surface). It replaces the older notifications of the same surface (of the
        workspace, for one without a surface). An ``api`` one is published as a
        ``pane_notification`` event of its surface's pane."""
        if self._in_view(surface, ws):
            return None
        self.items = [n for n in self.items
                      if not (n.workspace is ws and n.surface is surface)]
        note = Notification(ids.new_uuid(), ws, surface, title, subtitle, body, source=source)
        self.items.append(note)
        if source == "api" and surface is not None:
            self._publishing = True
            try:
                self.mux.events.publish(PaneNotification(surface.pane, body, title or None))
            finally:
                self._publishing = False
        return note

    def live(self) -> list[Notification]:
        """The notifications whose workspace (and surface) still exist, newest last."""
        self.items = [n for n in self.items
                      if self.mux.find_workspace(n.workspace.uuid) is n.workspace
                      and (n.surface is None or self.mux.find_surface(n.surface.uuid)
                           is n.surface)]
        return list(self.items)

    def find(self, note_id: str) -> Notification | None:
        return next((n for n in self.live() if n.id == note_id.strip().upper()), None)

    def clear(self, ws: Workspace | None = None) -> int:
        """Drop every notification (of ``ws``); returns how many went."""
        before = len(self.items)
        self.items = [n for n in self.items if ws is not None and n.workspace is not ws]
        return before - len(self.items)

    def remove(self, notes: list[Notification]) -> None:
        self.items = [n for n in self.items if n not in notes]

    def unread_for(self, surface: Surface) -> bool:
        return any(not n.is_read and n.surface is surface for n in self.live())

    def on_event(self, event: Event) -> None:
        """Hub observer: keep terminal notifications."""
        if isinstance(event, PaneNotification) and not self._publishing:
            pane = event.pane
            if pane.key in self.mux.panes:
                # A notification with one text (OSC 9) shows it as its title.
                title, body = ((event.title, event.body) if event.title
                               else (event.body, ""))
                surface = event.surface if event.surface is not None \
                    else pane.terminal_surface
                self.add(pane.tab.workspace, surface, title, body=body, source="terminal")

    def on_view(self, tab: Tab) -> None:
        """A focus call showed ``tab`` (the mux's ``TabViewed``); its focused surface flashes
        when it has an unread notification (it stays unread)."""
        pane = self.mux.panes.get(tab.focused)
        if pane is not None and self.unread_for(pane.surface):
            pane.surface.flash_count += 1
