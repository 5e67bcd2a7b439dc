"""The asyncio Unix-socket server: binding, connections, subscriptions, shutdown.

Each connection has a reader task, which splits lines (skipping any over
:data:`~cmux_core.api.framing.MAX_LINE_BYTES`) and notices the peer going away,
and a worker task, which answers requests strictly in order. Long requests
(waits) are raced against the peer's disconnect, so a client that leaves
cancels its wait and leaves nothing behind. Nothing a client sends can stop
the server from serving the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import struct
import time
from collections import deque
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from cmux_core import __version__
from cmux_core.agents.tracker import declarations_from
from cmux_core.api.dispatch import Call, MethodTable
from cmux_core.api.framing import (
    MAX_LINE_BYTES,
    Request,
    RequestError,
    encode_error,
    encode_event,
    encode_success,
    parse_line,
)
from cmux_core.config import Settings, runtime_dir
from cmux_core.errors import CmuxError, InternalError, RequestTooLarge
from cmux_core.events import EventHub, Subscriber
from cmux_core.model.mux import Mux

log = logging.getLogger(__name__)

T = TypeVar("T")
PROTOCOL_VERSION = 20
_CLOSED = object()
_PEER_GONE = "peer disconnected"


class ServerAlreadyRunning(RuntimeError):
    pass


class Disconnected(Exception):
    """The peer went away while its request was being served."""


class Connection:
    """One client connection. Lines are answered in the order they arrive."""

    def __init__(self, server: Server, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        self.lines: asyncio.Queue[bytes | object] = asyncio.Queue()
        self.gone = asyncio.Event()
        self.subscriptions: list[Subscriber] = []
        self.tasks: set[asyncio.Task[Any]] = set()
        # Tasks inside until_gone: cancelled (with _PEER_GONE) when the peer leaves.
        self.holding: set[asyncio.Task[Any]] = set()

    async def read_lines(self) -> None:
        buf = bytearray()
        skipping = False
        try:
            while True:
                chunk = await self.reader.read(65536)
                if not chunk:
                    break
                buf += chunk
                while True:
                    nl = buf.find(b"\n")
                    if nl < 0:
                        if len(buf) > MAX_LINE_BYTES:
                            if not skipping:
                                skipping = True
                                self.lines.put_nowait(RequestTooLarge(
                                    message=f"request line exceeds {MAX_LINE_BYTES} bytes"))
                            buf.clear()
                        break
                    line = bytes(buf[:nl])
                    del buf[:nl + 1]
                    if skipping:
                        skipping = False
                        continue
                    if len(line) > MAX_LINE_BYTES:
                        self.lines.put_nowait(RequestTooLarge(
                            message=f"request line exceeds {MAX_LINE_BYTES} bytes"))
                        continue
                    if line.strip():
                        self.lines.put_nowait(line)
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


class LoopMonitor:
    """Measures how late the event loop runs a timer: the worst stall any client saw.

    One wake-up every :attr:`interval` seconds; keeps the last ``keep`` lateness samples.
    """

    def __init__(self, interval: float = 0.1, keep: int = 600) -> None:
        self.interval = interval
        self.samples: deque[float] = deque(maxlen=keep)
        self.worst = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._due = loop.time() + self.interval
        self._handle = loop.call_at(self._due, self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()

    def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        late = max(0.0, loop.time() - self._due)
        self.samples.append(late)
        self.worst = max(self.worst, late)
        self._due = loop.time() + self.interval
        self._handle = loop.call_at(self._due, self._tick)

    def summary(self) -> dict[str, float]:
        ordered = sorted(self.samples)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else 0.0
        return {"max_ms": round(self.worst * 1000, 3), "p99_ms": round(p99 * 1000, 3),
                "recent_max_ms": round((ordered[-1] if ordered else 0.0) * 1000, 3)}


class Server:
    """Owns the loop's state: settings, the mux, the event hub and the method table."""

    def __init__(self, settings: Settings, socket_path: Path, *, session: str | None = None
                 ) -> None:
        self.settings = settings
        self.socket_path = socket_path
        self.session = session
        self.events = EventHub()
        self.mux = Mux(settings, self.events, str(socket_path))
        self.methods = MethodTable()
        self.version = __version__
        self.event_loop = "asyncio"
        self.stopping = asyncio.Event()
        self.started_at = time.time()
        self.loop_monitor = LoopMonitor()
        self.pending_waits = 0
        """Requests currently holding their connection open (waits); shown in server.stats."""
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task[Any]] = set()
        from cmux_core.agents.scheduler import DetectionRuntime
        from cmux_core.api.methods import register_core_methods
        from cmux_core.plugin_host.host import PluginHost

        register_core_methods(self.methods)
        self.plugins = PluginHost(settings, methods=self.methods, publish=self.events.publish,
                                  socket_path=socket_path)
        self.events.observe(self.plugins.on_event)
        self.mux.agents.declarations = lambda: declarations_from(
            self.plugins.integrations().values())
        self.detection = DetectionRuntime(self)

    def connection_count(self) -> int:
        return len(self._connections)

    async def call(self, request: Request, connection: Connection | None) -> dict[str, Any]:
        call = Call(self, connection, request.id, request.method)
        return await self.methods.call(call, request.params)

    # -- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Bind the socket (0600, in a 0700 directory when cmux creates or owns it) and
        create the default workspace.

        Raises :class:`ServerAlreadyRunning` when a live server answers on the path.
        """
        loop = asyncio.get_running_loop()
        self.event_loop = "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.stopping.set)
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
        # Plugins are loaded before the socket exists, so no request sees half of them.
        await self.plugins.load()
        old_umask = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(
                self._on_connect, path=str(path), limit=MAX_LINE_BYTES * 2)
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)
        self.mux.create_window()
        self.mux.create_workspace(focus=True)
        self.loop_monitor.start()
        await self.plugins.start()
        await self.detection.start()

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
        conn = Connection(self, reader, writer)
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

    async def serve_until_stopped(self) -> None:
        await self.stopping.wait()
        await self.shutdown()

    async def shutdown(self) -> None:
        """Stop accepting, SIGHUP every pane, reap the children, unlink the socket."""
        self.loop_monitor.stop()
        if self._server is not None:
            self._server.close()
        await self.plugins.stop()
        await self.detection.stop()
        for task in list(self._connections):
            task.cancel()
        terms = self.mux.close_all()
        deadline = asyncio.get_running_loop().time() + 1.5
        while terms and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
            terms = [t for t in terms if not t.process_done]
        for t in terms:
            t.kill()
        deadline = asyncio.get_running_loop().time() + 1.0
        while terms and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
            terms = [t for t in terms if not t.process_done]
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
