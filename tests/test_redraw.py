"""The redraw painter: its bytes, fed to a fresh emulator, reproduce the screen they were
made from, whole or as a change, on both backends."""

from __future__ import annotations

import pytest

from cmux_core.terminal.backends import make_emulator
from cmux_core.terminal.emulator import Emulator
from cmux_core.terminal.redraw import InputModes, Painter, capture, modes_bytes, redraw

BACKENDS = ["pyte", "ghostty"]

SCREEN = (b"\x1b[1;31mbold red\x1b[0m plain \x1b[44m on blue \x1b[0m\r\n"
          b"wide \xe4\xb8\xad\xe6\x96\x87 and \xf0\x9f\x99\x82 emoji\r\n"
          + b"0123456789" * 5 + b"\r\n"
          b"\x1b[38;2;10;200;30mtruecolour\x1b[0m \x1b[4munder\x1b[0m \x1b[7mreverse\x1b[0m\r\n"
          b"\x1b[?2004h\x1b[?1002h\x1b[?1006h\x1b[?1h\x1b[3 q\x1b]2;the title\x07\x1b[6;9H")


def emulator(backend: str, columns: int = 30, lines: int = 8) -> Emulator:
    try:
        return make_emulator(backend, columns, lines)
    except Exception as exc:  # the native backend is optional
        pytest.skip(f"{backend} unavailable: {exc}")


def same_screen(a: Emulator, b: Emulator) -> None:
    assert [r.ansi for r in b.visible_rows()] == [r.ansi for r in a.visible_rows()]
    assert b.cursor() == a.cursor()


@pytest.mark.parametrize("backend", BACKENDS)
def test_whole_screen_round_trip(backend: str) -> None:
    source = emulator(backend)
    source.feed(SCREEN)
    copy = emulator(backend)
    copy.feed(redraw(source))
    same_screen(source, copy)
    modes = copy.modes
    assert modes.bracketed_paste and modes.app_cursor and modes.mouse_sgr
    assert modes.mouse_tracking == 1002
    assert modes.cursor_shape == 3
    assert copy.title == "the title"


@pytest.mark.parametrize("backend", BACKENDS)
def test_changes_round_trip_and_touch_only_changed_rows(backend: str) -> None:
    source, copy = emulator(backend), emulator(backend)
    source.feed(SCREEN)
    painter = Painter(30, 8)
    copy.feed(painter.paint(capture(source)))
    assert painter.paint(capture(source)) == b""
    source.feed(b"\x1b[2;1H\x1b[32mgreen\x1b[0m\x1b[?25l\x1b[?2004l\x1b[0 q")
    change = painter.paint(capture(source))
    assert b"\x1b[2J" not in change
    assert change.count(b"\x1b[2K") == 1
    copy.feed(change)
    same_screen(source, copy)
    assert not copy.modes.bracketed_paste and not copy.modes.cursor_visible
    assert copy.modes.cursor_shape == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_smaller_viewport_clips(backend: str) -> None:
    source = emulator(backend, 30, 8)
    source.feed(SCREEN)
    small = emulator(backend, 12, 3)
    small.feed(Painter(12, 3).paint(capture(source)))
    rows = small.visible_text()
    assert rows[0] == "bold red pla"
    assert rows[2] == "012345678901"


def test_modes_only_what_changed() -> None:
    before = InputModes(bracketed_paste=True, mouse_tracking=1000)
    after = InputModes(bracketed_paste=True, mouse_tracking=1003, kitty_flags=1)
    assert modes_bytes(after, before) == b"\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1003h" \
                                         b"\x1b[=1;1u"
    assert modes_bytes(after, after) == b""
