"""Escape-sequence parsing for the pyte backend's screen.

:class:`Parser` turns PTY bytes into calls on the :class:`~cmux_core.terminal.pyte.screen.Screen`
(pyte's own ``Stream`` is not used: it mis-parses multi-digit OSC codes, kitty keyboard
and colon SGR sequences, prints DCS/APC payloads and reads one character at a time).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from typing import Literal

from pyte import charsets, modes

from cmux_core.terminal.pyte.screen import Screen

_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CSI = re.compile(r"([0-?]*)([ -/]*)([@-~])")
_SGR = re.compile(r"\x1b\[([0-9;:]*)m")  # the most common sequence, matched whole at once
_CSI_PARTIAL = re.compile(r"[0-?]*[ -/]*\Z")
_CSI_BODY = re.compile(r"[0-?]*[ -/]*")
_ESC = re.compile(r"([ -/]*)([0-~])")
_ESC_PARTIAL = re.compile(r"[ -/]*\Z")
_OSC_END = re.compile(r"[\x07\x18\x1a\x1b\x9c]")
_STRING_END = re.compile(r"[\x18\x1a\x1b\x9c]")
_SEQUENCE_MAX = 512  # an unfinished CSI/ESC longer than this is dropped, not carried
_OSC_MAX = 16_384  # characters of one OSC payload kept; the rest is skipped


def _int_params(params: str) -> list[int]:
    """CSI parameters as integers (missing = 0, capped at 9999; sub-parameters ignored)."""
    out = []
    for part in params.split(";"):
        if ":" in part:
            part = part.split(":", 1)[0]
        out.append(min(int(part), 9999) if part.isdigit() else 0)
    return out


class Parser:
    """Turns PTY bytes into calls on the pyte backend's screen and OSC payloads for ``on_osc``.

    Carries state across :meth:`feed` calls: the UTF-8 decoder's partial
    character, an unfinished ESC/CSI sequence (kept as text) and whether it is
    inside an OSC/DCS/APC/PM/SOS string (whose payload is streamed, not kept:
    only OSC payloads are collected, up to a cap). ``on_osc(payload,
    terminator)`` receives the complete OSC text after ``ESC ]``.
    """

    def __init__(self, screen: Screen, on_osc: Callable[[str, str], None]) -> None:
        self.screen = screen
        self._single: dict[str, Callable[[], None]] = {
            "\x08": screen.backspace, "\t": screen.tab, "\x0e": screen.shift_out,
            "\x0f": screen.shift_in}
        """The controls that are one call on the screen: BS, HT, SO, SI."""
        self._on_osc = on_osc
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._tail = ""
        self._string: Literal["osc", "other"] | None = None
        self._osc: list[str] = []
        self._osc_size = 0
        self._plain_width = 0
        self._plain_run = re.compile("")

    def feed(self, data: bytes) -> None:
        text = self._decoder.decode(data)
        if self._tail:
            text, self._tail = self._tail + text, ""
        screen = self.screen
        draw = screen.draw
        crlf = screen.carriage_return_linefeed
        apply_sgr = screen.apply_sgr
        search = _CONTROLS.search
        sgr_match = _SGR.match
        single = self._single
        n = len(text)
        i = self._string_body(text, 0) if self._string is not None else 0
        while i < n:
            match = search(text, i)
            if match is None:
                draw(text[i:])
                return
            j = match.start()
            if j > i:
                draw(text[i:j])
            char = text[j]
            if char == "\r":
                if text.startswith("\n", j + 1):
                    crlf()
                    i = j + 2
                    if text.startswith("\r\n", i) or (i < n and " " <= text[i] <= "~"):
                        i = self._plain_lines(text, i)
                else:
                    screen.cursor.x = 0
                    i = j + 1
            elif char == "\n" or char == "\x0b" or char == "\x0c":
                screen.linefeed()
                i = j + 1
            elif char == "\x1b":
                sgr = sgr_match(text, j)
                if sgr is not None:
                    apply_sgr(sgr.group(1))
                    i = sgr.end()
                else:
                    i = self._escape(text, j)
            elif char in single:
                single[char]()
                i = j + 1
            elif char == "\x9b":
                i = self._csi(text, j + 1, j)
            elif char == "\x9d":
                self._string = "osc"
                i = self._string_body(text, j + 1)
            elif char in "\x90\x98\x9e\x9f":
                self._string = "other"
                i = self._string_body(text, j + 1)
            else:
                i = j + 1  # BEL and the remaining controls have no effect on the screen

    def _plain_lines(self, text: str, start: int) -> int:
        """Absorb whole plain lines from ``start`` in one screen call when the screen allows it.

        A run of printable-ASCII lines each ending in CR LF and no wider than the screen
        scrolls straight into scrollback; returns where the run ends (``start`` when the
        fast path does not apply).
        """
        screen = self.screen
        if screen.columns != self._plain_width:
            self._plain_width = screen.columns
            self._plain_run = re.compile(rf"(?:[ -~]{{0,{screen.columns}}}\r\n)+")
        match = self._plain_run.match(text, start)
        if match is None or not screen.plain_scroll_ready():
            return start
        end = match.end()
        screen.scroll_plain_lines(text[start : end - 2].split("\r\n"))
        return end

    # -- sequences -------------------------------------------------------------------------

    def _escape(self, text: str, start: int) -> int:
        """Handle the sequence starting with ESC at ``start``; return where to continue."""
        n = len(text)
        if start + 1 >= n:
            self._tail = text[start:]
            return n
        kind = text[start + 1]
        if kind == "[":
            return self._csi(text, start + 2, start)
        if kind == "]":
            self._string = "osc"
            return self._string_body(text, start + 2)
        if kind in "P_^X":
            self._string = "other"
            return self._string_body(text, start + 2)
        match = _ESC.match(text, start + 1)
        if match is not None:
            self._esc_dispatch(match.group(1), match.group(2))
            return match.end()
        if _ESC_PARTIAL.match(text, start + 1):
            if n - start < _SEQUENCE_MAX:
                self._tail = text[start:]
            return n
        return start + 1  # ESC before a control or non-ASCII character: ignore the ESC

    def _csi(self, text: str, body: int, start: int) -> int:
        match = _CSI.match(text, body)
        if match is not None:
            self._csi_dispatch(match.group(1), match.group(2), match.group(3))
            return match.end()
        n = len(text)
        if _CSI_PARTIAL.match(text, body):
            if n - start < _SEQUENCE_MAX:
                self._tail = text[start:]
            return n
        # Malformed (a control or non-ASCII character inside): drop what was read so far.
        partial = _CSI_BODY.match(text, body)
        return partial.end() if partial is not None else body

    def _string_body(self, text: str, start: int) -> int:
        """Consume string-sequence payload from ``start``; return where ground state resumes."""
        n = len(text)
        pattern = _OSC_END if self._string == "osc" else _STRING_END
        i = start
        while True:
            match = pattern.search(text, i)
            if match is None:
                self._collect(text, i, n)
                return n
            j = match.start()
            char = text[j]
            self._collect(text, i, j)
            if char == "\x1b":
                if j + 1 >= n:
                    self._tail = "\x1b"
                    return n
                follower = text[j + 1]
                if follower == "\\":
                    self._finish_string("\x1b\\")
                    return j + 2
                if follower == "\x1b" and self._string == "other":
                    i = j + 2  # a doubled ESC inside DCS passthrough
                    continue
                self._finish_string("")  # another sequence starts: the string ends here
                return j
            if char in "\x07\x9c":
                self._finish_string(char)
            else:
                self._drop_string()  # CAN or SUB cancels the sequence
            return j + 1

    def _collect(self, text: str, start: int, end: int) -> None:
        if self._string == "osc" and end > start and self._osc_size < _OSC_MAX:
            piece = text[start : min(end, start + _OSC_MAX - self._osc_size)]
            self._osc.append(piece)
            self._osc_size += len(piece)

    def _finish_string(self, terminator: str) -> None:
        kind, payload = self._string, "".join(self._osc)
        self._drop_string()
        if kind == "osc":
            self._on_osc(payload, terminator)

    def _drop_string(self) -> None:
        self._string = None
        self._osc = []
        self._osc_size = 0

    def _esc_dispatch(self, intermediates: str, final: str) -> None:
        screen = self.screen
        if intermediates == "":
            if final in _ESC_METHODS:
                getattr(screen, _ESC_METHODS[final])()
            elif final == "E":
                screen.cursor.x = 0
                screen.index()
            elif final in "=>":
                screen.modes.app_keypad = final == "="
        elif intermediates == "#" and final == "8":
            screen.alignment_display()
        elif intermediates in ("(", ")"):
            table = charsets.VT100_MAP if final == "0" else charsets.LAT1_MAP
            if intermediates == "(":
                screen.g0_charset = table
            else:
                screen.g1_charset = table

    def _csi_dispatch(self, params: str, intermediates: str, final: str) -> None:
        screen = self.screen
        if final == "m" and not intermediates:
            if not params or params[0] not in "<=>?":
                screen.apply_sgr(params)
            return
        marker = ""
        if params and params[0] in "<=>?":
            marker, params = params[0], params[1:]
        args = _int_params(params)
        first = args[0]
        if intermediates:
            self._csi_intermediate(marker, args, intermediates, final)
        elif marker == "":
            if final in _CSI_METHODS:
                getattr(screen, _CSI_METHODS[final])(first)
            elif final in _CSI_HANDLERS:
                _CSI_HANDLERS[final](screen, args)
            elif final == "c" and first == 0:
                screen.replies.append("\x1b[?62;22c")
            elif final in "hl":
                on = final == "h"
                for number in args:
                    if number in (modes.IRM, modes.LNM):
                        (screen.set_mode if on else screen.reset_mode)(number)
            elif final == "t" and first == 18:
                screen.replies.append(f"\x1b[8;{screen.lines};{screen.columns}t")
        elif marker == "?":
            if final in "hl":
                screen.set_private_modes(args, final == "h")
            elif final == "u":
                screen.kitty_keyboard("?", args)
            elif final == "n" and first == 6:
                screen.cursor_report(private=True)
            elif final == "J":
                screen.erase_in_display(first)
            elif final == "K":
                screen.erase_in_line(first)
        elif final == "u":
            screen.kitty_keyboard(marker, args)
        elif marker == ">" and final == "c" and first == 0:
            screen.replies.append("\x1b[>1;0;0c")

    def _csi_intermediate(
        self, marker: str, args: list[int], intermediates: str, final: str
    ) -> None:
        screen = self.screen
        if intermediates == "$" and final == "p":
            number = args[0]
            if marker == "?":
                screen.replies.append(f"\x1b[?{number};{screen.private_mode_state(number)}$y")
            else:
                state = 0
                if number in (modes.IRM, modes.LNM):
                    state = 1 if number in screen.mode else 2
                screen.replies.append(f"\x1b[{number};{state}$y")
        elif intermediates == " " and final == "q" and not marker:
            screen.modes.cursor_shape = args[0] if 0 <= args[0] <= 6 else 0  # DECSCUSR
        # DECSTR (CSI ! p) is left alone, as tmux and libghostty leave it: the region,
        # insert, origin and autowrap modes and the input modes all stay as they were.


def _cursor_position(screen: Screen, args: list[int]) -> None:
    screen.cursor_position(args[0], args[1] if len(args) > 1 else 0)


def _set_margins(screen: Screen, args: list[int]) -> None:
    screen.set_margins(args[0], args[1] if len(args) > 1 else None)
    screen.cursor_position()


def _tab_forward(screen: Screen, args: list[int]) -> None:
    for _ in range(min(args[0] or 1, screen.columns)):
        screen.tab()


def _tab_back(screen: Screen, args: list[int]) -> None:
    for _ in range(min(args[0] or 1, screen.columns)):
        stops = [stop for stop in screen.tabstops if stop < screen.cursor.x]
        screen.cursor.x = max(stops) if stops else 0


def _save_cursor(screen: Screen, args: list[int]) -> None:
    if args == [0]:
        screen.save_cursor()


def _restore_cursor(screen: Screen, args: list[int]) -> None:
    if args == [0]:
        screen.restore_cursor()


# ESC finals (no intermediates) whose whole effect is the named screen method.
_ESC_METHODS = {
    "7": "save_cursor", "8": "restore_cursor", "D": "index", "M": "reverse_index",
    "H": "set_tab_stop", "c": "full_reset",
}
# CSI finals whose whole effect is the named screen method called with the first parameter.
_CSI_METHODS = {
    "@": "insert_characters", "A": "cursor_up", "B": "cursor_down", "C": "cursor_forward",
    "D": "cursor_back", "E": "cursor_down1", "F": "cursor_up1", "G": "cursor_to_column",
    "J": "erase_in_display", "K": "erase_in_line", "L": "insert_lines", "M": "delete_lines",
    "P": "delete_characters", "S": "scroll_up", "T": "scroll_down", "X": "erase_characters",
    "`": "cursor_to_column", "a": "cursor_forward", "b": "repeat_last", "d": "cursor_to_line",
    "e": "cursor_down", "g": "clear_tab_stop", "n": "report_device_status",
}
# CSI finals that need more than the first parameter passed to one method.
_CSI_HANDLERS: dict[str, Callable[[Screen, list[int]], None]] = {
    "H": _cursor_position,
    "I": _tab_forward,
    "Z": _tab_back,
    "f": _cursor_position,
    "r": _set_margins,
    "s": _save_cursor,
    "u": _restore_cursor,
}
