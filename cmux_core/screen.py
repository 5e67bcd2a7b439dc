"""The emulated screen of one terminal, behind the small :class:`Emulator` protocol.

``terminal.py`` owns the PTY and feeds its bytes here; everything that reads a
pane (``pane.read``, output waits, detection) goes through :func:`read_text`,
which only needs the rows a backend exposes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

ReadSource = Literal["visible", "recent", "recent_unwrapped", "detection"]
ReadFormat = Literal["text", "ansi"]


@dataclass(slots=True)
class Row:
    """One rendered row: plain text, the same with SGR styling, and its soft-wrap flag.

    ``wrapped`` is true when the row's text continues on the next row because the
    line was longer than the screen (not because the program printed a newline).
    """

    text: str
    ansi: str
    wrapped: bool = False


@dataclass(slots=True)
class TerminalModes:
    """Input-relevant modes the program inside has switched on."""

    bracketed_paste: bool = False
    app_cursor: bool = False
    app_keypad: bool = False
    kitty_flags: int = 0
    focus_reporting: bool = False
    alt_screen: bool = False


@dataclass(slots=True)
class TerminalSignal:
    """Something the program announced through an OSC sequence.

    ``kind`` is one of ``title`` (OSC 0/2), ``cwd`` (OSC 7, value is the path),
    ``progress`` (OSC 9;4, value is ``"<state>;<percent>"``) or ``notification``
    (OSC 9, 777, 99; ``value`` is the body, ``title`` its title when given).
    """

    kind: Literal["title", "cwd", "progress", "notification"]
    value: str
    title: str | None = None
    raw: str = field(default="", repr=False)


class Emulator(Protocol):
    """A terminal emulator backend.

    Implementations are single-threaded objects owned by one ``Terminal``; every
    call happens on the server's event loop and must be quick (``feed`` is given
    bounded slices).
    """

    backend: str
    columns: int
    lines: int
    modes: TerminalModes
    title: str | None
    cwd: str | None
    progress: str | None

    def feed(self, data: bytes) -> None:
        """Absorb output bytes; partial UTF-8 and escape sequences carry over."""

    def resize(self, columns: int, lines: int) -> None:
        """Change the screen size (cells); content reflows or is clipped like xterm."""

    def visible_rows(self) -> list[Row]:
        """The rows currently on screen, exactly ``lines`` of them, top first."""

    def history_rows(self, limit: int) -> tuple[list[Row], int]:
        """The last ``limit`` rows of the active buffer and its total row count.

        The primary buffer is scrollback followed by the screen; the alternate
        buffer is the screen only.
        """

    def cursor(self) -> tuple[int, int]:
        """Cursor position as ``(column, row)``, zero-based."""

    def take_replies(self) -> bytes:
        """Bytes the terminal must answer back into the PTY (DSR, DA, ...); cleared."""

    def take_signals(self) -> list[TerminalSignal]:
        """OSC announcements seen since the last call; cleared."""
