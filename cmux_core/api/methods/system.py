"""The cmux v2 family's system.* methods and auth.login (``surface.*`` is in ``surface.py``).

Results carry UUIDs in ``*_id`` and short refs in ``*_ref``; absent values are
``null``. Every result also has a ``type`` so herdr-style clients can read it.

"""

from __future__ import annotations

import base64
import os
import time
from typing import Any

from pydantic import Field

from cmux_core.agents.tracker import AgentTracker
from cmux_core.api.attach import AttachBook
from cmux_core.api.context import Call, ServerInfo
from cmux_core.api.dispatch import MethodTable, Result, services
from cmux_core.api.methods import herdr_extras
from cmux_core.api.methods.cmux_v2_catalog import NOT_SUPPORTED
from cmux_core.api.methods.shared.input import key_bytes, write
from cmux_core.api.methods.shared.params import Empty
from cmux_core.api.methods.shared.projections import row_cache
from cmux_core.api.methods.shared.routing import (
    Routing,
    surface_keys,
    surface_of,
    workspace_keys,
    workspace_of,
)
from cmux_core.api.methods.shared.rows import NOMINAL_CELL_PX, surface_row, window_row
from cmux_core.errors import CmuxError, InvalidParams
from cmux_core.hookspecs import Params
from cmux_core.model.mux import Mux
from cmux_core.model.notifications import NotificationBook
from cmux_core.model.pane_io import (
    ProcessStat,
    process_command,
    sample_processes,
    server_rss_bytes,
    surface_text,
    terminal_processes,
)
from cmux_core.model.tree import Pane, Surface, Workspace


@services
class SystemServices:
    info: ServerInfo
    mux: Mux
    agents: AgentTracker
    attach: AttachBook
    notifications: NotificationBook


methods = MethodTable()


@methods.method("system.ping", Empty)
async def system_ping(call: Call[SystemServices], p: Empty) -> Result:
    return {"type": "pong", "pong": True}


@methods.method("system.capabilities", Empty)
async def system_capabilities(call: Call[SystemServices], p: Empty) -> Result:
    """Every method this server answers, sorted; the cmux and herdr methods that only
    answer ``not_supported`` are left out."""
    refused = NOT_SUPPORTED.keys() | herdr_extras.NOT_SUPPORTED.keys()
    return {"type": "capabilities", "protocol": "cmux-socket", "version": 2,
            "socket_path": str(call.ctx.info.socket_path), "access_mode": "automation",
            "methods": [m for m in call.ctx.info.method_names() if m not in refused]}


class AuthParams(Params):
    password: str | None = None


@methods.method("auth.login", AuthParams)
async def auth_login(call: Call[SystemServices], p: AuthParams) -> Result:
    """Password mode is not enabled: every same-user connection is already trusted."""
    return {"type": "auth", "authenticated": True, "required": False}


def focused_keys(mux: Mux, ws: Workspace | None, surface: Surface | None) -> dict[str, Any]:
    if ws is None:
        window = mux.active_window
        return {"window_id": window.uuid if window else None,
                "window_ref": window.ref if window else None}
    out: dict[str, Any] = {**workspace_keys(ws), "pane_id": None, "pane_ref": None,
                           "surface_id": None, "surface_ref": None, "tab_id": None,
                           "tab_ref": None, "surface_type": None, "is_browser_surface": False}
    if surface is not None:
        out.update({"pane_id": surface.pane.key, "pane_ref": surface.pane.ref,
                    "surface_id": surface.uuid, "surface_ref": surface.ref,
                    "tab_id": surface.uuid, "tab_ref": surface.ref, "surface_type": "terminal"})
    return out


class Caller(Params):
    workspace_id: str | None = None
    surface_id: str | None = None
    tab_id: str | None = None


class IdentifyParams(Params):
    caller: Caller | None = None


@methods.method("system.identify", IdentifyParams)
async def system_identify(call: Call[SystemServices], p: IdentifyParams) -> Result:
    """Where focus is, and where the caller (a pane's own ids) sits."""
    mux = call.ctx.mux
    pane = mux.focused_pane()
    focused = focused_keys(mux, mux.active_workspace(), pane.surface if pane else None)
    caller = None
    if p.caller is not None and p.caller.workspace_id:
        ws = mux.find_workspace(p.caller.workspace_id)
        if ws is not None:
            sid = p.caller.surface_id or p.caller.tab_id
            surface = mux.find_surface(sid) if sid else None
            caller = focused_keys(mux, ws, surface)
    return {"type": "identify", "socket_path": str(call.ctx.info.socket_path),
            "focused": focused, "caller": caller, "app_executable_path": None,
            "version": call.ctx.info.version}


