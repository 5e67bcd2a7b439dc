"""The event loop's lateness as clients see it, for ``server.stats``."""

from __future__ import annotations

import asyncio
from collections import deque


class LoopMonitor:
    """Measures how late the event loop runs a timer: the worst stall any client saw.

    While armed, one wake-up every :attr:`interval` seconds; keeps the last ``keep``
    lateness samples. Each request pokes it (:meth:`poke`); it disarms itself after
    :attr:`linger` seconds without one, so an idle server is not woken by it.
    """

    def __init__(self, interval: float = 0.1, keep: int = 600, linger: float = 5.0) -> None:
        self.interval = interval
        self.linger = linger
        self.samples: deque[float] = deque(maxlen=keep)
        self.worst = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._poked = 0.0
        self._running = False

    def start(self) -> None:
        self._running = True
        self.poke()

    def stop(self) -> None:
        self._running = False
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def poke(self) -> None:
        """Something happened that a client waits on: measure for the next while."""
        if not self._running:
            return
        loop = asyncio.get_running_loop()
        self._poked = loop.time()
        if self._handle is None:
            self._due = self._poked + self.interval
            self._handle = loop.call_at(self._due, self._tick)

    def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        late = max(0.0, now - self._due)
        self.samples.append(late)
        self.worst = max(self.worst, late)
        if now - self._poked > self.linger:
            self._handle = None
            return
        self._due = now + self.interval
        self._handle = loop.call_at(self._due, self._tick)

    def summary(self) -> dict[str, float]:
        ordered = sorted(self.samples)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else 0.0
        return {"max_ms": round(self.worst * 1000, 3), "p99_ms": round(p99 * 1000, 3),
                "recent_max_ms": round((ordered[-1] if ordered else 0.0) * 1000, 3)}
