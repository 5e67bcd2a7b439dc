"""Agent lifecycle through a real server: hook authority, ordering, seen/done, rollups,
metadata and TTLs, targets, start, prompt, waits, events.wait and pane subscriptions.

Fake agents are small Python programs run in panes: they print agent-like screens and
report their state over the socket from ``CMUX_SOCKET_PATH``/``CMUX_PANE_ID`` under a
custom source, so nothing here depends on process detection.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Api, _validator

from cmux_core.testing import wait_until

FAKE_AGENT = r'''
import itertools, json, os, socket, sys

SOURCE = os.environ.get("FAKE_SOURCE", "custom:fake")
AGENT = os.environ.get("FAKE_AGENT", "fake-bot")
seq = itertools.count(1)


def call(method, **params):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(os.environ["CMUX_SOCKET_PATH"])
        s.sendall(json.dumps({"id": 1, "method": method, "params": params}).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            buf += s.recv(4096)


def report(state, **kw):
    call("pane.report_agent", pane_id=os.environ["CMUX_PANE_ID"], source=SOURCE,
         agent=AGENT, state=state, seq=next(seq), **kw)


report("idle")
print("fake-bot ready", flush=True)
for line in sys.stdin:
    cmd = line.strip()
    if cmd == "quit":
        break
    if cmd == "release":
        call("pane.release_agent", pane_id=os.environ["CMUX_PANE_ID"], source=SOURCE,
             agent=AGENT, seq=next(seq))
        print("released", flush=True)
        continue
    if cmd == "stall" or not cmd:
        print("(nothing happens)", flush=True)
        continue
    if cmd == "ask":
        report("blocked", message="allow the edit?")
        print("Allow edit? [y/n]", flush=True)
        continue
    report("working")
    print("working on " + cmd, flush=True)
    if cmd != "hang":
        report("idle")
        print("finished " + cmd, flush=True)
'''


@pytest.fixture
def fake_agent(tmp_path: Path) -> list[str]:
    script = tmp_path / "fake_agent.py"
    script.write_text(FAKE_AGENT)
    return [sys.executable, "-u", str(script)]


def check_subscription_event(event: dict[str, Any]) -> None:
    errors = list(_validator("subscription_event").iter_errors(event))
    assert not errors, f"{errors[0].message}\n{event}"


def report(api: Api, pane: str, state: str, *, source: str = "custom:test",
           agent: str = "bot", **kw: Any) -> None:
    api("pane.report_agent", {"pane_id": pane, "source": source, "agent": agent,
                              "state": state, **kw})


def agent(api: Api, target: str) -> dict[str, Any]:
    return dict(api("agent.get", {"target": target})["agent"])


def status(api: Api, target: str) -> str:
    return str(agent(api, target)["agent_status"])


def subscriber(api: Api, *subs: dict[str, Any]) -> Api:
    conn = Api(api.server)
    assert conn("events.subscribe", {"subscriptions": list(subs)})["type"] == \
        "subscription_started"
    return conn


def next_event(conn: Api, name: str, timeout: float = 30.0, **match: Any) -> dict[str, Any]:
    """The first event called ``name`` whose data has ``match``; other events read on the
    way are kept for later calls."""
    backlog: list[dict[str, Any]] = conn.__dict__.setdefault("backlog", [])
    deadline = time.monotonic() + timeout
    index = 0
    while True:
        if index == len(backlog):
            backlog.append(conn.event(max(deadline - time.monotonic(), 0.01)))
        event = backlog[index]
        data = event["data"]
        if event["event"] == name and all(data.get(k) == v for k, v in match.items()):
            del backlog[index]
            return dict(data)
        index += 1


def second_workspace_pane(api: Api, argv: list[str]) -> str:
    """A pane in a new, unfocused workspace (out of view, so completions become done)."""
    result = api("workspace.create", {"command": argv})
    return str(result["root_pane"]["pane_id"])


# -- hook authority, provenance and ordering --------------------------------------------


def test_custom_source_owns_every_transition_with_provenance(api: Api) -> None:
    pane = api.run(["cat"])
    assert api("agent.list")["agents"] == []
    events = subscriber(api, {"type": "pane.agent_status_changed"},
                        {"type": "pane.agent_detected"})
    try:
        report(api, pane, "working")
        detected = next_event(events, "pane_agent_detected", pane_id=pane)
        assert detected["agent"] == "bot"
        seqs = []
        for state in ("working", "blocked", "idle", "working", "unknown"):
            report(api, pane, state)
            info = agent(api, pane)
            assert info["agent_status"] == state
            assert info["status_source"] == "hook"
            assert info["status_source_detail"] == "custom:test"
            assert info["status_changed_at"] == pytest.approx(time.time(), abs=30)
            seqs.append(info["state_change_seq"])
        assert seqs[0] < seqs[1] < seqs[2] < seqs[3] < seqs[4]
        assert seqs[0] == seqs[0]
        changes = [next_event(events, "pane_agent_status_changed", pane_id=pane)["agent_status"]
                   for _ in range(5)]
        assert changes == ["working", "blocked", "idle", "working", "unknown"]
    finally:
        events.close()
    rows = api("agent.list")["agents"]
    assert [r["pane_id"] for r in rows] == [pane]
    assert rows[0]["agent"] == "bot"


def test_seq_orders_reports_per_source(api: Api) -> None:
    pane = api.run(["cat"])
    report(api, pane, "working", seq=5)
    report(api, pane, "idle", seq=3)
    assert status(api, pane) == "working"
    report(api, pane, "idle", seq=5)
    assert status(api, pane) == "working"
    report(api, pane, "idle")
    assert status(api, pane) == "working", "unsequenced after sequenced is ignored"
    report(api, pane, "blocked", seq=6)
    assert status(api, pane) == "blocked"
    report(api, pane, "idle", source="custom:other")
    assert status(api, pane) == "idle", "another source has its own sequence space"
    assert agent(api, pane)["status_source_detail"] == "custom:other"


def test_report_errors_and_label_trimming(api: Api) -> None:
    pane = api.run(["cat"])
    assert api.error("pane.report_agent", {"pane_id": "w1:p99", "source": "s", "agent": "a",
                                           "state": "idle"})["code"] == "pane_not_found"
    assert api.error("pane.report_agent", {"pane_id": pane, "source": "s", "agent": "  ",
                                           "state": "idle"})["code"] == "invalid_agent"
    assert api.error("pane.release_agent", {"pane_id": pane, "source": "s",
                                            "agent": ""})["code"] == "invalid_agent"
    assert api.error("pane.report_agent_session", {"pane_id": pane, "source": "s",
                                                   "agent": " "})["code"] == "invalid_agent"
    assert api.error("pane.clear_agent_authority",
                     {"pane_id": "w1:p99"})["code"] == "pane_not_found"
    report(api, pane, "idle", agent="  docs-bot  ")
    assert agent(api, pane)["agent"] == "docs-bot"


def test_release_and_clear_authority(api: Api) -> None:
    pane = api.run(["cat"])
    events = subscriber(api, {"type": "pane.agent_detected"})
    try:
        report(api, pane, "working", seq=1)
        api("pane.release_agent", {"pane_id": pane, "source": "custom:else", "agent": "bot"})
        assert status(api, pane) == "working", "another source cannot release"
        api("pane.release_agent", {"pane_id": pane, "source": "custom:test", "agent": "bot",
                                   "seq": 2})
        released = next_event(events, "pane_agent_detected", pane_id=pane, released=True)
        assert released["agent"] == "bot"
        assert released["final_status"] == "working"
        assert api("agent.list")["agents"] == []
        assert api("pane.get", {"pane_id": pane})["pane"]["agent_status"] == "unknown"
    finally:
        events.close()
    report(api, pane, "blocked", source="custom:c", agent="other")
    # Seed 004: source is for correlation only; whichever hook set the authority, it goes.
    api("pane.clear_agent_authority", {"pane_id": pane, "source": "custom:nope"})
    assert api("agent.list")["agents"] == []
    assert api("pane.get", {"pane_id": pane})["pane"]["agent_status"] == "unknown"


def test_session_reports_of_undeclared_sources_change_nothing(api: Api) -> None:
    pane = api.run(["cat"])
    api("pane.report_agent_session", {"pane_id": pane, "source": "custom:x", "agent": "x",
                                      "agent_session_id": "abc"})
    info = api("pane.get", {"pane_id": pane})["pane"]
    assert "agent_session" not in info and info["agent_status"] == "unknown"


def test_fake_agent_exit_releases_it(api: Api, fake_agent: list[str]) -> None:
    pane = api.run(fake_agent)
    wait_until(lambda: api("agent.list")["agents"], message="fake agent reported")
    events = subscriber(api, {"type": "pane.agent_detected"})
    try:
        api("pane.send_text", {"pane_id": pane, "text": "quit\r"})
        released = next_event(events, "pane_agent_detected", pane_id=pane, released=True)
        assert released["agent"] == "fake-bot"
        assert released["final_status"] in ("idle", "done")
    finally:
        events.close()
    assert api("agent.list")["agents"] == []
    assert api.error("agent.get", {"target": pane})["code"] == "agent_not_found"


def test_fake_agent_release_from_inside(api: Api, fake_agent: list[str]) -> None:
    pane = api.run(fake_agent)
    wait_until(lambda: api("agent.list")["agents"], message="fake agent reported")
    api("pane.send_text", {"pane_id": pane, "text": "release\r"})
    wait_until(lambda: not api("agent.list")["agents"], message="released")


# -- seen, done and rollups ------------------------------------------------------------


def test_done_until_focused_reading_does_not_mark_seen(api: Api) -> None:
    pane = second_workspace_pane(api, ["cat"])
    ws = pane.split(":")[0]
    report(api, pane, "working")
    report(api, pane, "idle")
    assert status(api, pane) == "done"
    assert agent(api, pane)["seen"] is False
    api("agent.read", {"target": pane, "source": "visible"})
    api("pane.read", {"pane_id": pane})
    assert status(api, pane) == "done"
    workspaces = {w["workspace_id"]: w for w in api("workspace.list")["workspaces"]}
    assert workspaces[ws]["agent_status"] == "done"
    tabs = api("tab.list", {"workspace_id": ws})["tabs"]
    assert tabs[0]["agent_status"] == "done"
    api("workspace.focus", {"workspace_id": ws})
    assert status(api, pane) == "idle"
    assert agent(api, pane)["seen"] is True


def test_completion_in_view_is_idle_and_agent_focus_marks_seen(api: Api) -> None:
    pane = api.run(["cat"])
    report(api, pane, "working")
    report(api, pane, "idle")
    assert status(api, pane) == "idle", "finished in the visible tab: already seen"
    other = second_workspace_pane(api, ["cat"])
    report(api, other, "blocked", agent="b2")
    report(api, other, "idle", agent="b2")
    assert status(api, other) == "done"
    info = api("agent.focus", {"target": other})["agent"]
    assert info["agent_status"] == "idle" and info["focused"] is True


def test_rollup_follows_attention(api: Api) -> None:
    first = second_workspace_pane(api, ["cat"])
    ws = first.split(":")[0]
    second = api.run(["cat"], target_pane_id=first)
    third = api.run(["cat"], target_pane_id=first)

    def rollup() -> tuple[str, str]:
        w = next(w for w in api("workspace.list")["workspaces"] if w["workspace_id"] == ws)
        t = api("tab.list", {"workspace_id": ws})["tabs"][0]
        return w["agent_status"], t["agent_status"]

    assert rollup() == ("unknown", "unknown")
    report(api, first, "idle", agent="a")
    assert rollup() == ("idle", "idle")
    report(api, second, "working", agent="b")
    assert rollup() == ("working", "working")
    report(api, third, "working", agent="c")
    report(api, third, "idle", agent="c")
    assert rollup() == ("done", "done")
    report(api, first, "blocked", agent="a")
    assert rollup() == ("blocked", "blocked")


# -- metadata ----------------------------------------------------------------------------


META_ERRORS = [
    ({"source": ""}, "invalid_metadata_source"),
    ({"source": "x" * 81}, "invalid_metadata_source"),
    ({"source": "bad source!"}, "invalid_metadata_source"),
    ({"agent": "  "}, "invalid_agent"),
    ({"tokens": {f"k{i}": "v" for i in range(17)}}, "invalid_metadata_tokens"),
    ({"tokens": {"bad key": "v"}}, "invalid_metadata_tokens"),
    ({"tokens": {"k" * 33: "v"}}, "invalid_metadata_tokens"),
    ({"tokens": {"k": 5}}, "invalid_metadata_tokens"),
    ({"tokens": {"k": "v"}, "ttl_ms": 0}, "invalid_metadata_ttl"),
    ({"tokens": {"k": "v"}, "ttl_ms": 86_400_001}, "invalid_metadata_ttl"),
    ({"title": "t", "applies_to_source": "no spaces"}, "invalid_metadata_source"),
    ({"state_labels": {"sleepy": "zz"}}, "invalid_state_label"),
    ({"title": "t", "clear_title": True}, "invalid_metadata_request"),
    ({"display_agent": "d", "clear_display_agent": True}, "invalid_metadata_request"),
    ({"state_labels": {}, "clear_state_labels": True}, "invalid_metadata_request"),
    ({}, "invalid_metadata_request"),
    ({"title": "   "}, "invalid_metadata_request"),
]


@pytest.mark.parametrize(("params", "code"), META_ERRORS)
def test_report_metadata_validation(shared_api: Api, params: dict[str, Any], code: str
                                    ) -> None:
    api = shared_api
    pane = api.focused_pane()
    error = api.error("pane.report_metadata", {"pane_id": pane, "source": "custom:m", **params})
    assert error["code"] == code, error
    assert "tokens" not in api("pane.get", {"pane_id": pane})["pane"]


def test_report_metadata_validation_order(api: Api) -> None:
    assert api.error("pane.report_metadata", {"pane_id": "w1:p99", "source": ""})["code"] == \
        "pane_not_found"
    pane = api.focused_pane()
    assert api.error("pane.report_metadata", {"pane_id": pane, "source": "", "agent": " "}
                     )["code"] == "invalid_agent"
    assert api.error("pane.report_metadata", {"pane_id": pane, "source": "",
                                              "tokens": {"bad key": "v"}}
                     )["code"] == "invalid_metadata_source"
    assert api.error("pane.report_metadata", {"pane_id": pane, "source": "s", "ttl_ms": 0,
                                              "tokens": {"bad key": "v"}}
                     )["code"] == "invalid_metadata_tokens"


def test_tokens_normalise_limit_and_order(api: Api) -> None:
    pane = api.focused_pane()

    def tokens() -> dict[str, str]:
        return dict(api("pane.get", {"pane_id": pane})["pane"].get("tokens", {}))

    rev0 = api("pane.get", {"pane_id": pane})["pane"]["revision"]
    api("pane.report_metadata", {"pane_id": pane, "source": "custom:m", "tokens": {
        "branch": "  main\x07 ", "long": "x" * 200, "empty": "   "}})
    assert tokens() == {"branch": "main", "long": "x" * 80}
    assert api("pane.get", {"pane_id": pane})["pane"]["revision"] == rev0 + 1
    api("pane.report_metadata", {"pane_id": pane, "source": "custom:m",
                                 "tokens": {"branch": "main"}})
    assert api("pane.get", {"pane_id": pane})["pane"]["revision"] == rev0 + 1, "no change"
    api("pane.report_metadata", {"pane_id": pane, "source": "custom:m", "seq": 10,
                                 "tokens": {"branch": "dev"}})
    api("pane.report_metadata", {"pane_id": pane, "source": "custom:m", "seq": 9,
                                 "tokens": {"branch": "stale"}})
    assert tokens()["branch"] == "dev"
    api("pane.report_metadata", {"pane_id": pane, "source": "custom:m",
                                 "tokens": {"branch": None}})
    assert "branch" not in tokens()
    for batch in range(2):
        api("pane.report_metadata", {"pane_id": pane, "source": "custom:m", "tokens": {
            f"t{batch}_{i}": "v" for i in range(15)}})
    assert len(tokens()) == 31
    error = api.error("pane.report_metadata", {"pane_id": pane, "source": "custom:m",
                                               "tokens": {"x1": "v", "x2": "v"}})
    assert error["code"] == "invalid_metadata_tokens"
    assert "at most 32 tokens" in error["message"]
    assert len(tokens()) == 31


def test_sequenced_token_sources_are_limited(api: Api) -> None:
    pane = api.focused_pane()
    for i in range(32):
        api("pane.report_metadata", {"pane_id": pane, "source": f"s{i}", "seq": 1,
                                     "tokens": {"k": str(i)}})
    error = api.error("pane.report_metadata", {"pane_id": pane, "source": "s32", "seq": 1,
                                               "tokens": {"k": "x"}})
    assert error["code"] == "metadata_sequence_source_limit"
    api("pane.report_metadata", {"pane_id": pane, "source": "s32", "tokens": {"k": "x"}})


def test_tokens_and_presentation_expire_on_time(api: Api) -> None:
    pane = api.run(["cat"])
    report(api, pane, "working")
    events = subscriber(api, {"type": "pane.updated"}, {"type": "pane.agent_status_changed"})
    try:
        started = time.monotonic()
        api("pane.report_metadata", {"pane_id": pane, "source": "custom:m", "ttl_ms": 400,
                                     "tokens": {"pr": "12"}, "title": "reviewing"})
        first = next_event(events, "pane_updated")
        assert first["pane"]["tokens"] == {"pr": "12"}
        shown = next_event(events, "pane_agent_status_changed", pane_id=pane)
        assert shown["title"] == "reviewing"
        expired = next_event(events, "pane_updated")
        elapsed = time.monotonic() - started
        assert "tokens" not in expired["pane"]
        assert expired["pane"]["revision"] == first["pane"]["revision"] + 1
        gone = next_event(events, "pane_agent_status_changed", pane_id=pane)
        assert "title" not in gone
        assert 0.35 <= elapsed < 3.0
    finally:
        events.close()


def test_presentation_guards_and_state_labels(api: Api) -> None:
    pane = api.run(["cat"])
    report(api, pane, "working", source="custom:hook", agent="bot")
    api("pane.report_metadata", {"pane_id": pane, "source": "custom:a", "agent": "other",
                                 "title": "not for this agent"})
    assert "title" not in agent(api, pane)
    api("pane.report_metadata", {"pane_id": pane, "source": "custom:b",
                                 "applies_to_source": "custom:hook", "title": "mine",
                                 "display_agent": "Bot", "state_labels": {
                                     " Working ": "busy", "idle": " "}})
    info = agent(api, pane)
    assert (info["title"], info["display_agent"], info["state_labels"]) == \
        ("mine", "Bot", {"working": "busy"})
    api("pane.report_metadata", {"pane_id": pane, "source": "custom:c", "title": "newer",
                                 "custom_status": "compiling"})
    assert agent(api, pane)["title"] == "newer"
    assert agent(api, pane)["custom_status"] == "compiling"
    api("pane.report_metadata", {"pane_id": pane, "source": "custom:c", "clear_title": True})
    assert agent(api, pane)["title"] == "mine"
    api("pane.report_metadata", {"pane_id": pane, "source": "custom:b",
                                 "clear_state_labels": True})
    assert "state_labels" not in agent(api, pane)


def test_workspace_metadata(api: Api) -> None:
    ws = api("workspace.list")["workspaces"][0]["workspace_id"]
    assert api.error("workspace.report_metadata", {"workspace_id": "w99", "source": "s",
                                                   "tokens": {"k": "v"}}
                     )["code"] == "workspace_not_found"
    for params, code in [({"source": "", "tokens": {"k": "v"}}, "invalid_metadata_source"),
                         ({"source": "s", "tokens": {"k": "v"}, "ttl_ms": 0},
                          "invalid_metadata_ttl"),
                         ({"source": "s", "tokens": {}}, "invalid_metadata_tokens"),
                         ({"source": "s", "tokens": {"a b": "v"}}, "invalid_metadata_tokens")]:
        assert api.error("workspace.report_metadata",
                         {"workspace_id": ws, **params})["code"] == code
    events = subscriber(api, {"type": "workspace.metadata_updated"})
    try:
        # Long enough to be listed below before it expires, even on a loaded machine.
        api("workspace.report_metadata", {"workspace_id": ws, "source": "ci", "ttl_ms": 2000,
                                          "tokens": {"build": "green"}})
        assert next_event(events, "workspace_metadata_updated")["workspace"]["tokens"] == \
            {"build": "green"}
        listed = api("workspace.list")["workspaces"][0]
        assert listed["tokens"] == {"build": "green"}
        expired = next_event(events, "workspace_metadata_updated")
        assert "tokens" not in expired["workspace"]
    finally:
        events.close()


# -- agent targets ---------------------------------------------------------------------


def test_agent_targets(api: Api) -> None:
    shell = api.focused_pane()
    a = api.run(["cat"])
    b = api.run(["cat"])
    report(api, a, "idle", agent="twin")
    report(api, b, "idle", agent="twin")
    terminal = agent(api, a)["terminal_id"]
    assert agent(api, terminal)["pane_id"] == a
    assert agent(api, b)["pane_id"] == b
    error = api.error("agent.get", {"target": "twin"})
    assert error["code"] == "agent_target_ambiguous"
    assert {c["pane_id"] for c in error["data"]["candidates"]} == {a, b}
    assert "terminal_id=" in error["message"]
    api("agent.rename", {"target": a, "name": "alpha"})
    assert agent(api, "alpha")["pane_id"] == a
    assert api("pane.get", {"pane_id": a})["pane"]["label"] == "alpha"
    assert api.error("agent.get", {"target": "twin"})["code"] == "agent_target_ambiguous", \
        "a name does not hide the agent label it shares with another terminal"
    assert api.error("agent.get", {"target": shell})["code"] == "agent_not_found"
    assert api.error("agent.get", {"target": "nobody"})["code"] == "agent_not_found"
    assert api.error("agent.rename", {"target": b, "name": "alpha"})["code"] == \
        "agent_name_taken"
    assert api.error("agent.rename", {"target": b, "name": "Bad Name"})["code"] == \
        "invalid_agent_name"
    api("agent.rename", {"target": "alpha", "name": None})
    info = agent(api, a)
    assert "name" not in info
    assert "label" not in api("pane.get", {"pane_id": a})["pane"]


def test_send_keys_and_read(api: Api) -> None:
    pane = api.run(["cat"])
    report(api, pane, "idle")
    api("agent.send_keys", {"target": pane, "keys": ["h", "i", "enter"]})
    api.wait_text(pane, "hi")
    text = api("agent.read", {"target": pane, "source": "visible", "lines": 5})["read"]["text"]
    assert "hi" in text
    assert api.error("agent.send_keys", {"target": pane, "keys": ["nope+x"]})["code"] == \
        "invalid_key"


# -- agent.start -------------------------------------------------------------------------


def test_agent_start_placement(api: Api, tmp_path: Path) -> None:
    shell = api.focused_pane()
    started = api("agent.start", {"name": "one", "argv": ["cat"]})
    info = started["agent"]
    assert started["argv"] == ["cat"]
    assert info["name"] == "one" and info["tab_id"] == "w1:t1" and info["focused"] is False
    assert api("pane.get", {"pane_id": info["pane_id"]})["pane"]["label"] == "one"
    assert api.focused_pane() == shell
    ws2 = api("workspace.create", {})["workspace"]["workspace_id"]
    two = api("agent.start", {"name": "two", "argv": ["cat"], "workspace_id": ws2,
                              "cwd": str(tmp_path), "env": {"ZED": "1"}})["agent"]
    assert two["workspace_id"] == ws2 and two["cwd"] == str(tmp_path)
    tab = api("tab.create", {"workspace_id": ws2})["tab"]["tab_id"]
    three = api("agent.start", {"name": "three", "argv": ["sh", "-c", "echo $ZED; cat"],
                                "tab_id": tab, "env": {"ZED": "zed-value"},
                                "split": "down", "focus": True})["agent"]
    assert three["tab_id"] == tab and three["focused"] is True
    api.wait_text(three["pane_id"], "zed-value")
    names = {a["name"] for a in api("agent.list")["agents"]}
    assert names == {"one", "two", "three"}


@pytest.mark.parametrize(("params", "code"), [
    ({"name": "Bad"}, "invalid_agent_name"),
    ({"name": "9lives"}, "invalid_agent_name"),
    ({"name": "x" * 33}, "invalid_agent_name"),
    ({"name": "ok", "argv": []}, "invalid_agent_argv"),
    ({"name": "ok", "argv": ["cat", "a\0b"]}, "invalid_agent_argv"),
    ({"name": "ok", "argv": ["cat"], "cwd": "/", "location": "/"}, "agent_placement_conflict"),
    ({"name": "ok", "argv": ["cat"], "cwd": "/no/such/dir"}, "invalid_agent_location"),
    ({"name": "ok", "argv": ["cat"], "workspace_id": "w99"}, "agent_placement_not_found"),
    ({"name": "ok", "argv": ["cat"], "tab_id": "w1:t9"}, "agent_placement_not_found"),
    ({"name": "ok", "argv": ["cat"], "env": {"A=B": "x"}}, "invalid_env"),
    ({"name": "ok", "argv": ["/no/such/program"]}, "agent_start_failed"),
])
def test_agent_start_errors(shared_api: Api, params: dict[str, Any], code: str) -> None:
    api = shared_api
    params = {"argv": ["cat"], **params}
    assert api.error("agent.start", params)["code"] == code
    assert api("agent.list")["agents"] == []


def test_agent_start_name_taken_and_tab_workspace_conflict(api: Api) -> None:
    api("agent.start", {"name": "dup", "argv": ["cat"]})
    assert api.error("agent.start", {"name": "dup", "argv": ["cat"]})["code"] == \
        "agent_name_taken"
    ws2 = api("workspace.create", {})["workspace"]["workspace_id"]
    assert api.error("agent.start", {"name": "x", "argv": ["cat"], "workspace_id": ws2,
                                     "tab_id": "w1:t1"})["code"] == "agent_placement_conflict"


def test_agent_start_types_into_an_idle_shell(api: Api) -> None:
    shell = api.focused_pane()
    started = api("agent.start", {"name": "typed", "kind": "echo", "args": ["hello world"],
                                  "pane_id": shell})
    assert started["argv"] == ["echo", "hello world"]
    assert started["agent"]["pane_id"] == shell
    api.wait_text(shell, "hello world")
    assert api.error("agent.start", {"name": "again", "kind": "echo",
                                     "pane_id": shell})["code"] == "agent_pane_busy"
    assert api.error("agent.start", {"name": "again", "kind": "echo",
                                     "pane_id": "w1:p99"})["code"] == "agent_pane_not_found"


# -- waits ------------------------------------------------------------------------------


def test_agent_wait_returns_at_once_when_already_matching(api: Api) -> None:
    pane = api.run(["cat"])
    report(api, pane, "blocked")
    started = time.monotonic()
    info = api("agent.wait", {"target": pane})["agent"]
    assert info["agent_status"] == "blocked"
    assert time.monotonic() - started < 5  # a wait without timeout_ms never ends by itself
    assert api("agent.wait", {"target": pane, "until": ["blocked"]})["agent"]["pane_id"] == pane


def test_agent_wait_is_woken_by_the_change(api: Api) -> None:
    pane = api.run(["cat"])
    report(api, pane, "working")
    waiter = Api(api.server)
    try:
        waiter.send_request("w", "agent.wait", {
            "target": pane, "until": ["idle"], "timeout_ms": 10000})
        report(api, pane, "blocked")
        report(api, pane, "idle")
        reply = waiter.readline()
        assert reply["ok"], reply
        assert reply["result"]["agent"]["agent_status"] == "idle"
    finally:
        waiter.close()


def test_agent_wait_timeout_and_not_running(api: Api) -> None:
    pane = api.run(["cat"])
    report(api, pane, "working")
    error = api.error("agent.wait", {"target": pane, "until": ["idle"], "timeout_ms": 100})
    assert error["code"] == "timeout"
    waiter = Api(api.server)
    try:
        waiter.send_request("w", "agent.wait", {
            "target": pane, "until": ["idle"]})
        wait_until(lambda: api("server.stats")["subscribers"] >= 1, message="waiter")
        api("pane.close", {"pane_id": pane})
        reply = waiter.readline()
        assert reply["error"]["code"] == "agent_not_running"
    finally:
        waiter.close()


def test_agent_wait_release_counts_when_final_status_matches(api: Api) -> None:
    pane = api.run(["cat"])
    report(api, pane, "working", seq=1)
    waiter = Api(api.server)
    try:
        waiter.send_request("w", "agent.wait", {
            "target": pane, "until": ["blocked"]})
        wait_until(lambda: api("server.stats")["subscribers"] >= 1, message="waiter")
        api("pane.release_agent", {"pane_id": pane, "source": "custom:test", "agent": "bot",
                                   "seq": 2})
        assert waiter.readline()["error"]["code"] == "agent_not_running"
    finally:
        waiter.close()


def test_client_disconnecting_mid_wait_leaves_no_waiter(api: Api) -> None:
    pane = api.run(["cat"])
    report(api, pane, "working")
    baseline = api("server.stats")["subscribers"]
    for method, params in [
            ("agent.wait", {"target": pane, "until": ["idle"]}),
            ("events.wait", {"match_event": {"event": "pane_agent_status_changed",
                                             "pane_id": pane, "agent_status": "idle"}}),
            ("agent.prompt", {"target": pane, "text": "x", "wait": {"timeout_ms": 60000}})]:
        waiter = Api(api.server)
        waiter.sock.sendall(json.dumps({"id": "w", "method": method,
                                        "params": params}).encode() + b"\n")
        wait_until(lambda: api("server.stats")["subscribers"] > baseline,
                   message=f"{method} waiting")
        waiter.close()
        wait_until(lambda: api("server.stats")["subscribers"] == baseline,
                   message=f"{method} waiter gone")
    report(api, pane, "idle")
    assert status(api, pane) == "idle"
    assert api("ping")["type"] == "pong"


def test_events_wait(api: Api) -> None:
    pane = api.run(["cat"])
    report(api, pane, "idle")
    match = {"event": "pane_agent_status_changed", "pane_id": pane, "agent_status": "idle"}
    result = api("events.wait", {"match_event": match})
    assert result["event"]["data"]["agent_status"] == "idle"
    waiter = Api(api.server)
    try:
        waiter.sock.sendall(json.dumps({"id": "w", "method": "events.wait", "params": {
            "match_event": {**match, "agent_status": "blocked"}, "timeout_ms": 10000}}
        ).encode() + b"\n")
        wait_until(lambda: api("server.stats")["subscribers"] >= 1, message="waiter")
        report(api, pane, "blocked")
        reply = waiter.readline()
        assert reply["result"]["event"]["event"] == "pane_agent_status_changed"
        assert reply["result"]["event"]["data"]["agent_status"] == "blocked"
    finally:
        waiter.close()
    assert api.error("events.wait", {"match_event": {"event": "pane_created"}})["code"] == \
        "unsupported_event_wait_match"
    assert api.error("events.wait", {"match_event": {**match, "pane_id": "w1:p99"}}
                     )["code"] == "pane_not_found"
    assert api.error("events.wait", {"match_event": {**match, "agent_status": "working"},
                                     "timeout_ms": 50})["code"] == "timeout"


# -- agent.prompt ---------------------------------------------------------------------


def test_prompt_with_wait_runs_the_fake_agent_to_idle(api: Api, fake_agent: list[str]) -> None:
    pane = api.run(fake_agent)
    wait_until(lambda: api("agent.list")["agents"], message="fake agent reported")
    api.wait_text(pane, "fake-bot ready")
    before = agent(api, pane)["state_change_seq"]
    result = api("agent.prompt", {"target": "fake-bot", "text": "build it",
                                  "wait": {"timeout_ms": 10000}}, timeout=20)
    assert result["type"] == "agent_prompted"
    assert result["agent"]["agent_status"] == "idle"
    assert result["agent"]["state_change_seq"] > before
    api.wait_text(pane, "finished build it")
    blocked = api("agent.prompt", {"target": pane, "text": "ask",
                                   "wait": {"until": ["blocked"], "timeout_ms": 10000}},
                  timeout=20)
    assert blocked["agent"]["agent_status"] == "blocked"
    assert blocked["agent"]["message"] == "allow the edit?"


def test_prompt_without_effect_stalls(api: Api, fake_agent: list[str]) -> None:
    pane = api.run(fake_agent)
    wait_until(lambda: api("agent.list")["agents"], message="fake agent reported")
    api.wait_text(pane, "fake-bot ready")
    error = api.error("agent.prompt", {"target": pane, "text": "stall",
                                       "wait": {"timeout_ms": 1000}})
    assert error["code"] == "timeout"
    api.wait_text(pane, "(nothing happens)")
    started = time.monotonic()
    reply = api.request("agent.prompt", {"target": pane, "text": "stall",
                                         "wait": {"timeout_ms": 20000}}, timeout=30)
    assert reply["error"]["code"] == "agent_prompt_stalled"
    assert "state_change_seq remained" in reply["error"]["message"]
    assert 4.5 <= time.monotonic() - started < 15


RAW_READER = (
    "import os, sys\n"
    "sys.stdout.write('\\033[?2004hready\\n'); sys.stdout.flush()\n"
    "while True:\n"
    "    print(repr(os.read(0, 200)), flush=True)\n"
)


def test_prompt_pastes_bracketed_then_enter(api: Api) -> None:
    pane = api.run([sys.executable, "-c", RAW_READER])
    api.wait_text(pane, "ready")
    report(api, pane, "idle")
    assert api.error("agent.prompt", {"target": pane, "text": "  "})["code"] == \
        "empty_agent_prompt"
    assert api.error("agent.prompt", {"target": "nobody", "text": "x"})["code"] == \
        "agent_not_found"
    api("agent.prompt", {"target": pane, "text": "hi"})
    api.wait_text(pane, r"b'\x1b[200~hi\x1b[201~\n'")


def test_prompt_to_an_exited_agent_is_refused(api: Api) -> None:
    pane = api.run(["sh", "-c", "read x"])
    report(api, pane, "idle", agent="gone")
    api("pane.send_text", {"pane_id": pane, "text": "\r"})
    wait_until(lambda: api("pane.get", {"pane_id": pane})["pane"].get("exited"),
               message="exit")
    error = api.error("agent.prompt", {"target": pane, "text": "x"})
    assert error["code"] == "agent_not_found", "the exit released the agent"


# -- pane-scoped subscriptions ----------------------------------------------------------


def test_agent_status_subscription_filters_one_pane(api: Api) -> None:
    pane = api.run(["cat"])
    other = api.run(["cat"])
    report(api, pane, "idle")
    sub = subscriber(api, {"type": "pane.agent_status_changed", "pane_id": pane,
                           "agent_status": "idle"},
                     {"type": "pane.agent_status_changed", "pane_id": pane})
    try:
        first = sub.readline()
        check_subscription_event(first)
        assert first["event"] == "pane.agent_status_changed"
        assert first["data"]["agent_status"] == "idle" and "type" not in first["data"]
        report(api, other, "working", agent="other")
        report(api, pane, "working")
        second = sub.readline()
        check_subscription_event(second)
        assert (second["data"]["pane_id"], second["data"]["agent_status"]) == (pane, "working")
        report(api, pane, "idle")
        seen = [sub.readline(), sub.readline()]
        assert all(e["data"]["agent_status"] == "idle" for e in seen)
        for e in seen:
            check_subscription_event(e)
    finally:
        sub.close()
    error = api.error("events.subscribe", {"subscriptions": [
        {"type": "pane.created"},
        {"type": "pane.agent_status_changed", "pane_id": "w1:p99"}]})
    assert error["code"] == "pane_not_found"


def test_output_matched_subscription_is_edge_triggered(api: Api) -> None:
    pane = api.run(["cat"])
    sub = subscriber(api, {"type": "pane.output_matched", "pane_id": pane, "source": "visible",
                           "lines": 2, "match": {"type": "regex", "value": r"^READY \d+$"}})
    try:
        started = time.monotonic()
        api("pane.send_text", {"pane_id": pane, "text": "READY 1\r"})
        event = sub.readline()
        check_subscription_event(event)
        assert event["event"] == "pane.output_matched"
        assert event["data"]["matched_line"] == "READY 1"
        assert time.monotonic() - started < 5
        api("pane.send_text", {"pane_id": pane, "text": "more\r"})
        screen = [""]

        def rearmed() -> bool:
            screen[0] = api.read(pane)
            return screen[0].rstrip().endswith("more\nmore")
        try:
            wait_until(rearmed, message="re-armed")
        except AssertionError as err:
            raise AssertionError(f"{err}; the pane shows {screen[0]!r}") from None
        api("pane.send_text", {"pane_id": pane, "text": "READY 2\r"})
        sub.sock.settimeout(5)
        assert sub.readline()["event"] == "pane.output_matched"
    finally:
        sub.close()
    for bad, code in [({"match": {"type": "regex", "value": "("}}, "invalid_regex"),
                      ({"pane_id": "w1:p99"}, "pane_not_found")]:
        params = {"type": "pane.output_matched", "pane_id": pane, "source": "visible",
                  "match": {"type": "substring", "value": "x"}, **bad}
        assert api.error("events.subscribe", {"subscriptions": [params]})["code"] == code
