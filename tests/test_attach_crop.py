"""``cmux attach`` crops a layer placed partly outside the terminal (a client's, or an
image a program drew that has partly scrolled off the top) and hides one wholly outside,
as ``cmux ui`` does over its pane area, and places layers again on a resize.

The test plays the kitty terminal (``pty_terminal.Terminal``): a pty of 80 by 24 cells of
10 by 20 pixels, answering the graphics query, whose output is read for where each image
is shown.
"""

from __future__ import annotations

import base64
import fcntl
import os
import re
import signal
import struct
import termios
from collections.abc import Iterator

import pytest
from pty_terminal import Terminal
from test_program_graphics import layers, run

from cmux_core.cli.kitty import FIRST_ID
from cmux_core.testing import ServerProcess

SEQUENCE = re.compile(rb"(?:\x1b7\x1b\[(\d+);(\d+)H)?\x1b_G([^;\x1b]*)(?:;[^\x1b]*)?\x1b\\")
TALL = {"format": "rgb", "image_width": 40, "image_height": 60,
        "data_base64": base64.b64encode(bytes(40 * 60 * 3)).decode()}
"""An image 4 cells wide and 3 high at its own size."""

pytestmark = pytest.mark.cmux_server(env={"CMUX_EXPERIMENTAL_KITTY_GRAPHICS": "1"})


@pytest.fixture
def term(server: ServerProcess) -> Iterator[Terminal]:
    t = Terminal(server, "attach", kitty=True, size=(24, 80), cell=(10, 20))
    try:
        t.until(lambda: t.answered)
        yield t
    finally:
        t.close()


def sequences(term: Terminal) -> list[tuple[int, int, dict[str, str]]]:
    """Every kitty graphics sequence the client wrote: the one-based row and column the
    cursor was put at for it (0, 0: not moved) and its keys."""
    term.pump(0)
    return [(int(row or 0), int(col or 0),
             dict(part.split("=", 1) for part in control.decode().split(",")))
            for row, col, control in SEQUENCE.findall(term.out)]


def where(term: Terminal, image_id: str) -> tuple[int, int, dict[str, str]] | None:
    """Where ``image_id`` shows now, by the last sequence that showed or hid it: the row
    and column it was put at and the sequence's keys; None when hidden."""
    found: tuple[int, int, dict[str, str]] | None = None
    for row, col, keys in sequences(term):
        if keys.get("i") != image_id:
            continue  # another image, or a later chunk of one
        if keys.get("a") in ("T", "p"):
            found = row, col, keys
        elif keys.get("a") == "t" or (keys.get("a") == "d" and keys.get("d") in ("i", "I")):
            found = None  # a new image stored unshown replaces the shown one
    return found


def drawn(term: Terminal, image_id: str, row: int, col: int, **keys: str) -> bool:
    """``image_id`` shows at ``row``, ``col`` (one-based) with exactly the size and source
    keys ``keys`` (none: at its own size, whole)."""
    now = where(term, image_id)
    return now is not None and now[:2] == (row, col) \
        and all(now[2].get(k) == v for k, v in keys.items()) \
        and not ({"x", "y", "w", "h", "c", "r"} - set(keys)) & set(now[2])


def count(term: Terminal, image_id: str, action: str) -> int:
    return sum(k.get("a") == action and k.get("i") == image_id for _, _, k in sequences(term))


def image_of(n: int) -> str:
    """The image id of the ``n``-th layer the client drew (zero-based)."""
    return str(FIRST_ID + n)


def pane_of(server: ServerProcess) -> str:
    return str(server.call("pane.current")["pane"]["pane_id"])


def set_layer(server: ServerProcess, pane: str, layer: str, **placement: int) -> None:
    server.call("pane.graphics.set", {"pane_id": pane, "layer_id": layer, **TALL,
                                      "placement": placement})


def resize(term: Terminal, columns: int, lines: int) -> None:
    fcntl.ioctl(term.master, termios.TIOCSWINSZ,
                struct.pack("HHHH", lines, columns, columns * 10, lines * 20))
    os.killpg(term.proc.pid, signal.SIGWINCH)


