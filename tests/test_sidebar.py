"""``cmux agents``: view flags, rendering of a fixed set of rows, and the command against a
real server (one-shot, and ``--watch`` in a real pseudo-terminal)."""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import sys
from typing import Any

import ptyprocess
import pytest

from cmux_core.cli.main import add_common
from cmux_core.cli.sidebar import (
    DEFAULT_COLUMNS,
    Board,
    add_sidebar_commands,
    age,
    cell_width,
    columns_from,
    filter_node,
    fit,
    render_rows,
    render_screen,
    sort_key,
    view_params,
)
from cmux_core.testing import ServerProcess, wait_until

NOW = 1_800_000_000.0
SGR = re.compile(r"\x1b\[[0-9;]*m")


def agent(pane: str, status: str, *, name: str | None = None, ago: float = 5,
          ws: str = "w1", tab: str = "w1:t1", **extra: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"pane_id": pane, "workspace_id": ws, "tab_id": tab,
                           "agent": "claude", "agent_status": status, "focused": False,
                           "status_changed_at": NOW - ago, **extra}
    if name:
        row["name"] = name
    return row


BOARD = Board(
    rows=[agent("w1:p2", "blocked", name="builder", ago=125, message="approve rm -rf build/?"),
          agent("w2:p1", "done", name="reviewer", ago=3700, ws="w2", tab="w2:t2",
                title="review finished", tokens={"branch": "fix/login"}),
          agent("w1:p1", "working", name="fixer", ago=4, focused=True,
                terminal_title_stripped="editing app.py"),
          agent("w1:p3", "idle", ago=90000, agent="codex")],
    total=5, view={"type": "agent_view", "active": True, "source": "me", "label": "mine"},
    workspaces={"w1": "api", "w2": "web"}, tabs={"w1:t1": "1", "w2:t1": "main", "w2:t2": "ci"},
    multi_tab=frozenset({"w2"}))


# -- flags ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("expr", "node"), [
    ("status=blocked", {"op": "eq", "field": "status", "value": "blocked"}),
    ("status=blocked,done", {"op": "in", "field": "status", "values": ["blocked", "done"]}),
    ("$branch=main", {"op": "eq", "field": {"token": "branch"}, "value": "main"}),
    ("$branch?", {"op": "exists", "field": {"token": "branch"}}),
    ("!agent?", {"op": "not", "filter": {"op": "exists", "field": "agent"}}),
    ("seen=false", {"op": "eq", "field": "seen", "value": False}),
    ("state_change_seq=4", {"op": "eq", "field": "state_change_seq", "value": 4}),
    ("workspace_id=@workspace", {"op": "eq", "field": "workspace_id",
                                 "value": {"context": "current_workspace_id"}}),
    ("cmux-views/waiting", {"plugin": "cmux-views/waiting"}),
    ('{"op": "exists", "field": "agent"}', {"op": "exists", "field": "agent"}),
])
def test_filter_expressions(expr: str, node: dict[str, Any]) -> None:
    assert filter_node(expr) == node


def test_sort_keys_and_view_params() -> None:
    assert sort_key("attention:desc") == {"field": "attention", "order": "desc"}
    assert sort_key("-state_change_seq") == {"field": "state_change_seq", "order": "desc"}
    assert sort_key("$branch") == {"field": {"token": "branch"}, "order": "asc"}
    assert sort_key("cmux-views/triage") == {"field": {"plugin": "cmux-views/triage"},
                                             "order": "asc"}
    assert view_params([], [], "x") is None
    assert view_params(["status=idle", "agent?"], ["agent"], "quiet") == {
        "source": "cli", "label": "quiet", "sort": [{"field": "agent", "order": "asc"}],
        "filter": {"op": "all", "filters": [
            {"op": "eq", "field": "status", "value": "idle"},
            {"op": "exists", "field": "agent"}]}}
    with pytest.raises(ValueError):
        filter_node("status")
    with pytest.raises(ValueError):
        columns_from("name,colour")


# -- rendering --------------------------------------------------------------------------------