def pane_node(mux: Mux, agents: AgentTracker, pane: Pane, index: int) -> dict[str, Any]:
    return {"id": pane.key, "ref": pane.ref, "index": index, "focused": mux.is_focused(pane),
            "surface_ids": [s.uuid for s in pane.surfaces],
            "surface_refs": [s.ref for s in pane.surfaces],
            "selected_surface_id": pane.surface.uuid, "selected_surface_ref": pane.surface.ref,
            "surface_count": len(pane.surfaces),
            "surfaces": [surface_row(mux, agents, s, i) for i, s in enumerate(pane.surfaces)]}


async def workspace_node(mux: Mux, agents: AgentTracker, ws: Workspace, index: int
                         ) -> dict[str, Any]:
    panes = await row_cache(mux, "tree_node", pane_node, surfaces=True, foreground=False).rows(
        mux, agents, mux.workspace_panes(ws))
    return {"id": ws.uuid, "ref": ws.ref, "index": index, "title": mux.workspace_label(ws),
            "description": ws.description, "selected": ws.window.selected is ws,
            "pinned": False, "workspace_id": ws.id, "panes": panes}


class TreeParams(Params):
    workspace_id: str | None = None
    window_id: str | None = None
    all_windows: bool = False


@methods.method("system.tree", TreeParams)
async def system_tree(call: Call[SystemServices], p: TreeParams) -> Result:
    """Windows → workspaces → panes → surfaces (the active window unless asked)."""
    mux = call.ctx.mux
    if p.window_id and p.all_windows:
        raise InvalidParams("all_windows", "cannot be combined with window_id")
    if p.all_windows:
        windows = mux.windows
    elif p.window_id:
        windows = [mux.window(p.window_id)]
    elif p.workspace_id:
        windows = [mux.workspace(p.workspace_id).window]
    else:
        windows = [mux.active_window] if mux.active_window else []
    nodes = []
    for window in list(windows):  # workspace_node may let others run: lists may change
        if window not in mux.windows:
            continue
        node = window_row(mux, window, mux.windows.index(window))
        node["workspaces"] = [await workspace_node(mux, call.ctx.agents, ws, i)
                              for i, ws in enumerate(list(window.workspaces))
                              if not p.workspace_id or ws is mux.workspace(p.workspace_id)]
        nodes.append(node)
    pane = mux.focused_pane()
    active = focused_keys(mux, mux.active_workspace(), pane.surface if pane else None)
    return {"type": "tree", "active": active, "caller": None, "windows": nodes}


def process_row(p: ProcessStat, cpu: dict[int, float]) -> dict[str, Any]:
    argv = process_command(p.pid)
    return {"pid": p.pid, "ppid": p.ppid, "pgid": p.pgid, "name": p.comm,
            "command": " ".join(argv) or p.comm, "state": p.state,
            "cpu_seconds": round(p.cpu_seconds, 2), "cpu_percent": cpu.get(p.pid, 0.0),
            "rss_bytes": p.rss_bytes}


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"process_count": len(rows),
            "cpu_percent": round(sum(r["cpu_percent"] for r in rows), 1),
            "rss_bytes": sum(r["rss_bytes"] for r in rows)}


class TopParams(TreeParams):
    include_processes: bool = True
    sample_ms: int = Field(default=200, ge=0, le=2000)


def server_row(table: list[ProcessStat], cpu: dict[int, float]) -> dict[str, Any]:
    me = next((p for p in table if p.pid == os.getpid()), None)
    return {"pid": os.getpid(), "rss_bytes": me.rss_bytes if me else server_rss_bytes(),
            "cpu_percent": cpu.get(os.getpid(), 0.0)}


@methods.method("system.top", TopParams)
async def system_top(call: Call[SystemServices], p: TopParams) -> Result:
    """``system.tree`` with every terminal's processes (read from /proc): CPU over a
    ``sample_ms`` window (default 200 ms) and resident memory, with totals per surface
    and for the whole server."""
    tree = await system_tree(call, p)
    table, cpu = await sample_processes(p.sample_ms)
    mux = call.ctx.mux
    everything: list[dict[str, Any]] = []
    for window in tree["windows"]:
        for ws_node in window["workspaces"]:
            # The pane nodes are the tree's kept ones: copies get the process keys.
            ws_node["panes"] = [{**node, "surfaces": [dict(s) for s in node["surfaces"]]}
                                for node in ws_node["panes"]]
            for pane_node_ in ws_node["panes"]:
                for row in pane_node_["surfaces"]:
                    surface = mux.surface(row["id"])
                    procs = [process_row(x, cpu) for x in terminal_processes(table, surface)]
                    everything.extend(procs)
                    row["totals"] = totals(procs)
                    if p.include_processes:
                        row["processes"] = procs
    server = server_row(table, cpu)
    return {**tree, "type": "top", "sample": {"interval_ms": p.sample_ms, "at": time.time()},
            "server": server, "totals": totals(everything)}


