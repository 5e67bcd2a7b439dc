"""One PTY process and its emulated screen.

A :class:`Terminal` owns the PTY master fd and the child process. The fd is
non-blocking and read from ``loop.add_reader``; bytes go to the emulator in
bounded slices so one pane printing 100 MB cannot stall the loop, and when a
pane's backlog passes :data:`BACKLOG_HIGH` its PTY is no longer read, so the
program blocks on write as it would in a real terminal. Nothing is dropped.

The child is a session leader with the PTY as controlling terminal, so ``^C``
interrupts its foreground job and a resize delivers SIGWINCH. Exit is noticed
through a pidfd, so no process is left a zombie.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import termios
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cmux_core.errors import CmuxError, InvalidEnv
from cmux_core.terminal.backends import make_emulator
from cmux_core.terminal.emulator import Emulator, ReadFormat, ReadSource, TerminalSignal, read_text

log = logging.getLogger(__name__)

READ_CHUNK = 65536
FEED_SLICE = 8192
FEED_BUDGET_S = 0.004
"""Longest one feed pass may run before yielding to the loop."""
BACKLOG_HIGH = 4 << 20
BACKLOG_LOW = 1 << 20
KILL_GRACE_S = 2.0
COMPACT_AFTER_S = 0.25
"""Quiet time before an emulator that can compact its scrollback is asked to."""
COMPACT_STEP_GAP_S = 0.005


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A name the pane's environment keeps: the launcher shell drops any other from what it
passes on, so such a key would vanish without a word."""


def validate_env(env: Mapping[str, object] | None, field: str = "env") -> dict[str, str]:
    """Check a caller env map (seed 004 "Env behavior"); returns it sorted by key.

    Beyond the seed's rules (keys non-empty, without ``=`` or NUL; values without NUL), a
    key must be an environment variable name (:data:`ENV_NAME`: ASCII letters, digits and
    ``_``, not starting with a digit), so no whitespace or control characters. Raises
    :class:`InvalidEnv` naming the offending key.
    """
    if env is None:
        return {}
    out: dict[str, str] = {}
    for key in sorted(env):
        value = env[key]
        if not isinstance(key, str) or not key:
            raise InvalidEnv(message=f"{field}: keys must not be empty")
        if "=" in key:
            raise InvalidEnv(message=f"{field}: key {key!r} must not contain '='")
        if "\0" in key:
            raise InvalidEnv(message=f"{field}: key {key!r} must not contain NUL")
        if not ENV_NAME.fullmatch(key):
            raise InvalidEnv(message=f"{field}: key {key!r} is not an environment variable "
                             "name (ASCII letters, digits and _, not starting with a digit)")
        if not isinstance(value, str):
            raise InvalidEnv(message=f"{field}.{key}: value must be a string")
        if "\0" in value:
            raise InvalidEnv(message=f"{field}.{key}: value must not contain NUL")
        out[key] = value
    return out


# The child re-opens its PTY by path after setsid, which makes it the controlling
# terminal, then execs the program. Doing this in a shell rather than in a Python
# preexec_fn lets subprocess use vfork: spawning costs ~1 ms whatever the server's size.
_TTY_LAUNCHER = 'exec 0<>"$0" 1>&0 2>&0 && exec "$@"'


def _set_winsize(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))



PATH_SHOWN = 400
"""Characters of a searched ``PATH`` quoted in a spawn error."""


def not_on_path(program: str, path: str) -> CmuxError:
    """``spawn_failed`` for a bare program name that ``path`` does not hold.

    The message quotes the ``PATH`` searched (cut after :data:`PATH_SHOWN` characters), since
    the server looked it up, not the caller's shell; ``data`` has it whole.
    """
    shown = path if len(path) <= PATH_SHOWN else \
        f"{path[:PATH_SHOWN]}... ({len(path)} characters)"
    return CmuxError("spawn_failed", f"cannot start {program}: not found on the PATH the server "
                     "searched (the server looks programs up, not your shell; give a full path "
                     f"or start the server with it on PATH): {shown}",
                     {"program": program, "path": path})


