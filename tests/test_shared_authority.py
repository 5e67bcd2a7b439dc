"""Hooks and screen together (``authority="shared"``), report TTLs, subagent reports, herdr's
official sources and ``pane.clear_agent_authority``.

The first tests drive the tracker's detection interface (``set_detected``/``publish_screen``)
on a real mux with real PTYs, as ``test_agent_authority.py`` does, so each screen observation
lands exactly when the test says. The last ones run a real server with a loose-file plugin
declaring the shared authority and a small fake agent whose screens a test manifest knows.
"""

from __future__ import annotations

import asyncio
import textwrap
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Api
from fake_agent import (
    manifest,
    manifest_server,
    pane_agent,
    rule,
    screens_program,
    start_in_shell,
    wait_agent,
    write_agent,
    write_manifests,
)

from cmux_core.agents.authority import SHARED_CONFIRM_S, ScreenReport, SessionRef, SourceDeclaration
from cmux_core.agents.tracker import AgentTracker
from cmux_core.api import wire
from cmux_core.app import connect_agents
from cmux_core.config import Settings
from cmux_core.events import EventHub
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Pane
from cmux_core.testing import ServerProcess, async_wait_until, wait_until

KNOWN = {"claude": "claude", "toybot": "toybot", "opencode": "opencode"}

IDLE = ScreenReport("idle", visible_idle=True, matched_rule="idle_prompt")
WORKING = ScreenReport("working", visible_working=True, matched_rule="spinner")
DIALOG = ScreenReport("blocked", visible_blocker=True, matched_rule="permission")
NO_RULE = ScreenReport("idle")  # the known-agent fallback: no rule matched

PAST_CONFIRM_S = SHARED_CONFIRM_S + 0.2
"""How long an in-process test watches for a yield that must not come: the confirmation
window, and slack for the tracker's timer to have run had it been set."""


def screen(report: ScreenReport) -> ScreenReport:
    """A fresh copy, stamped now (a screen classification is made when it is published)."""
    return ScreenReport(report.state, report.visible_idle, report.visible_blocker,
                        report.visible_working, report.process_exited, report.matched_rule)


def run(body: Callable[[Mux, AgentTracker, Pane], Awaitable[None]]) -> None:
    async def main() -> None:
        events = EventHub(project=lambda event: wire.project(mux, tracker, event))
        mux = Mux(Settings(shell="/bin/sh"), events, "/nonexistent.sock")
        tracker = AgentTracker(
            mux, events, canonical_agent=lambda label: KNOWN.get(label.lower()),
            declarations=lambda: [
                SourceDeclaration("acme:toybot", "toybot", "shared", "acme", 1500),
                SourceDeclaration("acme:claude", "claude", "shared", "acme")])
        connect_agents(events, tracker)
        mux.create_window()
        _ws, _tab, pane = mux.create_workspace(command=["cat"], focus=True)
        try:
            await body(mux, tracker, pane)
        finally:
            for term in mux.close_all():
                term.kill()
    asyncio.run(main())


def source_of(mux: Mux, t: AgentTracker, pane: Pane) -> str:
    return str(wire.agent_info(mux, t, pane)["status_source"])


def test_reported_working_is_taken_at_once_and_yields_to_an_idle_screen() -> None:
    async def body(mux: Mux, t: AgentTracker, pane: Pane) -> None:
        t.set_detected(pane, "toybot")
        t.publish_screen(pane, screen(IDLE))
        assert t.status(pane) == "idle"
        started = time.monotonic()
        assert t.report_agent(pane, source="acme:toybot", agent="toybot", state="working")
        assert t.status(pane) == "working" and source_of(mux, t, pane) == "hook"
        # No new signal: the screen still shows the idle prompt, so the hook's working
        # yields once the confirmation window is over (the tracker's own timer).
        await async_wait_until(lambda: t.status(pane) == "idle", timeout=5)
        assert time.monotonic() - started >= SHARED_CONFIRM_S
        assert time.monotonic() - started < 2.0  # within a second, plus a loaded loop's slack
        assert source_of(mux, t, pane) == "screen"

        # Working confirmed by the screen stays working; an interrupt notice (a rule
        # matching idle) after it wins at once.
        t.report_agent(pane, source="acme:toybot", agent="toybot", state="working")
        t.publish_screen(pane, screen(WORKING))
        await asyncio.sleep(PAST_CONFIRM_S)  # a window in which nothing may change
        assert t.status(pane) == "working"
        t.publish_screen(pane, ScreenReport("idle", matched_rule="interrupted"))
        assert t.status(pane) == "idle"
    run(body)


