"""The session as it is now, in the session file's format (:mod:`cmux_core.state.schema`).

Each of a pane's surfaces is recorded with where its program works now (for the one the
pane shows, an OSC 7 report first; then ``/proc/<pid>/cwd``; else where it was launched),
the argv and env it was launched with (none for the default shell). An agent's session is
recorded only while that agent is its terminal's agent (so one that has exited is not
resumed), or while a restored session has not yet been seen to end (``carried``). Each
terminal surface has its own: the one the pane shows on the pane, the others on their
surface.

Metadata tokens of panes and workspaces are recorded with their expiry as a UTC time,
except :data:`LIVE_TOKENS`; notifications with the UUIDs of their workspace and surface.
Runs on the loop, in one go or a tab at a time (:func:`capture_steps`); the only I/O is a
``/proc`` read per surface.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Generator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from cmux_core import ids
from cmux_core.agents.authority import SessionRef
from cmux_core.agents.metadata import MetadataStore
from cmux_core.agents.tracker import AgentTracker
from cmux_core.agents.views import AgentView
from cmux_core.model import layout
from cmux_core.model.arrange import current_cwd
from cmux_core.model.mux import Mux
from cmux_core.model.notifications import NotificationBook
from cmux_core.model.tree import Pane, Surface, Tab, Window, Workspace
from cmux_core.state.schema import (
    MAX_TEXT_CHARS,
    VERSION,
    Node,
    NotificationState,
    PaneAgentState,
    PaneState,
    SessionRefState,
    SessionState,
    SplitState,
    SurfaceState,
    TabState,
    TokenState,
    ViewState,
    WindowState,
    WorkspaceState,
)
from cmux_core.terminal import procfs

ResumeFor = Callable[[SessionRef], "list[str] | None"]
"""The command that resumes a session (from its agent's manifest), or None."""

LIVE_TOKENS = frozenset({"tool", "tool_input"})
"""Pane tokens that are not saved: the agent integrations' hooks set them to the tool the
agent runs now and clear them when it ends, and an agent comes back resumed at its
prompt, running no tool."""


def capture(mux: Mux, tracker: AgentTracker, views: Mapping[str, AgentView], *,
            resume_for: ResumeFor, carried: Collection[str] = (),
            text_lines: int = 0, notifications: NotificationBook | None = None
            ) -> SessionState:
    """The whole session: every window, workspace, tab and pane, the named views and the
    ``notifications``, in one go (:func:`capture_steps` run to its end).

    ``carried`` holds the uuids of restored terminal surfaces whose session is kept until
    their agent is seen (see the module docstring). With ``text_lines``, each terminal's last lines
    of text are recorded too (at most :data:`~cmux_core.state.schema.MAX_TEXT_CHARS`).
    """
    steps = capture_steps(mux, tracker, views, resume_for=resume_for, carried=carried,
                          text_lines=text_lines, notifications=notifications)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            state: SessionState = done.value
            return state


def capture_steps(mux: Mux, tracker: AgentTracker, views: Mapping[str, AgentView], *,
                  resume_for: ResumeFor, carried: Collection[str] = (),
                  text_lines: int = 0, notifications: NotificationBook | None = None
                  ) -> Generator[None, None, SessionState]:
    """:func:`capture` in steps: yields after each tab, returns the session.

    Each tab is captured whole within one step, so its panes and layout agree; between
    steps the session may change (the caller runs other work there). A tab or workspace
    gone by its turn is left out, one that came meanwhile may be missed: the change that
    did it asks for another save, which sees it.
    """
    walk = _Walk(mux, tracker, resume_for, carried, text_lines, _clock())
    windows = []
    for window in list(mux.windows):
        workspaces = []
        for ws in list(window.workspaces):
            tabs = []
            for tab in list(ws.tabs):
                if tab in ws.tabs and tab.focused in mux.panes:
                    tabs.append(walk.tab(tab))
                yield
            if ws in window.workspaces:
                workspaces.append(walk.workspace(ws, tabs))
        windows.append(walk.window(window, workspaces))
    active = mux.windows.index(mux.active_window) if mux.active_window in mux.windows \
        else None
    saved = [ViewState(client_id=client, source=view.source, label=view.label,
                       filter=view.spec.get("filter"), sort=view.spec.get("sort"))
             for client, view in sorted(views.items())]
    notes = [NotificationState(id=n.id, workspace=n.workspace.uuid,
                               surface=n.surface.uuid if n.surface is not None else None,
                               title=n.title, subtitle=n.subtitle, body=n.body,
                               created_at=n.created_at, is_read=n.is_read, source=n.source)
             for n in (notifications.live() if notifications is not None else ())]
    return SessionState(version=VERSION, saved_at=datetime.now(UTC).isoformat(),
                        windows=windows, active_window=active, views=saved,
                        next_workspace_number=mux.next_workspace_number,
                        refs=mux.refs.last(), notifications=notes)


def _clock() -> tuple[float, float]:
    """``time.monotonic()`` (the tokens' deadlines) and ``time.time()`` at one moment."""
    return time.monotonic(), time.time()


def _tokens(store: MetadataStore | None, clock: tuple[float, float],
            skip: Collection[str] = ()) -> dict[str, TokenState]:
    """The unexpired tokens of ``store`` but ``skip``, each deadline as a UTC time in
    whole seconds: the two clocks are read a moment apart, and a finer time would differ
    from one capture to the next, so every check would rewrite an unchanged session."""
    if store is None:
        return {}
    now, wall = clock
    out = {}
    for key, token in sorted(store.tokens.items()):
        if key in skip or (token.deadline is not None and token.deadline <= now):
            continue
        expires = float(round(wall + (token.deadline - now))) \
            if token.deadline is not None else None
        out[key] = TokenState(value=token.value, expires_at=expires)
    return out


def _number(ws: Workspace | None) -> int | None:
    return ids.decode_number(ws.id[1:]) if ws is not None else None


@dataclass(frozen=True, slots=True)
class _Walk:
    """One capture's inputs, handed down the tree."""

    mux: Mux
    tracker: AgentTracker
    resume_for: ResumeFor
    carried: Collection[str]
    text_lines: int
    clock: tuple[float, float]

    def window(self, window: Window, workspaces: list[WorkspaceState]) -> WindowState:
        return WindowState(
            uuid=window.uuid, ref=window.ref, workspaces=workspaces,
            selected=_number(window.selected), previous=_number(window.previous))

    def workspace(self, ws: Workspace, tabs: list[TabState]) -> WorkspaceState:
        number = _number(ws)
        assert number is not None
        return WorkspaceState(
            number=number, uuid=ws.uuid, ref=ws.ref, cwd=ws.cwd, env=dict(ws.env),
            label=ws.label, description=ws.description, pinned=ws.pinned, color=ws.color,
            tabs=tabs,
            active_tab=ws.active_tab.number if ws.active_tab is not None else None,
            next_tab_number=ws.next_tab_number, next_pane_number=ws.next_pane_number,
            tokens=_tokens(self.tracker.workspace_metadata.get(ws.id), self.clock),
            auto_title=ws.auto_title, last_prompt=ws.last_prompt,
            last_prompt_at=ws.last_prompt_at)

    def tab(self, tab: Tab) -> TabState:
        previous = self.mux.panes.get(tab.previous_focus) if tab.previous_focus else None
        return TabState(uuid=tab.uuid, number=tab.number, root=self.node(tab.tree),
                        focused=self.mux.panes[tab.focused].number,
                        previous_focus=previous.number if previous is not None else None,
                        zoomed=tab.zoomed, label=tab.label)

    def node(self, tree: layout.Node) -> Node:
        # A method, not a closure calling itself: such a closure is a reference cycle that
        # only the cycle collector frees, one per tab and save.
        if isinstance(tree, layout.Leaf):
            return self.pane(self.mux.panes[tree.pane])
        return SplitState(type="split", direction=tree.direction, ratio=tree.ratio,
                          first=self.node(tree.first), second=self.node(tree.second))

    def pane(self, pane: Pane) -> PaneState:
        shown = pane.terminal_surface
        rec = self.tracker.find_record(shown)
        return PaneState(
            type="pane", key=pane.key, number=pane.number, ref=pane.ref,
            surfaces=[self.surface(pane, surface) for surface in pane.surfaces],
            selected=pane.surfaces.index(pane.surface), label=pane.label,
            agent=self.agent(shown),
            aliases=sorted(a for a, key in self.mux.aliases.items() if key == pane.key),
            tokens=_tokens(rec.metadata if rec is not None else None, self.clock,
                           LIVE_TOKENS))

    def surface(self, pane: Pane, surface: Surface) -> SurfaceState:
        if surface.term is None:
            return SurfaceState(uuid=surface.uuid, ref=surface.ref, cwd=surface.launch_cwd,
                                title=surface.title, pinned=surface.pinned,
                                unread=surface.unread, path=surface.path)
        term = surface.terminal
        if surface is pane.selected:
            cwd = current_cwd(self.mux, pane)
        else:
            cwd = procfs.cwd(term.pid) if term.pid and not term.exited else None
        text = None
        if self.text_lines:
            text = term.read("recent", self.text_lines, "text")[0].rstrip()
            text = text[-MAX_TEXT_CHARS:] or None
        background = surface is not pane.terminal_surface
        rec = self.tracker.find_record(surface) if background else None
        return SurfaceState(
            uuid=surface.uuid, ref=surface.ref, cwd=cwd or surface.launch_cwd,
            command=list(surface.command) if surface.command else None,
            requested_command=surface.requested_command,
            env=dict(surface.env) if surface.env else None, title=surface.title,
            terminal_title=term.emulator.title or None, pinned=surface.pinned,
            unread=surface.unread, text=text,
            agent=self.agent(surface) if background else None,
            tokens=_tokens(rec.metadata if rec is not None else None, self.clock,
                           LIVE_TOKENS))

    def agent(self, surface: Surface) -> PaneAgentState | None:
        tracker = self.tracker
        rec = tracker.find_record(surface)
        if rec is None:
            return None
        session = tracker.session(surface)
        if session is not None and surface.uuid not in self.carried and \
                tracker.effective_agent(surface) != tracker.canonical(session.agent):
            session = None
        if session is None and rec.name is None:
            return None
        resume = self.resume_for(session) if session is not None else None
        term = surface.terminal
        pgid = term.foreground_pgid()
        in_shell = surface.command is None or (pgid is not None and pgid != term.pid)
        return PaneAgentState(
            name=rec.name,
            session=SessionRefState(source=session.source, agent=session.agent,
                                    kind=session.kind, value=session.value)
            if session is not None else None,
            resume=resume, in_shell=in_shell)