def test_age_and_cell_widths() -> None:
    assert [age(s) for s in (0, 59, 60, 125, 3599, 3600, 3700, 86399, 90000, -3)] == [
        "0s", "59s", "1m00s", "2m05s", "59m59s", "1h00m", "1h01m", "23h59m", "1d01h", "0s"]
    assert cell_width("日本") == 4 and cell_width("e\u0301") == 1
    assert fit("abcdef", 4) == "abc…" and fit("ab", 4) == "ab  " and fit("ab", 4, right=True) \
        == "  ab"
    assert fit("日本語", 5) == "日本…"


def test_rows_render_plain() -> None:
    lines = render_rows(BOARD, columns_from(DEFAULT_COLUMNS), width=86, now=NOW, color=False)
    assert lines == [
        "    NAME              AGENT       WHERE                 TITLE                      FOR",
        " ●  builder           claude      api                   approve rm -rf build/?   2m05s",
        " ✔  reviewer          claude      web / ci              review finished          1h01m",
        "▸⠋  fixer             claude      api                   editing app.py              4s",
        " ○  w1:p3             codex       api                                            1d01h",
    ]
    assert all(cell_width(line) == 86 for line in lines)


def test_rows_render_with_colours_and_tokens() -> None:
    lines = render_rows(BOARD, columns_from("status,name,$branch,age"), width=60, now=NOW,
                        frame=3, color=True, selected="w2:p1")
    assert "\x1b[1;31m●" in lines[1] and "\x1b[1;31m 2m05s" in lines[1]  # blocked: red
    assert "\x1b[32m✔" in lines[2] and "fix/login" in lines[2]  # done: green
    assert "\x1b[48;5;236m" in lines[2] and "\x1b[48;5;236m" not in lines[1]  # the selection
    assert "\x1b[33m⠸" in lines[3]  # working: a yellow spinner frame
    assert "\x1b[2m○" in lines[4]  # idle: dim
    assert SGR.sub("", lines[0]).split() == ["NAME", "BRANCH", "FOR"]
    assert all(cell_width(SGR.sub("", line)) == 60 for line in lines)


def test_narrow_terminals_drop_optional_columns_first() -> None:
    lines = render_rows(BOARD, columns_from(DEFAULT_COLUMNS), width=48, now=NOW, color=False)
    assert lines[0].split() == ["NAME", "TITLE", "FOR"]
    assert all(cell_width(line) == 48 for line in lines)


@pytest.mark.parametrize(("width", "height"), [(100, 12), (60, 5), (30, 20)])
def test_screen_fills_the_terminal_exactly(width: int, height: int) -> None:
    for color in (False, True):
        lines = render_screen(BOARD, columns_from(DEFAULT_COLUMNS), width=width, height=height,
                              now=NOW, color=color)
        assert len(lines) == height
        assert all(cell_width(SGR.sub("", line)) == width for line in lines), lines
    plain = render_screen(BOARD, columns_from(DEFAULT_COLUMNS), width=width, height=height,
                          now=NOW, color=False)
    assert plain[0].startswith(" cmux agents ") and plain[0].endswith(" 4 of 5 agents ")
    assert "q quit" in plain[-1] and "● 1" in plain[-1]
    if width >= 100:
        assert plain[0].startswith(" cmux agents · mine ") and "1 blocked" in plain[-1]
    if height == 5:
        assert "… 3 more" in plain[3]  # one row shown of four


def test_empty_screens_say_why() -> None:
    empty = Board([], 0)
    lines = render_screen(empty, columns_from(DEFAULT_COLUMNS), width=90, height=8, now=NOW,
                          color=False)
    assert lines[0].startswith(" cmux agents ") and lines[0].endswith("0 agents ")
    assert "no agents yet" in lines[3]
    hidden = Board([], 3, view={"active": True, "source": "cli"})
    lines = render_screen(hidden, columns_from(DEFAULT_COLUMNS), width=90, height=8, now=NOW,
                          color=False)
    assert "cmux agents · cli" in lines[0] and "no agents match this view" in lines[3]


# -- against a real server -----------------------------------------------------------------