def test_a_screen_without_rule_evidence_never_overrides_working() -> None:
    async def body(mux: Mux, t: AgentTracker, pane: Pane) -> None:
        t.set_detected(pane, "toybot")
        t.publish_screen(pane, screen(NO_RULE))
        t.report_agent(pane, source="acme:toybot", agent="toybot", state="working")
        await asyncio.sleep(PAST_CONFIRM_S)  # a window in which nothing may change
        assert t.status(pane) == "working"
    run(body)


def test_a_dialog_on_screen_is_blocked_whatever_the_hook_said() -> None:
    async def body(mux: Mux, t: AgentTracker, pane: Pane) -> None:
        t.set_detected(pane, "claude")
        t.publish_screen(pane, screen(DIALOG))
        for state in ("working", "idle"):
            t.report_agent(pane, source="acme:claude", agent="claude", state=state)  # type: ignore[arg-type]
            assert t.status(pane) == "blocked", state
            assert source_of(mux, t, pane) == "screen"
        # The dialog answered: the screen shows the agent working again.
        t.publish_screen(pane, screen(WORKING))
        assert t.status(pane) == "working"
    run(body)


def test_reported_blocked_without_a_dialog_expires() -> None:
    async def body(mux: Mux, t: AgentTracker, pane: Pane) -> None:
        t.set_detected(pane, "toybot")
        t.publish_screen(pane, screen(WORKING))
        t.report_agent(pane, source="acme:toybot", agent="toybot", state="blocked")
        assert t.status(pane) == "blocked" and source_of(mux, t, pane) == "hook"
        # A screen change no rule explains does not end it (a prompt no manifest knows) ...
        t.publish_screen(pane, screen(NO_RULE))
        assert t.status(pane) == "blocked"
        # ... the declaration's state_ttl_ms (1.5 s, room for a loaded machine's stall between
        # the checks above) does.
        await async_wait_until(lambda: t.status(pane) == "idle", timeout=30)
        assert source_of(mux, t, pane) == "screen"
    run(body)


def test_reported_blocked_ends_when_the_screen_shows_the_dialog_answered() -> None:
    async def body(mux: Mux, t: AgentTracker, pane: Pane) -> None:
        t.set_detected(pane, "claude")
        t.publish_screen(pane, screen(WORKING))
        t.report_agent(pane, source="acme:claude", agent="claude", state="blocked")
        assert t.status(pane) == "blocked"
        t.publish_screen(pane, screen(DIALOG))
        assert t.status(pane) == "blocked"
        # "No" at the dialog: no hook runs, the idle prompt comes back.
        t.publish_screen(pane, screen(IDLE))
        assert t.status(pane) == "idle"
    run(body)


def test_reported_idle_yields_to_a_screen_working_after_it() -> None:
    async def body(mux: Mux, t: AgentTracker, pane: Pane) -> None:
        t.set_detected(pane, "toybot")
        t.publish_screen(pane, screen(WORKING))
        t.report_agent(pane, source="acme:toybot", agent="toybot", state="idle")
        assert t.status(pane) == "idle", "an older working screen does not override"
        t.publish_screen(pane, screen(WORKING))
        assert t.status(pane) == "working"
    run(body)


def test_subagent_reports_never_move_the_state() -> None:
    async def body(mux: Mux, t: AgentTracker, pane: Pane) -> None:
        t.set_detected(pane, "toybot")
        t.report_agent(pane, source="acme:toybot", agent="toybot", state="working")
        assert not t.report_agent(pane, source="acme:toybot", agent="toybot", state="idle",
                                  subagent=True)
        assert not t.report_agent(pane, source="custom:x", agent="bot", state="blocked",
                                  subagent=True)
        assert t.status(pane) == "working"
        assert t.record(pane).authority.source == "acme:toybot"  # type: ignore[union-attr]
    run(body)


def test_report_ttl_lapses_for_any_source() -> None:
    async def body(mux: Mux, t: AgentTracker, pane: Pane) -> None:
        assert t.report_agent(pane, source="custom:x", agent="bot", state="working",
                              ttl_s=1.0)
        assert t.status(pane) == "working"
        await async_wait_until(lambda: t.status(pane) == "unknown", timeout=30)
        assert t.effective_agent(pane) == "bot", "the label stays; only the state lapsed"
    run(body)


