"""Regions: the slices of a screen (or of the OSC strings) that rules look at.

A :class:`ScreenView` wraps one detection input and computes the line table, the prompt
markers and the horizontal rules once, lazily, whatever number of rules ask for them.

Line handling follows the manifest format exactly: the screen is split like Rust's
``str::lines()`` (on ``\\n``, one trailing ``\\r`` dropped, no empty final line after a
trailing ``\\n``), offsets assume every line is followed by one ``\\n``, and a line is
blank when it is empty after stripping whitespace.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property

from cmux_core.detect.manifest import Region

PROMPT = "\u203a"  # the codex composer prompt
BLOCK_MARKERS = ("•", "■", "✗", "✓")
HR_CHAR = "─"


def split_lines(text: str) -> list[str]:
    """``text`` split like Rust ``str::lines()``."""
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def is_prompt_line(line: str) -> bool:
    """The codex composer line: exactly U+203A or U+203A followed by a space."""
    return line == PROMPT or line.startswith(PROMPT + " ")


def is_block_marker_line(line: str) -> bool:
    """A codex history cell's first line (``•``, ``■``, ``✗`` or ``✓`` at column 0)."""
    return line.startswith(BLOCK_MARKERS)


def is_horizontal_rule(line: str) -> bool:
    """A line of ``─`` box drawing: only ``─``, or a run of at least three followed by a label
    (``───── (bypass permissions on) ─``)."""
    trimmed = line.strip()
    if not trimmed.startswith(HR_CHAR):
        return False
    run = len(trimmed) - len(trimmed.lstrip(HR_CHAR))
    return not trimmed[run:].lstrip() or run >= 3


class ScreenView:
    """One detection input with the per-screen facts regions are cut from."""

    def __init__(self, screen: str, title: str = "", progress: str = "") -> None:
        self.screen = screen
        self.title = title
        self.progress = progress

    @cached_property
    def lines(self) -> list[str]:
        return split_lines(self.screen)

    @cached_property
    def starts(self) -> list[int]:
        """Offset of each line, plus one past the last line's ``\\n`` at the end."""
        starts = [0]
        for line in self.lines:
            starts.append(starts[-1] + len(line) + 1)
        return starts

    @cached_property
    def non_blank(self) -> list[int]:
        return [i for i, line in enumerate(self.lines) if line.strip()]

    def _last(self, test: Callable[[str], object], stop: int) -> int | None:
        """The index of the last of the lines before ``stop`` that passes ``test``."""
        return next((i for i in range(stop - 1, -1, -1) if test(self.lines[i])), None)

    @cached_property
    def last_prompt(self) -> int | None:
        return self._last(is_prompt_line, len(self.lines))

    @cached_property
    def current_prompt(self) -> int | None:
        """The last prompt line when no block marker line follows it."""
        last = self.last_prompt
        if last is None:
            return None
        if any(is_block_marker_line(line) for line in self.lines[last + 1:]):
            return None
        return last

    @cached_property
    def current_block_marker(self) -> int | None:
        current = self.current_prompt
        return None if current is None else self._last(is_block_marker_line, current)

    @cached_property
    def rules(self) -> list[int]:
        """Indices of horizontal-rule lines, top to bottom."""
        return [i for i, line in enumerate(self.lines) if HR_CHAR in line
                and is_horizontal_rule(line)]

    def _from(self, index: int) -> str:
        return self.screen[self.starts[index]:]

    def _to(self, index: int) -> str:
        return self.screen[:self.starts[index]]

    def region(self, region: Region) -> str:
        """The text ``region`` selects from this input."""
        kind = region.kind
        lines = self.lines
        if kind == "whole_recent":
            return self.screen
        if kind == "osc_title":
            return self.title
        if kind == "osc_progress":
            return self.progress
        if kind == "bottom_lines":
            return self._from(max(len(lines) - region.count, 0))
        if kind == "bottom_non_empty_lines":
            if region.count == 0 or not self.non_blank:
                return ""
            return self._from(self.non_blank[-region.count:][0])
        if kind == "top_non_empty_lines":
            if len(self.non_blank) < region.count:
                return self.screen
            return self._to(self.non_blank[region.count - 1] + 1)
        if kind == "after_last_prompt_marker":
            last = self.last_prompt
            return self.screen if last is None else self._from(last + 1)
        if kind == "before_current_prompt_marker":
            current = self.current_prompt
            return self.screen if current is None else self._to(current)
        if kind == "whole_recent_without_current_prompt_marker":
            return self.screen if self.current_prompt is None else ""
        if kind == "current_prompt_block_marker":
            marker = self.current_block_marker
            return "" if marker is None else lines[marker]
        if kind == "after_current_prompt_block_marker":
            marker = self.current_block_marker
            return "" if marker is None else self._from(marker)
        if kind == "after_last_horizontal_rule":
            return self._from(self.rules[-1] + 1) if self.rules else self.screen
        if kind == "prompt_box_body":
            if len(self.rules) < 2:
                return ""
            return self.screen[self.starts[self.rules[-2] + 1]:self.starts[self.rules[-1]]]
        if kind == "above_prompt_box":
            return self._to(self.rules[-2]) if len(self.rules) >= 2 else self.screen
        if kind == "last_non_empty_above_prompt_box":
            found = self._last(str.strip, self.rules[-2] if len(self.rules) >= 2 else len(lines))
            return "" if found is None else lines[found]
        raise ValueError(f"unknown region kind {kind!r}")
