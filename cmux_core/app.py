"""The composition root: builds every part of a server, and starts and stops them in order.

:class:`App` is the only place that knows how the parts fit: the event hub, the model, the
agent tracker, the manifest registry and detection scheduler, the plugin host, the agent
views, the method table and the socket server. Everything else receives what it needs from
here. :func:`serve` runs an app in the foreground for ``cmux serve``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
import sys
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cmux_core import __version__
from cmux_core.agents.scheduler import DetectionScheduler
from cmux_core.agents.tracker import AgentTracker, SessionRef, declarations_from
from cmux_core.agents.views import ViewBook
from cmux_core.api import methods as core_methods
from cmux_core.api import wire
from cmux_core.api.attach import AttachBook
from cmux_core.api.context import ServerInfo
from cmux_core.api.dispatch import MethodTable
from cmux_core.api.methods import register_core_methods
from cmux_core.api.server import Server, ServerAlreadyRunning, SocketPathError
from cmux_core.config import Settings, session_file
from cmux_core.detect.registry import ManifestRegistry
from cmux_core.events import Event, EventHub
from cmux_core.graphics.layers import GraphicsBook
from cmux_core.graphics.leases import FrameDirectory
from cmux_core.graphics.program import ProgramGraphics
from cmux_core.graphics.sources import SourceRunner
from cmux_core.model.events import PaneClosed
from cmux_core.model.mux import Mux
from cmux_core.model.notifications import NotificationBook
from cmux_core.plugin_host.events import PluginUnloaded
from cmux_core.plugin_host.host import PluginHost
from cmux_core.state import SessionKeeper
from cmux_core.terminal.process import Terminal

log = logging.getLogger(__name__)

__all__ = [
    "App", "LoopMonitor", "ServerAlreadyRunning", "loop_factory", "method_schema", "serve",
]


def method_schema() -> dict[str, Any]:
    """JSON Schema of every core method's params (``cmux api schema``), no server needed."""
    table = MethodTable()
    register_core_methods(table)
    return table.schema()