def test_herdr_official_sources_follow_herdrs_rules() -> None:
    async def body(mux: Mux, t: AgentTracker, pane: Pane) -> None:
        t.set_detected(pane, "claude")
        t.publish_screen(pane, screen(WORKING))
        ref = SessionRef("herdr:claude", "claude", "id", "abc-123")
        assert t.report_session(pane, source="herdr:claude", agent="claude", session=ref)
        assert t.session(pane) == ref
        # A session-only official source never sets the state.
        t.report_agent(pane, source="herdr:claude", agent="claude", state="idle")
        assert t.status(pane) == "working"
        assert not t.release_agent(pane, source="herdr:claude", agent="claude")

        # herdr:opencode owns the lifecycle, but only while opencode runs.
        assert not t.report_agent(pane, source="herdr:opencode", agent="opencode",
                                  state="blocked")
        t.set_detected(pane, "opencode")
        assert t.report_agent(pane, source="herdr:opencode", agent="opencode",
                              state="blocked")
        assert t.status(pane) == "blocked" and t.screen_detection_skipped(pane)
    run(body)


def test_clear_authority_follows_seed_004() -> None:
    async def body(mux: Mux, t: AgentTracker, pane: Pane) -> None:
        t.set_detected(pane, "toybot")
        t.publish_screen(pane, screen(IDLE))
        t.report_agent(pane, source="custom:a", agent="toybot", state="working", seq=10)
        # source names who asks, not which authority goes.
        assert t.clear_authority(pane, source="custom:someone-else")
        assert t.status(pane) == "idle" and t.record(pane).authority is None
        assert not t.clear_authority(pane), "nothing left to clear"

        # seq orders the clear among its source's reports: one sent before it (a lower
        # seq) that arrives after it does not bring the authority back.
        t.report_agent(pane, source="custom:a", agent="toybot", state="working", seq=11)
        assert t.clear_authority(pane, seq=20)
        assert not t.report_agent(pane, source="custom:a", agent="toybot", state="working",
                                  seq=15)
        assert t.status(pane) == "idle"
        assert t.report_agent(pane, source="custom:a", agent="toybot", state="working", seq=21)
        assert t.status(pane) == "working"
    run(body)


def test_a_report_past_its_ttl_shows_no_message() -> None:
    async def body(mux: Mux, t: AgentTracker, pane: Pane) -> None:
        t.set_detected(pane, "claude")
        t.publish_screen(pane, screen(WORKING))
        t.report_agent(pane, source="acme:claude", agent="claude", state="blocked",
                       message="Claude needs your permission to use Bash", ttl_s=1.0)
        assert wire.agent_info(mux, t, pane)["message"].startswith("Claude needs")
        # The report's TTL runs out (the behaviour under test): its state no longer counts,
        # and its message goes with it.
        await async_wait_until(lambda: t.status(pane) == "working", timeout=30)
        assert "message" not in wire.agent_info(mux, t, pane)
    run(body)


def test_a_blocked_the_screen_overrode_is_spent() -> None:
    async def body(mux: Mux, t: AgentTracker, pane: Pane) -> None:
        t.set_detected(pane, "claude")  # acme:claude: the default 30 s blocked TTL
        t.publish_screen(pane, screen(WORKING))
        t.report_agent(pane, source="acme:claude", agent="claude", state="blocked",
                       message="Claude needs your permission to use Bash")
        assert t.status(pane) == "blocked" and source_of(mux, t, pane) == "hook"
        assert wire.agent_info(mux, t, pane)["message"].startswith("Claude needs")
        # "No" at the dialog: no hook runs, the idle prompt comes back and wins; the
        # report's message goes with it.
        t.publish_screen(pane, screen(IDLE))
        assert t.status(pane) == "idle" and source_of(mux, t, pane) == "screen"
        assert "message" not in wire.agent_info(mux, t, pane)
        # Later screens no rule explains (a command menu, an unknown classification) are
        # judged on their own: the spent report never speaks again.
        t.publish_screen(pane, screen(NO_RULE))
        assert t.status(pane) == "idle" and source_of(mux, t, pane) == "screen"
        t.publish_screen(pane, ScreenReport("unknown"))
        assert t.status(pane) == "unknown" and source_of(mux, t, pane) == "screen"
        # Identified afresh (the screen report dropped): still not the hook's blocked.
        t.set_detected(pane, None)
        t.set_detected(pane, "claude")
        assert t.status(pane) == "unknown"
        # The next report speaks again.
        t.report_agent(pane, source="acme:claude", agent="claude", state="blocked")
        assert t.status(pane) == "blocked" and source_of(mux, t, pane) == "hook"
    run(body)


