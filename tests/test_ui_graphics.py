"""``cmux ui`` draws the shown pane's graphics layers with the kitty graphics protocol, and
keys typed into the pane follow the modes its program set.

``cmux ui`` runs under a pseudo-terminal this test holds the master of, so the test is the
terminal: it answers (or not) the kitty graphics query, reads the APC sequences and mode
switches the ui writes, and types as a terminal in those modes would.
"""

from __future__ import annotations

import base64
import fcntl
import os
import re
import signal
import struct
import sys
import termios
from collections.abc import Callable
from typing import Any

import pytest
from pty_terminal import APC, Terminal, keys_of

from cmux_core.cli.kitty import FIRST_ID, fit
from cmux_core.cli.ui import mouse_for_pane, switch_modes
from cmux_core.testing import ServerProcess, wait_until

PLACED = re.compile(rb"\x1b7\x1b\[(\d+);(\d+)H\x1b_G([^;\x1b]*)\x1b\\\x1b8")
COLUMNS, LINES = 120, 30
CELL = (10, 20)
SIDEBAR = 36
PIXEL = base64.b64encode(b"\x10\x20\x30").decode()


pytestmark = pytest.mark.cmux_server(env={"CMUX_EXPERIMENTAL_KITTY_GRAPHICS": "1"})
"""``server`` (the conftest's) runs with kitty graphics on."""


def ui(server: ServerProcess, *extra: str, kitty: bool = True) -> Terminal:
    """``cmux ui`` on a pty of ``LINES`` by ``COLUMNS`` cells of ``CELL`` pixels."""
    return Terminal(server, "ui", *extra, kitty=kitty, size=(LINES, COLUMNS), cell=CELL)


def controls(term: Terminal, since: int = 0) -> list[dict[str, str]]:
    """The keys of every kitty graphics sequence written from ``since`` on."""
    return [k for k, _ in term.apcs(since)]


def placements(term: Terminal, since: int = 0) -> list[tuple[int, int, dict[str, str]]]:
    """``(row, column, keys)`` of each image placed (one-based screen cell)."""
    return [(int(row), int(col), keys_of(control))
            for row, col, control in PLACED.findall(term.out[since:])]


def set_layer(server: ServerProcess, pane: str, layer: str = "primary", **placement: int
              ) -> None:
    server.call("pane.graphics.set", {
        "pane_id": pane, "layer_id": layer, "format": "rgb", "image_width": 1,
        "image_height": 1, "data_base64": PIXEL, "placement": placement})


def started(term: Terminal) -> bool:
    return b"q quit" in term.out


def test_ui_places_layers_over_the_pane_area_and_removes_them(
        server: ServerProcess) -> None:
    first = str(server.call("pane.current")["pane"]["pane_id"])
    second = str(server.call("pane.split", {"command": ["/bin/sh"]})["pane"]["pane_id"])
    set_layer(server, first, viewport_col=4, viewport_row=2, grid_cols=3, grid_rows=1)
    term = ui(server)
    try:
        term.until(lambda: started(term) and bool(placements(term)))
        stored = [k for k in controls(term) if k.get("a") == "t"]
        assert stored and stored[0]["i"] == str(FIRST_ID) and stored[0]["f"] == "24"
        image_id = stored[0]["i"]
        # The pane area starts right of the sidebar and its border, below the heading.
        row, col, keys = placements(term)[-1]
        assert (row, col) == (1 + 2 + 1, SIDEBAR + 1 + 4 + 1)
        assert (keys["i"], keys["p"], keys["c"], keys["r"], keys["q"]) \
            == (image_id, "1", "3", "1", "2")
        assert "x" not in keys  # wholly inside: not cropped
        # A layer partly left of the pane is cropped to it: its right half shows.
        mark = len(term.out)
        server.call("pane.graphics.set", {
            "pane_id": first, "layer_id": "wide", "format": "rgb", "image_width": 4,
            "image_height": 1, "data_base64": base64.b64encode(b"\0" * 12).decode(),
            "placement": {"viewport_col": -2, "viewport_row": 0, "grid_cols": 4,
                          "grid_rows": 1}})
        term.until(lambda: any(k.get("c") == "2" for _, _, k in placements(term, mark)))
        row, col, keys = next(p for p in placements(term, mark) if p[2].get("c") == "2")
        assert (row, col) == (2, SIDEBAR + 2)
        assert (keys["x"], keys["y"], keys["w"], keys["h"], keys["r"]) \
            == ("2", "0", "2", "1", "1")
        wide_id = keys["i"]
        # A new image is stored and placed again; a cleared layer is deleted.
        mark = len(term.out)
        set_layer(server, first, viewport_col=5, viewport_row=3)
        term.until(lambda: any(k["i"] == image_id for _, _, k in placements(term, mark)))
        assert [k["i"] for k in controls(term, mark) if k.get("a") == "t"] == [image_id]
        assert (placements(term, mark)[-1][0], placements(term, mark)[-1][1]) \
            == (1 + 3 + 1, SIDEBAR + 1 + 5 + 1)
        mark = len(term.out)
        server.call("pane.graphics.clear", {"pane_id": first, "layer_id": "wide"})
        term.until(lambda: {"a": "d", "d": "I", "i": wide_id, "q": "2"} in controls(term, mark))
        # Another pane shown (tab): the first pane's images are deleted, the other's drawn.
        set_layer(server, second, "other", viewport_col=1, viewport_row=1)
        mark = len(term.out)
        term.type(b"\t")
        term.until(lambda: {"a": "d", "d": "I", "i": image_id, "q": "2"} in controls(term, mark)
                   and bool(placements(term, mark)))
        row, col, _ = placements(term, mark)[-1]
        assert (row, col) == (3, SIDEBAR + 3)
        other_id = placements(term, mark)[-1][2]["i"]
        # Quitting deletes what is shown before the terminal leaves the alternate screen.
        mark = len(term.out)
        term.type(b"q")
        term.exited()
        tail = term.out[mark:]
        deleted = tail.find(b"a=d,d=I,i=" + other_id.encode())
        assert 0 <= deleted < tail.rfind(b"\x1b[?1049l")
        assert term.proc.returncode == 0
    finally:
        term.close()


