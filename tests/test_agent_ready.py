"""Readiness of agents started with ``agent.start``: ``launch_pending``, ``interactive_ready``
and prompts that wait for them, through a real server.

The fake agent (``slowbot_agent.py``, known to a test manifest in ``--manifests-dir`` by
its script name) shows a loading screen first, which the manifest classifies ``unknown``.
In ``slow`` mode it then throws away whatever was typed so far, as a TUI does before its
input box exists, and shows its idle prompt, echoing every line it reads afterwards as
``got: <line>``. In ``exit`` mode it exits on the first line it reads; in ``never`` mode
it keeps loading.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Api
from fake_agent import agent_argv, manifest, manifest_server, rule, write_agent, write_manifests

from cmux_core.agents.launch import LAUNCH_SETTLE_S
from cmux_core.agents.scheduler import STARTUP_GRACE_S
from cmux_core.testing import ServerProcess, wait_until

AGENT_SCRIPT = textwrap.dedent("""\
    import sys, termios, time
    mode = sys.argv[1]
    print("SLOWBOT loading", flush=True)
    if mode == "exit":
        sys.stdin.readline()
        sys.exit(3)
    while mode == "never":
        time.sleep(60)
    time.sleep(1.0)
    termios.tcflush(0, termios.TCIFLUSH)
    sys.stdout.write("\\x1b[2J\\x1b[H> type here\\n")
    sys.stdout.flush()
    for line in sys.stdin:
        print("got: " + line.strip(), flush=True)
