"""The asyncio Unix-socket server: binding, connections, subscriptions.

Transport only: the composition root (:class:`~cmux_core.app.App`) builds the services and
the method table and starts and stops this server. Each connection has a reader task,
which splits lines (skipping any over :data:`~cmux_core.api.framing.MAX_LINE_BYTES`) and
notices the peer going away, and a worker task, which answers requests strictly in order.
Long requests (waits) are raced against the peer's disconnect, so a client that leaves
cancels its wait and leaves nothing behind. Nothing a client sends can stop the server from
serving the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import socket
import struct
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from cmux_core.api.context import Call, Services
from cmux_core.api.dispatch import MethodTable
from cmux_core.api.framing import (
    MAX_LINE_BYTES,
    LineSplitter,
    Request,
    RequestError,
    encode_error,
    encode_event,
    encode_success,
    parse_line,
)
from cmux_core.config import runtime_dir
from cmux_core.errors import CmuxError, InternalError
from cmux_core.events import EventHub, Subscriber

log = logging.getLogger(__name__)

T = TypeVar("T")
_CLOSED = object()
_PEER_GONE = "peer disconnected"


class ServerAlreadyRunning(RuntimeError):
    pass


class Disconnected(Exception):
    """The peer went away while its request was being served."""


class Connection:
    """One client connection. Lines are answered in the order they arrive."""

    def __init__(self, server: Server, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter, client_id: str) -> None:
        self.server = server
        self.client_id = client_id
        self.reader = reader
        self.writer = writer
        self.lines: asyncio.Queue[bytes | object] = asyncio.Queue()
        self.gone = asyncio.Event()
        self.subscriptions: list[Subscriber] = []
        self.tasks: set[asyncio.Task[Any]] = set()
        # Tasks inside until_gone: cancelled (with _PEER_GONE) when the peer leaves.
        self.holding: set[asyncio.Task[Any]] = set()

    async def read_lines(self) -> None:
        splitter = LineSplitter(MAX_LINE_BYTES)
        try:
            while True:
                chunk = await self.reader.read(65536)
                if not chunk:
                    break
                for item in splitter.feed(chunk):
                    self.lines.put_nowait(item)
        except (ConnectionError, OSError):
            pass
        finally:
            self.gone.set()
            self.lines.put_nowait(_CLOSED)
            for task in list(self.holding):
                task.cancel(_PEER_GONE)

    async def serve(self) -> None:
        reader_task = asyncio.create_task(self.read_lines())
        try:
            while True:
                item = await self.lines.get()
                if item is _CLOSED:
                    break
                if isinstance(item, CmuxError):
                    self.send(encode_error(None, item))
                    continue
                assert isinstance(item, bytes)
                await self.handle_line(item)
                if self.writer.is_closing():
                    break
                await self.drain()
            # Keep streaming subscriptions open until the peer leaves.
            if self.subscriptions:
                await self.gone.wait()
        finally:
            reader_task.cancel()
            for sub in self.subscriptions:
                self.server.events.unsubscribe(sub)
            self.server.connection_closed(self)
            for task in list(self.tasks):
                task.cancel()
            with contextlib.suppress(Exception):
                self.writer.close()

    async def handle_line(self, line: bytes) -> None:
        try:
            request = parse_line(line)
        except RequestError as exc:
            self.send(encode_error(exc.request_id, exc))
            return
        try:
            result = await self.server.call(request, self)
        except Disconnected:
            return
        except CmuxError as exc:
            self.send(encode_error(request.id, exc))
            return
        try:
            self.send(encode_success(request.id, result))
        except TypeError as exc:
            log.exception("cannot encode result of %s", request.method)
            self.send(encode_error(request.id, InternalError(message=f"encode failed: {exc}")))

    def send(self, data: bytes) -> None:
        if not self.writer.is_closing():
            self.writer.write(data)

    async def drain(self) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.drain()

    async def until_gone(self, awaitable: Coroutine[Any, Any, T]) -> T:
        """Await ``awaitable`` in the current task unless the peer disconnects first.

        The reader cancels every task held here when the peer goes away; that
        cancellation surfaces as :class:`Disconnected`. No task is spawned per
        request, which keeps short waits cheap.
        """
        task = asyncio.current_task()
        assert task is not None
        if self.gone.is_set():
            awaitable.close()
            raise Disconnected
        self.holding.add(task)
        try:
            return await awaitable
        except asyncio.CancelledError as exc:
            if exc.args and exc.args[0] is _PEER_GONE:
                task.uncancel()
                raise Disconnected from None
            raise
        finally:
            self.holding.discard(task)

    def run_task(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def start_stream(self, sub: Subscriber) -> None:
        """Stream ``sub``'s events on this connection until overflow or disconnect."""
        self.subscriptions.append(sub)
        task = asyncio.create_task(self._pump(sub))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _pump(self, sub: Subscriber) -> None:
        try:
            while not sub.closed:
                batch = await sub.next_batch()
                for event in batch:
                    self.send(encode_event(event.kind, event.data))
                if sub.overflowed:
                    self.send(encode_event("subscription_overflow", {
                        "type": "subscription_overflow",
                        "message": "subscriber fell too far behind; subscription ended",
                        "dropped_after_seq": self.server.events.seq}))
                    self.server.events.unsubscribe(sub)
                    self.writer.close()
                    return
                await self.drain()
        except asyncio.CancelledError:
            pass


