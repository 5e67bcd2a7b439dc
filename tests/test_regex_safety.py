"""No regex stalls the server: output waits and manifest rules run in linear time.

Each pattern here takes a backtracking engine exponential (or high-polynomial) time on
the line its pane prints. A real server must keep answering other connections while a
wait holds such a pattern, the wait must end on its own ``timeout_ms``, and an agent
whose manifest holds one must be classified while the server keeps serving.
"""

from __future__ import annotations

import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Raw

from cmux_core.client import Client
from cmux_core.testing import ServerProcess, start_server, wait_until

PY = sys.executable
TIMEOUT_MS = 2000

PATHOLOGICAL = [
    (r"(a|a)+$", "'a' * 5000 + '!'"),
    (r"(a+)+$", "'a' * 5000 + '!'"),
    (r"(.*a){20}", "('c' * 1000 + 'a') * 19"),
    (r"(x+x+)+y", "'x' * 5000"),
    # Linear on RE2 but with a large program: seconds on this line, so the search runs
    # off the loop and the wait is cut off by its own timeout.
    (r"(?:a?){1000}a{1000}b", "'a' * 78000"),
]


def show(line: str) -> list[str]:
    """A pane command printing ``line`` (a Python expression), then READY, then idling."""
    return [PY, "-c", f"import time; print({line}); print('READY'); time.sleep(600)"]


def send_raw(server: ServerProcess, method: str, params: dict[str, Any]) -> Raw:
    """Send one request on a fresh connection without waiting for its reply."""
    conn = Raw(server.socket_path)
    conn.send_request(1, method, params)
    return conn


@pytest.mark.parametrize(("pattern", "line"), PATHOLOGICAL)
def test_a_pathological_wait_neither_stalls_the_server_nor_outlives_its_timeout(
        cmux_server: ServerProcess, pattern: str, line: str) -> None:
    with cmux_server.client() as client:
        pane = client.call("pane.split", {"command": show(line)})["pane"]["pane_id"]
        client.call("pane.wait_for_output", {
            "pane_id": pane, "timeout_ms": 10000,
            "match": {"type": "substring", "value": "READY"}})
        sent = time.monotonic()
        waiter = send_raw(cmux_server, "pane.wait_for_output", {
            "pane_id": pane, "source": "recent", "lines": 1000, "timeout_ms": TIMEOUT_MS,
            "match": {"type": "regex", "value": pattern}})
        try:
            # The wait is being held (and its pattern searched) before the ping goes out.
            wait_until(lambda: client.call("server.stats")["pending_waits"] == 1,
                       message="the wait to be pending")
            assert client.call("ping")
            answered = time.monotonic()
            assert answered - sent < TIMEOUT_MS / 1000, (
                f"ping answered {answered - sent:.1f}s after the wait was sent")
            reply = waiter.line(TIMEOUT_MS / 1000 + 10)
        finally:
            waiter.close()
        assert reply["ok"] is False and reply["error"]["code"] == "timeout", reply


@pytest.mark.parametrize(("pattern", "reason"), [
    (r"(?<=a)b", "look-around is not supported"),
    (r"(?!a)b", "look-around is not supported"),
    (r"(a)\1", "backreferences are not supported"),
    (r"a++", "bad repetition operator"),
])
def test_regexes_outside_the_rust_dialect_are_invalid_regex(
        shared_server: ServerProcess, pattern: str, reason: str) -> None:
    with shared_server.client() as client:
        refused_everywhere(client, pattern, reason)


def refused_everywhere(cmux_client: Client, pattern: str, reason: str) -> None:
    pane = cmux_client.call("pane.list")["panes"][0]["pane_id"]
    reply = cmux_client.request("pane.wait_for_output", {
        "pane_id": pane, "timeout_ms": 10,
        "match": {"type": "regex", "value": pattern}})
    error = reply["error"]
    assert error["code"] == "invalid_regex" and reason in error["message"], error
    assert error["data"] == {"field": "match.value"}
    reply = cmux_client.request("events.subscribe", {"subscriptions": [
        {"type": "pane.output_matched", "pane_id": pane, "source": "recent",
         "match": {"type": "regex", "value": pattern}}]})
    assert reply["error"]["code"] == "invalid_regex", reply
    assert cmux_client.call("ping")


def test_rust_dialect_regexes_match_in_waits(cmux_client: Client) -> None:
    """Unicode ``\\d``/``\\w``, ``\\x{…}`` escapes and ``(?i)`` keep their Rust meaning."""
    pane = cmux_client.call("pane.split", {
        "command": show("'Stage ٣ café done ⠋'")})["pane"]["pane_id"]
    result = cmux_client.call("pane.wait_for_output", {
        "pane_id": pane, "timeout_ms": 10000,
        "match": {"type": "regex", "value": r"(?i)^stage \d \w+ DONE [\x{2800}-\x{28FF}]$"}})
    assert result["matched_line"] == "Stage ٣ café done ⠋"


SLOWBOT = textwrap.dedent(r"""
    id = "slowbot"

    [[rules]]
    id = "alternation"
    state = "working"
    line_regex = ['(a|a)+$']

    [[rules]]
    id = "nested"
    state = "blocked"
    regex = ['(x+x+)+y', '(a+)+$']

    [[rules]]
    id = "ready"
    state = "idle"
    priority = -1
    line_regex = ['^READY$']
""")


