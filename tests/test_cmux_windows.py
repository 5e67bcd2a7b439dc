"""cmux v2 windows and workspaces on a real server: window.*, moving workspaces between
windows, selection after a close, next/previous/last, reorder, sidebar actions and the
workspace report methods, with cmux's result shapes."""

from __future__ import annotations

from typing import Any

from conftest import Api

from cmux_core.errors import CmuxError
from cmux_core.testing import ServerProcess


def windows(api: Api) -> list[dict[str, Any]]:
    return list(api("window.list")["windows"])


def order(api: Api, window_id: str | None = None) -> list[str]:
    params = {"window_id": window_id} if window_id else {}
    return [w["id"] for w in api("workspace.list", params)["workspaces"]]


def selected(api: Api, window_id: str | None = None) -> str:
    params = {"window_id": window_id} if window_id else {}
    return str(api("workspace.current", params)["workspace_id"])


def new_workspace(api: Api, **params: Any) -> str:
    return str(api("workspace.create", params)["workspace_id"])


def test_window_create_focus_close(api: Api) -> None:
    first = windows(api)[0]
    created = api("window.create")
    assert set(created) >= {"window_id", "window_ref", "workspace_id", "workspace_ref"}
    assert created["window_ref"] == "window:2"
    rows = windows(api)
    assert [w["id"] for w in rows] == [first["id"], created["window_id"]]
    # Creating does not move focus: the first window stays the active (key) one.
    assert [w["key"] for w in rows] == [True, False]
    assert rows[1]["workspace_count"] == 1
    assert rows[1]["selected_workspace_id"] == created["workspace_id"]
    assert api("window.current")["window_id"] == first["id"]
    assert api("window.current", {"workspace_id": created["workspace_id"]})["window_id"] == \
        created["window_id"]

    focused = api("window.focus", {"window_id": created["window_ref"]})
    assert focused["window_id"] == created["window_id"]
    assert api("window.current")["window_id"] == created["window_id"]
    ident = api("system.identify")["focused"]
    assert ident["window_id"] == created["window_id"]
    assert ident["workspace_id"] == created["workspace_id"]

    closed = api("window.close", {"window_id": created["window_id"]})
    assert closed["window_id"] == created["window_id"]
    assert [w["id"] for w in windows(api)] == [first["id"]]
    assert api("window.current")["window_id"] == first["id"]
    err = api.error("workspace.get", {"workspace_id": created["workspace_id"]})
    assert err["code"] == "workspace_not_found"


def test_window_errors_change_nothing(shared_api: Api) -> None:
    api = shared_api
    before = windows(api)
    assert api.error("window.focus", {})["code"] == "invalid_params"
    assert api.error("window.close", {"window_id": " "})["code"] == "invalid_params"
    err = api.error("window.focus", {"window_id": "window:9"})
    assert err["code"] == "window_not_found"
    err = api.error("window.close", {"window_id": "0F0F0F0F-0000-4000-8000-000000000000"})
    assert err["code"] == "window_not_found"
    assert windows(api) == before


def test_move_workspace_to_window_keeps_surfaces(api: Api) -> None:
    w1 = windows(api)[0]["id"]
    w2 = api("window.create")["window_id"]
    ws = new_workspace(api, window_id=w1)
    api("workspace.select", {"workspace_id": ws, "window_id": w1})
    api("pane.split", {"workspace_id": ws})
    surfaces = [s["id"] for s in api("surface.list", {"workspace_id": ws})["surfaces"]]
    assert len(surfaces) == 2

    moved = api("workspace.move_to_window", {"workspace_id": ws, "window_id": w2})
    assert (moved["workspace_id"], moved["window_id"]) == (ws, w2)
    assert ws not in order(api, w1) and order(api, w2)[-1] == ws
    # Without focus the destination keeps its selection and the source picked a neighbour.
    assert selected(api, w2) != ws
    assert api("window.current")["window_id"] == w1
    routed = api("workspace.current", {"workspace_id": ws})
    assert routed["window_id"] == w2 and routed["workspace_id"] == selected(api, w2)
    assert [s["id"] for s in api("surface.list", {"workspace_id": ws})["surfaces"]] == surfaces

    # workspace.select finds the workspace in its new window; the old window refuses it.
    err = api.error("workspace.select", {"workspace_id": ws, "window_id": w1})
    assert err["code"] == "workspace_not_found"
    chosen = api("workspace.select", {"workspace_id": ws})
    assert chosen["window_id"] == w2
    assert api("system.identify")["focused"]["window_id"] == w2
    assert api("surface.focus", {"surface_id": surfaces[0]})["window_id"] == w2

    back = api("workspace.move_to_window", {"workspace_id": ws, "window_id": w1,
                                            "focus": True})
    assert back["window_id"] == w1 and selected(api) == ws
    assert api("window.current")["window_id"] == w1
    err = api.error("workspace.move_to_window", {"workspace_id": ws, "window_id": "window:7"})
    assert err["code"] == "window_not_found" and order(api, w1)[-1] == ws


