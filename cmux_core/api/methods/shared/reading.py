"""Reading a pane's text and waiting for lines in it: ``pane.read``, ``pane.wait_for_output``,
``agent.read``, ``events.wait`` and the ``pane.output_matched`` subscription.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from cmux_core.detect.pattern import Pattern, compile_pattern
from cmux_core.errors import CmuxError
from cmux_core.hookspecs import Params
from cmux_core.model.tree import Pane, Surface

STRIP_ANSI = Field(True, description=(
    "accepted for compatibility with herdr clients and ignored: format decides "
    "(text is plain, ansi keeps escape sequences)"))


MAX_READ_LINES = 1000


DEFAULT_READ_LINES = 80


WAIT_RECHECK_S = 0.01
"""Least time between two re-reads of one waiter while output keeps flowing."""


WAIT_BURST = 8
"""Quick wakes a waiter serves at once before pacing itself."""


ReadSource = Literal["visible", "recent", "recent_unwrapped", "detection"]


def _at_most_max(lines: int | None) -> int | None:
    return None if lines is None else min(lines, MAX_READ_LINES)


ReadLines = Annotated[int | None, Field(ge=0), AfterValidator(_at_most_max)]
"""How many lines a read returns; more than :data:`MAX_READ_LINES` reads that many."""


class ReadOptions(Params):
    """The params of a screen read that say what it returns (its target is the subclass's)."""

    source: ReadSource = "visible"
    lines: ReadLines = None
    format: Literal["text", "ansi"] = "text"
    strip_ansi: bool = STRIP_ANSI


def read_result(pane: Pane, source: ReadSource, lines: int | None,
                fmt: Literal["text", "ansi"], surface: Surface | None = None) -> dict[str, Any]:
    """A ``pane.read`` result of the pane's terminal, or of ``surface``'s (one of its tabs)."""
    term = surface.terminal if surface is not None else pane.terminal
    text, truncated = term.read(source, lines, fmt)
    return {"pane_id": pane.id, "workspace_id": pane.tab.workspace.id, "tab_id": pane.tab.id,
            "source": source, "format": fmt, "text": text, "revision": 0,
            "truncated": truncated}


class OutputMatch(Params):
    type: Literal["substring", "regex"]
    value: str


REGEX_INLINE_COST = 1 << 19
"""Largest ``characters * program size`` of a regex search run on the event loop; a
costlier search runs on a thread of its own (RE2 lets go of the GIL while it matches),
so a pattern that is slow on a long read delays only the wait that asked for it."""


class LineFinder:
    """Finds the first line of a read that matches one ``match`` (see :func:`line_matcher`)."""

    def __init__(self, find: Callable[[str], str | None], pattern: Pattern | None = None) -> None:
        self._find = find
        self._size = 0 if pattern is None else pattern.size

    def __call__(self, text: str) -> str | None:
        """The first matching line of ``text``, searched on the calling thread."""
        return self._find(text)

    async def find(self, text: str) -> str | None:
        """The first matching line of ``text``; a search that may be long (see
        REGEX_INLINE_COST) runs on a daemon thread while the loop serves others.
        Cancelling abandons its result: the thread ends when its search does."""
        if len(text) * self._size <= REGEX_INLINE_COST:
            return self._find(text)
        return await _on_thread(self._find, text)


async def _on_thread(find: Callable[[str], str | None], text: str) -> str | None:
    # A daemon thread, not the loop's executor: that one is joined when the server stops,
    # which would hold a SIGTERM until the search ends.
    loop = asyncio.get_running_loop()
    done: asyncio.Future[str | None] = loop.create_future()

    def deliver(line: str | None, error: Exception | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(line)

    def run() -> None:
        line, error = None, None
        try:
            line = find(text)
        except Exception as exc:
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop has closed meanwhile
            loop.call_soon_threadsafe(deliver, line, error)

    threading.Thread(target=run, name="cmux-regex-search", daemon=True).start()
    return await done


def line_matcher(match: OutputMatch) -> LineFinder:
    """A finder of the first line of a read that matches; ``invalid_regex`` for a
    pattern that does not compile. A regex is in the Rust dialect and runs on RE2
    (:mod:`cmux_core.detect.pattern`): a search is linear in the line's length.

    Lines are split on ``\n`` with one trailing ``\r`` removed. A substring is
    looked for in the whole text first, so a read without it costs one scan.
    """
    if match.type == "substring":
        value = match.value
        if not value or "\r" in value:
            return LineFinder(lambda text: first_match(text, lambda line: value in line))
        if "\n" in value:
            return LineFinder(lambda text: None)
        return LineFinder(lambda text: _line_at(text, text.find(value)))
    try:
        pattern = compile_pattern(match.value)
    except ValueError as exc:
        raise CmuxError("invalid_regex", f"match.value: invalid regex: {exc}",
                        {"field": "match.value"}) from None
    return LineFinder(lambda text: first_match(text, pattern.search), pattern)


def _line_at(text: str, at: int) -> str | None:
    """The line holding offset ``at`` of ``text`` (``None`` for -1), without its ``\r``."""
    if at < 0:
        return None
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    return text[start:end if end >= 0 else len(text)].removesuffix("\r")


def first_match(text: str, matches: Callable[[str], bool]) -> str | None:
    for line in text.split("\n"):
        line = line.removesuffix("\r")
        if matches(line):
            return line
    return None


async def next_output(changed: asyncio.Event, checked: float, burst: int,
                      timeout: float | None = None) -> int:
    """Wait until ``changed`` fires (TimeoutError after ``timeout`` seconds).

    Wakes return at once unless output has kept coming: after WAIT_BURST quick wakes
    in a row, each returns no sooner than WAIT_RECHECK_S after ``checked``, so a
    flooding pane cannot make its readers burn the loop, while short exchanges are
    seen batch by batch. Returns the new count of quick wakes (``burst``).
    """
    async with asyncio.timeout(timeout):
        await changed.wait()
    elapsed = time.monotonic() - checked
    if elapsed >= WAIT_RECHECK_S:
        return 0
    if burst >= WAIT_BURST:
        await asyncio.sleep(WAIT_RECHECK_S - elapsed)
    return burst + 1