def test_ui_crops_to_the_area_as_it_changes(server: ServerProcess) -> None:
    pane = str(server.call("pane.current")["pane"]["pane_id"])
    # A layer at the right edge of a 120x30 terminal's pane area (99x28 cells beside a
    # 20-cell sidebar): 3 of its 6 columns are inside.
    set_layer(server, pane, viewport_col=96, viewport_row=20, grid_cols=6, grid_rows=2)
    term = ui(server, "--sidebar-width", "20")
    try:
        term.until(lambda: started(term) and bool(placements(term)))
        row, col, keys = placements(term)[-1]
        assert (row, col) == (1 + 20 + 1, 21 + 96 + 1)
        assert (keys["c"], keys["r"], keys["x"], keys["w"]) == ("3", "2", "0", "1")
        # The terminal shrinks: the layer falls outside the pane area and is hidden.
        mark = len(term.out)
        fcntl.ioctl(term.master, termios.TIOCSWINSZ, struct.pack(
            "HHHH", 20, 90, 900, 400))
        os.killpg(term.proc.pid, signal.SIGWINCH)
        term.until(lambda: {"a": "d", "d": "i", "i": keys["i"], "q": "2"} in controls(term, mark))
        # It grows back: placed again.
        mark = len(term.out)
        fcntl.ioctl(term.master, termios.TIOCSWINSZ, struct.pack(
            "HHHH", LINES, COLUMNS, COLUMNS * CELL[0], LINES * CELL[1]))
        os.killpg(term.proc.pid, signal.SIGWINCH)
        term.until(lambda: bool(placements(term, mark)))
        assert placements(term, mark)[-1][:2] == (22, 118)
    finally:
        term.close()


def test_ui_draws_again_after_a_full_screen_attach(server: ServerProcess) -> None:
    pane = str(server.call("pane.current")["pane"]["pane_id"])
    set_layer(server, pane, viewport_col=2, viewport_row=1)
    term = ui(server)
    try:
        term.until(lambda: started(term) and bool(placements(term)))
        image_id = placements(term)[-1][2]["i"]
        # Enter: the ui deletes its images before the full-screen attach draws its own.
        mark = len(term.out)
        term.type(b"\r")
        term.until(lambda: any(k.get("a") == "T" for k in controls(term, mark)))
        attach_at = term.out.index(b"a=T", mark)
        assert {"a": "d", "d": "I", "i": image_id, "q": "2"} in [
            keys_of(c) for c, _ in APC.findall(term.out[mark:attach_at])]
        # Back in the ui (the attach's detach key): stored and placed again.
        mark = len(term.out)
        term.type(b"\x1c")
        term.until(lambda: b"q quit" in term.out[mark:] and bool(placements(term, mark)))
        assert any(k.get("a") == "t" and k["i"] == image_id for k in controls(term, mark))
        assert placements(term, mark)[-1][:2] == (1 + 1 + 1, SIDEBAR + 1 + 2 + 1)
    finally:
        term.close()


