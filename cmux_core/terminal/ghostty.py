"""The ``ghostty`` emulator backend: libghostty-vt through pyghostty's cffi binding.

libghostty-vt (the engine inside Ghostty) keeps the grid, scrollback, modes and
answers terminal queries itself; this module feeds it, reads rows back through
its formatter and captures OSC announcements with :class:`OscCapture`, a small
incremental scanner over the same byte stream whose payloads the shared
:class:`~cmux_core.terminal.emulator.OscState` interprets (libghostty reports titles and
progress only as parsed values, and kitty's OSC 99 not at all).

Scrollback is bounded by bytes, not lines: libghostty's line limit trims row by
row and slows ingest several-fold, its byte limit drops whole pages. The byte
budget starts from a per-cell estimate and grows when pruning would keep fewer
than ``scrollback_lines`` rows (style-heavy output costs more per row).

Every :class:`GhosttyEmulator` owns one native terminal, freed when the object
is garbage; it is not thread-safe (one event loop calls it, as the protocol says).
"""

from __future__ import annotations

import re
from typing import Any

import pyghostty
from pyghostty import ffi, lib
from pyghostty._ffi import union_fn
from pyghostty.core import init_sized

from cmux_core.errors import InternalError
from cmux_core.terminal.emulator import OscState, Row, TerminalModes, TerminalSignal, join_wrapped

CELL_WIDTH_PX = 8
CELL_HEIGHT_PX = 16
"""Cell size reported to pixel-size queries (CSI 14 t); there is no real font."""

DEFAULT_FOREGROUND = (255, 255, 255)
DEFAULT_BACKGROUND = (0, 0, 0)
"""Answered to OSC 10/11 colour queries, which programs use to pick a light or dark theme."""

_BYTES_PER_CELL = 9
_BYTES_PER_ROW = 32
_PAGE_SLACK_BYTES = 1 << 18
_MAX_BUDGET_FACTOR = 6
"""The byte budget never grows past this multiple of its estimate."""

_MODE_NUMBERS = (1, 66, 1004, 2004, 1003, 1002, 1000, 1006, 25)
"""DEC private modes read after output: cursor keys, keypad, focus, paste, mouse, cursor
visibility."""
_DECSCUSR = re.compile(rb"\x1b\[([0-6]?) q")
"""Cursor shape requests, found in the output (libghostty keeps the shape to itself)."""

_OSC_MAX = 8192
_OSC_END = re.compile(rb"[\x07\x18\x1a\x1b]")


# -- output filter ----------------------------------------------------------------------

_GRAPHEME_MODE = 2027
_CLUSTER_ON = b"\x1b[?2027h"
_CLUSTER_OFF = b"\x1b[?2027l"
_ZWJ = b"\xe2\x80\x8d"
_RI = rb"\xf0\x9f\x87[\xa6-\xbf]"
"""A regional indicator (U+1F1E6..U+1F1FF): two in a row make a flag."""
_PRINTABLE = (rb"(?:[\x20-\x7e]|\xc2[\xa0-\xbf]|[\xc3-\xdf][\x80-\xbf]"
              rb"|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3})")
"""One printable character (no C0/C1 control, so never the start of a sequence)."""
_SGRS = rb"(?:\x1b\[[0-9;:]*m)*"
_JOINED = re.compile(rb"(?:\xe2\x80\x8d)+(" + _SGRS + rb")(" + _PRINTABLE + rb")|"
                     + _RI + rb"(" + _RI + rb")")
"""A joiner (repeats count once), the SGRs after it and the character it joins; or the
second regional indicator of a pair."""
_OPEN_JOINER = re.compile(rb"(?:\xe2\x80\x8d)+" + _SGRS + rb"(?:\x1b(?:\[[0-9;:]*)?)?\Z")
"""Joiners at the end of the output, maybe with SGRs after them: held until what follows
says whether they join anything."""
_AFTER_RI = re.compile(_RI)


