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
import select
from collections import deque
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Protocol, TypeVar

from cmux_core.api import v1_text
from cmux_core.api.context import Peer
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
from cmux_core.errors import CmuxError, Disconnected, InternalError
from cmux_core.events import EventHub, Subscriber
from cmux_core.socket_safety import (
    SocketPathError,
    clear_socket_path,
    peer_credentials,
    peer_is_own_user,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
_CLOSED = object()
_PEER_GONE = "peer disconnected"
STREAM_LIMIT = 1 << 16
"""Each connection's StreamReader limit: it stops taking bytes from the socket once twice
this is buffered and unread (the request reader reads 64 KiB at a time), so what waits in
:class:`LineQueue` is most of what a client has the server hold."""
LISTEN_BACKLOG = 4096
"""Pending connections the socket queues; listen() lowers it to ``net.core.somaxconn``."""


class LineQueue:
    """Request lines read ahead of the one being answered, bounded by count and by bytes.

    It is full at ``max_lines`` items or ``max_bytes`` bytes of lines, whichever comes
    first; one producer (the reader) waits for room, one consumer (the worker) waits for
    lines. The end-of-input marker may always be added.
    """

    def __init__(self, max_lines: int, max_bytes: int) -> None:
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self._items: deque[bytes | CmuxError | object] = deque()
        self._bytes = 0
        self._readable = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()

    def empty(self) -> bool:
        return not self._items

    def full(self) -> bool:
        return len(self._items) >= self.max_lines or self._bytes >= self.max_bytes

    def put_nowait(self, item: bytes | CmuxError | object) -> None:
        """Add ``item`` whether or not the queue is full (the caller checked)."""
        self._items.append(item)
        if isinstance(item, bytes):
            self._bytes += len(item)
        self._readable.set()
        if self.full():
            self._room.clear()

    def get_nowait(self) -> bytes | CmuxError | object:
        """The oldest item; IndexError when there is none."""
        item = self._items.popleft()
        if isinstance(item, bytes):
            self._bytes -= len(item)
        if not self._items:
            self._readable.clear()
        if not self.full():
            self._room.set()
        return item

    async def wait_readable(self) -> None:
        await self._readable.wait()

    async def wait_room(self) -> None:
        await self._room.wait()


class Connection:
    """One client connection. Lines are answered in the order they arrive.

    What a client costs is bounded both ways. At most :attr:`QUEUED_LINES` request lines,
    or :attr:`QUEUED_BYTES` of them, wait behind the one being answered, and the worker
    answers the next only once the client has taken the replies so far (the transport's
    write buffer is below its high-water mark). A client that writes without reading is
    therefore no longer read from: its writes block in its own socket. An event stream
    whose client stops reading ends with its subscriber queue's overflow (see
    :meth:`start_stream`).

    Replies to requests answered back to back are gathered and written together: once no
    request line is left to answer, once :attr:`GATHER_BYTES` are gathered, before
    anything else is written to the client, or at the loop's next turn when a request
    waits, whichever comes first. A reply is therefore never held behind a later request.
    """

    QUEUED_LINES = 1024
    """Request lines read ahead of the one being answered."""
    QUEUED_BYTES = 1 << 20
    """Bytes of request lines read ahead; past it the next line (itself at most 1 MiB)
    waits for room."""
    GATHER_BYTES = 1 << 16
    """Gathered reply bytes that are written at once, without waiting for the batch's end."""
    PEER_CHECK_S = 0.5
    """While reading is held back, how often the socket is checked for a hang-up."""

    def __init__(self, server: Server, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter, client_id: str) -> None:
        self.server = server
        self.client_id = client_id
        self.reader = reader
        self.writer = writer
        self.lines = LineQueue(self.QUEUED_LINES, self.QUEUED_BYTES)
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._flush_soon = False
        self._loop = asyncio.get_running_loop()
        self._high_water = writer.transport.get_write_buffer_limits()[1]
        self.gone = asyncio.Event()
        self.subscriptions: list[Subscriber] = []
        self.tasks: set[asyncio.Task[Any]] = set()
        # Tasks inside until_gone: cancelled (with _PEER_GONE) when the peer leaves.
        self.holding: set[asyncio.Task[Any]] = set()
        self.raw = False
        """Taken over by a byte stream (:meth:`take_raw`): no more requests are read."""
        self._reader_task: asyncio.Task[None] | None = None

    @property
    def peer_pid(self) -> int | None:
        """The pid of the process that connected (``SO_PEERCRED``); None when unknown."""
        sock = self.writer.get_extra_info("socket")
        try:
            pid = peer_credentials(sock).pid
        except (AttributeError, OSError):
            return None
        return pid if pid > 0 else None

    async def read_lines(self) -> None:
        splitter = LineSplitter(MAX_LINE_BYTES)
        ended = False
        try:
            while True:
                chunk = await self.reader.read(65536)
                if not chunk:
                    ended = True
                    break
                for item in splitter.feed(chunk):
                    await self._queue_line(item)
        except (ConnectionError, OSError):
            pass
        finally:
            if not self.raw:
                self.gone.set()
                for task in list(self.holding):
                    task.cancel(_PEER_GONE)
        if not ended:
            # Reset or hung up: nobody is left to read replies; closing ends the worker.
            self.writer.close()
        # The lines already read are still answered: a client may half-close.
        self.lines.put_nowait(_CLOSED)

    async def _queue_line(self, item: bytes | CmuxError) -> None:
        """Hand a line to the worker, waiting while the queue is full (:attr:`QUEUED_LINES`
        lines or :attr:`QUEUED_BYTES`).

        Meanwhile nothing is read, so the peer leaving is not seen as end of input; the
        socket is checked every :attr:`PEER_CHECK_S` instead, and ConnectionResetError
        is raised once the peer has hung up.
        """
        lines = self.lines
        while lines.full():
            try:
                async with asyncio.timeout(self.PEER_CHECK_S):
                    await lines.wait_room()
            except TimeoutError:
                if self._hung_up():
                    raise ConnectionResetError(_PEER_GONE) from None
        lines.put_nowait(item)

    def _hung_up(self) -> bool:
        """Whether the peer closed its end, asked without reading: a client that only shut
        down its writing side is still waiting for its replies."""
        if self.writer.is_closing():
            return True
        sock = self.writer.get_extra_info("socket")
        if sock is None:
            return False
        poller = select.poll()
        poller.register(sock.fileno(), 0)  # hang-up and error are always reported
        return any(mask & (select.POLLHUP | select.POLLERR | select.POLLNVAL)
                   for _fd, mask in poller.poll(0))

    async def serve(self) -> None:
        reader_task = self._reader_task = asyncio.create_task(self.read_lines())
        lines = self.lines
        try:
            while True:
                if lines.empty():
                    # Everything read so far is answered: out with the replies.
                    await self.drain()
                    await lines.wait_readable()
                item = lines.get_nowait()
                if item is _CLOSED:
                    break
                if isinstance(item, bytes):
                    await self.handle_line(item)
                else:
                    assert isinstance(item, CmuxError)
                    self.reply(encode_error(None, item))
                if self.writer.is_closing():
                    break
                if (self._out_bytes >= self.GATHER_BYTES
                        or self.writer.transport.get_write_buffer_size() > self._high_water):
                    await self.drain()
            self.flush()
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
        if v1_text.is_text_command(line):
            with contextlib.suppress(Disconnected):
                self.reply((await v1_text.answer(line, self._call_v2)).encode() + b"\n")
            return
        try:
            request = parse_line(line)
        except RequestError as exc:
            self.reply(encode_error(exc.request_id, exc))
            return
        try:
            result = await self.server.call(request, self)
        except Disconnected:
            return
        except CmuxError as exc:
            self.reply(encode_error(request.id, exc))
            return
        try:
            self.reply(encode_success(request.id, result))
        except TypeError as exc:
            log.exception("cannot encode result of %s", request.method)
            self.reply(encode_error(request.id, InternalError(message=f"encode failed: {exc}")))

    async def _call_v2(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await self.server.call(Request(method=method, params=params, id=None), self)

    def reply(self, data: bytes) -> None:
        """Gather a reply line to be written with the others of its batch (see the class)."""
        if self.writer.is_closing():
            return
        self._out.append(data)
        self._out_bytes += len(data)
        if not self._flush_soon:
            # A request that waits lets the loop turn: the replies before it go out then.
            self._flush_soon = True
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write the gathered replies, in one write."""
        self._flush_soon = False
        out = self._out
        if not out:
            return
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        self._out_bytes = 0
        if not self.writer.is_closing():
            self.writer.write(data)

    def send(self, data: bytes) -> None:
        """Write ``data`` now, after every reply gathered before it."""
        if self._out:
            self.flush()
        if not self.writer.is_closing():
            self.writer.write(data)

    def take_raw(self) -> asyncio.StreamReader:
        """Stop reading requests: the caller reads this connection's bytes from the returned
        reader from now on, and calls :meth:`finish` when done. Bytes the client sent after
        the current request line, before its reply, are not handed over; raises
        ``invalid_stream`` when a whole request is already waiting."""
        if not self.lines.empty():
            raise CmuxError("invalid_stream", "requests were sent after the stream request, "
                            "before its reply")
        self.raw = True
        if self._reader_task is not None:
            self._reader_task.cancel()
        return self.reader

    def finish(self) -> None:
        """End a connection taken by :meth:`take_raw`: it closes once the reply is out."""
        self.lines.put_nowait(_CLOSED)

    async def drain(self) -> None:
        """Write the gathered replies and wait until the client has taken what was
        written, down to the transport's high-water mark."""
        if self._out:
            self.flush()
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
        """Stream ``sub``'s events on this connection until overflow or disconnect.

        Events are written as fast as the client takes them. One that stops reading fills
        its socket; its events then stay in ``sub`` until its queue overflows, and the
        subscription ends at once: a last ``subscription_overflow`` line is written and
        the connection closed, so the client reads what was still buffered (about the
        write buffer's high-water mark), that line, then end of file.
        """
        self.subscriptions.append(sub)
        task = asyncio.create_task(self._pump(sub))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _pump(self, sub: Subscriber) -> None:
        # Events leave sub's queue only as the socket takes them, so the queue's limit
        # bounds what a slow client holds: the write buffer stays near its high-water mark.
        transport = self.writer.transport
        _low, high = transport.get_write_buffer_limits()
        try:
            while not sub.closed:
                await sub.ready()
                while sub.queue and not sub.overflowed:
                    event = sub.queue.popleft()
                    data = event.data if sub.tag is None else {**sub.tag, **event.data}
                    self.send(encode_event(event.kind, data))
                    if transport.get_write_buffer_size() > high:
                        await self._drain_unless_overflow(sub)
                if sub.overflowed:
                    self._drop(sub)
                    return
        except asyncio.CancelledError:
            pass

    async def _drain_unless_overflow(self, sub: Subscriber) -> None:
        """Wait until the client took what was written, or ``sub`` overflowed meanwhile
        (a client that never reads again must not hold the overflow back)."""
        drained = asyncio.ensure_future(self.drain())
        try:
            while not drained.done() and not (sub.overflowed or sub.closed):
                sub.wakeup.clear()
                woken = asyncio.ensure_future(sub.wakeup.wait())
                try:
                    await asyncio.wait((drained, woken), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    woken.cancel()
        finally:
            drained.cancel()

    def _drop(self, sub: Subscriber) -> None:
        """End an overflowed subscription and its connection (see :meth:`start_stream`)."""
        self.send(encode_event("subscription_overflow", {
            "type": "subscription_overflow",
            "message": "subscriber fell too far behind; subscription ended",
            "dropped_after_seq": self.server.events.seq}))
        self.server.events.unsubscribe(sub)
        self.writer.close()


class Methods(Protocol):
    """What a server answers with: the method table, or a gate in front of it."""

    async def call(self, name: str, raw_params: dict[str, Any], *,
                   connection: Peer | None = None, request_id: Any = None
                   ) -> dict[str, Any]: ...


def _nothing(_: object) -> None:
    """The default of a callback a server is not given."""


class Server:
    """Serves ``methods`` on a Unix socket; each method answers with the context it was
    bound to; ``events`` feeds the connections' subscriptions.

    ``on_request`` is called with the method's name as each request starts (the loop
    monitor measures while clients ask, the session keeper checks after requests that may
    change the session); ``on_close`` with each connection as it closes (what is kept for
    it is dropped).
    """

    def __init__(self, events: EventHub, methods: Methods, socket_path: Path, *,
                 on_request: Callable[[str], None] | None = None,
                 on_close: Callable[[Connection], None] | None = None) -> None:
        self.methods = methods
        self.events = events
        self.socket_path = socket_path
        self._on_request: Callable[[str], None] = on_request or _nothing
        self._on_close: Callable[[Connection], None] = on_close or _nothing
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task[Any]] = set()
        self._client_ids = itertools.count(1)

    def connection_count(self) -> int:
        return len(self._connections)

    async def call(self, request: Request, connection: Connection | None) -> dict[str, Any]:
        self._on_request(request.method)
        return await self.methods.call(request.method, request.params, connection=connection,
                                       request_id=request.id)

    def connection_closed(self, conn: Connection) -> None:
        try:
            self._on_close(conn)
        except Exception:
            log.exception("connection close handling failed")

    # -- lifecycle --------------------------------------------------------------------

    async def bind(self) -> None:
        """Make the socket's directory ready and clear a stale socket of ours at the path.

        See :func:`~cmux_core.socket_safety.clear_socket_path` for what is checked and
        what it raises; a refused path is left as it was found.
        """
        await clear_socket_path(self.socket_path)

    async def listen(self) -> None:
        """Start accepting connections on the path :meth:`bind` cleared.

        Raises :class:`SocketPathError` when the socket cannot be bound.
        """
        path = self.socket_path
        old_umask = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(
                self._on_connect, path=str(path), limit=STREAM_LIMIT,
                backlog=LISTEN_BACKLOG)
        except OSError as exc:
            raise SocketPathError(f"cannot listen on {path}: {exc.strerror}") from None
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)

    async def _on_connect(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is None or not peer_is_own_user(sock):
            writer.write(encode_error(None, CmuxError(
                "forbidden", "connection refused: peer runs as another user or cannot be "
                "identified")))
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
