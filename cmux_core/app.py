"""The composition root: builds every part of a server, and starts and stops them in order.

:class:`App` is the only place that knows how the parts fit: the event hub, the model, the
agent tracker, the manifest registry and detection scheduler, the plugin host, the agent
views, the method table, the socket server and the report-only sockets. Everything else
receives what it needs from here. :func:`serve` runs an app in the foreground for ``cmux serve``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson

from cmux_core.agents.authority import SessionRef, declarations_from
from cmux_core.agents.events import SurfaceAgentDetected
from cmux_core.agents.scheduler import DetectionScheduler
from cmux_core.agents.tracker import AgentTracker
from cmux_core.agents.views import AgentViewChanged, ViewBook, project_for
from cmux_core.api import methods as core_methods
from cmux_core.api import wire
from cmux_core.api.attach import AttachBook
from cmux_core.api.context import ServerInfo
from cmux_core.api.dispatch import MethodTable
from cmux_core.api.loop_monitor import LoopMonitor
from cmux_core.api.methods import register_core_methods
from cmux_core.api.methods.server import PROTOCOL_VERSION
from cmux_core.api.report_socket import ReportSockets
from cmux_core.api.server import Connection, Server
from cmux_core.config import Settings, session_file
from cmux_core.detect.registry import ManifestRegistry, ReloadReport
from cmux_core.errors import CmuxError
from cmux_core.events import Event, EventHub, Published
from cmux_core.fleet import Fleet, FleetRouter, MachineBook
from cmux_core.graphics.layers import GraphicsBook, Layer
from cmux_core.graphics.leases import FrameDirectory
from cmux_core.graphics.program import ProgramGraphics
from cmux_core.graphics.sources import SourceRunner
from cmux_core.heap import HeapKeeper
from cmux_core.model.events import (
    LayoutUpdated,
    PaneClosed,
    PaneCreated,
    PaneExited,
    PaneFocused,
    PaneNotification,
    PaneUpdated,
    TabViewed,
    TerminalStarted,
    WorkspaceClosed,
)
from cmux_core.model.mux import Mux
from cmux_core.model.notifications import NotificationBook
from cmux_core.model.tree import Pane, Surface
from cmux_core.plugin_host.events import PluginRegistrationsChanged, PluginUnloaded
from cmux_core.plugin_host.host import PluginHost
from cmux_core.socket_safety import ServerAlreadyRunning, SocketPathError
from cmux_core.state import SessionKeeper
from cmux_core.terminal.process import Terminal
from cmux_core.version import __version__

log = logging.getLogger(__name__)

__all__ = ["App", "integration_call", "loop_factory", "method_schema", "serve"]


def method_schema() -> dict[str, Any]:
    """JSON Schema of every core method's params (``cmux api schema``), no server needed."""
    table = MethodTable()
    register_core_methods(table)
    return table.schema()


def integration_call(settings: Settings, method: str, params: Mapping[str, Any]
                     ) -> dict[str, Any]:
    """Answer one ``integration.*`` method in this process, without a server: the plugins
    this environment installs or links are loaded here, so an install edits the files of
    the user running it (its ``HOME``, ``CLAUDE_CONFIG_DIR``, ...). Raises CmuxError as the
    server would."""
    async def run() -> dict[str, Any]:
        host = PluginHost(settings, methods=MethodTable(), watch=False)
        table = MethodTable()
        table.merge(core_methods.integration.methods,
                    context=core_methods.integration.IntegrationServices(host))
        await host.load()
        try:
            return await table.call(method, dict(params))
        finally:
            await host.stop()

    return asyncio.run(run())


def connect_agents(events: EventHub, agents: AgentTracker) -> None:
    """The agent tracker's reactions to the model, a server's first observers (also for a
    tracker built without a server)."""
    on = events.observe
    on(PaneExited, agents.pane_exited)
    on(PaneUpdated, agents.pane_updated)
    on(PaneClosed, agents.pane_closed)
    on(PaneCreated, agents.pane_shown)
    on(PaneFocused, agents.pane_shown)
    on(WorkspaceClosed, agents.workspace_closed)
    on(TabViewed, lambda notice: agents.mark_tab_seen(notice.tab))


