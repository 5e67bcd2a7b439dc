"""The wire projection: typed model, agent and plugin objects and events as JSON-ready dicts.

This is where the core's wire objects are made: PaneInfo, TabInfo, WorkspaceInfo (with
their agent fields), the layout snapshot, AgentInfo, the results of the arrange functions,
and the ``data`` of every event (:func:`project`). Everything is read from the objects and
the tracker at the call; the composition root hands :func:`project`, bound to its mux and
tracker, to the event hub, which calls it when an event is published, so an event's data
shows the state of that moment. Key order is stable: clients see the same lines for the
same state.
"""

from __future__ import annotations

import time
from typing import Any

from cmux_core.agents.events import (
    PaneAgentDetected,
    PaneAgentStatusChanged,
    ServerManifestsReloaded,
    SurfaceAgentDetected,
    SurfaceAgentStatusChanged,
    WorkspaceMetadataUpdated,
)
from cmux_core.agents.record import AgentRecord
from cmux_core.agents.tracker import AgentTracker
from cmux_core.agents.views import VIEW_CHANGED, AgentViewChanged, inactive
from cmux_core.events import Event
from cmux_core.fleet.events import MachineRemoved, MachineStateChanged
from cmux_core.model import arrange, layout
from cmux_core.model.events import (
    LayoutUpdated,
    PaneClosed,
    PaneCreated,
    PaneCwdChanged,
    PaneExited,
    PaneFocused,
    PaneMoved,
    PaneNotification,
    PaneProgressChanged,
    PaneUpdated,
    TabClosed,
    TabCreated,
    TabFocused,
    TabMoved,
    TabRenamed,
    WorkspaceClosed,
    WorkspaceCreated,
    WorkspaceFocused,
    WorkspaceMoved,
    WorkspaceRenamed,
    WorkspaceReordered,
)
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Pane, Surface, Tab, Workspace
from cmux_core.plugin_host.events import PluginError, PluginEvent, PluginLoaded, PluginUnloaded
from cmux_core.terminal.emulator import strip_title

Wire = dict[str, Any]


# -- the model ------------------------------------------------------------------------------


def workspace_info(mux: Mux, agents: AgentTracker, ws: Workspace) -> Wire:
    """WorkspaceInfo; ``number`` is 0 once the workspace left its window."""
    active = ws.active_tab
    info: Wire = {
        "workspace_id": ws.id,
        "number": mux.workspace_position(ws) if ws in ws.window.workspaces else 0,
        "label": mux.workspace_label(ws),
        "focused": mux.active_workspace() is ws,
        "pane_count": sum(len(layout.panes(t.tree)) for t in ws.tabs),
        "tab_count": len(ws.tabs),
        "active_tab_id": active.id if active else "",
        "agent_status": agents.rollup(mux.workspace_panes(ws)),
    }
    tokens = agents.workspace_tokens(ws)
    if tokens:
        info["tokens"] = tokens
    info.update({"cwd": ws.cwd, "uuid": ws.uuid, "ref": ws.ref})
    return info


def tab_info(mux: Mux, agents: AgentTracker, tab: Tab) -> Wire:
    ws = tab.workspace
    return {
        "tab_id": tab.id,
        "workspace_id": ws.id,
        "number": tab.number,
        "label": mux.tab_label(tab),
        "focused": mux.active_workspace() is ws and ws.active_tab is tab,
        "pane_count": len(layout.panes(tab.tree)),
        "agent_status": agents.rollup(mux.tab_panes(tab)),
        "zoomed": tab.zoomed,
    }


def pane_info(mux: Mux, agents: AgentTracker, pane: Pane) -> Wire:
    """PaneInfo: the pane, its selected surface's terminal, and its agent fields."""
    return terminal_info(mux, agents, pane.terminal_surface)


