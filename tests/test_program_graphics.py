"""Images a program in a pane draws with the kitty graphics protocol become layers of the
pane, answered as a kitty terminal answers, and reach attached kitty-capable clients.

Each test runs a real Python program in a real pane's shell that writes kitty graphics
commands to its terminal and, where it asks for replies, reads them from its stdin (not
echoed), printing them as text the test reads back from the screen.
"""

from __future__ import annotations

import base64
import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_graphics import png
from test_graphics_attach import Terminal, image_bytes

from cmux_core.cli.kitty import FIRST_ID
from cmux_core.errors import CmuxError
from cmux_core.terminal.pyte.emulator import PyteEmulator
from cmux_core.testing import ServerProcess, start_server, wait_until

PRELUDE = r'''
import atexit, base64, os, select, sys, termios, zlib

# Replies may come before the program reads them: from the start, input is not echoed and
# not held for a line, and nothing typed is flushed (as tty.setraw's TCSAFLUSH would).
_saved = termios.tcgetattr(0)
_mode = termios.tcgetattr(0)
_mode[3] &= ~(termios.ICANON | termios.ECHO)
termios.tcsetattr(0, termios.TCSANOW, _mode)
atexit.register(termios.tcsetattr, 0, termios.TCSANOW, _saved)

def apc(control, payload=b""):
    os.write(1, b"\x1b_G" + control.encode() + (b";" + payload if payload else b"") + b"\x1b\\")

def send(control, data=b""):
    apc(control, base64.b64encode(data))

def chunked(control, data, size=4096):
    encoded = base64.b64encode(data)
    parts = [encoded[i:i + size] for i in range(0, len(encoded), size)]
    for n, part in enumerate(parts):
        more = 1 if n < len(parts) - 1 else 0
        apc((control + "," if n == 0 else "") + f"m={more}", part)

def replies(count, timeout=10.0):
    """Read ``count`` graphics replies (or until ``timeout``) and print them as text."""
    data = b""
    while data.count(b"\x1b\\") < count:
        ready, _, _ = select.select([0], [], [], timeout)
        if not ready:
            break
        data += os.read(0, 4096)
    for found in data.split(b"\x1b\\"):
        if found.startswith(b"\x1b_G"):
            print("REPLY", found[3:].decode())
    if data.count(b"\x1b\\") < count:
        print("NO-MORE-REPLIES")
'''

_token = itertools.count(1)