def test_the_agent_exiting_after_an_overridden_blocked_reads_idle() -> None:
    async def body(mux: Mux, t: AgentTracker, pane: Pane) -> None:
        t.set_detected(pane, "claude")
        t.publish_screen(pane, screen(WORKING))
        t.report_agent(pane, source="acme:claude", agent="claude", state="blocked")
        t.publish_screen(pane, screen(IDLE))
        assert t.status(pane) == "idle"
        # The agent's goodbye (no rule), its process exiting, identification letting go.
        t.publish_screen(pane, ScreenReport("unknown"))
        assert t.status(pane) != "blocked"
        t.publish_screen(pane, ScreenReport("idle", visible_idle=True, process_exited=True))
        assert t.status(pane) == "idle" and source_of(mux, t, pane) == "process_exit"
        t.set_detected(pane, None)
        assert t.status(pane) != "blocked" and t.record(pane).authority is None
    run(body)


def test_a_working_the_screen_overrode_is_spent() -> None:
    async def body(mux: Mux, t: AgentTracker, pane: Pane) -> None:
        t.set_detected(pane, "toybot")
        t.publish_screen(pane, screen(IDLE))
        t.report_agent(pane, source="acme:toybot", agent="toybot", state="working")
        # Interrupted, no hook ran: the idle prompt wins once the window is over ...
        await async_wait_until(lambda: t.status(pane) == "idle", timeout=5)
        # ... and a screen no rule explains after it (the user typing a command) shows
        # what the user sees, not the hook's working.
        t.publish_screen(pane, ScreenReport("unknown"))
        assert t.status(pane) == "unknown" and source_of(mux, t, pane) == "screen"
        t.publish_screen(pane, screen(NO_RULE))
        assert t.status(pane) == "idle" and source_of(mux, t, pane) == "screen"
        t.report_agent(pane, source="acme:toybot", agent="toybot", state="working")
        assert t.status(pane) == "working" and source_of(mux, t, pane) == "hook"
    run(body)


def test_an_idle_the_screen_overrode_is_spent() -> None:
    async def body(mux: Mux, t: AgentTracker, pane: Pane) -> None:
        t.set_detected(pane, "toybot")
        t.report_agent(pane, source="acme:toybot", agent="toybot", state="idle")
        t.publish_screen(pane, screen(WORKING))
        assert t.status(pane) == "working"
        t.publish_screen(pane, ScreenReport("unknown"))
        assert t.status(pane) == "unknown" and source_of(mux, t, pane) == "screen"
    run(body)


def test_a_dialog_does_not_spend_the_report() -> None:
    async def body(mux: Mux, t: AgentTracker, pane: Pane) -> None:
        t.set_detected(pane, "claude")
        t.report_agent(pane, source="acme:claude", agent="claude", state="working")
        t.publish_screen(pane, screen(DIALOG))
        assert t.status(pane) == "blocked"
        # Approved: the dialog is gone, the work goes on; a screen no rule explains does
        # not end the hook's working.
        t.publish_screen(pane, screen(NO_RULE))
        assert t.status(pane) == "working" and source_of(mux, t, pane) == "hook"
    run(body)


# -- through a real server ---------------------------------------------------------------------

AGENT_SCRIPT = screens_program({
    "i": "TOYBOT ready\n> type here",
    "w": "TOYBOT thinking... (esc to interrupt)",
    "b": "TOYBOT wants to run ls\nAllow this command? [y/n]",
    "x": "TOYBOT some output no rule knows",
})

MANIFEST = manifest(
    "toybot",
    rule("permission", "blocked", 30, visible_blocker=True, contains=["Allow this command?"]),
    rule("spinner", "working", 20, contains=["esc to interrupt"]),
    rule("idle_prompt", "idle", 10, visible_idle=True, contains=["type here"]),
)

PLUGIN = textwrap.dedent('''
    from cmux_core import hookimpl

    @hookimpl
    def cmux_register_integrations(register):
        register("toybot", install=lambda: None, uninstall=lambda: None,
                 status=lambda: {"installed": True}, source="acme:toybot", agent="toybot",
                 authority="shared", state_ttl_ms=1500)
''')


@pytest.fixture
def shared_server(tmp_path: Path) -> Iterator[tuple[ServerProcess, Path]]:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "acme.py").write_text(PLUGIN)
    script = write_agent(tmp_path, "toybot_agent", AGENT_SCRIPT)
    with manifest_server(write_manifests(tmp_path, {"toybot": MANIFEST}),
                         "--plugins-dir", str(plugins)) as server:
        yield server, script


def status(api: Api, pane_id: str) -> str:
    return pane_agent(api, pane_id)[1]


def wait_status(api: Api, pane_id: str, want: str, timeout: float = 30.0) -> float:
    """Seconds until the pane shows toybot ``want``."""
    return wait_agent(api, pane_id, "toybot", want, timeout)


