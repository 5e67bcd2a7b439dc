"""Waits on agent events that end when the client leaves: the hub subscription, its batches,
deadlines, and the ``pending_waits`` count.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from cmux_core.api.context import Peer, ServerInfo
from cmux_core.events import EventHub, Published, Subscriber

STATUS_NAMES = ("idle", "working", "blocked", "done", "unknown")


WATCH_KINDS = frozenset({"surface_agent_status_changed", "surface_agent_detected",
                         "pane_closed", "pane_exited", "pane_moved", "pane_updated"})


@contextmanager
def watching(events: EventHub, kinds: frozenset[str] = WATCH_KINDS) -> Iterator[Subscriber]:
    """A hub subscription to ``kinds`` (default: the events of agent terminals), always
    released (also on cancel)."""
    sub = events.subscribe(set(kinds))
    try:
        yield sub
    finally:
        events.unsubscribe(sub)


async def next_batch(sub: Subscriber, deadline: float | None) -> list[Published]:
    """The next queued events; TimeoutError at ``deadline`` (monotonic seconds)."""
    remaining = None if deadline is None else deadline - time.monotonic()
    if remaining is not None and remaining <= 0:
        raise TimeoutError
    async with asyncio.timeout(remaining):
        return await sub.next_batch()


def deadline_of(timeout_ms: int | None) -> float | None:
    return None if timeout_ms is None else time.monotonic() + timeout_ms / 1000


async def served(info: ServerInfo, peer: Peer | None, coro: Any) -> Any:
    """Run a wait for ``peer``, counted in ``server.stats`` ``pending_waits`` and cancelled
    (leaving nothing behind) if the client goes away."""
    info.pending_waits += 1
    try:
        if peer is None:
            return await coro
        return await peer.until_gone(coro)
    finally:
        info.pending_waits -= 1