@dataclass(eq=False)
class Terminal:
    """A process on a PTY plus its screen. Created by :meth:`spawn`; owned by one pane.

    Callbacks run on the loop: ``on_output`` after each batch of bytes reached the
    screen, ``on_signal`` for OSC announcements, ``on_exit`` once when the child
    has exited and its remaining output was read.
    """

    id: str
    argv: list[str]
    cwd: str
    columns: int
    rows: int
    emulator: Emulator
    pid: int = field(init=False, default=0)
    fd: int = field(init=False, default=-1)
    exit_code: int | None = field(init=False, default=None)
    exited: bool = field(init=False, default=False)
    created_at: float = field(init=False, default_factory=time.time)
    output_seq: int = field(init=False, default=0)
    on_output: Callable[[Terminal], None] | None = field(init=False, default=None)
    on_signal: Callable[[Terminal, TerminalSignal], None] | None = field(init=False,
                                                                         default=None)
    on_exit: Callable[[Terminal], None] | None = field(init=False, default=None)
    output_hook: Callable[[bytes, Callable[[bytes], None]], None] | None = field(
        init=False, default=None)
    """Called with each slice of output and the screen's ``feed`` instead of feeding
    the screen directly (pane graphics take kitty graphics commands out this way)."""
    _loop: asyncio.AbstractEventLoop = field(init=False,
                                             default_factory=asyncio.get_running_loop)
    _backlog: deque[bytes] = field(init=False, default_factory=deque)
    _backlog_size: int = field(init=False, default=0)
    _reading: bool = field(init=False, default=False)
    _drain_scheduled: bool = field(init=False, default=False)
    _out: bytearray = field(init=False, default_factory=bytearray)
    _writing: bool = field(init=False, default=False)
    _pidfd: int = field(init=False, default=-1)
    _process_done: bool = field(init=False, default=False)
    _eof: bool = field(init=False, default=False)
    _closed: bool = field(init=False, default=False)
    _kill_timer: asyncio.TimerHandle | None = field(init=False, default=None)
    _compact_timer: asyncio.TimerHandle | None = field(init=False, default=None)
    _compact_due: float = field(init=False, default=0.0)
    _feed_failed: bool = field(init=False, default=False)
    _reads: dict[tuple[str, int | None, str], tuple[int, int, int, str, bool]] = field(
        init=False, default_factory=dict)

    @classmethod
    def spawn(cls, terminal_id: str, argv: list[str], *, cwd: str, env: Mapping[str, str],
              columns: int, rows: int, emulator: str = "auto",
              scrollback_lines: int = 10_000) -> Terminal:
        """Start ``argv`` on a new PTY of ``columns`` x ``rows``.

        ``env`` is the complete environment. Raises ``CmuxError("spawn_failed")``
        when the program cannot be started (missing binary, bad cwd, an argument holding
        NUL, no PTY or file descriptor left).
        """
        if not argv:
            raise CmuxError("spawn_failed", "command must not be empty")
        for i, arg in enumerate(argv):
            if "\0" in arg:
                raise CmuxError("spawn_failed", f"argv[{i}] must not contain NUL")
        try:
            cwd_is_dir = stat.S_ISDIR(os.stat(cwd).st_mode)
        except FileNotFoundError:
            cwd_is_dir = False
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise CmuxError("spawn_failed", f"cannot use working directory {cwd}: "
                            f"{reason}") from None
        if not cwd_is_dir:
            raise CmuxError("spawn_failed", f"working directory {cwd} does not exist")
        if "/" in argv[0]:
            if not os.access(Path(cwd, argv[0]), os.X_OK):
                raise CmuxError("spawn_failed", f"cannot start {argv[0]}: no such program",
                                {"program": argv[0]})
        elif shutil.which(argv[0], path=env.get("PATH", os.defpath)) is None:
            raise not_on_path(argv[0], env.get("PATH", os.defpath))
        screen = make_emulator(emulator, columns, rows, scrollback_lines=scrollback_lines)
        term = cls(terminal_id, list(argv), cwd, columns, rows, screen)
        try:
            master, slave = os.openpty()
        except OSError as exc:
            raise CmuxError("spawn_failed", f"cannot start {argv[0]}: no terminal: "
                            f"{exc.strerror or exc}") from None
        try:
            _set_winsize(slave, rows, columns)
            try:
                proc = subprocess.Popen(
                    ["/bin/sh", "-c", _TTY_LAUNCHER, os.ttyname(slave), *argv],
                    stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=dict(env),
                    start_new_session=True, close_fds=True)
            except (OSError, ValueError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise CmuxError("spawn_failed", f"cannot start {argv[0]}: {reason}") from None
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        # The pidfd reaps the child; stop Popen from doing it too.
        proc.returncode = 0
        term.pid = proc.pid
        term.fd = master
        os.set_blocking(master, False)
        term._pidfd = os.pidfd_open(proc.pid)
        term._loop.add_reader(term._pidfd, term._on_process_exit)
        term._loop.add_reader(master, term._on_readable)
        term._reading = True
        return term

    # -- output ---------------------------------------------------------------------

    def _on_readable(self) -> None:
        try:
            data = os.read(self.fd, READ_CHUNK)
        except BlockingIOError:
            return
        except OSError as exc:
            if exc.errno != errno.EIO:
                log.warning("read from %s failed: %s", self.id, exc)
            data = b""
        if not data:
            self._on_eof()
            return
        self._backlog.append(data)
        self._backlog_size += len(data)
        if self._backlog_size > BACKLOG_HIGH and self._reading:
            self._loop.remove_reader(self.fd)
            self._reading = False
        if self._drain_scheduled:
            return
        # Fed at once (within the feed budget) unless a drain is already queued.
        self._drain()

    def _schedule_drain(self) -> None:
        if not self._drain_scheduled:
            self._drain_scheduled = True
            self._loop.call_soon(self._drain)

    def _drain(self) -> None:
        self._drain_scheduled = False
        if self._closed:
            return
        deadline = time.monotonic() + FEED_BUDGET_S
        fed = False
        while self._backlog:
            chunk = self._backlog.popleft()
            if len(chunk) > FEED_SLICE:
                self._backlog.appendleft(chunk[FEED_SLICE:])
                chunk = chunk[:FEED_SLICE]
            self._backlog_size -= len(chunk)
            try:
                if self.output_hook is None:
                    self.emulator.feed(chunk)
                else:
                    self.output_hook(chunk, self.emulator.feed)
            except Exception:
                # A fault in an emulator loses this slice of its screen, never the pane.
                if not self._feed_failed:
                    self._feed_failed = True
                    log.exception("the %s emulator of %s failed on its output",
                                  self.emulator.backend, self.id)
            fed = True
            if time.monotonic() >= deadline:
                break
        if fed:
            self.output_seq += 1
            replies = self.emulator.take_replies()
            if replies:
                self.write(replies)
            for sig in self.emulator.take_signals():
                if self.on_signal is not None:
                    self.on_signal(self, sig)
            if self.on_output is not None:
                self.on_output(self)
        if self._backlog:
            self._schedule_drain()
        else:
            self._schedule_compaction(COMPACT_AFTER_S)
            if self._eof:
                self._maybe_finish()
        if not self._reading and not self._eof and self._backlog_size < BACKLOG_LOW \
                and self.fd >= 0:
            self._loop.add_reader(self.fd, self._on_readable)
            self._reading = True

    def _schedule_compaction(self, delay: float) -> None:
        """Ask a backend with ``compress()`` to compact once the pane has been quiet.

        Output only moves the due time; the one pending timer checks it when it
        fires, so a busy pane does not re-arm a timer for every read.
        """
        if self._closed or not hasattr(self.emulator, "compress"):
            return
        self._compact_due = self._loop.time() + delay
        if self._compact_timer is None:
            self._compact_timer = self._loop.call_at(self._compact_due, self._compact_step)

    def _compact_step(self) -> None:
        self._compact_timer = None
        if self._closed:
            return
        if self._backlog or self._loop.time() < self._compact_due:
            self._compact_timer = self._loop.call_at(
                max(self._compact_due, self._loop.time() + COMPACT_STEP_GAP_S),
                self._compact_step)
            return
        # One bounded step at a time, so a large scrollback never stalls the loop.
        if self.emulator.compress():  # type: ignore[attr-defined]
            self._schedule_compaction(COMPACT_STEP_GAP_S)

    def _on_eof(self) -> None:
        self._eof = True
        if self._reading:
            self._loop.remove_reader(self.fd)
            self._reading = False
        self._maybe_finish()

    def read(self, source: ReadSource, lines: int | None, fmt: ReadFormat) -> tuple[str, bool]:
        """:func:`~cmux_core.terminal.emulator.read_text` of this screen, reused until new output.

        Waiters, detection and clients often read the same source again before anything
        changed; the screen only changes through output (``output_seq``) or a resize.
        """
        key = (source, lines, fmt)
        stamp = (self.output_seq, self.columns, self.rows)
        cached = self._reads.get(key)
        if cached is not None and cached[:3] == stamp:
            return cached[3], cached[4]
        text, truncated = read_text(self.emulator, source, lines, fmt)
        # Only reads of the current screen are worth keeping.
        self._reads = {k: v for k, v in self._reads.items() if v[:3] == stamp}
        self._reads[key] = (*stamp, text, truncated)
        return text, truncated

    # -- input ----------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Queue ``data`` for the PTY; written without blocking, in order.

        Raises ``CmuxError("pane_send_failed")`` when the terminal is closed.
        """
        if self._closed or self.fd < 0:
            raise CmuxError("pane_send_failed", f"terminal {self.id} is closed")
        if not data:
            return
        self._out += data
        if not self._writing:
            self._flush_out()

    def _flush_out(self) -> None:
        while self._out:
            try:
                n = os.write(self.fd, self._out)
            except BlockingIOError:
                break
            except OSError as exc:
                log.warning("write to %s failed: %s", self.id, exc)
                self._out.clear()
                break
            del self._out[:n]
        if self._out and not self._writing:
            self._loop.add_writer(self.fd, self._flush_out)
            self._writing = True
        elif not self._out and self._writing:
            self._loop.remove_writer(self.fd)
            self._writing = False

    # -- size, process ----------------------------------------------------------------

    def resize(self, columns: int, rows: int) -> None:
        """Resize screen and PTY; the kernel sends SIGWINCH to the foreground group."""
        columns, rows = max(columns, 2), max(rows, 1)
        if (columns, rows) == (self.columns, self.rows):
            return
        self.columns, self.rows = columns, rows
        self.emulator.resize(columns, rows)
        if self.fd >= 0:
            try:
                _set_winsize(self.fd, rows, columns)
            except OSError as exc:
                log.debug("resize of %s failed: %s", self.id, exc)

    def foreground_pgid(self) -> int | None:
        if self.fd < 0:
            return None
        try:
            return os.tcgetpgrp(self.fd)
        except OSError:
            return None

    def _on_process_exit(self) -> None:
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            pid, status = self.pid, 0
        if pid == 0:
            return
        self._loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        self._pidfd = -1
        self.exit_code = os.waitstatus_to_exitcode(status)
        self._process_done = True
        if self._kill_timer is not None:
            self._kill_timer.cancel()
        # Output the child wrote just before exiting may still be in the PTY.
        if not self._closed and self.fd >= 0 and not self._eof:
            self._read_remaining()
        self._maybe_finish()

    def _read_remaining(self) -> None:
        while True:
            try:
                data = os.read(self.fd, READ_CHUNK)
            except OSError:
                break
            if not data:
                break
            self._backlog.append(data)
            self._backlog_size += len(data)
        self._schedule_drain()

    def _maybe_finish(self) -> None:
        if self.exited or not self._process_done or self._backlog:
            return
        self.exited = True
        if self.on_exit is not None:
            self.on_exit(self)

    def close(self) -> None:
        """End the process group (SIGHUP, then SIGKILL after a grace period) and the PTY.

        Returns at once; the child is reaped in the background when it exits.
        """
        if self._closed:
            return
        self._closed = True
        self._backlog.clear()  # nobody reads a closed terminal's screen any more
        self._backlog_size = 0
        if self._compact_timer is not None:
            self._compact_timer.cancel()
            self._compact_timer = None
        if self._reading:
            self._loop.remove_reader(self.fd)
            self._reading = False
        if self._writing:
            self._loop.remove_writer(self.fd)
            self._writing = False
        if not self._process_done:
            self._signal_group(signal.SIGHUP)
            self._signal_group(signal.SIGCONT)
            self._kill_timer = self._loop.call_later(KILL_GRACE_S, self.kill)
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def kill(self) -> None:
        if not self._process_done:
            self._signal_group(signal.SIGKILL)

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, sig)

    @property
    def process_done(self) -> bool:
        return self._process_done