def hook(api: Api, pane_id: str, state: str, **extra: Any) -> None:
    assert api("pane.report_agent", {"pane_id": pane_id, "source": "acme:toybot",
                                     "agent": "toybot", "state": state, **extra})["type"] == "ok"


def show(api: Api, pane_id: str, key: str) -> None:
    api("pane.send_text", {"pane_id": pane_id, "text": key + "\n"})


def test_shared_authority_in_a_real_server(shared_server: tuple[ServerProcess, Path]) -> None:
    server, script = shared_server
    api = Api(server)
    try:
        pane = start_in_shell(api, script)
        wait_status(api, pane, "idle", timeout=30)

        # A hook's working shows at once; with the idle prompt still on screen it yields.
        hook(api, pane, "working")
        assert status(api, pane) == "working"
        assert wait_status(api, pane, "idle", timeout=10) < 5

        # The screen agrees: working stays.
        hook(api, pane, "working")
        show(api, pane, "w")
        # A window in which it must not yield: the confirmation, and slack for a loaded
        # server's detection to have run.
        time.sleep(SHARED_CONFIRM_S + 0.5)
        assert status(api, pane) == "working"
        # A subagent finishing says nothing about the main agent.
        hook(api, pane, "idle", subagent=True)
        assert status(api, pane) == "working"

        # The permission dialog is blocked whatever the hook says.
        show(api, pane, "b")
        wait_status(api, pane, "blocked")
        hook(api, pane, "working")
        assert status(api, pane) == "blocked"
        # Answered "no": no hook runs, the idle prompt is back.
        show(api, pane, "i")
        wait_status(api, pane, "idle")

        # A hook's blocked with no dialog on screen lasts state_ttl_ms (1.5 s).
        show(api, pane, "x")
        hook(api, pane, "blocked")
        assert status(api, pane) == "blocked"
        wait_status(api, pane, "idle", timeout=30)

        # A report's own ttl_ms, validated.
        error = api.error("pane.report_agent", {"pane_id": pane, "source": "acme:toybot",
                                                "agent": "toybot", "state": "working",
                                                "ttl_ms": 0})
        assert error["code"] == "invalid_params" and error["data"]["field"] == "ttl_ms"
        error = api.error("pane.report_agent", {"pane_id": pane, "source": "acme:toybot",
                                                "agent": "toybot", "state": "working",
                                                "subagent": "yes"})
        assert error["code"] == "invalid_params" and error["data"]["field"] == "subagent"
        listed = {row["name"]: row for row in api("integration.list")["integrations"]}
        assert listed["toybot"]["authority"] == "shared"
    finally:
        api.close()


def provenance(api: Api, pane_id: str) -> tuple[str, str, str | None]:
    """The pane's agent status, its ``status_source`` and ``status_source_detail``."""
    info = api("agent.get", {"target": pane_id})["agent"]
    return info["agent_status"], info["status_source"], info.get("status_source_detail")


def test_a_denied_permission_does_not_come_back_in_a_real_server(
        shared_server: tuple[ServerProcess, Path]) -> None:
    server, script = shared_server
    api = Api(server)
    try:
        pane = start_in_shell(api, script)
        wait_status(api, pane, "idle", timeout=30)
        show(api, pane, "w")
        wait_status(api, pane, "working")
        # The permission hook fires, with a long TTL so that only spending can end it.
        hook(api, pane, "blocked", ttl_ms=60_000)
        assert provenance(api, pane) == ("blocked", "hook", "acme:toybot")
        # Denied: no hook runs, the idle prompt comes back and wins.
        show(api, pane, "i")
        wait_until(lambda: provenance(api, pane) == ("idle", "screen", "idle_prompt"),
                   timeout=30, message="the idle prompt overriding the hook's blocked")
        # Output no rule explains: the screen's own fallback, not the hook's blocked.
        show(api, pane, "x")
        wait_until(lambda: provenance(api, pane)[1:] == ("screen", None), timeout=30,
                   message="the unexplained screen judged alone")
        assert status(api, pane) != "blocked"
        # The agent exits: the pane lets it go, never reading blocked on the way.
        api("pane.send_text", {"pane_id": pane, "text": "q\n"})
        seen: list[tuple[str | None, str]] = []

        def gone() -> bool:
            seen.append(pane_agent(api, pane))
            return seen[-1][0] is None
        wait_until(gone, timeout=30, message="the agent's exit")
        assert all(state != "blocked" for _agent, state in seen), seen
    finally:
        api.close()
