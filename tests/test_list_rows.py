"""``pane.list`` rows and ``system.tree`` pane nodes are kept between calls
(:mod:`cmux_core.api.methods.shared.projections`): each test lists twice first, so the
rows are the kept ones, then changes one thing about a pane and waits for both lists to
show it. Without the matching part of the rows' signature or change stamps, the kept row
would be served unchanged and the wait would fail."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import Api

from cmux_core.testing import start_server, wait_until

Row = dict[str, Any]
WAIT_S = 10.0


def rows(api: Api) -> dict[str, Row]:
    """pane.list's rows by pane uuid."""
    return {r["uuid"]: r for r in api("pane.list")["panes"]}


def nodes(api: Api) -> dict[str, Row]:
    """system.tree's pane nodes (every window) by pane uuid."""
    tree = api("system.tree", {"all_windows": True})
    return {p["id"]: p for w in tree["windows"] for ws in w["workspaces"] for p in ws["panes"]}


def warm(api: Api) -> None:
    for _ in range(2):
        rows(api)
        nodes(api)


def eventually(check: Callable[[], object], what: str) -> None:
    wait_until(check, timeout=WAIT_S, interval=0.05, message=what)


def split(api: Api, pane_id: str, direction: str = "right") -> Row:
    return dict(api("pane.split", {"pane_id": pane_id, "direction": direction})["pane"])


def first(api: Api) -> Row:
    return next(iter(rows(api).values()))


def test_title_change_reaches_kept_rows(api: Api) -> None:
    pane = first(api)
    warm(api)
    api("pane.send_text", {"pane_id": pane["pane_id"],
                           "text": "printf '\\033]2;%s\\007' kept-title\n"})
    eventually(lambda: rows(api)[pane["uuid"]].get("terminal_title") == "kept-title",
               "the new title in pane.list")
    eventually(lambda: nodes(api)[pane["uuid"]]["surfaces"][0]["title"] == "kept-title",
               "the new title in system.tree")


def test_cwd_report_and_label_reach_kept_rows(api: Api) -> None:
    pane = first(api)
    warm(api)
    api("pane.send_text", {"pane_id": pane["pane_id"],
                           "text": "printf '\\033]7;file://localhost/kept/dir\\007'\n"})
    eventually(lambda: rows(api)[pane["uuid"]].get("cwd") == "/kept/dir",
               "the reported directory in pane.list")
    api("pane.rename", {"pane_id": pane["pane_id"], "label": "kept-label"})
    assert rows(api)[pane["uuid"]].get("label") == "kept-label"


def test_size_and_layout_reach_kept_rows(api: Api) -> None:
    pane = first(api)
    warm(api)
    before = rows(api)[pane["uuid"]]
    other = split(api, pane["pane_id"])
    after = rows(api)[pane["uuid"]]
    assert after["columns"] < before["columns"]
    assert after["pixel_frame"]["width"] < before["pixel_frame"]["width"]
    assert other["uuid"] in rows(api) and other["uuid"] in nodes(api)


def test_focus_reaches_kept_rows(api: Api) -> None:
    pane = first(api)
    other = split(api, pane["pane_id"])
    api("pane.focus", {"pane_id": pane["pane_id"]})
    warm(api)
    assert rows(api)[pane["uuid"]]["focused"] and not rows(api)[other["uuid"]]["focused"]
    api("pane.focus", {"pane_id": other["pane_id"]})
    listed, tree = rows(api), nodes(api)
    assert listed[other["uuid"]]["focused"] and not listed[pane["uuid"]]["focused"]
    assert tree[other["uuid"]]["focused"] and not tree[pane["uuid"]]["focused"]
    assert tree[other["uuid"]]["surfaces"][0]["focused"]


def test_agent_state_reaches_kept_rows(api: Api) -> None:
    pane = first(api)
    warm(api)
    assert rows(api)[pane["uuid"]]["agent_status"] == "unknown"
    api("pane.report_agent", {"pane_id": pane["pane_id"], "source": "custom:rows",
                              "agent": "rowbot", "state": "working"})
    row = rows(api)[pane["uuid"]]
    assert row["agent_status"] == "working" and row.get("agent") == "rowbot"
    surface = nodes(api)[pane["uuid"]]["surfaces"][0]
    assert surface["agent_status"] == "working" and surface.get("agent") == "rowbot"
    api("pane.report_agent", {"pane_id": pane["pane_id"], "source": "custom:rows",
                              "agent": "rowbot", "state": "blocked"})
    assert rows(api)[pane["uuid"]]["agent_status"] == "blocked"
    assert nodes(api)[pane["uuid"]]["surfaces"][0]["agent_status"] == "blocked"


