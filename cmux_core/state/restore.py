"""Rebuild a saved session (:mod:`cmux_core.state.schema`) in a mux that holds nothing yet.

Every window, workspace, tab and pane comes back under its saved public number, UUID and
short ref (the mux's allocators continue after them), with its labels, split ratios, zoom
and focus. Each surface of a pane starts again in its saved cwd (when that directory is
gone: its workspace's, else the home directory) with its env, running the command it was
launched with, or the shell, and shows the text it held at the last stop when that was
saved. A terminal whose agent had a session and a resume command
resumes it: the command is typed into its shell when the agent ran inside one, and
otherwise runs in place of its command; the session reference and the agent's
name go back to the tracker. Each terminal surface of a pane does this for its own agent
(the shown one's is saved on the pane, a background tab's on its surface).
A resume command that cannot start falls back to the pane's own command, and a command
that cannot start to the shell. An agent that was the pane's own program and had no
session to resume starts afresh under its name.

A moved pane's old ids name it again, unless another pane now has one of them; the id
counters continue where the saved server left them. Each surface gets back its unread flag
and the title its program had set (the new program may set another); metadata tokens come
back with the time they had left (an expired one does not), reported as source
:data:`TOKEN_SOURCE`; notifications come back when their workspace (and surface) did.

Named clients' agent views are set again; one whose plugin is gone is skipped with a log
line. Events are published as for new objects (workspace, tab, pane created, layout
updated), after the whole session is in place.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from cmux_core import ids
from cmux_core.agents.authority import SessionRef
from cmux_core.agents.metadata import MetadataPatch
from cmux_core.agents.tracker import AgentTracker
from cmux_core.agents.views import AgentView, ViewBook, ViewPlugins, check_plugins, parse_view
from cmux_core.errors import CmuxError
from cmux_core.model import layout, restoring
from cmux_core.model.events import LayoutUpdated, PaneCreated, TabCreated, WorkspaceCreated
from cmux_core.model.mux import Mux
from cmux_core.model.notifications import Notification, NotificationBook
from cmux_core.model.tree import Pane, Surface, Tab, Window, Workspace
from cmux_core.state.schema import (
    PaneAgentState,
    PaneState,
    SessionState,
    SplitState,
    SurfaceState,
    TabState,
    TokenState,
    WorkspaceState,
    leaves,
)

log = logging.getLogger(__name__)

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""What is dropped from restored text: controls other than tab and newline."""

TOKEN_SOURCE = "cmux:session"
"""The metadata source restored tokens are reported as."""


@dataclass(slots=True)
class Restored:
    """What a restore brought back: counts for the log line, and ``resumed``, the uuids of
    the terminal surfaces that resume an agent session."""

    workspaces: int = 0
    panes: int = 0
    resumed: set[str] = field(default_factory=set)
    agents: list[tuple[Surface, PaneAgentState, bool]] = field(default_factory=list)
    """The agents of terminals that run them again (resumed or not), given back to the
    tracker once the panes are announced."""
    views: dict[str, AgentView] = field(default_factory=dict)
    aliases: list[tuple[str, Pane]] = field(default_factory=list)
    tokens: list[tuple[Surface | Workspace, dict[str, TokenState]]] = field(
        default_factory=list)


class RestoreFailed(Exception):
    """A pane could not be started even with the shell; the mux has been emptied again."""


