"""The pyte backend's screen: ``pyte.Screen`` with the fixes and additions it needs.

:class:`Screen` adds an alternate screen, soft-wrap flags, a compact
scrollback of rendered rows, replies to terminal queries, and tmux's behaviour
where pyte's own editing, margins and character widths differ from it.
"""

from __future__ import annotations

import copy
import sys
from collections import defaultdict, deque
from dataclasses import dataclass, fields
from typing import cast

import pyte
from pyte import charsets, modes
from pyte.screens import Char, Margins, Savepoint, StaticDefaultDict

from cmux_core.terminal.emulator import Row, TerminalModes
from cmux_core.terminal.pyte.cells import (
    BLANK,
    DEFAULT_STYLE,
    Line,
    cell_caches,
    cells_for,
    char_width,
    char_widths,
    render_line,
)
from cmux_core.terminal.pyte.pen import Pen

_ROW_OVERHEAD = 64  # a Row object and its deque slot
_CELL_DATA_MAX = 32  # combining characters kept per cell
_KITTY_STACK_MAX = 16
_SGR_CACHE_MAX = 1024
_PRIVATE_MODES = {
    6: modes.DECOM, 7: modes.DECAWM, 25: modes.DECTCEM,
}


@dataclass(slots=True)
class _Stash:
    """The primary screen's state kept aside while the alternate screen is shown."""

    buffer: dict[int, StaticDefaultDict[int, Char]]
    kitty: tuple[int, list[int]]


