"""The ``events.*`` methods: ``events.subscribe``, ``events.wait``, and the pane-scoped
subscriptions that ``events.subscribe`` hands over to :func:`prepare_subscription`
(``pane.agent_status_changed`` with a ``pane_id``, ``pane.output_matched``).

Pane-scoped means the herdr family's pane: the terminal the pane shows, which is what
``pane_agent_status_changed`` reports (a pane's background tabs publish
``surface_agent_status_changed`` alone). Waits and streams are woken by hub events or the
pane's output, never by a poll, and end with their client.

"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError

from cmux_core.agents.record import AgentStatus
from cmux_core.agents.tracker import AgentTracker
from cmux_core.api import wire
from cmux_core.api.context import Call, ServerInfo
from cmux_core.api.dispatch import MethodTable, Result, services, validation_error
from cmux_core.api.methods.shared.reading import (
    STRIP_ANSI,
    LineFinder,
    OutputMatch,
    ReadSource,
    line_matcher,
    next_output,
    read_result,
)
from cmux_core.api.methods.shared.waiting import (
    STATUS_NAMES,
    deadline_of,
    next_batch,
    served,
    watching,
)
from cmux_core.errors import CmuxError, InvalidParams, NotFound, WaitTimeout
from cmux_core.events import SUBSCRIBABLE, EventHub, Published, Subscriber
from cmux_core.hookspecs import Params
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Pane


@services
class EventServices:
    mux: Mux
    agents: AgentTracker
    events: EventHub
    info: ServerInfo


methods = MethodTable()


class Subscription(Params):
    """``type`` names the kind; pane-scoped kinds carry more fields (kept as extras)."""

    model_config = ConfigDict(extra="allow")
    type: str


class SubscribeParams(Params):
    subscriptions: list[Subscription] = Field(min_length=1)


@methods.method("events.subscribe", SubscribeParams)
async def events_subscribe(call: Call[EventServices], p: SubscribeParams) -> Result:
    """Turn the connection into an event stream (after this reply) of the named kinds."""
    if call.connection is None:
        raise CmuxError("invalid_request", "events.subscribe needs a connection")
    kinds: set[str] = set()
    pane_streams: list[Callable[[], None]] = []
    for i, sub in enumerate(p.subscriptions):
        raw = sub.model_dump()
        if is_parameterised(raw):
            pane_streams.append(prepare_subscription(call, raw, f"subscriptions[{i}]"))
            continue
        kind = SUBSCRIBABLE.get(sub.type)
        if kind is None:
            raise InvalidParams(f"subscriptions[{i}].type",
                                f"unknown event type {sub.type!r}; known: "
                                + ", ".join(sorted(SUBSCRIBABLE)))
        kinds.add(kind)
    if kinds or not pane_streams:
        call.connection.start_stream(call.ctx.events.subscribe(kinds))
    for start in pane_streams:
        start()
    return {"type": "subscription_started"}


PANE_KINDS = frozenset({"pane_agent_status_changed", "pane_closed"})
"""What pane-scoped waits and streams follow: the herdr family's pane events."""


class EventsWaitParams(Params):
    match_event: dict[str, Any]
    timeout_ms: int | None = Field(default=None, ge=0)


def status_event(tracker: AgentTracker, pane: Pane) -> dict[str, Any]:
    """``pane_agent_status_changed`` data for the pane as it is now (no ``type``)."""
    return wire.agent_status(tracker.status_event(pane))


@methods.method("events.wait", EventsWaitParams)
async def events_wait(call: Call[EventServices], p: EventsWaitParams) -> Result:
    """Wait for one event matching ``match_event`` (pane agent status matches only)."""
    match = p.match_event
    if match.get("event") != "pane_agent_status_changed":
        raise CmuxError("unsupported_event_wait_match",
                        "events.wait currently supports pane agent status matches")
    status = match.get("agent_status")
    if status not in STATUS_NAMES:
        raise InvalidParams("match_event.agent_status", f"must be one of {', '.join(STATUS_NAMES)}")
    if not isinstance(match.get("pane_id"), str):
        raise InvalidParams("match_event.pane_id", "field required")
    mux = call.ctx.mux
    tracker = call.ctx.agents
    pane = mux.pane(match["pane_id"])
    deadline = deadline_of(p.timeout_ms)

    def matched(data: dict[str, Any]) -> Result:
        return {"type": "wait_matched", "event": {
            "event": "pane_agent_status_changed",
            "data": {"type": "pane_agent_status_changed", **data}}}

    async def wait() -> Result:
        with watching(call.ctx.events, PANE_KINDS) as sub:
            if tracker.status(pane) == status:
                return matched(status_event(tracker, pane))
            while True:
                try:
                    batch = await next_batch(sub, deadline)
                except TimeoutError:
                    raise WaitTimeout(message="timed out waiting for event match") from None
                for event in batch:
                    if event.data.get("pane_id") != pane.id:
                        continue
                    if event.kind == "pane_closed":
                        raise NotFound("pane", pane.id)
                    if event.kind == "pane_agent_status_changed" \
                            and event.data.get("agent_status") == status:
                        data = {k: v for k, v in event.data.items() if k != "type"}
                        return matched(data)

    result: Result = await served(call.ctx.info, call.connection, wait())
    return result


