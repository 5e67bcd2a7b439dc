"""One machine's link: an OpenSSH master connection whose own session runs ``cmux bridge``
on the remote, so the master carries the remote server's socket protocol, line for line.

The master (``ssh -M -S <control dir>/<name>``) runs as a child of this server, in the
foreground, so its exit is seen at once; requests go over its session, replies are matched
by ``id``. Once up, the remote server's socket is forwarded over the master where the sshd
allows it (:mod:`.forward`), and the shared calls go there instead, with no bridge process
in the way. A call that may hold its request (a wait, a stream, a relay) gets a channel of
its own (:meth:`Link.open_channel`): a connection to the forwarded socket, else another
``ssh -S`` session multiplexed over the same master; neither costs a new connection or
authentication. All ssh I/O is asyncio pipes and
every call has a deadline, so a link that drops or stalls never blocks the loop; a dropped
link fails its pending calls with ``machine_offline`` and reconnects with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from cmux_core.errors import CmuxError
from cmux_core.fleet.forward import open_forward
from cmux_core.fleet.machines import Machine

log = logging.getLogger(__name__)

REMOTE_VENV_CMUX = "$HOME/.local/share/cmux/venv/bin/cmux"
"""Where ``cmux machine install`` puts the remote cmux; preferred to one on the PATH."""
MISSING_MARK = "cmux-fleet: cmux not found"
CONNECT_TIMEOUT_S = 20.0
"""How long a master gets to authenticate and have the remote bridge answer ``ping``."""
CALL_TIMEOUT_S = 10.0
KEEPALIVE_S = 15
BACKOFF_S = (0.25, 30.0)
"""First and longest pause between reconnects; the pause doubles after each failure."""


class LinkState(StrEnum):
    CONNECTED = "connected"
    CONNECTING = "connecting"
    OFFLINE = "offline"
    AUTH_FAILED = "auth_failed"
    INCOMPATIBLE = "incompatible"


@dataclass(slots=True)
class LinkStatus:
    state: LinkState = LinkState.CONNECTING
    reason: str = ""
    ssh_error: str = ""
    """ssh's own last line on stderr, as it wrote it."""
    version: str | None = None
    protocol: int | None = None
    since: float = 0.0
    master_pid: int | None = None
    connects: int = 0
    """How many times the link came up."""
    transport: str | None = None
    """How calls reach the remote server while connected: ``forward`` (its socket forwarded
    over the master, see :mod:`.forward`) or ``bridge`` (``cmux bridge`` sessions)."""


def remote_command(machine: Machine) -> str:
    """The remote shell command that runs ``cmux bridge``: the private venv's cmux when it
    is there, else ``cmux`` on the PATH, else :data:`MISSING_MARK` and status 127."""
    target = ["--session", machine.session] if machine.session else []
    bridge = " ".join(["bridge", *map(shlex.quote, target)])
    return (f'c="{REMOTE_VENV_CMUX}"; [ -x "$c" ] || c=$(command -v cmux) || '
            f'{{ echo "{MISSING_MARK}" >&2; exit 127; }}; exec "$c" {bridge}')


def ssh_argv(machine: Machine, control: Path | None, *, master: bool,
             only_through_master: bool = False) -> list[str]:
    """``ssh`` and its options for ``machine``; the user's own config is read as usual and
    the machine's options come after ours, so only the control options cannot be changed.
    Without ``master``, ssh uses the master when it is up and else connects by itself,
    unless ``only_through_master``: then a proxy that fails at once stands in for that
    connection of its own (the options given first win, and ours come first). A
    ``control`` of None never uses a master (``-S none``)."""
    argv = ["ssh", "-S", "none" if control is None else str(control), "-o", "BatchMode=yes",
            "-T"]
    if master:
        argv += ["-M", "-o", "ControlPersist=no", "-o", f"ServerAliveInterval={KEEPALIVE_S}",
                 "-o", "ServerAliveCountMax=3", "-o", "ConnectTimeout=10"]
    else:
        argv += ["-o", "ControlMaster=no"]
        if only_through_master:
            argv += ["-o", "ProxyCommand=false"]
    if machine.accept_new:
        argv += ["-o", "StrictHostKeyChecking=accept-new"]
    for key, value in machine.ssh_options:
        argv += ["-o", f"{key}={value}"]
    return [*argv, "--", machine.destination, remote_command(machine)]


