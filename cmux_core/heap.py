"""The cycle collector at scale: full passes that walk only what is new.

A full pass of Python's cycle collector walks every tracked object. With a thousand panes
that is over a hundred thousand objects (panes, terminals, emulators, their handles and
kept rows) and 40 to 150 ms with the loop held, and such a pass comes every few dozen list
calls: the longest stall a client sees. Almost all of those objects live as long as their
pane, so :class:`HeapKeeper` moves what exists into the collector's permanent generation
(``gc.freeze``) once the session has been quiet for :data:`SETTLE_S`; full passes then
walk only the objects made since, and cost next to nothing.

Frozen objects are never freed by the collector, only by reference counting. Garbage
cycles among them (a closed pane and its terminal, a plugin's unloaded module) would stay,
so a release (a pane closed, a plugin unloaded) asks for one full pass over everything,
``gc.unfreeze`` then ``gc.collect``, :data:`RELEASE_S` after the last of a burst of them,
and freezes again after it. :meth:`collect` does the same at once (``server.stats``, which
counts closed panes still in memory).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time

__all__ = ["RELEASE_S", "SETTLE_S", "HeapKeeper"]

log = logging.getLogger(__name__)

SETTLE_S = 2.0
"""Seconds without new long-lived objects (panes made) before what exists is frozen."""
RELEASE_S = 2.0
"""Seconds from the last release of a burst (panes closed) to its full pass."""


class HeapKeeper:
    """Freezes the long-lived heap when the session settles and collects it after releases.

    The composition root calls :meth:`grown` when something long-lived was made and
    :meth:`released` when something was dropped; both only arm a timer on the loop, so a
    burst of a thousand new panes costs one freeze and a burst of closes one full pass.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._freeze: asyncio.TimerHandle | None = None
        self._collect: asyncio.TimerHandle | None = None
        self.freezes = 0
        self.passes = {"released": 0, "asked": 0}
        """Full passes over everything: after releases, and asked for (:meth:`collect`)."""
        self.last_pass_ms = 0.0
        """How long the last full pass over everything held the loop."""

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.grown()

    def stop(self) -> None:
        for timer in (self._freeze, self._collect):
            if timer is not None:
                timer.cancel()
        self._freeze = self._collect = None
        self._loop = None

    def grown(self) -> None:
        """Something long-lived was made: freeze once the session has been quiet."""
        if self._loop is None:
            return
        if self._freeze is not None:
            self._freeze.cancel()
        self._freeze = self._loop.call_later(SETTLE_S, self._settled)

    def released(self) -> None:
        """Something long-lived was dropped: a full pass once the burst is over."""
        if self._loop is None:
            return
        if self._collect is not None:
            self._collect.cancel()
        self._collect = self._loop.call_later(RELEASE_S, self._full_pass, "released")

    def collect(self) -> int:
        """One full pass over every object, frozen or not, then freeze what is left;
        returns what the collector found unreachable."""
        return self._full_pass("asked")

    def _full_pass(self, why: str) -> int:
        if self._collect is not None:
            self._collect.cancel()
            self._collect = None
        start = time.perf_counter()
        gc.unfreeze()
        found = gc.collect()
        if self._loop is not None:
            self._freeze_now()
        self.passes[why] += 1
        self.last_pass_ms = (time.perf_counter() - start) * 1000
        return found

    def summary(self) -> dict[str, object]:
        return {"frozen": gc.get_freeze_count(), "freezes": self.freezes,
                "full_passes": dict(self.passes), "last_pass_ms": round(self.last_pass_ms, 1)}

    def _settled(self) -> None:
        self._freeze = None
        self._freeze_now()

    def _freeze_now(self) -> None:
        gc.collect(1)  # the young garbage, so little of it is frozen
        gc.freeze()
        self.freezes += 1
        log.debug("froze %d objects", gc.get_freeze_count())