class Server:
    """Serves ``methods`` on a Unix socket; every call gets ``services`` as its context."""

    def __init__(self, services: Services, methods: MethodTable, socket_path: Path) -> None:
        self.services = services
        self.methods = methods
        self.events: EventHub = services.events
        self.socket_path = socket_path
        self.close_listeners: list[Callable[[Connection], None]] = []
        """Called with each connection as it closes (views keyed by it are dropped)."""
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task[Any]] = set()
        self._client_ids = itertools.count(1)

    def connection_count(self) -> int:
        return len(self._connections)

    async def call(self, request: Request, connection: Connection | None) -> dict[str, Any]:
        call = Call(self.services, connection, request.id, request.method)
        return await self.methods.call(call, request.params)

    def connection_closed(self, conn: Connection) -> None:
        for listener in list(self.close_listeners):
            try:
                listener(conn)
            except Exception:
                log.exception("connection close listener failed")

    # -- lifecycle --------------------------------------------------------------------

    async def bind(self) -> None:
        """Bind the socket (0600, in a 0700 directory when cmux creates or owns it).

        Raises :class:`ServerAlreadyRunning` when a live server answers on the path.
        """
        path = self.socket_path
        # Only a directory cmux owns is made private: one it creates here, or its own
        # runtime directory. A directory named with --socket (/tmp, say) keeps its mode;
        # the socket itself is 0600 and peers of another uid are refused.
        created = not path.parent.exists()
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if created or path.parent in (runtime_dir(), runtime_dir() / "sessions"):
            with contextlib.suppress(PermissionError):
                os.chmod(path.parent, 0o700)
        if path.exists() or path.is_symlink():
            if await _socket_is_live(path):
                raise ServerAlreadyRunning(f"a cmux server is already running on {path}")
            path.unlink()

    async def listen(self) -> None:
        """Start accepting connections on the path :meth:`bind` cleared."""
        path = self.socket_path
        old_umask = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(
                self._on_connect, path=str(path), limit=MAX_LINE_BYTES * 2)
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)

    async def _on_connect(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None and not _peer_allowed(sock):
            writer.write(encode_error(None, CmuxError(
                "forbidden", "connection refused: peer runs as another user")))
            with contextlib.suppress(Exception):
                await writer.drain()
            writer.close()
            return
        conn = Connection(self, reader, writer, f"conn-{next(self._client_ids)}")
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            await conn.serve()
        except asyncio.CancelledError:
            pass  # server shutdown: the connection ends quietly
        except Exception:
            log.exception("connection failed")
        finally:
            if task is not None:
                self._connections.discard(task)

    def stop_accepting(self) -> None:
        if self._server is not None:
            self._server.close()

    def drop_connections(self) -> None:
        """End every connection; their pending requests are cancelled."""
        for task in list(self._connections):
            task.cancel()

    def unlink(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()


def _peer_allowed(sock: socket.socket) -> bool:
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return True
    _pid, uid, _gid = struct.unpack("3i", creds)
    return bool(uid == os.getuid())


async def _socket_is_live(path: Path) -> bool:
    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(str(path)), 1.0)
    except (TimeoutError, OSError):
        return False
    writer.close()
    return True