@pytest.mark.cmux_server()
def test_ui_with_graphics_off_on_the_server_draws_nothing(cmux_server: ServerProcess
                                                          ) -> None:
    pane = str(cmux_server.call("pane.current")["pane"]["pane_id"])
    term = ui(cmux_server)
    try:
        term.until(lambda: term.answered and started(term))
        cmux_server.call("pane.send_text", {"pane_id": pane, "text": "echo shown-$((6*7))\n"})
        term.until(lambda: term.shows("shown-42"))
        term.type(b"q")
        term.exited()
        assert term.proc.returncode == 0
        assert [k for k in controls(term) if k.get("a") != "q"] == []
    finally:
        term.close()


def test_ui_without_kitty_graphics_draws_nothing(server: ServerProcess) -> None:
    pane = str(server.call("pane.current")["pane"]["pane_id"])
    set_layer(server, pane, viewport_col=1, viewport_row=1)
    term = ui(server, kitty=False)
    try:
        term.until(lambda: term.answered and started(term))
        server.call("pane.send_text", {"pane_id": pane, "text": "echo marker-$((6*7))\n"})
        set_layer(server, pane, "second")
        term.until(lambda: term.shows("marker-42"))
        term.quiet(1.0)
        assert [k for k in controls(term) if k.get("a") != "q"] == []
        term.type(b"q")
        term.exited()
        assert [k for k in controls(term) if k.get("a") != "q"] == []
        with pytest.raises(Exception, match="cell_size_unavailable"):
            server.call("pane.graphics.info", {"pane_id": pane})
    finally:
        term.close()


KEY_ECHO = r"""
import os, sys, tty
tty.setraw(0)
os.write(1, b"\x1b[?1h\x1b=\x1b[?1002h\x1b[?1006hready\r\n")
while True:
    data = os.read(0, 64)
    os.write(1, (repr(data) + "\r\n").encode())
    if data == b"x":
        os.write(1, b"\x1b[?1l\x1b>\x1b[?1002l\x1b[?1006ldone\r\n")
"""


def test_typing_follows_the_programs_modes(server: ServerProcess, tmp_path: Any) -> None:
    pane = str(server.call("pane.current")["pane"]["pane_id"])
    script = tmp_path / "keys.py"
    script.write_text(KEY_ECHO)
    server.call("pane.send_text", {"pane_id": pane, "text": f"{sys.executable} {script}\n"})

    def shows(text: str) -> Callable[[], bool]:
        return lambda: text in server.call("pane.read", {
            "pane_id": pane, "source": "recent"})["read"]["text"]

    term = ui(server, kitty=False)
    try:
        term.until(lambda: started(term) and term.shows("ready"))
        assert b"\x1b[?1h" not in term.out  # not while keys go to the sidebar
        mark = len(term.out)
        term.type(b"i")
        # Keys go to the pane: the terminal takes the program's cursor, keypad and mouse
        # modes (mouse reports asked for in SGR form, whatever the program wants).
        term.until(lambda: b"\x1b[?1h" in term.out[mark:] and b"\x1b=" in term.out[mark:]
                   and b"\x1b[?1002h\x1b[?1006h" in term.out[mark:])
        term.type(b"\x1bOA")  # up, as a terminal in application cursor mode sends it
        wait_until(shows(r"b'\x1bOA'"), timeout=30)
        term.type(b"\x1bOp")  # keypad 0 in application keypad mode
        wait_until(shows(r"b'\x1bOp'"), timeout=30)
        # A click in the pane area reaches the program in the pane's cells; one on the
        # sidebar does not.
        term.type(b"\x1b[<0;5;5M")
        term.type(b"\x1b[<0;42;4M")
        wait_until(shows(r"b'\x1b[<0;5;3M'"), timeout=30)
        assert not shows(";5;5M")() and not shows(";-")()
        # The program turns its modes off: so does the terminal, while keys still go to it.
        mark = len(term.out)
        term.type(b"x")
        wait_until(shows("done"), timeout=30)
        term.until(lambda: b"\x1b[?1l" in term.out[mark:] and b"\x1b>" in term.out[mark:]
                   and b"\x1b[?1002l" in term.out[mark:])
        term.type(b"\x1b[A")
        wait_until(shows(r"b'\x1b[A'"), timeout=30)
        term.type(b"\x1c")
        term.until(lambda: b"q quit" in term.out[mark:])
    finally:
        term.close()


