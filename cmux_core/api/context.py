"""What a method handler may reach: one request as a :class:`Call`.

Each methods module declares the few services its handlers use (a small frozen dataclass);
:class:`~cmux_core.app.App` builds one of each and binds it to that module's methods, so a
handler sees it as ``call.ctx``. Handlers never see the server object; the transport's own
facts (version, socket path, connection count, the stop switch) are in :class:`ServerInfo`.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from cmux_core.events import Subscriber

T = TypeVar("T")
C = TypeVar("C", covariant=True)


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
    session_saves: Callable[[], dict[str, int]] = dict
    collect_garbage: Callable[[], object] = gc.collect
    """A full pass of the cycle collector over every object (frozen ones too)."""
    heap: Callable[[], dict[str, object]] = dict
    """The cycle collector's figures (:meth:`cmux_core.heap.HeapKeeper.summary`)."""
    """The session keeper's ``checks`` (captures compared with the last save) and
    ``saves`` (files written) since start."""


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


@dataclass(frozen=True, slots=True)
class Call(Generic[C]):
    """One request being served: ``ctx`` is what its method module declared it uses (bound
    by the composition root). ``connection`` is None for calls made inside the server."""

    ctx: C
    connection: Peer | None
    request_id: Any
    method: str
