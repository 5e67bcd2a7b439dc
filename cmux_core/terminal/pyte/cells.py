"""Cells, lines and rendered rows of the pyte backend, and the widths it gives characters.

A line is pyte's sparse column -> cell map plus a soft-wrap flag; cells of one
style are interned, so drawing allocates nothing new. :func:`render_line` and
:func:`plain_line` turn a line into the :class:`~cmux_core.terminal.emulator.Row` or text that
reads return; :func:`char_width` counts cells as tmux does.
"""

from __future__ import annotations

import functools
import unicodedata
from itertools import groupby
from operator import itemgetter

from pyte.screens import Char, StaticDefaultDict, wcwidth

from cmux_core.terminal.emulator import Row

BLANK = Char(" ")
DEFAULT_STYLE = "default"
# Cells are pyte ``Char`` values whose ``fg`` carries the cell's whole SGR parameter string
# ("1;38;5;208"), or "default"; comparing one string tells whether two cells share a style.
_RESET = "\x1b[0m"
_cell_data = itemgetter(0)
_cell_style = itemgetter(1)


class Line(StaticDefaultDict[int, Char]):
    """One screen line: pyte's sparse column -> cell map plus the soft-wrap flag."""

    __slots__ = ("wrapped",)

    def __init__(self, default: Char) -> None:
        self.default = default
        self.wrapped = False


class _CellCache(dict[str, Char]):
    """Interned cells of one style, so drawing a character allocates nothing new."""

    __slots__ = ("style",)

    def __init__(self, style: str) -> None:
        super().__init__()
        self.style = style

    def __missing__(self, key: str) -> Char:
        # tuple.__new__ skips the namedtuple's Python-level constructor.
        cell = self[key] = tuple.__new__(Char, (key, self.style, *_CHAR_TAIL))
        return cell


_CHAR_TAIL = BLANK[2:]
_CELL_STYLES_MAX = 1024
# Shared by every screen: cells are immutable, and one cache bounds memory per process, not pane.
cell_caches: dict[str, _CellCache] = {}


def cells_for(style: str) -> _CellCache:
    """The interned cells of ``style``; the whole cache is dropped when it holds too many styles."""
    cells = cell_caches.get(style)
    if cells is None:
        if len(cell_caches) >= _CELL_STYLES_MAX:
            cell_caches.clear()
        cells = cell_caches[style] = _CellCache(style)
    return cells


def _sgr_escape(style: str, cache: dict[str, str] = {}) -> str:  # noqa: B006 - memo
    escape = cache.get(style)
    if escape is None:
        escape = cache[style] = _RESET if style == DEFAULT_STYLE else f"\x1b[0;{style}m"
    return escape


def render_line(line: StaticDefaultDict[int, Char] | None, columns: int) -> Row:
    """Render one screen line: text trimmed unless wrapped, ANSI up to the last styled cell."""
    if not line:
        return Row("", "", bool(line is not None and getattr(line, "wrapped", False)))
    wrapped: bool = getattr(line, "wrapped", False)
    end = columns if wrapped else min(max(line) + 1, columns)
    cells = list(map(line.__getitem__, range(end)))
    text = "".join(map(_cell_data, cells))
    if not wrapped:
        text = text.rstrip(" ")
    styles = set(map(_cell_style, cells))
    if len(styles) == 1 and DEFAULT_STYLE in styles:
        return Row(text, text, wrapped)
    last = len(cells)
    if not wrapped:
        while last and cells[last - 1].fg == DEFAULT_STYLE and cells[last - 1].data in " ":
            last -= 1
    parts: list[str] = []
    for style, run in groupby(cells[:last], _cell_style):
        parts.append(_sgr_escape(style))
        parts.append("".join(map(_cell_data, run)))
    if parts and parts[0] == _RESET:
        del parts[0]
    if cells[last - 1].fg != DEFAULT_STYLE:
        parts.append(_RESET)
    return Row(text, "".join(parts), wrapped)


def plain_line(line: StaticDefaultDict[int, Char] | None, columns: int) -> tuple[str, bool]:
    """One screen line's text (full width when soft-wrapped) and its wrap flag."""
    if not line:
        return "", bool(line is not None and getattr(line, "wrapped", False))
    wrapped: bool = getattr(line, "wrapped", False)
    end = columns if wrapped else min(max(line) + 1, columns)
    return "".join([line[x].data for x in range(end)]), wrapped


_TMUX_WIDTHS = {
    **{chr(c): 1 for c in range(0x1F1E6, 0x1F200)},  # regional indicators: a flag is two
    **{chr(c): 1 for c in range(0x2630, 0x2638)},  # trigrams
    **{chr(c): 1 for c in range(0x268A, 0x2690)},  # monograms and digrams
    **{chr(c): 2 for c in range(0x3248, 0x3250)},  # circled numbers on black squares
    "\u302e": 2, "\u302f": 2, "\u3164": 2,  # Hangul tone marks, Hangul filler
    "\uffa0": 1,  # halfwidth Hangul filler
}
"""Where tmux 3.3a (the C library's tables) and the wcwidth package disagree, besides
spacing combining marks (see :func:`char_width`)."""


@functools.lru_cache(maxsize=8192)
def char_width(char: str) -> int:
    """The cells ``char`` takes as tmux counts them: a spacing combining mark (a
    Devanagari vowel sign, say) takes one, where the wcwidth package gives none."""
    width = _TMUX_WIDTHS.get(char)
    if width is not None:
        return width
    width = wcwidth(char)
    if width == 0 and unicodedata.category(char) == "Mc":
        return 1
    return int(width)


def char_widths(data: str) -> list[int]:
    """Cell widths of ``data``'s characters as tmux counts them."""
    return list(map(char_width, data))
