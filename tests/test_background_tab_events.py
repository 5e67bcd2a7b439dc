"""A pane's background tab, as event subscribers see it, through a real server: one pane
whose shown tab runs alphabot and whose background tab runs betabot (the fixture of
``test_agent_per_surface``).

The herdr family's events (``pane.agent_status_changed`` and ``pane.agent_detected``,
global or pane-scoped) describe the terminal the pane shows; every terminal's changes,
the background tabs' too, are ``surface.agent_status_changed`` and
``surface.agent_detected``.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Api
from fake_agent import (
    agent_argv,
    manifest_server,
    screens_program,
    start_in_shell,
    wait_agent,
    write_agent,
    write_manifests,
)
from test_agent_per_surface import WAIT_S, Tabs, bot_manifest, screens

from cmux_core.testing import ServerProcess, wait_until

HERDR = [{"type": "pane.agent_status_changed"}, {"type": "pane.agent_detected"}]
SURFACE = [{"type": "surface.agent_status_changed"}, {"type": "surface.agent_detected"}]


RECORDER = """
from cmux_core.hookspecs import hookimpl

SEEN = []

@hookimpl
def cmux_on_event(kind, data):
    if kind.endswith(("agent_status_changed", "agent_detected")):
        SEEN.append([kind, dict(data)])

@hookimpl
def cmux_register_methods(register):
    async def seen(call, params):
        return {"type": "agent_events", "events": list(SEEN)}
    register("seen", seen)
"""
"""A plugin keeping the agent events its ``cmux_on_event`` observed
(``plugin.recorder.seen``)."""


@pytest.fixture
def cmux_server(tmp_path: Path) -> Iterator[ServerProcess]:
    manifests = write_manifests(tmp_path, {"alphabot": bot_manifest("alphabot"),
                                           "betabot": bot_manifest("betabot")})
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "recorder.py").write_text(RECORDER)
    with manifest_server(manifests, "--plugins-dir", str(plugins)) as proc:
        yield proc


@pytest.fixture
def tabs(api: Api, tmp_path: Path) -> Tabs:
    return Tabs(api, tmp_path)


@pytest.fixture
def listen(api: Api) -> Iterator[Callable[..., Api]]:
    """Connections subscribed to the given subscriptions, closed after the test."""
    opened: list[Api] = []

    def subscribe(*subs: dict[str, Any]) -> Api:
        conn = Api(api.server)
        opened.append(conn)
        assert conn("events.subscribe", {"subscriptions": list(subs)})["type"] == \
            "subscription_started"
        return conn

    yield subscribe
    for conn in opened:
        conn.close()


def events_until(conn: Api, last: Callable[[str, dict[str, Any]], bool]) -> list[
        tuple[str, dict[str, Any]]]:
    """Every event ``conn`` receives up to and including the first that ``last`` accepts."""
    seen: list[tuple[str, dict[str, Any]]] = []
    while True:
        event = conn.event(timeout=WAIT_S)
        seen.append((event["event"], event["data"]))
        if last(event["event"], event["data"]):
            return seen


def status_of(tabs: Tabs, label: str) -> str | None:
    status = tabs.agent(label).get("agent_status")
    return str(status) if status is not None else None


def resting(terminal: str) -> Callable[[str, dict[str, Any]], bool]:
    """Accepts the status event saying ``terminal``'s agent came to rest."""
    return lambda kind, data: data.get("terminal_id") == terminal and \
        data.get("agent_status") in ("idle", "done")


def only_of(seen: list[tuple[str, dict[str, Any]]], pane_id: str, terminal: str) -> None:
    """Every event of ``seen`` is the pane's, about ``terminal``, and shown."""
    assert all(data["pane_id"] == pane_id and data["terminal_id"] == terminal
               and "shown" not in data for _, data in seen), seen


def test_a_herdr_subscriber_sees_only_the_shown_tab(api: Api, tabs: Tabs,
                                                    listen: Callable[..., Api]) -> None:
    """betabot changes in the background, then alphabot in the shown tab: the herdr
    streams carry alphabot's change and nothing of betabot's before it."""
    everything = listen(*HERDR)
    scoped = listen({"type": "pane.agent_status_changed", "pane_id": tabs.pane_id})
    tabs.type(tabs.beta_surface, "idle")
    wait_until(lambda: status_of(tabs, "betabot") == "done", timeout=WAIT_S,
               message="betabot done in the background tab")
    tabs.type(tabs.alpha_surface, "idle")
    for conn, name in ((everything, "pane_agent_status_changed"),
                       (scoped, "pane.agent_status_changed")):
        seen = events_until(conn, resting(tabs.alpha_terminal))
        only_of(seen, tabs.pane_id, tabs.alpha_terminal)
        kind, data = seen[-1]
        assert (kind, data["agent"], data["surface_id"]) == (
            name, "alphabot", tabs.alpha_surface)
    pane = tabs.pane()
    assert (pane["agent"], pane["terminal_id"]) == ("alphabot", tabs.alpha_terminal)
    # agent.list rows still name the background tab's agent, marked as not shown.
    beta = tabs.agent("betabot")
    assert (beta["agent_status"], beta["shown"], beta["pane_id"]) == (
        "done", False, tabs.pane_id)