class App:
    """One server's object graph. Build on any thread; :meth:`start` and :meth:`stop` on the
    loop that will serve it."""

    def __init__(self, settings: Settings, socket_path: Path, *, session: str | None = None
                 ) -> None:
        self.settings = settings
        self.socket_path = socket_path
        self.events = EventHub(project=self._project)
        self.mux = Mux(settings, self.events, str(socket_path), on_output=self._output)
        self.methods = MethodTable()
        self.plugins = PluginHost(settings, methods=self.methods, publish=self.events.publish,
                                  api=self.request, socket_path=socket_path)
        self.registry = ManifestRegistry(settings, self.plugins,
                                         on_reload=self._manifests_reloaded)
        self.agents = AgentTracker(
            self.mux, self.events, canonical_agent=self.registry.canonical,
            declarations=lambda: declarations_from(self.plugins.integrations().values()))
        self.detection = DetectionScheduler(self.mux, self.agents, self.registry, self.events)
        self.views = ViewBook(self.events)
        self.notifications = NotificationBook(self.mux)
        self.keeper = SessionKeeper(
            settings.state_file or session_file(socket_path, settings.state_dir), self.mux,
            self.agents, self.views, self.plugins, resume_for=self._resume_argv,
            restore=settings.restore, text_lines=settings.restore_text_lines,
            notifications=self.notifications)
        self.loop_monitor = LoopMonitor()
        self.heap = HeapKeeper()
        self._restore_signals: Callable[[], None] = lambda: None
        self.info = ServerInfo(__version__, socket_path, session,
                               connection_count=self._connection_count,
                               loop_lag=self.loop_monitor.summary,
                               method_names=self.methods.names,
                               session_saves=self._session_saves,
                               collect_garbage=self.heap.collect, heap=self.heap.summary)
        self.graphics = GraphicsBook(
            on_reclaimed=self._layer_reclaimed,
            make_frames=(functools.partial(FrameDirectory.create, socket_path)
                         if settings.kitty_graphics else None))
        self.graphics_sources = SourceRunner(self.graphics, self.plugins)
        self.program_graphics = ProgramGraphics(self.graphics)
        self.attach = AttachBook()
        self.report_sockets = ReportSockets(self.events, self.methods, self.mux, self.agents,
                                            socket_path)
        self.fleet = Fleet(MachineBook(), socket_path.parent / f"{socket_path.name}.fleet",
                           PROTOCOL_VERSION, self.events.publish)
        self.methods.router = FleetRouter(self.fleet, self._call_here, self._project_agents)
        register_core_methods(self.methods, self._method_contexts())
        self.server = Server(self.events, self.methods, socket_path,
                             on_request=self._request_seen, on_close=self._connection_closed)
        self._observe()

    def _observe(self) -> None:
        """Every part's reaction to another's events and notices, in the order each one
        reaches them (an event's subscribers have its wire line before any of these)."""
        connect_agents(self.events, self.agents)
        on = self.events.observe
        on(Published, lambda event: self.plugins.on_event(event.kind, event.data))
        on(PaneCreated, self.detection.pane_changed)
        on(PaneUpdated, self.detection.pane_changed)
        on(PaneClosed, self.detection.drop_closed)
        on(PaneUpdated, self.detection.drop_closed)
        on(PluginRegistrationsChanged, lambda notice: self.registry.plugins_changed(
            notice.kinds))
        on(PaneNotification, self.notifications.on_event)
        on(TabViewed, lambda notice: self.notifications.on_view(notice.tab))
        on(PluginUnloaded, self._plugin_unloaded)
        on(PaneClosed, self._pane_closed)
        on(PaneCreated, lambda event: self.heap.grown())
        on(PaneClosed, lambda event: self.heap.released())
        on(PaneClosed, self.report_sockets.pane_changed)
        on(PaneUpdated, self.report_sockets.pane_changed)
        if self.settings.kitty_graphics:
            on(TerminalStarted, lambda notice: self.program_graphics.terminal_started(
                notice.pane, notice.surface.terminal))
        on(AgentViewChanged, self.keeper.view_changed)
        on(SurfaceAgentDetected, self.keeper.agent_detected)
        on(PaneExited, self.keeper.pane_exited)
        on(PaneClosed, self.keeper.pane_closed)
        on(Event, self.keeper.event_seen)
        on(Event, self.mux.stamps.event_seen)
        on(LayoutUpdated, self.attach.layout_updated)

    def _method_contexts(self) -> list[object]:
        """What each core methods module's handlers may use."""
        m = core_methods
        mux, agents, settings, info = self.mux, self.agents, self.settings, self.info
        return [
            m.agent.AgentServices(mux, agents, self.events, info, self.detection, self.views,
                                  self.plugins),
            m.events.EventServices(mux, agents, self.events, info),
            m.integration.IntegrationServices(self.plugins),
            m.layout.LayoutServices(mux, agents, settings),
            m.machine.MachineServices(self.fleet),
            m.notification.NotificationServices(mux, self.notifications),
            m.pane.arrangement.ArrangementServices(mux, agents),
            m.pane.attach.AttachServices(mux, settings, self.attach, self.graphics),
            m.pane.graphics.GraphicsServices(mux, settings, self.graphics,
                                             self.graphics_sources),
            m.pane.io.PaneIoServices(mux, info),
            m.pane.lifecycle.LifecycleServices(mux, agents, settings),
            m.pane.reports.ReportServices(mux, agents, self.plugins, self.report_sockets),
            m.plugin.PluginServices(self.plugins),
            m.server.ServerServices(info, self.events, mux, agents, self.detection),
            m.surface.SurfaceServices(mux, agents, settings),
            m.system.SystemServices(info, mux, agents, self.attach, self.notifications),
            m.tab.TabServices(mux, agents, settings),
            m.window.WindowServices(mux, settings),
            m.workspace.WorkspaceServices(mux, agents, settings),
        ]

    # -- what parts hand the app, for the parts built after them ---------------------------

    def _project(self, event: Event) -> dict[str, Any]:
        return wire.project(self.mux, self.agents, event)

    def _output(self, pane: Pane, surface: Surface) -> None:
        """A terminal absorbed output (the hot path: no event for it)."""
        self.keeper.output_seen()
        self.detection.surface_output(surface)

    def _manifests_reloaded(self, report: ReloadReport) -> None:
        self.detection.manifests_reloaded(report)

    async def _call_here(self, method: str, params: dict[str, Any], connection: Any
                         ) -> dict[str, Any]:
        return await self.methods.call_here(method, params, connection=connection)

    async def _project_agents(self, rows: list[dict[str, Any]], view: bool | str,
                              connection: Any) -> list[Any]:
        """A merged agent list through this machine's view of ``connection``'s client."""
        return await project_for(self.views, connection, rows, view, self.mux, self.plugins)

    def _connection_count(self) -> int:
        return self.server.connection_count()

    def _request_seen(self, method: str) -> None:
        self.loop_monitor.poke()
        self.keeper.request_seen(method)

    def _session_saves(self) -> dict[str, int]:
        return {"checks": self.keeper.checks, "saves": self.keeper.saves}

    def _connection_closed(self, conn: Connection) -> None:
        self.views.connection_closed(conn)
        self.graphics.connection_closed(conn.client_id)
        self.report_sockets.connection_closed(conn.client_id)

    def _layer_reclaimed(self, layer: Layer) -> None:
        self.graphics_sources.layer_reclaimed(layer)

    def _plugin_unloaded(self, event: PluginUnloaded) -> None:
        self.views.plugin_unloaded(event.plugin.plugin_id, event.reason)
        self.graphics_sources.plugin_unloaded(event.plugin.plugin_id)
        self.heap.released()

    def _pane_closed(self, event: PaneClosed) -> None:
        self.graphics.pane_closed(event.pane.key)
        self.program_graphics.pane_closed(event.pane.key)

    def _fresh_session(self) -> None:
        if self.settings.empty:
            return
        self.mux.create_window()
        self.mux.create_workspace(focus=True)

    def _resume_argv(self, session: SessionRef) -> list[str] | None:
        """The command that resumes ``session``, from its agent's manifest."""
        manifest = self.registry.get(session.agent)
        return manifest.resume_argv(session.kind, session.value) if manifest else None

    async def request(self, method: str, params: Mapping[str, Any],
                      connection: Any = None) -> dict[str, Any]:
        """Answer one socket API call in-process, as ``connection``'s client (None: the
        server itself); raises CmuxError exactly as the client would see it. The result is
        the caller's own, the JSON a client would read (encoded and decoded again, several
        times faster than a deep copy of a large list): answers may hold rows the server
        keeps between calls (:mod:`cmux_core.api.methods.shared.projections`)."""
        result = await self.methods.call(method, dict(params), connection=connection)
        copied: dict[str, Any] = orjson.loads(orjson.dumps(result))
        return copied

    async def start(self) -> None:
        """Bind the socket, load plugins, restore the saved session (or create the default
        workspace), start detection and the session's saving.

        Plugins are loaded before the socket accepts connections, so no request sees half of
        them. Raises :class:`~cmux_core.socket_safety.ServerAlreadyRunning` when a live
        server answers on the path and :class:`~cmux_core.socket_safety.SocketPathError`
        when the path is unsafe or unusable.
        """
        loop = asyncio.get_running_loop()
        # A fact of the run, not a connection: the app may be built before its loop exists.
        self.info.event_loop = ("uvloop" if type(loop).__module__.startswith("uvloop")
                                else "asyncio")
        self._restore_signals = _stop_on_signals(loop, self.info.stopping.set, self._force_stop)
        await self.server.bind()
        self.graphics.open_frames()
        await self.plugins.load()
        try:
            await self.fleet.start()
        except (CmuxError, OSError) as exc:
            log.warning("fleet not started: %s", exc)
        await self.server.listen()
        self.keeper.restore(fresh=self._fresh_session)
        self.loop_monitor.start()
        self.heap.start(loop)
        await self.plugins.start()
        await self.detection.start()
        self.keeper.start()

    def _force_stop(self) -> None:
        """The way out when the loop does not stop in time: on a watchdog thread, remove
        the socket and the graphics frames and end the process (the panes get their hangup
        as the process's PTY masters close)."""
        log.warning("the server did not stop within %gs of the signal; exiting now",
                    STOP_GRACE_S)
        with contextlib.suppress(Exception):
            self.server.unlink()
            self.graphics.remove_frames()
        os._exit(1)

    async def run_until_stopped(self) -> None:
        await self.info.stopping.wait()
        await self.stop()

    async def stop(self) -> None:
        """Stop accepting, stop plugins and detection, close the report sockets, SIGHUP every
        pane, reap the children, remove the graphics frame directory, unlink the socket."""
        self.loop_monitor.stop()
        self.heap.stop()
        self.server.stop_accepting()
        await self.fleet.stop()
        await self.keeper.stop()
        await self.graphics_sources.stop()
        await self.plugins.stop()
        await self.detection.stop()
        self.report_sockets.stop()
        self.server.drop_connections()
        await _reap(self.mux.close_all())
        self.graphics.remove_frames()
        self.server.unlink()
        self._restore_signals()