def test_closing_the_selected_workspace_selects_its_neighbour(api: Api) -> None:
    first = selected(api)
    second, third = new_workspace(api), new_workspace(api)
    api("workspace.select", {"workspace_id": second})
    # The previously selected one is the first; the neighbour at the same index wins.
    api("workspace.close", {"workspace_id": second})
    assert selected(api) == third
    api("workspace.close", {"workspace_id": third})
    assert selected(api) == first  # no neighbour after it: the one before


def test_next_previous_last(api: Api) -> None:
    first = selected(api)
    err = api.error("workspace.last")
    assert err["code"] == "not_found" and "No previous workspace" in err["message"]
    second, third = new_workspace(api), new_workspace(api)
    assert api("workspace.next")["workspace_id"] == second
    assert api("workspace.next")["workspace_id"] == third
    assert api("workspace.next")["workspace_id"] == first  # wraps
    assert api("workspace.previous")["workspace_id"] == third
    last = api("workspace.last")
    assert last["workspace_id"] == first and selected(api) == first
    assert set(last) >= {"workspace_id", "workspace_ref", "window_id", "window_ref"}
    assert api("workspace.last")["workspace_id"] == third


def test_reorder(api: Api) -> None:
    a = selected(api)
    b, c, d = new_workspace(api), new_workspace(api), new_workspace(api)
    dry = api("workspace.reorder", {"workspace_id": d, "index": 0, "dry_run": True})
    assert dry["dry_run"] is True and dry["events"] == [] and order(api) == [a, b, c, d]
    assert (dry["from_index"], dry["to_index"]) == (3, 0)
    assert {"workspace_id": d, "from_index": 3, "to_index": 0} in [
        {k: row[k] for k in ("workspace_id", "from_index", "to_index")} for row in dry["plan"]]
    done = api("workspace.reorder", {"workspace_id": d, "index": 0})
    assert done["events"] == ["workspace_moved"] and order(api) == [d, a, b, c]
    api("workspace.reorder", {"workspace_id": d, "after_workspace_id": b})
    assert order(api) == [a, b, d, c]
    api("workspace.reorder", {"workspace_id": c, "before_workspace_id": a})
    assert order(api) == [c, a, b, d]
    assert api("workspace.reorder", {"workspace_id": a, "index": 99})["to_index"] == 3

    for bad in ({"workspace_id": a}, {"workspace_id": a, "index": 0, "before_workspace_id": b},
                {"workspace_id": a, "index": -1}, {"workspace_id": a, "after_workspace_id": a}):
        assert api.error("workspace.reorder", bad)["code"] == "invalid_params"
    many = api("workspace.reorder_many", {"order": f"{d},{c}"})
    assert order(api) == [d, c, b, a] and many["events"] == ["workspace_reordered"]
    api("workspace.reorder_many", {"workspace_ids": [a, b]})
    assert order(api) == [a, b, d, c]
    err = api.error("workspace.reorder_many", {"workspace_ids": [a, a]})
    assert err["code"] == "invalid_params" and order(api) == [a, b, d, c]


def test_workspace_actions(api: Api) -> None:
    a = selected(api)
    b = new_workspace(api)
    pinned = api("workspace.action", {"workspace_id": b, "action": "pin"})
    assert pinned["pinned"] is True and pinned["workspace"]["pinned"] is True
    err = api.error("workspace.close", {"workspace_id": b})
    assert err["code"] == "protected" and err["data"]["pinned"] is True
    assert b in order(api)

    renamed = api("workspace.action", {"workspace_id": b, "action": "rename", "title": "api"})
    assert renamed["title"] == "api" and renamed["workspace"]["title"] == "api"
    api("workspace.action", {"workspace_id": b, "action": "set-description",
                             "description": "ship it"})
    api("workspace.action", {"workspace_id": b, "action": "set_color", "color": "Blue"})
    row = next(w for w in api("workspace.list")["workspaces"] if w["id"] == b)
    assert (row["description"], row["custom_color"]) == ("ship it", "Blue")
    api("workspace.action", {"workspace_id": b, "action": "move_top"})
    assert order(api) == [b, a]
    closed = api("workspace.action", {"workspace_id": a, "action": "close_others"})
    assert closed["closed"] == 0 and order(api) == [b, a]  # the pinned one stays
    api("workspace.action", {"workspace_id": b, "action": "unpin"})
    assert api("workspace.action", {"workspace_id": a, "action": "close_others"})["closed"] == 1
    assert order(api) == [a]

    err = api.error("workspace.action", {"workspace_id": a, "action": "mark_read"})
    assert err["code"] == "not_supported" and "read state" in err["message"]
    assert api.error("workspace.action", {"action": "explode"})["code"] == "invalid_params"
    assert api.error("workspace.action", {"action": "rename"})["code"] == "invalid_params"


