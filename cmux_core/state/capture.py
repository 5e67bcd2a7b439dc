"""The session as it is now, in the session file's format (:mod:`cmux_core.state.schema`).

Each of a pane's surfaces is recorded with where its program works now (for the one the
pane shows, an OSC 7 report first; then ``/proc/<pid>/cwd``; else where it was launched),
the argv and env it was launched with (none for the default shell). An agent's session is
recorded only while that agent is the pane's agent (so one that has exited is not
resumed), or while a restored session has not yet been seen to end (``carried``). Runs on
the loop; the only I/O is a ``/proc`` read per surface.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime

from cmux_core import ids
from cmux_core.agents.tracker import AgentTracker, SessionRef
from cmux_core.agents.views import AgentView
from cmux_core.model import layout
from cmux_core.model.arrange import current_cwd
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Pane, Tab, Window, Workspace
from cmux_core.state.schema import (
    VERSION,
    Node,
    PaneAgentState,
    PaneState,
    SessionRefState,
    SessionState,
    SplitState,
    SurfaceState,
    TabState,
    ViewState,
    WindowState,
    WorkspaceState,
)
from cmux_core.terminal import procfs

ResumeFor = Callable[[SessionRef], "list[str] | None"]
"""The command that resumes a session (from its agent's manifest), or None."""


def capture(mux: Mux, tracker: AgentTracker, views: Mapping[str, AgentView], *,
            resume_for: ResumeFor, carried: Collection[str] = ()) -> SessionState:
    """The whole session: every window, workspace, tab and pane, and the named views.

    ``carried`` holds the keys of restored panes whose session is kept until their agent
    is seen (see the module docstring).
    """
    windows = [_window(mux, tracker, w, resume_for, carried) for w in mux.windows]
    active = mux.windows.index(mux.active_window) if mux.active_window in mux.windows \
        else None
    saved = [ViewState(client_id=client, source=view.source, label=view.label,
                       filter=view.spec.get("filter"), sort=view.spec.get("sort"))
             for client, view in sorted(views.items())]
    return SessionState(version=VERSION, saved_at=datetime.now(UTC).isoformat(),
                        windows=windows, active_window=active, views=saved)


def _number(ws: Workspace | None) -> int | None:
    return ids.decode_number(ws.id[1:]) if ws is not None else None


def _window(mux: Mux, tracker: AgentTracker, window: Window, resume_for: ResumeFor,
            carried: Collection[str]) -> WindowState:
    return WindowState(
        uuid=window.uuid, ref=window.ref,
        workspaces=[_workspace(mux, tracker, ws, resume_for, carried)
                    for ws in window.workspaces],
        selected=_number(window.selected), previous=_number(window.previous))


def _workspace(mux: Mux, tracker: AgentTracker, ws: Workspace, resume_for: ResumeFor,
               carried: Collection[str]) -> WorkspaceState:
    number = _number(ws)
    assert number is not None
    return WorkspaceState(
        number=number, uuid=ws.uuid, ref=ws.ref, cwd=ws.cwd, env=dict(ws.env),
        label=ws.label, description=ws.description, pinned=ws.pinned, color=ws.color,
        tabs=[_tab(mux, tracker, tab, resume_for, carried) for tab in ws.tabs],
        active_tab=ws.active_tab.number if ws.active_tab is not None else None,
        next_tab_number=ws.next_tab_number, next_pane_number=ws.next_pane_number)


def _tab(mux: Mux, tracker: AgentTracker, tab: Tab, resume_for: ResumeFor,
         carried: Collection[str]) -> TabState:
    def node(tree: layout.Node) -> Node:
        if isinstance(tree, layout.Leaf):
            return _pane(mux, tracker, mux.panes[tree.pane], resume_for, carried)
        return SplitState(type="split", direction=tree.direction, ratio=tree.ratio,
                          first=node(tree.first), second=node(tree.second))

    previous = mux.panes.get(tab.previous_focus) if tab.previous_focus else None
    return TabState(uuid=tab.uuid, number=tab.number, root=node(tab.tree),
                    focused=mux.panes[tab.focused].number,
                    previous_focus=previous.number if previous is not None else None,
                    zoomed=tab.zoomed, label=tab.label)


def _pane(mux: Mux, tracker: AgentTracker, pane: Pane, resume_for: ResumeFor,
          carried: Collection[str]) -> PaneState:
    surfaces = []
    for surface in pane.surfaces:
        if surface is pane.selected:
            cwd = current_cwd(mux, pane)
        else:
            term = surface.terminal
            cwd = procfs.cwd(term.pid) if term.pid and not term.exited else None
        surfaces.append(SurfaceState(
            uuid=surface.uuid, ref=surface.ref, cwd=cwd or surface.launch_cwd,
            command=list(surface.command) if surface.command else None,
            env=dict(surface.env) if surface.env else None, title=surface.title,
            pinned=surface.pinned))
    return PaneState(
        type="pane", key=pane.key, number=pane.number, ref=pane.ref, surfaces=surfaces,
        selected=pane.surfaces.index(pane.surface), label=pane.label,
        agent=_agent(tracker, pane, resume_for, carried))


def _agent(tracker: AgentTracker, pane: Pane, resume_for: ResumeFor,
           carried: Collection[str]) -> PaneAgentState | None:
    rec = tracker.records.get(pane.key)
    if rec is None:
        return None
    session = tracker.session(pane)
    if session is not None and pane.key not in carried and \
            tracker.effective_agent(pane) != tracker.canonical(session.agent):
        session = None
    if session is None and rec.name is None:
        return None
    resume = resume_for(session) if session is not None else None
    term = pane.terminal
    pgid = term.foreground_pgid()
    in_shell = pane.surface.command is None or (pgid is not None and pgid != term.pid)
    return PaneAgentState(
        name=rec.name,
        session=SessionRefState(source=session.source, agent=session.agent,
                                kind=session.kind, value=session.value)
        if session is not None else None,
        resume=resume, in_shell=in_shell)
