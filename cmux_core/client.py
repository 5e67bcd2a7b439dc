"""Small clients for the socket API: :class:`Client` (blocking, stdlib only) and
:class:`AsyncClient` (asyncio). Both keep one connection open and send one
request at a time, so replies match requests by order and by ``id``. Right after
connecting, both ask the kernel who the server is (``SO_PEERCRED``) and refuse, before
sending anything, a server that runs as another uid.

Given a ``machine`` (by default ``$CMUX_MACHINE``; ``"local"`` or empty is this machine),
a client asks the server it connects to for ``machine.relay`` first, so its requests reach
that machine's server over the fleet's connection and everything else works unchanged.

The module and the base modules it imports use only the standard library, so hook
scripts can use it (importing the package also loads ``pluggy`` for the plugin marker,
nothing heavier).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmux_core.errors import CmuxError
from cmux_core.socket_safety import peer_credentials

if TYPE_CHECKING:
    import asyncio

SERVER_START_S = 30.0
"""How long :func:`ensure_server` waits for a server it started to answer."""

DEFAULT_TIMEOUT = 30.0
CLIENT_DEFAULT = -1.0
"""Pass as ``timeout`` to use the client's own timeout."""


def _default_socket() -> str:
    from cmux_core.config import socket_path

    return str(socket_path())


def _encode(request_id: int, method: str, params: dict[str, Any] | None) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method,
                       "params": params or {}}, separators=(",", ":")).encode() + b"\n"


def _check_server(sock: socket.socket, path: str) -> None:
    """Raise CmuxError ``untrusted_server`` when the process listening at ``sock``'s other
    end runs as another uid than this process, or cannot be identified."""
    try:
        uid = peer_credentials(sock).uid
    except OSError as exc:
        raise CmuxError("untrusted_server", f"cannot tell who runs the server at {path} "
                        f"({exc.strerror}); nothing was sent", {"path": path}) from None
    if uid != os.getuid():
        raise CmuxError("untrusted_server", f"the server at {path} runs as uid {uid}, not as "
                        f"uid {os.getuid()}; nothing was sent", {"path": path, "uid": uid})


def _machine(machine: str | None) -> str | None:
    name = os.environ.get("CMUX_MACHINE", "") if machine is None else machine
    return name if name and name != "local" else None


def _relay_request(machine: str) -> bytes:
    return _encode(0, "machine.relay", {"machine": machine})


def _result(reply: dict[str, Any]) -> dict[str, Any]:
    if reply.get("ok") is False or "error" in reply:
        err = reply.get("error") or {}
        raise CmuxError(err.get("code", "internal_error"), err.get("message", ""),
                        err.get("data"))
    result = reply.get("result")
    return result if isinstance(result, dict) else {}


class _Endpoint:
    """What both clients are given: the socket path (default:
    :func:`cmux_core.config.socket_path`'s), the read timeout and the saved machine calls
    are relayed to; and the ids they number their requests with."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 timeout: float | None = DEFAULT_TIMEOUT, machine: str | None = None) -> None:
        self.path = str(path) if path is not None else _default_socket()
        self.timeout = timeout
        self.machine = _machine(machine)
        self._ids = itertools.count(1)


class Client(_Endpoint):
    """A blocking client. ``timeout`` (seconds) bounds each read; None waits forever.

    Raises :class:`CmuxError` with the server's code for error replies and with
    ``untrusted_server`` when the server runs as another uid, and ``ConnectionError`` when
    the server cannot be reached or goes away.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 timeout: float | None = DEFAULT_TIMEOUT, machine: str | None = None) -> None:
        super().__init__(path, timeout=timeout, machine=machine)
        self._sock: socket.socket | None = None
        self._buf = b""

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self) -> None:
        if self._sock is not None:
            return
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self.path)
        except OSError as exc:
            sock.close()
            raise ConnectionError(f"cannot connect to cmux at {self.path}: {exc.strerror}"
                                  ) from None
        try:
            _check_server(sock, self.path)
        except CmuxError:
            sock.close()
            raise
        self._sock = sock
        if self.machine is not None:
            try:
                sock.sendall(_relay_request(self.machine))
                _result(json.loads(self._readline(self.timeout)))
            except BaseException:
                self.close()
                raise

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._buf = b""

    def take_connection(self) -> tuple[socket.socket, bytes]:
        """Hand the connected socket over, with the bytes already read past the last reply
        (a method such as ``pane.attach`` switches its connection to frames). The client is
        left unconnected; the caller owns and closes the socket."""
        if self._sock is None:
            raise ConnectionError("not connected")
        sock, pending = self._sock, self._buf
        self._sock, self._buf = None, b""
        sock.settimeout(None)
        return sock, pending

    def _readline(self, timeout: float | None) -> bytes:
        assert self._sock is not None
        self._sock.settimeout(timeout)
        while b"\n" not in self._buf:
            try:
                chunk = self._sock.recv(65536)
            except TimeoutError:
                raise TimeoutError("no reply from the cmux server in time") from None
            if not chunk:
                self.close()
                raise ConnectionError("the cmux server closed the connection")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def request(self, method: str, params: dict[str, Any] | None = None, *,
                timeout: float | None = CLIENT_DEFAULT) -> dict[str, Any]:
        """Send one request and return the whole reply object (``ok``/``result``/``error``)."""
        self.connect()
        assert self._sock is not None
        request_id = next(self._ids)
        self._sock.sendall(_encode(request_id, method, params))
        wait = self.timeout if timeout == CLIENT_DEFAULT else timeout
        while True:
            reply = json.loads(self._readline(wait))
            if "event" in reply and "id" not in reply:
                continue
            return dict(reply)

    def call(self, method: str, params: dict[str, Any] | None = None, *,
             timeout: float | None = CLIENT_DEFAULT) -> dict[str, Any]:
        """Call ``method`` and return its ``result``; raises CmuxError on an error reply."""
        return _result(self.request(method, params, timeout=timeout))

    def events(self, types: list[str], *, timeout: float | None = None
               ) -> Iterator[dict[str, Any]]:
        """Subscribe to ``types`` (dotted names) and yield event lines as they come."""
        self.call("events.subscribe", {"subscriptions": [{"type": t} for t in types]})
        while True:
            yield dict(json.loads(self._readline(timeout)))