def test_env_equalize_auto_title_prompt(api: Api) -> None:
    ws = new_workspace(api, env={"PROJECT": "demo"})
    env = api("workspace.env", {"workspace_id": ws})
    assert env["env"] == {"PROJECT": "demo"} and env["workspace_id"] == ws

    api("workspace.select", {"workspace_id": ws})
    pane = api("pane.list", {"workspace_id": ws})["panes"][0]["pane_id"]
    api("pane.split", {"pane_id": pane, "ratio": 0.8})
    done = api("workspace.equalize_splits", {"workspace_id": ws})
    assert done["equalized"] is True
    panes = api("pane.layout", {"pane_id": pane})["layout"]["panes"]
    assert [p["rect"]["width"] for p in panes] == [40, 40]
    assert api("workspace.equalize_splits", {"workspace_id": ws})["equalized"] is False
    err = api.error("workspace.equalize_splits", {"orientation": "diagonal"})
    assert err["code"] == "invalid_params"

    probe = api("workspace.set_auto_title", {"workspace_id": ws, "probe": True})
    assert probe["workspace_user_owned"] is False and probe["enabled"] is True
    titled = api("workspace.set_auto_title", {"workspace_id": ws, "title": "Fix the parser"})
    assert titled["workspace_applied"] is True
    assert api("workspace.get", {"workspace_id": ws})["workspace"]["label"] == "Fix the parser"
    api("workspace.rename", {"workspace_id": ws, "title": "mine"})
    kept = api("workspace.set_auto_title", {"workspace_id": ws, "title": "Other"})
    assert kept["workspace_applied"] is False and kept["title"] == "mine"
    assert api.error("workspace.set_auto_title", {"workspace_id": ws})["code"] == \
        "invalid_params"

    sent = api("workspace.prompt_submit", {"workspace_id": ws, "prompt": "add tests " * 30})
    assert sent["message_recorded"] is True and len(sent["message_preview"]) == 120
    row = next(w for w in api("workspace.list")["workspaces"] if w["id"] == ws)
    assert row["latest_submitted_message"].startswith("add tests")
    assert isinstance(row["latest_submitted_at"], float)
    assert api.error("workspace.prompt_submit", {"workspace_id": ws})["code"] == \
        "invalid_params"


def test_errors_are_not_found_with_cmux_words(shared_api: Api) -> None:
    api = shared_api
    try:
        api("workspace.next", {"window_id": "window:5"})
    except CmuxError as exc:
        assert exc.code == "window_not_found"
    else:
        raise AssertionError("workspace.next accepted a window that does not exist")


def test_cli_window_and_workspace_commands(cmux_server: ServerProcess) -> None:
    from test_cli import ok, table

    assert ok(cmux_server, "window", "create").strip() == "window:2"
    rows = table(ok(cmux_server, "window", "list"))
    assert [(r["WINDOW"], r["ACTIVE"]) for r in rows] == [("window:1", "*"), ("window:2", "")]
    ok(cmux_server, "window", "focus", "window:2")
    assert ok(cmux_server, "window", "current").startswith("window:2 ")
    ok(cmux_server, "workspace", "create")
    ok(cmux_server, "workspace", "action", "rename", "--title", "named")
    first = cmux_server.call("workspace.current")["workspace_id"]
    assert ok(cmux_server, "workspace", "next").strip() != first
    assert ok(cmux_server, "workspace", "last").strip() == first
    ok(cmux_server, "workspace", "move-to-window", first, "window:1")
    assert first in [w["id"] for w in cmux_server.call(
        "workspace.list", {"window_id": "window:1"})["workspaces"]]
    ok(cmux_server, "window", "close", "window:2")
    assert [r["WINDOW"] for r in table(ok(cmux_server, "window", "list"))] == ["window:1"]