def classify_failure(returncode: int | None, stderr_lines: list[str]) -> tuple[LinkState, str]:
    """What an ssh that ended before the bridge answered means, from its status and the
    lines it wrote."""
    text = "\n".join(stderr_lines)
    if MISSING_MARK in text or returncode == 127:
        return LinkState.INCOMPATIBLE, "cmux is not installed on the remote: run cmux " \
            "machine install NAME"
    if "Host key verification failed" in text or "REMOTE HOST IDENTIFICATION" in text:
        return LinkState.AUTH_FAILED, "the host key is unknown or changed: check it, then " \
            "add it to known_hosts or re-add the machine with --accept-new"
    if "Permission denied" in text or "Too many authentication failures" in text:
        return LinkState.AUTH_FAILED, "ssh could not authenticate (BatchMode: no password " \
            "prompts; use a key or the ssh agent)"
    return LinkState.OFFLINE, "the connection failed or was closed"


class Channel:
    """A connection of its own to the remote server: a connection to the forwarded socket,
    or an ssh session over the master running its own ``cmux bridge`` (``proc``). The
    opener owns it and must :meth:`close` it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 proc: asyncio.subprocess.Process | None = None) -> None:
        self.proc = proc
        self.reader = reader
        self.writer = writer
        self._ids = itertools.count(1)

    @classmethod
    def of_process(cls, proc: asyncio.subprocess.Process) -> Channel:
        assert proc.stdout is not None and proc.stdin is not None
        return cls(proc.stdout, proc.stdin, proc)

    async def request(self, method: str, params: dict[str, Any],
                      timeout: float | None) -> dict[str, Any]:
        """Send one request and return its reply object; ``machine_offline`` when the
        channel ends first, ``machine_timeout`` after ``timeout`` seconds."""
        request_id = next(self._ids)
        self.writer.write(json.dumps({"id": request_id, "method": method, "params": params}
                                     ).encode() + b"\n")
        try:
            await self.writer.drain()
            while True:
                line = await asyncio.wait_for(self.reader.readline(), timeout)
                if not line:
                    raise CmuxError("machine_offline", "the machine's link closed")
                reply = json.loads(line)
                if isinstance(reply, dict) and reply.get("id") == request_id:
                    return reply
        except TimeoutError:
            raise CmuxError("machine_timeout", f"no reply from the machine within "
                            f"{timeout:.0f} s") from None
        except (ConnectionError, BrokenPipeError):
            raise CmuxError("machine_offline", "the machine's link closed") from None

    async def close(self) -> None:
        if self.proc is None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()
            return
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        await self.proc.wait()


class Link:
    """Keeps one machine connected while it is running: connect, serve calls, and on any
    failure record why and retry after a growing pause (a machine whose cmux is missing or
    whose authentication failed is retried too, at the longest pause)."""

    def __init__(self, machine: Machine, control_dir: Path, local_protocol: int,
                 on_change: Callable[[Link, LinkState], None] = lambda link, was: None
                 ) -> None:
        self.machine = machine
        self.control = control_dir / machine.name
        self.forwarded = control_dir / f"{machine.name}.sock"
        """Where the remote server's socket is forwarded to, when the sshd allows it."""
        self.local_protocol = local_protocol
        self.status = LinkStatus(since=time.time())
        self._on_change = on_change
        self._proc: asyncio.subprocess.Process | None = None
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._direct: asyncio.StreamWriter | None = None
        """The connection to the forwarded socket that carries the shared calls, if any."""
        self._direct_ids: set[int] = set()
        self._direct_task: asyncio.Task[None] | None = None
        self._ids = itertools.count(1)
        self._task: asyncio.Task[None] | None = None
        self._retry_now = asyncio.Event()
        self._changed = asyncio.Event()

    @property
    def name(self) -> str:
        return self.machine.name

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"cmux-fleet-{self.name}")

    async def stop(self) -> None:
        """End the master (remote servers keep running) and the reconnect loop; the link
        reports no change from now on."""
        self._on_change = lambda link, was: None
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._end_master()

    def retry_now(self) -> None:
        """Skip the current pause between reconnects (the link is ``connecting`` from now)."""
        if self.status.state != LinkState.CONNECTED:
            self._set(LinkState.CONNECTING, "")
        self._retry_now.set()

    async def settled(self, timeout: float) -> LinkState:
        """Wait up to ``timeout`` seconds while the link is connecting; its state then."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while self.status.state == LinkState.CONNECTING:
                    self._changed.clear()
                    await self._changed.wait()
        return self.status.state

    def _set(self, state: LinkState, reason: str = "", ssh_error: str | None = None) -> None:
        st = self.status
        if ssh_error is not None:
            st.ssh_error = ssh_error
        if st.state != state or st.reason != reason:
            previous = st.state
            st.state, st.reason, st.since = state, reason, time.time()
            self._changed.set()
            self._on_change(self, previous)

    async def _run(self) -> None:
        pause = BACKOFF_S[0]
        while True:
            self._set(LinkState.CONNECTING, "")
            try:
                up = await self._connect_and_serve()
            except Exception:
                log.exception("machine %s: the link failed", self.name,
                              extra={"cmux_machine": self.name})
                self._set(LinkState.OFFLINE, "the link failed; see the server's log")
                up = False
            pause = BACKOFF_S[0] if up else min(pause * 2, BACKOFF_S[1])
            if self.status.state in (LinkState.AUTH_FAILED, LinkState.INCOMPATIBLE):
                pause = max(pause, 5.0)
            self._retry_now.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._retry_now.wait(), pause)

    async def _connect_and_serve(self) -> bool:
        """One master's life; True when it came up."""
        with contextlib.suppress(FileNotFoundError):
            self.control.unlink()
        try:
            proc = await asyncio.create_subprocess_exec(
                *ssh_argv(self.machine, self.control, master=True),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, limit=1 << 24, start_new_session=True)
        except OSError as exc:
            self._set(LinkState.OFFLINE, f"cannot run ssh: {exc.strerror}")
            return False
        self._proc = proc
        self.status.master_pid = proc.pid
        stderr_lines: list[str] = []
        stderr_task = asyncio.ensure_future(_collect(proc, stderr_lines, self._ssh_said))
        reader = asyncio.ensure_future(self._read_replies(proc))
        up = False
        try:
            pong = await self._call(self._next_id(), "ping", {}, CONNECT_TIMEOUT_S)
            up = self._accept(pong)
            if up:
                await self._try_forward()
                self.status.connects += 1
                self._set(LinkState.CONNECTED, "")
                await reader
        except CmuxError:
            pass
        finally:
            reader.cancel()
            await self._end_master()
            await stderr_task
            self._fail_pending()
        if up:
            self._set(LinkState.OFFLINE, "the link dropped; reconnecting")
        elif self.status.state == LinkState.CONNECTING:
            self._set(*classify_failure(proc.returncode, stderr_lines))
        return up

    def _accept(self, reply: dict[str, Any]) -> bool:
        result = reply.get("result") if reply.get("ok") else None
        if not isinstance(result, dict) or result.get("type") != "pong":
            self._set(LinkState.INCOMPATIBLE, "the remote bridge did not answer ping "
                      "as cmux does: run cmux machine install NAME")
            return False
        self.status.version = str(result.get("version"))
        protocol = result.get("protocol")
        self.status.protocol = protocol if isinstance(protocol, int) else None
        if protocol != self.local_protocol:
            self._set(LinkState.INCOMPATIBLE, f"the remote cmux speaks protocol {protocol}, "
                      f"this one {self.local_protocol}: run cmux machine install NAME")
            return False
        return True

    async def _try_forward(self) -> None:
        """Forward the remote server's socket over the master and carry the shared calls
        on it (see :mod:`.forward`); the bridge session carries them where that fails."""
        self.status.transport = "bridge"
        try:
            reply = await self._call(self._next_id(), "system.identify", {}, CALL_TIMEOUT_S)
        except CmuxError:
            return
        result = reply.get("result")
        remote = result.get("socket_path") if isinstance(result, dict) else None
        if not isinstance(remote, str):
            return
        opened = await open_forward(self.machine, self.control, self.forwarded, remote)
        if opened is None:
            log.info("machine %s: no stream-local forwarding; calls go through the bridge",
                     self.name, extra={"cmux_machine": self.name})
            return
        reader, self._direct = opened
        self._direct_task = asyncio.ensure_future(self._read_direct(reader))
        self.status.transport = "forward"

    async def _read_direct(self, reader: asyncio.StreamReader) -> None:
        """Replies from the forwarded socket; when it closes, the calls sent on it fail and
        the bridge session carries the next ones."""
        try:
            await self._read_from(reader)
        finally:
            self._drop_direct()

    def _drop_direct(self) -> None:
        writer, self._direct = self._direct, None
        if writer is not None:
            writer.close()
        if self.status.transport == "forward":
            self.status.transport = "bridge"
        ids, self._direct_ids = self._direct_ids, set()
        self._fail_pending(ids)

    def _ssh_said(self, line: str) -> None:
        self.status.ssh_error = line

    async def _end_master(self) -> None:
        task, self._direct_task = self._direct_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._drop_direct()
        self.status.transport = None
        with contextlib.suppress(FileNotFoundError):
            self.forwarded.unlink()  # its listener was the master's
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 3)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()

    async def _read_replies(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        await self._read_from(proc.stdout)
        self._fail_pending()

    async def _read_from(self, reader: asyncio.StreamReader) -> None:
        while line := await reader.readline():
            with contextlib.suppress(ValueError):
                reply = json.loads(line)
                request_id = reply.get("id") if isinstance(reply, dict) else None
                future = self._pending.pop(request_id) if isinstance(
                    request_id, int) and request_id in self._pending else None
                if future is not None and not future.done():
                    future.set_result(reply)

    def _fail_pending(self, ids: set[int] | None = None) -> None:
        """Fail the calls waiting for a reply (those of ``ids`` only, when given)."""
        if ids is None:
            pending, self._pending = self._pending, {}
        else:
            pending = {i: self._pending.pop(i) for i in ids if i in self._pending}
        for future in pending.values():
            if not future.done():
                future.set_exception(CmuxError("machine_offline",
                                               f"machine {self.name}'s link closed"))

    def _next_id(self) -> int:
        return next(self._ids)

    async def _call(self, request_id: int, method: str, params: dict[str, Any],
                    timeout: float) -> dict[str, Any]:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise self.offline_error()
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        out = self._direct or proc.stdin
        if out is self._direct:
            self._direct_ids.add(request_id)
        try:
            out.write(json.dumps({"id": request_id, "method": method,
                                  "params": params}).encode() + b"\n")
            async with asyncio.timeout(timeout):
                await out.drain()
                return await future
        except TimeoutError:
            raise CmuxError("machine_timeout", f"machine {self.name} did not answer "
                            f"{method} within {timeout:.0f} s") from None
        except (ConnectionError, RuntimeError):
            raise self.offline_error() from None
        finally:
            self._pending.pop(request_id, None)
            self._direct_ids.discard(request_id)

    def offline_error(self) -> CmuxError:
        st = self.status
        return CmuxError("machine_offline", f"machine {self.name} is {st.state.value}"
                         + (f": {st.reason}" if st.reason else ""),
                         {"machine": self.name, "state": st.state.value})

    async def request(self, method: str, params: dict[str, Any],
                      timeout: float = CALL_TIMEOUT_S) -> dict[str, Any]:
        """One call over the master's session; returns the remote reply object (``ok``,
        ``result`` or ``error``). Raises ``machine_offline`` unless connected and
        ``machine_timeout`` after ``timeout`` seconds."""
        if self.status.state != LinkState.CONNECTED:
            raise self.offline_error()
        return await self._call(self._next_id(), method, params, timeout)

    async def open_channel(self) -> Channel:
        """A new session over the master with its own bridge (for waits, streams and
        relays), never a connection of its own: when the master has just gone, the
        channel's first request fails with ``machine_offline``. Raises ``machine_offline``
        unless connected."""
        if self.status.state != LinkState.CONNECTED:
            raise self.offline_error()
        if self._direct is not None:
            with contextlib.suppress(OSError):
                reader, writer = await asyncio.open_unix_connection(
                    str(self.forwarded), limit=1 << 24)
                return Channel(reader, writer)
        proc = await asyncio.create_subprocess_exec(
            *ssh_argv(self.machine, self.control, master=False, only_through_master=True),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, limit=1 << 24, start_new_session=True)
        return Channel.of_process(proc)


async def _collect(proc: asyncio.subprocess.Process, lines: list[str],
                   on_line: Callable[[str], None]) -> None:
    """Keep ssh's stderr lines (the last few) as they come."""
    assert proc.stderr is not None
    while raw := await proc.stderr.readline():
        line = raw.decode(errors="replace").strip()
        if line:
            lines.append(line)
            del lines[:-20]
            on_line(line)


def private_control_dir(path: Path) -> Path:
    """Make ``path`` a 0700 directory owned by this user (not a symlink); raises OSError
    when it exists and is not."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(path)
    if not os.path.isdir(path) or os.path.islink(path) or st.st_uid != os.getuid():
        raise OSError(f"{path} is not a directory of this user")
    os.chmod(path, 0o700)
    return path