def _incomplete_utf8(data: bytes) -> int:
    """How many bytes at the end of ``data`` start a UTF-8 character not yet complete."""
    for back in range(1, min(3, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return 0
        if byte >= 0xC0:
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return back if back < need else 0
    return 0


_ZERO_COUNT = re.compile(rb"\x1b\[0+([LMPSTZ])")
"""DL, IL, DCH, SU, SD and CBT with an explicit count of 0, which libghostty takes as
"do nothing" and tmux (like xterm) as 1."""
_OPEN_CSI = re.compile(rb"\x1b(?:\[[0-9]*)?")
"""The start of a sequence the filter may rewrite, held while it is incomplete."""
_LINE_EDIT = re.compile(rb"\x1b\[[0-9]*[LM]")
"""IL and DL, after which libghostty (like xterm) puts the cursor in the first column
and tmux leaves it where it was."""


class OutputFilter:
    """Adjusts output before libghostty reads it, so the screen comes out as tmux's does.

    A zero count in the sequences of :data:`_ZERO_COUNT` becomes 1, and the cursor
    goes back to its column after IL and DL.

    Emoji ZWJ sequences and flags take the cells tmux gives them. Without help
    libghostty gives every emoji of a ZWJ sequence (a family, a profession) its own
    two cells and a flag four, where tmux joins each into one 2-cell cell. So a
    character after a zero-width joiner, and the second of two regional indicators,
    is printed with libghostty's grapheme-cluster mode (2027) switched on, which joins
    it to the cell before; everything else keeps the per-codepoint widths tmux uses
    (VS16 and skin tones stay as they are). Like tmux, a joiner waits for the next
    character (across SGRs) and is dropped when that is ASCII, and joiners in a row
    count once. Nothing is switched inside an escape sequence or while the program set
    2027 itself.

    A character or the start of a sequence split across writes, and a joiner at the
    end of a write, are held until what follows arrives.
    """

    def __init__(self) -> None:
        self._held = b""
        self._ri_open = False

    @property
    def holding(self) -> bool:
        """Whether bytes wait for the next write (so libghostty has not seen them yet)."""
        return bool(self._held)

    def write(self, native: _NativeTerminal, data: bytes) -> None:
        if self._held:
            data, self._held = self._held + data, b""
        cut = _incomplete_utf8(data)
        if not cut:
            escape = data.rfind(b"\x1b", max(0, len(data) - 8))
            if escape >= 0 and _OPEN_CSI.fullmatch(data, escape):
                cut = len(data) - escape
        if cut:
            data, self._held = data[:-cut], data[-cut:]
        if not data:
            return
        if b"\x1b[0" in data:
            data = _ZERO_COUNT.sub(b"\x1b[1\\1", data)
        if self._ri_open:
            self._ri_open = False
            first = _AFTER_RI.match(data)
            if first is not None:
                self._join(native, data[:first.end()])
                data = data[first.end():]
        if _ZWJ not in data and b"\xf0\x9f\x87" not in data:
            self._emit(native, data)
            return
        open_joiner = _OPEN_JOINER.search(data)
        if open_joiner is not None:
            data, self._held = data[:open_joiner.start()], data[open_joiner.start():] + self._held
        done = 0
        for found in _JOINED.finditer(data):
            if found.group(2) is None:  # the second regional indicator of a flag
                self._emit(native, data[done:found.start(3)])
                self._join(native, found.group(3))
                done = found.end(3)
                continue
            sgrs, char = found.group(1), found.group(2)
            if len(char) == 1:  # ASCII: the joiner joins nothing and is dropped
                self._emit(native, data[done:found.start()] + sgrs + char)
            else:
                self._emit(native, data[done:found.start()] + _ZWJ + sgrs)
                self._join(native, char)
            done = found.end()
        rest = data[done:]
        self._emit(native, rest)
        self._ri_open = _AFTER_RI.fullmatch(rest[-4:]) is not None

    @staticmethod
    def _emit(native: _NativeTerminal, data: bytes) -> None:
        done = 0
        for found in _LINE_EDIT.finditer(data):
            native.write(data[done:found.start()])
            column = native.cursor()[0]
            native.write(found.group() + b"\x1b[%dG" % (column + 1))
            done = found.end()
        native.write(data[done:] if done else data)

    @staticmethod
    def _join(native: _NativeTerminal, char: bytes) -> None:
        if native.may_switch_clusters():
            native.write(_CLUSTER_ON + char + _CLUSTER_OFF)
        else:
            native.write(char)


# -- OSC capture ------------------------------------------------------------------------


class OscCapture(OscState):
    """Finds OSC sequences in a byte stream fed in arbitrary slices and interprets them.

    A sequence split across :meth:`feed` calls is completed by the later call.
    Terminators follow libghostty: BEL, ST (``ESC \\``) or ESC before anything
    else end a sequence; CAN and SUB abandon it; a payload longer than 8 KiB is
    discarded. Each complete payload is decoded (UTF-8, bad bytes replaced) and
    handed to :meth:`OscState.apply`, which owns what the codes mean.
    """

    def __init__(self) -> None:
        super().__init__()
        self._payload: bytearray | None = None
        self._overflow = False
        self._after_esc = False

    def feed(self, data: bytes) -> None:
        """Scan ``data``; complete sequences become signals for :meth:`take_signals`."""
        pos = 0
        end = len(data)
        if self._after_esc and end:
            self._after_esc = False
            if data[0] == 0x5D:  # "]"
                self._start()
                pos = 1
        while pos < end:
            if self._payload is None:
                start = data.find(b"\x1b]", pos)
                if start < 0:
                    self._after_esc = data[-1] == 0x1B
                    return
                self._start()
                pos = start + 2
                continue
            match = _OSC_END.search(data, pos)
            stop = match.start() if match else end
            self._append(data[pos:stop])
            if match is None:
                return
            byte = data[stop]
            payload, self._payload = self._payload, None
            if byte in (0x07, 0x1B) and not self._overflow:
                self.apply(payload.decode("utf-8", "replace"))
            pos = stop + 1
            if byte == 0x1B:
                if pos == end:
                    self._after_esc = True
                elif data[pos] == 0x5D:  # ESC ] right after: the next OSC starts here
                    self._start()
                    pos += 1

    def _start(self) -> None:
        self._payload = bytearray()
        self._overflow = False

    def _append(self, chunk: bytes) -> None:
        assert self._payload is not None
        if self._overflow:
            return
        if len(self._payload) + len(chunk) > _OSC_MAX:
            self._overflow = True
            return
        self._payload += chunk


# -- the native terminal ----------------------------------------------------------------


class _Replies:
    """Bytes the native terminal writes back to the program, reached through its userdata."""

    def __init__(self) -> None:
        self.data = bytearray()


def _on_write_pty(terminal: Any, userdata: Any, data: Any, length: int) -> None:
    ffi.from_handle(userdata).data += ffi.buffer(data, length)


def _on_size_query(terminal: Any, userdata: Any, out: Any) -> bool:
    value = ffi.new("uint16_t*")
    lib.ghostty_terminal_get(terminal, lib.GHOSTTY_TERMINAL_DATA_COLS, value)
    out.columns = value[0]
    lib.ghostty_terminal_get(terminal, lib.GHOSTTY_TERMINAL_DATA_ROWS, value)
    out.rows = value[0]
    out.cell_width, out.cell_height = CELL_WIDTH_PX, CELL_HEIGHT_PX
    return True


_WRITE_PTY_CALLBACK: Any = ffi.callback("GhosttyTerminalWritePtyFn", _on_write_pty)
_SIZE_CALLBACK: Any = ffi.callback("GhosttyTerminalSizeFn", _on_size_query)


def _check(result: Any, what: str) -> None:
    if result != lib.GHOSTTY_SUCCESS:
        raise InternalError(message=f"libghostty-vt {what} failed ({int(result)})")


class _NativeTerminal:
    """One libghostty-vt terminal; every untyped call into the binding stays in here.

    The callbacks are module-level and find their state through the userdata
    handle, so no reference cycle keeps a dropped terminal's native memory alive.
    """

    def __init__(self, columns: int, lines: int) -> None:
        self.replies = _Replies()
        self._term: Any = pyghostty.Terminal(columns, lines, fg=DEFAULT_FOREGROUND,
                                             bg=DEFAULT_BACKGROUND)
        # pyghostty wraps only some options; the rest need its native handle.
        self._handle: Any = self._term._t[0]
        self._userdata: Any = ffi.new_handle(self.replies)
        self._set(lib.GHOSTTY_TERMINAL_OPT_USERDATA, self._userdata, "userdata")
        self._set(lib.GHOSTTY_TERMINAL_OPT_WRITE_PTY, _WRITE_PTY_CALLBACK, "write_pty")
        self._set(lib.GHOSTTY_TERMINAL_OPT_SIZE, _SIZE_CALLBACK, "size")
        self._set(lib.GHOSTTY_TERMINAL_OPT_SCROLLBACK_MAX_LINES, ffi.NULL, "scrollback lines")
        # Nothing here displays images; a zero limit stops kitty graphics (10 MB by
        # default) from being stored, and programs see the protocol as unsupported.
        self._set(lib.GHOSTTY_TERMINAL_OPT_KITTY_IMAGE_STORAGE_LIMIT, ffi.new("uint64_t*", 0),
                  "kitty image storage")
        self._size: Any = ffi.new("size_t*")
        self._u16: Any = ffi.new("uint16_t*")
        self._u64: Any = ffi.new("uint64_t*")
        self._mode_configs: Any = ffi.new("GhosttyTerminalModeConfig[]", len(_MODE_NUMBERS))
        for config, number in zip(self._mode_configs, _MODE_NUMBERS, strict=True):
            config.mode = number  # DEC private modes: the ANSI bit (15) stays clear
        self._kitty_flags: Any = ffi.new("uint8_t*")
        self._screen: Any = ffi.new("GhosttyTerminalScreen*")
        self._ground: Any = ffi.new("bool*")
        data_mode = lib.GHOSTTY_TERMINAL_DATA_MODE
        self._mode_keys: Any = ffi.new(
            "GhosttyTerminalData[]",
            [data_mode] * len(_MODE_NUMBERS)
            + [lib.GHOSTTY_TERMINAL_DATA_KITTY_KEYBOARD_FLAGS,
               lib.GHOSTTY_TERMINAL_DATA_ACTIVE_SCREEN, lib.GHOSTTY_TERMINAL_DATA_VT_GROUND])
        self._mode_values: Any = ffi.new(
            "void*[]", [ffi.addressof(c) for c in self._mode_configs]
            + [self._kitty_flags, self._screen, self._ground])
        self._cluster_mode: Any = ffi.new("GhosttyTerminalModeConfig*")
        self._cluster_mode.mode = _GRAPHEME_MODE
        self._cluster_keys: Any = ffi.new("GhosttyTerminalData[]", [
            lib.GHOSTTY_TERMINAL_DATA_VT_GROUND, data_mode])
        self._cluster_values: Any = ffi.new("void*[]", [self._ground, self._cluster_mode])
        self._row: Any = ffi.new("GhosttyRow*")
        self._flag: Any = ffi.new("bool*")
        self._compression: Any = ffi.new("GhosttyTerminalCompressionResult*")
        self._buf: Any = ffi.new("uint8_t[]", 1 << 16)
        self._format_options: dict[bool, tuple[Any, Any]] = {}
        # GhosttyPoint is a union passed by value, which cffi cannot call directly;
        # pyghostty declares a layout-identical struct twin for it.
        self._grid_ref: Any = union_fn(
            "ghostty_terminal_grid_ref",
            "GhosttyResult(*)(GhosttyTerminal, GhosttyPointS, GhosttyGridRef*)")
        self._point: Any = ffi.new("GhosttyPointS*")
        self._point.tag = lib.GHOSTTY_POINT_TAG_SCREEN
        self._ref: Any = init_sized("GhosttyGridRef")

    def _set(self, option: Any, value: Any, what: str) -> None:
        _check(lib.ghostty_terminal_set(self._handle, option, value), f"set {what}")

    def write(self, data: bytes) -> None:
        lib.ghostty_terminal_vt_write(self._handle, data, len(data))

    def resize(self, columns: int, lines: int) -> None:
        _check(lib.ghostty_terminal_resize(self._handle, columns, lines, CELL_WIDTH_PX,
                                           CELL_HEIGHT_PX), "resize")

    def set_scrollback_bytes(self, budget: int) -> None:
        self._size[0] = budget
        self._set(lib.GHOSTTY_TERMINAL_OPT_SCROLLBACK_MAX_BYTES, self._size, "scrollback bytes")

    def total_rows(self) -> int:
        _check(lib.ghostty_terminal_get(self._handle, lib.GHOSTTY_TERMINAL_DATA_TOTAL_ROWS,
                                        self._size), "total rows")
        return int(self._size[0])

    def scrollback_rows(self) -> int:
        _check(lib.ghostty_terminal_get(self._handle, lib.GHOSTTY_TERMINAL_DATA_SCROLLBACK_ROWS,
                                        self._size), "scrollback rows")
        return int(self._size[0])

    def cursor(self) -> tuple[int, int]:
        _check(lib.ghostty_terminal_get(self._handle, lib.GHOSTTY_TERMINAL_DATA_CURSOR_X,
                                        self._u16), "cursor x")
        x = int(self._u16[0])
        _check(lib.ghostty_terminal_get(self._handle, lib.GHOSTTY_TERMINAL_DATA_CURSOR_Y,
                                        self._u16), "cursor y")
        return x, int(self._u16[0])

    def read_modes(self, modes: TerminalModes) -> bool:
        """Fill ``modes`` from the terminal's mode state in one native call.

        Returns whether the parser is at ground, i.e. not inside a sequence that
        the next output may finish (and so change a mode).
        """
        _check(lib.ghostty_terminal_get_multi(self._handle, len(self._mode_keys), self._mode_keys,
                                              self._mode_values, self._size), "modes")
        c = self._mode_configs  # in _MODE_NUMBERS order
        modes.app_cursor = bool(c[0].value)
        modes.app_keypad = bool(c[1].value)
        modes.focus_reporting = bool(c[2].value)
        modes.bracketed_paste = bool(c[3].value)
        modes.mouse_tracking = (1003 if c[4].value else 1002 if c[5].value
                                else 1000 if c[6].value else 0)
        modes.mouse_sgr = bool(c[7].value)
        modes.kitty_flags = int(self._kitty_flags[0])
        modes.alt_screen = bool(self._screen[0] == lib.GHOSTTY_TERMINAL_SCREEN_ALTERNATE)
        modes.cursor_visible = bool(c[8].value)
        return bool(self._ground[0])

    def may_switch_clusters(self) -> bool:
        """Whether the parser is at ground and the program left mode 2027 off."""
        _check(lib.ghostty_terminal_get_multi(self._handle, 2, self._cluster_keys,
                                              self._cluster_values, self._size), "modes")
        return bool(self._ground[0]) and not self._cluster_mode.value

    def _locate(self, x: int, y: int) -> Any:
        """A grid reference to cell ``(x, y)`` in screen coordinates, reused by the next call."""
        self._point.value.x, self._point.value.y = x, y
        _check(self._grid_ref(self._handle, self._point[0], self._ref), f"grid ref {x},{y}")
        return self._ref

    def wrapped(self, y: int) -> bool:
        """The soft-wrap flag of row ``y`` (screen coordinates: 0 = oldest scrollback row)."""
        _check(lib.ghostty_grid_ref_row(self._locate(0, y), self._row), "grid row")
        _check(lib.ghostty_row_get(self._row[0], lib.GHOSTTY_ROW_DATA_WRAP, self._flag),
               "row wrap")
        return bool(self._flag[0])

    def format_rows(self, first: int, last: int, styled: bool) -> str:
        """Rows ``first..last`` (inclusive, screen coordinates), one per line.

        Plain rows are joined by ``\\n``, styled (SGR) rows by ``\\r\\n``, each
        styled row self-contained. Cells never written to are left out, so a row
        ends at its last printed cell; trailing blank rows are omitted.
        """
        cached = self._format_options.get(styled)
        if cached is None:
            # Sized option structs are costly to build through cffi; one pair is reused.
            options = init_sized("GhosttyFormatterTerminalOptions")
            options.emit = (lib.GHOSTTY_FORMATTER_FORMAT_VT if styled
                            else lib.GHOSTTY_FORMATTER_FORMAT_PLAIN)
            cached = self._format_options[styled] = (init_sized("GhosttySelection"), options)
        selection, options = cached
        selection.start = self._locate(0, first)[0]
        selection.end = self._locate(self._columns() - 1, last)[0]
        options.selection = selection
        formatter = ffi.new("GhosttyFormatter*")
        _check(lib.ghostty_formatter_terminal_new(ffi.NULL, formatter, self._handle,
                                                  options[0]), "formatter")
        try:
            result = lib.ghostty_formatter_format_buf(formatter[0], self._buf, len(self._buf),
                                                      self._size)
            if result == lib.GHOSTTY_OUT_OF_SPACE:
                self._buf = ffi.new("uint8_t[]", int(self._size[0]))
                result = lib.ghostty_formatter_format_buf(formatter[0], self._buf,
                                                          len(self._buf), self._size)
            _check(result, "format")
        finally:
            lib.ghostty_formatter_free(formatter[0])
        return bytes(ffi.buffer(self._buf, self._size[0])).decode("utf-8", "replace")

    def _columns(self) -> int:
        _check(lib.ghostty_terminal_get(self._handle, lib.GHOSTTY_TERMINAL_DATA_COLS,
                                        self._u16), "columns")
        return int(self._u16[0])

    def compression_activity(self) -> int:
        _check(lib.ghostty_terminal_compression_activity(self._handle, self._u64),
               "compression activity")
        return int(self._u64[0])

    def compress_step(self) -> bool:
        """One bounded compression pass; true while more work is pending."""
        _check(lib.ghostty_terminal_compress(
            self._handle, lib.GHOSTTY_TERMINAL_COMPRESSION_MODE_INCREMENTAL,
            self._compression), "compress")
        return bool(self._compression[0] == lib.GHOSTTY_TERMINAL_COMPRESSION_RESULT_PENDING)


# -- the emulator -----------------------------------------------------------------------


class GhosttyEmulator:
    """An :class:`~cmux_core.terminal.emulator.Emulator` backed by libghostty-vt.

    ``scrollback_lines`` is the number of primary-screen rows kept above the
    screen (at least that many; pruning works in whole pages, so a few hundred
    more may be kept). Alternate-screen content never enters scrollback.

    ``scrolled`` counts the rows the main screen has pushed into its scrollback, which
    is how far it scrolled as long as the scrollback is not pruned in the same slice of
    output (a slice in which libghostty drops a page counts only the rows added after
    the drop). libghostty keeps no scroll count of its own, so scrolls of the alternate
    screen, which keeps no history, are not counted; the pyte backend counts both.
    """

    backend = "ghostty"

    def __init__(self, columns: int, lines: int, *, scrollback_lines: int = 10000) -> None:
        self.columns = columns
        self.lines = lines
        self.modes = TerminalModes()
        self.title: str | None = None
        self.cwd: str | None = None
        self.progress: str | None = None
        self._native = _NativeTerminal(columns, lines)
        self._filter = OutputFilter()
        self._osc = OscCapture()
        self._scrollback_lines = scrollback_lines
        self._budget = 0
        self._budget_ceiling = 0
        self._last_scrollback = 0
        self.scrolled = 0
        self._compressed_at: int | None = None
        self._mid_sequence = False
        self._fit_budget()
        self._native.read_modes(self.modes)

    def feed(self, data: bytes) -> None:
        """Absorb output bytes; partial UTF-8 and escape sequences carry over.

        Query answers produced meanwhile wait in :meth:`take_replies`, OSC
        announcements in :meth:`take_signals`; :attr:`modes` is current on return.
        """
        if not data:
            return
        self._filter.write(self._native, data)
        osc = self._osc
        osc.feed(data)
        self.title, self.cwd, self.progress = osc.title, osc.cwd, osc.progress
        if self._mid_sequence or b"\x1b" in data:
            at_ground = self._native.read_modes(self.modes)
            if b"\x1bc" in data:  # RIS
                self.modes.cursor_shape = 0
            if b" q" in data:
                for shape in _DECSCUSR.findall(data):
                    self.modes.cursor_shape = int(shape or 0)
            # A sequence start held back by the filter is finished by a later write.
            self._mid_sequence = not at_ground or self._filter.holding
        if not self.modes.alt_screen:
            rows = self._native.scrollback_rows()
            self.scrolled += max(0, rows - self._last_scrollback)
            self._keep_scrollback_depth(data, rows)

    def resize(self, columns: int, lines: int) -> None:
        """Change the screen size; the primary screen reflows, the byte budget follows."""
        self._native.resize(columns, lines)
        self.columns, self.lines = columns, lines
        self._fit_budget()
        rows = self._native.scrollback_rows()
        if not self.modes.alt_screen:
            self.scrolled += max(0, rows - self._last_scrollback)
        self._last_scrollback = rows

    def visible_rows(self, *, styled: bool = True) -> list[Row]:
        """The ``lines`` rows on screen, top first (``ansi`` empty unless ``styled``)."""
        total = self._native.total_rows()
        return self._rows(total - self.lines, total, styled)

    def history_rows(self, limit: int, *, styled: bool = True) -> tuple[list[Row], int]:
        """The last ``limit`` rows of the active buffer and its total row count."""
        total = self._native.total_rows()
        if limit <= 0:
            return [], total
        return self._rows(max(0, total - limit), total, styled), total

    def history_text(self, limit: int, *, unwrap: bool) -> tuple[list[str], int]:
        total = self._native.total_rows()
        if limit <= 0:
            return [], total
        return self._texts(max(0, total - limit), total, unwrap), total

    def visible_text(self) -> list[str]:
        total = self._native.total_rows()
        return self._texts(total - self.lines, total, unwrap=False)

    def cursor(self) -> tuple[int, int]:
        """Cursor position as ``(column, row)``, zero-based, row 0 = top of the screen."""
        return self._native.cursor()

    def take_replies(self) -> bytes:
        """Answers to DSR, DA1/DA2, DECRQM, kitty ``CSI ? u``, XTVERSION, OSC 4/10/11
        colour and CSI t size queries, in order; cleared."""
        replies = bytes(self._native.replies.data)
        self._native.replies.data.clear()
        return replies

    def take_signals(self) -> list[TerminalSignal]:
        """OSC announcements seen since the last call, oldest first; cleared."""
        return self._osc.take_signals()

    def compress(self) -> bool:
        """Compress cold scrollback pages a bounded step at a time (LZ4 in libghostty).

        Meant for an idle pane: call it after ~250 ms without output, again while
        it returns true. Cheap when nothing changed since the last completed pass.
        Rows stay readable; a read decompresses the pages it touches.
        """
        activity = self._native.compression_activity()
        if activity == self._compressed_at:
            return False
        if self._native.compress_step():
            return True
        self._compressed_at = activity
        return False

    def _rows(self, first: int, end: int, with_style: bool = True) -> list[Row]:
        count = end - first
        if count <= 0:
            return []
        plain = self._native.format_rows(first, end - 1, styled=False).split("\n")[:count]
        styled = (self._native.format_rows(first, end - 1, styled=True).split("\r\n")
                  if with_style else [])
        # The formatter leaves out trailing blank rows.
        plain += [""] * (count - len(plain))
        styled += [""] * (count - len(styled))
        # A soft-wrapped row was written up to its last column, so it holds at least
        # half as many characters as there are columns: shorter rows skip the lookup.
        wrap_floor = self.columns // 2
        wrapped = self._native.wrapped
        rows = []
        for i, (text, ansi) in enumerate(zip(plain, styled, strict=False)):
            if len(text) >= wrap_floor and wrapped(first + i):
                # A wrapped row keeps its trailing spaces: they are part of the logical line.
                rows.append(Row(text, ansi, True))
            else:
                rows.append(Row(text.rstrip(" "), ansi.rstrip(" ") if ansi else ""))
        return rows

    def _texts(self, first: int, end: int, unwrap: bool) -> list[str]:
        count = end - first
        if count <= 0:
            return []
        plain = self._native.format_rows(first, end - 1, styled=False).split("\n")[:count]
        plain += [""] * (count - len(plain))
        if not unwrap:
            return [text.rstrip(" ") for text in plain]
        # Only rows at least half the width long can be soft-wrapped (as in _rows).
        floor, wrapped = self.columns // 2, self._native.wrapped
        return join_wrapped(plain, {i for i, text in enumerate(plain)
                                    if len(text) >= floor and wrapped(first + i)})

    def _fit_budget(self) -> None:
        """Size the scrollback byte budget for the current width, keeping what was learnt."""
        rows = self._scrollback_lines + self.lines
        estimate = rows * (self.columns * _BYTES_PER_CELL + _BYTES_PER_ROW) + _PAGE_SLACK_BYTES
        self._budget_ceiling = estimate * _MAX_BUDGET_FACTOR
        self._set_budget(min(self._budget_ceiling, max(self._budget, estimate)))

    def _set_budget(self, budget: int) -> None:
        self._budget = budget
        self._native.set_scrollback_bytes(budget)

    def _keep_scrollback_depth(self, data: bytes, rows: int) -> None:
        # Pruning drops a whole page, so a fall in the row count while short of the
        # target means the budget is too small for this output's styling and width.
        previous, self._last_scrollback = self._last_scrollback, rows
        if not 0 < rows < min(previous, self._scrollback_lines) \
                or self._budget >= self._budget_ceiling:
            return
        if b"[3J" in data or b"\x1bc" in data:  # cleared by the program, not pruned
            return
        wanted = self._budget * (self._scrollback_lines + previous - rows) // rows
        self._set_budget(min(self._budget_ceiling, 2 * self._budget, wanted))