class Screen(pyte.Screen):
    """pyte's screen with an alternate screen, soft wraps, compact scrollback and replies.

    Scrollback holds rendered :class:`Row` objects (two strings and a flag per
    line), filled only by lines scrolling off the top of the full-screen region
    of the primary screen; ``scrollback_lines`` and ``scrollback_bytes`` bound
    it, oldest first out. Replies for the program accumulate in ``replies``.

    ``scrolled`` counts the rows the whole screen (either one) has moved up since it was
    made: a line feed, index or wrap at the bottom while no scroll region is set (or it
    spans the screen), SU then, and the rows a smaller size pushes off the top. Scrolls
    of a region smaller than the screen are not counted.
    """

    def __init__(
        self, columns: int, lines: int, *, scrollback_lines: int, scrollback_bytes: int
    ) -> None:
        self.modes = TerminalModes()
        self.replies: list[str] = []
        self.history: deque[Row] = deque()
        self.history_bytes = 0
        self.scrolled = 0
        self.scrollback_lines = max(0, scrollback_lines)
        self.scrollback_bytes = max(0, scrollback_bytes)
        self.last_char = ""
        self._joiner_at: tuple[int, int] | None = None
        """Where the cursor stood when a ZWJ arrived: the next character joins the cell
        before it, unless it is ASCII (the joiner is then dropped, as tmux does)."""
        self._stash: _Stash | None = None
        self._saved: list[Savepoint | None] = [None, None]
        self._kitty_stack: list[int] = []
        self._pen = Pen()
        self._attrs_cache: dict[tuple[int, str, str], Char] = {}
        # (pen before, parameters) -> pen after: programs repeat the same few SGR sequences.
        self._sgr_cache: dict[tuple[int, str, str, str], tuple[int, str, str, Char]] = {}
        super().__init__(columns, lines)
        self.buffer = defaultdict(self._new_line)

    # -- structure -------------------------------------------------------------------------

    @property
    def default_char(self) -> Char:
        return BLANK

    def _new_line(self) -> StaticDefaultDict[int, Char]:
        return Line(BLANK)

    @property
    def alternate(self) -> bool:
        return self._stash is not None

    def reset(self) -> None:
        super().reset()
        self._pen.reset()
        self.cursor.attrs = BLANK

    def full_reset(self) -> None:
        """RIS: leave the alternate screen, clear the screen, reset modes; keep scrollback."""
        if self._stash is not None:
            self.leave_alternate(restore_cursor=False)
        self.reset()
        self._saved = [None, None]
        self._kitty_stack = []
        fresh = TerminalModes()
        for mode in fields(TerminalModes):
            setattr(self.modes, mode.name, getattr(fresh, mode.name))

    def resize(self, lines: int | None = None, columns: int | None = None) -> None:
        """Clip or extend; rows that must leave the top of the primary screen go to scrollback."""
        lines = max(1, lines or self.lines)
        columns = max(1, columns or self.columns)
        if lines == self.lines and columns == self.columns:
            return
        buffers = [self.buffer] if self._stash is None else [self.buffer, self._stash.buffer]
        for buffer in buffers:
            if columns < self.columns:
                for line in buffer.values():
                    for x in [x for x in line if x >= columns]:
                        del line[x]
            if lines < self.lines:
                primary = buffer is (self.buffer if self._stash is None else self._stash.buffer)
                cursor_y = self.cursor.y if buffer is self.buffer else self.lines - 1
                # Keep the cursor's row on screen: drop rows from the top only as needed.
                top = max(0, cursor_y + 1 - lines)
                moved = {y - top: line for y, line in buffer.items() if top <= y < top + lines}
                if primary:
                    for y in range(top):
                        self._push_history(buffer.get(y))
                buffer.clear()
                buffer.update(moved)
                if buffer is self.buffer:
                    self.cursor.y -= top
                    self.scrolled += top
        self.tabstops = {x for x in self.tabstops if x < columns}
        self.tabstops.update(range(max(8, self.columns - self.columns % 8), columns, 8))
        self.lines, self.columns = lines, columns
        self.margins = None
        self.cursor.x = min(self.cursor.x, columns - 1)
        self.cursor.y = min(max(0, self.cursor.y), lines - 1)
        self.dirty.update(range(lines))

    # -- scrollback ------------------------------------------------------------------------

    def _push_history(self, line: StaticDefaultDict[int, Char] | None) -> None:
        if self.scrollback_lines:
            self._push_rows([render_line(line, self.columns)])

    def _push_rows(self, rows: list[Row]) -> None:
        """Append rendered rows to scrollback, then drop the oldest beyond either limit."""
        history = self.history
        # Rows beyond the line limit would be evicted at once: skip them (the result is the same).
        if len(rows) > self.scrollback_lines:
            rows = rows[len(rows) - self.scrollback_lines :]
        size = 0
        getsizeof = sys.getsizeof
        for row in rows:
            size += _ROW_OVERHEAD + getsizeof(row.text)
            if row.ansi is not row.text:
                size += getsizeof(row.ansi)
        history.extend(rows)
        self.history_bytes += size
        while history and (
            len(history) > self.scrollback_lines or self.history_bytes > self.scrollback_bytes
        ):
            old = history.popleft()
            self.history_bytes -= _ROW_OVERHEAD + getsizeof(old.text)
            if old.ansi is not old.text:
                self.history_bytes -= getsizeof(old.ansi)

    def clear_history(self) -> None:
        self.history.clear()
        self.history_bytes = 0

    def index(self) -> None:
        """Move down a line, scrolling the region (into scrollback when it is the whole screen)."""
        cursor = self.cursor
        last = self.lines - 1
        top, bottom = (0, last) if self.margins is None else self.margins
        if cursor.y != bottom:
            if cursor.y < last:
                cursor.y += 1
            return
        buffer = self.buffer
        if top == 0 and bottom == last:
            self.scrolled += 1
            if self._stash is None:
                self._push_history(buffer.get(0))
            moved = [(y - 1, line) for y, line in buffer.items() if y]
            buffer.clear()
            buffer.update(moved)
            if len(self.dirty) <= last:
                self.dirty.update(range(self.lines))
            return
        pop = buffer.pop
        for y in range(top, bottom):
            line = pop(y + 1, None)
            if line is None:
                pop(y, None)
            else:
                buffer[y] = line
        self.dirty.update(range(top, bottom + 1))

    def plain_scroll_ready(self) -> bool:
        """Whether :meth:`scroll_plain_lines` may stand in for drawing lines one at a time.

        Only in the state it reproduces: primary screen, no scroll region, cursor at the
        start of an empty bottom row, default pen and character set, insert and origin
        modes off.
        """
        cursor = self.cursor
        last = self.lines - 1
        if cursor.y != last or cursor.x or self._stash is not None:
            return False
        if cursor.attrs is not BLANK or (self.margins is not None and self.margins != (0, last)):
            return False
        if modes.IRM in self.mode or modes.DECOM in self.mode:
            return False
        if (self.g1_charset if self.charset else self.g0_charset) is not charsets.LAT1_MAP:
            return False
        line = self.buffer.get(last)
        return line is None or not (line or getattr(line, "wrapped", False))

    def scroll_plain_lines(self, texts: list[str]) -> None:
        """Draw each text on the bottom row, then CR LF: the effect of a run of plain lines.

        The caller checked :meth:`plain_scroll_ready` and that every text is printable
        ASCII no wider than the screen. The rows scrolled off go to scrollback (texts
        that pass straight through become rows without ever being cells); the last
        ``lines - 1`` of old rows and texts stay on screen and the cursor stays put.
        """
        count = len(texts)
        if not count:
            return
        buffer = self.buffer
        last = self.lines - 1
        old = [buffer.get(y) for y in range(last)]
        passing = max(0, count - last)
        self.scrolled += count
        if self.scrollback_lines:
            rows = [render_line(line, self.columns) for line in old[:count]]
            for text in texts[:passing]:
                text = text.rstrip(" ")
                rows.append(Row(text, text))
            self._push_rows(rows)
        cells = cells_for(DEFAULT_STYLE)
        kept: list[StaticDefaultDict[int, Char] | None] = [*old[count:]]
        for text in texts[passing:]:
            if text:
                line = Line(BLANK)
                line.update(zip(range(len(text)), map(cells.__getitem__, text), strict=False))
                kept.append(line)
            else:
                kept.append(None)
        buffer.clear()
        buffer.update((y, line) for y, line in enumerate(kept) if line is not None)
        for text in reversed(texts):
            if text:
                self.last_char = text[-1]
                break
        self.dirty.update(range(self.lines))

    def scroll_up(self, count: int) -> None:
        """SU: scroll the region up without moving the cursor; nothing enters scrollback."""
        top, bottom = self.margins or Margins(0, self.lines - 1)
        if top == 0 and bottom == self.lines - 1:
            self.scrolled += min(count or 1, self.lines)
        self._shift(top, bottom, count or 1, up=True)

    def scroll_down(self, count: int) -> None:
        """SD: scroll the region down without moving the cursor."""
        top, bottom = self.margins or Margins(0, self.lines - 1)
        self._shift(top, bottom, count or 1, up=False)

    def delete_lines(self, count: int | None = None) -> None:
        """DL: remove lines from the cursor's down, pulling the rest of the region up.

        Nothing happens outside the region; the cursor stays where it is, as in tmux
        (pyte's own version kept lines whose replacement was never written to).
        """
        top, bottom = self.margins or Margins(0, self.lines - 1)
        if top <= self.cursor.y <= bottom:
            self._shift(self.cursor.y, bottom, count or 1, up=True)

    def insert_lines(self, count: int | None = None) -> None:
        """IL: insert blank lines at the cursor, pushing the rest of the region down."""
        top, bottom = self.margins or Margins(0, self.lines - 1)
        if top <= self.cursor.y <= bottom:
            self._shift(self.cursor.y, bottom, count or 1, up=False)

    def _shift(self, top: int, bottom: int, count: int, *, up: bool) -> None:
        """Move lines ``top..bottom`` up (or down) by ``count``; blank lines come in at the
        bottom (or the top)."""
        buffer = self.buffer
        step = min(count, bottom - top + 1) * (1 if up else -1)
        for y in range(top, bottom + 1) if up else range(bottom, top - 1, -1):
            line = buffer.pop(y + step, None) if top <= y + step <= bottom else None
            if line is None:
                buffer.pop(y, None)
            else:
                buffer[y] = line
        self.dirty.update(range(top, bottom + 1))

    def cursor_up(self, count: int | None = None) -> None:
        """CUU (and RI above the region): stop at the top margin only from inside the
        region; pyte's own version pulled a cursor above the region down into it."""
        margins = self.margins
        top = margins.top if margins is not None and self.cursor.y >= margins.top else 0
        self.cursor.y = max(top, self.cursor.y - (count or 1))

    def alignment_display(self) -> None:
        """DECALN: fill the screen with ``E``, drop the scroll region, cursor home."""
        super().alignment_display()
        self.margins = None
        self.cursor.x = self.cursor.y = 0

    def cursor_to_line(self, line: int | None = None) -> None:
        """VPA: in origin mode lines count from the top margin, or from the top of the
        screen when no region is set (pyte's own version failed an assertion then)."""
        self.cursor.y = (line or 1) - 1
        if modes.DECOM in self.mode and self.margins is not None:
            self.cursor.y += self.margins.top
        self.ensure_vbounds()

    def cursor_down(self, count: int | None = None) -> None:
        """CUD: stop at the bottom margin only from inside the region."""
        margins = self.margins
        bottom = (margins.bottom if margins is not None and self.cursor.y <= margins.bottom
                  else self.lines - 1)
        self.cursor.y = min(bottom, self.cursor.y + (count or 1))

    def linefeed(self) -> None:
        self.index()
        if modes.LNM in self.mode:
            self.cursor.x = 0

    def carriage_return_linefeed(self) -> None:
        """CR LF in one call: the most common control pair in program output."""
        self.cursor.x = 0
        self.index()

    def erase_in_line(self, how: int = 0, private: bool = False) -> None:
        cursor = self.cursor
        line = self.buffer[cursor.y]
        if how == 0:
            xs = range(cursor.x, self.columns)
        elif how == 1:
            xs = range(min(cursor.x + 1, self.columns))
        else:
            xs = range(self.columns)
        self._erase(line, xs)
        if how != 1:
            cast(Line, line).wrapped = False
        self.dirty.add(cursor.y)

    def erase_in_display(self, how: int = 0, *args: object, **kwargs: object) -> None:
        """ED; 2 moves the primary screen's content into scrollback first, 3 clears scrollback."""
        if how == 3:
            self.clear_history()
            return
        if how == 0:
            ys = range(self.cursor.y + 1, self.lines)
        elif how == 1:
            ys = range(self.cursor.y)
        else:
            ys = range(self.lines)
            if self._stash is None:
                used = [y for y, line in self.buffer.items() if line and y < self.lines]
                for y in range(max(used) + 1 if used else 0):
                    self._push_history(self.buffer.get(y))
        for y in ys:
            self._erase(self.buffer[y], range(self.columns))
            cast(Line, self.buffer[y]).wrapped = False
        self.dirty.update(ys)
        if how in (0, 1):
            self.erase_in_line(how)

    def _erase(self, line: StaticDefaultDict[int, Char], xs: range) -> None:
        attrs = self.cursor.attrs
        if attrs is BLANK:
            for x in xs:
                line.pop(x, None)
        else:
            for x in xs:
                line[x] = attrs

    # -- alternate screen and saved cursor -------------------------------------------------

    def enter_alternate(self, *, save_cursor: bool) -> None:
        if save_cursor:
            self.save_cursor()
        if self._stash is not None:
            self.buffer.clear()
            return
        self._stash = _Stash(self.buffer, (self.modes.kitty_flags, self._kitty_stack))
        self.buffer = defaultdict(self._new_line)
        self.modes.kitty_flags, self._kitty_stack = 0, []
        self.modes.alt_screen = True
        self.dirty.update(range(self.lines))

    def leave_alternate(self, *, restore_cursor: bool) -> None:
        stash = self._stash
        if stash is not None:
            self.buffer = stash.buffer
            self.modes.kitty_flags, self._kitty_stack = stash.kitty
            self._stash = None
            self.modes.alt_screen = False
            self.dirty.update(range(self.lines))
        if restore_cursor:
            self.restore_cursor()

    def save_cursor(self) -> None:
        """DECSC: one slot per screen (a stack would grow without bound)."""
        self._saved[self.alternate] = Savepoint(
            copy.copy(self.cursor), self.g0_charset, self.g1_charset, self.charset,
            modes.DECOM in self.mode, modes.DECAWM in self.mode,
        )

    def restore_cursor(self) -> None:
        saved = self._saved[self.alternate]
        if saved is None:
            self.mode.discard(modes.DECOM)
            self.cursor_position()
            return
        self.g0_charset, self.g1_charset, self.charset = (
            saved.g0_charset, saved.g1_charset, saved.charset,
        )
        # Origin mode comes back; autowrap is a mode of its own, which DECRC leaves
        # alone (as in tmux and xterm).
        if saved.origin:
            self.mode.add(modes.DECOM)
        else:
            self.mode.discard(modes.DECOM)
        self.cursor = copy.copy(saved.cursor)
        self.cursor.x = min(self.cursor.x, self.columns - 1)
        self.cursor.y = min(self.cursor.y, self.lines - 1)
        self._set_attrs_from(self.cursor.attrs)

    # -- drawing ---------------------------------------------------------------------------

    def draw(self, data: str) -> None:
        """Print text (no control characters) at the cursor, wrapping when DECAWM is on.

        Zero-width characters (combining marks, U+FE0F, U+200D) join the previous
        cell instead of ending the run as pyte's own ``draw`` does.
        """
        table = self.g1_charset if self.charset else self.g0_charset
        if table is not charsets.LAT1_MAP:
            data = data.translate(table)
        if not data:
            return
        self.last_char = data[-1]
        if modes.IRM in self.mode:
            self._draw_mixed(data, char_widths(data))
            return
        if not data.isascii():
            widths = char_widths(data)
            # The mixed path also joins a character to a ZWJ left pending before it.
            if min(widths) != 1 or max(widths) != 1 or self._joiner_at is not None:
                self._draw_mixed(data, widths)
                return
        self._joiner_at = None
        cursor = self.cursor
        x = cursor.x
        end = x + len(data)
        if end > self.columns:
            self._draw_narrow(data)
            return
        # The common case, kept inline: single-width text that fits on the cursor's row.
        style = cursor.attrs.fg
        cells = cell_caches.get(style) or cells_for(style)
        line = self.buffer[cursor.y]
        # Only a cell already at either edge of the run can be half of a wide character.
        if line and (x in line or end in line):
            self._split_wide(line, x, end)
        line.update(zip(range(x, end), map(cells.__getitem__, data), strict=False))
        cursor.x = end
        self.dirty.add(cursor.y)
        if end == self.columns:
            self._hold_at_margin()

    def _hold_at_margin(self) -> None:
        """Without autowrap the cursor stays on the last column after printing there
        (with it, it waits past the margin for the next character to wrap)."""
        if modes.DECAWM not in self.mode:
            self.cursor.x = min(self.cursor.x, self.columns - 1)

    def _draw_narrow(self, data: str) -> None:
        """Draw a run of single-width characters, one line segment at a time."""
        cursor = self.cursor
        cells = cells_for(cursor.attrs.fg)
        buffer = self.buffer
        n = len(data)
        columns = self.columns
        autowrap = modes.DECAWM in self.mode
        i = 0
        while i < n:
            x = cursor.x
            if x >= columns:
                if autowrap:
                    cast(Line, buffer[cursor.y]).wrapped = True
                    cursor.x = x = 0
                    self.index()
                else:
                    x = columns - 1
                    i = n - 1
            take = min(n - i, columns - x)
            line = buffer[cursor.y]
            self._split_wide(line, x, x + take)
            chunk = map(cells.__getitem__, data[i : i + take])
            line.update(zip(range(x, x + take), chunk, strict=False))
            cursor.x = x + take
            i += take
        self.dirty.add(cursor.y)
        self._hold_at_margin()

    def insert_characters(self, count: int | None = None) -> None:
        """ICH: shift the rest of the row right; what passes the margin is gone.

        pyte's own version kept a cell past the margin, which DCH then pulled back.
        Nothing happens with the cursor waiting past the margin (as in tmux).
        """
        start, columns = self.cursor.x, self.columns
        if start >= columns:
            return
        count = min(count or 1, columns - start)
        line = self.buffer[self.cursor.y]
        self._split_wide(line, start, start)
        for x in range(columns - 1, start - 1, -1):
            source = x - count
            if source >= start and source in line:
                line[x] = line[source]
            else:
                line.pop(x, None)
        last = line.get(columns - 1)
        if last is not None and last.data and char_width(last.data[0]) == 2:
            line[columns - 1] = last._replace(data=" ")  # its second half was pushed off
        self.dirty.add(self.cursor.y)

    def delete_characters(self, count: int | None = None) -> None:
        """DCH: pull the rest of the row left; blanks come in at the margin."""
        start, columns = self.cursor.x, self.columns
        if start >= columns:
            return
        count = min(count or 1, columns - start)
        line = self.buffer[self.cursor.y]
        self._split_wide(line, start, start + count)
        for x in range(start, columns):
            source = x + count
            if source < columns and source in line:
                line[x] = line[source]
            else:
                line.pop(x, None)
        self.dirty.add(self.cursor.y)

    def _split_wide(self, line: StaticDefaultDict[int, Char], start: int, end: int) -> None:
        """Blank the halves of wide characters that cells ``start..end`` cut through."""
        if start and line.get(start) is not None and line[start].data == "":
            line[start - 1] = line[start - 1]._replace(data=" ")
        after = line.get(end)
        if after is not None and after.data == "" and end < self.columns:
            line[end] = after._replace(data=" ")

    def _draw_mixed(self, data: str, widths: list[int]) -> None:
        cursor = self.cursor
        columns = self.columns
        cells = cells_for(cursor.attrs.fg)
        autowrap = modes.DECAWM in self.mode
        insert = modes.IRM in self.mode
        buffer = self.buffer
        for char, width in zip(data, widths, strict=True):
            if char == "\u200d":
                self._joiner_at = (cursor.x, cursor.y)
                continue
            if self._joiner_at is not None:
                joins = self._joiner_at == (cursor.x, cursor.y) and not char.isascii()
                self._joiner_at = None
                if joins and self._combine("\u200d" + char):
                    continue
            if width <= 0:
                if width == 0:
                    self._combine(char)
                continue
            width = min(width, columns)
            if cursor.x + width > columns:
                if autowrap:
                    line = buffer[cursor.y]
                    if cursor.x < columns:
                        # A wide character that does not fit leaves an empty spacer cell.
                        line[cursor.x] = cells[""]
                    cast(Line, line).wrapped = True
                    cursor.x = 0
                    self.index()
                elif width > 1:
                    continue  # without autowrap a wide character that does not fit is dropped
                else:
                    cursor.x = columns - width
            if insert:
                self.insert_characters(width)
            x = cursor.x
            line = buffer[cursor.y]
            self._split_wide(line, x, x + width)
            line[x] = cells[char]
            if width == 2:
                line[x + 1] = cells[""]
            cursor.x = x + width
        self.dirty.add(cursor.y)
        self._hold_at_margin()

    def _before_cursor(self) -> tuple[StaticDefaultDict[int, Char], int] | None:
        """The line and column of the cell before the cursor (back across a soft wrap, and to
        a wide character's first cell); None when the cursor starts a row not wrapped into."""
        x, y = self.cursor.x, self.cursor.y
        line = self.buffer[y]
        if x == 0:
            above = self.buffer.get(y - 1) if y else None
            if above is None or not getattr(above, "wrapped", False):
                return None
            line, x = above, self.columns
        x -= 1
        if x and line[x].data == "":
            x -= 1
        return line, x

    def _combine(self, char: str) -> bool:
        """Append zero-width ``char`` to the cell before the cursor; false when there is none.

        A cell keeps at most ``_CELL_DATA_MAX`` characters; more are dropped.
        """
        place = self._before_cursor()
        if place is None:
            return False
        line, x = place
        cell = line[x]
        if len(cell.data) < _CELL_DATA_MAX:
            line[x] = cell._replace(data=cell.data + char)
            self.dirty.add(self.cursor.y)
        return True

    def repeat_last(self, count: int) -> None:
        """REP: draw the last printed character again ``count`` times."""
        if self.last_char:
            self.draw(self.last_char * min(count or 1, self.columns * self.lines))

    # -- graphic rendition -----------------------------------------------------------------

    def select_graphic_rendition(self, *attrs: int) -> None:
        self.apply_sgr(";".join(map(str, attrs)))

    def apply_sgr(self, params: str) -> None:
        """SGR with ``;`` parameters and ``:`` sub-parameters (underline styles, colours)."""
        pen = self._pen
        if params in ("", "0"):
            pen.reset()
            self.cursor.attrs = BLANK
            return
        key = (pen.flags, pen.fg, pen.bg, params)
        known = self._sgr_cache.get(key)
        if known is not None:
            pen.flags, pen.fg, pen.bg, self.cursor.attrs = known
            return
        pen.apply(params)
        self._update_attrs()
        if len(self._sgr_cache) >= _SGR_CACHE_MAX:
            self._sgr_cache.clear()
        self._sgr_cache[key] = (pen.flags, pen.fg, pen.bg, self.cursor.attrs)

    def _update_attrs(self) -> None:
        pen = self._pen
        key = (pen.flags, pen.fg, pen.bg)
        attrs = self._attrs_cache.get(key)
        if attrs is None:
            if len(self._attrs_cache) > 1024:
                self._attrs_cache.clear()
            style = pen.style() or DEFAULT_STYLE
            attrs = self._attrs_cache[key] = BLANK if style == DEFAULT_STYLE else Char(" ", style)
        self.cursor.attrs = attrs

    def _set_attrs_from(self, attrs: Char) -> None:
        """Rebuild the pen from a restored cursor's style."""
        self.apply_sgr("0;" + attrs.fg if attrs.fg != DEFAULT_STYLE else "0")

    # -- modes and replies -----------------------------------------------------------------

    def set_private_modes(self, numbers: list[int], on: bool) -> None:
        screen_modes = self.modes
        for number in numbers:
            if number in _PRIVATE_MODES:
                flag = _PRIVATE_MODES[number]
                if on:
                    self.mode.add(flag)
                else:
                    self.mode.discard(flag)
                if number == 6:
                    self.cursor_position()
                elif number == 25:
                    self.cursor.hidden = not on
                    screen_modes.cursor_visible = on
            elif number == 1:
                screen_modes.app_cursor = on
            elif number in (47, 1047, 1049):
                if on:
                    self.enter_alternate(save_cursor=number == 1049)
                else:
                    self.leave_alternate(restore_cursor=number == 1049)
            elif number == 1048:
                if on:
                    self.save_cursor()
                else:
                    self.restore_cursor()
            elif number in (1000, 1002, 1003):
                if on:
                    screen_modes.mouse_tracking = number
                elif screen_modes.mouse_tracking == number:
                    screen_modes.mouse_tracking = 0
            elif number == 1006:
                screen_modes.mouse_sgr = on
            elif number == 1004:
                screen_modes.focus_reporting = on
            elif number == 2004:
                screen_modes.bracketed_paste = on

    def private_mode_state(self, number: int) -> int:
        """DECRQM answer: 1 set, 2 reset, 0 not recognised."""
        screen_modes = self.modes
        states: dict[int, bool] = {
            1: screen_modes.app_cursor,
            6: modes.DECOM in self.mode,
            7: modes.DECAWM in self.mode,
            25: not self.cursor.hidden,
            47: screen_modes.alt_screen,
            1047: screen_modes.alt_screen,
            1049: screen_modes.alt_screen,
            1000: screen_modes.mouse_tracking == 1000,
            1002: screen_modes.mouse_tracking == 1002,
            1003: screen_modes.mouse_tracking == 1003,
            1004: screen_modes.focus_reporting,
            1006: screen_modes.mouse_sgr,
            2004: screen_modes.bracketed_paste,
            2026: False,
        }
        if number not in states:
            return 0
        return 1 if states[number] else 2

    def kitty_keyboard(self, marker: str, args: list[int]) -> None:
        """Kitty keyboard protocol: push ``>``, pop ``<``, set ``=``, query ``?``."""
        screen_modes = self.modes
        first = args[0] if args else 0
        if marker == ">":
            self._kitty_stack.append(screen_modes.kitty_flags)
            del self._kitty_stack[:-_KITTY_STACK_MAX]
            screen_modes.kitty_flags = first & 0x1F
        elif marker == "<":
            for _ in range(min(max(first, 1), _KITTY_STACK_MAX + 1)):
                screen_modes.kitty_flags = self._kitty_stack.pop() if self._kitty_stack else 0
        elif marker == "=":
            how = args[1] if len(args) > 1 else 1
            if how == 2:
                screen_modes.kitty_flags |= first & 0x1F
            elif how == 3:
                screen_modes.kitty_flags &= ~first
            else:
                screen_modes.kitty_flags = first & 0x1F
        elif marker == "?":
            self.replies.append(f"\x1b[?{screen_modes.kitty_flags}u")

    def cursor_report(self, private: bool = False) -> None:
        """DSR 6: the cursor position, 1-based, relative to the top margin under DECOM."""
        x = min(self.cursor.x, self.columns - 1) + 1
        y = self.cursor.y + 1
        if modes.DECOM in self.mode and self.margins is not None:
            y -= self.margins.top
        self.replies.append(f"\x1b[{'?' if private else ''}{y};{x}R")

    def report_device_status(self, mode: int) -> None:
        if mode == 5:
            self.replies.append("\x1b[0n")
        elif mode == 6:
            self.cursor_report()

    def write_process_input(self, data: str) -> None:
        self.replies.append(data)
