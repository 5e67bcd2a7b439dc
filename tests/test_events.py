"""Typed events and their wire projection, on a real mux with real PTYs (no server).

The hub gets the projection the server gives it (``cmux_core.api.wire.project``), so the
lines a subscriber queues here are the lines a socket client would read.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from cmux_core.agents import events as agent_events
from cmux_core.agents import views
from cmux_core.agents.tracker import AgentTracker
from cmux_core.api import wire
from cmux_core.app import connect_agents
from cmux_core.config import Settings
from cmux_core.events import EVENT_KINDS, Event, EventHub, Published
from cmux_core.model import events as model_events
from cmux_core.model.mux import Mux
from cmux_core.plugin_host import events as plugin_events

Body = Callable[[Mux, AgentTracker, EventHub], Awaitable[None]]


def run(body: Body) -> None:
    async def main() -> None:
        events = EventHub(project=lambda event: wire.project(mux, tracker, event))
        mux = Mux(Settings(shell="/bin/sh"), events, "/nonexistent.sock")
        tracker = AgentTracker(mux, events)
        connect_agents(events, tracker)
        mux.create_window()
        try:
            await body(mux, tracker, events)
        finally:
            for term in mux.close_all():
                term.kill()
    asyncio.run(main())


def lines(queue: Any, kind: str) -> list[dict[str, Any]]:
    return [p.data for p in queue if p.kind == kind]


def without_live_cwd(pane: dict[str, Any]) -> dict[str, Any]:
    # The foreground process's cwd is read from /proc at each call.
    return {k: v for k, v in pane.items() if k != "foreground_cwd"}


def test_a_typed_event_reaches_subscribers_as_its_wire_projection() -> None:
    async def body(mux: Mux, tracker: AgentTracker, events: EventHub) -> None:
        sub = events.subscribe({"pane_created", "layout_updated"})
        typed: list[Event] = []
        events.observe(Event, typed.append)
        _ws, tab, pane = mux.create_workspace(command=["cat"], focus=True)

        queued: list[Published] = list(sub.queue)
        assert [p.kind for p in queued] == ["pane_created", "layout_updated"]
        assert queued[0].seq < queued[1].seq <= events.seq
        created, layout = queued[0].data, queued[1].data
        assert list(created) == ["pane", "type"] and created["type"] == "pane_created"
        assert without_live_cwd(created["pane"]) == without_live_cwd(
            wire.pane_info(mux, tracker, pane))
        assert created["pane"]["pane_id"] == pane.id
        assert created["pane"]["agent_status"] == "unknown"
        assert layout == {**wire.project(mux, tracker, model_events.LayoutUpdated(tab)),
                          "type": "layout_updated"}
        json.dumps(queued[0].data)

        # Observers inside the server get the event itself, carrying the objects.
        made = [e for e in typed if isinstance(e, model_events.PaneCreated)]
        assert len(made) == 1 and made[0].pane is pane
        assert [type(e).__name__ for e in typed][:2] == ["WorkspaceCreated", "TabCreated"]
    run(body)


def test_wire_data_is_fixed_when_the_event_is_published() -> None:
    async def body(mux: Mux, tracker: AgentTracker, events: EventHub) -> None:
        sub = events.subscribe(None)
        ws, _tab, first = mux.create_workspace(command=["cat"], focus=True)
        second = mux.split_pane(first, "right", command=["cat"])
        second_id = second.id
        split_layout = lines(sub.queue, "layout_updated")[-1]["layout"]
        created = lines(sub.queue, "pane_created")[-1]["pane"]

        # Later changes do not reach lines already published.
        second.label = "renamed"
        mux.close_pane(second)
        assert created["pane_id"] == second_id and "label" not in created
        assert [p["pane_id"] for p in split_layout["panes"]] == [first.id, second_id]
        closed_layout = lines(sub.queue, "layout_updated")[-1]["layout"]
        assert [p["pane_id"] for p in closed_layout["panes"]] == [first.id]

        # A closing workspace is reported as it was before its panes closed, agent
        # status included, although the tracker forgets each pane as it closes.
        assert tracker.report_agent(first, source="custom:test", agent="tester",
                                    state="working")
        mux.close_workspace(ws)
        kinds = [p.kind for p in sub.queue]
        assert kinds[-3:] == ["pane_closed", "tab_closed", "workspace_closed"]
        closed = lines(sub.queue, "workspace_closed")[-1]
        assert closed["workspace_id"] == ws.id
        assert closed["workspace"]["pane_count"] == 1
        assert closed["workspace"]["tab_count"] == 1
        assert closed["workspace"]["agent_status"] == "working"
        assert first.surface.uuid not in tracker.records
        seqs = [p.seq for p in sub.queue]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    run(body)


def test_a_prepared_event_is_numbered_when_published() -> None:
    async def body(mux: Mux, tracker: AgentTracker, events: EventHub) -> None:
        ws, _tab, _pane = mux.create_workspace(command=["cat"], focus=True)
        sub = events.subscribe({"workspace_renamed"})
        prepared = events.prepare(model_events.WorkspaceRenamed(ws))
        mux.rename_workspace(ws, "later")
        events.publish(prepared)
        first, second = sub.queue
        assert first.data["label"] == "later" and second.data["label"] != "later"
        assert second.seq == first.seq + 1 == events.seq
    run(body)


def test_every_event_type_names_a_subscribable_kind() -> None:
    modules = (model_events, agent_events, plugin_events, views)
    types = [t for m in modules for t in vars(m).values()
             if isinstance(t, type) and issubclass(t, Event) and t is not Event
             and t.__module__ == m.__name__]
    kinds = [t.kind for t in types]
    assert len(types) > 25
    assert len(set(kinds)) == len(kinds)
    assert set(kinds) <= set(EVENT_KINDS)
