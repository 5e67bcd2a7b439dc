"""Typed events and the hub that fans them out.

An event is a snake_case ``kind`` (``pane_created``) with a ``data`` dict whose
``type`` repeats the kind; clients subscribe with the dotted name
(``pane.created``). :meth:`EventHub.publish` never awaits and never blocks: each
subscriber has a bounded queue, and one that falls behind is dropped with a
final ``subscription_overflow`` line instead of slowing anyone down.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

SUBSCRIBER_QUEUE_LIMIT = 4096
"""Events a subscriber may have queued before it is dropped."""

EVENT_KINDS = (
    "workspace_created", "workspace_updated", "workspace_metadata_updated", "workspace_closed",
    "workspace_renamed", "workspace_moved", "workspace_reordered", "workspace_focused",
    "tab_created", "tab_closed", "tab_renamed", "tab_moved", "tab_focused",
    "pane_created", "pane_closed", "pane_updated", "pane_focused", "pane_moved", "pane_exited",
    "pane_agent_detected", "pane_agent_status_changed", "layout_updated",
    "pane_output_changed", "pane_title_changed", "pane_cwd_changed", "pane_progress_changed",
    "pane_notification", "plugin_loaded", "plugin_unloaded", "plugin_error",
    "server_manifests_reloaded", "agent_view_changed",
)
"""Every generic event kind; subscribe with the dotted form (``pane.created``)."""


def dotted(kind: str) -> str:
    """``pane_agent_status_changed`` → ``pane.agent_status_changed``."""
    head, _, rest = kind.partition("_")
    return f"{head}.{rest}" if rest else kind


SUBSCRIBABLE = {dotted(k): k for k in EVENT_KINDS}


@dataclass(slots=True)
class Event:
    seq: int
    kind: str
    data: dict[str, Any]


@dataclass(eq=False)
class Subscriber:
    """One listener. ``wanted`` holds kinds; None means every kind.

    The queue is drained by the listener's own task; :attr:`overflowed` is set
    (and ``wakeup`` fired) when it went past its limit.
    """

    wanted: set[str] | None
    limit: int = SUBSCRIBER_QUEUE_LIMIT
    queue: deque[Event] = field(default_factory=deque)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    overflowed: bool = False
    closed: bool = False

    def offer(self, event: Event) -> None:
        if self.closed or self.overflowed:
            return
        if self.wanted is not None and event.kind not in self.wanted:
            return
        if len(self.queue) >= self.limit:
            self.overflowed = True
            self.queue.clear()
        else:
            self.queue.append(event)
        self.wakeup.set()

    async def next_batch(self) -> list[Event]:
        """Wait until something is queued (or overflow); return and clear the queue."""
        while not self.queue and not self.overflowed and not self.closed:
            self.wakeup.clear()
            await self.wakeup.wait()
        batch = list(self.queue)
        self.queue.clear()
        return batch


class EventHub:
    """Publishes events to subscribers and to synchronous observers (plugins, agents)."""

    def __init__(self) -> None:
        self._seq = 0
        self._subscribers: set[Subscriber] = set()
        self._observers: list[Callable[[str, dict[str, Any]], None]] = []

    @property
    def seq(self) -> int:
        return self._seq

    def publish(self, kind: str, data: dict[str, Any]) -> None:
        """Deliver an event now. ``data`` gains ``type``; it must not be mutated later."""
        self._seq += 1
        data.setdefault("type", kind)
        event = Event(self._seq, kind, data)
        for sub in list(self._subscribers):
            sub.offer(event)
        for observer in list(self._observers):
            try:
                observer(kind, data)
            except Exception:
                log.exception("event observer failed on %s", kind)

    def subscribe(self, kinds: set[str] | None, limit: int = SUBSCRIBER_QUEUE_LIMIT) -> Subscriber:
        sub = Subscriber(kinds, limit)
        self._subscribers.add(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        sub.closed = True
        sub.wakeup.set()
        self._subscribers.discard(sub)

    def observe(self, observer: Callable[[str, dict[str, Any]], None]) -> None:
        """Call ``observer(kind, data)`` synchronously for every event; it must not block."""
        self._observers.append(observer)

    def subscriber_count(self) -> int:
        return len(self._subscribers)