class StatusSubscription(Params):
    type: Literal["pane.agent_status_changed"]
    pane_id: str
    agent_status: AgentStatus | None = None


class OutputSubscription(Params):
    type: Literal["pane.output_matched"]
    pane_id: str
    source: ReadSource
    lines: int | None = Field(default=None, ge=0)
    match: OutputMatch
    strip_ansi: bool = STRIP_ANSI


PARAMETERISED = frozenset({"pane.agent_status_changed", "pane.output_matched"})
"""Subscription types answered here when they name a pane."""


def is_parameterised(raw: dict[str, Any]) -> bool:
    return raw.get("type") == "pane.output_matched" or (
        raw.get("type") == "pane.agent_status_changed" and raw.get("pane_id") is not None)


def prepare_subscription(call: Call[EventServices], raw: dict[str, Any],
                         field: str) -> Callable[[], None]:
    """Validate one pane-scoped subscription (probing its pane); returns its starter.

    Raises before anything starts, so one bad subscription aborts the whole request.
    The stream runs as one of the connection's tasks and ends with it.
    """
    model: type[Params] = (OutputSubscription if raw.get("type") == "pane.output_matched"
                           else StatusSubscription)
    try:
        sub = model.model_validate(raw)
    except ValidationError as exc:
        err = validation_error(exc)
        raise InvalidParams(f"{field}.{err.field}" if err.field else field,
                            err.message.split(": ", 1)[-1]) from None
    mux = call.ctx.mux
    if isinstance(sub, StatusSubscription):
        pane = mux.pane(sub.pane_id)
        body = status_stream(call, call.ctx.agents, pane, sub.agent_status)
    else:
        assert isinstance(sub, OutputSubscription)
        pane = mux.pane(sub.pane_id)
        matcher = line_matcher(sub.match)
        source: ReadSource = "recent_unwrapped" if sub.source == "recent" else sub.source
        lines = None if sub.lines is None else min(sub.lines, 1000)
        body = output_stream(mux, pane, matcher, source, lines)
    return lambda: start_stream(call, body)


StreamBody = Callable[[Subscriber], Any]


def start_stream(call: Call[EventServices], body: StreamBody) -> None:
    """Stream what ``body`` offers to a private subscriber on the calling connection."""
    connection = call.connection
    assert connection is not None
    out = Subscriber(None)
    connection.start_stream(out)
    connection.run_task(body(out))


def status_stream(call: Call[EventServices], tracker: AgentTracker, pane: Pane,
                  wanted: AgentStatus | None) -> StreamBody:
    """Status changes of ``pane``; the stream ends when the pane closes. Only a weak
    reference to the pane is kept, so a subscriber never holds a closed pane in memory."""
    events = call.ctx.events
    pane_id, pane_ref = pane.id, weakref.ref(pane)

    async def run(out: Subscriber) -> None:
        with watching(events, PANE_KINDS) as sub:
            current = pane_ref()
            if current is None:
                return
            if wanted is not None and tracker.status(current) == wanted:
                out.offer(Published(events.seq, "pane.agent_status_changed",
                                status_event(tracker, current)))
            del current
            while not out.closed:
                for event in await sub.next_batch():
                    if event.data.get("pane_id") != pane_id:
                        continue
                    if event.kind == "pane_closed":
                        return
                    if event.kind != "pane_agent_status_changed":
                        continue
                    if wanted is not None and event.data.get("agent_status") != wanted:
                        continue
                    data = {k: v for k, v in event.data.items() if k != "type"}
                    out.offer(Published(event.seq, "pane.agent_status_changed", data))
    return run


def output_stream(mux: Mux, pane: Pane, matcher: LineFinder, source: ReadSource,
                  lines: int | None) -> StreamBody:
    """Edge-triggered matches: an event when the text goes from not matching to matching,
    re-armed when it stops matching. Woken by the pane's output (paced as waits are)."""
    async def run(out: Subscriber) -> None:
        armed = True
        burst = 0
        while not out.closed and pane.key in mux.panes:
            changed = mux.output_signal(pane)
            read = read_result(pane, source, lines, "text")
            line = await matcher.find(read["text"])
            if line is None:
                armed = True
            elif armed:
                armed = False
                out.offer(Published(0, "pane.output_matched",
                                {"pane_id": pane.id, "matched_line": line, "read": read}))
            burst = await next_output(changed, time.monotonic(), burst)
    return run
