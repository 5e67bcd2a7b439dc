
"""``agent.prompt`` never types into a dialog, through a real server and scripted agents.

``dialogbot_agent.py`` starts on a folder-trust dialog in words no manifest rule knows:
the ``dialog_shape`` rule of its manifest sees a cursor on one of two options and a
confirm/cancel hint. Any line it reads answers the dialog with its default, "No, exit",
and it exits with status 1, as Claude Code does. ``blindbot`` is the same program under a
manifest without the shape rule, so its dialog reads ``unknown`` and its launch times out.
In ``prompt`` mode the agent shows its idle prompt and exits on the first line it reads;
in ``later`` mode the first line it reads replaces the prompt with a screen no rule knows.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Api
from fake_agent import agent_argv, manifest_server, write_agent, write_manifests

from cmux_core.cli.agent import add_agent_commands
from cmux_core.cli.common import add_common
from cmux_core.cli.manifests import add_explain_command
from cmux_core.detect.engine import FALLBACK_IDLE
from cmux_core.errors import CmuxError
from cmux_core.testing import ServerProcess, wait_until

AGENT = textwrap.dedent("""\
    import sys
    if sys.argv[1] == "later":
        sys.stdout.write("\\x1b[2J\\x1b[Hbot> ")
        sys.stdout.flush()
        sys.stdin.readline()
        sys.stdout.write("\\x1b[2J\\x1b[Hsomething no rule knows\\n")
    elif sys.argv[1] == "prompt":
        sys.stdout.write("\\x1b[2J\\x1b[Hbot> ")
    else:
        sys.stdout.write("\\x1b[2J\\x1b[H" + "\\n".join([
            "─" * 60,
            " Opening this workspace:",
            "",
            " /home/user/project",
            "",
            " Should files here be run and edited?",
            "",
            " ▸ Leave now",
            "   Go ahead, I trust it",
            "",
            " ⏎ picks · esc cancels and goes back",
        ]) + "\\n")
    sys.stdout.flush()
    sys.stdin.readline()
    sys.exit(1)
""")

RULES = textwrap.dedent("""\
    [[rules]]
    id = "prompt"
    state = "idle"
    priority = 500
    visible_idle = true
    line_regex = ['^bot>']
""")
SHAPE_RULE = textwrap.dedent("""\
    [[rules]]
    id = "dialog_shape"
    state = "blocked"
    priority = 850
    region = "bottom_non_empty_lines(30)"
    visible_blocker = true
    shape = ["choice_dialog"]
""")
MANIFESTS = {
    "dialogbot": 'id = "dialogbot"\nprocess_names = ["dialogbot_agent"]\n' + RULES + SHAPE_RULE,
    "blindbot": 'id = "blindbot"\nprocess_names = ["blindbot_agent"]\n' + RULES,
}
WAIT_S = 20.0


@pytest.fixture(scope="module")
def cmux_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server for the module: every test starts its own agent under its own name."""
    with manifest_server(write_manifests(tmp_path_factory.mktemp("m"), MANIFESTS)) as proc:
        yield proc


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("agents")
    return {name: write_agent(folder, f"{name}_agent", AGENT) for name in MANIFESTS}


def status(api: Api, target: str) -> str | None:
    reply = api.request("agent.get", {"target": target})
    return str(reply["result"]["agent"]["agent_status"]) if reply["ok"] else None


def cmux_explain(api: Api, capsys: pytest.CaptureFixture[str], target: str) -> str:
    """What ``cmux agent explain TARGET`` prints about a live pane."""
    parser = argparse.ArgumentParser()
    add_common(parser, top=True)
    add_explain_command(parser.add_subparsers().add_parser("agent").add_subparsers(),
                        add_common)
    capsys.readouterr()
    args = parser.parse_args(["agent", "explain", "--socket", str(api.server.socket_path),
                              target])
    assert args.func(args) == 0
    return capsys.readouterr().out


def refused(api: Api, target: str, text: str) -> dict[str, Any]:
    """The error ``agent.prompt`` answers (the test fails if it succeeds)."""
    reply = api.request("agent.prompt", {"target": target, "text": text}, WAIT_S)
    assert not reply["ok"], reply
    return dict(reply["error"])