GIL_SWITCH_INTERVAL_S = 0.0005
"""How long a thread holding the GIL keeps it when another one asks (``sys.setswitchinterval``)."""

STOP_GRACE_S = 5.0
"""Seconds after SIGINT or SIGTERM within which the server must have stopped; past them a
watchdog thread removes the socket and ends the process, however stuck the loop is."""


def _stop_on_signals(loop: asyncio.AbstractEventLoop, stop: Callable[[], None],
                     force: Callable[[], None]) -> Callable[[], None]:
    """On SIGINT or SIGTERM ask ``loop`` to ``stop`` and start a watchdog thread that calls
    ``force`` if the process still runs :data:`STOP_GRACE_S` later; a second signal forces at
    once. Plain ``signal`` handlers run on the main thread between bytecodes, so they need no
    turn of the loop. Returns what puts the previous handlers back."""
    again = threading.Event()
    watching = False

    def watchdog() -> None:
        again.wait(STOP_GRACE_S)
        force()

    def on_signal(signum: int, frame: object) -> None:
        nonlocal watching
        if watching:
            again.set()
            return
        watching = True
        threading.Thread(target=watchdog, name="cmux-stop-watchdog", daemon=True).start()
        with contextlib.suppress(RuntimeError):  # the loop has closed: it stopped already
            loop.call_soon_threadsafe(stop)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
    return restore