class MemoryParams(TreeParams):
    group_limit: int = Field(default=10, ge=1, le=100)
    top_group_limit: int | None = Field(default=None, ge=1, le=100)


@methods.method("system.memory", MemoryParams)
async def system_memory(call: Call[SystemServices], p: MemoryParams) -> Result:
    """Resident memory of the server and of every terminal's processes (all windows
    unless one is named): per surface, and per program name largest first
    (``group_limit`` groups, 1-100)."""
    mux = call.ctx.mux
    table, _ = await sample_processes(0)
    if p.window_id:
        wanted = list(mux.window(p.window_id).workspaces)
    elif p.workspace_id:
        wanted = [mux.workspace(p.workspace_id)]
    else:
        wanted = list(mux.workspaces())
    per_surface: list[dict[str, Any]] = []
    programs: dict[str, list[ProcessStat]] = {}
    for ws in wanted:
        for pane in mux.workspace_panes(ws):
            for surface in pane.surfaces:
                procs = terminal_processes(table, surface)
                for x in procs:
                    programs.setdefault(x.comm, []).append(x)
                per_surface.append({**surface_keys(surface), "process_count": len(procs),
                                    "rss_bytes": sum(x.rss_bytes for x in procs)})
    per_surface.sort(key=lambda r: -r["rss_bytes"])
    limit = p.top_group_limit or p.group_limit
    groups = sorted(((sum(x.rss_bytes for x in procs), name, len(procs))
                     for name, procs in programs.items()), reverse=True)
    return {"type": "memory", "server": server_row(table, {}),
            "totals": {"rss_bytes": sum(r["rss_bytes"] for r in per_surface),
                       "process_count": sum(r["process_count"] for r in per_surface)},
            "surfaces": per_surface,
            "program_totals": [{"program": name, "process_count": count, "rss_bytes": rss}
                               for rss, name, count in groups[:limit]]}


@methods.method("debug.terminals", Empty)
async def debug_terminals(call: Call[SystemServices], p: Empty) -> Result:
    """Every terminal the server runs: where it sits, its process, PTY, size, state,
    and the CPU time and memory of its processes."""
    mux = call.ctx.mux
    table, _ = await sample_processes(0)
    rows = []
    for pane in mux.all_panes():
        for surface in pane.surfaces:
            term = surface.term
            if term is None:
                continue
            procs = terminal_processes(table, surface)
            leader = next((x for x in procs if x.pid == term.pid), None)
            rows.append({
                **surface_keys(surface), "terminal_id": term.id, "public_pane_id": pane.id,
                "selected": pane.selected is surface, "pid": term.pid or None,
                "tty": leader.tty if leader else None, "argv": term.argv, "cwd": term.cwd,
                "columns": term.columns, "rows": term.rows, "emulator": term.emulator.backend,
                "title": term.emulator.title, "exited": term.exited,
                "exit_code": term.exit_code, "created_at": term.created_at,
                "foreground_pgid": None if term.exited else term.foreground_pgid(),
                "process_count": len(procs),
                "cpu_seconds": round(sum(x.cpu_seconds for x in procs), 2),
                "rss_bytes": sum(x.rss_bytes for x in procs)})
    return {"type": "terminals", "count": len(rows), "terminals": rows}


class TypeParams(Params):
    text: str


@methods.method("debug.type", TypeParams)
async def debug_type(call: Call[SystemServices], p: TypeParams) -> Result:
    """Type ``text`` into the focused surface, as keystrokes would reach it."""
    surface = surface_of(call.ctx.mux, Routing())
    write(surface, p.text.encode())
    return {"type": "ok", **surface_keys(surface)}


class ShortcutParams(Params):
    combo: str


@methods.method("debug.shortcut.simulate", ShortcutParams)
async def debug_shortcut_simulate(call: Call[SystemServices], p: ShortcutParams) -> Result:
    """Press a key combo in the focused surface (``enter``, ``ctrl-c``, ``up``, ...);
    a combo with ``cmd`` is a shortcut of the GUI app: ``not_supported``."""
    if "cmd" in p.combo.lower().replace("-", "+").split("+"):
        raise CmuxError("not_supported", f"{p.combo} is a shortcut of the GUI app",
                        {"combo": p.combo})
    surface = surface_of(call.ctx.mux, Routing())
    write(surface, key_bytes(surface, p.combo))
    return {"type": "ok", **surface_keys(surface)}


