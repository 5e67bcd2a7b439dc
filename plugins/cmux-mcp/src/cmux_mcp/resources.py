"""Resources: the agent list and each pane's screen, with a notice when one changes.

* ``cmux://agents`` (JSON): what ``list_agents`` answers.
* ``cmux://panes/{pane_id}/screen`` (text): the pane's visible screen.

A client that subscribes to one (``resources/subscribe`` on connections that began with
the ``initialize`` handshake, ``subscriptions/listen`` on 2026-07-28 connections) is sent
``notifications/resources/updated`` for it when it changes. :class:`Watcher` watches only
what someone subscribed to: the agent list through cmux's ``events.subscribe`` (agent
status, detection, panes opening and closing), a screen through a read-only ``pane.attach``
that never resizes the pane, whose frames come when the screen changes (and once when the
attach is in place, which is a notice too). Notices for one resource are at least
:data:`NOTICE_INTERVAL_S` apart; a change within that time is folded into the next notice.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator, Iterable

import anyio
import anyio.abc
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated

from cmux_core.errors import CmuxError
from cmux_mcp import tools
from cmux_mcp.bridge import Cmux

log = logging.getLogger(__name__)

AGENTS_URI = "cmux://agents"
SCREEN_TEMPLATE = "cmux://panes/{pane_id}/screen"
NOTICE_INTERVAL_S = 0.25
RETRY_S = 2.0
"""How long a watch whose stream ended or failed waits before following again (a watch
of a pane that no longer exists stops)."""

_SCREEN = re.compile(r"cmux://panes/(?P<pane_id>[^/]+)/screen")
AGENT_EVENTS = [{"type": t} for t in (
    "pane.agent_status_changed", "surface.agent_status_changed", "pane.agent_detected",
    "surface.agent_detected", "pane.created", "pane.closed")]


def screen_uri(pane_id: str) -> str:
    return SCREEN_TEMPLATE.format(pane_id=pane_id)


def screen_pane(uri: str) -> str | None:
    """The pane id a screen URI names; None for any other URI."""
    found = _SCREEN.fullmatch(uri)
    return found["pane_id"] if found else None


async def read(cmux: Cmux, uri: str) -> tuple[str, str]:
    """A resource's text and MIME type; ``resource_not_found`` for an unknown URI."""
    if uri == AGENTS_URI:
        agents = await tools.list_agents(cmux, tools.NoParams())
        return json.dumps(agents.model_dump(mode="json")), "application/json"
    pane_id = screen_pane(uri)
    if pane_id is None:
        raise CmuxError("resource_not_found", f"no resource {uri}: there are {AGENTS_URI} "
                        f"and {SCREEN_TEMPLATE}", {"uri": uri})
    screen = await tools.read_pane(cmux, tools.ReadPaneParams(pane_id=pane_id))
    return screen.text, "text/plain"


class Watcher:
    """Watches the resources someone subscribed to and sends their update notices.

    ``bus`` carries them to ``subscriptions/listen`` streams; sessions that subscribed
    with ``resources/subscribe`` get them directly. :meth:`run` holds the watches' task
    group; it must be running for :meth:`watch` to start one.
    """

    def __init__(self, cmux: Cmux, bus: InMemorySubscriptionBus) -> None:
        self.cmux = cmux
        self.bus = bus
        self.sessions: dict[str, set[ServerSession]] = {}
        self._watches: dict[str, tuple[int, anyio.CancelScope]] = {}
        self._group: anyio.abc.TaskGroup | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                yield
            finally:
                self._group = None
                group.cancel_scope.cancel()

    def watch(self, uri: str) -> None:
        """Count one more interest in ``uri``; the first starts watching it."""
        count, scope = self._watches.get(uri, (0, anyio.CancelScope()))
        self._watches[uri] = (count + 1, scope)
        if count == 0 and self._group is not None:
            self._group.start_soon(self._watch, uri, scope)

    def unwatch(self, uri: str) -> None:
        """Count one interest less; the last stops the watch."""
        count, scope = self._watches.get(uri, (0, anyio.CancelScope()))
        if count <= 1:
            self._watches.pop(uri, None)
            scope.cancel()
        else:
            self._watches[uri] = (count - 1, scope)

    @contextlib.asynccontextmanager
    async def watching(self, uris: Iterable[str]) -> AsyncIterator[None]:
        """Watch ``uris`` while the block runs (a ``subscriptions/listen`` stream)."""
        uris = list(uris)
        for uri in uris:
            self.watch(uri)
        try:
            yield
        finally:
            for uri in uris:
                self.unwatch(uri)

    def subscribe(self, session: ServerSession, uri: str) -> None:
        """``resources/subscribe`` from ``session``; a repeat changes nothing."""
        subscribers = self.sessions.setdefault(uri, set())
        if session not in subscribers:
            subscribers.add(session)
            self.watch(uri)

    def unsubscribe(self, session: ServerSession, uri: str) -> None:
        subscribers = self.sessions.get(uri, set())
        if session in subscribers:
            subscribers.discard(session)
            self.unwatch(uri)

    async def notify(self, uri: str) -> None:
        await self.bus.publish(ResourceUpdated(uri=uri))
        for session in list(self.sessions.get(uri, ())):
            try:
                await session.send_resource_updated(uri)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                self.unsubscribe(session, uri)

    async def _watch(self, uri: str, scope: anyio.CancelScope) -> None:
        with scope:
            while True:
                try:
                    await self._follow(uri)
                except CmuxError as exc:
                    log.info("watching %s: %s: %s", uri, exc.code, exc.message)
                    if exc.code == "pane_not_found":
                        return
                await anyio.sleep(RETRY_S)

    async def _follow(self, uri: str) -> None:
        """Notify on each change of ``uri`` until its stream ends. A screen's first frame
        (the whole screen once the attach is in place) is a notice too: a change made while
        the watch was starting is then not lost."""
        pane_id = screen_pane(uri)
        if pane_id is None:
            stream = self.cmux.lines("events.subscribe", {"subscriptions": AGENT_EVENTS})
        else:
            await self.cmux.check_pane(pane_id)
            pane = (await self.cmux.call("pane.get", {"pane_id": pane_id}))["pane"]
            stream = self.cmux.lines("pane.attach", {
                "pane_id": pane_id, "columns": max(2, int(pane.get("columns", 80))),
                "lines": max(1, int(pane.get("rows", 24))), "read_only": True,
                "resize": False, "frames": "rows"})
        async with stream as lines:
            async for line in lines:
                if line.get("frame") == "end":
                    await self.notify(uri)
                    return
                await self.notify(uri)
                await anyio.sleep(NOTICE_INTERVAL_S)
