"""Memos of what listing every pane reads again and again: a tab's pane rectangles, a
terminal's foreground directory and the name a workspace gets from its directory.

A tab's rectangles are worked out from its split tree (immutable: every change makes a new
one), its zoom and focus and the mux's area, so they are kept while all four are the same.
A foreground directory comes from ``/proc`` (two system calls per terminal); it is kept
while the terminal has printed nothing new, for at most :data:`FOREGROUND_CWD_TTL_S`, since
a program changing directory usually prints (a prompt) and otherwise is seen that much later.
A directory's name (:func:`~cmux_core.model.tree.auto_label`, which looks for ``.git`` in
it and every parent) is kept for :data:`AUTO_LABEL_TTL_S`: a repository made or removed
is seen that much later.
"""

from __future__ import annotations

import time
from weakref import WeakKeyDictionary

from cmux_core.model import layout
from cmux_core.model.tree import Tab, auto_label
from cmux_core.terminal import procfs
from cmux_core.terminal.process import Terminal

__all__ = ["AUTO_LABEL_TTL_S", "FOREGROUND_CWD_TTL_S", "Readings"]

FOREGROUND_CWD_TTL_S = 1.0
"""Longest a terminal's foreground directory is reused while the terminal prints nothing."""
AUTO_LABEL_TTL_S = 2.0
"""Longest a directory's workspace name is reused."""
AUTO_LABEL_KEEP = 4096
"""Directories whose name is kept at most (the oldest go first)."""


class Readings:
    """The memos of one mux; entries go with their tab or terminal."""

    def __init__(self) -> None:
        self._rects: WeakKeyDictionary[
            Tab, tuple[object, layout.Rect, bool, str | None, dict[str, layout.Rect]]
        ] = WeakKeyDictionary()
        self._cwds: WeakKeyDictionary[Terminal, tuple[int, float, str | None]] = (
            WeakKeyDictionary())
        self._labels: dict[str, tuple[float, str]] = {}

    def pane_rects(self, tab: Tab, area: layout.Rect) -> dict[str, layout.Rect]:
        """Each pane's rectangle in ``tab`` (the zoomed pane alone gets all of ``area``);
        the caller must not change the dict."""
        kept = self._rects.get(tab)
        if kept is not None and kept[0] is tab.tree and kept[1] == area \
                and kept[2] == tab.zoomed and kept[3] == tab.focused:
            return kept[4]
        rects = {tab.focused: area} if tab.zoomed else layout.rects(tab.tree, area)
        self._rects[tab] = (tab.tree, area, tab.zoomed, tab.focused, rects)
        return rects

    def foreground_cwd(self, term: Terminal) -> str | None:
        """Where ``term``'s foreground program works (None when it cannot be read)."""
        now = time.monotonic()
        kept = self._cwds.get(term)
        if kept is not None and kept[0] == term.output_seq and now - kept[1] < \
                FOREGROUND_CWD_TTL_S:
            return kept[2]
        pgid = term.foreground_pgid()
        cwd = procfs.cwd(pgid) if pgid is not None else None
        self._cwds[term] = (term.output_seq, now, cwd)
        return cwd

    def auto_label(self, cwd: str) -> str:
        """The name a workspace in ``cwd`` gets when it has none
        (:func:`~cmux_core.model.tree.auto_label`), read again after
        :data:`AUTO_LABEL_TTL_S`."""
        now = time.monotonic()
        kept = self._labels.get(cwd)
        if kept is not None and now - kept[0] < AUTO_LABEL_TTL_S:
            return kept[1]
        label = auto_label(cwd)
        self._labels.pop(cwd, None)
        if len(self._labels) >= AUTO_LABEL_KEEP:
            del self._labels[next(iter(self._labels))]
        self._labels[cwd] = (now, label)
        return label