def test_modes_back_off_when_keys_return_to_the_sidebar(server: ServerProcess,
                                                        tmp_path: Any) -> None:
    pane = str(server.call("pane.current")["pane"]["pane_id"])
    script = tmp_path / "keys.py"
    script.write_text(KEY_ECHO)
    server.call("pane.send_text", {"pane_id": pane, "text": f"{sys.executable} {script}\n"})
    term = ui(server, kitty=False)
    try:
        term.until(lambda: started(term) and term.shows("ready"))
        term.type(b"i")
        term.until(lambda: b"\x1b[?1002h" in term.out)
        mark = len(term.out)
        term.type(b"\x1c")
        term.until(lambda: b"\x1b[?1l" in term.out[mark:] and b"\x1b>" in term.out[mark:]
                   and b"\x1b[?1002l\x1b[?1006l" in term.out[mark:])
        term.type(b"q")
        term.exited()
        assert term.proc.returncode == 0
    finally:
        term.close()


def test_fit_crops_and_skips() -> None:
    header: dict[str, Any] = {"image_width": 100, "image_height": 40}
    area = (37, 1, 20, 10)

    def where(**placement: int) -> Any:
        return fit({**header, "placement": placement}, CELL, area)

    inside = where(viewport_col=2, viewport_row=3, grid_cols=5)
    assert (inside.row, inside.col, inside.cols, inside.rows, inside.source) \
        == (4, 39, 5, 0, None)
    # Own pixel size (10x2 cells): cut at the bottom-right corner, in pixels.
    corner = where(viewport_col=15, viewport_row=9)
    assert (corner.row, corner.col, corner.cols, corner.source) == (10, 52, 0, (0, 0, 50, 20))
    # Scaled: the same share of the pixels as of the cells.
    left = where(viewport_col=-2, viewport_row=-1, grid_cols=10, grid_rows=4)
    assert (left.row, left.col, left.cols, left.rows, left.source) \
        == (1, 37, 8, 3, (20, 10, 80, 30))
    assert where(viewport_col=20) is None and where(viewport_row=-2) is None


def test_mouse_reports_move_into_the_pane() -> None:
    area = (37, 1, 20, 10)
    assert mouse_for_pane("\x1b[<0;40;3M", area, {"mouse_sgr": True}) == "\x1b[<0;3;2M"
    assert mouse_for_pane("\x1b[<0;40;3m", area, {}) == "\x1b[M" + chr(35) + chr(35) + chr(34)
    assert mouse_for_pane("\x1b[<0;30;3M", area, {"mouse_sgr": True}) is None
    assert mouse_for_pane("\x1b[M" + chr(32) + chr(72) + chr(35), area, {"mouse_sgr": True}) \
        == "\x1b[<0;3;2M"
    assert switch_modes((True, False, 1000), (False, False, 0)) \
        == b"\x1b[?1h\x1b[?1000h\x1b[?1006h"
    assert switch_modes((False, False, 0), (True, True, 1003)) \
        == b"\x1b[?1l\x1b>\x1b[?1003l\x1b[?1006l"


def test_ui_draws_a_program_images_offset_source_part_and_order(
        server: ServerProcess) -> None:
    from test_program_graphics import cell_size_known, run

    pane = str(server.call("pane.current")["pane"]["pane_id"])
    term = ui(server)
    try:
        term.until(lambda: started(term) and term.answered)
        wait_until(lambda: cell_size_known(server, pane), timeout=20)
        pixels = bytes(range(256)) * (8 * 6 * 4 // 256) + bytes(8 * 6 * 4 % 256)
        run(server, pane, f"""
sys.stdout.write("\\x1b[2J\\x1b[3;5H"); sys.stdout.flush()
send("a=T,f=32,s=8,v=6,i=21,X=3,Y=7,x=1,y=2,w=5,h=3,z=-2,C=1,q=1", {pixels!r})
""")
        term.until(lambda: any(keys.get("X") == "3" for _, _, keys in placements(term)))
        row, col, keys = next(p for p in placements(term) if p[2].get("X") == "3")
        assert {k: keys.get(k) for k in ("X", "Y", "x", "y", "w", "h", "z")} == {
            "X": "3", "Y": "7", "x": "1", "y": "2", "w": "5", "h": "3", "z": "-2"}
        assert (row, col) == (1 + 2 + 1, SIDEBAR + 1 + 4 + 1)
    finally:
        term.close()