async def _reap(terms: list[Terminal]) -> None:
    """Wait up to 1.5 s for hung-up terminals to exit, SIGKILL the rest, wait 1 s more."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 1.5
    while terms and loop.time() < deadline:
        await asyncio.sleep(0.02)
        terms = [t for t in terms if not t.process_done]
    for t in terms:
        t.kill()
    deadline = loop.time() + 1.0
    while terms and loop.time() < deadline:
        await asyncio.sleep(0.02)
        terms = [t for t in terms if not t.process_done]


async def _run(settings: Settings, socket_path: Path, session: str | None,
               on_ready: Callable[[App], None] | None) -> int:
    app = App(settings, socket_path, session=session)
    try:
        await app.start()
    except (ServerAlreadyRunning, SocketPathError) as exc:
        print(f"cmux: {exc}", file=sys.stderr)
        return 1
    if on_ready is not None:
        on_ready(app)
    await app.run_until_stopped()
    return 0


LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def loop_factory(choice: str) -> LoopFactory | None:
    """The event loop to serve on: uvloop's for ``uvloop``, and for ``auto`` when it
    imports; ``None`` (asyncio's own) for ``asyncio``. ValueError for anything else."""
    if choice not in ("auto", "asyncio", "uvloop"):
        raise ValueError(f"event_loop must be auto, asyncio or uvloop, not {choice!r}")
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError as exc:
        if choice == "uvloop":
            raise ValueError(f"event_loop uvloop cannot be loaded: {exc}") from exc
        return None
    factory: LoopFactory = uvloop.new_event_loop
    return factory


def serve(settings: Settings, socket_path: Path, *, session: str | None = None,
          on_ready: Callable[[App], None] | None = None) -> int:
    """Serve in the foreground; returns the process exit code. ``on_ready`` is called on
    the app's loop with the app once it has started (``cmux serve`` prints its banner)."""
    try:
        factory = loop_factory(settings.event_loop)
    except ValueError as exc:
        print(f"cmux: {exc}", file=sys.stderr)
        return 1
    # A plugin thread busy in Python code takes the GIL from the loop for up to this long
    # at a time (Python's default is 5 ms, several of which a request may wait for).
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(_run(settings, socket_path, session, on_ready))
