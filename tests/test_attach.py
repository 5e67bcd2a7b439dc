"""``cmux attach`` driven inside a real tmux server, like a person, and the attach frames.

A real ``cmux serve`` runs /bin/sh panes; tmux panes run ``cmux attach`` and the test
types with ``send-keys`` and reads with ``capture-pane``. The pane is checked over the
API too, so "it shows" and "it ran in the pane" are both seen.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import tempfile
from pathlib import Path
from typing import Any

import pytest
from tmux_driver import CMUX, Tmux, have_tmux

from cmux_core.cli.attach import FrameReader, detach_sequences
from cmux_core.client import Client
from cmux_core.terminal.pyte.emulator import PyteEmulator
from cmux_core.testing import ServerProcess, wait_until

pytestmark = pytest.mark.skipif(not have_tmux(), reason="tmux is not installed")


def attach_cmd(server: ServerProcess, *extra: str) -> str:
    return " ".join([CMUX, "attach", "--socket", str(server.socket_path), *extra])


def first_pane(server: ServerProcess) -> str:
    return str(server.call("pane.current")["pane"]["pane_id"])


def pane_text(server: ServerProcess, pane_id: str) -> str:
    return str(server.call("pane.read", {"pane_id": pane_id, "source": "recent"})["read"]["text"])


def _size(server: ServerProcess, pane_id: str) -> tuple[int, int]:
    info = server.call("pane.get", {"pane_id": pane_id})["pane"]
    return int(info["columns"]), int(info["rows"])


def attach(tmux: Tmux, target: str, server: ServerProcess, *extra: str) -> None:
    tmux.type(target, attach_cmd(server, *extra))
    tmux.send(target, "Enter")
    # The pane's prompt replaces the outer shell's screen once the first frame is drawn.
    tmux.wait_for(target, lambda text: "outer$" not in text and "$" in text)


def test_typed_line_runs_in_the_pane_and_shows(server: ServerProcess, tmux: Tmux) -> None:
    pane = first_pane(server)
    outer = tmux.new_session("a", 100, 30)
    attach(tmux, outer, server)
    tmux.type(outer, "echo attach-$((6*7))")
    tmux.send(outer, "Enter")
    tmux.wait_for(outer, lambda text: "attach-42" in text)
    wait_until(lambda: "attach-42" in pane_text(server, pane), timeout=30)


def test_pane_takes_the_attached_terminal_size(server: ServerProcess, tmux: Tmux) -> None:
    outer = tmux.new_session("a", 100, 30)
    columns, lines = tmux.size(outer)
    attach(tmux, outer, server)
    tmux.type(outer, "stty size")
    tmux.send(outer, "Enter")
    tmux.wait_for(outer, lambda text: f"{lines} {columns}" in text)
    tmux.run("resize-window", "-t", "a", "-x", "90", "-y", "25")
    wait_until(lambda: tmux.size(outer) == (90, 25), timeout=30)
    tmux.type(outer, "stty size")
    tmux.send(outer, "Enter")
    tmux.wait_for(outer, lambda text: "25 90" in text)


def test_detach_key_returns_to_the_shell_and_the_pane_lives_on(
        server: ServerProcess, tmux: Tmux) -> None:
    pane = first_pane(server)
    outer = tmux.new_session("a", 100, 30)
    attach(tmux, outer, server)
    wait_until(lambda: _size(server, pane) == tmux.size(outer), timeout=30)
    tmux.send(outer, "C-\\")
    tmux.wait_for(outer, lambda text: "[detached]" in text and "outer$" in text)
    # Back to the size its layout gives it (the server's 80x24 area).
    wait_until(lambda: _size(server, pane) == (80, 24), timeout=30)
    server.call("pane.send_text", {"pane_id": pane, "text": "echo still-$((2+3))\n"})
    wait_until(lambda: "still-5" in pane_text(server, pane), timeout=30)
    # The outer shell is usable again, and the terminal is back on its main screen.
    tmux.type(outer, "echo back-$((1+1))")
    tmux.send(outer, "Enter")
    tmux.wait_for(outer, lambda text: "back-2" in text)
    assert "alternate_on=0" in tmux.run("display-message", "-p", "-t", outer,
                                        "alternate_on=#{alternate_on}")


def test_configured_detach_key(server: ServerProcess, tmux: Tmux) -> None:
    outer = tmux.new_session("a", 100, 30)
    attach(tmux, outer, server, "--detach-key", "ctrl+]")
    tmux.send(outer, "C-]")
    tmux.wait_for(outer, lambda text: "[detached]" in text)


def test_two_clients_see_one_pane_and_the_last_typist_sizes_it(
        server: ServerProcess, tmux: Tmux) -> None:
    big = tmux.new_session("big", 100, 30)
    small = tmux.new_session("small", 70, 20)
    attach(tmux, big, server)
    attach(tmux, small, server)
    for outer in (big, small):
        tmux.type(outer, "stty size")
        tmux.send(outer, "Enter")
        width, height = tmux.size(outer)
        # Both clients show the line, and the pane has the size of the one that typed it.
        for watcher in (big, small):
            tmux.wait_for(watcher, lambda text, w=width, h=height: f"{h} {w}" in text)


def test_read_only_client_watches_but_does_not_type(server: ServerProcess, tmux: Tmux) -> None:
    pane = first_pane(server)
    outer = tmux.new_session("a", 100, 30)
    attach(tmux, outer, server, "--read-only")
    tmux.type(outer, "echo typed-by-watcher")
    tmux.send(outer, "Enter")
    server.call("pane.send_text", {"pane_id": pane, "text": "echo api-$((4*4))\n"})
    tmux.wait_for(outer, lambda text: "api-16" in text)
    assert "typed-by-watcher" not in pane_text(server, pane)
    tmux.send(outer, "C-\\")
    tmux.wait_for(outer, lambda text: "[detached]" in text)
    assert "typed-by-watcher" not in pane_text(server, pane)


def test_attach_starts_a_server_when_none_runs(tmux: Tmux) -> None:
    home = Path(tempfile.mkdtemp(prefix="cmux-t-", dir=tempfile.gettempdir()))
    sock = home / "auto.sock"
    outer = tmux.new_session("a", 100, 30)
    try:
        tmux.type(outer, f"SHELL=/bin/sh PS1='inner$ ' {CMUX} attach --socket {sock}")
        tmux.send(outer, "Enter")
        tmux.wait_for(outer, lambda text: "inner$" in text)
        tmux.type(outer, "echo auto-$((5*5))")
        tmux.send(outer, "Enter")
        tmux.wait_for(outer, lambda text: "auto-25" in text)
        tmux.send(outer, "C-\\")
        tmux.wait_for(outer, lambda text: "[detached]" in text)
        with Client(sock, timeout=10) as c:
            assert c.call("pane.list")["panes"]
    finally:
        with Client(sock, timeout=10) as c:
            c.call("server.stop")
        wait_until(lambda: not sock.exists(), timeout=30)
        shutil.rmtree(home, ignore_errors=True)


# -- the frames themselves ----------------------------------------------------------------


class Attached:
    """A raw ``pane.attach`` connection whose screen frames are replayed into an emulator."""

    def __init__(self, server: ServerProcess, **params: Any) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(server.socket_path))
        self.sock.settimeout(0.2)
        self.frames = FrameReader()
        self.replies: list[dict[str, Any]] = []
        self.ended: str | None = None
        params.setdefault("columns", 80)
        params.setdefault("lines", 24)
        self.screen = PyteEmulator(params["columns"], params["lines"])
        self.send("pane.attach", params, request_id=1)

    def send(self, method: str, params: dict[str, Any] | None = None,
             request_id: object = None) -> None:
        self.sock.sendall(json.dumps({"id": request_id, "method": method,
                                      "params": params or {}}).encode() + b"\n")

    def pump(self) -> None:
        try:
            data = self.sock.recv(1 << 16)
        except TimeoutError:
            return
        for header, payload in self.frames.feed(data):
            if header.get("frame") == "screen":
                self.screen.feed(payload)
            elif header.get("frame") == "end":
                self.ended = str(header["reason"])
            else:
                self.replies.append(header)

    def text(self) -> str:
        self.pump()
        return "\n".join(self.screen.visible_text())

    def close(self) -> None:
        self.sock.close()


def test_screen_frames_redraw_the_pane_exactly(server: ServerProcess) -> None:
    pane = first_pane(server)
    server.call("pane.send_text", {"pane_id": pane, "text":
                                   "printf '\\033[1;31mred\\033[0m \\033[?2004h\\033[5 q'\n"})
    wait_until(lambda: "\nred" in pane_text(server, pane), timeout=30)
    client = Attached(server, pane_id=pane, columns=80, lines=24)
    try:
        wait_until(lambda: "red" in client.text(), timeout=30)
        reply = client.replies[0]
        assert reply["ok"] and reply["result"]["type"] == "pane_attach"
        wait_until(lambda: (client.pump(), client.screen.modes.bracketed_paste)[1], timeout=30)
        assert client.screen.modes.cursor_shape == 5
        server_rows = server.call("pane.read", {"pane_id": pane, "format": "ansi"})
        assert "\x1b[" in server_rows["read"]["text"]
        client.send("attach.input", {"data_base64": base64.b64encode(b"echo b64-ok\r").decode()})
        wait_until(lambda: "b64-ok" in client.text(), timeout=30)
        client.send("attach.detach")
        wait_until(lambda: (client.pump(), client.ended)[1] == "detached", timeout=30)
    finally:
        client.close()


def test_attach_errors_change_nothing(server: ServerProcess) -> None:
    pane = first_pane(server)
    with Client(server.socket_path) as c:
        with pytest.raises(Exception) as excinfo:
            c.call("attach.input", {"data": "x"})
        assert getattr(excinfo.value, "code", "") == "not_attached"
        with pytest.raises(Exception) as excinfo:
            c.call("pane.attach", {"pane_id": "w9:p9", "columns": 80, "lines": 24})
        assert getattr(excinfo.value, "code", "") == "pane_not_found"
        with pytest.raises(Exception) as excinfo:
            c.call("pane.attach", {"pane_id": pane, "columns": 1, "lines": 24})
        assert getattr(excinfo.value, "code", "") == "invalid_params"
        with pytest.raises(Exception) as excinfo:
            c.call("pane.attach", {"pane_id": pane})
        assert getattr(excinfo.value, "code", "") == "invalid_params"
    client = Attached(server, pane_id=pane, read_only=True)
    try:
        wait_until(lambda: client.text().strip(), timeout=30)
        client.send("attach.input", {"data": "echo nope\r"}, request_id=2)
        wait_until(lambda: (client.pump(), len(client.replies) >= 2)[1], timeout=30)
        assert client.replies[1]["error"]["code"] == "read_only"
        client.send("attach.input", {"data": "a", "data_base64": "YQ=="}, request_id=3)
        wait_until(lambda: (client.pump(), len(client.replies) >= 3)[1], timeout=30)
        assert client.replies[2]["error"]["code"] == "invalid_params"
        client.send("pane.attach", {"pane_id": pane, "columns": 80, "lines": 24},
                    request_id=4)
        wait_until(lambda: (client.pump(), len(client.replies) >= 4)[1], timeout=30)
        assert client.replies[3]["error"]["code"] == "already_attached"
    finally:
        client.close()
    assert "nope" not in pane_text(server, pane)


def test_closing_the_pane_ends_the_session(server: ServerProcess) -> None:
    pane = str(server.call("pane.split", {"command": ["/bin/sh"]})["pane"]["pane_id"])
    client = Attached(server, pane_id=pane)
    try:
        wait_until(lambda: client.text().strip(), timeout=30)
        server.call("pane.close", {"pane_id": pane})
        wait_until(lambda: (client.pump(), client.ended)[1] == "pane_closed", timeout=30)
    finally:
        client.close()


def test_detach_sequences() -> None:
    assert detach_sequences("ctrl+\\") == (b"\x1c", b"\x1b[92;5u")
    assert detach_sequences("Ctrl+A")[0] == b"\x01"
    with pytest.raises(ValueError):
        detach_sequences("alt+x")


def test_paste_is_bracketed_when_the_program_asked(server: ServerProcess, tmux: Tmux) -> None:
    outer = tmux.new_session("a", 100, 30)
    attach(tmux, outer, server)
    # The program switches bracketed paste on, then dumps the next 16 bytes it reads.
    tmux.type(outer, "stty raw -echo; printf '\\033[?2004hpaste-%s\\r\\n' ready; "
              "head -c 16 | od -c; stty sane")
    tmux.send(outer, "Enter")
    tmux.wait_for(outer, lambda text: "paste-ready" in text)
    tmux.run("set-buffer", "abcd")
    tmux.run("paste-buffer", "-p", "-t", outer)
    tmux.wait_for(outer, lambda text: "[   2   0   0   ~   a   b   c   d 033   [   2   0   1   ~"
                  in text)


def test_attach_an_agent_by_name_without_resizing_it(server: ServerProcess, tmux: Tmux) -> None:
    pane = str(server.call("pane.split", {"command": ["/bin/sh"]})["pane"]["pane_id"])
    server.call("pane.report_agent", {"pane_id": pane, "source": "test:claude",
                                      "agent": "claude", "state": "idle"})
    before = server.call("pane.get", {"pane_id": pane})["pane"]
    outer = tmux.new_session("a", 100, 30)
    attach(tmux, outer, server, "claude", "--no-resize")
    tmux.type(outer, "echo $CMUX_PANE_ID; stty size")
    tmux.send(outer, "Enter")
    tmux.wait_for(outer, lambda text: f"\n{pane}\n{before['rows']} {before['columns']}" in text)


def test_a_terminated_client_restores_the_terminal(server: ServerProcess, tmux: Tmux) -> None:
    outer = tmux.new_session("a", 100, 30)
    attach(tmux, outer, server)
    shell = int(tmux.run("display-message", "-p", "-t", outer, "#{pane_pid}"))
    children = Path(f"/proc/{shell}/task/{shell}/children").read_text().split()
    assert len(children) == 1
    os.kill(int(children[0]), signal.SIGTERM)
    tmux.wait_for(outer, lambda text: "[terminated]" in text and "outer$" in text)
    assert "alternate_on=0" in tmux.run("display-message", "-p", "-t", outer,
                                        "alternate_on=#{alternate_on}")
    assert server.call("pane.list")["panes"]


def test_an_attached_pane_keeps_its_client_size_through_a_split(server: ServerProcess) -> None:
    pane = first_pane(server)
    client = Attached(server, pane_id=pane, columns=100, lines=30)
    try:
        wait_until(lambda: _size(server, pane) == (100, 30), timeout=30)
        other = str(server.call("pane.split", {"target_pane_id": pane})["pane"]["pane_id"])
        assert _size(server, pane) == (100, 30)
        assert _size(server, other)[0] < 80
    finally:
        client.close()
    wait_until(lambda: _size(server, pane)[0] < 80, timeout=30)


def test_modes_the_program_set_reach_the_terminal_and_are_undone_on_detach(
        server: ServerProcess, tmux: Tmux) -> None:
    outer = tmux.new_session("a", 100, 30)
    attach(tmux, outer, server)

    def flags() -> str:
        return tmux.run("display-message", "-p", "-t", outer, "button=#{mouse_button_flag} "
                        "sgr=#{mouse_sgr_flag} cursor_keys=#{keypad_cursor_flag}").strip()

    tmux.type(outer, "printf '\\033[?1002h\\033[?1006h\\033[?1hmodes-%s\\n' on")
    tmux.send(outer, "Enter")
    tmux.wait_for(outer, lambda text: "modes-on" in text)
    wait_until(lambda: flags() == "button=1 sgr=1 cursor_keys=1", timeout=30)
    tmux.send(outer, "C-\\")
    tmux.wait_for(outer, lambda text: "[detached]" in text)
    assert flags() == "button=0 sgr=0 cursor_keys=0"


def test_a_surface_handle_shows_that_surface_and_read_only_clients_size_the_pane(
        server: ServerProcess) -> None:
    with Client(server.socket_path) as c:
        first = c.call("surface.list")["surfaces"][0]["id"]
        second = c.call("surface.create", {"pane_id": first, "focus": True})["surface_id"]
        assert c.call("surface.current")["surface_id"] == second
        c.call("surface.send_text", {"surface_id": first, "text": "echo on-the-first\n"})
        wait_until(lambda: "on-the-first" in c.call(
            "surface.read_text", {"surface_id": first})["text"], timeout=30)
        def size() -> tuple[int, int]:
            stats = c.call("debug.terminal.render_stats", {"surface_id": first})["stats"]
            return stats["columns"], stats["rows"]

        layout_size = size()
        assert layout_size != (50, 14)
        # Attaching by the first surface's handle shows it, though the second was selected.
        client = Attached(server, pane_id=first, read_only=True, columns=50, lines=14)
        try:
            wait_until(lambda: "on-the-first" in client.text(), timeout=30)
            assert c.call("surface.current")["surface_id"] == first
            # A read-only client that attached last sizes the pane, as any other would.
            wait_until(lambda: size() == (50, 14), timeout=30)
        finally:
            client.close()
        wait_until(lambda: size() == layout_size, timeout=30)