def terminal_info(mux: Mux, agents: AgentTracker, surface: Surface) -> Wire:
    """PaneInfo of ``surface``'s pane as it reads with ``surface``'s terminal in it: the
    pane's own when the pane shows that terminal; for a background tab ``focused`` is
    false and ``shown`` is false."""
    pane = surface.pane
    term = surface.terminal
    shown = pane.terminal_surface is surface
    ws = pane.tab.workspace
    info: Wire = {
        "pane_id": pane.id,
        "terminal_id": term.id,
        "workspace_id": ws.id,
        "tab_id": pane.tab.id,
        "focused": shown and mux.is_focused(pane),
        "revision": pane.title_revision,
        **pane_agent_fields(agents, surface),
    }
    # A background tab's own directories: where it started, where its program is now.
    cwd = mux.pane_cwd(pane) if shown else surface.launch_cwd
    if cwd:
        info["cwd"] = cwd
    fg_cwd = mux.foreground_cwd(term) if not term.exited else None
    if fg_cwd:
        info["foreground_cwd"] = fg_cwd
    if pane.label:
        info["label"] = pane.label
    title = term.emulator.title
    if title:
        info["terminal_title"] = title
        stripped = strip_title(title)
        if stripped:
            info["terminal_title_stripped"] = stripped
    info.update({
        "number": pane.number,
        "uuid": pane.key,
        "ref": pane.ref,
        "surface_id": surface.uuid,
        "surface_ref": surface.ref,
        "emulator": term.emulator.backend,
        "columns": term.columns,
        "rows": term.rows,
        "pid": term.pid,
    })
    if term.exited:
        info["exited"] = True
        info["exit_code"] = term.exit_code
    if not shown:
        info["shown"] = False
    return info


def _rect(r: layout.Rect) -> Wire:
    return {"x": r.x, "y": r.y, "width": r.width, "height": r.height}


def layout_snapshot(mux: Mux, tab: Tab) -> Wire:
    """The tab's pane rects, split rects and focus within the mux's area."""
    rects = layout.rects(tab.tree, mux.area)
    panes = [{"pane_id": mux.panes[key].id, "focused": key == tab.focused,
              "rect": _rect(rects[key])} for key in layout.panes(tab.tree)]
    splits = [{"id": s.id, "direction": s.direction, "ratio": s.ratio, "rect": _rect(s.rect)}
              for s in layout.split_rects(tab.tree, mux.area)]
    focused = mux.panes.get(tab.focused)
    return {
        "workspace_id": tab.workspace.id,
        "tab_id": tab.id,
        "zoomed": tab.zoomed,
        "area": _rect(mux.area),
        "focused_pane_id": focused.id if focused else "",
        "panes": panes,
        "splits": splits,
    }


# -- agents ---------------------------------------------------------------------------------


def pane_agent_fields(agents: AgentTracker, target: Pane | Surface) -> Wire:
    """Agent and metadata fields of PaneInfo (omitted when empty) for a terminal surface,
    or a pane's shown one.

    ``revision`` replaces the pane's title revision with title + token revisions.
    """
    pane = agents.surface_of(target).pane
    rec = agents.find_record(target)
    out: Wire = {"agent_status": agents.status(target), "revision": pane.title_revision}
    if rec is None:
        return out
    out["revision"] += rec.metadata.revision
    agent = agents.effective_agent(target)
    if agent is not None:
        out["agent"] = agent
    out.update(agents.presentation(target))
    tokens = rec.metadata.token_values()
    if tokens:
        out["tokens"] = tokens
    session = agents.session(target)
    if session is not None:
        out["agent_session"] = session.to_wire()
    if agents.is_agent(target):
        out.update(_provenance(rec))
    return out


def surface_agent_fields(agents: AgentTracker, surface: Surface) -> Wire:
    """The agent fields of a cmux-family surface row: ``agent_status`` of a terminal, and
    when it runs an agent ``agent`` (and the ``agent_name`` it was started or renamed
    with); nothing for a markdown surface."""
    if surface.term is None:
        return {}
    out: Wire = {"agent_status": agents.status(surface)}
    agent = agents.effective_agent(surface)
    if agent is not None:
        out["agent"] = agent
    rec = agents.find_record(surface)
    if rec is not None and rec.name is not None:
        out["agent_name"] = rec.name
    return out


def _provenance(rec: AgentRecord) -> Wire:
    out: Wire = {"seen": rec.seen, "status_source": rec.status_source}
    if rec.status_source_detail is not None:
        out["status_source_detail"] = rec.status_source_detail
    if rec.status_changed_at:
        out["status_changed_at"] = rec.status_changed_at
    return out


