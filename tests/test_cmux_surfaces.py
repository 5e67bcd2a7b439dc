"""cmux v2 surfaces on a real server: split, create, close, move, reorder, split-off,
tab actions and the per-surface helpers, checked with cmux's parameter names and shapes."""

from __future__ import annotations

import re
from typing import Any

from cmux_v2 import V2

from cmux_core.testing import ServerProcess, wait_until

UUID = re.compile(r"^[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}$")
KEYS = ("window_id", "window_ref", "workspace_id", "workspace_ref", "pane_id", "pane_ref",
        "surface_id", "surface_ref")


def cmux_keys(result: dict[str, Any]) -> None:
    """The id/ref twins of every cmux surface result."""
    for key in KEYS:
        assert key in result, key
        if key.endswith("_id"):
            assert UUID.match(result[key]), (key, result[key])
        else:
            assert re.match(r"^[a-z]+:\d+$", result[key]), (key, result[key])


def panes(v2: V2, ws: str) -> list[dict[str, Any]]:
    return list(v2("pane.list", workspace_id=ws)["panes"])


def surfaces(v2: V2, ws: str) -> list[dict[str, Any]]:
    return list(v2("surface.list", workspace_id=ws)["surfaces"])


def focused_surface(v2: V2) -> str:
    return str(v2("system.identify")["focused"]["surface_id"])


def test_split_places_a_new_pane_on_each_side_without_moving_focus(
        cmux_server: ServerProcess) -> None:
    with V2(cmux_server.socket_path) as v2:
        ws = v2("workspace.current")["workspace_id"]
        first = focused_surface(v2)
        right = v2("surface.split", direction="right")
        cmux_keys(right)
        assert right["type"] == "terminal" and right["workspace_id"] == ws
        assert focused_surface(v2) == first
        left = v2("surface.split", direction="left", surface_id=first)
        # Spatial order: the new left pane, the first one, the right one.
        order = [s["id"] for s in surfaces(v2, ws)]
        assert order == [left["surface_id"], first, right["surface_id"]]
        down = v2("surface.split", direction="d", surface_id=first, focus=True)
        assert focused_surface(v2) == down["surface_id"]
        up = v2("surface.split", direction="up", surface_id=first,
                initial_divider_position=0.3)
        assert len(panes(v2, ws)) == 5 and up["pane_id"] != down["pane_id"]

        bad = v2.error("surface.split", direction="sideways")
        assert bad.code == "invalid_params" and bad.data == {"field": "direction"}
        assert v2.error("surface.split").code == "invalid_params"
        assert v2.error("surface.split", direction="right",
                        surface_id="surface:999").code.endswith("not_found")
        gui = v2.error("surface.split", direction="right", type="browser")
        assert gui.code == "not_supported" and "GUI" in gui.message
        assert len(panes(v2, ws)) == 5


def test_split_runs_the_initial_command_in_a_background_workspace(
        cmux_server: ServerProcess) -> None:
    with V2(cmux_server.socket_path) as v2:
        home = v2("workspace.current")["workspace_id"]
        other = v2("workspace.create")["workspace_id"]
        made = v2("surface.split", workspace_id=other, direction="right",
                  initial_command="echo split-$((40+2)); exec cat",
                  startup_environment={"CMUX_T": "x"})
        assert made["workspace_id"] == other
        assert v2("workspace.current")["workspace_id"] == home
        wait_until(lambda: "split-42" in v2("surface.read_text",
                                           surface_id=made["surface_id"])["text"])
        # A respawn starts the new process with the env the surface was created with,
        # and layout.save's command follows the new one.
        v2("surface.respawn", surface_id=made["surface_id"],
           command='echo "env-$CMUX_T-again"; exec cat')
        wait_until(lambda: "env-x-again" in v2("surface.read_text",
                                               surface_id=made["surface_id"])["text"])
        row = next(s for s in v2("surface.list", workspace_id=other)["surfaces"]
                   if s["id"] == made["surface_id"])
        assert row["initial_command"] == 'echo "env-$CMUX_T-again"; exec cat'
        bad_env = v2.error("surface.split", direction="right", startup_environment={"1X": "y"})
        assert bad_env.code == "invalid_env"


