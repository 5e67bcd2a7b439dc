"""A pane's screen as the bytes that draw it on a real terminal, and what changed since.

:func:`capture` takes a :class:`ScreenImage` of an emulator: its rows with their SGR
styling, the cursor (position, visibility, DECSCUSR shape), the input modes the program
switched on and the title. A :class:`Painter` turns successive images into escape
sequences for one attached terminal: the first image (and any after :meth:`Painter.reset`
or a change of size) is drawn whole, later ones only where they differ, row by row.

The painted terminal is expected to show nothing else: every frame is wrapped in
synchronized output (mode 2026, ignored by terminals without it), autowrap is switched off,
rows are cut at the viewport's width and rows below it are not drawn. Modes are set on the
painted terminal as the program set them, so it reports mouse, focus and paste the way the
program expects; whoever ends the painting restores the terminal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cmux_core.terminal.emulator import Emulator

SYNC_BEGIN = b"\x1b[?2026h"
SYNC_END = b"\x1b[?2026l"


@dataclass(frozen=True, slots=True)
class InputModes:
    """The modes that decide what a terminal sends for keys, paste, mouse and focus."""

    bracketed_paste: bool = False
    app_cursor: bool = False
    app_keypad: bool = False
    focus_reporting: bool = False
    mouse_tracking: int = 0
    mouse_sgr: bool = False
    kitty_flags: int = 0


@dataclass(frozen=True, slots=True)
class ScreenImage:
    """One moment of a screen. ``rows`` are self-contained SGR-styled strings (see
    :class:`~cmux_core.terminal.emulator.Row`), ``cursor`` is ``(column, row)``,
    zero-based, ``cursor_shape`` a DECSCUSR value (0 = the terminal's default)."""

    columns: int
    lines: int
    rows: tuple[str, ...]
    cursor: tuple[int, int]
    cursor_visible: bool
    cursor_shape: int
    modes: InputModes
    title: str | None


def capture(emulator: Emulator) -> ScreenImage:
    """The emulator's screen as it is now."""
    m = emulator.modes
    return ScreenImage(
        emulator.columns, emulator.lines,
        tuple(row.ansi for row in emulator.visible_rows(styled=True)),
        emulator.cursor(), m.cursor_visible, m.cursor_shape,
        InputModes(m.bracketed_paste, m.app_cursor, m.app_keypad, m.focus_reporting,
                   m.mouse_tracking, m.mouse_sgr, m.kitty_flags),
        emulator.title)


_SEQUENCE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


def clip(row: str, columns: int) -> str:
    """``row`` (styled text) cut after ``columns`` cells, its escape sequences kept; a wide
    character that would straddle the edge is left out."""
    out: list[str] = []
    used = 0
    pos = 0
    for match in _SEQUENCE.finditer(row):
        used = _take(row[pos:match.start()], columns, used, out)
        out.append(match.group())
        pos = match.end()
    _take(row[pos:], columns, used, out)
    return "".join(out)


def _take(text: str, columns: int, used: int, out: list[str]) -> int:
    if used >= columns or not text:
        return used
    if text.isascii() and used + len(text) <= columns:
        out.append(text)
        return used + len(text)
    # Here, not at the top: the width tables cost megabytes and only wide text needs them.
    from cmux_core.terminal.pyte.cells import char_width

    kept = []
    for char in text:
        width = char_width(char)
        if used + width > columns:
            used = columns
            break
        kept.append(char)
        used += max(width, 0)
    out.append("".join(kept))
    return used


def _flag(mode: int, on: bool) -> bytes:
    return b"\x1b[?%d%c" % (mode, 104 if on else 108)  # h / l


def modes_bytes(new: InputModes, old: InputModes | None) -> bytes:
    """Sequences that switch a terminal in ``old`` modes (None: unknown) to ``new``."""
    out = bytearray()
    if old is None or new.bracketed_paste != old.bracketed_paste:
        out += _flag(2004, new.bracketed_paste)
    if old is None or new.app_cursor != old.app_cursor:
        out += _flag(1, new.app_cursor)
    if old is None or new.app_keypad != old.app_keypad:
        out += b"\x1b=" if new.app_keypad else b"\x1b>"
    if old is None or new.focus_reporting != old.focus_reporting:
        out += _flag(1004, new.focus_reporting)
    if old is None or new.mouse_tracking != old.mouse_tracking:
        out += b"\x1b[?1000l\x1b[?1002l\x1b[?1003l"
        if new.mouse_tracking:
            out += _flag(new.mouse_tracking, True)
    if old is None or new.mouse_sgr != old.mouse_sgr:
        out += _flag(1006, new.mouse_sgr)
    if old is None or new.kitty_flags != old.kitty_flags:
        out += b"\x1b[=%d;1u" % new.kitty_flags
    return bytes(out)


def _title(title: str) -> bytes:
    return b"\x1b]2;" + title.encode("utf-8", "replace") + b"\x07"


class Painter:
    """Draws successive :class:`ScreenImage` s of one screen on one terminal.

    ``columns`` x ``lines`` is the painted terminal's size (its viewport): rows below it
    are left out, and a change of viewport (:meth:`set_viewport`) redraws everything.
    Not thread-safe; one painter per attached terminal.
    """

    def __init__(self, columns: int, lines: int) -> None:
        self.columns = max(1, columns)
        self.lines = max(1, lines)
        self._last: ScreenImage | None = None

    def reset(self) -> None:
        """Make the next :meth:`paint` draw the whole screen."""
        self._last = None

    def set_viewport(self, columns: int, lines: int) -> None:
        columns, lines = max(1, columns), max(1, lines)
        if (columns, lines) != (self.columns, self.lines):
            self.columns, self.lines = columns, lines
            self._last = None

    def paint(self, image: ScreenImage) -> bytes:
        """The bytes that bring the terminal from the last painted image to ``image``;
        empty when nothing visible changed."""
        last = self._last
        if last is not None and (last.columns, last.lines) != (image.columns, image.lines):
            last = None
        if last == image:
            return b""
        out = bytearray(SYNC_BEGIN)
        shown = min(image.lines, self.lines)
        narrow = image.columns > self.columns
        if last is None:
            out += b"\x1b[0m\x1b[?7l\x1b[H\x1b[2J"
            for y in range(shown):
                row = image.rows[y]
                if row:
                    out += b"\x1b[%d;1H" % (y + 1)
                    out += (clip(row, self.columns) if narrow else row).encode(
                        "utf-8", "replace")
                    out += b"\x1b[0m"
        else:
            for y in range(shown):
                row = image.rows[y]
                if row != last.rows[y]:
                    out += b"\x1b[%d;1H\x1b[0m\x1b[2K" % (y + 1)
                    out += (clip(row, self.columns) if narrow else row).encode(
                        "utf-8", "replace")
                    out += b"\x1b[0m"
        out += modes_bytes(image.modes, None if last is None else last.modes)
        if image.title is not None and (last is None or image.title != last.title):
            out += _title(image.title)
        if last is None or image.cursor_shape != last.cursor_shape:
            out += b"\x1b[%d q" % image.cursor_shape
        x, y = image.cursor
        inside = y < self.lines and x < self.columns
        if inside:
            out += b"\x1b[%d;%dH" % (y + 1, x + 1)
        out += _flag(25, image.cursor_visible and inside)
        out += SYNC_END
        self._last = image
        return bytes(out)


def redraw(emulator: Emulator, columns: int | None = None, lines: int | None = None) -> bytes:
    """The bytes that draw ``emulator``'s current screen whole on a blank terminal of
    ``columns`` x ``lines`` (default: the screen's own size)."""
    painter = Painter(columns or emulator.columns, lines or emulator.lines)
    return painter.paint(capture(emulator))