def test_showing_the_other_tab_switches_what_herdr_subscribers_see(
        api: Api, tabs: Tabs, listen: Callable[..., Api]) -> None:
    """The pane starts showing betabot: its agent and status are published for the pane;
    alphabot, now in the background, no longer reaches the pane's subscribers."""
    api("pane.focus", {"pane_id": tabs.pane_id})
    everything = listen(*HERDR)
    scoped = listen({"type": "pane.agent_status_changed", "pane_id": tabs.pane_id})
    api("surface.focus", {"surface_id": tabs.beta_surface})
    detected = everything.event(timeout=WAIT_S)
    assert (detected["event"], detected["data"]["pane_id"], detected["data"]["agent"],
            detected["data"]["terminal_id"]) == (
        "pane_agent_detected", tabs.pane_id, "betabot", tabs.beta_terminal)
    for conn in (everything, scoped):
        data = conn.event(timeout=WAIT_S)["data"]
        assert (data["pane_id"], data["terminal_id"], data["agent"], data["agent_status"]) \
            == (tabs.pane_id, tabs.beta_terminal, "betabot", "blocked")
        assert "shown" not in data
    tabs.type(tabs.alpha_surface, "idle")
    wait_until(lambda: status_of(tabs, "alphabot") == "done", timeout=WAIT_S,
               message="alphabot done in what is now the background tab")
    tabs.type(tabs.beta_surface, "idle")
    for conn in (everything, scoped):
        only_of(events_until(conn, resting(tabs.beta_terminal)), tabs.pane_id,
                tabs.beta_terminal)


def test_background_changes_are_surface_events(api: Api, tabs: Tabs, tmp_path: Path,
                                               listen: Callable[..., Api]) -> None:
    """``surface.agent_*`` carry every terminal's agent, ``shown: false`` in a background
    tab; a herdr subscriber of ``pane.agent_*`` hears none of the background's."""
    surfaces = listen(*SURFACE)
    herdr = listen(*HERDR)
    pane = tabs.pane()
    where = {"pane_id": tabs.pane_id, "tab_id": pane["tab_id"],
             "workspace_id": pane["workspace_id"]}

    # An agent wait on the background tab follows its surface events.
    waiter = Api(api.server)
    try:
        waiter.send_request("w", "agent.wait", {
            "target": tabs.beta_surface, "until": ["done"],
            "timeout_ms": int(WAIT_S * 1000)})
        tabs.type(tabs.beta_surface, "idle")
        reply = waiter.readline(timeout=WAIT_S + 5)
    finally:
        waiter.close()
    assert reply["ok"], reply
    assert (reply["result"]["agent"]["agent_status"],
            reply["result"]["agent"]["surface_id"]) == ("done", tabs.beta_surface)

    kind, data = events_until(surfaces, resting(tabs.beta_terminal))[-1]
    assert kind == "surface_agent_status_changed"
    assert data == {"type": kind, "surface_id": tabs.beta_surface,
                    "terminal_id": tabs.beta_terminal, **where, "shown": False,
                    "agent_status": "done", "agent": "betabot"}

    # A third tab, in the background, whose agent is detected there.
    (tmp_path / "gamma").mkdir()
    script = write_agent(tmp_path / "gamma", "betabot_agent",
                         screens_program(screens("betabot", "busy")))
    third = api("surface.create", {"pane_id": tabs.pane_id,
                                   "command": shlex.join(agent_argv(script))})["surface_id"]
    detected = events_until(surfaces, lambda kind, data: kind == "surface_agent_detected"
                            and data["surface_id"] == third)[-1][1]
    assert (detected["agent"], detected["shown"], detected["pane_id"]) == (
        "betabot", False, tabs.pane_id)

    # The shown tab's changes are in both families; the herdr one heard nothing else.
    tabs.type(tabs.alpha_surface, "idle")
    kind, data = events_until(surfaces, resting(tabs.alpha_terminal))[-1]
    assert kind == "surface_agent_status_changed" and "shown" not in data
    assert (data["surface_id"], data["tab_id"]) == (tabs.alpha_surface, pane["tab_id"])
    only_of(events_until(herdr, resting(tabs.alpha_terminal)), tabs.pane_id,
            tabs.alpha_terminal)


