"""The emulated screen of one terminal, behind the small :class:`Emulator` protocol.

What every backend shares and nothing here needs a backend for: the protocol, the
:class:`Row` a backend renders, its :class:`TerminalModes`, the
:class:`TerminalSignal` announcements and :class:`OscState`, which owns what titles,
working directories, progress and notifications mean (each backend finds OSC payloads
and hands them to it). ``process.py`` owns the PTY and feeds its bytes to a backend;
everything that reads a pane (``pane.read``, output waits, detection) goes through
:func:`read_text`, which only needs the rows a backend exposes. The backends live in
``ghostty.py`` and ``pyte/``; ``backends.py`` picks one.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Literal, Protocol
from urllib.parse import unquote, urlsplit

ReadSource = Literal["visible", "recent", "recent_unwrapped", "detection"]
ReadFormat = Literal["text", "ansi"]

READ_LINES_MAX = 1000
RECENT_LINES_DEFAULT = 80
TITLE_MAX = 256


@dataclass(slots=True)
class Row:
    """One rendered row: plain text, the same with SGR styling, and its soft-wrap flag.

    ``wrapped`` is true when the row's text continues on the next row because the
    line was longer than the screen (not because the program printed a newline).
    ``text`` may have its trailing spaces trimmed, except on a wrapped row, which
    keeps the full screen width so joining it with the next row is exact. ``ansi``
    is self-contained: it starts from the default style and ends with a reset when
    any style was set. Rows returned by a backend may be shared with its
    scrollback: treat them as read-only.
    """

    text: str
    ansi: str
    wrapped: bool = False


@dataclass(slots=True)
class TerminalModes:
    """Input-relevant modes the program inside has switched on.

    ``kitty_flags`` is the current kitty keyboard protocol flag set (0 = legacy
    encoding); ``mouse_tracking`` is the last enabled mouse mode (1000, 1002 or
    1003; 0 = off) and ``mouse_sgr`` whether mode 1006 asked for SGR reports.
    ``cursor_visible`` is mode 25 and ``cursor_shape`` the last DECSCUSR value
    (0 = the terminal's default, 1-6 blinking/steady block, underline, bar).
    """

    bracketed_paste: bool = False
    app_cursor: bool = False
    app_keypad: bool = False
    kitty_flags: int = 0
    focus_reporting: bool = False
    alt_screen: bool = False
    mouse_tracking: int = 0
    mouse_sgr: bool = False
    cursor_visible: bool = True
    cursor_shape: int = 0


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

    ``title`` is the latest OSC 0/2 title (control characters removed, at most
    256 characters; ``None`` before any, ``""`` after an empty one), ``cwd`` the
    latest OSC 7 path and ``progress`` the latest OSC 9 payload after ``9;``
    (e.g. ``"4;1;50"``), as detection's ``osc_progress`` region reads it.

    ``scrolled`` counts the rows the whole active screen has moved up since the
    emulator was made, on the main and the alternate screen alike and whether or not
    the rows were kept in the scrollback: a line feed, index or wrap at the bottom
    while the scroll region spans the screen, SU then, and the rows a smaller size
    pushes off the top. It never decreases. Scrolls of a smaller scroll region are not
    counted. A backend may count less than this (the ghostty one counts only the rows
    the main screen pushes into its scrollback); each says what it counts.
    """

    backend: str
    columns: int
    lines: int
    modes: TerminalModes
    title: str | None
    cwd: str | None
    progress: str | None

    @property
    def scrolled(self) -> int:
        """Rows the whole screen has scrolled up so far (see the class docstring)."""

    def feed(self, data: bytes) -> None:
        """Absorb output bytes; partial UTF-8 and escape sequences carry over."""

    def resize(self, columns: int, lines: int) -> None:
        """Change the screen size (cells); content reflows or is clipped like xterm."""

    def visible_rows(self, *, styled: bool = True) -> list[Row]:
        """The rows currently on screen, exactly ``lines`` of them, top first.

        With ``styled=False`` a backend may leave ``Row.ansi`` empty (plain reads).
        """

    def history_rows(self, limit: int, *, styled: bool = True) -> tuple[list[Row], int]:
        """The last ``limit`` rows of the active buffer and its total row count.

        The primary buffer is scrollback followed by the screen; the alternate
        buffer is the screen only. ``styled`` as for :meth:`visible_rows`.
        """

    def history_text(self, limit: int, *, unwrap: bool) -> tuple[list[str], int]:
        """The plain text of :meth:`history_rows`, one string per row, and the total.

        Each string is trimmed of trailing spaces; with ``unwrap`` every
        soft-wrapped run of rows is one string (see :func:`join_wrapped`). The fast
        path for plain reads: no :class:`Row` per row.
        """

    def visible_text(self) -> list[str]:
        """The plain text of :meth:`visible_rows`, trimmed of trailing spaces."""

    def cursor(self) -> tuple[int, int]:
        """Cursor position as ``(column, row)``, zero-based."""

    def take_replies(self) -> bytes:
        """Bytes the terminal must answer back into the PTY (DSR, DA, ...); cleared."""

    def take_signals(self) -> list[TerminalSignal]:
        """OSC announcements seen since the last call; cleared."""


# --------------------------------------------------------------------------------------------
# OSC announcements

_KITTY_PENDING_MAX = 16
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CONEMU_COMMAND = re.compile(r"\d+(;|\Z)")


class OscState:
    """What a program announced through OSC sequences, and the signals not yet taken.

    A backend finds each OSC sequence in its output and hands :meth:`apply` the
    complete payload (the decoded text between ``ESC ]`` and the terminator);
    finding, terminating and size-capping sequences is the backend's business.
    Handled codes: 0 and 2 (title; a signal only when it changes), 7 (cwd from a
    ``file://`` or ``kitty-shell-cwd://`` URL or a bare absolute path; likewise),
    9 (``9;4`` progress, ConEmu ``9;<n>`` commands ignored, anything else a
    notification; :attr:`progress` keeps the latest OSC 9 payload whatever it
    was), 777 (``notify;title;body``) and 99 (kitty notifications: chunks joined
    per ``i=`` id until ``d=1``, at most 16 unfinished ones kept, the least
    recently extended dropped first). Other codes are ignored. Values have
    control characters removed and titles are cut to 256 characters; a signal's
    ``raw`` is the payload after the code, undecorated.
    """

    def __init__(self) -> None:
        self.title: str | None = None
        self.cwd: str | None = None
        self.progress: str | None = None
        self._signals: list[TerminalSignal] = []
        self._kitty: dict[str, dict[str, str]] = {}

    def apply(self, payload: str) -> None:
        """Interpret one complete OSC payload, updating state and queueing signals."""
        code, _, rest = payload.partition(";")
        if code in ("0", "2"):
            title = _sanitize(rest)[:TITLE_MAX]
            if title != self.title:
                self.title = title
                self._signals.append(TerminalSignal("title", title, raw=rest))
        elif code == "7":
            cwd = _cwd_from_url(rest)
            if cwd and cwd != self.cwd:
                self.cwd = cwd
                self._signals.append(TerminalSignal("cwd", cwd, raw=rest))
        elif code == "9":
            self.progress = _sanitize(rest)
            if rest == "4" or rest.startswith("4;"):
                state, _, percent = rest[2:].partition(";")
                value = f"{state or '0'};{percent.partition(';')[0]}"
                self._signals.append(TerminalSignal("progress", value, raw=rest))
            elif not _CONEMU_COMMAND.match(rest):
                # "9;<n>;..." are ConEmu commands (sleep, tab title, ...), not notifications.
                self._signals.append(TerminalSignal("notification", rest, raw=rest))
        elif code == "777":
            parts = rest.split(";", 2)
            if parts[0] == "notify" and len(parts) > 1:
                body = parts[2] if len(parts) > 2 else ""
                self._signals.append(TerminalSignal("notification", body, parts[1], raw=rest))
        elif code == "99":
            self._kitty_notification(rest)

    def take_signals(self) -> list[TerminalSignal]:
        """Announcements seen since the last call, oldest first; cleared."""
        signals, self._signals = self._signals, []
        return signals

    def _kitty_notification(self, rest: str) -> None:
        """OSC 99: ``metadata;payload`` chunks joined per id until ``d=1`` (the default)."""
        metadata, _, payload = rest.partition(";")
        keys = dict(item.split("=", 1) for item in metadata.split(":") if "=" in item)
        if keys.get("e") == "1":
            try:
                payload = base64.b64decode(payload).decode("utf-8", "replace")
            except (binascii.Error, ValueError):
                return
        part = keys.get("p", "title")
        if part not in ("title", "body"):
            return
        ident = keys.get("i", "")
        note = self._kitty.pop(ident, {})
        note[part] = note.get(part, "") + _sanitize(payload)
        if keys.get("d", "1") == "0":
            self._kitty[ident] = note
            if len(self._kitty) > _KITTY_PENDING_MAX:
                del self._kitty[next(iter(self._kitty))]
            return
        self._signals.append(
            TerminalSignal("notification", note.get("body", ""), note.get("title"), raw=rest)
        )


def _sanitize(text: str) -> str:
    return _CONTROL_CHARS.sub("", text)


def _cwd_from_url(text: str) -> str | None:
    """The path of an OSC 7 ``file://host/path`` URL (or a bare absolute path)."""
    if text.startswith("/"):
        return _sanitize(text)
    parts = urlsplit(text)
    if parts.scheme == "file":
        return _sanitize(unquote(parts.path))
    if parts.scheme == "kitty-shell-cwd":
        return _sanitize(parts.path)
    return None


# --------------------------------------------------------------------------------------------
# Reading


def read_text(
    emulator: Emulator, source: ReadSource, lines: int | None, fmt: ReadFormat
) -> tuple[str, bool]:
    """Render one read source of ``emulator`` as ``(text, truncated)``.

    ``lines`` is clamped to 0..1000; ``None`` means the whole viewport for
    ``visible``/``detection`` and 80 rows for ``recent``/``recent_unwrapped``.
    Rows are trimmed of trailing spaces, trailing blank rows are dropped and the
    rest is joined with ``\\n`` plus a final ``\\n``. ``fmt="ansi"`` keeps SGR
    styling except for ``detection``, which is always plain. ``truncated`` is
    true when ``lines`` cut text off (``visible``/``detection``) or when the
    buffer holds more rows than ``lines`` (``recent*``). ``recent*`` reads the last
    ``lines`` lines of output: the blank rows below the last written row, the
    cursor's included, are left out before counting.
    """
    if lines is not None:
        lines = max(0, min(lines, READ_LINES_MAX))
    styled = fmt == "ansi" and source != "detection"
    if source in ("visible", "detection"):
        texts = (_styled_texts(emulator.visible_rows(styled=True)) if styled
                 else _drop_blank_tail(emulator.visible_text()))
        if lines is None:
            return _join(texts), False
        kept = texts[len(texts) - lines :] if lines else []
        return _join(kept), len(texts) > lines
    wanted = RECENT_LINES_DEFAULT if lines is None else lines
    unwrap = source == "recent_unwrapped"
    # The blank rows below the last written one (the cursor's among them) are not
    # output, and they are at most a screen: read that much more, drop them, keep the
    # last ``wanted`` lines.
    reach = wanted + emulator.lines if wanted else 0
    if styled:
        rows, total = emulator.history_rows(reach, styled=True)
        texts = _styled_texts(_unwrap(rows) if unwrap else rows)
    else:
        plain, total = emulator.history_text(reach, unwrap=unwrap)
        texts = _drop_blank_tail(plain)
    return _join(texts[-wanted:]), total > wanted


def join_wrapped(texts: list[str], wrapped: Collection[int]) -> list[str]:
    """``texts`` without trailing spaces, each row whose index is in ``wrapped`` joined
    with the row after it (a soft-wrapped row keeps its spaces up to the join)."""
    if not wrapped:
        return [text.rstrip(" ") for text in texts]
    out: list[str] = []
    run: list[str] = []
    for i, text in enumerate(texts):
        run.append(text)
        if i not in wrapped:
            out.append("".join(run).rstrip(" "))
            run = []
    if run:
        out.append("".join(run).rstrip(" "))
    return out


def _drop_blank_tail(texts: list[str]) -> list[str]:
    end = len(texts)
    while end and not texts[end - 1]:
        end -= 1
    return texts[:end]


def _unwrap(rows: list[Row]) -> list[Row]:
    """Join soft-wrapped runs of rows into one logical row each."""
    out: list[Row] = []
    run: list[Row] = []
    for row in rows:
        if row.wrapped:
            run.append(row)
        elif run:
            run.append(row)
            out.append(Row("".join(r.text for r in run), "".join(r.ansi for r in run)))
            run = []
        else:
            out.append(row)
    if run:
        out.append(Row("".join(r.text for r in run), "".join(r.ansi for r in run)))
    return out


def _styled_texts(rows: list[Row]) -> list[str]:
    """Each row's ANSI without trailing spaces, rows after the last with text dropped."""
    end = len(_drop_blank_tail([row.text.rstrip(" ") for row in rows]))
    return [row.ansi.rstrip(" ") for row in rows[:end]]


def _join(texts: list[str]) -> str:
    return "\n".join(texts) + "\n" if texts else ""


_ACTIVITY_GLYPHS = frozenset("·✢✳✶✻✽")


def strip_title(title: str | None) -> str | None:
    """``terminal_title_stripped``: the title trimmed, minus one leading activity glyph.

    The glyph (any Braille character U+2800..U+28FF or one of ``·✢✳✶✻✽``) is
    removed only when whitespace or the end follows it. Returns ``None`` when
    nothing is left.
    """
    if title is None:
        return None
    text = title.strip()
    if text:
        glyph = text[0]
        if ("\u2800" <= glyph <= "\u28ff" or glyph in _ACTIVITY_GLYPHS) and (
            len(text) == 1 or text[1].isspace()
        ):
            text = text[1:].strip()
    return text or None