@pytest.fixture(params=["ghostty", "pyte"])
def server(request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    """A server with pane graphics on, for each emulator backend (the commands are taken
    out before either sees them, but cursors, scrolling and screens are theirs)."""
    with start_server(["--emulator", request.param],
                      env={"CMUX_EXPERIMENTAL_KITTY_GRAPHICS": "1"}) as srv:
        yield srv


def focused(server: ServerProcess) -> str:
    return str(server.call("pane.current")["pane"]["pane_id"])


def screen(server: ServerProcess, pane: str) -> list[str]:
    text = server.call("pane.read", {"pane_id": pane, "source": "visible"})["read"]["text"]
    return str(text).split("\n")


def run(server: ServerProcess, pane: str, body: str) -> list[str]:
    """Run ``body`` (after :data:`PRELUDE`) as a program in the pane's shell; returns the
    screen once it has finished."""
    token = next(_token)
    path = Path(server.home) / f"prog{token}.py"
    path.write_text(PRELUDE + body + f"\nprint('DONE-' + str({token} * 1000))\n")
    server.call("pane.send_text", {"pane_id": pane, "text": f"python3 {path}\r"})
    done = f"DONE-{token * 1000}"
    wait_until(lambda: any(done in line for line in screen(server, pane)),
               timeout=30, message=done)
    return screen(server, pane)


def layers(server: ServerProcess, pane: str) -> dict[str, dict[str, Any]]:
    reply = server.call("pane.graphics.layers", {"pane_id": pane})
    return {layer["layer_id"]: layer for layer in reply["layers"]}


def cell_size_known(server: ServerProcess, pane: str) -> bool:
    try:
        server.call("pane.graphics.info", {"pane_id": pane})
    except CmuxError:
        return False
    return True


def replies_in(lines: list[str]) -> list[str]:
    # A line may start with the shell's prompt, which can come after the typed command.
    return [line.partition("REPLY ")[2] for line in lines if "REPLY " in line]


def rgba(width: int, height: int) -> bytes:
    return bytes(range(256)) * (width * height * 4 // 256) + bytes(width * height * 4 % 256)


def test_query_is_answered_like_a_kitty_terminal(server: ServerProcess) -> None:
    pane = focused(server)
    lines = run(server, pane, r'''
apc("i=31,s=1,v=1,a=q,t=d,f=24", b"AAAA")
apc("i=32,s=2,v=2,a=q,t=d,f=24", b"AAAA")
replies(2)
''')
    assert replies_in(lines) == ["i=31;OK", "i=32;ENODATA:rgb data of 2x2 must be 12 bytes, "
                                 "not 3"]
    assert layers(server, pane) == {}  # a query stores and shows nothing


def test_query_gets_no_answer_when_graphics_are_off() -> None:
    srv = start_server()
    try:
        lines = run(srv, focused(srv), r'''
apc("i=31,s=1,v=1,a=q,t=d,f=24", b"AAAA")
replies(1, timeout=1.5)
''')
        assert replies_in(lines) == [] and "NO-MORE-REPLIES" in lines
    finally:
        srv.stop()


def test_png_shown_at_the_cursor_and_the_cursor_moves_past_it(server: ServerProcess) -> None:
    pane = focused(server)
    lines = run(server, pane, r'''
sys.stdout.write("\x1b[2J\x1b[5;3H"); sys.stdout.flush()
send("a=T,f=100,i=5,c=4,r=3", PNG)
sys.stdout.write("X\r\n"); sys.stdout.flush()
replies(1)
'''.replace("PNG", repr(png(2, 1))))
    assert replies_in(lines) == ["i=5;OK"]
    assert lines[6][6] == "X"  # cursor was at row 4 (0-based), col 2: down 2, right 4
    layer = layers(server, pane)["program:5"]
    assert (layer["format"], layer["image_width"], layer["image_height"], layer["owner"]) \
        == ("png", 2, 1, "program")
    assert layer["placement"] == {"viewport_col": 2, "viewport_row": 4, "grid_cols": 4,
                                  "grid_rows": 3}


def test_chunked_compressed_rgba_put_twice_and_deleted(server: ServerProcess) -> None:
    pane = focused(server)
    data = rgba(64, 64)
    run(server, pane, r'''
sys.stdout.write("\x1b[2J\x1b[H"); sys.stdout.flush()
chunked("a=t,f=32,s=64,v=64,o=z,i=7,q=1", zlib.compress(DATA))
apc("a=p,i=7,p=1,C=1,q=1")
sys.stdout.write("\x1b[10;20H"); sys.stdout.flush()
apc("a=p,i=7,p=2,c=2,r=2,q=1")
'''.replace("DATA", repr(data)))
    found = layers(server, pane)
    assert set(found) == {"program:7:1", "program:7:2"}
    assert found["program:7:1"]["bytes"] == len(data) == 64 * 64 * 4
    assert found["program:7:1"]["placement"]["viewport_row"] == 0
    assert found["program:7:2"]["placement"] == {"viewport_col": 19, "viewport_row": 9,
                                                 "grid_cols": 2, "grid_rows": 2}
    run(server, pane, 'apc("a=d,d=i,i=7,p=1")')
    assert set(layers(server, pane)) == {"program:7:2"}
    lines = run(server, pane, r'''
apc("a=d,d=I,i=7")
apc("a=p,i=7,p=3")
replies(1)
''')
    assert layers(server, pane) == {}
    assert replies_in(lines) == ["i=7,p=3;ENOENT:no image with id 7"], lines  # data gone


def test_clearing_the_screen_removes_program_images(server: ServerProcess) -> None:
    pane = focused(server)
    run(server, pane, 'send("a=T,f=24,s=1,v=1,i=3,q=1", b"abc")')
    assert "program:3" in layers(server, pane)
    run(server, pane, 'sys.stdout.write("\\x1b[2J"); sys.stdout.flush()')
    assert layers(server, pane) == {}
    # Still stored: placed again on the alternate screen, until the program leaves it.
    run(server, pane, r'''
sys.stdout.write("\x1b[?1049h"); sys.stdout.flush()
apc("a=p,i=3,q=1")
''')
    assert "program:3" in layers(server, pane)
    run(server, pane, 'sys.stdout.write("\\x1b[?1049l"); sys.stdout.flush()')
    assert layers(server, pane) == {}


def test_images_move_up_as_the_screen_scrolls_and_go_once_off(server: ServerProcess) -> None:
    pane = focused(server)
    run(server, pane, r'''
sys.stdout.write("\n" * 30); sys.stdout.flush()
sys.stdout.write("\x1b[20;1H"); sys.stdout.flush()
send("a=T,f=24,s=1,v=1,i=4,r=2,C=1,q=1", b"abc")
sys.stdout.write("\x1b[24;1H" + "\n" * 5); sys.stdout.flush()
''')
    # Placed on row 19; five lines scrolled, then the script's DONE line and the prompt.
    layer = layers(server, pane)["program:4"]
    assert 10 <= layer["placement"]["viewport_row"] <= 14
    assert (layer["frames"], layer["revision"] > 1) == (1, True)  # moved, not redrawn
    run(server, pane, 'sys.stdout.write("\\n" * 30); sys.stdout.flush()')
    assert layers(server, pane) == {}


PLACE_AND_SCROLL = r"""
sys.stdout.write("\x1b[20;1H"); sys.stdout.flush()
send("a=T,f=24,s=1,v=1,i=4,r=2,C=1,q=1", b"abc")
sys.stdout.write("\x1b[24;1H" + SCROLL); sys.stdout.flush()
sys.stdout.write("\x1b[H"); sys.stdout.flush()  # DONE and the prompt scroll nothing
"""


def placed_row(server: ServerProcess, pane: str) -> int:
    return int(layers(server, pane)["program:4"]["placement"]["viewport_row"])


@pytest.mark.parametrize("backend", ["ghostty", "pyte"])
def test_images_follow_scrolling_once_the_scrollback_is_full(
        backend: str, tmp_path: Path) -> None:
    """History stops growing once the scrollback holds its limit; images still move."""
    (tmp_path / "cmux").mkdir()
    (tmp_path / "cmux" / "config.toml").write_text("[server]\nscrollback_lines = 5\n")
    srv = start_server(["--emulator", backend], env={
        "CMUX_EXPERIMENTAL_KITTY_GRAPHICS": "1", "XDG_CONFIG_HOME": str(tmp_path)})
    try:
        pane = focused(srv)
        fill = 'sys.stdout.write("x\\n" * 20000); sys.stdout.flush()\n'
        run(srv, pane, fill + PLACE_AND_SCROLL.replace("SCROLL", '"\\n" * 5'))
        assert placed_row(srv, pane) == 14
        run(srv, pane, 'sys.stdout.write("\\x1b[24;1H" + "\\n" * 7); sys.stdout.flush()\n'
            'sys.stdout.write("\\x1b[H"); sys.stdout.flush()')
        assert placed_row(srv, pane) == 7
        run(srv, pane, 'sys.stdout.write("\\x1b[24;1H" + "\\n" * 9); sys.stdout.flush()')
        assert layers(srv, pane) == {}  # its last row went off the top
    finally:
        srv.stop()


def test_images_follow_scrolling_on_the_alternate_screen() -> None:
    """The alternate screen has no history: with pyte its scrolls still move images
    (libghostty keeps no count of them, see docs/graphics.md)."""
    server = start_server(["--emulator", "pyte"], env={"CMUX_EXPERIMENTAL_KITTY_GRAPHICS": "1"})
    try:
        pane = focused(server)
        run(server, pane, 'sys.stdout.write("\\x1b[?1049h"); sys.stdout.flush()\n'
            + PLACE_AND_SCROLL.replace("SCROLL", '"\\n" * 5'))
        assert placed_row(server, pane) == 14
        run(server, pane, 'sys.stdout.write("\\x1b[24;1H" + "\\n" * 16); sys.stdout.flush()')
        assert layers(server, pane) == {}
        run(server, pane, 'sys.stdout.write("\\x1b[?1049l"); sys.stdout.flush()')
    finally:
        server.stop()


def test_scroll_regions_smaller_than_the_screen_move_no_images(server: ServerProcess) -> None:
    pane = focused(server)
    run(server, pane, 'sys.stdout.write("\\x1b[2J"); sys.stdout.flush()\n' + PLACE_AND_SCROLL
        .replace("SCROLL", '"\\x1b[2;23r\\x1b[23;1H" + "\\n" * 3 + "\\x1b[2S\\x1b[r"'))
    assert placed_row(server, pane) == 19


def test_the_emulator_counts_whole_screen_scrolls() -> None:
    emulator = PyteEmulator(20, 5, scrollback_lines=3)
    emulator.feed(b"x\r\n" * 4)  # row 4: nothing scrolled yet
    assert emulator.scrolled == 0
    emulator.feed(b"x\r\n" * 100)  # far past the 3 rows of scrollback
    assert emulator.scrolled == 100
    emulator.feed(b"\x1b[5;1H" + b"y" * 45)  # wraps twice at the bottom
    assert emulator.scrolled == 102
    emulator.feed(b"\x1b[2S")
    assert emulator.scrolled == 104
    emulator.feed(b"\x1b[2;5r\x1b[5;1H\n\n\x1b[2S\x1b[r")  # a region short of the top
    assert emulator.scrolled == 104
    emulator.feed(b"\x1b[?1049h")
    for _ in range(3):
        emulator.feed(b"\x1b[5;1H\n\n")
    assert emulator.scrolled == 110
    emulator.feed(b"\x1b[3S")
    assert emulator.scrolled == 113
    emulator.resize(20, 3)  # the cursor's row stays: two rows leave the top
    assert emulator.scrolled == 115
    emulator.feed(b"\x1b[?1049l\x1b[2J\x1b[H\x1b[3J")  # erasing is no scrolling
    assert emulator.scrolled == 115


def test_ghostty_counts_the_rows_the_main_screen_pushes_into_its_scrollback() -> None:
    from cmux_core.terminal.backends import make_emulator

    emulator = make_emulator("ghostty", 20, 5, scrollback_lines=1000)
    emulator.feed(b"x\r\n" * 4)
    assert emulator.scrolled == 0
    emulator.feed(b"x\r\n" * 10 + b"\x1b[5;1H" + b"y" * 45 + b"\x1b[2S")
    assert emulator.scrolled == 14
    emulator.feed(b"\x1b[2;5r\x1b[5;1H\n\n\x1b[r")  # a region short of the top
    assert emulator.scrolled == 14
    emulator.feed(b"\x1b[?1049h\x1b[5;1H\n\n\x1b[?1049l")  # not counted on the alt screen
    assert emulator.scrolled == 14
    emulator.feed(b"\x1b[5;1H")
    emulator.resize(20, 3)  # the cursor's row stays: two rows go into the scrollback
    assert emulator.scrolled == 16


@pytest.mark.parametrize("backend", ["ghostty", "pyte"])
def test_the_count_holds_over_many_slices_into_a_deep_scrollback(backend: str) -> None:
    from cmux_core.terminal.backends import make_emulator

    emulator = make_emulator(backend, 20, 5, scrollback_lines=1000)
    emulator.feed(b"\x1b[5;1H")
    for n in range(1, 41):
        emulator.feed(b"x\r\n" * 50)
        if n % 10 == 0:  # now and then a region scroll, which counts nothing
            emulator.feed(b"\x1b[2;5r\x1b[5;1H\n\n\x1b[r\x1b[5;1H")
        assert emulator.scrolled == 50 * n


def test_limits_and_malformed_commands_answer_errors(server: ServerProcess) -> None:
    pane = focused(server)
    lines = run(server, pane, r'''
for i in range(1, 17):
    send(f"a=T,f=24,s=1,v=1,i={100 + i},C=1,q=1", b"abc")
apc("a=T,f=24,s=1,v=1,i=200", b"not*base64")
apc("a=T,f=24,s=1,v=1,i=201,K=1", b"AAAA")
apc("a=T,f=100,i=202", base64.b64encode(b"not a png at all, really not"))
apc("a=T,f=24,s=1,v=1,i=203,o=z", base64.b64encode(b"garbage"))
apc("a=p,I=9")
apc("a=T,f=24,s=1,v=1,i=117", b"AAAA")
replies(6)
os.write(1, b"\x1b_Ga=T,f=24,s=1,v=1,i=204;AAAA")  # never terminated: ends at the newline
print("\nSTILL-SHOWN")
''')
    assert replies_in(lines) == [
        "i=200;EINVAL:the payload is not valid base64",
        "i=201;EINVAL:unknown control key 'K'",
        "i=202;EBADPNG:not a PNG image",
        "i=203;EINVAL:the zlib data is corrupt",
        "I=9;ENOENT:no image with number 9",
        "i=117;ENOSPC:pane " + pane + " already has 16 layers",
    ]
    assert any("STILL-SHOWN" in line for line in lines)
    assert len(layers(server, pane)) == 16
    assert server.call("ping")["type"] == "pong"


def test_attached_kitty_client_draws_program_images(server: ServerProcess) -> None:
    pane = focused(server)
    term = Terminal(server, kitty=True)
    try:
        term.until(lambda: term.answered)
        wait_until(lambda: cell_size_known(server, pane), timeout=20)
        data = rgba(4, 4)
        run(server, pane, f'send("a=T,f=32,s=4,v=4,i=9,q=1", {data!r})')
        term.until(lambda: any(k.get("a") == "T" for k, _ in term.apcs()))
        drawn = next(k for k, _ in term.apcs() if k.get("a") == "T")
        assert image_bytes(term.apcs(), drawn["i"]) == data
        run(server, pane, 'apc("a=d,d=a")')
        term.until(lambda: any(k.get("a") == "d" and k.get("i") == drawn["i"]
                               for k, _ in term.apcs()))
    finally:
        term.close()


def test_offsets_source_rectangles_and_z_order_reach_kitty_clients(
        server: ServerProcess) -> None:
    pane = focused(server)
    term = Terminal(server, kitty=True)  # cells of 10 by 20 pixels
    try:
        term.until(lambda: term.answered)
        wait_until(lambda: cell_size_known(server, pane), timeout=20)
        data = rgba(40, 30)
        lines = run(server, pane, f"""
sys.stdout.write("\\x1b[2J\\x1b[3;5H"); sys.stdout.flush()
send("a=T,f=32,s=40,v=30,i=11,X=6,Y=15,x=4,y=2,w=20,h=10,z=-3,C=1,q=1", {data!r})
send("a=T,f=32,s=40,v=30,i=12,x=30,y=25,z=2,C=1,q=1", {data!r})
send("a=T,f=32,s=40,v=30,i=13,x=40", {data!r})
replies(1)
""")
        assert replies_in(lines) == ["i=13;EINVAL:source 40,0 is outside the 40x30 image"]
        found = layers(server, pane)
        assert set(found) == {"program:11", "program:12"}
        # The API's placement keeps its four fields; the cells are those of the kitty
        # client: 6 + 20 pixels in cells 10 wide, 15 + 10 in cells 20 high.
        assert found["program:11"]["placement"] == {
            "viewport_col": 4, "viewport_row": 2, "grid_cols": 0, "grid_rows": 0}

        def drawn(image: int) -> dict[str, str] | None:
            for keys, _ in term.apcs():
                if keys.get("a") == "T" and keys.get("i") == str(FIRST_ID + image):
                    return keys
            return None

        term.until(lambda: drawn(0) is not None and drawn(1) is not None)
        first, second = drawn(0), drawn(1)
        assert first is not None and second is not None
        assert {k: first.get(k) for k in ("X", "Y", "x", "y", "w", "h", "z")} == {
            "X": "6", "Y": "15", "x": "4", "y": "2", "w": "20", "h": "10", "z": "-3"}
        # To the image's edges from 30,25: 10 by 5 pixels.
        assert {k: second.get(k) for k in ("X", "Y", "x", "y", "w", "h", "z")} == {
            "X": None, "Y": None, "x": "30", "y": "25", "w": "10", "h": "5", "z": "2"}
        assert image_bytes(term.apcs(), str(FIRST_ID)) == data  # sent whole, shown in part
        # Moved by a scroll, an image keeps its offset, part and order.
        run(server, pane, 'sys.stdout.write("\\x1b[24;1H\\n"); sys.stdout.flush()')
        term.until(lambda: [k.get("y") for k, _ in term.apcs() if k.get("a") in ("T", "p")
                            and k.get("i") == str(FIRST_ID) and k.get("z") == "-3"
                            and k.get("X") == "6" and k.get("x") == "4"] == ["2", "2"])
    finally:
        term.close()


def test_cropping_keeps_the_share_of_a_source_rectangle_and_the_offset() -> None:
    from cmux_core.cli.kitty import Placement as Shown
    from cmux_core.cli.kitty import fit

    header: dict[str, Any] = {
        "image_width": 40, "image_height": 30, "source_px": [4, 2, 20, 10],
        "offset_px": [6, 15], "z": -3,
        "placement": {"viewport_col": 0, "viewport_row": 0, "grid_cols": 0, "grid_rows": 0}}
    cell, area = (10, 20), (0, 0, 80, 24)
    assert fit(header, cell, area) == Shown(0, 0, 0, 0, (4, 2, 20, 10), (6, 15), -3)
    # One column off the left: of the 26 pixels from the cell's corner, 10 go, and with
    # them the offset and the source's first 4 pixels.
    header["placement"] = {"viewport_col": -1, "viewport_row": 0}
    assert fit(header, cell, area) == Shown(0, 0, 0, 0, (8, 2, 16, 10), (0, 15), -3)
    # Cut at the right edge after 14 of its pixels (the offset's 6 first).
    header["placement"] = {"viewport_col": 78, "viewport_row": 23}
    assert fit(header, cell, area) == Shown(23, 78, 0, 0, (4, 2, 14, 5), (6, 15), -3)
    # Scaled to 4 by 2 cells: the source fills them from the offset on; one row off the
    # top leaves the lower 20 of its 25 pixel rows, 8 of the 10 source rows.
    header["placement"] = {"viewport_col": 0, "viewport_row": -1, "grid_cols": 4,
                           "grid_rows": 2}
    assert fit(header, cell, area) == Shown(0, 0, 4, 1, (4, 4, 20, 8), (6, 0), -3)


def test_scanner_finds_sequences_split_across_reads() -> None:
    from cmux_core.graphics.kitty_apc import OutputScanner, reply
    assert reply(31, 0, 0, "OK") == b"\x1b_Gi=31;OK\x1b\\"
    scanner = OutputScanner(max_command=16)
    stream = b"ab\x1b_Ga=T;AA\x1b" + b"\\cd\x1b[2" + b"Jx\x1b_G" + b"A" * 40 + b"\x1b\\y"
    pieces: list[tuple[str, bytes]] = []
    for chunk in (stream[:9], stream[9:14], stream[14:20], stream[20:]):
        for piece in scanner.scan(chunk):
            if pieces and piece.kind == pieces[-1][0] == "text":  # text may come in parts
                pieces[-1] = ("text", pieces[-1][1] + piece.data)
            else:
                pieces.append((piece.kind, piece.data))
    assert pieces == [
        ("text", b"ab"), ("command", b"a=T;AA"), ("text", b"cd\x1b[2J"), ("clear", b""),
        ("text", b"x"), ("too_large", b""), ("text", b"y")]


def test_images_from_files_temporary_files_and_shared_memory(server: ServerProcess) -> None:
    pane = focused(server)
    home = Path(server.home)
    (home / "image.rgb").write_bytes(b"xx" + b"\x01\x02\x03" * 4 + b"yy")
    temp = Path("/tmp") / f"tty-graphics-protocol-{os.getpid()}-{next(_token)}.png"
    temp.write_bytes(png(3, 2))
    shm = f"cmux-test-{os.getpid()}-{next(_token)}"
    Path("/dev/shm", shm).write_bytes(b"\x09" * 16)
    lines = run(server, pane, f'''
send("a=T,t=f,f=24,s=2,v=2,O=2,S=12,i=21,C=1", {str(home / "image.rgb").encode()!r})
send("a=T,t=t,f=100,i=22,C=1", {str(temp).encode()!r})
send("a=T,t=s,f=32,s=2,v=2,i=23,C=1", {shm.encode()!r})
send("a=T,t=f,f=24,s=1,v=1,i=24", b"/nonexistent/image")
send("a=T,t=f,f=24,s=1,v=1,i=25", b"relative/path")
send("a=T,t=s,f=24,s=1,v=1,i=26", b"../etc/passwd")
replies(6)
''')
    assert replies_in(lines) == [
        "i=21;OK", "i=22;OK", "i=23;OK",
        "i=24;EBADF:cannot open /nonexistent/image: No such file or directory",
        "i=25;EINVAL:the file path must be absolute",
        "i=26;EINVAL:'../etc/passwd' is not a shared memory object name"]
    found = layers(server, pane)
    assert (found["program:21"]["bytes"], found["program:22"]["image_width"],
            found["program:23"]["format"]) == (12, 3, "rgba")
    assert not temp.exists() and not Path("/dev/shm", shm).exists()  # removed after reading
    assert (home / "image.rgb").exists()  # a plain file is only read


def test_delete_targets_quiet_replies_and_reset(server: ServerProcess) -> None:
    pane = focused(server)
    lines = run(server, pane, r'''
sys.stdout.write("\x1b[2J"); sys.stdout.flush()
for i, (row, col) in enumerate([(2, 2), (2, 10), (6, 2), (8, 30)], start=31):
    sys.stdout.write(f"\x1b[{row};{col}H"); sys.stdout.flush()
    send(f"a=T,f=24,s=1,v=1,i={i},c=2,r=1,C=1,z={i},q=2", b"abc")
apc("a=T,f=24,s=1,v=1,i=39,q=2", b"!!")     # an error, but q=2: no reply
apc("a=T,f=24,s=1,v=1,i=40,q=1", b"AAAA")   # OK, but q=1: no reply
apc("i=41,a=p")                             # a reply: no image 41
send("a=t,f=24,s=1,v=1,I=77", b"abc")       # by number: the server gives it an id
apc("a=p,I=77,C=1")
replies(3)
''')
    assert replies_in(lines) == ["i=41;ENOENT:no image with id 41",
                                 "i=3221225472,I=77;OK", "i=3221225472,I=77;OK"]
    assert set(layers(server, pane)) == {f"program:{i}" for i in (31, 32, 33, 34, 40,
                                                                  3221225472)}
    run(server, pane, 'apc("a=d,d=N,I=77")')
    run(server, pane, r'''
apc("a=d,d=p,x=11,y=2")   # the cell at column 11, row 2: image 32
apc("a=d,d=x,x=3")        # column 3: images 31 and 33
apc("a=d,d=z,z=34")
''')
    assert set(layers(server, pane)) == {"program:40"}
    run(server, pane, r'''
apc("a=p,i=31,q=1")
sys.stdout.write("\x1bc"); sys.stdout.flush()
''')
    assert layers(server, pane) == {}


def test_the_byte_budget_and_oversized_images_answer_errors(server: ServerProcess) -> None:
    pane = focused(server)
    lines = run(server, pane, r'''
full = zlib.compress(bytes(4096 * 1024 * 4))  # 16 MiB of rgba: the most one image holds
for i in range(61, 66):
    send(f"a=T,f=32,s=4096,v=1024,o=z,i={i},C=1,q=1", full)
send("a=T,f=32,s=4096,v=1025,o=z,i=66,q=1", zlib.compress(bytes(4096 * 1025 * 4)))
replies(2)
''')
    assert replies_in(lines) == [
        "i=65;ENOSPC:the 64 MiB graphics budget is full",
        "i=66;EFBIG:the zlib data is too large or incomplete"]
    assert sorted(layers(server, pane)) == [f"program:{i}" for i in range(61, 65)]


def test_clients_cannot_take_a_program_image_or_its_owner_name(server: ServerProcess) -> None:
    pane = focused(server)
    run(server, pane, r'''
send("a=T,f=100,i=9", PNG)
replies(1)
'''.replace("PNG", repr(png(2, 1))))
    assert "program:9" in layers(server, pane)
    with pytest.raises(CmuxError) as reserved:
        server.call("pane.graphics.stream.open", {"pane_id": pane, "layer_id": "mine",
                                                  "owner": "program"})
    assert reserved.value.code == "invalid_stream" and "reserved" in reserved.value.message
    assert "mine" not in layers(server, pane)
    with pytest.raises(CmuxError) as held:
        server.call("pane.graphics.set", {"pane_id": pane, "layer_id": "program:9",
                                          "format": "png", "image_width": 2,
                                          "image_height": 1, "data_base64": base64.b64encode(
                                              png(2, 1)).decode()})
    assert held.value.code == "stream_conflict" and "program drew" in held.value.message