def run_agents(server: ServerProcess, *argv: str) -> int:
    parser = argparse.ArgumentParser(prog="cmux")
    add_common(parser, top=True)
    add_sidebar_commands(parser.add_subparsers(dest="command"), add_common)
    args = parser.parse_args(["agents", "--socket", str(server.socket_path), *argv])
    return int(args.func(args))


def fleet(server: ServerProcess) -> list[str]:
    with server.client() as c:
        first = c.call("pane.current")["pane"]["pane_id"]
        second = c.call("pane.split", {})["pane"]["pane_id"]
        for pane, state, name in ((first, "working", "alpha"), (second, "blocked", "beta")):
            c.call("pane.report_agent", {"pane_id": pane, "source": "custom:demo",
                                         "agent": "demo", "state": state, "message": name})
            c.call("agent.rename", {"target": pane, "name": name})
    return [first, second]


def test_one_shot_lists_through_views(cmux_server: ServerProcess,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    first, second = fleet(cmux_server)
    assert run_agents(cmux_server) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["NAME", "AGENT", "WHERE", "TITLE", "FOR"]
    assert [line.split()[1] for line in out[1:3]] == ["alpha", "beta"]
    assert "1 blocked" in out[3] and "1 working" in out[3]

    assert run_agents(cmux_server, "--filter", "status=blocked") == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in out[1:-1]] == ["beta"]
    assert "(1 hidden by the view)" in out[-1]

    # the named sidebar view is followed by default
    cmux_server.call("agent.view.set", {"source": "t", "client_id": "sidebar",
                                        "sort": [{"field": "attention", "order": "desc"}]})
    assert run_agents(cmux_server, "--json") == 0
    listed = json.loads(capsys.readouterr().out)
    assert [a["pane_id"] for a in listed["agents"]] == [second, first]
    assert run_agents(cmux_server, "--client", "other", "--json") == 0
    assert [a["pane_id"] for a in json.loads(capsys.readouterr().out)["agents"]] == [
        first, second]


RUNNER = """
import argparse, sys
from cmux_core.cli.main import add_common
from cmux_core.cli.sidebar import add_sidebar_commands
parser = argparse.ArgumentParser(prog="cmux")
add_common(parser, top=True)
add_sidebar_commands(parser.add_subparsers(dest="command"), add_common)
args = parser.parse_args(sys.argv[1:])
sys.exit(args.func(args))
"""


def test_watch_redraws_on_events_and_restores_the_terminal(cmux_server: ServerProcess) -> None:
    first, _second = fleet(cmux_server)
    env = {**os.environ, "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    proc = ptyprocess.PtyProcess.spawn(
        [sys.executable, "-c", RUNNER, "agents", "--watch", "--socket",
         str(cmux_server.socket_path)], env=env, dimensions=(12, 90))
    seen = bytearray()

    def screen_has(text: bytes) -> bool:
        while select.select([proc.fd], [], [], 0.05)[0]:
            try:
                seen.extend(proc.read(65536))
            except EOFError:
                break
        return text in seen

    try:
        wait_until(lambda: screen_has(b"cmux agents"), timeout=30, message="the first frame")
        assert b"\x1b[?1049h" in seen and b"\x1b[?25l" in seen
        wait_until(lambda: screen_has(b"beta"), timeout=30, message="the agents")
        before = len(seen)
        with cmux_server.client() as c:
            c.call("pane.report_agent", {"pane_id": first, "source": "custom:demo",
                                         "agent": "demo", "state": "blocked",
                                         "message": "needs a decision"})
        wait_until(lambda: screen_has(b"needs a decision"), timeout=30,
                   message="a redraw after the status change")
        assert b"2 blocked" in seen[before:]
        proc.write(b"q")
        wait_until(lambda: screen_has(b"\x1b[?1049l"), timeout=30, message="the sidebar to exit")
        assert seen.rstrip().endswith(b"\x1b[?1049l")
        assert b"\x1b[?25h" in seen[-40:]
        proc.wait()
        assert proc.exitstatus == 0
    finally:
        if proc.isalive():
            proc.terminate(force=True)