def restore(state: SessionState, mux: Mux, tracker: AgentTracker, book: ViewBook,
            plugins: ViewPlugins, notifications: NotificationBook | None = None
            ) -> Restored:
    """Build ``state`` into ``mux`` (which must hold no window) and set its views and
    ``notifications``.

    Raises :class:`RestoreFailed` after closing whatever it had started.
    """
    done = Restored()
    built: list[tuple[Workspace, list[tuple[Tab, list[Pane]]]]] = []
    try:
        for saved_window in state.windows:
            if not saved_window.workspaces:
                continue
            window = Window(saved_window.uuid, saved_window.ref)
            mux.windows.append(window)
            restoring.adopt(mux, window, window.uuid, window.ref)
            by_number: dict[int, Workspace] = {}
            for saved_ws in saved_window.workspaces:
                ws, tabs = _workspace(mux, window, saved_ws, done)
                by_number[saved_ws.number] = ws
                built.append((ws, tabs))
            window.selected = by_number.get(saved_window.selected or 0) or window.workspaces[0]
            window.previous = by_number.get(saved_window.previous or 0)
    except RestoreFailed:
        _undo(mux)
        raise
    if mux.windows:
        index = state.active_window
        saved = state.windows[index] if index is not None else None
        mux.active_window = next((w for w in mux.windows if saved and w.uuid == saved.uuid),
                                 mux.windows[0])
    restoring.reserve_workspace_numbers(mux, state.next_workspace_number or 1)
    for kind, number in state.refs.items():
        mux.refs.reserve(kind, number)
    for alias, pane in done.aliases:
        # A pane that has the id now keeps it (only a file written by hand can say so).
        if mux.find_pane(alias) is None:
            mux.aliases[alias] = pane.key
    for ws, tabs in built:
        mux.events.publish(WorkspaceCreated(ws))
        for tab, panes in tabs:
            mux.events.publish(TabCreated(tab))
            for pane in panes:
                mux.events.publish(PaneCreated(pane))
            mux.events.publish(LayoutUpdated(tab))
    for surface, agent, resumed in done.agents:
        if resumed and agent.session is not None:
            session = agent.session
            tracker.record(surface).session = SessionRef(session.source, session.agent,
                                                         session.kind, session.value)
        if agent.name:
            tracker.set_name(surface, agent.name)
    for owner, tokens in done.tokens:
        _report_tokens(tracker, owner, tokens)
    if notifications is not None:
        _notifications(state, mux, notifications)
    for saved_view in state.views:
        try:
            view = parse_view(saved_view.source, saved_view.label, saved_view.filter,
                              saved_view.sort)
            check_plugins(view, plugins)
        except CmuxError as exc:
            log.warning("agent view of client %s not restored: %s", saved_view.client_id,
                        exc.message)
            continue
        book.set(saved_view.client_id, view)
        done.views[saved_view.client_id] = view
    return done


def _report_tokens(tracker: AgentTracker, owner: Surface | Workspace,
                   tokens: dict[str, TokenState]) -> None:
    """Report the saved tokens of a terminal or workspace, those that expire with the time they
    have left (one report per expiry time)."""
    now = time.time()
    by_expiry: dict[float | None, dict[str, str | None]] = defaultdict(dict)
    for key, token in tokens.items():
        if token.expires_at is None or token.expires_at > now:
            by_expiry[token.expires_at][key] = token.value
    for expires, values in by_expiry.items():
        ttl = expires - now if expires is not None else None
        try:
            if isinstance(owner, Surface):
                tracker.report_metadata(owner, MetadataPatch(TOKEN_SOURCE, tokens=values,
                                                             ttl_s=ttl))
            else:
                tracker.report_workspace_metadata(owner, TOKEN_SOURCE, values, ttl_s=ttl)
        except CmuxError as exc:
            name = owner.id if isinstance(owner, Workspace) else owner.pane.id
            log.warning("tokens of %s not restored: %s", name, exc.message)


def _notifications(state: SessionState, mux: Mux, book: NotificationBook) -> None:
    """Give back the notifications whose workspace (and surface) came back."""
    for saved in state.notifications:
        ws = mux.find_workspace(saved.workspace)
        surface = mux.find_surface(saved.surface) if saved.surface is not None else None
        if ws is None or (saved.surface is not None and surface is None):
            continue
        book.items.append(Notification(saved.id, ws, surface, saved.title, saved.subtitle,
                                       saved.body, saved.created_at, saved.is_read,
                                       saved.source))