class App:
    """One server's object graph. Build on any thread; :meth:`start` and :meth:`stop` on the
    loop that will serve it."""

    def __init__(self, settings: Settings, socket_path: Path, *, session: str | None = None
                 ) -> None:
        self.settings = settings
        self.socket_path = socket_path
        self.events = EventHub()
        self.mux = Mux(settings, self.events, str(socket_path))
        self.agents = AgentTracker(self.mux, self.events)
        self.events.project = functools.partial(wire.project, self.mux, self.agents)
        self.methods = MethodTable()
        self.plugins = PluginHost(settings, methods=self.methods, publish=self.events.publish,
                                  api=self.request, socket_path=socket_path)
        self.events.observe_wire(self.plugins.on_event)
        self.agents.declarations = lambda: declarations_from(
            self.plugins.integrations().values())
        self.registry = ManifestRegistry(settings, self.plugins)
        self.detection = DetectionScheduler(self.mux, self.agents, self.registry, self.events)
        self.views = ViewBook(self.events)
        self.notifications = NotificationBook(self.mux)
        self.events.observe(self.notifications.on_event)
        self.mux.view_listeners.append(self.notifications.on_view)
        self.events.observe(self._on_event)
        self.keeper = SessionKeeper(
            settings.state_file or session_file(socket_path, settings.state_dir), self.mux,
            self.agents, self.views, self.plugins, self.events, resume_for=self._resume_argv,
            restore=settings.restore, text_lines=settings.restore_text_lines,
            notifications=self.notifications)
        self.loop_monitor = LoopMonitor()
        self.info = ServerInfo(__version__, socket_path, session,
                               loop_lag=self.loop_monitor.summary,
                               method_names=self.methods.names)
        self.graphics = GraphicsBook()
        self.graphics_sources = SourceRunner(self.graphics, self.plugins)
        self.program_graphics = ProgramGraphics(self.graphics)
        if settings.kitty_graphics:
            self.mux.terminal_listeners.append(self.program_graphics.terminal_started)
        self.attach = AttachBook()
        register_core_methods(self.methods, self._method_contexts())
        self.server = Server(self.events, self.methods, socket_path)
        self.info.connection_count = self.server.connection_count
        self.server.close_listeners.append(self.views.connection_closed)
        self.server.close_listeners.append(
            lambda conn: self.graphics.connection_closed(conn.client_id))
        self.server.request_listeners.append(self.loop_monitor.poke)
        self.server.request_listeners.append(self.keeper.request_seen)

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
            m.notification.NotificationServices(mux, self.notifications),
            m.pane.arrangement.ArrangementServices(mux, agents),
            m.pane.attach.AttachServices(mux, settings, self.attach, self.graphics),
            m.pane.graphics.GraphicsServices(mux, settings, self.graphics,
                                             self.graphics_sources),
            m.pane.io.PaneIoServices(mux, info),
            m.pane.lifecycle.LifecycleServices(mux, agents, settings),
            m.pane.reports.ReportServices(mux, agents, self.plugins),
            m.plugin.PluginServices(self.plugins),
            m.server.ServerServices(info, self.events, mux, agents, self.detection),
            m.surface.SurfaceServices(mux, agents, settings),
            m.system.SystemServices(info, mux, agents, self.attach, self.notifications),
            m.tab.TabServices(mux, agents, settings),
            m.window.WindowServices(mux, settings),
            m.workspace.WorkspaceServices(mux, agents, settings),
        ]

    def _on_event(self, event: Event) -> None:
        """What one part does about another's events, where neither may import the other."""
        if isinstance(event, PluginUnloaded):
            self.views.plugin_unloaded(event.plugin.plugin_id, event.reason)
            self.graphics_sources.plugin_unloaded(event.plugin.plugin_id)
        elif isinstance(event, PaneClosed):
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
        server itself); raises CmuxError exactly as the client would see it."""
        return await self.methods.call(method, dict(params), connection=connection)

    async def start(self) -> None:
        """Bind the socket, load plugins, restore the saved session (or create the default
        workspace), start detection and the session's saving.

        Plugins are loaded before the socket accepts connections, so no request sees half of
        them. Raises :class:`ServerAlreadyRunning` when a live server answers on the path and
        :class:`~cmux_core.api.server.SocketPathError` when the path is unsafe or unusable.
        """
        loop = asyncio.get_running_loop()
        self.info.event_loop = ("uvloop" if type(loop).__module__.startswith("uvloop")
                                else "asyncio")
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.info.stopping.set)
        await self.server.bind()
        if self.settings.kitty_graphics:
            self.graphics.frames = FrameDirectory.create(self.socket_path)
        await self.plugins.load()
        await self.server.listen()
        self.keeper.restore(fresh=self._fresh_session)
        self.loop_monitor.start()
        await self.plugins.start()
        await self.detection.start()
        self.keeper.start()

    async def run_until_stopped(self) -> None:
        await self.info.stopping.wait()
        await self.stop()

    async def stop(self) -> None:
        """Stop accepting, stop plugins and detection, SIGHUP every pane, reap the children,
        remove the graphics frame directory, unlink the socket."""
        self.loop_monitor.stop()
        self.server.stop_accepting()
        await self.keeper.stop()
        await self.graphics_sources.stop()
        await self.plugins.stop()
        await self.detection.stop()
        self.server.drop_connections()
        await _reap(self.mux.close_all())
        if self.graphics.frames is not None:
            self.graphics.frames.remove()
        self.server.unlink()


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


class LoopMonitor:
    """Measures how late the event loop runs a timer: the worst stall any client saw.

    While armed, one wake-up every :attr:`interval` seconds; keeps the last ``keep``
    lateness samples. Each request pokes it (:meth:`poke`); it disarms itself after
    :attr:`linger` seconds without one, so an idle server is not woken by it.
    """

    def __init__(self, interval: float = 0.1, keep: int = 600, linger: float = 5.0) -> None:
        self.interval = interval
        self.linger = linger
        self.samples: deque[float] = deque(maxlen=keep)
        self.worst = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._poked = 0.0
        self._running = False

    def start(self) -> None:
        self._running = True
        self.poke()

    def stop(self) -> None:
        self._running = False
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def poke(self) -> None:
        """Something happened that a client waits on: measure for the next while."""
        if not self._running:
            return
        loop = asyncio.get_running_loop()
        self._poked = loop.time()
        if self._handle is None:
            self._due = self._poked + self.interval
            self._handle = loop.call_at(self._due, self._tick)

    def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        late = max(0.0, now - self._due)
        self.samples.append(late)
        self.worst = max(self.worst, late)
        if now - self._poked > self.linger:
            self._handle = None
            return
        self._due = now + self.interval
        self._handle = loop.call_at(self._due, self._tick)

    def summary(self) -> dict[str, float]:
        ordered = sorted(self.samples)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else 0.0
        return {"max_ms": round(self.worst * 1000, 3), "p99_ms": round(p99 * 1000, 3),
                "recent_max_ms": round((ordered[-1] if ordered else 0.0) * 1000, 3)}


async def _run(settings: Settings, socket_path: Path, session: str | None,
               announce: bool) -> int:
    app = App(settings, socket_path, session=session)
    try:
        await app.start()
    except (ServerAlreadyRunning, SocketPathError) as exc:
        print(f"cmux: {exc}", file=sys.stderr)
        return 1
    if announce:
        pane = app.mux.focused_pane()
        backend = pane.terminal.emulator.backend if pane else settings.emulator
        bin_dir = Path(sys.executable).parent
        print(f"cmux {app.info.version} listening on {socket_path} "
              f"(area {settings.columns}x{settings.rows}, {backend} screens, pane "
              f"{pane.id if pane else '-'} running {settings.shell})\n"
              "In another shell:\n"
              f"  export CMUX_SOCKET_PATH={socket_path} PATH={bin_dir}:$PATH\n"
              "  cmux ping && cmux workspace list && cmux pane list\n"
              "Stop with Ctrl-C or `cmux server stop`.", flush=True)
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
          announce: bool = True) -> int:
    """Serve in the foreground; returns the process exit code."""
    try:
        factory = loop_factory(settings.event_loop)
    except ValueError as exc:
        print(f"cmux: {exc}", file=sys.stderr)
        return 1
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(_run(settings, socket_path, session, announce))
