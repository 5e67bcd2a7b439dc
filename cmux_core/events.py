"""Typed events and the hub that fans them out.

An event is a frozen dataclass deriving from :class:`Event`, made where the change
happens and carrying the domain objects and values it is about: the model's events are in
``cmux_core.model.events``, the agents' in ``cmux_core.agents.events`` (and
``cmux_core.agents.views``), the plugin host's in ``cmux_core.plugin_host.events``. Its
``kind`` is the snake_case wire name (``pane_created``); clients subscribe with the dotted
name (``pane.created``). A :class:`Notice` is the same for what one part of the server tells
others and no client ever sees (a tab shown to the user, a terminal started): it has no
wire form and no number.

JSON exists only at the API edge. The composition root gives the hub one
:data:`Projection` (``cmux_core.api.wire``), which turns an event into its wire ``data``;
the hub calls it once per event, at publish time, so every subscriber's line and every
observer of :class:`Published` (plugins' ``cmux_on_event``) reports the state as it was
when the event happened, and later changes never alter it. ``data["type"]`` repeats the
kind.

Reactions are registered in one way, :meth:`EventHub.observe`, by the composition root:
an observer of a class gets each event or notice of that class (or a subclass) as the typed
object, an observer of :class:`Published` gets each event's wire form.

:meth:`EventHub.publish` never awaits and never blocks: each subscriber has a bounded
queue, and one that falls behind is dropped with a final ``subscription_overflow`` line
instead of slowing anyone down.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar, dataclass_transform

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
    "surface_agent_detected", "surface_agent_status_changed",
    "machine_state_changed", "machine_removed",
)
"""Every generic event kind; subscribe with the dotted form (``pane.created``)."""


def dotted(kind: str) -> str:
    """``pane_agent_status_changed`` → ``pane.agent_status_changed``."""
    head, _, rest = kind.partition("_")
    return f"{head}.{rest}" if rest else kind


SUBSCRIBABLE = {dotted(k): k for k in EVENT_KINDS}


class Event:
    """Base of every typed event: subclasses are frozen dataclasses declared with
    :func:`event`, which sets ``kind`` (one of :data:`EVENT_KINDS`)."""

    __slots__ = ()
    kind: ClassVar[str]


class Notice:
    """Base of every notice: what one part of the server tells others (subclasses are frozen
    dataclasses declared with :func:`notice`). Observed like an event, but never numbered,
    projected or sent to a client."""

    __slots__ = ()


_E = TypeVar("_E", bound=Event)
_N = TypeVar("_N", bound=Notice)


@dataclass_transform(frozen_default=True)
def event(kind: str) -> Callable[[type[_E]], type[_E]]:
    """Class decorator declaring an event: the class becomes a frozen, slotted dataclass of
    its annotated fields, with wire kind ``kind`` (one of :data:`EVENT_KINDS`)."""
    def declare(cls: type[_E]) -> type[_E]:
        cls.kind = kind
        return dataclass(frozen=True, slots=True)(cls)
    return declare


@dataclass_transform(frozen_default=True)
def notice(cls: type[_N]) -> type[_N]:
    """Class decorator declaring a notice: a frozen, slotted dataclass of its fields."""
    return dataclass(frozen=True, slots=True)(cls)


Projection = Callable[[Event], dict[str, Any]]
"""An event's wire ``data`` (without ``type``), built from the state at the call."""


@dataclass(slots=True)
class Published:
    """One event as subscribers receive it: its number, kind and wire data (``data`` includes
    ``type``; an observer must not change it)."""

    seq: int
    kind: str
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Prepared:
    """An event whose wire data was fixed by :meth:`EventHub.prepare`, to publish later."""

    event: Event
    data: dict[str, Any] | None