def agent_info(mux: Mux, agents: AgentTracker, target: Pane | Surface) -> Wire:
    """AgentInfo of a terminal surface (a pane: the one it shows) plus the provenance
    extension fields, ``surface_id`` and, for a pane's background tab, ``shown: false``.

    ``launch_pending`` and ``interactive_ready`` are present only when true, and only
    for a managed launch (see :mod:`cmux_core.agents.tracker`). Extensions: ``seen``,
    ``status_source`` (``hook``/``screen``/``process_exit``/``release``/``none``),
    ``status_source_detail`` (the hook source or matched rule), ``status_changed_at``
    (unix seconds), ``custom_status``, ``message``.
    """
    surface = agents.surface_of(target)
    info = terminal_info(mux, agents, surface)
    out: Wire = {"terminal_id": info["terminal_id"]}
    rec = agents.record(surface)
    if rec.name is not None:
        out["name"] = rec.name
    for key in ("agent", "title", "terminal_title", "terminal_title_stripped",
                "display_agent"):
        if key in info:
            out[key] = info[key]
    out["agent_status"] = info["agent_status"]
    if agents.screen_detection_skipped(surface):
        out["screen_detection_skipped"] = True
    for key in ("state_labels", "tokens", "agent_session"):
        if key in info:
            out[key] = info[key]
    out.update({"workspace_id": info["workspace_id"], "tab_id": info["tab_id"],
                "pane_id": info["pane_id"], "surface_id": surface.uuid,
                "focused": info["focused"]})
    if "shown" in info:
        out["shown"] = False
    if rec.launch is not None and rec.launch.pending:
        out["launch_pending"] = True
    if rec.launch is not None and rec.launch.ready:
        out["interactive_ready"] = True
    out["state_change_seq"] = rec.state_change_seq
    for key in ("cwd", "foreground_cwd"):
        if key in info:
            out[key] = info[key]
    out["revision"] = info["revision"]
    if "custom_status" in info:
        out["custom_status"] = info["custom_status"]
    out.update(_provenance(rec))
    auth = rec.authority
    if auth is not None and auth.message and not auth.spent and (
            auth.expires_at is None or time.monotonic() < auth.expires_at):
        out["message"] = auth.message  # a report overridden or past its TTL says nothing
    return out


def agent_status(event: PaneAgentStatusChanged | SurfaceAgentStatusChanged) -> Wire:
    """The data of ``pane_agent_status_changed`` or ``surface_agent_status_changed``
    (without ``type``)."""
    where = (_at(event.pane, event.surface) if isinstance(event, PaneAgentStatusChanged)
             else _on(event.surface))
    status = event.status
    data: Wire = {**where, "agent_status": status.agent_status}
    if status.agent is not None:
        data["agent"] = status.agent
    if status.title is not None:
        data["title"] = status.title
    if status.display_agent is not None:
        data["display_agent"] = status.display_agent
    if status.state_labels is not None:
        data["state_labels"] = status.state_labels
    return data


# -- arrange results --------------------------------------------------------------------------


def _focused_id(mux: Mux, tab: Tab) -> str:
    return mux.panes[tab.focused].id


def neighbor(mux: Mux, found: arrange.Neighbor) -> Wire:
    other = found.neighbor
    return {"pane_id": found.pane.id, "direction": found.direction,
            "neighbor_pane_id": other.id if other else None,
            "layout": layout_snapshot(mux, found.pane.tab)}


def edges(mux: Mux, found: arrange.Edges) -> Wire:
    return {"pane_id": found.pane.id, **found.touching,
            "layout": layout_snapshot(mux, found.pane.tab)}


def swap(mux: Mux, done: arrange.Swap) -> Wire:
    return {"changed": done.reason is None, "reason": done.reason,
            "source_pane_id": done.source_pane_id, "target_pane_id": done.target_pane_id,
            "focused_pane_id": _focused_id(mux, done.tab),
            "layout": layout_snapshot(mux, done.tab)}


def focus_move(mux: Mux, done: arrange.FocusMove) -> Wire:
    tab = done.source.tab
    return {"changed": done.changed, "reason": None if done.changed else "no_neighbor",
            "source_pane_id": done.source.id, "focused_pane_id": _focused_id(mux, tab),
            "layout": layout_snapshot(mux, tab)}


