"""``cmux attach`` and ``cmux ui`` give the terminal back however they end: on SIGTERM,
SIGHUP and SIGINT (which no key sends in raw mode), when the server goes away, and when the
terminal itself closes or stops reading.

Each client runs on a pseudo-terminal this test holds the master of, so the test is the
terminal: it answers the kitty graphics query, reads every byte the client writes, and
checks the terminal's settings through the slave it keeps open.
"""

from __future__ import annotations

import base64
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pty_terminal import APC, Terminal

from cmux_core.cli.ui_pane import switch_keyboard
from cmux_core.client import Client
from cmux_core.errors import CmuxError
from cmux_core.testing import ServerProcess, wait_until

PIXEL = base64.b64encode(b"\x10\x20\x30").decode()
EXIT_S = 30.0
"""How long a client may take to leave after the signal (the machine is loaded)."""
SET_MODES = ("printf '\\033[?1h\\033[?1004h\\033[?1000h\\033[>1u'; "
             "echo modes-$((6*7)); read go; seq 999999999\r")
"""A program that switches on application cursor keys, focus reporting, mouse tracking and
the kitty keyboard protocol, then waits for a line before it floods the screen."""


pytestmark = pytest.mark.cmux_server(env={"CMUX_EXPERIMENTAL_KITTY_GRAPHICS": "1"})
"""``server`` (the conftest's) runs with kitty graphics on."""


def client(server: ServerProcess, *argv: str, controlling: bool = False, files: bool = False,
           stderr: Path | None = None) -> Terminal:
    """``cmux <argv>`` on a pty of 30 by 120 cells of 10 by 20 pixels, played as a kitty
    terminal (loading files when ``files``); the test keeps the slave to check its
    settings."""
    return Terminal(server, *argv, size=(30, 120), cell=(10, 20), keep_slave=True,
                    controlling=controlling, files=files, stderr=stderr)


def transmitted(term: Terminal) -> set[str]:
    """The ids of the images the client transmitted."""
    return {keys.get("i", "") for keys, _ in term.apcs()
            if keys.get("a") in ("T", "t")}


def pane_of(server: ServerProcess) -> str:
    return str(server.call("pane.current")["pane"]["pane_id"])


def set_layer(server: ServerProcess, pane: str) -> None:
    server.call("pane.graphics.set", {
        "pane_id": pane, "layer_id": "primary", "format": "rgb", "image_width": 1,
        "image_height": 1, "data_base64": PIXEL,
        "placement": {"viewport_col": 2, "viewport_row": 1}})


def deleted(tail: bytes, image_id: str) -> bool:
    return b"a=d,d=I,i=" + image_id.encode() in tail


def pane_text(server: ServerProcess, pane: str) -> str:
    return str(server.call("pane.read", {"pane_id": pane, "source": "visible"})["read"]["text"])


def modes_set(server: ServerProcess) -> str:
    """The current pane, showing an image, once its program has set modes (``SET_MODES``)."""
    pane = pane_of(server)
    set_layer(server, pane)
    server.call("pane.send_text", {"pane_id": pane, "text": SET_MODES})
    wait_until(lambda: "modes-42" in pane_text(server, pane), 30, message="modes set")
    return pane


# -- cmux attach ---------------------------------------------------------------------------


def attach_ready(server: ServerProcess, *, controlling: bool = False,
                 stderr: Path | None = None) -> tuple[Terminal, str]:
    """``cmux attach`` on a pane whose program set modes and which shows an image."""
    pane = modes_set(server)
    term = client(server, "attach", pane, controlling=controlling, stderr=stderr)
    term.until(lambda: b"\x1b[?1004h" in term.out and b"\x1b[=1;1u" in term.out
               and bool(transmitted(term)))
    return term, pane


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_attach_ended_by_a_signal_restores_the_terminal(
        server: ServerProcess, sig: signal.Signals) -> None:
    term, pane = attach_ready(server)
    try:
        (image_id,) = transmitted(term)
        mark = len(term.out)
        term.proc.send_signal(sig)
        assert term.exited() == 128 + sig
        tail = term.out[mark:]
        assert deleted(tail, image_id)
        for sequence in (b"\x1b[?1l", b"\x1b[?1004l", b"\x1b[?1000l", b"\x1b[=0;1u",
                         b"\x1b[?25h", b"\x1b[?1049l", b"\x1b[23;0t"):
            assert sequence in tail, sequence
        assert tail.index(b"a=d,d=I") < tail.index(b"\x1b[?1049l")
        assert term.restored()
        assert server.call("pane.get", {"pane_id": pane})["pane"]  # the pane lives on
    finally:
        term.close()


