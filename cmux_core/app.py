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
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cmux_core import __version__
from cmux_core.agents.authority import SessionRef, declarations_from
from cmux_core.agents.scheduler import DetectionScheduler
from cmux_core.agents.tracker import AgentTracker
from cmux_core.agents.views import ViewBook
from cmux_core.api import wire
from cmux_core.api.context import Call, ServerInfo, Services
from cmux_core.api.dispatch import MethodTable
from cmux_core.api.loop_monitor import LoopMonitor
from cmux_core.api.methods import register_core_methods
from cmux_core.api.server import Server
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
from cmux_core.socket_safety import ServerAlreadyRunning, SocketPathError
from cmux_core.state import SessionKeeper
from cmux_core.terminal.process import Terminal

log = logging.getLogger(__name__)

__all__ = ["App", "loop_factory", "method_schema", "serve"]


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
        register_core_methods(self.methods)
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
        self.services = Services(settings, self.info, self.events, self.mux, self.agents,
                                 self.detection, self.plugins, self.views,
                                 self.notifications, graphics=self.graphics,
                                 graphics_sources=self.graphics_sources)
        self.server = Server(self.services, self.methods, socket_path)
        self.info.connection_count = self.server.connection_count
        self.server.close_listeners.append(self.views.connection_closed)
        self.server.close_listeners.append(
            lambda conn: self.graphics.connection_closed(conn.client_id))
        self.server.request_listeners.append(self.loop_monitor.poke)
        self.server.request_listeners.append(self.keeper.request_seen)

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
        call = Call(self.services, connection, None, method)
        return await self.methods.call(call, dict(params))

    async def start(self) -> None:
        """Bind the socket, load plugins, restore the saved session (or create the default
        workspace), start detection and the session's saving.

        Plugins are loaded before the socket accepts connections, so no request sees half of
        them. Raises :class:`~cmux_core.socket_safety.ServerAlreadyRunning` when a live
        server answers on the path and :class:`~cmux_core.socket_safety.SocketPathError`
        when the path is unsafe or unusable.
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
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(_run(settings, socket_path, session, on_ready))
