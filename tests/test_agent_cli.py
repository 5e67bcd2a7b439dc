"""``cmux agent`` commands against a real server (parsed and run in-process)."""

from __future__ import annotations

import argparse
import json

import pytest
from conftest import Api

from cmux_core.cli.agent import add_agent_commands
from cmux_core.cli.common import add_common
from cmux_core.cli.manifests import add_explain_command


def cmux_agent(api: Api, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    parser = argparse.ArgumentParser()
    add_common(parser, top=True)
    add_explain_command(add_agent_commands(parser.add_subparsers(dest="command"), add_common),
                        add_common)
    ns = parser.parse_args(["agent", argv[0], "--socket", str(api.server.socket_path),
                            *argv[1:]])
    assert ns.func(ns) == 0
    return capsys.readouterr().out


def test_start_list_wait_prompt_read_rename(api: Api, capsys: pytest.CaptureFixture[str]
                                            ) -> None:
    pane = cmux_agent(api, capsys, "start", "builder", "--", "cat").strip()
    assert pane == api("agent.get", {"target": "builder"})["agent"]["pane_id"]
    api("pane.report_agent", {"pane_id": pane, "source": "custom:cli", "agent": "catbot",
                              "state": "working"})
    listing = cmux_agent(api, capsys, "list").splitlines()
    assert listing[0].split() == ["NAME", "AGENT", "STATUS", "FOR", "BY", "PANE", "TITLE"]
    assert listing[1].split()[:3] == ["builder", "catbot", "working"]
    assert "hook:custom:cli" in listing[1]
    assert cmux_agent(api, capsys, "wait", "builder", "--until", "working").strip() == "working"
    assert cmux_agent(api, capsys, "prompt", "builder", "hello").strip() == "working"
    api.wait_text(pane, "hello")
    assert "hello" in cmux_agent(api, capsys, "read", "builder")
    assert cmux_agent(api, capsys, "rename", "builder", "bob").strip() == pane
    rows = json.loads(cmux_agent(api, capsys, "list", "--json"))["agents"]
    assert [r["name"] for r in rows] == ["bob"]
    assert cmux_agent(api, capsys, "focus", "bob").strip() == pane
    assert api.focused_pane() == pane


def test_explain_lists_the_last_ignored_report(api: Api, capsys: pytest.CaptureFixture[str]
                                               ) -> None:
    """A report that changes nothing says why: a warning in the server's log naming the
    source and the reason, and ``agent explain`` (method and command) shows it."""
    pane = api.run(["cat"])
    assert api("pane.report_agent_session", {"pane_id": pane, "source": "custom:undeclared",
                                             "agent": "x", "agent_session_id": "abc"}
               ) == {"type": "ok"}
    explained = api("agent.explain", {"target": pane})["explain"]
    ignored = explained["last_ignored_report"]
    assert ignored["method"] == "pane.report_agent_session"
    assert ignored["source"] == "custom:undeclared" and ignored["agent"] == "x"
    assert "not declared" in ignored["reason"] and explained["state"] == "unknown"
    assert "ignored pane.report_agent_session from source 'custom:undeclared'" in (
        api.server.log())
    out = cmux_agent(api, capsys, "explain", pane)
    assert "last ignored report: pane.report_agent_session from source 'custom:undeclared'" in out
    api("pane.report_agent", {"pane_id": pane, "source": "custom:cli", "agent": "catbot",
                              "state": "working", "seq": 5})
    api("pane.report_agent", {"pane_id": pane, "source": "custom:cli", "agent": "catbot",
                              "state": "idle", "seq": 4})
    ignored = api("agent.explain", {"target": pane})["explain"]["last_ignored_report"]
    assert ignored["method"] == "pane.report_agent" and "stale seq 4" in ignored["reason"]
