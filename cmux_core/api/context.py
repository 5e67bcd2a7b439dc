"""What a method handler may reach: the services the composition root built.

:class:`~cmux_core.app.App` builds one :class:`Services` and hands it to the socket server,
which passes it to every handler as ``call.ctx``. Handlers never see the server object; the
transport's own facts (version, socket path, connection count, the stop switch) are in
:class:`ServerInfo`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from cmux_core.agents.scheduler import DetectionScheduler
from cmux_core.agents.tracker import AgentTracker
from cmux_core.agents.views import ViewBook
from cmux_core.api.attach import AttachBook
from cmux_core.config import Settings
from cmux_core.events import EventHub, Subscriber
from cmux_core.graphics.layers import GraphicsBook
from cmux_core.graphics.sources import SourceRunner
from cmux_core.model.mux import Mux
from cmux_core.model.notifications import NotificationBook
from cmux_core.plugin_host.host import PluginHost

T = TypeVar("T")


@dataclass(slots=True)
class ServerInfo:
    """The serving process as ``ping``, ``server.stats`` and ``system.identify`` report it."""

    version: str
    socket_path: Path
    session: str | None = None
    started_at: float = field(default_factory=time.time)
    event_loop: str = "asyncio"
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    """Set to stop the server after the current replies (``server.stop``, signals)."""
    pending_waits: int = 0
    """Requests currently holding their connection open (waits)."""
    connection_count: Callable[[], int] = lambda: 0
    loop_lag: Callable[[], dict[str, float]] = dict
    method_names: Callable[[], list[str]] = list


@dataclass(slots=True)
class Services:
    """Everything a core handler may use; built once by the composition root."""

    settings: Settings
    info: ServerInfo
    events: EventHub
    mux: Mux
    agents: AgentTracker
    detection: DetectionScheduler
    plugins: PluginHost
    views: ViewBook
    notifications: NotificationBook
    attach: AttachBook = field(default_factory=AttachBook)
    graphics: GraphicsBook = field(default_factory=GraphicsBook)
    graphics_sources: SourceRunner | None = None
    """Plugin graphics sources feeding layers (None: a server built without plugins)."""


class Peer(Protocol):
    """The client connection a request came on, as handlers may use it."""

    client_id: str
    """This connection's id (``conn-<n>``), unique for the life of the server."""

    @property
    def peer_pid(self) -> int | None:
        """The pid of the process that connected (``SO_PEERCRED``); None when unknown."""
        ...

    async def until_gone(self, awaitable: Coroutine[Any, Any, T]) -> T:
        """Await ``awaitable`` unless the peer disconnects first: then ``awaitable`` is
        cancelled (its ``finally`` blocks run) or closed unstarted, and
        :class:`~cmux_core.errors.Disconnected` is raised."""
        ...

    def start_stream(self, sub: Subscriber) -> None:
        """Stream ``sub``'s events on this connection until overflow or disconnect."""

    def run_task(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` as a task this connection owns: it is cancelled when the peer leaves."""

    def send(self, data: bytes) -> None:
        """Write ``data`` to the peer as it is, after everything written before it."""

    async def drain(self) -> None:
        """Wait until the peer has taken what was written (returns at once if it left)."""

    def take_raw(self) -> asyncio.StreamReader:
        """Stop reading requests on this connection; its bytes are the caller's from now on
        (``invalid_stream`` when requests already wait behind this one)."""
        ...

    def finish(self) -> None:
        """End a connection taken with :meth:`take_raw`."""


@dataclass(slots=True)
class Call:
    """One request being served. ``connection`` is None for calls made inside the server."""

    ctx: Services
    connection: Peer | None
    request_id: Any
    method: str
