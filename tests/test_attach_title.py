"""``cmux attach`` gives the outer terminal its title back: it pushes the terminal's title
on the title stack (``CSI 22;0t``) before it shows the pane, sets the pane's title while
attached, and pops it (``CSI 23;0t``) on the way out, after every title it set.

The client runs on a pseudo-terminal this test holds the other end of, so every byte it
writes to its terminal is recorded in order (no outer terminal or tmux is involved).
"""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from cmux_core.testing import ServerProcess, start_server, wait_until

PUSH = b"\x1b[22;0t"
POP = b"\x1b[23;0t"


@dataclass
class Recorded:
    """What a client wrote to its terminal, collected by a reader thread."""

    master: int
    data: bytearray = field(default_factory=bytearray)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def read_all(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            with self.lock:
                self.data += chunk

    def bytes(self) -> bytes:
        with self.lock:
            return bytes(self.data)


@pytest.fixture
def server() -> Iterator[ServerProcess]:
    s = start_server()
    try:
        yield s
    finally:
        s.stop()


def set_title(server: ServerProcess, title: str) -> None:
    server.call("pane.send_text", {"pane_id": "w1:p1",
                                   "text": f"printf '\\033]2;%s\\007' {title}\r"})


def pane_title(server: ServerProcess) -> str:
    return str(server.call("pane.surfaces", {"pane_id": "w1:p1"})["surfaces"][0]["title"])


def test_attach_pushes_the_title_and_pops_it_after_the_last_one_it_set(
        server: ServerProcess) -> None:
    set_title(server, "first-pane-title")
    wait_until(lambda: pane_title(server) == "first-pane-title", 15, message="pane title")
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CMUX_")}
    client = subprocess.Popen(
        [sys.executable, "-m", "cmux_core", "attach", "--socket", str(server.socket_path),
         "w1:p1"], stdin=slave, stdout=slave, stderr=slave, env=env,
        start_new_session=True)
    os.close(slave)
    recorded = Recorded(master)
    reader = threading.Thread(target=recorded.read_all, daemon=True)
    reader.start()
    try:
        wait_until(lambda: b"\x1b]2;first-pane-title\x07" in recorded.bytes(), 30,
                   message="the pane's title on the attached terminal")
        set_title(server, "second-pane-title")
        wait_until(lambda: b"\x1b]2;second-pane-title\x07" in recorded.bytes(), 30,
                   message="the pane's new title on the attached terminal")
        os.write(master, b"\x1c")  # ctrl+\ detaches
        assert client.wait(30) == 0
        wait_until(lambda: b"[detached]" in recorded.bytes(), 10, message="detach message")
    finally:
        if client.poll() is None:
            client.kill()
            client.wait(10)
        reader.join(10)
        os.close(master)
    out = recorded.bytes()
    assert out.count(PUSH) == 1 and out.count(POP) == 1
    first_title = out.index(b"\x1b]2;")
    last_title = out.rindex(b"\x1b]2;")
    # Saved before the pane's title is shown, given back after the last one it set.
    assert out.index(PUSH) < first_title
    assert out.index(POP) > last_title
    # Back on the main screen when the title is given back.
    assert out.rindex(b"\x1b[?1049l") < out.index(POP)
