"""Start-up of a detected agent: ``unknown`` until a rule of its manifest matches.

A small ``python3 -c`` program stands in for an agent (named by ``CMUX_AGENT``): it prints
a start-up banner no rule knows, waits past detection's startup grace, then draws its
prompt. The pane must stay ``unknown`` (one event saying so, when the agent is detected)
and go ``idle`` only once the prompt is on screen, also when a title rule would say idle
before anything is drawn.
"""

from __future__ import annotations

import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Api
from fake_agent import manifest, manifest_server, rule, write_manifests

from cmux_core.agents.scheduler import STARTUP_GRACE_S
from cmux_core.testing import ServerProcess

MANIFEST = manifest(
    "slowdraw",
    rule("splash", "unknown", 20, contains=["SLOWDRAW checking"]),
    rule("prompt", "idle", 10, visible_idle=True, contains=["slowdraw>"]),
    rule("title_ready", "idle", 5, region="osc_title", regex=["^\\x{2733}"]),
    process_names=[],
)

DRAW_DELAY_S = STARTUP_GRACE_S + 2.5
"""When the fake agent draws its prompt: well after the grace has ended."""


def agent_program(*phases: tuple[float, str]) -> list[str]:
    """``python3 -c`` printing each ``(delay, text)`` in turn on a cleared screen."""
    code = textwrap.dedent(f"""\
        import sys, time
        for delay, text in {list(phases)!r}:
            time.sleep(delay)
            sys.stdout.write("\\x1b[2J\\x1b[H" + text)
            sys.stdout.flush()
        time.sleep(600)
    """)
    return [sys.executable, "-c", code]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with manifest_server(write_manifests(tmp_path, {"slowdraw": MANIFEST})) as proc:
        yield proc


def status_events(server: ServerProcess) -> Api:
    listener = Api(server)
    listener("events.subscribe", {"subscriptions": [{"type": "pane.agent_status_changed"}]})
    return listener


def until_idle(listener: Api, api: Api, pane_id: str,
               timeout: float = 30.0) -> list[tuple[str | None, str, str]]:
    """The pane's status events up to its first ``idle``: (agent, status, screen then)."""
    seen: list[tuple[str | None, str, str]] = []
    deadline = time.monotonic() + timeout
    while not seen or seen[-1][1] != "idle":
        left = deadline - time.monotonic()
        assert left > 0, f"no idle status; events so far: {seen}"
        data: dict[str, Any] = listener.event(timeout=left)["data"]
        if data["pane_id"] == pane_id:
            seen.append((data.get("agent"), data["agent_status"], api.read(pane_id)))
    return seen


def test_agent_stays_unknown_until_its_prompt_is_drawn(server: ServerProcess) -> None:
    api = Api(server)
    listener = status_events(server)
    try:
        pane_id = api.run(agent_program((0.0, "Loading the slow agent...\n"),
                                        (DRAW_DELAY_S, "ready\nslowdraw> ")),
                          env={"CMUX_AGENT": "slowdraw"})
        events = until_idle(listener, api, pane_id)
        assert [(agent, status) for agent, status, _ in events] == [
            ("slowdraw", "unknown"), ("slowdraw", "idle")], events
        assert "slowdraw>" in events[-1][2], "idle was published before the prompt was drawn"
        explained = api("agent.explain", {"target": pane_id})["explain"]
        assert explained["matched_rule"]["id"] == "prompt"
    finally:
        listener.close()
        api.close()


def test_a_start_up_rule_keeps_unknown_and_the_prompt_still_wins(server: ServerProcess) -> None:
    """A rule whose state is ``unknown`` (a splash) is no prompt: nothing is published for
    it, and the screens no rule knows after it are still not taken for idle."""
    api = Api(server)
    listener = status_events(server)
    try:
        pane_id = api.run(agent_program((0.0, "SLOWDRAW checking connectivity\n"),
                                        (STARTUP_GRACE_S + 1.0, "almost there\n"),
                                        (1.5, "slowdraw> ")),
                          env={"CMUX_AGENT": "slowdraw"})
        events = until_idle(listener, api, pane_id)
        assert [status for _, status, _ in events] == ["unknown", "idle"], events
        assert "slowdraw>" in events[-1][2]
    finally:
        listener.close()
        api.close()


def test_a_title_set_before_the_prompt_is_drawn_is_no_prompt(server: ServerProcess) -> None:
    api = Api(server)
    listener = status_events(server)
    try:
        pane_id = api.run(agent_program((0.0, "Loading the slow agent...\n"),
                                        (1.0, "\x1b]0;\u2733 slowdraw\x07Still loading\n"),
                                        (DRAW_DELAY_S - 1.0, "slowdraw> ")),
                          env={"CMUX_AGENT": "slowdraw"})
        events = until_idle(listener, api, pane_id)
        assert [status for _, status, _ in events] == ["unknown", "idle"], events
        assert "slowdraw>" in events[-1][2], "the title was taken for a drawn prompt"
    finally:
        listener.close()
        api.close()