def test_a_blocked_agent_is_refused_naming_the_dialog(api: Api, scripts: dict[str, Path],
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    pane = api("agent.start", {"name": "trusting",
                               "argv": agent_argv(scripts["dialogbot"], "dialog")}
               )["agent"]["pane_id"]
    error = refused(api, "trusting", "hi there")
    assert error["code"] == "agent_not_ready"
    assert "blocked" in error["message"] and "'Opening this workspace:'" in error["message"]
    assert status(api, "trusting") == "blocked"
    assert "hi there" not in api.read(pane), "nothing was typed into the dialog"
    parser = argparse.ArgumentParser()
    add_common(parser, top=True)
    add_agent_commands(parser.add_subparsers(dest="command"), add_common)
    args = parser.parse_args(["agent", "prompt", "--socket", str(api.server.socket_path),
                              "trusting", "hi there"])
    with pytest.raises(CmuxError) as raised:
        args.func(args)
    assert raised.value.code == "agent_not_ready"
    assert status(api, "trusting") == "blocked", "the agent is still there, still asking"


def test_a_launch_that_times_out_unrecognised_sends_nothing(
        api: Api, scripts: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    pane = api("agent.start", {"name": "blind", "timeout_ms": 3500,
                               "argv": agent_argv(scripts["blindbot"], "dialog")}
               )["agent"]["pane_id"]
    error = refused(api, "blind", "hi there")
    assert error["code"] == "agent_not_ready"
    assert "unknown" in error["message"] and "nothing was sent" in error["message"]
    assert "hi there" not in api.read(pane)
    again = refused(api, "blind", "hi there")
    assert again["code"] == "agent_not_ready", "still refused once the launch is over"
    assert status(api, "blind") == "unknown"
    explained = api("agent.explain", {"target": "blind"})["explain"]
    assert (explained["state"], explained["matched_rule"]) == ("unknown", None), \
        "explain says what the server publishes, not the idle fallback"
    out = cmux_explain(api, capsys, "blind")
    assert "agent: blindbot  state: unknown" in out and "state: idle" not in out, \
        "cmux agent explain prints what the server publishes, never idle"
    assert "agent_screen_not_recognised_yet" in out, out


def test_cmux_agent_explain_prints_the_idle_fallback_the_server_publishes(
        api: Api, scripts: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """Once a screen rule has matched, a screen no rule knows is published ``idle`` (the
    fallback), and the live ``cmux agent explain`` says idle too."""
    pane = api("agent.start", {"name": "later", "argv": agent_argv(scripts["blindbot"], "later")}
               )["agent"]["pane_id"]
    wait_until(lambda: status(api, pane) == "idle" or None, timeout=WAIT_S,
               message="the agent at its prompt")
    api("pane.send_text", {"pane_id": pane, "text": "go\n"})
    wait_until(lambda: api("agent.explain", {"target": pane})["explain"]["fallback_reason"]
               == FALLBACK_IDLE or None, timeout=WAIT_S, message="the unknown screen read")
    assert status(api, pane) == "idle"
    out = cmux_explain(api, capsys, pane)
    assert "agent: blindbot  state: idle\n" in out, out
    api("pane.close", {"pane_id": pane})


def test_an_agent_exiting_on_the_prompt_is_a_failure(api: Api, scripts: dict[str, Path]
                                                     ) -> None:
    pane = api.focused_pane()
    api("pane.send_text", {"pane_id": pane,
                           "text": f"{sys.executable} {scripts['dialogbot']} prompt\n"})
    wait_until(lambda: status(api, pane) == "idle" or None, timeout=WAIT_S,
               message="the agent at its prompt")
    error = refused(api, pane, "bye")
    assert error["code"] == "agent_not_running"


def test_a_hook_saying_blocked_is_the_second_witness(api: Api, scripts: dict[str, Path],
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    """A hook reports a permission the screen rules do not see: the pane is blocked, and
    the mismatch is kept with the screen for ``cmux agent explain --last-mismatch``."""
    pane = api.run([sys.executable, str(scripts["blindbot"]), "prompt"])
    wait_until(lambda: status(api, pane) == "idle" or None, timeout=WAIT_S,
               message="the agent at its prompt")
    assert api("agent.explain", {"target": pane})["explain"]["last_mismatch"] is None
    api("pane.report_agent", {"pane_id": pane, "source": "custom:test", "agent": "blindbot",
                              "state": "blocked"})
    assert status(api, pane) == "blocked"
    api("pane.send_text", {"pane_id": pane, "text": "typed"})
    found = wait_until(lambda: api("agent.explain", {"target": pane})["explain"]
                       ["last_mismatch"], timeout=WAIT_S, message="the mismatch noted")
    assert (found["hook_state"], found["screen_state"], found["matched_rule"]) == (
        "blocked", "idle", "prompt")
    assert "bot> typed" in found["screen"]
    assert status(api, pane) == "blocked", "the hook's blocked holds"
    parser = argparse.ArgumentParser()
    add_common(parser, top=True)
    add_explain_command(parser.add_subparsers().add_parser("agent").add_subparsers(),
                        add_common)
    capsys.readouterr()
    args = parser.parse_args(["agent", "explain", "--socket", str(api.server.socket_path),
                              pane, "--last-mismatch"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "hook said blocked, screen read idle (rule prompt)" in out and "bot> typed" in out
