"""A terminal emulator played by a test: a ``cmux`` client runs on a pseudo-terminal whose
master the test holds, reads every byte the client writes and answers its probe.

The probe (``cmux_core.cli.kitty.probe``) is the kitty graphics query, a file query (image
``i=32`` loaded from a file), the cell size query and device attributes, written at once.
Each probe is answered when its device attributes request has arrived: DA1 always, the
graphics query ``OK`` when ``kitty``, and the file query from the file when ``files``
(``OK`` when the file holds the 3 bytes of the query pixel, else ``ENOENT``).
"""

from __future__ import annotations

import base64
import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from cmux_core.cli.kitty import DEVICE_ATTRIBUTES, QUERY
from cmux_core.terminal.pyte.emulator import PyteEmulator
from cmux_core.testing import ServerProcess

APC = re.compile(rb"\x1b_G([^;\x1b]*)(?:;([^\x1b]*))?\x1b\\")
"""A kitty graphics sequence: its control keys and its payload."""
DA1_REPLY = b"\x1b[?62;22c"


def keys_of(control: bytes) -> dict[str, str]:
    """The keys of a kitty graphics control part (``a=T,i=5`` -> ``{"a": "T", "i": "5"}``)."""
    return dict(part.split("=", 1) for part in control.decode().split(","))


class Terminal:
    """``cmux <argv> --socket <server's>`` on a pty of ``size`` (lines, columns) cells of
    ``cell`` (width, height) pixels, with ``TERM=xterm-256color`` (not a kitty TERM: the
    query decides).

    ``keep_slave`` keeps the test's copy of the slave open so that ``restored`` can read
    the terminal's settings; ``controlling`` makes the pty the client's controlling
    terminal, so closing the master hangs it up (SIGHUP) as a window closing does;
    ``stderr`` sends the client's standard error to a file rather than the terminal."""

    def __init__(self, server: ServerProcess, *argv: str, kitty: bool = True,
                 files: bool = False, size: tuple[int, int] = (24, 80),
                 cell: tuple[int, int] = (10, 20), keep_slave: bool = False,
                 controlling: bool = False, stderr: Path | None = None) -> None:
        lines, columns = size
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack(
            "HHHH", lines, columns, columns * cell[0], lines * cell[1]))
        self.cooked = termios.tcgetattr(slave)
        env = {k: v for k, v in os.environ.items() if not k.startswith("CMUX_")}
        env.update(server.env)
        env["TERM"] = "xterm-256color"
        err: IO[bytes] | int = open(stderr, "wb") if stderr is not None else slave  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cmux_core", *argv, "--socket", str(server.socket_path)],
            stdin=slave, stdout=slave, stderr=err, env=env, start_new_session=True,
            preexec_fn=(lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0)) if controlling
            else None)
        if not isinstance(err, int):
            err.close()
        self.slave: int | None = slave
        if not keep_slave:
            os.close(slave)
            self.slave = None
        self.out = b""
        self._screen = PyteEmulator(columns, lines)
        self._drawn = 0
        """How much of ``out`` ``_screen`` has been fed."""
        self.kitty = kitty
        self.files = files
        self.answers = 0
        self.master_open = True

    @property
    def answered(self) -> bool:
        return self.answers > 0

    def pump(self, timeout: float = 0.1) -> bool:
        """Read what the client wrote within ``timeout`` and answer any whole probe; whether
        anything was read."""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return False
        try:
            data = os.read(self.master, 1 << 16)
        except OSError:
            return False
        self.out += data
        self._answer()
        return bool(data)

    def _answer(self) -> None:
        start = 0
        for _ in range(self.answers + 1):
            query = self.out.find(QUERY, start)
            if query < 0:
                return
            start = query + len(QUERY)
        end = self.out.find(DEVICE_ATTRIBUTES, start)
        if end < 0:
            return  # the rest of the probe is still on its way
        self.answers += 1
        reply = b"\x1b_Gi=31;OK\x1b\\" if self.kitty else b""
        if self.files:
            for control, payload in APC.findall(self.out[start:end]):
                keys = keys_of(control)
                if keys.get("i") == "32" and keys.get("t") == "f":
                    # Load the query image from its file, as a terminal does.
                    pixel = Path(base64.b64decode(payload).decode())
                    ok = pixel.is_file() and len(pixel.read_bytes()) == 3
                    reply += b"\x1b_Gi=32;" + (b"OK" if ok else b"ENOENT") + b"\x1b\\"
        os.write(self.master, reply + DA1_REPLY)
        self._answer()  # a later probe may have come in the same read

    def until(self, predicate: Callable[[], bool], timeout: float = 60.0) -> None:
        """Read (and answer) until ``predicate`` holds; fails after ``timeout``."""
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, f"timed out; output tail: {self.out[-600:]!r}"
            self.pump()

    def quiet(self, seconds: float) -> None:
        """Read for ``seconds`` (room for output that must not come)."""
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            self.pump()

    def type(self, data: bytes) -> None:
        os.write(self.master, data)

    def exited(self, timeout: float = 30.0) -> int:
        """The client's exit status, reading its output meanwhile and then all it left in
        the terminal (a read returns one part of it); fails after ``timeout``."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            assert time.monotonic() < deadline, "the client did not exit"
            if self.master_open:
                self.pump()
            else:
                time.sleep(0.05)
        drained = time.monotonic() + 10  # bounded, should another writer hold the terminal
        while self.master_open and self.pump(0.2) and time.monotonic() < drained:
            pass
        return self.proc.returncode

    def shows(self, text: str) -> bool:
        """Whether ``text`` is on the terminal's screen as the client drew it so far (its
        output replayed into an emulator of the terminal's first size).

        Text a program in the pane printed is looked for here, not in ``out``: a client
        draws only what changed, so a line that reached it in two parts is written in two
        parts, with cursor movement between them."""
        self._screen.feed(self.out[self._drawn:])
        self._drawn = len(self.out)
        return any(text in row for row in self._screen.visible_text())

    def apcs(self, since: int = 0) -> list[tuple[dict[str, str], bytes]]:
        """Every kitty graphics sequence written from ``since`` on: its keys and payload."""
        return [(keys_of(control), payload)
                for control, payload in APC.findall(self.out[since:])]

    def close_master(self) -> None:
        os.close(self.master)
        self.master_open = False

    def restored(self) -> bool:
        """The slave's settings are the cooked ones it had before the client ran."""
        assert self.slave is not None, "restored needs keep_slave"
        now = termios.tcgetattr(self.slave)
        return bool(now[3] & termios.ICANON and now[3] & termios.ECHO
                    and now[3] == self.cooked[3])

    def close(self) -> None:
        # SIGTERM first: a client still probing the terminal ends on it once the probe is
        # over, removing its probe file; SIGKILL only for one that does not end.
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc.wait(10)
        if self.master_open:
            os.close(self.master)
        if self.slave is not None:
            os.close(self.slave)
