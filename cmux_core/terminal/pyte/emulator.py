"""The pure-Python emulator backend, built on pyte's screen model.

:class:`PyteEmulator` feeds :class:`~cmux_core.terminal.pyte.screen.Screen` (a
``pyte.Screen`` with an alternate screen, soft-wrap flags and a compact
scrollback) through :class:`~cmux_core.terminal.pyte.parser.Parser` (escape sequences)
and ties both to the protocol. OSC payloads the parser collects are interpreted
by :class:`~cmux_core.terminal.emulator.OscState`, shared with the ghostty backend.
"""

from __future__ import annotations

from collections import deque
from itertools import islice

from cmux_core.terminal.emulator import OscState, Row, TerminalSignal, join_wrapped
from cmux_core.terminal.pyte.cells import plain_line, render_line
from cmux_core.terminal.pyte.parser import Parser
from cmux_core.terminal.pyte.screen import Screen


class PyteEmulator:
    """The pure-Python :class:`~cmux_core.terminal.emulator.Emulator`:
    pyte's screen model behind our parser.

    ``scrollback_lines`` and ``scrollback_bytes`` (memory of the stored rows,
    oldest dropped first) bound the primary screen's scrollback.
    """

    backend = "pyte"

    def __init__(
        self,
        columns: int,
        lines: int,
        *,
        scrollback_lines: int = 10_000,
        scrollback_bytes: int = 16 * 1024 * 1024,
    ) -> None:
        self.columns = max(1, columns)
        self.lines = max(1, lines)
        self._screen = Screen(
            self.columns, self.lines,
            scrollback_lines=scrollback_lines, scrollback_bytes=scrollback_bytes,
        )
        self._parser = Parser(self._screen, self._on_osc)
        self._osc = OscState()
        self.modes = self._screen.modes
        self.title: str | None = None
        self.cwd: str | None = None
        self.progress: str | None = None

    def feed(self, data: bytes) -> None:
        self._parser.feed(data)

    def resize(self, columns: int, lines: int) -> None:
        self.columns, self.lines = max(1, columns), max(1, lines)
        self._screen.resize(self.lines, self.columns)

    def visible_rows(self, *, styled: bool = True) -> list[Row]:
        screen = self._screen
        get = screen.buffer.get
        return [render_line(get(y), screen.columns) for y in range(screen.lines)]

    def history_rows(self, limit: int, *, styled: bool = True) -> tuple[list[Row], int]:
        screen = self._screen
        history: deque[Row] = deque() if screen.alternate else screen.history
        total = len(history) + screen.lines
        limit = max(0, min(limit, total))
        from_screen = min(limit, screen.lines)
        get = screen.buffer.get
        rows = [
            render_line(get(y), screen.columns)
            for y in range(screen.lines - from_screen, screen.lines)
        ]
        from_history = limit - from_screen
        if from_history:
            older = list(islice(reversed(history), from_history))
            older.reverse()
            rows = older + rows
        return rows, total

    def history_text(self, limit: int, *, unwrap: bool) -> tuple[list[str], int]:
        screen = self._screen
        history: deque[Row] = deque() if screen.alternate else screen.history
        total = len(history) + screen.lines
        limit = max(0, min(limit, total))
        from_screen = min(limit, screen.lines)
        texts: list[str] = []
        wrapped: set[int] = set()
        if limit > from_screen:
            older = list(islice(reversed(history), limit - from_screen))
            older.reverse()
            texts = [row.text for row in older]
            if unwrap:
                wrapped = {i for i, row in enumerate(older) if row.wrapped}
        get, columns = screen.buffer.get, screen.columns
        for y in range(screen.lines - from_screen, screen.lines):
            text, wraps = plain_line(get(y), columns)
            if wraps and unwrap:
                wrapped.add(len(texts))
            texts.append(text)
        return join_wrapped(texts, wrapped), total

    def visible_text(self) -> list[str]:
        screen = self._screen
        get, columns = screen.buffer.get, screen.columns
        return [plain_line(get(y), columns)[0].rstrip(" ") for y in range(screen.lines)]

    def cursor(self) -> tuple[int, int]:
        cursor = self._screen.cursor
        return min(cursor.x, self.columns - 1), cursor.y

    def take_replies(self) -> bytes:
        replies = self._screen.replies
        if not replies:
            return b""
        data = "".join(replies).encode()
        replies.clear()
        return data

    def take_signals(self) -> list[TerminalSignal]:
        return self._osc.take_signals()

    @property
    def scrolled(self) -> int:
        return self._screen.scrolled

    @property
    def scrollback(self) -> deque[Row]:
        """The primary screen's scrollback rows, oldest first (read-only view)."""
        return self._screen.history

    @property
    def scrollback_bytes(self) -> int:
        """Memory held by the scrollback rows, as counted against the byte limit."""
        return self._screen.history_bytes

    # -- OSC -------------------------------------------------------------------------------

    def _on_osc(self, payload: str, terminator: str) -> None:
        osc = self._osc
        osc.apply(payload)
        self.title, self.cwd, self.progress = osc.title, osc.cwd, osc.progress
        if payload in ("10;?", "11;?"):
            # Foreground/background colour queries: programs pick a light or dark theme by them.
            colour = "ffff/ffff/ffff" if payload[1] == "0" else "0000/0000/0000"
            ending = terminator if terminator in ("\x07", "\x1b\\") else "\x1b\\"
            self._screen.replies.append(f"\x1b]{payload[:2]};rgb:{colour}{ending}")