def _undo(mux: Mux) -> None:
    """Take back a restore that failed half way: the mux holds nothing again (it held
    nothing before), every started terminal is closed and nothing was published."""
    for pane in list(mux.panes.values()):
        mux._discard_pane(pane)
    for window in mux.windows:
        for ws in window.workspaces:
            for tab in ws.tabs:
                mux._forget(tab.uuid, "")
            mux._forget(ws.uuid, ws.ref)
        mux._forget(window.uuid, window.ref)
    mux.windows.clear()
    mux.active_window = None


def _directory(*candidates: str | None) -> str:
    for candidate in candidates:
        if candidate and os.path.isabs(candidate) and Path(candidate).is_dir():
            return candidate
    return str(Path.home())


def _workspace(mux: Mux, window: Window, saved: WorkspaceState, done: Restored
               ) -> tuple[Workspace, list[tuple[Tab, list[Pane]]]]:
    ws = Workspace(ids.workspace_id(saved.number), saved.uuid, saved.ref, window,
                   _directory(saved.cwd), dict(saved.env), label=saved.label or None,
                   description=saved.description, pinned=saved.pinned, color=saved.color)
    ws.next_tab_number = saved.next_tab_number
    ws.next_pane_number = saved.next_pane_number
    ws.auto_title = saved.auto_title
    ws.last_prompt, ws.last_prompt_at = saved.last_prompt, saved.last_prompt_at
    restoring.adopt(mux, ws, ws.uuid, ws.ref)
    window.workspaces.append(ws)
    if saved.tokens:
        done.tokens.append((ws, dict(saved.tokens)))
    tabs = [_tab(mux, ws, saved_tab, done) for saved_tab in saved.tabs]
    ws.next_pane_number = max(ws.next_pane_number,
                              *(pane.number + 1 for _, panes in tabs for pane in panes))
    ws.active_tab = next((t for t, _ in tabs if t.number == saved.active_tab), tabs[0][0])
    done.workspaces += 1
    return ws, tabs


def _tree(node: PaneState | SplitState) -> layout.Node:
    if isinstance(node, PaneState):
        return layout.Leaf(node.key)
    return layout.Split(node.direction, layout.clamp_ratio(node.ratio), _tree(node.first),
                        _tree(node.second))


def _tab(mux: Mux, ws: Workspace, saved: TabState, done: Restored) -> tuple[Tab, list[Pane]]:
    tree = _tree(saved.root)
    tab = Tab(saved.uuid, saved.number, ws, tree, "", zoomed=saved.zoomed,
              label=saved.label or None)
    rects = layout.rects(tree, mux.area)
    panes: list[Pane] = []
    for leaf in leaves(saved.root):
        rect = rects[leaf.key]
        panes.append(_pane(mux, tab, leaf, (max(rect.width, 2), max(rect.height, 1)),
                           done))
    by_number = {pane.number: pane for pane in panes}
    tab.focused = by_number[saved.focused].key
    previous = by_number.get(saved.previous_focus or 0)
    tab.previous_focus = previous.key if previous is not None else None
    if len(panes) < 2:
        tab.zoomed = False
    ws.tabs.append(tab)
    ws.next_tab_number = max(ws.next_tab_number, tab.number + 1)
    restoring.adopt(mux, tab, tab.uuid)
    if tab.zoomed:
        mux.apply_sizes(tab)
    return tab, panes


