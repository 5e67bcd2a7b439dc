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
import socket
import stat
import struct
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from cmux_core.api import v1_text
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
from cmux_core.config import socket_dirs
from cmux_core.errors import CmuxError, Disconnected, InternalError
from cmux_core.events import EventHub, Subscriber

log = logging.getLogger(__name__)

T = TypeVar("T")
_CLOSED = object()
_PEER_GONE = "peer disconnected"
LISTEN_BACKLOG = 4096
"""Pending connections the socket queues; listen() lowers it to ``net.core.somaxconn``."""


class ServerAlreadyRunning(RuntimeError):
    pass


class SocketPathError(RuntimeError):
    """The socket path is unsafe or unusable; the message names the path and why."""


class Connection:
    """One client connection. Lines are answered in the order they arrive.

    What a client costs is bounded both ways. At most :attr:`QUEUED_LINES` request lines
    wait behind the one being answered, and the worker answers the next only once the
    client has taken the replies so far (the transport's write buffer is below its
    high-water mark). A client that writes without reading is therefore no longer read
    from: its writes block in its own socket. An event stream whose client stops reading
    ends with its subscriber queue's overflow (see :meth:`start_stream`).
    """

    QUEUED_LINES = 16
    """Request lines (each at most 1 MiB) read ahead of the one being answered."""
    PEER_CHECK_S = 0.5
    """While reading is held back, how often the socket is checked for a hang-up."""

    def __init__(self, server: Server, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter, client_id: str) -> None:
        self.server = server
        self.client_id = client_id
        self.reader = reader
        self.writer = writer
        self.lines: asyncio.Queue[bytes | CmuxError | object] = asyncio.Queue(
            self.QUEUED_LINES)
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
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                    struct.calcsize("3i"))
        except (AttributeError, OSError):
            return None
        pid = struct.unpack("3i", creds)[0]
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
        if ended:
            # The lines already read are still answered: a client may half-close.
            await self.lines.put(_CLOSED)
        else:
            # Reset or hung up: nobody is left to read replies; closing ends the worker.
            self.writer.close()
            with contextlib.suppress(asyncio.QueueFull):
                self.lines.put_nowait(_CLOSED)

    async def _queue_line(self, item: bytes | CmuxError) -> None:
        """Hand a line to the worker, waiting while :attr:`QUEUED_LINES` are queued.

        Meanwhile nothing is read, so the peer leaving is not seen as end of input; the
        socket is checked every :attr:`PEER_CHECK_S` instead, and ConnectionResetError
        is raised once the peer has hung up.
        """
        if not self.lines.full():
            self.lines.put_nowait(item)
            return
        while True:
            try:
                async with asyncio.timeout(self.PEER_CHECK_S):
                    await self.lines.put(item)
                return
            except TimeoutError:
                if self._hung_up():
                    raise ConnectionResetError(_PEER_GONE) from None

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
        try:
            while True:
                item = await self.lines.get()
                if item is _CLOSED:
                    break
                if isinstance(item, CmuxError):
                    self.send(encode_error(None, item))
                else:
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
        if v1_text.is_text_command(line):
            with contextlib.suppress(Disconnected):
                self.send((await v1_text.answer(line, self._call_v2)).encode() + b"\n")
            return
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

    async def _call_v2(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await self.server.call(Request(method=method, params=params, id=None), self)

    def send(self, data: bytes) -> None:
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
        with contextlib.suppress(asyncio.QueueFull):
            self.lines.put_nowait(_CLOSED)

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
                    self.send(encode_event(event.kind, event.data))
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


class Server:
    """Serves ``methods`` on a Unix socket; each method answers with the context it was
    bound to; ``events`` feeds the connections' subscriptions."""

    def __init__(self, events: EventHub, methods: MethodTable, socket_path: Path) -> None:
        self.methods = methods
        self.events = events
        self.socket_path = socket_path
        self.close_listeners: list[Callable[[Connection], None]] = []
        """Called with each connection as it closes (views keyed by it are dropped)."""
        self.request_listeners: list[Callable[[], None]] = []
        """Called as each request starts (the loop monitor measures while clients ask)."""
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task[Any]] = set()
        self._client_ids = itertools.count(1)

    def connection_count(self) -> int:
        return len(self._connections)

    async def call(self, request: Request, connection: Connection | None) -> dict[str, Any]:
        for listener in self.request_listeners:
            listener()
        return await self.methods.call(request.method, request.params, connection=connection,
                                       request_id=request.id)

    def connection_closed(self, conn: Connection) -> None:
        for listener in list(self.close_listeners):
            try:
                listener(conn)
            except Exception:
                log.exception("connection close listener failed")

    # -- lifecycle --------------------------------------------------------------------

    async def bind(self) -> None:
        """Make the socket's directory ready and clear a stale socket of ours at the path.

        cmux's own directories (:func:`~cmux_core.config.socket_dirs`) are created 0700; one
        that exists must be a real directory owned by this uid that group and others cannot
        write, and is made 0700. Any other directory is created 0700 when missing and
        otherwise keeps its mode. Every directory on the way to the socket (as named and as
        resolved) must belong to this uid or root and, when group or others can write it,
        carry the sticky bit, so no one else can swap the socket. Something already at the
        path is removed only when it is a socket owned by this uid that no server answers.

        Raises :class:`ServerAlreadyRunning` when a live server answers on the path and
        :class:`SocketPathError` for anything else that makes the path unsafe or unusable;
        a refused path is left as it was found.
        """
        path = Path(os.path.abspath(self.socket_path))
        try:
            _prepare_socket_dir(path.parent)
            if not os.path.lexists(path):
                return
            st = os.lstat(path)
        except OSError as exc:
            raise SocketPathError(f"cannot use {path}: {exc}") from None
        if not stat.S_ISSOCK(st.st_mode):
            raise SocketPathError(f"{path} exists and is {_kind(st.st_mode)}, not a socket; "
                                  "refusing to remove it (pick another --socket)")
        if st.st_uid != os.getuid():
            raise SocketPathError(f"{path} is a socket owned by uid {st.st_uid}, not by uid "
                                  f"{os.getuid()}; refusing to replace it")
        if await _socket_is_live(path):
            raise ServerAlreadyRunning(f"a cmux server is already running on {path}")
        try:
            path.unlink()
        except OSError as exc:
            raise SocketPathError(f"cannot remove the stale socket {path}: {exc.strerror}"
                                  ) from None

    async def listen(self) -> None:
        """Start accepting connections on the path :meth:`bind` cleared.

        Raises :class:`SocketPathError` when the socket cannot be bound.
        """
        path = self.socket_path
        old_umask = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(
                self._on_connect, path=str(path), limit=MAX_LINE_BYTES * 2,
                backlog=LISTEN_BACKLOG)
        except OSError as exc:
            raise SocketPathError(f"cannot listen on {path}: {exc.strerror}") from None
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)

    async def _on_connect(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is None or not _peer_allowed(sock):
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


def _peer_allowed(sock: socket.socket) -> bool:
    """True when the peer process runs as this uid; False when it cannot be told."""
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return False
    _pid, uid, _gid = struct.unpack("3i", creds)
    return bool(uid == os.getuid())


async def _socket_is_live(path: Path) -> bool:
    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(str(path)), 1.0)
    except (TimeoutError, OSError):
        return False
    writer.close()
    return True