def zoom(mux: Mux, done: arrange.Zoom) -> Wire:
    tab = done.pane.tab
    return {"changed": done.zoom_changed or done.focus_changed,
            "zoom_changed": done.zoom_changed, "focus_changed": done.focus_changed,
            "reason": done.reason, "pane_id": done.pane.id,
            "focused_pane_id": _focused_id(mux, tab), "zoomed": tab.zoomed,
            "layout": layout_snapshot(mux, tab)}


def resize(mux: Mux, done: arrange.Resize) -> Wire:
    tab = done.pane.tab
    return {"changed": done.changed, "reason": None if done.changed else "unchanged",
            "pane_id": done.pane.id, "focused_pane_id": _focused_id(mux, tab),
            "layout": layout_snapshot(mux, tab)}


def _moved(mux: Mux, agents: AgentTracker, moved: PaneMoved) -> Wire:
    created_ws, created_tab = moved.created_workspace, moved.created_tab
    return {
        "previous_pane_id": moved.previous_pane_id,
        "previous_workspace_id": moved.previous_workspace_id,
        "previous_tab_id": moved.previous_tab_id,
        "pane": pane_info(mux, agents, moved.pane),
        "created_workspace": (workspace_info(mux, agents, created_ws)
                              if created_ws is not None else None),
        "created_tab": tab_info(mux, agents, created_tab) if created_tab is not None else None,
        "closed_workspace_id": moved.closed_workspace_id,
        "closed_tab_id": moved.closed_tab_id,
    }


def move_result(mux: Mux, agents: AgentTracker, done: arrange.MoveResult) -> Wire:
    """PaneMoveResult."""
    moved = _moved(mux, agents, done.moved)
    source = layout_snapshot(mux, done.source_tab) if done.source_tab is not None else None
    target = layout_snapshot(mux, done.target_tab)
    focused = _focused_id(mux, done.target_tab)
    if done.reason is None:
        return {"changed": True, "reason": None, **moved, "source_layout": source,
                "target_layout": target, "focused_pane_id": focused}
    # Nothing moved: the layouts come before the (empty) created and closed fields.
    return {"changed": False, "reason": done.reason,
            "previous_pane_id": moved.pop("previous_pane_id"),
            "previous_workspace_id": moved.pop("previous_workspace_id"),
            "previous_tab_id": moved.pop("previous_tab_id"), "pane": moved.pop("pane"),
            "source_layout": source, "target_layout": target, **moved,
            "focused_pane_id": focused}


# -- events ---------------------------------------------------------------------------------


def plugin_event(event: PluginEvent) -> Wire:
    """The data of a plugin host event (without ``type``)."""
    plugin = event.plugin
    match event:
        case PluginLoaded():
            return {"plugin_id": plugin.plugin_id, "reloaded": event.reloaded,
                    "plugin": plugin.to_wire()}
        case PluginUnloaded():
            return {"plugin_id": plugin.plugin_id, "reason": event.reason,
                    "plugin": plugin.to_wire()}
        case PluginError():
            return {"plugin_id": plugin.plugin_id, "hook": event.hook,
                    "message": event.message, "blocked": event.blocked}


def _at(pane: Pane, surface: Surface | None = None) -> Wire:
    """Where an event happened; a pane agent event adds the terminal it shows."""
    data: Wire = {"pane_id": pane.id, "workspace_id": pane.tab.workspace.id}
    if surface is not None and surface.term is not None:
        data.update(terminal_id=surface.term.id, surface_id=surface.uuid)
    return data


def _on(surface: Surface) -> Wire:
    """Where a surface agent event happened: the terminal, its pane, tab and workspace,
    and ``shown: false`` when the pane shows another terminal."""
    pane = surface.pane
    data: Wire = {"surface_id": surface.uuid, "terminal_id": surface.terminal.id,
                  "pane_id": pane.id, "tab_id": pane.tab.id,
                  "workspace_id": pane.tab.workspace.id}
    if pane.terminal_surface is not surface:
        data["shown"] = False
    return data