def _pane(mux: Mux, tab: Tab, saved: PaneState, size: tuple[int, int], done: Restored
          ) -> Pane:
    """Start the pane's surfaces; each terminal's agent resumes in it (the pane's agent in
    the terminal it showed)."""
    pane = Pane(saved.key, saved.number, saved.ref, tab)
    index = min(saved.selected, len(saved.surfaces) - 1)
    terminals = [i for i, s in enumerate(saved.surfaces) if s.path is None]
    if not terminals:
        raise RestoreFailed(f"pane {ids.pane_id(tab.workspace.id, saved.number)} has no "
                            "terminal surface")
    # The agent ran in the pane's terminal: the selected surface unless that is markdown.
    at = index if index in terminals else terminals[0]
    for i, surface in enumerate(saved.surfaces):
        if surface.path is not None:
            _document(mux, pane, surface)
            continue
        agent = saved.agent if i == at else surface.agent
        resume = agent.resume if agent is not None and agent.session is not None else None
        typed = agent is not None and agent.in_shell
        resumed = rerun = False
        cwd = _directory(surface.cwd, tab.workspace.cwd)
        attempts: list[tuple[list[str] | None, list[str] | None]] = []
        if resume is not None and not typed:
            attempts.append((resume, surface.command))
        attempts.append((None, surface.command))
        if surface.command is not None:
            attempts.append((None, None))
        for argv, command in attempts:
            try:
                started = restoring.restore_surface(
                    mux, pane, uuid=surface.uuid, ref=surface.ref, cwd=cwd, command=command,
                    argv=argv, env=surface.env, size=size)
            except CmuxError as exc:
                log.warning("restoring pane %s: %s",
                            ids.pane_id(tab.workspace.id, saved.number), exc.message)
                continue
            started.title = surface.title
            started.pinned = surface.pinned
            started.unread = surface.unread
            started.requested_command = surface.requested_command
            if surface.terminal_title:
                _set_title(started, surface.terminal_title)
            if surface.text:
                _show(started, surface.text)
            if resume is not None and (typed or argv is not None):
                resumed = True
                if typed:
                    _type(started, resume)
            rerun = not typed and argv is None and command is not None
            break
        else:
            raise RestoreFailed(f"pane {ids.pane_id(tab.workspace.id, saved.number)} cannot "
                                "start, not even the shell")
        tokens = saved.tokens if i == at else surface.tokens
        if tokens:
            done.tokens.append((started, dict(tokens)))
        if agent is not None and (resumed or rerun):
            done.agents.append((started, agent, resumed))
        if resumed:
            done.resumed.add(started.uuid)
    pane.selected = pane.surfaces[index]
    restoring.adopt(mux, pane, pane.key, pane.ref)
    pane.label = saved.label or None
    done.panes += 1
    done.aliases.extend((alias, pane) for alias in saved.aliases)
    return pane


def _document(mux: Mux, pane: Pane, saved: SurfaceState) -> None:
    """Append the saved markdown surface to ``pane`` under its uuid and ref."""
    surface = Surface(saved.uuid, saved.ref, None, pane, None, saved.cwd,
                      path=saved.path, title=saved.title, pinned=saved.pinned,
                      unread=saved.unread)
    pane.surfaces.append(surface)
    restoring.adopt(mux, surface, saved.uuid, saved.ref)


def _show(surface: Surface, text: str) -> None:
    """Put the text a terminal held at the last stop on its new screen, before anything
    its program prints; control characters are dropped, so it is only ever text."""
    clean = _CONTROL.sub("", text).replace("\n", "\r\n")
    surface.terminal.emulator.feed(clean.encode("utf-8", "replace") + b"\r\n")


def _set_title(surface: Surface, title: str) -> None:
    """Give the new terminal the title its program had set, as an OSC 2 sequence fed to
    its screen before anything its program prints (control characters dropped)."""
    clean = _CONTROL.sub("", title).replace("\n", "").replace("\t", " ")
    surface.terminal.emulator.feed(b"\x1b]2;" + clean.encode("utf-8", "replace") + b"\x07")


def _type(surface: Surface, argv: list[str]) -> None:
    """Type ``argv`` and Enter into the surface's shell; the terminal holds the line until
    the shell reads it."""
    try:
        surface.terminal.write(shlex.join(argv).encode() + b"\r")
    except CmuxError as exc:
        log.warning("pane %s: cannot type its resume command: %s", surface.pane.id,
                    exc.message)