def test_attach_restores_the_terminal_when_the_server_goes_away(server: ServerProcess
                                                                ) -> None:
    term, _ = attach_ready(server)
    try:
        (image_id,) = transmitted(term)
        mark = len(term.out)
        server.process.kill()
        assert term.exited() == 1
        tail = term.out[mark:]
        assert deleted(tail, image_id)
        assert b"\x1b[?1004l" in tail and b"\x1b[?1049l" in tail
        assert b"[the server went away]" in tail
        assert term.restored()
    finally:
        term.close()


# -- cmux ui -------------------------------------------------------------------------------


def ui_ready(server: ServerProcess, *, controlling: bool = False,
             stderr: Path | None = None) -> tuple[Terminal, str]:
    """``cmux ui`` typing into a pane whose program set modes and which shows an image."""
    pane = modes_set(server)
    term = client(server, "ui", controlling=controlling, stderr=stderr)
    term.until(lambda: b"q quit" in term.out and bool(transmitted(term)))
    term.type(b"i")
    term.until(lambda: all(s in term.out for s in (b"\x1b[?1h", b"\x1b[?1000h",
                                                    b"\x1b[?1004h", b"\x1b[>1u")))
    return term, pane


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_ui_ended_by_a_signal_restores_the_terminal(
        server: ServerProcess, sig: signal.Signals) -> None:
    term, pane = ui_ready(server)
    try:
        image_ids = transmitted(term)
        mark = len(term.out)
        term.proc.send_signal(sig)
        assert term.exited() == 128 + sig
        tail = term.out[mark:]
        assert all(deleted(tail, image_id) for image_id in image_ids)
        for sequence in (b"\x1b[?1l", b"\x1b[?1000l", b"\x1b[?1004l", b"\x1b[<u",
                         b"\x1b[?25h", b"\x1b[?1049l"):
            assert sequence in tail, sequence
        assert tail.index(b"a=d,d=I") < tail.rindex(b"\x1b[?1049l")
        assert term.restored()
        assert server.call("pane.get", {"pane_id": pane})["pane"]
    finally:
        term.close()


def test_ui_restores_the_terminal_when_the_server_goes_away(server: ServerProcess) -> None:
    term, _ = ui_ready(server)
    try:
        image_ids = transmitted(term)
        mark = len(term.out)
        server.process.kill()
        assert term.exited() == 1
        tail = term.out[mark:]
        assert all(deleted(tail, image_id) for image_id in image_ids)
        for sequence in (b"\x1b[?1l", b"\x1b[?1004l", b"\x1b[<u", b"\x1b[?1049l"):
            assert sequence in tail, sequence
        assert b"the cmux server went away" in tail
        assert term.restored()
    finally:
        term.close()


READER = """\
import os, sys, tty
tty.setraw(0)
on = b"\\x1b[?1004h\\x1b[>1u"
off = b"\\x1b[<u\\x1b[?1004l"
os.write(1, on + b"reader-ready\\r\\n")
state = True
while True:
    data = os.read(0, 100)
    if data == b"q":
        state = not state
        os.write(1, (on if state else off) + b"modes-%d\\r\\n" % state)
        continue
    os.write(1, repr(data).encode() + b"\\r\\n")
"""
"""A program that asks for focus reports and kitty keyboard flag 1 and prints what it
reads; ``q`` switches both off and on again."""