def _prepare_socket_dir(directory: Path) -> None:
    """Check every directory on the way to ``directory``, then create what is missing (0700).

    Raises :class:`SocketPathError` before anything is created or changed.
    """
    own = {Path(os.path.abspath(d)) for d in socket_dirs()}
    missing: list[Path] = []
    existing = directory
    while not os.path.lexists(existing):
        missing.append(existing)
        existing = existing.parent
    real = Path(os.path.realpath(existing))
    for d in [existing, *existing.parents, real, *real.parents]:
        _check_dir(d, strict=d in own)
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            _check_dir(d, strict=d in own)  # made by someone else meanwhile
        except OSError as exc:
            raise SocketPathError(f"cannot create {d}: {exc.strerror}") from None
    for d in [directory, *directory.parents]:
        if d in own:
            try:
                os.chmod(d, 0o700)
            except OSError as exc:
                raise SocketPathError(f"cannot make {d} private: {exc.strerror}") from None


def _check_dir(path: Path, *, strict: bool) -> None:
    """Refuse a directory (or symlink) on the socket's way that someone else controls.

    ``strict`` (cmux's own directories): a real directory of this uid that group and others
    cannot write. Otherwise: owned by this uid or root; writable by group or others only
    with the sticky bit; a symlink owned by this uid or root.
    """
    st = os.lstat(path)
    me = os.getuid()
    if strict:
        if not stat.S_ISDIR(st.st_mode):
            problem = f"is {_kind(st.st_mode)}, not a directory"
        elif st.st_uid != me:
            problem = f"is owned by uid {st.st_uid}, not by uid {me}"
        elif st.st_mode & 0o022:
            problem = (f"can be written by group or others (mode "
                       f"{stat.S_IMODE(st.st_mode):04o})")
        else:
            return
        raise SocketPathError(f"unsafe socket directory {path}: it {problem}; remove it and "
                              "start again")
    if st.st_uid not in (me, 0):
        raise SocketPathError(f"unsafe socket path: {path} is owned by uid {st.st_uid}, who "
                              "could replace the socket; pick another --socket")
    if (stat.S_ISDIR(st.st_mode) and st.st_mode & 0o022
            and not st.st_mode & stat.S_ISVTX):
        raise SocketPathError(f"unsafe socket path: {path} can be written by group or others "
                              f"(mode {stat.S_IMODE(st.st_mode):04o}) and is not sticky; "
                              "pick another --socket")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISREG, "a regular file"), (stat.S_ISFIFO, "a FIFO")):
        if test(mode):
            return name
    return "a special file"