def test_plugin_observers_get_both_families(api: Api, tabs: Tabs) -> None:
    """``cmux_on_event`` sees the background tab's changes as surface events only, and
    the shown tab's in both families."""
    tabs.type(tabs.beta_surface, "idle")
    tabs.type(tabs.alpha_surface, "idle")

    def recorded() -> list[tuple[str, dict[str, Any]]]:
        return [(kind, data) for kind, data in api("plugin.recorder.seen")["events"]]

    def both_rested() -> bool:
        seen = recorded()
        return any(kind == "pane_agent_status_changed" and resting(tabs.alpha_terminal)(
            kind, data) for kind, data in seen) and any(
            kind == "surface_agent_status_changed" and resting(tabs.beta_terminal)(kind, data)
            for kind, data in seen)

    wait_until(both_rested, timeout=WAIT_S, message="both agents' rest observed")
    seen = recorded()
    pane_events = [(k, d) for k, d in seen if k.startswith("pane_")]
    only_of(pane_events, tabs.pane_id, tabs.alpha_terminal)
    beta = [d for k, d in seen if d["terminal_id"] == tabs.beta_terminal]
    assert beta and all(d["shown"] is False for d in beta), seen
    assert {k for k, d in seen if d["terminal_id"] == tabs.beta_terminal} == {
        "surface_agent_detected", "surface_agent_status_changed"}
    alpha = {k for k, d in seen if d["terminal_id"] == tabs.alpha_terminal}
    assert alpha == {"pane_agent_detected", "pane_agent_status_changed",
                     "surface_agent_detected", "surface_agent_status_changed"}



def agent_with_a_cat_tab(api: Api, tmp_path: Path) -> tuple[str, str, str, str]:
    """A focused pane showing alphabot (busy) with a background tab running ``cat``:
    ``(pane_id, alphabot's surface, cat's surface, cat's terminal id)``."""
    script = write_agent(tmp_path, "alphabot_agent", screens_program(screens("alphabot", "busy")))
    pane_id = start_in_shell(api, script)
    alpha = api("pane.get", {"pane_id": pane_id})["pane"]["surface_id"]
    cat = api("surface.create", {"pane_id": pane_id, "command": "cat"})["surface_id"]
    wait_agent(api, pane_id, "alphabot", "working", timeout=WAIT_S)
    row = {row["id"]: row for row in api("surface.list")["surfaces"]}[cat]
    assert row.get("agent") is None and row["selected"] is False
    api("pane.focus", {"pane_id": pane_id})
    return pane_id, alpha, cat, str(row["terminal_id"])


def pane_agent_events(conn: Api, pane_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The pane's herdr agent events up to its first ``pane_agent_status_changed``."""
    seen = events_until(conn, lambda kind, data: kind == "pane_agent_status_changed"
                        and data["pane_id"] == pane_id)
    return [(kind, data) for kind, data in seen if data["pane_id"] == pane_id]


def test_showing_a_tab_without_an_agent_clears_the_panes_agent(
        api: Api, tmp_path: Path, listen: Callable[..., Api]) -> None:
    """The pane starts showing its ``cat`` tab: herdr subscribers learn it has no agent
    (``pane_agent_detected`` without ``agent``) and its status (unknown)."""
    pane_id, _, cat, cat_terminal = agent_with_a_cat_tab(api, tmp_path)
    everything = listen(*HERDR)
    scoped = listen({"type": "pane.agent_detected", "pane_id": pane_id})
    api("surface.focus", {"surface_id": cat})
    (kind, data), (_, status) = pane_agent_events(everything, pane_id)
    assert kind == "pane_agent_detected"
    assert (data["terminal_id"], data["surface_id"]) == (cat_terminal, cat)
    assert "agent" not in data and "released" not in data, data
    assert (status["agent_status"], status.get("agent"), status["terminal_id"]) == (
        "unknown", None, cat_terminal)
    data = scoped.event(timeout=WAIT_S)["data"]
    assert (data["pane_id"], data["terminal_id"], data.get("agent")) == (
        pane_id, cat_terminal, None)
    pane = api("pane.get", {"pane_id": pane_id})["pane"]
    assert (pane.get("agent"), pane["agent_status"]) == (None, "unknown")


def test_closing_the_shown_tab_releases_the_panes_agent(
        api: Api, tmp_path: Path, listen: Callable[..., Api]) -> None:
    """The shown tab, running alphabot, closes and the pane shows its ``cat`` tab: herdr
    subscribers get the release an agent's exit gives (``released: true``, the agent,
    its final status), then the pane's new status."""
    pane_id, alpha, cat, cat_terminal = agent_with_a_cat_tab(api, tmp_path)
    everything = listen(*HERDR)
    scoped = listen({"type": "pane.agent_detected", "pane_id": pane_id})
    api("surface.close", {"surface_id": alpha})
    (kind, data), (_, status) = pane_agent_events(everything, pane_id)
    assert kind == "pane_agent_detected"
    assert (data.get("released"), data.get("agent"), data.get("final_status"),
            data["surface_id"]) == (True, "alphabot", "working", alpha), data
    assert (status["agent_status"], status.get("agent"), status["terminal_id"]) == (
        "unknown", None, cat_terminal)
    data = scoped.event(timeout=WAIT_S)["data"]
    assert (data["pane_id"], data.get("released"), data.get("agent")) == (
        pane_id, True, "alphabot")
    pane = api("pane.get", {"pane_id": pane_id})["pane"]
    assert (pane.get("agent"), pane["agent_status"], pane["surface_id"]) == (
        None, "unknown", cat)