""")

MANIFEST = manifest(
    "slowbot",
    rule("loading", "unknown", 30, contains=["SLOWBOT loading"]),
    rule("idle_prompt", "idle", 10, visible_idle=True, contains=["type here"]),
)

READY_WAIT_S = 20.0
"""Generous bound for a launch to settle on a loaded test machine."""


@pytest.fixture
def cmux_server(tmp_path: Path) -> Iterator[ServerProcess]:
    """The server behind ``api``, with the slowbot manifest."""
    with manifest_server(write_manifests(tmp_path, {"slowbot": MANIFEST})) as proc:
        yield proc


@pytest.fixture
def slowbot(tmp_path: Path) -> Any:
    script = write_agent(tmp_path, "slowbot_agent", AGENT_SCRIPT)
    return lambda mode: agent_argv(script, mode)


def agent(api: Api, target: str) -> dict[str, Any]:
    return dict(api("agent.get", {"target": target})["agent"])


def send_request(conn: Api, method: str, params: dict[str, Any]) -> None:
    conn.sock.sendall(json.dumps({"id": "w", "method": method,
                                  "params": params}).encode() + b"\n")


def waiting(api: Api, baseline: dict[str, Any]) -> bool:
    return bool(api("server.stats")["pending_waits"] > baseline["pending_waits"])


def test_settle_outlasts_detection_grace() -> None:
    assert LAUNCH_SETTLE_S > STARTUP_GRACE_S


def test_prompt_right_after_start_waits_until_the_agent_is_ready(
        api: Api, slowbot: Any) -> None:
    started = api("agent.start", {"name": "slow", "argv": slowbot("slow")})
    info = started["agent"]
    assert info["launch_pending"] is True
    assert "interactive_ready" not in info
    pane = info["pane_id"]
    listener = Api(api.server)
    try:
        listener("events.subscribe", {"subscriptions": [{"type": "pane.updated"}]})
        result = api("agent.prompt", {"target": "slow", "text": "build it"},
                     timeout=READY_WAIT_S)
        assert result["type"] == "agent_prompted"
        assert result["agent"]["interactive_ready"] is True
        assert "launch_pending" not in result["agent"]
        api.wait_text(pane, "got: build it")
        event = listener.event(timeout=READY_WAIT_S)
        assert event["event"] == "pane_updated"
        assert event["data"]["pane"]["pane_id"] == pane, "the readiness flip was published"
    finally:
        listener.close()
    later = agent(api, "slow")
    assert later["interactive_ready"] is True and "launch_pending" not in later
    assert later["agent"] == "slowbot" and later["agent_status"] in ("idle", "done")


def test_send_keys_right_after_start_waits_too(api: Api, slowbot: Any) -> None:
    info = api("agent.start", {"name": "keys", "argv": slowbot("slow")})["agent"]
    assert info["launch_pending"] is True
    api("agent.send_keys", {"target": "keys", "keys": ["h", "i", "enter"]},
        timeout=READY_WAIT_S)
    api.wait_text(info["pane_id"], "got: hi")
    assert agent(api, "keys")["interactive_ready"] is True


def test_agent_exiting_before_it_is_ready_is_not_running(api: Api, slowbot: Any) -> None:
    info = api("agent.start", {"name": "quitter", "argv": slowbot("exit")})["agent"]
    pane = info["pane_id"]
    baseline = api("server.stats")
    waiter = Api(api.server)
    try:
        send_request(waiter, "agent.prompt", {"target": "quitter", "text": "hello"})
        wait_until(lambda: waiting(api, baseline), message="the prompt waiting")
        assert agent(api, pane)["launch_pending"] is True
        api("pane.send_text", {"pane_id": pane, "text": "bye\r"})
        reply = waiter.readline(timeout=READY_WAIT_S)
        assert not reply["ok"]
        assert reply["error"]["code"] == "agent_not_running"
    finally:
        waiter.close()


def test_short_timeout_is_agent_not_ready(api: Api, slowbot: Any) -> None:
    api("agent.start", {"name": "loader", "argv": slowbot("never")})
    for method, params in [("agent.prompt", {"text": "x"}), ("agent.send_keys",
                                                             {"keys": ["enter"]})]:
        error = api.error(method, {"target": "loader", "timeout_ms": 200, **params})
        assert error["code"] == "agent_not_ready"
        assert "still starting" in error["message"]
    assert api.error("agent.send_keys", {"target": "loader", "keys": ["nope+x"]})["code"] \
        == "invalid_key", "keys are checked before waiting"
    assert agent(api, "loader")["launch_pending"] is True


def test_disconnecting_while_waiting_leaves_nothing_behind(api: Api, slowbot: Any) -> None:
    api("agent.start", {"name": "loader", "argv": slowbot("never")})
    baseline = api("server.stats")
    for method, params in [("agent.prompt", {"text": "x"}),
                           ("agent.send_keys", {"keys": ["enter"]})]:
        waiter = Api(api.server)
        send_request(waiter, method, {"target": "loader", **params})
        wait_until(lambda: waiting(api, baseline), message=f"{method} waiting")
        assert api("server.stats")["subscribers"] > baseline["subscribers"]
        waiter.close()
        wait_until(lambda: (lambda s: (s["pending_waits"], s["subscribers"]) == (
            baseline["pending_waits"], baseline["subscribers"]))(api("server.stats")),
            message=f"{method} waiter gone")
    assert agent(api, "loader")["launch_pending"] is True
    assert api("ping")["type"] == "pong"


def test_launch_deadline_and_timeout_validation(api: Api, slowbot: Any) -> None:
    for bad in (3000, 300001, 0):
        assert api.error("agent.start", {"name": "bad", "argv": ["cat"], "timeout_ms": bad}
                         )["code"] == "invalid_agent_timeout"
    # A deadline far enough off that the check right after the start sees it pending.
    api("agent.start", {"name": "loader", "argv": slowbot("never"), "timeout_ms": 6000})
    assert agent(api, "loader")["launch_pending"] is True
    info = wait_until(lambda: (lambda a: a if "launch_pending" not in a else None)(
        agent(api, "loader")), timeout=READY_WAIT_S, message="the launch deadline")
    assert "interactive_ready" not in info, "a launch that never settled is not ready"
    assert info["agent"] == "slowbot" and info["agent_status"] == "unknown"


def test_agents_not_started_here_are_ready_at_once(api: Api) -> None:
    pane = api.run(["cat"])
    api("pane.report_agent", {"pane_id": pane, "source": "custom:test", "agent": "bot",
                              "state": "working"})
    info = agent(api, pane)
    assert "launch_pending" not in info and "interactive_ready" not in info
    api("agent.send_keys", {"target": pane, "keys": ["o", "k", "enter"], "timeout_ms": 0})
    api.wait_text(pane, "ok")