def test_ui_passes_focus_reports_and_the_kitty_keyboard_protocol_through(
        server: ServerProcess, tmp_path: Path) -> None:
    pane = pane_of(server)
    script = tmp_path / "reader.py"
    script.write_text(READER)
    server.call("pane.send_text", {"pane_id": pane, "text": f"python3 {script}\r"})
    wait_until(lambda: "reader-ready" in pane_text(server, pane), 30, message="reader")
    term = client(server, "ui")
    try:
        term.until(lambda: b"q quit" in term.out and term.shows("reader-ready"))
        assert b"\x1b[?1004h" not in term.out and b"\x1b[>" not in term.out
        term.type(b"i")
        term.until(lambda: b"\x1b[?1004h" in term.out and b"\x1b[>1u" in term.out)
        # What the terminal sends in those modes reaches the program as it was sent.
        term.type(b"\x1b[I")
        wait_until(lambda: "'\\x1b[I'" in pane_text(server, pane), 30, message="focus in")
        term.type(b"\x1b[97;5u")  # ctrl+a, in the kitty keyboard protocol's form
        wait_until(lambda: "'\\x1b[97;5u'" in pane_text(server, pane), 30,
                   message="a kitty key")
        # The program switches them off: so does the ui's terminal (the flags popped).
        mark = len(term.out)
        term.type(b"q")
        wait_until(lambda: "modes-0" in pane_text(server, pane), 30, message="modes off")
        term.until(lambda: b"\x1b[?1004l" in term.out[mark:]
                   and b"\x1b[<u" in term.out[mark:])
        # On again; ctrl+\\ in kitty form gives the keys back to the sidebar and switches
        # the modes off; the program never sees it.
        mark = len(term.out)
        term.type(b"q")
        wait_until(lambda: "modes-1" in pane_text(server, pane), 30, message="modes on")
        term.until(lambda: b"\x1b[?1004h" in term.out[mark:]
                   and b"\x1b[>1u" in term.out[mark:])
        mark = len(term.out)
        term.type(b"\x1b[92;5u")
        term.until(lambda: b"\x1b[?1004l" in term.out[mark:] and b"\x1b[<u" in term.out[mark:]
                   and b"q quit" in term.out[mark:])
        term.type(b"\x1b[O")  # focus reports are off now: nothing reaches the program
        # Back to typing: a focus report set by the pane is on again.
        term.type(b"i")
        term.until(lambda: b"\x1b[?1004h" in term.out[mark:])
        # A key typed now reaches the program after anything sent before it would have.
        term.type(b"z")
        wait_until(lambda: "'z'" in pane_text(server, pane), 30, message="a key after")
        assert "92;5u" not in pane_text(server, pane)
        assert "'\\x1b[O'" not in pane_text(server, pane)
    finally:
        term.close()


def test_ui_has_a_terminal_that_loads_files_draw_leased_frames_from_them(
        server: ServerProcess) -> None:
    pane = pane_of(server)

    def info() -> dict[str, Any]:
        """pane.graphics.info; empty while no client that draws graphics is attached."""
        try:
            return server.call("pane.graphics.info", {"pane_id": pane})
        except CmuxError:
            return {}

    plain = client(server, "ui")  # answers the query, loads no file
    try:
        plain.until(lambda: b"q quit" in plain.out and bool(info()))
        assert info()["file_frame_directory"] is None
    finally:
        plain.close()
    term = client(server, "ui", files=True)
    try:
        term.until(lambda: b"q quit" in term.out
                   and info().get("file_frame_directory") is not None)
        folder = Path(info()["file_frame_directory"])
        painter = Client(server.socket_path, timeout=20)  # its stream lives with it
        painter.call("pane.graphics.stream.open", {"pane_id": pane, "owner": "painter"})
        frame = folder / "frame.rgba"
        frame.write_bytes(b"\x10\x20\x30\xff" * 6)
        painter.call("pane.graphics.stream.direct", {
            "pane_id": pane, "owner": "painter", "path": str(frame), "image_width": 3,
            "image_height": 2, "placement": {"viewport_col": 1, "viewport_row": 1}})

        def stored() -> list[tuple[dict[str, str], bytes]]:
            return [(dict(p.split("=", 1) for p in c.decode().split(",")), payload)
                    for c, payload in APC.findall(term.out) if b"a=t" in c]

        term.until(lambda: any(keys.get("t") == "f" for keys, _ in stored()))
        keys, payload = next((k, p) for k, p in stored() if k.get("t") == "f")
        assert (keys["f"], keys["s"], keys["v"], keys["S"]) == ("32", "3", "2", "24")
        assert base64.b64decode(payload).decode() == str(frame)
        image_id = keys["i"]
        term.until(lambda: any(b"a=p" in c and b"i=" + image_id.encode() in c
                               for c, _ in APC.findall(term.out)))
        painter.close()
    finally:
        term.close()