@dataclass(eq=False)
class Subscriber:
    """One subscriber (a client's event stream). ``wanted`` holds kinds; None means every
    kind.

    The queue is drained by the subscriber's own task; :attr:`overflowed` is set
    (and ``wakeup`` fired) when it went past its limit.
    """

    wanted: set[str] | None
    limit: int = SUBSCRIBER_QUEUE_LIMIT
    queue: deque[Published] = field(default_factory=deque)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    overflowed: bool = False
    closed: bool = False
    tag: dict[str, Any] | None = None
    """Fields added, for this subscriber alone, to every event's wire data that does not
    hold them already (the ``machine`` of a stream merged from several machines)."""

    def wants(self, kind: str) -> bool:
        return not (self.closed or self.overflowed) and (
            self.wanted is None or kind in self.wanted)

    def offer(self, event: Published) -> None:
        if not self.wants(event.kind):
            return
        if len(self.queue) >= self.limit:
            self.overflowed = True
            self.queue.clear()
        else:
            self.queue.append(event)
        self.wakeup.set()

    async def ready(self) -> None:
        """Wait until something is queued, the queue overflowed or the subscriber closed."""
        while not self.queue and not self.overflowed and not self.closed:
            self.wakeup.clear()
            await self.wakeup.wait()

    async def next_batch(self) -> list[Published]:
        """Wait until something is queued (or overflow); return and clear the queue."""
        await self.ready()
        batch = list(self.queue)
        self.queue.clear()
        return batch


Observed = TypeVar("Observed", bound=Event | Notice | Published)


@dataclass(frozen=True, slots=True)
class _Observer:
    call: Callable[[Any], None]
    wire: bool
    """Called with the event's :class:`Published` form instead of the event."""


class EventHub:
    """Publishes typed events to subscribers (as wire lines) and to synchronous observers.

    ``project`` builds an event's wire data. Without it, subscribers and observers of
    :class:`Published` receive nothing.
    """

    def __init__(self, project: Projection | None = None) -> None:
        self._project = project
        self._seq = 0
        self._subscribers: set[Subscriber] = set()
        self._observers: list[tuple[type, _Observer]] = []
        self._routes: dict[type, tuple[_Observer, ...]] = {}
        """The observers of each published class, in the order they were registered."""

    @property
    def seq(self) -> int:
        return self._seq

    def prepare(self, event: Event) -> Prepared:
        """Fix ``event``'s wire data now, for a publisher that reports the state before the
        rest of a change (a closing workspace as it was before its panes closed)."""
        return Prepared(event, self._wire(event))

    def publish(self, event: Event | Notice | Prepared) -> None:
        """Deliver an event now: its wire data (built here unless prepared, and only when
        someone receives it) to subscribers, then to its observers in the order they were
        registered. A notice goes to its observers only."""
        if isinstance(event, Notice):
            self._deliver(event, self._route(type(event)), None)
            return
        data = None
        if isinstance(event, Prepared):
            data = event.data
            event = event.event
        self._seq += 1
        kind = event.kind
        route = self._route(type(event))
        receivers = [sub for sub in self._subscribers if sub.wants(kind)]
        if data is None and (receivers or any(o.wire for o in route)):
            data = self._wire(event)
        published = Published(self._seq, kind, data) if data is not None else None
        if published is not None:
            for sub in receivers:
                sub.offer(published)
        self._deliver(event, route, published)

    def _deliver(self, event: Event | Notice, route: tuple[_Observer, ...],
                 published: Published | None) -> None:
        for observer in route:
            if observer.wire and published is None:
                continue
            try:
                observer.call(published if observer.wire else event)
            except Exception:
                log.exception("event observer failed on %s", getattr(
                    event, "kind", type(event).__name__))

    def _route(self, cls: type) -> tuple[_Observer, ...]:
        route = self._routes.get(cls)
        if route is None:
            wire = issubclass(cls, Event)
            route = self._routes[cls] = tuple(
                observer for key, observer in self._observers
                if (observer.wire and wire) or issubclass(cls, key))
        return route

    def _wire(self, event: Event) -> dict[str, Any] | None:
        if self._project is None:
            return None
        data = self._project(event)
        data.setdefault("type", event.kind)
        return data

    def subscribe(self, kinds: set[str] | None, limit: int = SUBSCRIBER_QUEUE_LIMIT) -> Subscriber:
        sub = Subscriber(kinds, limit)
        self._subscribers.add(sub)
        return sub

    def unsubscribe(self, sub: Subscriber) -> None:
        sub.closed = True
        sub.wakeup.set()
        self._subscribers.discard(sub)

    def observe(self, kind: type[Observed], observer: Callable[[Observed], None]) -> None:
        """Call ``observer`` synchronously with every event or notice of class ``kind`` (or
        a subclass) that is published, after those registered before it; with ``Published``
        it gets each event's wire form instead. It must not block."""
        self._observers.append((kind, _Observer(observer, wire=kind is Published)))
        self._routes.clear()

    def subscriber_count(self) -> int:
        return len(self._subscribers)