def test_a_negative_row_and_column_are_cropped_not_pinned(
        server: ServerProcess, term: Terminal) -> None:
    pane = pane_of(server)
    set_layer(server, pane, "a", viewport_col=-1, viewport_row=-2)
    # One cell column and two rows off: the pixels from (10, 40) on, at the top-left cell.
    term.until(lambda: drawn(term, image_of(0), 1, 1, x="10", y="40", w="30", h="20"))
    # Scaled to 4 by 4 cells, one row off the top: the lower 3/4 of the pixels in 3 rows.
    server.call("pane.graphics.set", {
        "pane_id": pane, "layer_id": "b", "format": "rgb", "image_width": 8,
        "image_height": 8, "data_base64": base64.b64encode(bytes(8 * 8 * 3)).decode(),
        "placement": {"viewport_col": 3, "viewport_row": -1, "grid_cols": 4,
                      "grid_rows": 4}})
    term.until(lambda: drawn(term, image_of(1), 1, 4, c="4", r="3", x="0", y="2", w="8",
                             h="6"))


def test_past_the_right_and_bottom_edges_is_cropped(
        server: ServerProcess, term: Terminal) -> None:
    set_layer(server, pane_of(server), "corner", viewport_col=78, viewport_row=23)
    # Two of its four columns and one of its three rows are on the terminal.
    term.until(lambda: drawn(term, image_of(0), 24, 79, x="0", y="0", w="20", h="20"))


def test_a_layer_wholly_outside_is_hidden_until_it_comes_back(
        server: ServerProcess, term: Terminal) -> None:
    pane = pane_of(server)
    image = image_of(0)
    outside = ({"viewport_col": 2, "viewport_row": -3}, {"viewport_col": 80},
               {"viewport_col": 5, "viewport_row": 24}, {"viewport_col": -4})
    for n, placement in enumerate(outside, 1):
        set_layer(server, pane, "off", **placement)
        term.until(lambda n=n: count(term, image, "t") + count(term, image, "T") >= n)
        assert where(term, image) is None, placement
    set_layer(server, pane, "off", viewport_col=5, viewport_row=6)
    term.until(lambda: drawn(term, image, 7, 6))


def test_layers_are_placed_again_when_the_terminal_is_resized(
        server: ServerProcess, term: Terminal) -> None:
    image = image_of(0)
    set_layer(server, pane_of(server), "side", viewport_col=70, viewport_row=20)
    term.until(lambda: drawn(term, image, 21, 71))
    resize(term, 72, 22)  # two of its columns and two of its rows left
    term.until(lambda: drawn(term, image, 21, 71, x="0", y="0", w="20", h="40"))
    resize(term, 60, 24)  # wholly outside
    term.until(lambda: where(term, image) is None)
    resize(term, 80, 24)
    term.until(lambda: drawn(term, image, 21, 71))


def test_a_program_image_scrolled_partly_off_the_top_is_cropped(
        server: ServerProcess, term: Terminal) -> None:
    pane = pane_of(server)
    # One pixel wide, six high, scaled to a cell each; two lines scroll it up, then the
    # program's last line and the shell's prompt may scroll it further.
    run(server, pane, r'''
sys.stdout.write("\x1b[2J\x1b[1;1H"); sys.stdout.flush()
send("a=T,f=24,s=1,v=6,i=5,c=1,r=6,C=1,q=1", bytes(18))
sys.stdout.write("\x1b[24;1H\n\n"); sys.stdout.flush()
''')

    def cropped() -> bool:
        layer = layers(server, pane).get("program:5")
        if layer is None:
            return False
        row = int(layer["placement"]["viewport_row"])
        shown = str(6 + row)
        return row < 0 and drawn(term, image_of(0), 1, 1, c="1", r=shown, x="0",
                                 y=str(-row), w="1", h=shown)

    term.until(cropped)


def test_no_resize_crops_to_the_part_of_the_pane_shown(server: ServerProcess) -> None:
    """A ``--no-resize`` client larger than the pane shows the pane in its top-left corner:
    layers are cropped to the pane's edges there, and follow the pane's size."""
    pane = pane_of(server)
    big = Terminal(server, "attach", "--no-resize", kitty=True, size=(30, 100), cell=(10, 20))
    try:
        big.until(lambda: big.answered)
        image = image_of(0)
        set_layer(server, pane, "edge", viewport_col=78, viewport_row=22)
        # The pane is 80 by 24: two of the four columns and two of the three rows show.
        big.until(lambda: drawn(big, image, 23, 79, x="0", y="0", w="20", h="40"))
        sizing = Terminal(server, "attach", kitty=False, size=(20, 60))
        try:  # the pane takes this client's 60 by 20 cells: the layer is wholly outside
            big.until(lambda: where(big, image) is None)
            set_layer(server, pane, "edge", viewport_col=58, viewport_row=17)
            big.until(lambda: drawn(big, image, 18, 59, x="0", y="0", w="20", h="60"))
        finally:
            sizing.close()
        # Back to 80 by 24 with the last client sizing it gone: all of it shows again.
        big.until(lambda: drawn(big, image, 18, 59))
    finally:
        big.close()
