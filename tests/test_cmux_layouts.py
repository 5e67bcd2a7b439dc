"""cmux's layout tree on a real server: ``workspace.create {layout}`` builds it all or
nothing, and named saved layouts (``layout.save/list/get/open/delete``) round-trip it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Api

from cmux_core.testing import ServerProcess, async_wait_until, wait_until


def term(**fields: Any) -> dict[str, Any]:
    return {"pane": {"surfaces": [{"type": "terminal", **fields}]}}


def split(direction: str, first: Any, second: Any, ratio: float = 0.5) -> dict[str, Any]:
    return {"direction": direction, "split": ratio, "children": [first, second]}


def state(api: Api) -> tuple[int, int]:
    """Workspaces and panes the server holds."""
    return len(api("workspace.list")["workspaces"]), len(api("pane.list")["panes"])


def frames(api: Api, ws: str) -> list[dict[str, int]]:
    return [p["pixel_frame"] for p in api("pane.list", {"workspace_id": ws})["panes"]]


def read(api: Api, surface_id: str) -> str:
    return str(api("surface.read_text", {"surface_id": surface_id})["text"])


def test_layout_builds_splits_surfaces_env_and_commands(api: Api, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    focused_before = api("workspace.current")["workspace_id"]
    tree = split("horizontal",
                 {"pane": {"surfaces": [{"type": "terminal", "command": "echo LEFT-$TOKEN",
                                         "env": {"TOKEN": "t1"}},
                                        {"type": "terminal", "name": "second",
                                         "command": f'test "$PWD" = {tmp_path} && '
                                                    "echo CWD-$((40+2))"}]}},
                 split("vertical", term(cwd="sub", command="echo TOP-$((1+1))"),
                       term(focus=True), ratio=0.25),
                 ratio=0.4)
    created = api("workspace.create", {"title": "built", "cwd": str(tmp_path),
                                       "layout": tree})
    ws = created["workspace_id"]
    assert api("workspace.current")["workspace_id"] == focused_before  # no focus moved
    assert created["workspace"]["label"] == "built"

    panes = api("pane.list", {"workspace_id": ws})["panes"]
    assert [p["surface_count"] for p in panes] == [2, 1, 1]
    left, top, bottom = (p["pixel_frame"] for p in panes)
    assert left["width"] == 32 * 8  # 0.4 of 80 columns, in 8-pixel cells
    assert top["x"] == bottom["x"] == left["width"]
    assert top["height"] == 6 * 16 and bottom["height"] == 18 * 16  # 0.25 of 24 rows
    # The surface marked focus is the workspace's focused one, in the bottom-right pane.
    assert created["pane_id"] == panes[2]["id"] and panes[2]["focused"] is False
    surfaces = api("surface.list", {"workspace_id": ws})["surfaces"]
    assert [s["type"] for s in surfaces] == ["terminal"] * 4
    assert surfaces[1]["title"] == "second"
    first, second = panes[0]["surface_ids"]

    wait_until(lambda: "LEFT-t1" in read(api, first), 30)
    # The typed commands are echoed; only their output holds these words.
    wait_until(lambda: "CWD-42" in read(api, second), 30)
    wait_until(lambda: "TOP-2" in read(api, panes[1]["surface_ids"][0]), 30)
    top_pane = panes[1]["pane_id"]
    api("pane.send_text", {"pane_id": top_pane, "text": "pwd\n"})
    api.wait_text(top_pane, str(tmp_path / "sub"))


@pytest.mark.parametrize(("tree", "path"), [
    ({"direction": "horizontal", "children": [term()]}, "layout"),
    ({"direction": "vertical", "children": [term(), term(), term()]}, "layout"),
    (split("horizontal", term(), {"direction": "up", "children": [term(), term()]}),
     "layout.children[1]"),
    (split("horizontal", term(), {"pane": {"surfaces": []}}), "layout.children[1].pane"),
    (split("vertical", term(), term(cwd="does/not/exist")),
     "layout.children[1].pane.surfaces[0].cwd"),
    (term(env={"1BAD": "x"}), "layout.pane.surfaces[0].env"),
    ({"pane": {"surfaces": [{"type": "terminal"}, {"type": "browser", "url": "x"}]}},
     "layout.pane.surfaces[1].type"),
    ({"pane": {"surfaces": [{}]}, "direction": "horizontal"}, "layout"),
])
def test_malformed_layout_leaves_nothing(shared_api: Api, tree: Any, path: str) -> None:
    api = shared_api
    before = state(api)
    watch = Api(api.server)
    watch("events.subscribe", {"subscriptions": [{"type": "workspace.created"},
                                                 {"type": "pane.created"}]})
    err = api.error("workspace.create", {"layout": tree})
    assert err["code"] == "invalid_layout"
    assert err["data"]["path"] == path and "Invalid layout" in err["message"]
    assert state(api) == before
    # Nothing was announced either: the next event is the one this test causes.
    api("workspace.create", {})
    assert watch.event()["event"] == "workspace_created"
    watch.close()


def test_saved_layouts_round_trip(api: Api) -> None:
    """The server's config dir is its own temporary one (see cmux_core.testing)."""
    tree = split("horizontal", term(name="Left"),
                 split("vertical", term(), term(cwd="/tmp"), 0.65), 0.4)
    source = api("workspace.create", {"title": "source", "layout": tree})["workspace_id"]
    saved = api("layout.save", {"name": "review", "workspace_id": source})
    assert (saved["name"], saved["pane_count"], saved["surface_count"]) == ("review", 3, 3)
    path = Path(saved["path"])
    assert path.name == "review.json" and path.parent.name == "layouts"
    doc = json.loads(path.read_text())
    assert doc["version"] == 1 and doc["workspace"]["title"] == "source"

    err = api.error("layout.save", {"name": "review", "workspace_id": source})
    assert err["code"] == "layout_exists"
    api("layout.save", {"name": "review", "workspace_id": source, "overwrite": True})
    listed = api("layout.list")["layouts"]
    assert [(r["name"], r["pane_count"], r["surface_count"]) for r in listed] == [
        ("review", 3, 3)]
    got = api("layout.get", {"name": "review"})
    root = got["workspace"]["layout"]
    assert root["direction"] == "horizontal" and root["split"] == 0.4
    assert root["children"][1]["split"] == 0.65
    assert root["children"][1]["children"][1]["pane"]["surfaces"][0]["cwd"] == "/tmp"
    assert root["children"][0]["pane"]["surfaces"][0]["name"] == "Left"

    opened = api("layout.open", {"name": "review", "focus": True})
    ws = opened["workspace_id"]
    assert api("workspace.current")["workspace_id"] == ws
    assert api("workspace.get", {"workspace_id": ws})["workspace"]["label"] == "source"
    assert frames(api, ws) == frames(api, source)
    titles = [s["title"] for s in api("surface.list", {"workspace_id": ws})["surfaces"]]
    assert titles[0] == "Left"

    assert api("layout.delete", {"name": "review"}) == {"type": "layout_deleted",
                                                        "name": "review", "deleted": True}
    assert not path.exists()
    for method in ("layout.open", "layout.get", "layout.delete"):
        assert api.error(method, {"name": "review"})["code"] == "layout_not_found"
    for bad in ("", "../up", ".hidden", "a/b", "x" * 129, "tab\there"):
        assert api.error("layout.save", {"name": bad})["code"] == "invalid_params"
    assert api("layout.list")["layouts"] == []