def test_create_adds_a_tab_and_close_selects_the_same_index(
        cmux_server: ServerProcess) -> None:
    with V2(cmux_server.socket_path) as v2:
        ws = v2("workspace.current")["workspace_id"]
        pane = v2("system.identify")["focused"]["pane_id"]
        first = focused_surface(v2)
        made = [v2("surface.create", pane_id=pane) for _ in range(3)]
        for m in made:
            cmux_keys(m)
            assert m["pane_id"] == pane
        # Not focused without "focus": the pane still shows its first surface.
        rows = v2("pane.surfaces", pane_id=pane)["surfaces"]
        assert [r["id"] for r in rows] == [first] + [m["surface_id"] for m in made]
        assert [r["selected"] for r in rows] == [True, False, False, False]
        # "pane_id": "0" is what cmux's client sends for "no pane": the focused one.
        zero = v2("surface.create", workspace_id=ws, pane_id="0", focus=True)
        assert zero["pane_id"] == pane and focused_surface(v2) == zero["surface_id"]

        # Closing the selected surface selects the one now at its index...
        second = made[1]["surface_id"]
        v2("surface.focus", surface_id=second)
        closed = v2("surface.close", surface_id=second)
        assert closed["surface_id"] == second and closed["window_id"]
        assert focused_surface(v2) == made[2]["surface_id"]
        # ...else (it was last) the one before it.
        v2("surface.close", surface_id=zero["surface_id"])
        v2("surface.focus", surface_id=made[2]["surface_id"])
        v2("surface.close")
        assert focused_surface(v2) == made[0]["surface_id"]
        assert v2.error("surface.focus", surface_id=second).code.endswith("not_found")

        v2("surface.close", surface_id=made[0]["surface_id"])
        last = v2.error("surface.close", surface_id=first)
        assert last.code == "invalid_state" and "last surface" in last.message
        assert [s["id"] for s in surfaces(v2, ws)] == [first]


def test_move_reorder_split_off_and_drag(cmux_server: ServerProcess) -> None:
    with V2(cmux_server.socket_path) as v2:
        ws = v2("workspace.current")["workspace_id"]
        a = focused_surface(v2)
        pane_a = v2("system.identify")["focused"]["pane_id"]
        b = v2("surface.create", pane_id=pane_a)["surface_id"]
        c = v2("surface.create", pane_id=pane_a)["surface_id"]
        right = v2("surface.split", direction="right")
        pane_r = right["pane_id"]

        v2("surface.reorder", surface_id=c, index=0)
        assert v2("pane.surfaces", pane_id=pane_a)["surfaces"][0]["id"] == c
        v2("surface.reorder", surface_id=c, after_surface_id=b)
        assert [r["id"] for r in v2("pane.surfaces", pane_id=pane_a)["surfaces"]] == [a, b, c]
        across = v2.error("surface.reorder", surface_id=c,
                          before_surface_id=right["surface_id"])
        assert across.code == "invalid_params" and "same pane" in across.message
        assert v2.error("surface.reorder", surface_id=c).code == "invalid_params"

        moved = v2("surface.move", surface_id=b, pane_id=pane_r)
        assert moved["pane_id"] == pane_r and moved["surface_id"] == b
        rows = v2("pane.surfaces", pane_id=pane_r)["surfaces"]
        assert [r["id"] for r in rows] == [right["surface_id"], b]
        assert rows[1]["selected"] is True
        v2("surface.move", surface_id=c, before_surface_id=right["surface_id"])
        assert [r["id"] for r in v2("pane.surfaces", pane_id=pane_r)["surfaces"]] == [
            c, right["surface_id"], b]

        off = v2("surface.split_off", surface_id=c, direction="down")
        assert off["surface_id"] == c and off["pane_id"] not in (pane_a, pane_r)
        assert len(panes(v2, ws)) == 3
        alone = v2.error("surface.split_off", surface_id=c, direction="right")
        assert alone.code == "invalid_state"
        dragged = v2("surface.drag_to_split", surface_id=b, target_surface_id=a,
                     edge="top")
        assert dragged["surface_id"] == b
        order = [s["id"] for s in surfaces(v2, ws)]
        assert order.index(b) < order.index(a)
        assert v2.error("surface.drag_to_split", surface_id=b, target_surface_id=a,
                        edge="middle").code == "invalid_params"

        # Moving a pane's only surface out closes the pane; its terminal keeps running.
        v2("surface.send_text", surface_id=c, text="echo still-$((6*7))\n")
        v2("surface.move", surface_id=c, pane_id=pane_a, index=0)
        assert len(panes(v2, ws)) == 3
        wait_until(lambda: "still-42" in v2("surface.read_text", surface_id=c)["text"])


