"""``agent.prompt`` / ``cmux agent prompt`` without ``wait`` report the status the prompt
led to, not the one before it.

A small fake agent (``promptbot_agent.py``, known to a test manifest by its script name)
shows an idle prompt; a line starting with ``work`` makes it show a working screen a
moment later, any other line is noted and the prompt shown again.
"""

from __future__ import annotations

import argparse
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Api
from fake_agent import (
    DRAWN_SCREEN,
    agent_argv,
    manifest,
    manifest_server,
    rule,
    wait_agent,
    write_agent,
    write_manifests,
)

from cmux_core.api.methods.agent import PROMPT_ENTER_DELAY_S, PROMPT_TAKEN_LIMIT_S
from cmux_core.cli.agent import add_agent_commands
from cmux_core.cli.common import add_common
from cmux_core.testing import ServerProcess

AGENT_SCRIPT = DRAWN_SCREEN + textwrap.dedent("""\
    show("PROMPTBOT\\n> type here")
    for line in sys.stdin:
        text = line.strip()
        if text.startswith("work"):
            time.sleep(0.3)
            show("PROMPTBOT on " + text + "\\nthinking... (esc to interrupt)")
        else:
            show("PROMPTBOT noted " + text + "\\n> type here")
""")

MANIFEST = manifest(
    "promptbot",
    rule("thinking", "working", 20, contains=["esc to interrupt"]),
    rule("prompt", "idle", 10, visible_idle=True, contains=["type here"]),
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with manifest_server(write_manifests(tmp_path, {"promptbot": MANIFEST})) as proc:
        yield proc


@pytest.fixture
def bot(server: ServerProcess, tmp_path: Path) -> Iterator[tuple[Api, str]]:
    """An idle promptbot named ``bot`` and a connection to its server."""
    script = write_agent(tmp_path, "promptbot_agent", AGENT_SCRIPT)
    api = Api(server)
    try:
        pane = api("agent.start", {"name": "bot", "argv": agent_argv(script)}
                   )["agent"]["pane_id"]
        wait_agent(api, pane, "promptbot", "idle", timeout=20)
        yield api, pane
    finally:
        api.close()


def cmux_agent_prompt(api: Api, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    parser = argparse.ArgumentParser()
    add_common(parser, top=True)
    add_agent_commands(parser.add_subparsers(dest="command"), add_common)
    ns = parser.parse_args(["agent", "prompt", "--socket", str(api.server.socket_path), *argv])
    assert ns.func(ns) == 0
    return capsys.readouterr().out


def test_cli_prompt_prints_the_status_the_prompt_led_to(
        bot: tuple[Api, str], capsys: pytest.CaptureFixture[str]) -> None:
    api, pane = bot
    assert cmux_agent_prompt(api, capsys, "bot", "work on the parser").strip() == "working"
    assert "PROMPTBOT on work on the parser" in api.read(pane)


def test_prompt_without_effect_on_the_state_reports_after_the_screen_changed(
        bot: tuple[Api, str]) -> None:
    api, pane = bot
    began = time.monotonic()
    result = api("agent.prompt", {"target": "bot", "text": "remember the milk"})
    took = time.monotonic() - began
    assert result["type"] == "agent_prompted"
    assert result["agent"]["agent_status"] == "idle"
    assert "PROMPTBOT noted remember the milk" in api.read(pane), \
        "the reply came before the agent took the prompt"
    assert PROMPT_ENTER_DELAY_S <= took < PROMPT_ENTER_DELAY_S + PROMPT_TAKEN_LIMIT_S + 5


def test_prompt_api_reply_carries_the_new_state_and_seq(bot: tuple[Api, str]) -> None:
    api, _ = bot
    before = api("agent.get", {"target": "bot"})["agent"]
    result = api("agent.prompt", {"target": "bot", "text": "work hard"})["agent"]
    assert result["agent_status"] == "working"
    assert result["state_change_seq"] > before["state_change_seq"]
