"""The object model: windows → workspaces → tabs → split trees of panes → surfaces.

The objects themselves are in :mod:`cmux_core.model.tree`. :class:`Mux` is the root and the
only thing that changes the model; it spawns and closes terminals, keeps focus, sizes every
PTY to its pane's rectangle and publishes a typed event (:mod:`cmux_core.model.events`)
for every change. Handlers in ``cmux_core.api.methods`` resolve ids through it; their
results and the events' wire data are built at the API edge (``cmux_core.api.wire``).

Focus: an active window; per window a selected workspace; per workspace an
active tab; per tab a focused pane. Creating anything moves focus only when
asked to (``focus=True``) or when nothing was focused before.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Literal, TypeVar

from cmux_core import ids
from cmux_core.config import Settings, installation_bin_dir
from cmux_core.errors import CmuxError, NotFound
from cmux_core.events import EventHub, Prepared
from cmux_core.model import layout
from cmux_core.model.events import (
    LayoutUpdated,
    PaneClosed,
    PaneCreated,
    PaneCwdChanged,
    PaneExited,
    PaneFocused,
    PaneNotification,
    PaneProgressChanged,
    PaneUpdated,
    TabClosed,
    TabCreated,
    TabFocused,
    TabRenamed,
    TabViewed,
    TerminalStarted,
    WorkspaceClosed,
    WorkspaceCreated,
    WorkspaceFocused,
    WorkspaceRenamed,
)
from cmux_core.model.readings import Readings
from cmux_core.model.stamps import ChangeStamps
from cmux_core.model.throttle import SignalThrottle
from cmux_core.model.tree import Pane, Surface, Tab, Window, Workspace
from cmux_core.terminal.emulator import TerminalSignal, strip_title
from cmux_core.terminal.process import Terminal

log = logging.getLogger(__name__)

Direction = Literal["right", "down"]
INHERITED_ENV_DROP = frozenset({"CODEX_THREAD_ID", "HERDR_AGENT", "HERDR_PANE_ID",
                                "HERDR_WORKSPACE_ID", "HERDR_TAB_ID", "HERDR_SOCKET_PATH",
                                "HERDR_ENV"})
T = TypeVar("T")
OutputPort = Callable[[Pane, Surface], None]
"""Called with the pane and the surface whose terminal absorbed output (shown or not);
output is too frequent to go through the event hub."""
_PANE_ID_MEMO = 1024
"""At most this many remembered pane ids (see :meth:`Mux.find_pane`)."""


class Mux:
    """Root of the model. Owns every terminal; all methods run on the event loop.

    ``on_output`` hears every batch of output a terminal absorbed, after the pane's
    :meth:`output_signal` fired.
    """

    def __init__(self, settings: Settings, events: EventHub, socket_path: str, *,
                 on_output: OutputPort | None = None) -> None:
        self.settings = settings
        self.events = events
        self.socket_path = socket_path
        self.area = layout.Rect(0, 0, settings.columns, settings.rows)
        self.readings = Readings()
        """Memos of pane rectangles and foreground directories, for lists of many panes."""
        self.stamps = ChangeStamps()
        """When each pane's list row may have changed (fed every event by the app)."""
        self.windows: list[Window] = []
        self.active_window: Window | None = None
        self.panes: dict[str, Pane] = {}
        self.aliases: dict[str, str] = {}
        self.refs = ids.RefCounter()
        self._next_workspace = 1
        self._by_uuid: dict[str, object] = {}
        self._by_ref: dict[str, object] = {}
        self._pane_by_id: dict[str, Pane] = {}
        self._reaping: set[Terminal] = set()
        """Closed terminals whose process has not exited yet (dropped when it has)."""
        self._output_events: dict[str, asyncio.Event] = {}
        self.signal_throttle = SignalThrottle(self._publish_signal)
        self._output_port = on_output

    # -- construction --------------------------------------------------------------

    def _mint(self, kind: ids.RefKind, obj: object) -> tuple[str, str]:
        uuid = ids.new_uuid()
        ref = self.refs.mint(kind)
        self._by_uuid[uuid] = obj
        self._by_ref[ref] = obj
        return uuid, ref

    def _forget(self, uuid: str, ref: str) -> None:
        self._by_uuid.pop(uuid, None)
        self._by_ref.pop(ref, None)

    def create_window(self) -> Window:
        return self._enter_window(Window("", ""))

    def _enter_window(self, window: Window) -> Window:
        """Give a new window its ids and list it; it is active when none was."""
        window.uuid, window.ref = self._mint("window", window)
        self.windows.append(window)
        if self.active_window is None:
            self.active_window = window
        return window

    def default_cwd(self) -> str:
        pane = self.focused_pane()
        if pane is not None:
            cwd = self.pane_cwd(pane)
            if cwd and Path(cwd).is_dir():
                return cwd
        return os.getcwd()

    def create_workspace(self, *, cwd: str | None = None, label: str | None = None,
                         env: dict[str, str] | None = None, command: list[str] | None = None,
                         pane_env: dict[str, str] | None = None, focus: bool = False,
                         window: Window | None = None) -> tuple[Workspace, Tab, Pane]:
        """Create a workspace with one tab and one pane, appended to ``window``.

        Raises ``spawn_failed`` (and leaves nothing behind) when the process cannot
        start.
        """
        window = window or self.active_window
        # Without any window, the one made for the workspace is entered only once it exists.
        new_window = window is None
        window = window or Window("", "")
        cwd = cwd or self.default_cwd()
        number = self._next_workspace
        ws = Workspace(ids.workspace_id(number), "", "", window, cwd, dict(env or {}),
                       label=label or None)
        before = self._focus_key()
        tab, pane = self._new_tab(ws, cwd=cwd, command=command, env=pane_env, label=None)
        if new_window:
            self._enter_window(window)
        self._next_workspace += 1
        ws.uuid, ws.ref = self._mint("workspace", ws)
        self._open_workspace(ws, tab, [pane], focus=focus, before=before)
        return ws, tab, pane

    def _open_workspace(self, ws: Workspace, tab: Tab, panes: Sequence[Pane], *, focus: bool,
                        before: tuple[str | None, str | None]) -> None:
        """Append the built ``ws`` (its one tab ``tab`` holding ``panes``) to its window,
        selected there with ``focus`` or when the window has none, and publish what was
        created and, against ``before``, the focus change."""
        window = ws.window
        window.workspaces.append(ws)
        if focus:
            self._select_workspace(ws)
        elif window.selected is None:
            # Selected in its own window; another window stays the active one.
            window.selected = ws
        self.events.publish(WorkspaceCreated(ws))
        self.events.publish(TabCreated(tab))
        for pane in panes:
            self.events.publish(PaneCreated(pane))
        self.events.publish(LayoutUpdated(tab))
        self._emit_focus_if_changed(before)

    def _new_tab(self, ws: Workspace, *, cwd: str, command: list[str] | None,
                 env: dict[str, str] | None, label: str | None) -> tuple[Tab, Pane]:
        tab = Tab(ids.new_uuid(), ws.next_tab_number, ws, layout.Leaf(""), "", label=label)
        pane = self._new_pane(tab, cwd=cwd, command=command, env=env,
                              size=(self.area.width, self.area.height))
        tab.tree = layout.Leaf(pane.key)
        tab.focused = pane.key
        ws.next_tab_number += 1
        ws.tabs.append(tab)
        if ws.active_tab is None:
            ws.active_tab = tab
        self._by_uuid[tab.uuid] = tab
        return tab, pane

    def _new_pane(self, tab: Tab, *, cwd: str, command: list[str] | None,
                  env: dict[str, str] | None, size: tuple[int, int]) -> Pane:
        ws = tab.workspace
        number = ws.next_pane_number
        key = ids.new_uuid()
        pane = Pane(key, number, "", tab)
        surface_uuid = ids.new_uuid()
        surface_ref = self.refs.mint("surface")
        term = self._spawn(ws, tab, pane, surface_uuid, cwd=cwd, command=command, env=env,
                           size=size)
        ws.next_pane_number += 1
        pane.ref = self.refs.mint("pane")
        self._by_uuid[key] = pane
        self._by_ref[pane.ref] = pane
        surface = Surface(surface_uuid, surface_ref, term, pane, command, cwd,
                          env=dict(env) if env else None)
        self._by_uuid[surface_uuid] = surface
        self._by_ref[surface.ref] = surface
        pane.surfaces.append(surface)
        pane.selected = surface
        self.panes[key] = pane
        self._attach(pane, surface)
        return pane

    def _spawn(self, ws: Workspace, tab: Tab, pane: Pane, surface_uuid: str, *, cwd: str,
               command: list[str] | None, env: dict[str, str] | None,
               size: tuple[int, int]) -> Terminal:
        # Hints and ids that belong to the server's own terminal must not leak into panes.
        full_env = {k: v for k, v in os.environ.items()
                    if k not in INHERITED_ENV_DROP and not k.startswith("CMUX_")}
        full_env.update(ws.env)
        full_env.update(env or {})
        pane_public = ids.pane_id(ws.id, pane.number)
        full_env.update({
            "CMUX_ENV": "1",
            "CMUX_SOCKET_PATH": self.socket_path,
            "CMUX_WORKSPACE_ID": ws.id,
            "CMUX_TAB_ID": tab.id,
            "CMUX_PANE_ID": pane_public,
            "CMUX_SURFACE_ID": surface_uuid,
            "TERM": "xterm-256color",
            "COLORTERM": "truecolor",
        })
        if self.settings.herdr_env:
            # herdr's own hook scripts then report to this server, unchanged.
            full_env.update({"HERDR_ENV": "1", "HERDR_SOCKET_PATH": self.socket_path,
                             "HERDR_PANE_ID": pane_public})
        bin_dir = installation_bin_dir()
        path = full_env.get("PATH", os.defpath)
        if bin_dir is not None and path.split(os.pathsep)[0] != str(bin_dir):
            full_env["PATH"] = f"{bin_dir}{os.pathsep}{path}" if path else str(bin_dir)
        argv = list(command) if command else [self.settings.shell]
        return Terminal.spawn(ids.new_terminal_id(), argv, cwd=cwd, env=full_env,
                              columns=size[0], rows=size[1], emulator=self.settings.emulator,
                              scrollback_lines=self.settings.scrollback_lines)

    def _attach(self, pane: Pane, surface: Surface) -> None:
        term = surface.terminal
        term.on_signal = lambda t, sig: self._on_signal(surface, sig)
        term.on_exit = lambda t: self._on_exit(surface)
        term.on_output = lambda t: self._on_output(pane, surface)
        self.events.publish(TerminalStarted(pane, surface))

    def _on_output(self, pane: Pane, surface: Surface) -> None:
        self._wake(pane)
        if self._output_port is not None:
            self._output_port(pane, surface)

    def output_signal(self, pane: Pane) -> asyncio.Event:
        """An event set at the pane's next output (or exit, or close); fresh after it fires."""
        event = self._output_events.get(pane.key)
        if event is None:
            event = self._output_events[pane.key] = asyncio.Event()
        return event

    def _wake(self, pane: Pane) -> None:
        event = self._output_events.pop(pane.key, None)
        if event is not None:
            event.set()

    # -- terminal callbacks ---------------------------------------------------------

    def _on_signal(self, surface: Surface, sig: TerminalSignal) -> None:
        """Apply an OSC announcement to the pane at once; its event goes through the
        pane's throttle, so a storm of them costs a bounded number of events."""
        pane = surface.pane
        if pane.key not in self.panes:
            return
        if sig.kind == "title":
            stripped = strip_title(sig.value)
            if stripped == pane.last_title_stripped:
                return
            pane.last_title_stripped = stripped
            pane.title_revision += 1
        elif sig.kind == "cwd":
            pane.cwd = sig.value
        # A notification names the terminal that sent it: a pane's tabs notify apart.
        self.signal_throttle.offer(surface.uuid if sig.kind == "notification" else pane.key,
                                   sig)

    def _publish_signal(self, key: str, sig: TerminalSignal, dropped: int) -> None:
        """The event for an announcement the throttle let through, unless its pane closed;
        a title's event carries the pane as it is now, whatever title ``sig`` had. ``key``
        is the pane's, or for a notification its surface's."""
        surface = None
        pane = self.panes.get(key)
        if pane is None:
            found = self._by_uuid.get(key)
            if not isinstance(found, Surface) or self.panes.get(found.pane.key) is not found.pane:
                return
            surface, pane = found, found.pane
        if sig.kind == "title":
            self.events.publish(PaneUpdated(pane))
        elif sig.kind == "cwd":
            self.events.publish(PaneCwdChanged(pane, sig.value))
        elif sig.kind == "progress":
            self.events.publish(PaneProgressChanged(pane, sig.value))
        elif sig.kind == "notification":
            self.events.publish(PaneNotification(pane, sig.value, sig.title, dropped,
                                                 surface=surface))

    def _on_exit(self, surface: Surface) -> None:
        pane = surface.pane
        self._wake(pane)
        if pane.key in self.panes and pane.terminal_surface is surface:
            self.events.publish(PaneExited(pane, surface.terminal.exit_code))

    # -- lookups --------------------------------------------------------------------

    def workspaces(self) -> Iterator[Workspace]:
        for window in self.windows:
            yield from window.workspaces

    def all_tabs(self) -> Iterator[Tab]:
        for ws in self.workspaces():
            yield from ws.tabs

    def tab_panes(self, tab: Tab) -> list[Pane]:
        return [self.panes[k] for k in layout.panes(tab.tree)]

    def workspace_panes(self, ws: Workspace) -> list[Pane]:
        return [p for tab in ws.tabs for p in self.tab_panes(tab)]

    def all_panes(self) -> list[Pane]:
        return [p for ws in self.workspaces() for p in self.workspace_panes(ws)]

    def active_workspace(self) -> Workspace | None:
        return self.active_window.selected if self.active_window else None

    def focused_pane_of(self, ws: Workspace) -> Pane | None:
        tab = ws.active_tab
        return self.panes.get(tab.focused) if tab else None

    def focused_pane(self) -> Pane | None:
        ws = self.active_workspace()
        return self.focused_pane_of(ws) if ws else None

    def is_focused(self, pane: Pane) -> bool:
        ws = pane.tab.workspace
        return (self.active_workspace() is ws and ws.active_tab is pane.tab
                and pane.tab.focused == pane.key)

    def workspace_position(self, ws: Workspace) -> int:
        return ws.window.workspaces.index(ws) + 1

    def _lookup(self, handle: ids.ShortRef | ids.UuidRef) -> object | None:
        if isinstance(handle, ids.UuidRef):
            return self._by_uuid.get(handle.uuid)
        return self._by_ref.get(str(handle))

    def _workspace_from(self, handle: ids.Handle) -> Workspace | None:
        if isinstance(handle, (ids.ShortRef, ids.UuidRef)):
            obj = self._lookup(handle)
            return obj if isinstance(obj, Workspace) else None
        if isinstance(handle, ids.WorkspaceId):
            return next((w for w in self.workspaces() if w.id == handle.id), None)
        if isinstance(handle, ids.WorkspacePosition):
            ordered = list(self.workspaces())
            return ordered[handle.position - 1] if handle.position <= len(ordered) else None
        return None

    def find_workspace(self, text: str) -> Workspace | None:
        handle = ids.parse_handle("workspace", text.strip())
        return self._workspace_from(handle) if handle is not None else None

    def find_tab(self, text: str) -> Tab | None:
        handle = ids.parse_handle("tab", text.strip())
        if handle is None:
            return None
        if isinstance(handle, ids.UuidRef):
            obj = self._by_uuid.get(handle.uuid)
            return obj if isinstance(obj, Tab) else None
        if isinstance(handle, ids.TabNumber | ids.TabPosition):
            ws = self._workspace_from(handle.workspace)
            if ws is None:
                return None
            if isinstance(handle, ids.TabNumber):
                return next((t for t in ws.tabs if t.number == handle.number), None)
            pos = handle.position
            return ws.tabs[pos - 1] if pos <= len(ws.tabs) else None
        return None

    def find_pane(self, text: str) -> Pane | None:
        text = text.strip()
        if text in self.aliases:
            return self.panes.get(self.aliases[text])
        # Most requests name a pane by its current id: remembered, and trusted only
        # while that pane is still live and still has that id.
        known = self._pane_by_id.get(text)
        if known is not None and self.panes.get(known.key) is known and known.id == text:
            return known
        found = self._resolve_pane(text)
        if found is not None and found.id == text:
            if len(self._pane_by_id) >= _PANE_ID_MEMO:
                self._pane_by_id.clear()
            self._pane_by_id[text] = found
        return found

    def _resolve_pane(self, text: str) -> Pane | None:
        handle = ids.parse_handle("pane", text)
        if handle is None:
            surface = self.find_surface(text)
            return surface.pane if surface is not None else None
        if isinstance(handle, ids.ShortRef | ids.UuidRef):
            obj = self._lookup(handle)
            if isinstance(obj, Surface):
                return obj.pane
            return obj if isinstance(obj, Pane) else None
        if isinstance(handle, ids.PaneNumber | ids.PaneRawId):
            ws = self._workspace_from(handle.workspace) if handle.workspace else None
            number = handle.number if isinstance(handle, ids.PaneNumber) else handle.raw
            candidates = self.workspace_panes(ws) if ws else (
                self.all_panes() if isinstance(handle, ids.PaneRawId) else [])
            return next((p for p in candidates if p.number == number), None)
        return None

    def find_surface(self, text: str) -> Surface | None:
        text = text.strip()
        handle = ids.parse_handle("surface", text)
        if isinstance(handle, ids.ShortRef | ids.UuidRef):
            obj = self._lookup(handle)
            if isinstance(obj, Pane):
                return obj.selected
            return obj if isinstance(obj, Surface) else None
        if isinstance(handle, ids.TerminalId):
            return next((s for p in self.panes.values() for s in p.surfaces
                         if s.term is not None and s.term.id == handle.id), None)
        if handle is None and ids.parse_handle("pane", text) is not None:
            pane = self.find_pane(text)
            return pane.selected if pane else None
        return None

    def find_window(self, text: str) -> Window | None:
        handle = ids.parse_window_ref(text.strip())
        if handle is None:
            return None
        obj = self._lookup(handle)
        return obj if isinstance(obj, Window) else None

    def workspace(self, text: str) -> Workspace:
        """Resolve any workspace handle; raises ``workspace_not_found``."""
        return require(self.find_workspace(text), "workspace", text)

    def tab(self, text: str) -> Tab:
        return require(self.find_tab(text), "tab", text)

    def pane(self, text: str | None) -> Pane:
        """Resolve a pane handle, or the focused pane of the active workspace when None."""
        if text is None:
            return require(self.focused_pane(), "pane", None)
        return require(self.find_pane(text), "pane", text)

    def surface(self, text: str) -> Surface:
        return require(self.find_surface(text), "surface", text)

    def window(self, text: str) -> Window:
        return require(self.find_window(text), "window", text)

    # -- focus ----------------------------------------------------------------------

    def _focus_key(self) -> tuple[str | None, str | None]:
        ws = self.active_workspace()
        pane = self.focused_pane()
        return (ws.id if ws else None, pane.key if pane else None)

    def _emit_focus_if_changed(self, before: tuple[str | None, str | None]) -> None:
        if self._focus_key() == before:
            return
        ws = self.active_workspace()
        pane = self.focused_pane()
        if ws is None:
            return
        self.events.publish(WorkspaceFocused(ws))
        if ws.active_tab is not None:
            self.events.publish(TabFocused(ws.active_tab))
        if pane is not None:
            self.events.publish(PaneFocused(pane))

    def _select_workspace(self, ws: Workspace) -> None:
        window = ws.window
        if window.selected is not ws:
            window.previous = window.selected
            window.selected = ws
        self.active_window = window

    def focus_workspace(self, ws: Workspace) -> None:
        before = self._focus_key()
        self._select_workspace(ws)
        self._emit_focus_if_changed(before)
        if ws.active_tab is not None:
            self._viewed(ws.active_tab)

    def _place_focus(self, pane: Pane) -> None:
        """Make ``pane`` the focused pane of its tab, workspace and window; no events."""
        tab = pane.tab
        if tab.focused != pane.key:
            tab.previous_focus = tab.focused
            tab.focused = pane.key
        tab.workspace.active_tab = tab
        self._select_workspace(tab.workspace)

    def focus_tab(self, tab: Tab) -> None:
        before = self._focus_key()
        tab.workspace.active_tab = tab
        self._select_workspace(tab.workspace)
        self._emit_focus_if_changed(before)
        self._viewed(tab)

    def focus_pane(self, pane: Pane) -> None:
        before = self._focus_key()
        tab = pane.tab
        self._place_focus(pane)
        self._emit_focus_if_changed(before)
        self._viewed(tab)
        if tab.zoomed:
            self.apply_sizes(tab)

    def focus_surface(self, surface: Surface) -> None:
        """Select ``surface`` in its pane, then focus that pane (:meth:`focus_pane`)."""
        surface.pane.selected = surface
        self.focus_pane(surface.pane)

    def _viewed(self, tab: Tab) -> None:
        self.events.publish(TabViewed(tab))

    # -- structure changes ------------------------------------------------------------

    def create_tab(self, ws: Workspace, *, cwd: str | None = None, label: str | None = None,
                   env: dict[str, str] | None = None, command: list[str] | None = None,
                   focus: bool = False) -> tuple[Tab, Pane]:
        before = self._focus_key()
        cwd = cwd or self._workspace_cwd(ws)
        tab, pane = self._new_tab(ws, cwd=cwd, command=command, env=env, label=label or None)
        if focus:
            ws.active_tab = tab
            self._select_workspace(ws)
        self.events.publish(TabCreated(tab))
        self.events.publish(PaneCreated(pane))
        self.events.publish(LayoutUpdated(tab))
        self._emit_focus_if_changed(before)
        return tab, pane

    def _workspace_cwd(self, ws: Workspace) -> str:
        pane = self.focused_pane_of(ws)
        if pane is not None:
            cwd = self.pane_cwd(pane)
            if cwd and Path(cwd).is_dir():
                return cwd
        return ws.cwd

    def split_pane(self, target: Pane, direction: Direction, *, ratio: float | None = None,
                   cwd: str | None = None, env: dict[str, str] | None = None,
                   command: list[str] | None = None, focus: bool = False) -> Pane:
        """Split ``target``; the new pane is the second child. Returns the new pane."""
        tab = target.tab
        before = self._focus_key()
        cwd = cwd or self.pane_cwd(target) or tab.workspace.cwd
        if not Path(cwd).is_dir():
            cwd = tab.workspace.cwd
        ratio_value = 0.5 if ratio is None else ratio
        probe = layout.split(tab.tree, target.key, "\0probe", direction, ratio_value)
        size = layout.rects(probe, self.area)["\0probe"]
        pane = self._new_pane(tab, cwd=cwd, command=command, env=env,
                              size=(size.width, size.height))
        tab.tree = layout.split(tab.tree, target.key, pane.key, direction, ratio_value)
        if focus:
            tab.previous_focus = tab.focused
            tab.focused = pane.key
            tab.workspace.active_tab = tab
            self._select_workspace(tab.workspace)
        self.apply_sizes(tab)
        self.events.publish(PaneCreated(pane))
        self.events.publish(LayoutUpdated(tab))
        self._emit_focus_if_changed(before)
        return pane

    def close_pane(self, pane: Pane) -> None:
        """Close ``pane``'s terminals; the tab (and workspace) close with their last pane."""
        tab = pane.tab
        before = self._focus_key()
        remaining = layout.remove(tab.tree, pane.key)
        self._discard_pane(pane)
        self.events.publish(PaneClosed(pane))
        if remaining is None:
            self._remove_tab(tab)
        else:
            self._shrink_tree(tab, pane.key, remaining)
            self.apply_sizes(tab)
            self.events.publish(LayoutUpdated(tab))
        self._emit_focus_if_changed(before)

    @staticmethod
    def _shrink_tree(tab: Tab, key: str, remaining: layout.Node) -> None:
        """Give ``tab`` the tree ``remaining``, its tree without the pane ``key``: the
        focus moves on from ``key`` (to the pane focused before it, else a neighbour), and a
        lone pane is not zoomed. Sizes and events are the caller's."""
        if tab.focused == key:
            nxt = layout.next_focus_after_remove(tab.tree, key, tab.previous_focus)
            tab.focused = nxt or layout.panes(remaining)[0]
            tab.previous_focus = None
        elif tab.previous_focus == key:
            tab.previous_focus = None
        tab.tree = remaining
        if len(layout.panes(remaining)) < 2:
            tab.zoomed = False

    def _discard_pane(self, pane: Pane) -> None:
        """Drop ``pane`` from every lookup and close its terminals: afterwards nothing in
        the mux holds it, its surfaces or their screens."""
        del self.panes[pane.key]
        self._wake(pane)
        self._forget(pane.key, pane.ref)
        for text in [t for t, known in self._pane_by_id.items() if known is pane]:
            del self._pane_by_id[text]
        for alias, key in list(self.aliases.items()):
            if key == pane.key:
                del self.aliases[alias]
        for surface in pane.surfaces:
            self._forget(surface.uuid, surface.ref)
            if surface.term is not None:
                self._close_terminal(surface.term)

    def _close_terminal(self, term: Terminal) -> None:
        # A terminal still being reaped must not keep its closed pane alive.
        term.on_output = term.on_signal = None
        if not term.process_done:
            self._reaping.add(term)
            term.on_exit = self._reaping.discard
        term.close()

    def closing_count(self) -> int:
        """Closed terminals still waiting for their process to exit."""
        return len(self._reaping)

    def _remove_tab(self, tab: Tab) -> None:
        """Drop an (already emptied) tab, closing the workspace with its last tab."""
        ws = tab.workspace
        idx = ws.tabs.index(tab)
        ws.tabs.remove(tab)
        self._by_uuid.pop(tab.uuid, None)
        self.events.publish(TabClosed(tab))
        if not ws.tabs:
            self._remove_workspace(ws)
        elif ws.active_tab is tab:
            ws.active_tab = ws.tabs[min(idx, len(ws.tabs) - 1)]

    def close_tab(self, tab: Tab) -> None:
        before = self._focus_key()
        for pane in self.tab_panes(tab):
            self._discard_pane(pane)
            self.events.publish(PaneClosed(pane))
        self._remove_tab(tab)
        self._emit_focus_if_changed(before)

    def close_workspace(self, ws: Workspace) -> None:
        before = self._focus_key()
        # The closed event shows the workspace as it was before its panes closed.
        closed = self.events.prepare(WorkspaceClosed(ws))
        for tab in list(ws.tabs):
            for pane in self.tab_panes(tab):
                self._discard_pane(pane)
                self.events.publish(PaneClosed(pane))
            ws.tabs.remove(tab)
            self._by_uuid.pop(tab.uuid, None)
            self.events.publish(TabClosed(tab))
        self._remove_workspace(ws, closed)
        self._emit_focus_if_changed(before)

    def _remove_workspace(self, ws: Workspace, closed: Prepared | None = None) -> None:
        if closed is None:
            ws.tabs = []
            closed = self.events.prepare(WorkspaceClosed(ws))
        self._detach_workspace(ws)
        self.events.publish(closed)

    def _detach_workspace(self, ws: Workspace) -> None:
        """Take ``ws`` out of its window and forget its ids; publishes nothing."""
        window = ws.window
        index = window.workspaces.index(ws)
        window.workspaces.remove(ws)
        self._forget(ws.uuid, ws.ref)
        if window.previous is ws:
            window.previous = None
        if window.selected is ws:
            # The neighbour that takes its place, else the one before it.
            window.selected = (window.workspaces[min(index, len(window.workspaces) - 1)]
                               if window.workspaces else None)

    def rename_workspace(self, ws: Workspace, label: str | None) -> None:
        ws.label = label or None
        self.events.publish(WorkspaceRenamed(ws))

    def rename_tab(self, tab: Tab, label: str | None) -> None:
        tab.label = label or None
        self.events.publish(TabRenamed(tab))

    # -- geometry -------------------------------------------------------------------

    def pane_rects(self, tab: Tab) -> dict[str, layout.Rect]:
        """Each pane's rectangle in ``tab``, remembered while the tab's layout is the same;
        the caller must not change the dict."""
        return self.readings.pane_rects(tab, self.area)

    def apply_sizes(self, tab: Tab) -> None:
        """Size every terminal of ``tab`` to its rectangle (zoom gives all to the focus)."""
        rects = layout.rects(tab.tree, self.area)
        for key, rect in rects.items():
            if tab.zoomed and key == tab.focused:
                rect = self.area
            pane = self.panes.get(key)
            if pane is not None:
                for surface in pane.surfaces:
                    if surface.term is not None:
                        surface.term.resize(rect.width, rect.height)

    def set_area(self, columns: int, rows: int) -> None:
        self.area = layout.Rect(0, 0, columns, rows)
        for tab in self.all_tabs():
            self.apply_sizes(tab)
            self.events.publish(LayoutUpdated(tab))

    # -- labels and directories ---------------------------------------------------------

    def workspace_label(self, ws: Workspace) -> str:
        return ws.label or ws.auto_title or self.readings.auto_label(ws.cwd)

    def tab_label(self, tab: Tab) -> str:
        return tab.label or str(tab.workspace.tabs.index(tab) + 1)

    def pane_cwd(self, pane: Pane) -> str | None:
        return pane.cwd or pane.terminal_surface.launch_cwd

    def foreground_cwd(self, term: Terminal) -> str | None:
        """Where ``term``'s foreground program works now (None when it cannot be read), read
        again once the terminal prints or within a second (:mod:`cmux_core.model.readings`)."""
        return self.readings.foreground_cwd(term)

    # -- restoring a saved session (cmux_core.model.restoring does the rest) ------------

    @property
    def next_workspace_number(self) -> int:
        """The number the next new workspace gets; no number is handed out twice."""
        return self._next_workspace

    # -- shutdown ---------------------------------------------------------------------

    def close_all(self) -> list[Terminal]:
        """SIGHUP every pane's process group; returns the terminals still to be reaped."""
        terms: list[Terminal] = []
        for pane in list(self.panes.values()):
            for surface in pane.surfaces:
                if surface.term is not None:
                    surface.term.close()
                    terms.append(surface.term)
        terms.extend(self._reaping)
        return [t for t in terms if not t.process_done]


def require(obj: T | None, kind: str, text: str | None) -> T:
    """``obj``, or ``<kind>_not_found`` naming ``text`` when it is None."""
    if obj is None:
        raise NotFound(kind, text)
    return obj


def spawn_error(exc: CmuxError, code: str) -> CmuxError:
    """Re-label a spawn failure with the method-specific code (e.g. pane_split_failed),
    keeping its message and data; any other error is returned as it is."""
    if exc.code != "spawn_failed":
        return exc
    return CmuxError(code, exc.message, exc.data)