def test_ui_ended_during_a_full_screen_attach_ends_the_attach_first(
        server: ServerProcess) -> None:
    pane = pane_of(server)
    server.call("pane.send_text", {"pane_id": pane, "text": "echo shown-$((6*7))\r"})
    term = client(server, "ui")
    try:
        term.until(lambda: b"q quit" in term.out and term.shows("shown-42"))
        mark = len(term.out)
        term.type(b"\r")  # the full-screen attach takes the terminal
        term.until(lambda: b"\x1b[22;0t" in term.out[mark:]
                   and b"shown-42" in term.out[term.out.index(b"\x1b[22;0t", mark):])
        tasks = Path(f"/proc/{term.proc.pid}/task")  # started from a worker thread
        (child,) = (int(pid) for task in tasks.iterdir()
                    for pid in (task / "children").read_text().split())
        term.proc.send_signal(signal.SIGTERM)
        assert term.exited() == 128 + signal.SIGTERM
        tail = term.out[mark:]
        # The attach gave the terminal back (title popped, main screen), then the ui did.
        popped = tail.index(b"\x1b[23;0t")
        assert b"[terminated]" in tail
        assert tail.rindex(b"\x1b[?1049l") > popped
        assert not Path(f"/proc/{child}").exists() or \
            "zombie" in Path(f"/proc/{child}/status").read_text()
        assert term.restored()
    finally:
        term.close()


def test_keyboard_modes_are_pushed_changed_in_place_and_popped() -> None:
    assert switch_keyboard((True, 1), (False, 0)) == b"\x1b[?1004h\x1b[>1u"
    assert switch_keyboard((True, 3), (True, 1)) == b"\x1b[=3;1u"
    assert switch_keyboard((False, 0), (True, 3)) == b"\x1b[?1004l\x1b[<u"
    assert switch_keyboard((True, 0), (True, 0)) == b""


# -- both ----------------------------------------------------------------------------------


Ready = Callable[..., tuple[Terminal, str]]
CLIENTS = pytest.mark.parametrize("ready", [attach_ready, ui_ready], ids=["attach", "ui"])
"""Each test runs with ``cmux attach`` and with ``cmux ui``."""


@CLIENTS
def test_hung_up_while_its_terminal_stops_reading_exits_promptly(
        server: ServerProcess, ready: Ready) -> None:
    term, pane = ready(server)
    try:
        # The terminal stops reading while the pane floods: the client blocks writing.
        server.call("pane.send_text", {"pane_id": pane, "text": "\r"})
        wchan = Path(f"/proc/{term.proc.pid}/wchan")
        wait_until(lambda: wchan.read_text() in ("n_tty_write", "wait_woken", "tty_write"),
                   30, message="the client blocked writing to its terminal")
        term.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: term.proc.poll() is not None, EXIT_S,
                   message="a hung-up client waits for its terminal")
        assert term.proc.returncode == 128 + signal.SIGHUP
    finally:
        term.close()


@CLIENTS
@pytest.mark.parametrize("controlling", [True, False], ids=["hangup", "eio"])
def test_leaves_quietly_when_its_terminal_closes(
        server: ServerProcess, tmp_path: Path, ready: Ready, controlling: bool) -> None:
    log = tmp_path / "stderr"
    term, pane = ready(server, controlling=controlling, stderr=log)
    try:
        # Closed as a window closes: SIGHUP when it is the controlling terminal, else
        # reads and writes fail (EIO).
        term.close_master()
        status = term.exited()
        assert status == (128 + signal.SIGHUP if controlling else 1)
        assert "Traceback" not in log.read_text()
        assert server.call("pane.get", {"pane_id": pane})["pane"]
    finally:
        term.close()
