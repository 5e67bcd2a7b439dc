"""cmux-views: its sort keys and filters as functions, and as views in a real server."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from cmux_core.client import Client

ROOT = Path(__file__).resolve().parents[1]
# importable whether or not the distribution is installed in this environment
sys.path.insert(0, str(ROOT / "src"))

import cmux_views  # noqa: E402


def row(status: str, since: float | None = None, seq: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"pane_id": f"w1:p{seq or 1}", "agent_status": status,
                           "state_change_seq": seq}
    if since is not None:
        out["status_changed_at"] = since
    return out


def test_waiting_and_running() -> None:
    assert [s for s in ("idle", "working", "blocked", "done", "unknown")
            if cmux_views.waiting(row(s))] == ["blocked", "done"]
    assert [s for s in ("idle", "working", "blocked", "done", "unknown")
            if cmux_views.running(row(s))] == ["working", "blocked"]


def test_longest_wait_orders_waiting_agents_by_age() -> None:
    assert cmux_views.longest_wait(row("working", 5.0)) is None
    assert cmux_views.longest_wait(row("done", 20.0, 3)) == (20.0, 3)
    rows = [row("done", 30.0, 4), row("blocked", 10.0, 2), row("idle", 1.0, 1)]
    waiting = sorted((r for r in rows if cmux_views.longest_wait(r) is not None),
                     key=cmux_views.longest_wait)  # type: ignore[arg-type,return-value]
    assert [r["agent_status"] for r in waiting] == ["blocked", "done"]
    # without status_changed_at the state sequence still orders them
    assert cmux_views.longest_wait(row("blocked", None, 2)) < \
        cmux_views.longest_wait(row("done", None, 5))  # type: ignore[operator]


def test_triage_groups_by_status_then_age() -> None:
    rows = [row("idle", 1.0), row("working", 2.0), row("done", 5.0), row("blocked", 9.0),
            row("blocked", 3.0), row("unknown", 0.0)]
    ordered = sorted(rows, key=cmux_views.triage)
    assert [(r["agent_status"], r["status_changed_at"]) for r in ordered] == [
        ("blocked", 3.0), ("blocked", 9.0), ("done", 5.0), ("working", 2.0), ("idle", 1.0),
        ("unknown", 0.0)]


def test_views_in_a_running_server(cmux_client: Client) -> None:
    # linking loads the plugin whether or not it is installed in this environment
    cmux_client.call("plugin.link", {"path": str(ROOT)})
    listed = cmux_client.call("plugin.list", {"plugin_id": "cmux-views"})["plugins"][0]
    assert listed["registrations"]["view_sorts"] == ["longest-wait", "triage"]
    assert listed["registrations"]["view_filters"] == ["running", "waiting"]

    first = cmux_client.call("pane.current")["pane"]["pane_id"]
    second = cmux_client.call("pane.split", {})["pane"]["pane_id"]
    third = cmux_client.call("pane.split", {})["pane"]["pane_id"]
    for pane, state in ((third, "blocked"), (first, "blocked"), (second, "working")):
        cmux_client.call("pane.report_agent", {"pane_id": pane, "source": "custom:test",
                                               "agent": "claude", "state": state})
    cmux_client.call("agent.view.set", {
        "source": "plugin:cmux-views", "label": "needs me",
        "filter": {"plugin": "cmux-views/waiting"},
        "sort": [{"field": {"plugin": "cmux-views/longest-wait"}}]})
    shown = cmux_client.call("agent.list", {"view": True})["agents"]
    assert [a["pane_id"] for a in shown] == [third, first]