class AsyncClient(_Endpoint):
    """The asyncio twin of :class:`Client`; it raises the same errors."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 timeout: float | None = DEFAULT_TIMEOUT, machine: str | None = None) -> None:
        # asyncio is imported by the asynchronous client only: the ``cmux`` command, which
        # uses the other one, starts faster without it.
        import asyncio

        super().__init__(path, timeout=timeout, machine=machine)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()

    async def __aenter__(self) -> AsyncClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> None:
        import asyncio

        if self._writer is not None:
            return
        try:
            self._reader, self._writer = await asyncio.open_unix_connection(
                self.path, limit=1 << 24)
        except OSError as exc:
            raise ConnectionError(f"cannot connect to cmux at {self.path}: {exc.strerror}"
                                  ) from None
        try:
            _check_server(self._writer.get_extra_info("socket"), self.path)
            if self.machine is not None:
                self._writer.write(_relay_request(self.machine))
                _result(await self._readline(self.timeout))
        except CmuxError:
            await self.close()
            raise

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await self._writer.wait_closed()
        self._reader = self._writer = None

    async def _readline(self, timeout: float | None) -> dict[str, Any]:
        import asyncio

        assert self._reader is not None
        line = await asyncio.wait_for(self._reader.readline(), timeout)
        if not line:
            await self.close()
            raise ConnectionError("the cmux server closed the connection")
        return dict(json.loads(line))

    async def request(self, method: str, params: dict[str, Any] | None = None
                      ) -> dict[str, Any]:
        async with self._lock:
            await self.connect()
            assert self._writer is not None
            self._writer.write(_encode(next(self._ids), method, params))
            await self._writer.drain()
            while True:
                reply = await self._readline(self.timeout)
                if "event" in reply and "id" not in reply:
                    continue
                return reply

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return _result(await self.request(method, params))

    def take_connection(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Hand the connected streams over (after ``events.subscribe`` or ``pane.attach`` the
        connection carries lines of its own). The client is left unconnected; the caller owns
        the streams and closes the writer."""
        if self._reader is None or self._writer is None:
            raise ConnectionError("not connected")
        streams = self._reader, self._writer
        self._reader = self._writer = None
        return streams

    async def events(self, types: list[str], machines: str | list[str] | None = None
                     ) -> AsyncIterator[dict[str, Any]]:
        """Subscribe to ``types`` (on ``machines`` too, see ``events.subscribe``) and yield
        event lines as they come."""
        params: dict[str, Any] = {"subscriptions": [{"type": t} for t in types]}
        if machines is not None:
            params["machines"] = machines
        await self.call("events.subscribe", params)
        while True:
            yield await self._readline(None)


def socket_for(path: str | Path | None) -> str:
    return str(path) if path is not None else _default_socket()


def ensure_server(path: Path) -> bool:
    """Start a server at ``path`` in the background unless one answers there; True when
    one was started. Raises CmuxError ``server_unavailable`` when it does not come up."""
    try:
        with Client(path, timeout=5) as c:
            c.call("ping")
        return False
    except (ConnectionError, OSError):
        pass
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    log_path = path.parent / "cmux-serve.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cmux_core", "serve", "--quiet", "--socket", str(path)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            env={k: v for k, v in os.environ.items() if not k.startswith("CMUX_")})
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise CmuxError("server_unavailable", f"the server exited with {proc.returncode} "
                            f"at start; see {log_path}")
        try:
            with Client(path, timeout=5) as c:
                c.call("ping")
            return True
        except (ConnectionError, OSError):
            time.sleep(0.05)
    raise CmuxError("server_unavailable", f"the server did not answer within "
                    f"{SERVER_START_S:.0f} s; see {log_path}")
