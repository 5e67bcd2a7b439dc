"""``cmux attach`` draws a pane's graphics layers with the kitty graphics protocol.

``cmux attach`` runs under a pseudo-terminal this test holds the master of, so the test is
the terminal: it answers (or not) the kitty graphics query and reads the APC sequences the
client writes.
"""

from __future__ import annotations

import base64
import os
import tty

import pytest
from pty_terminal import Terminal as PtyTerminal

from cmux_core.cli.kitty import probe, transmit
from cmux_core.testing import ServerProcess

pytestmark = pytest.mark.cmux_server(env={"CMUX_EXPERIMENTAL_KITTY_GRAPHICS": "1"})
"""``server`` (the conftest's) runs with kitty graphics on."""


class Terminal(PtyTerminal):
    """``cmux attach`` on a pty of 24 by 80 cells of 10 by 20 pixels; the test plays the
    terminal emulator, answering the graphics query (or not, without ``kitty``)."""

    def __init__(self, server: ServerProcess, *, kitty: bool) -> None:
        super().__init__(server, "attach", kitty=kitty, size=(24, 80), cell=(10, 20))


def image_bytes(apcs: list[tuple[dict[str, str], bytes]], image_id: str) -> bytes:
    """The image data of the last transmission of ``image_id`` (its chunks joined)."""
    data, collecting = b"", False
    for keys, payload in apcs:
        if keys.get("a") == "T" and keys.get("i") == image_id:
            data, collecting = b"", True
        if collecting:
            data += payload
            if keys.get("m") == "0":
                collecting = False
    return base64.b64decode(data)


def test_attach_draws_layers_in_a_kitty_terminal(server: ServerProcess) -> None:
    pane = str(server.call("pane.current")["pane"]["pane_id"])
    server.call("pane.graphics.set", {
        "pane_id": pane, "format": "bgra", "image_width": 1, "image_height": 1,
        "data_base64": base64.b64encode(b"\x01\x02\x03\xff").decode(),
        "placement": {"viewport_col": 4, "viewport_row": 2, "grid_cols": 3, "grid_rows": 1}})
    term = Terminal(server, kitty=True)
    try:
        term.until(lambda: any(k.get("a") == "T" for k, _ in term.apcs()))
        keys, _ = next((k, p) for k, p in term.apcs() if k.get("a") == "T")
        assert (keys["f"], keys["s"], keys["v"], keys["c"], keys["r"], keys["q"], keys["C"]) \
            == ("32", "1", "1", "3", "1", "2", "1")
        image_id = keys["i"]
        assert image_bytes(term.apcs(), image_id) == b"\x03\x02\x01\xff"  # bgra sent as rgba
        assert b"\x1b7\x1b[3;5H\x1b_G" in term.out  # at the layer's cell, cursor saved
        info = server.call("pane.graphics.info", {"pane_id": pane})
        assert (info["cell_width_px"], info["cell_height_px"]) == (10, 20)

        big = bytes(range(256)) * 48  # 64x64 rgb: several chunks
        server.call("pane.graphics.set", {
            "pane_id": pane, "format": "rgb", "image_width": 64, "image_height": 64,
            "data_base64": base64.b64encode(big).decode()})
        term.until(lambda: sum(k.get("a") == "T" for k, _ in term.apcs()) >= 2)
        term.until(lambda: image_bytes(term.apcs(), image_id) == big)
        server.call("pane.graphics.clear", {"pane_id": pane})
        term.until(lambda: any(k.get("a") == "d" and k.get("i") == image_id
                               for k, _ in term.apcs()))
        server.call("pane.graphics.set", {"pane_id": pane, "layer_id": "second",
                                          "format": "rgb", "image_width": 1,
                                          "image_height": 1, "data_base64": "AAAA"})
        term.until(lambda: sum(k.get("a") == "T" for k, _ in term.apcs()) >= 3)
        second = [k for k, _ in term.apcs() if k.get("a") == "T"][-1]["i"]
        before = len(term.apcs())
        term.type(b"\x1c")  # ctrl+\ detaches
        term.exited()
        assert any(k.get("a") == "d" and k.get("i") == second for k, _ in term.apcs()[before:])
    finally:
        term.close()
    assert transmit(7, {"format": "png", "placement": {}}, b"x").count(b"\x1b_G") == 1


def test_attach_without_kitty_graphics_draws_nothing(server: ServerProcess) -> None:
    pane = str(server.call("pane.current")["pane"]["pane_id"])
    term = Terminal(server, kitty=False)
    try:
        term.until(lambda: term.answered)
        server.call("pane.send_text", {"pane_id": pane, "text": "echo marker-$((6*7))\r"})
        server.call("pane.graphics.set", {"pane_id": pane, "format": "rgb", "image_width": 1,
                                          "image_height": 1, "data_base64": "AAAA"})
        term.until(lambda: term.shows("marker-42"))
        term.quiet(1.0)  # room for frames that must not come
        assert [k for k, _ in term.apcs() if k.get("a") != "q"] == []
        reply = server.call("pane.graphics.layers", {"pane_id": pane})
        assert reply["layers"][0]["frames"] == 1
        with pytest.raises(Exception, match="cell_size_unavailable"):
            server.call("pane.graphics.info", {"pane_id": pane})
    finally:
        term.close()


def test_the_probe_reads_replies_that_came_before_it_looked() -> None:
    """A client a loaded machine holds back past the probe's deadline still takes the
    replies already waiting (here they are there before it asks, and it may not wait)."""
    master, slave = os.openpty()
    try:
        tty.setraw(slave)
        os.write(master, b"\x1b_Gi=31;OK\x1b\\\x1b[6;20;10t\x1b[?62;22cx")
        found = probe(slave, slave, timeout=0)
        assert found.graphics and found.cell == (10, 20) and found.typed == b"x"
    finally:
        os.close(master)
        os.close(slave)
