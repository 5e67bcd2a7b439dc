"""Server-level methods: ping, stop, stats, area, the session snapshot, the agent
manifests' status and reload, and herdr's config reload.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

from pydantic import Field

from cmux_core.agents.scheduler import DetectionScheduler
from cmux_core.agents.tracker import AgentTracker
from cmux_core.api import wire
from cmux_core.api.context import Call, ServerInfo
from cmux_core.api.dispatch import MethodTable, Result, services
from cmux_core.api.methods.shared.params import Empty
from cmux_core.config import ConfigError
from cmux_core.config_file import load_settings
from cmux_core.events import EventHub
from cmux_core.hookspecs import Params
from cmux_core.model.mux import Mux
from cmux_core.model.pane_io import server_rss_bytes
from cmux_core.model.tree import LIVE_PANES


@services
class ServerServices:
    info: ServerInfo
    events: EventHub
    mux: Mux
    agents: AgentTracker
    detection: DetectionScheduler


methods = MethodTable()


PROTOCOL_VERSION = 20


COLLECT_INTERVAL_S = 1.0
"""``server.stats`` runs the cycle collector at most this often, in seconds."""


_collected_at = -math.inf


@methods.method("ping", Empty)
async def ping(call: Call[ServerServices], p: Empty) -> Result:
    """Liveness check; never touches the model."""
    return {"type": "pong", "version": call.ctx.info.version, "protocol": PROTOCOL_VERSION,
            "capabilities": {"live_handoff": False, "detached_server_daemon": True}}


@methods.method("server.stop", Empty)
async def server_stop(call: Call[ServerServices], p: Empty) -> Result:
    """Stop the server after this reply: every pane's process group gets SIGHUP."""
    call.ctx.info.stopping.set()
    return {"type": "ok"}


@methods.method("server.stats", Empty)
async def server_stats(call: Call[ServerServices], p: Empty) -> Result:
    """Health figures: uptime, counts, memory, and how long the loop was ever stalled.

    ``live_panes`` counts pane objects still in memory, open or closed. Closed panes are
    freed by the cycle collector, so when there are more than the open panes a full pass
    over every object is made first, at most once every :data:`COLLECT_INTERVAL_S` (it
    stalls the loop): a closed pane still counted after that is one something holds on to.
    ``heap`` gives the collector's figures (:class:`cmux_core.heap.HeapKeeper`).
    """
    global _collected_at
    ctx, info = call.ctx, call.ctx.info
    panes = ctx.mux.all_panes()
    now = time.monotonic()
    if len(LIVE_PANES) > len(panes) and now - _collected_at >= COLLECT_INTERVAL_S:
        _collected_at = now
        info.collect_garbage()
    backends: dict[str, int] = {}
    for pane in panes:
        name = pane.terminal.emulator.backend
        backends[name] = backends.get(name, 0) + 1
    return {"type": "server_stats", "version": info.version,
            "uptime_s": round(time.time() - info.started_at, 3),
            "pid": os.getpid(), "socket_path": str(info.socket_path),
            "connections": info.connection_count(), "pending_waits": info.pending_waits,
            "subscribers": ctx.events.subscriber_count(),
            "workspaces": sum(1 for _ in ctx.mux.workspaces()), "panes": len(panes),
            "live_panes": len(LIVE_PANES),
            "closing_terminals": ctx.mux.closing_count(),
            "emulators": backends, "event_loop": info.event_loop,
            "rss_bytes": server_rss_bytes(),
            "loop_lag": info.loop_lag(), "session": info.session_saves(), "heap": info.heap(),
            "event_seq": ctx.events.seq}


class SetAreaParams(Params):
    width: int = Field(ge=2, le=2000)
    height: int = Field(ge=2, le=1000)


@methods.method("server.set_area", SetAreaParams)
async def server_set_area(call: Call[ServerServices], p: SetAreaParams) -> Result:
    """Resize the virtual area every tab is laid out in; every PTY follows."""
    call.ctx.mux.set_area(p.width, p.height)
    area = call.ctx.mux.area
    return {"type": "area", "area": {"x": 0, "y": 0, "width": area.width, "height": area.height}}


@methods.method("session.snapshot", Empty)
async def session_snapshot(call: Call[ServerServices], p: Empty) -> Result:
    """Everything a client needs to bootstrap, in workspace, tab and layout order."""
    mux = call.ctx.mux
    agents = call.ctx.agents
    ws = mux.active_workspace()
    pane = mux.focused_pane()
    snapshot: dict[str, Any] = {
        "version": call.ctx.info.version,
        "protocol": PROTOCOL_VERSION,
        "workspaces": [wire.workspace_info(mux, agents, w) for w in mux.workspaces()],
        "tabs": [wire.tab_info(mux, agents, t) for t in mux.all_tabs()],
        "panes": [wire.pane_info(mux, agents, x) for x in mux.all_panes()],
        "layouts": [wire.layout_snapshot(mux, t) for t in mux.all_tabs()],
        "agents": [],
    }
    if ws is not None:
        snapshot["focused_workspace_id"] = ws.id
        if ws.active_tab is not None:
            snapshot["focused_tab_id"] = ws.active_tab.id
    if pane is not None:
        snapshot["focused_pane_id"] = pane.id
    return {"type": "session_snapshot", "snapshot": snapshot}


async def _runtime(call: Call[ServerServices]) -> DetectionScheduler:
    """The server's detection runtime once its manifests are loaded."""
    runtime = call.ctx.detection
    await runtime.registry.loaded.wait()
    return runtime


@methods.method("server.agent_manifests", Empty)
async def server_agent_manifests(call: Call[ServerServices], p: Empty) -> Result:
    """The manifest in force per agent, its source and any warning; reloads nothing."""
    return (await _runtime(call)).registry.status()


@methods.method("server.reload_config", Empty)
async def server_reload_config(call: Call[ServerServices], p: Empty) -> Result:
    """herdr's config reload, for what this server can change while it runs: the agent
    manifests are reloaded and ``config.toml`` is checked; its settings take effect at the
    next start. ``failed`` when the file is invalid, ``partial`` when a manifest is."""
    diagnostics: list[str] = []
    try:
        load_settings()
        readable = True
    except ConfigError as exc:
        diagnostics.append(str(exc))
        readable = False
    report = await (await _runtime(call)).registry.reload("request", force=True)
    diagnostics += [f"manifest {r.key}: {r.error}" for r in report.errors]
    diagnostics.append("config.toml settings take effect at the next start")
    status = "failed" if not readable else "partial" if report.errors else "applied"
    return {"type": "config_reload", "status": status, "diagnostics": diagnostics}


@methods.method("server.reload_agent_manifests", Empty)
async def server_reload_agent_manifests(call: Call[ServerServices], p: Empty) -> Result:
    """Re-read and re-validate every manifest source now, then re-detect every pane."""
    registry = (await _runtime(call)).registry
    report = await registry.reload("request", force=True)
    return {"type": "agent_manifest_reload", "manifests": registry.infos(),
            "files": [r.to_wire() for r in report.files]}