def test_tab_and_workspace_moves_reach_kept_rows(api: Api) -> None:
    pane = first(api)
    mover = split(api, pane["pane_id"])
    warm(api)
    before = rows(api)[mover["uuid"]]
    api("pane.move", {"pane_id": mover["pane_id"], "destination": {"type": "new_tab"}})
    moved = rows(api)[mover["uuid"]]
    assert moved["tab_id"] != before["tab_id"]
    assert moved["workspace_id"] == before["workspace_id"]
    api("pane.move", {"pane_id": moved["pane_id"],
                      "destination": {"type": "new_workspace"}})
    again = rows(api)[mover["uuid"]]
    assert again["workspace_id"] != before["workspace_id"]
    assert again["pane_id"] != moved["pane_id"]
    workspace_of = {p["id"]: ws["workspace_id"]
                    for w in api("system.tree", {"all_windows": True})["windows"]
                    for ws in w["workspaces"] for p in ws["panes"]}
    assert workspace_of[mover["uuid"]] == again["workspace_id"]


def test_closed_panes_vanish_from_kept_lists(api: Api) -> None:
    pane = first(api)
    others = [split(api, pane["pane_id"], "down") for _ in range(2)]
    warm(api)
    assert all(o["uuid"] in rows(api) for o in others)
    api("pane.close", {"pane_id": others[0]["pane_id"]})
    listed, tree = rows(api), nodes(api)
    assert others[0]["uuid"] not in listed and others[0]["uuid"] not in tree
    assert others[1]["uuid"] in listed and pane["uuid"] in tree
    assert [r["index"] for r in api("pane.list")["panes"]] == [0, 1]


def test_what_a_caller_adds_to_a_row_is_not_kept(api: Api) -> None:
    """system.top adds processes to system.tree's surface rows; the kept ones stay clean."""
    pane = first(api)
    warm(api)
    top = api("system.top", {"sample_ms": 0})
    assert "totals" in top["windows"][0]["workspaces"][0]["panes"][0]["surfaces"][0]
    assert "totals" not in nodes(api)[pane["uuid"]]["surfaces"][0]


QUIET_CD = """\
import os, sys, termios, time
attrs = termios.tcgetattr(0)
attrs[3] &= ~termios.ECHO
termios.tcsetattr(0, termios.TCSANOW, attrs)
print("ready", flush=True)
sys.stdin.readline()
os.chdir(sys.argv[1])
time.sleep(300)
"""


def test_a_silent_directory_change_reaches_kept_rows(api: Api, tmp_path: Path) -> None:
    """A program that changes directory without printing anything: only the clock tells
    the kept row to read its foreground directory again."""
    pane = first(api)
    target = tmp_path / "moved-here"
    target.mkdir()
    quiet = dict(api("pane.split", {"pane_id": pane["pane_id"], "cwd": "/",
                                    "command": [sys.executable, "-c", QUIET_CD,
                                                str(target)]})["pane"])
    api.wait_text(quiet["pane_id"], "ready")
    warm(api)
    assert rows(api)[quiet["uuid"]].get("foreground_cwd") == "/"
    api("pane.send_text", {"pane_id": quiet["pane_id"], "text": "go\n"})
    eventually(lambda: rows(api)[quiet["uuid"]].get("foreground_cwd") == str(target),
               "the new foreground directory in pane.list")


SCRIBBLER = '''
from cmux_core.hookspecs import hookimpl

@hookimpl
def cmux_register_methods(register):
    async def scribble(call, params):
        listed = await call.request("pane.list")
        listed["panes"][0]["label"] = "scribbled"
        tree = await call.request("system.tree")
        tree["windows"][0]["workspaces"][0]["panes"][0]["surfaces"][0]["title"] = "scribbled"
        return {"type": "ok"}
    register("scribble", scribble)
'''


def test_a_plugin_changing_what_it_was_answered_changes_no_kept_row(tmp_path: Path) -> None:
    """In-process answers are the plugin's own: the server keeps its rows between calls."""
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "scribbler.py").write_text(SCRIBBLER)
    server = start_server(["--plugins-dir", str(plugins)])
    try:
        for _ in range(2):
            server.call("pane.list")
            server.call("system.tree")
        server.call("plugin.scribbler.scribble")
        assert server.call("pane.list")["panes"][0].get("label") != "scribbled"
        tree = server.call("system.tree")
        assert tree["windows"][0]["workspaces"][0]["panes"][0]["surfaces"][0].get(
            "title") != "scribbled"
    finally:
        server.stop()