def _detected(event: PaneAgentDetected | SurfaceAgentDetected) -> Wire:
    data = (_at(event.pane, event.surface) if isinstance(event, PaneAgentDetected)
            else _on(event.surface))
    if event.released:
        data.update(released=True, final_status=event.final_status)
    if event.agent is not None:
        data["agent"] = event.agent
    return data


def _notification(event: PaneNotification) -> Wire:
    data = {**_at(event.pane), "body": event.body}
    if event.title:
        data["title"] = event.title
    if event.dropped:
        data["dropped"] = event.dropped
    return data


def _reordered(mux: Mux, agents: AgentTracker, event: WorkspaceReordered) -> Wire:
    data: Wire = {"workspace_ids": [ws.id for ws in event.block],
                  "workspaces": [workspace_info(mux, agents, w) for w in mux.workspaces()]}
    if event.before is not None:
        data["before_workspace_id"] = event.before.id
    return data


def project(mux: Mux, agents: AgentTracker, event: Event) -> Wire:
    """``event``'s wire data (the hub adds ``type``), read from the state now.

    Raises TypeError for an event type without a wire form.
    """
    match event:
        case PaneCreated() | PaneUpdated():
            return {"pane": pane_info(mux, agents, event.pane)}
        case PaneClosed() | PaneFocused():
            return _at(event.pane)
        case LayoutUpdated():
            return {"layout": layout_snapshot(mux, event.tab)}
        case PaneAgentStatusChanged() | SurfaceAgentStatusChanged():
            return agent_status(event)
        case PaneAgentDetected() | SurfaceAgentDetected():
            return _detected(event)
        case PaneExited():
            return {**_at(event.pane), "exit_code": event.exit_code}
        case PaneCwdChanged():
            return {**_at(event.pane), "cwd": event.cwd}
        case PaneProgressChanged():
            return {**_at(event.pane), "progress": event.progress}
        case PaneNotification():
            return _notification(event)
        case PaneMoved():
            moved = _moved(mux, agents, event)
            return {k: v for k, v in moved.items() if v is not None}
        case TabCreated():
            return {"tab": tab_info(mux, agents, event.tab)}
        case TabClosed() | TabFocused():
            return {"tab_id": event.tab.id, "workspace_id": event.tab.workspace.id}
        case TabRenamed():
            tab = event.tab
            return {"tab_id": tab.id, "workspace_id": tab.workspace.id,
                    "label": mux.tab_label(tab)}
        case TabMoved():
            tab = event.tab
            return {"tab_id": tab.id, "workspace_id": tab.workspace.id,
                    "insert_index": event.insert_index,
                    "tabs": [tab_info(mux, agents, t) for t in tab.workspace.tabs]}
        case WorkspaceCreated() | WorkspaceMetadataUpdated():
            return {"workspace": workspace_info(mux, agents, event.workspace)}
        case WorkspaceClosed():
            ws = event.workspace
            if not event.snapshot:
                return {"workspace_id": ws.id}
            return {"workspace_id": ws.id, "workspace": workspace_info(mux, agents, ws)}
        case WorkspaceFocused():
            return {"workspace_id": event.workspace.id}
        case WorkspaceRenamed():
            ws = event.workspace
            return {"workspace_id": ws.id, "label": mux.workspace_label(ws)}
        case WorkspaceMoved():
            return {"workspace_id": event.workspace.id, "insert_index": event.insert_index,
                    "workspaces": [workspace_info(mux, agents, w) for w in mux.workspaces()]}
        case WorkspaceReordered():
            return _reordered(mux, agents, event)
        case AgentViewChanged():
            data = event.view.to_wire() if event.view is not None else inactive()
            data.update(type=VIEW_CHANGED, client_id=event.client_id)
            return data
        case ServerManifestsReloaded():
            report = event.report
            return {"trigger": report.trigger,
                    "files": [r.to_wire() for r in report.files if r.status != "unchanged"],
                    "manifests": event.registry.infos()}
        case PluginLoaded() | PluginUnloaded() | PluginError():
            return plugin_event(event)
        case MachineStateChanged() | MachineRemoved():
            return event.to_wire()
    raise TypeError(f"{type(event).__name__} has no wire form")