def test_tab_actions(cmux_server: ServerProcess) -> None:
    with V2(cmux_server.socket_path) as v2:
        ws = v2("workspace.current")["workspace_id"]
        first = focused_surface(v2)
        ref = v2("system.identify")["focused"]["surface_ref"]
        tab_ref = "tab:" + ref.split(":")[1]
        renamed = v2("tab.action", tab_id=tab_ref, action="rename", title="  build  ")
        assert renamed["tab_ref"] == tab_ref and renamed["title"] == "build"
        assert renamed["workspace_id"] == ws and renamed["tab_id"] == first
        assert surfaces(v2, ws)[0]["title"] == "build"
        assert v2("tab.action", surface_id=first, action="clear_name")["title"] != "build"
        assert v2("tab.action", surface_id=first, action="pin")["pinned"] is True
        assert v2("surface.action", surface_id=first, action="unpin")["pinned"] is False
        assert v2("tab.action", tab_id=tab_ref, action="mark-unread")["unread"] is True

        right = v2("tab.action", surface_id=first, action="new_terminal_right")
        pane = right["pane_id"]
        new = right["created_surface_id"]
        assert [r["id"] for r in v2("pane.surfaces", pane_id=pane)["surfaces"]] == [first, new]
        v2("surface.create", pane_id=pane)
        closed = v2("tab.action", surface_id=new, action="close_others")
        assert closed["closed"] == 2
        assert [r["id"] for r in v2("pane.surfaces", pane_id=pane)["surfaces"]] == [new]

        v2("surface.create", pane_id=pane)
        out = v2("tab.action", surface_id=new, action="move_to_new_workspace", title="solo")
        created = out["created_workspace_id"]
        assert created != ws and out["workspace_id"] == created
        titles = {w["id"]: w["title"] for w in v2("workspace.list")["workspaces"]}
        assert titles[created] == "solo"
        assert v2("workspace.current")["workspace_id"] == ws

        unknown = v2.error("tab.action", surface_id=first, action="explode")
        assert unknown.code == "invalid_params" and unknown.data == {"field": "action"}
        browser = v2.error("tab.action", surface_id=first, action="new_browser_right")
        assert browser.code == "not_supported"


def test_flash_health_refresh_clear_history_and_respawn(cmux_server: ServerProcess) -> None:
    with V2(cmux_server.socket_path) as v2:
        ws = v2("workspace.current")["workspace_id"]
        sid = focused_surface(v2)
        assert v2("debug.flash.count", surface_id=sid)["count"] == 0
        flash = v2("surface.trigger_flash", surface_id=sid)
        cmux_keys(flash)
        assert v2("debug.flash.count", surface_id=sid)["count"] == 1
        v2("debug.flash.reset")
        assert v2("debug.flash.count", surface_id=sid)["count"] == 0

        health = v2("surface.health", workspace_id=ws)
        assert health["workspace_id"] == ws and health["window_id"]
        assert health["surfaces"] == [{"index": 0, "id": sid, "ref": "surface:1",
                                       "type": "terminal", "in_window": True, "alive": True}]
        assert v2("surface.refresh")["refreshed"] == 1

        v2("surface.send_text", text="echo marker-$((1+1))\n")
        wait_until(lambda: "marker-2" in v2("surface.read_text")["text"])
        v2("surface.clear_history", surface_id=sid)
        text = v2("surface.read_text", surface_id=sid, scrollback=True)["text"]
        assert "marker-2" not in text

        before = v2("debug.terminals")["terminals"][0]["pid"]
        v2("surface.respawn", surface_id=sid, command="echo respawned; exec cat")
        wait_until(lambda: "respawned" in v2("surface.read_text", surface_id=sid)["text"])
        after = v2("debug.terminals")["terminals"][0]
        assert after["pid"] != before and after["surface_id"] == sid


def test_shell_integration_reports(cmux_server: ServerProcess) -> None:
    with V2(cmux_server.socket_path) as v2:
        ws = v2("workspace.current")["workspace_id"]
        sid = focused_surface(v2)
        where = str(cmux_server.home)  # short enough not to wrap in a half-width pane
        out = v2("surface.report_pwd", workspace_id=ws, surface_id=sid, directory=where)
        assert out["path"] == where and out["surface_id"] == sid
        # The reported directory is where a new split starts.
        made = v2("surface.split", direction="right", initial_command="pwd; exec cat")
        wait_until(lambda: where in v2("surface.read_text",
                                       surface_id=made["surface_id"])["text"])
        clash = v2.error("surface.report_pwd", surface_id=sid, path="/a", cwd="/b")
        assert clash.code == "invalid_params"
        assert v2.error("surface.report_pwd", surface_id=sid, path="rel").code == \
            "invalid_params"

        v2("surface.report_tty", surface_id=sid, tty="/dev/pts/9")
        v2("surface.report_shell_state", surface_id=sid, state="running")
        row = next(s for s in surfaces(v2, ws) if s["id"] == sid)
        assert (row["tty"], row["shell_state"]) == ("/dev/pts/9", "running")
        assert v2.error("surface.report_shell_state", surface_id=sid,
                        state=" ").code == "invalid_params"
        assert v2.error("surface.ports_kick", surface_id=sid).code == "not_supported"
