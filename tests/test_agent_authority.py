"""Authority rules that need process detection, driven through the tracker's detection
interface (``set_detected``/``publish_screen``) on a real mux with real PTYs.

No server runs here, so no detection runtime races the observations these tests feed in;
source declarations are set the way the server sets them from plugin integrations.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from cmux_core.agents.authority import ScreenReport, SourceDeclaration
from cmux_core.agents.tracker import AgentTracker
from cmux_core.api import wire
from cmux_core.app import connect_agents
from cmux_core.config import Settings
from cmux_core.events import EventHub, Published
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Pane

KNOWN = {"claude": "claude", "claude-code": "claude", "codex": "codex"}


def run(body: Callable[[Mux, AgentTracker, Pane, list[tuple[str, dict[str, Any]]]],
                       Awaitable[None]]) -> None:
    async def main() -> None:
        events = EventHub(project=lambda event: wire.project(mux, tracker, event))
        seen: list[tuple[str, dict[str, Any]]] = []
        events.observe(Published, lambda event: seen.append((event.kind, event.data)))
        mux = Mux(Settings(shell="/bin/sh"), events, "/nonexistent.sock")
        tracker = AgentTracker(
            mux, events, canonical_agent=lambda label: KNOWN.get(label.lower()),
            declarations=lambda: [SourceDeclaration("plug:claude", "claude", "session"),
                                  SourceDeclaration("plug:codex", "codex", "lifecycle")])
        connect_agents(events, tracker)
        mux.create_window()
        _ws, _tab, pane = mux.create_workspace(command=["cat"], focus=True)
        try:
            await body(mux, tracker, pane, seen)
        finally:
            for term in mux.close_all():
                term.kill()
    asyncio.run(main())


def test_session_source_keeps_only_the_session() -> None:
    async def body(mux: Mux, t: AgentTracker, pane: Pane, seen: list[Any]) -> None:
        t.set_detected(pane, "claude")
        t.publish_screen(pane, ScreenReport("working", visible_working=True,
                                            matched_rule="busy"))
        from cmux_core.agents.authority import SessionRef
        ref = SessionRef("plug:claude", "claude", "id", "s-1")
        assert t.report_agent(pane, source="plug:claude", agent="claude", state="idle",
                              session=ref)
        assert t.status(pane) == "working"
        assert wire.pane_agent_fields(t, pane)["agent_session"] == ref.to_wire()
        info = wire.agent_info(mux, t, pane)
        assert (info["status_source"], info["status_source_detail"]) == ("screen", "busy")
    run(body)


def test_lifecycle_source_owns_state_only_with_its_process() -> None:
    async def body(mux: Mux, t: AgentTracker, pane: Pane, seen: list[Any]) -> None:
        assert not t.report_agent(pane, source="plug:codex", agent="codex", state="working")
        assert t.status(pane) == "unknown"
        t.set_detected(pane, "codex")
        assert t.report_agent(pane, source="plug:codex", agent="codex", state="working")
        assert t.screen_detection_skipped(pane)
        t.publish_screen(pane, ScreenReport("blocked", visible_blocker=True))
        assert t.status(pane) == "working", "a screen never overrides a lifecycle hook"
        assert wire.agent_info(mux, t, pane)["screen_detection_skipped"] is True
        t.clear_authority(pane)
        assert t.status(pane) == "blocked", "the screen decides again"
        assert not t.report_agent(pane, source="plug:codex", agent="codex", state="idle")
    run(body)


def test_visible_blocker_beats_a_custom_report_of_the_same_agent() -> None:
    async def body(mux: Mux, t: AgentTracker, pane: Pane, seen: list[Any]) -> None:
        t.set_detected(pane, "claude")
        assert t.report_agent(pane, source="custom:wrap", agent=t.normalise_label(" Claude-Code "),
                              state="working")
        assert t.effective_agent(pane) == "claude"
        t.publish_screen(pane, ScreenReport("blocked", visible_blocker=True,
                                            matched_rule="permission"))
        assert t.status(pane) == "blocked"
        assert wire.agent_info(mux, t, pane)["status_source"] == "screen"
        t.publish_screen(pane, ScreenReport("working"))
        assert t.status(pane) == "working"
        assert wire.agent_info(mux, t, pane)["status_source"] == "hook"
        assert not t.report_agent(pane, source="custom:other", agent="codex", state="idle"), \
            "a known label conflicting with the detected process is ignored"
    run(body)


def test_agent_change_drops_the_hook_and_exit_releases() -> None:
    async def body(mux: Mux, t: AgentTracker, pane: Pane, seen: list[Any]) -> None:
        t.set_detected(pane, "claude")
        t.report_agent(pane, source="custom:wrap", agent="claude", state="blocked")
        t.set_detected(pane, "codex")
        assert t.record(pane).authority is None
        assert t.effective_agent(pane) == "codex"
        t.publish_screen(pane, ScreenReport("working"))
        mux.focus_pane(pane)
        t.record(pane).seen = True
        seen.clear()
        t.publish_screen(pane, ScreenReport("idle", visible_idle=True, process_exited=True))
        released = [d for k, d in seen if k == "pane_agent_detected"]
        assert released == [{"pane_id": pane.id, "workspace_id": pane.tab.workspace.id,
                              "terminal_id": pane.terminal.id, "surface_id": pane.surface.uuid,
                              "released": True, "final_status": "idle", "agent": "codex",
                              "type": "pane_agent_detected"}]
        assert t.effective_agent(pane) is None
        assert wire.agent_info(mux, t, pane)["status_source"] == "process_exit"
        t.set_detected(pane, None)
        assert t.status(pane) == "unknown"
    run(body)


def test_release_suppresses_redetection_briefly() -> None:
    async def body(mux: Mux, t: AgentTracker, pane: Pane, seen: list[Any]) -> None:
        t.report_agent(pane, source="custom:x", agent="claude", state="working")
        assert t.release_agent(pane, source="custom:x", agent="claude")
        t.set_detected(pane, "claude")
        assert t.effective_agent(pane) is None
        assert not t.release_agent(pane, source="plug:claude", agent="claude")
    run(body)