@methods.method("debug.app.activate", Empty)
async def debug_app_activate(call: Call[SystemServices], p: Empty) -> Result:
    """The app counts as active from now on (see ``app.focus_override.set``)."""
    call.ctx.notifications.app_became_active = True
    return {"type": "ok", "active": call.ctx.notifications.app_active}


@methods.method("debug.terminal.is_focused", Routing)
async def debug_terminal_is_focused(call: Call[SystemServices], p: Routing) -> Result:
    """Whether the surface is the one typed input goes to (the focused surface of the
    active workspace)."""
    mux = call.ctx.mux
    surface = surface_of(mux, p)
    focused = mux.is_focused(surface.pane) and surface.pane.selected is surface
    return {"type": "ok", **surface_keys(surface), "focused": focused}


@methods.method("debug.terminal.read_text", Routing)
async def debug_terminal_read_text(call: Call[SystemServices], p: Routing) -> Result:
    """The surface's visible screen as text and base64."""
    surface = surface_of(call.ctx.mux, p)
    text = surface_text(surface)
    return {"type": "ok", **surface_keys(surface), "text": text,
            "base64": base64.b64encode(text.encode()).decode()}


@methods.method("debug.terminal.render_stats", Routing)
async def debug_terminal_render_stats(call: Call[SystemServices], p: Routing) -> Result:
    """The surface's terminal as it is drawn: its size, cursor and output count (headless,
    nothing is presented, so ``presentCount`` counts the output batches the screen took)."""
    surface = surface_of(call.ctx.mux, p)
    term = surface.terminal
    x, y = term.emulator.cursor()
    stats = {"columns": term.columns, "rows": term.rows, "cursor_x": x, "cursor_y": y,
             "presentCount": term.output_seq, "attached": len(call.ctx.attach.sessions(
                 surface.pane)) if surface.pane.selected is surface else 0}
    return {"type": "ok", **surface_keys(surface), "stats": stats}


@methods.method("debug.flash.count", Routing)
async def debug_flash_count(call: Call[SystemServices], p: Routing) -> Result:
    """How many times the surface was flashed since the last ``debug.flash.reset``."""
    surface = surface_of(call.ctx.mux, p)
    return {"type": "ok", **surface_keys(surface), "count": surface.flash_count}


@methods.method("debug.flash.reset", Empty)
async def debug_flash_reset(call: Call[SystemServices], p: Empty) -> Result:
    """Set every surface's flash count back to 0."""
    for pane in call.ctx.mux.all_panes():
        for surface in pane.surfaces:
            surface.flash_count = 0
    return {"type": "ok"}


@methods.method("debug.notification.focus", Routing)
async def debug_notification_focus(call: Call[SystemServices], p: Routing) -> Result:
    """What clicking a notification does: focus its surface (``surface_id``, else the
    focused one of ``workspace_id``) and flash it; its notifications stay unread."""
    mux = call.ctx.mux
    surface = surface_of(mux, p)
    flashes = surface.flash_count
    mux.focus_surface(surface)
    if surface.flash_count == flashes:  # showing it did not flash it already
        surface.flash_count += 1
    return {"type": "ok", **surface_keys(surface)}


@methods.method("debug.layout", Routing)
async def debug_layout(call: Call[SystemServices], p: Routing) -> Result:
    """The panes of the workspace the call means (default: the active one) as laid out,
    at ``layout.layout.panes``: each pane's rectangle in the nominal pixels ``pane.list``
    uses (cell size times cells), with the area as ``container``."""
    mux = call.ctx.mux
    ws = workspace_of(mux, p)
    width, height = NOMINAL_CELL_PX
    rows = []
    if ws.active_tab is not None:
        for key, rect in mux.pane_rects(ws.active_tab).items():
            pane = mux.panes[key]
            rows.append({"paneId": pane.key, "pane_id": pane.key, "pane_ref": pane.ref,
                         "frame": {"x": rect.x * width, "y": rect.y * height,
                                   "width": rect.width * width,
                                   "height": rect.height * height},
                         "selectedSurfaceId": pane.surface.uuid,
                         "surface_ids": [s.uuid for s in pane.surfaces],
                         "focused": mux.is_focused(pane)})
    container = {"width": mux.area.width * width, "height": mux.area.height * height}
    # cmux's debug response holds the layout under "layout", and is itself under "layout".
    return {"type": "layout", **workspace_keys(ws),
            "layout": {"layout": {"panes": rows, "container": container}}}
