"""The person's terminal, as ``cmux attach`` and ``cmux ui`` write to it, so that it gets its
modes back however the client ends.

:class:`TerminalOutput` writes bytes to the terminal's descriptor. A write that fails (the
terminal closed: ``EIO``, ``EPIPE``) marks the terminal :attr:`~TerminalOutput.gone`, and
later writes are dropped instead of raising. After a hang-up (:meth:`TerminalOutput.hang_up`,
called on SIGHUP) writes wait little: a write blocked at that moment is abandoned, and the
later ones (the client restoring the terminal on its way out) share
:data:`HANG_UP_GRACE_S` to find room, so a client never hangs on a terminal nobody reads.

:class:`EndSignals` turns SIGTERM, SIGHUP and SIGINT (which no key sends while the terminal
is in raw mode) into an orderly end: the signal is recorded and ``notify`` is called, and
the client leaves through its usual cleanup. :func:`signal_status` is the exit status for
an end by signal, 128 plus its number, as a shell reports a process the signal killed.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Callable
from types import FrameType, TracebackType

END_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
HANG_UP_GRACE_S = 1.0
"""How long, in all, writes after a hang-up may wait for the terminal to take them."""


class TerminalGone(Exception):
    """A write to the terminal was abandoned (it hung up)."""


class TerminalOutput:
    """Writes to the terminal on descriptor ``fd``; see the module docstring."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.gone = False
        """A write failed: the terminal is closed and nothing more is written."""
        self.hung_up = False
        """SIGHUP arrived: writes wait at most until :attr:`_deadline`."""
        self._deadline = 0.0
        self._writing = False
        self._cut = False
        """A write was abandoned part way, perhaps inside an escape sequence."""

    def write(self, data: bytes) -> None:
        """Write all of ``data`` (after a hang-up: what the terminal takes before the
        grace time ends); never raises."""
        if self.gone or not data:
            return
        if self.hung_up:
            self._write_now(data)
            return
        view = memoryview(data)
        try:
            self._writing = True
            while view:
                view = view[os.write(self.fd, view):]
        except OSError:
            self.gone = True
        except TerminalGone:
            self._cut = True
        finally:
            self._writing = False

    def hang_up(self) -> None:
        """The terminal hung up (called from the SIGHUP handler): a write waiting for room
        now is abandoned (raises :class:`TerminalGone` into it) and later ones wait little."""
        if not self.hung_up:
            self.hung_up = True
            self._deadline = time.monotonic() + HANG_UP_GRACE_S
        if self._writing:
            raise TerminalGone

    def _write_now(self, data: bytes) -> None:
        if self._cut:  # end the sequence it was cut in: CAN cancels one, ST a string
            self._cut = False
            data = b"\x18\x1b\\" + data
        view = memoryview(data)
        try:
            blocking = os.get_blocking(self.fd)
            os.set_blocking(self.fd, False)
            try:
                while view:
                    try:
                        view = view[os.write(self.fd, view):]
                    except BlockingIOError:
                        left = self._deadline - time.monotonic()
                        if left <= 0 or not select.select([], [self.fd], [], left)[1]:
                            raise
            finally:
                os.set_blocking(self.fd, blocking)
        except OSError:  # no room in time, or closed: either way it is left
            self.gone = True


class EndSignals:
    """While entered, SIGTERM, SIGHUP and SIGINT are recorded (:attr:`received`, the first
    one) and ``notify`` is called with the signal number instead of the process ending;
    SIGHUP also hangs ``output`` up. The previous handlers come back on exit."""

    def __init__(self, output: TerminalOutput | None,
                 notify: Callable[[int], None] | None = None) -> None:
        self.output = output
        self.notify = notify
        """Called in the handler with the signal number; may be set after entering."""
        self.received: int | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> EndSignals:
        for sig in END_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._previous.clear()

    def _on_signal(self, sig: int, _frame: FrameType | None) -> None:
        if self.received is None:
            self.received = sig
        if self.notify is not None:
            with contextlib.suppress(OSError, RuntimeError):
                self.notify(sig)
        if sig == signal.SIGHUP and self.output is not None:
            self.output.hang_up()  # last: it may raise into a blocked write


def signal_status(sig: int) -> int:
    """The exit status of a client ended by signal ``sig``."""
    return 128 + sig
