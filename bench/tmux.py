"""The tmux side: a private tmux server (own socket, no config) and a control-mode client."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import time
from pathlib import Path

from .lines import LineReader

TMUX = shutil.which("tmux") or "/usr/bin/tmux"


def version() -> str:
    return subprocess.run([TMUX, "-V"], capture_output=True, text=True,
                          check=False).stdout.strip()


class Tmux:
    """A tmux server on ``directory/tmux.sock`` started with ``-f /dev/null``.

    The first ``new_session`` starts the server; ``close`` kills it.
    """

    def __init__(self, directory: Path, size: tuple[int, int] = (80, 24)) -> None:
        self.socket = directory / "tmux.sock"
        self.size = size

    def __enter__(self) -> Tmux:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, *args: str) -> str:
        """Run one tmux command against this server; returns its stdout."""
        done = subprocess.run([TMUX, "-S", str(self.socket), "-f", "/dev/null", *args],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"tmux {args[0]} failed: {done.stderr.strip()}")
        return done.stdout

    def close(self) -> None:
        subprocess.run([TMUX, "-S", str(self.socket), "kill-server"], capture_output=True,
                       check=False)
        self.socket.unlink(missing_ok=True)

    def new_session(self, name: str, argv: list[str]) -> str:
        """A detached session of ``size`` running ``argv``; returns its pane id (``%N``)."""
        columns, rows = self.size
        return self.run("new-session", "-d", "-s", name, "-x", str(columns), "-y", str(rows),
                        "-P", "-F", "#{pane_id}", shlex.join(argv)).strip()

    def new_window(self, session: str, argv: list[str]) -> str:
        """A new window (one pane of the session's size) running ``argv``; returns its id."""
        return self.run("new-window", "-d", "-t", f"{session}:", "-P", "-F", "#{pane_id}",
                        shlex.join(argv)).strip()

    def kill_pane(self, pane: str) -> None:
        self.run("kill-pane", "-t", pane)

    def server_pid(self) -> int:
        return int(self.run("display-message", "-p", "#{pid}").strip())

    def capture(self, pane: str) -> str:
        """The pane's visible screen as text."""
        return self.run("capture-pane", "-p", "-t", pane)

    def wait_visible(self, pane: str, text: str, timeout: float = 30.0,
                     interval: float = 0.0) -> None:
        """Poll ``capture-pane`` until ``text`` is on the pane's screen."""
        deadline = time.monotonic() + timeout
        while text not in self.capture(pane):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{text!r} not visible in tmux pane {pane}")
            if interval:
                time.sleep(interval)


class ControlClient:
    """A ``tmux -C attach`` client on pipes; ``close`` detaches it.

    ``%output`` notifications arrive only for panes of the attached session. A
    client is used either for command replies or for ``wait_output``, not both:
    ``wait_output`` skips the reply blocks it reads past.
    """

    def __init__(self, tmux: Tmux, session: str) -> None:
        self.process = subprocess.Popen(
            [TMUX, "-S", str(tmux.socket), "-f", "/dev/null", "-C", "attach-session", "-t",
             session], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.process.stdin is not None and self.process.stdout is not None
        self._stdin = self.process.stdin
        self._reader = LineReader(self.process.stdout.fileno())
        # The attach itself is answered with one %begin/%end block.
        self._read_block(time.monotonic() + 10)

    def close(self) -> None:
        self._stdin.close()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        assert self.process.stdout is not None
        self.process.stdout.close()

    def send(self, commands: list[str]) -> None:
        """Write commands, one a line, in one write."""
        self._stdin.write("".join(c + "\n" for c in commands).encode())
        self._stdin.flush()

    def _read_block(self, deadline: float) -> None:
        while True:
            line = self._reader.readline(deadline)
            if line.startswith(b"%error"):
                raise RuntimeError("tmux control command failed")
            if line.startswith(b"%end"):
                return

    def replies(self, count: int, timeout: float = 30.0) -> None:
        """Read ``count`` command replies (``%begin`` … ``%end`` blocks)."""
        deadline = time.monotonic() + timeout
        for _ in range(count):
            self._read_block(deadline)

    def command(self, command: str, timeout: float = 30.0) -> None:
        self.send([command])
        self.replies(1, timeout)

    def wait_output(self, pane: str, token: bytes, timeout: float = 30.0) -> None:
        """Read until an ``%output`` line of ``pane`` contains ``token``."""
        deadline = time.monotonic() + timeout
        prefix = f"%output {pane} ".encode()
        while True:
            line = self._reader.readline(deadline)
            if line.startswith(prefix) and token in line:
                return