def test_a_hand_written_layout_opens_and_a_broken_one_is_refused(api: Api) -> None:
    store = Path(api("layout.save", {"name": "probe"})["path"]).parent
    (store / "pair.json").write_text(json.dumps(
        {"workspace": {"layout": split("vertical", term(command="echo HAND"), term())}}))
    (store / "broken.json").write_text("{not json")
    (store / "lonely.json").write_text(json.dumps(
        {"workspace": {"layout": {"direction": "vertical", "children": [term()]}}}))
    rows = {r["name"]: r for r in api("layout.list")["layouts"]}
    assert rows["pair"]["pane_count"] == 2 and "error" in rows["broken"]

    before = state(api)
    assert api.error("layout.open", {"name": "broken"})["code"] == "invalid_layout"
    err = api.error("layout.open", {"name": "lonely"})
    assert err["code"] == "invalid_layout" and err["data"]["path"] == "layout"
    assert state(api) == before
    ws = api("layout.open", {"name": "pair"})["workspace_id"]
    first = api("pane.list", {"workspace_id": ws})["panes"][0]
    api.wait_text(first["pane_id"], "HAND")


def test_cli_saved_layouts(cmux_server: ServerProcess) -> None:
    from test_cli import ok, table

    path = ok(cmux_server, "layout", "save", "solo").strip()
    assert path.endswith("/layouts/solo.json")
    assert [(r["NAME"], r["PANES"]) for r in table(ok(cmux_server, "layout", "list"))] == [
        ("solo", "1")]
    assert json.loads(ok(cmux_server, "layout", "show", "solo"))["layout"]["pane"]
    ws = ok(cmux_server, "layout", "open", "solo", "--focus").strip()
    assert cmux_server.call("workspace.current")["workspace"]["workspace_id"] == ws
    ok(cmux_server, "layout", "delete", "solo")
    assert ok(cmux_server, "layout", "list").splitlines()[1:] == []


def test_a_spawn_failure_midway_closes_what_was_started(tmp_path: Path) -> None:
    """In process, on a real Mux: the tree passes its checks, then the directory of its
    last pane disappears before that terminal starts. The panes already started are
    closed again and nothing was entered or published."""
    import asyncio
    import os

    from cmux_core.config import Settings
    from cmux_core.errors import CmuxError
    from cmux_core.events import Event, EventHub
    from cmux_core.model import cmux_v2_layout
    from cmux_core.model.mux import Mux

    def shells() -> list[str]:
        """This process's children that are still running, but for those already there
        (a server the module shares)."""
        out = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if (int(fields[1]) == os.getpid() and fields[0] != "Z"
                    and stat.parent.name not in earlier):
                out.append(stat.parent.name)
        return out

    earlier: list[str] = []
    earlier = shells()

    async def main() -> None:
        assert shells() == []
        events = EventHub()
        published: list[object] = []
        events.observe(Event, published.append)
        mux = Mux(Settings(shell="/bin/sh"), events, "/nonexistent.sock")
        (tmp_path / "gone").mkdir()
        spec = cmux_v2_layout.parse(split("vertical", term(), split("horizontal", term(),
                                                                  term(cwd="gone"))),
                                    str(tmp_path))
        (tmp_path / "gone").rmdir()
        try:
            cmux_v2_layout.build(mux, spec, window=None, cwd=str(tmp_path))
        except CmuxError as exc:
            assert exc.code == "workspace_create_failed" and "gone" in exc.message
        else:
            raise AssertionError("the build did not fail")
        assert (mux.windows, mux.panes, published) == ([], {}, [])
        assert mux.refs.mint("window") == "window:1"
        # The two shells started before the failure were hung up and have exited.
        await async_wait_until(lambda: not shells(), 30, message="the shells to exit")

    asyncio.run(main())