@pytest.fixture
def slowbot_server(tmp_path: Path) -> Iterator[ServerProcess]:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "slowbot.toml").write_text(SLOWBOT)
    with start_server(["--manifests-dir", str(manifests)], size="400x60") as server:
        yield server


def test_a_manifest_with_pathological_rules_is_classified_while_the_server_serves(
        slowbot_server: ServerProcess) -> None:
    # 50 rows of 150 a's and a '!' and one of x's: every row defeats the patterns, slowly
    # for a backtracking engine.
    screen = "'\\n'.join(['a' * 150 + '!'] * 50 + ['x' * 150])"
    with slowbot_server.client() as client:
        pane = client.call("pane.split", {"command": show(screen),
                                          "env": {"CMUX_AGENT": "slowbot"}})["pane"]["pane_id"]
        client.call("pane.wait_for_output", {
            "pane_id": pane, "timeout_ms": 10000,
            "match": {"type": "substring", "value": "READY"}})
        wait_until(lambda: client.call("pane.get", {"pane_id": pane})["pane"].get("agent")
                   == "slowbot", message="the pane to be identified as slowbot")
        explained = client.call("agent.explain", {"target": pane})["explain"]
        assert client.call("ping")
    assert explained["state"] == "idle"
    assert explained["matched_rule"]["id"] == "ready"
    evidence = {rule["id"]: rule for rule in explained["evaluated_rules"]}
    assert not evidence["alternation"]["matched"]
    assert not evidence["nested"]["matched"]


def test_the_server_stops_on_sigterm_while_a_long_search_runs() -> None:
    # A pane 200 columns wide: the wait reads a line of 190,000 a's, a search of seconds
    # on RE2 (and exponential for a backtracking engine).
    server = start_server(size="400x60")
    pattern = PATHOLOGICAL[-1][0]
    with server.client() as client:
        pane = client.call("pane.split", {"command": show("'a' * 190000")})["pane"]["pane_id"]
        client.call("pane.wait_for_output", {
            "pane_id": pane, "timeout_ms": 10000,
            "match": {"type": "substring", "value": "READY"}})
        waiter = send_raw(server, "pane.wait_for_output", {
            "pane_id": pane, "source": "recent", "lines": 1000,
            "match": {"type": "regex", "value": pattern}})
        try:
            wait_until(lambda: client.call("server.stats")["pending_waits"] == 1,
                       message="the wait to be pending")
            # SIGTERM, and SIGKILL only if the server has not exited 10 s later.
            assert server.stop() == 0
        finally:
            waiter.close()


BIGBOT = 'id = "bigbot"\n' + "".join(textwrap.dedent(f"""
    [[rules]]
    id = "huge-{end}"
    state = "blocked"
    regex = ['(?s)(?:.?){{1000}}(?:.?){{1000}}.{{1000}}{end}']
""") for end in "cdefgh") + textwrap.dedent("""
    [[rules]]
    id = "ready"
    state = "idle"
    priority = -1
    line_regex = ['^READY$']
""")


def test_a_manifest_with_a_huge_program_is_classified_off_the_loop(tmp_path: Path) -> None:
    # Linear on RE2, but seconds per classification of this 400x60 screen (six rules of
    # 23,000 instructions each): it must run beside the loop, not on it, and its result
    # must still be published.
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "bigbot.toml").write_text(BIGBOT)
    server = start_server(["--manifests-dir", str(manifests)], size="400x60")
    try:
        with server.client() as client:
            rows = "'\\n'.join(['b' * 399] * 57)"
            pane = client.call("pane.split", {"command": show(rows),
                                              "env": {"CMUX_AGENT": "bigbot"}})["pane"]["pane_id"]
            client.call("pane.wait_for_output", {
                "pane_id": pane, "timeout_ms": 10000,
                "match": {"type": "substring", "value": "READY"}})
            # Small requests, back to back, for as long as a few classifications take (and
            # until the first one's result, idle, is published: the agent is unknown before).
            slowest = 0.0
            seen: set[str] = set()
            stop, give_up = time.monotonic() + 8, time.monotonic() + 60
            while time.monotonic() < stop or ("bigbot:idle" not in seen
                                               and time.monotonic() < give_up):
                began = time.monotonic()
                got = client.call("pane.get", {"pane_id": pane})["pane"]
                slowest = max(slowest, time.monotonic() - began)
                seen.add(f"{got.get('agent')}:{got.get('agent_status')}")
                time.sleep(0.02)
            # agent.explain works out the same screen, beside the loop too.
            asking = send_raw(server, "agent.explain", {"target": pane})
            for _ in range(20):
                began = time.monotonic()
                assert client.call("ping")
                slowest = max(slowest, time.monotonic() - began)
                time.sleep(0.05)
            explained = asking.line(30)["result"]["explain"]
            asking.close()
        assert "bigbot:idle" in seen, seen
        assert explained["matched_rule"]["id"] == "ready", explained
        assert slowest < 1.0, f"a request waited {slowest:.2f} s behind a classification"
    finally:
        server.stop()
