"""Swap, move, zoom, resize, directional focus, portable layouts and ordering, driven
through a real server; every reply and event is checked against the herdr schema."""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Api

from cmux_core.cli.main import build_parser
from cmux_core.errors import CmuxError
from cmux_core.testing import wait_until

PY = sys.executable
AREA = {"x": 0, "y": 0, "width": 80, "height": 24}


def rect(r: dict[str, int]) -> tuple[int, int, int, int]:
    return r["x"], r["y"], r["width"], r["height"]


def check_snapshot(api: Api) -> dict[str, Any]:
    """Assert every tab tiles the area, focus is consistent and each PTY fits its rect."""
    snap = api("session.snapshot")["snapshot"]
    panes = {p["pane_id"]: p for p in snap["panes"]}
    assert len(panes) == len(snap["panes"]), "pane ids are unique"
    laid_out = []
    for lay in snap["layouts"]:
        area = lay["area"]
        cells: set[tuple[int, int]] = set()
        for entry in lay["panes"]:
            x, y, w, h = rect(entry["rect"])
            assert w >= 1 and h >= 1, lay
            block = {(i, j) for i in range(x, x + w) for j in range(y, y + h)}
            assert not cells & block, f"overlap in {lay}"
            cells |= block
        assert len(cells) == area["width"] * area["height"], f"gap in {lay}"
        assert all(area["x"] <= i < area["x"] + area["width"]
                   and area["y"] <= j < area["y"] + area["height"] for i, j in cells)
        focused = [e["pane_id"] for e in lay["panes"] if e["focused"]]
        assert focused == [lay["focused_pane_id"]], lay
        if lay["zoomed"]:
            assert len(lay["panes"]) > 1
        for entry in lay["panes"]:
            pane = panes[entry["pane_id"]]
            assert pane["tab_id"] == lay["tab_id"]
            _, _, w, h = rect(entry["rect"])
            if lay["zoomed"] and entry["focused"]:
                w, h = area["width"], area["height"]
            # Terminals keep at least two columns (what programs need to draw a cursor).
            assert (pane["columns"], pane["rows"]) == (max(w, 2), h), (entry, pane)
        laid_out += [e["pane_id"] for e in lay["panes"]]
    assert sorted(laid_out) == sorted(panes)
    focused_all = [p["pane_id"] for p in snap["panes"] if p["focused"]]
    assert focused_all == ([snap["focused_pane_id"]] if "focused_pane_id" in snap else [])
    return dict(snap)


def layout_of(api: Api, pane_id: str) -> dict[str, Any]:
    return dict(api("pane.layout", {"pane_id": pane_id})["layout"])


def split(api: Api, target: str, direction: str = "right", **kw: Any) -> str:
    params = {"target_pane_id": target, "direction": direction, **kw}
    return str(api("pane.split", params)["pane"]["pane_id"])


def watch(api: Api, *types: str) -> Api:
    watcher = Api(api.server)
    watcher("events.subscribe", {"subscriptions": [{"type": t} for t in types]})
    return watcher


def drain(watcher: Api, count: int) -> list[dict[str, Any]]:
    return [watcher.event() for _ in range(count)]


def no_more_events(watcher: Api, api: Api) -> None:
    """Prove nothing else was queued: a marker event must be the very next one."""
    api("tab.rename", {"tab_id": "w1:t1", "label": "marker"})
    assert watcher.event()["event"] == "tab_renamed"


# -- reads ----------------------------------------------------------------------------


def test_layout_neighbor_and_edges(api: Api) -> None:
    right = split(api, "w1:p1", "right", ratio=0.25)
    below = split(api, right, "down")
    lay = layout_of(api, "w1:p1")
    assert lay["area"] == AREA and lay["zoomed"] is False
    assert [(p["pane_id"], rect(p["rect"])) for p in lay["panes"]] == [
        ("w1:p1", (0, 0, 20, 24)), (right, (20, 0, 60, 12)), (below, (20, 12, 60, 12))]
    assert [(s["id"], s["direction"], s["ratio"]) for s in lay["splits"]] == [
        ("split_0_root", "right", 0.25), ("split_1_1", "down", 0.5)]
    assert layout_of(api, below) == lay

    def near(pane: str, direction: str) -> Any:
        result = api("pane.neighbor", {"pane_id": pane, "direction": direction})["neighbor"]
        assert result["pane_id"] == pane and result["direction"] == direction
        return result.get("neighbor_pane_id")

    assert near("w1:p1", "right") == right  # same overlap, top one first in pre-order
    assert near(below, "left") == "w1:p1" and near(below, "up") == right
    assert near("w1:p1", "left") is None and near(right, "down") == below
    edges = api("pane.edges", {"pane_id": below})["edges"]
    assert {k: edges[k] for k in ("left", "right", "up", "down")} == {
        "left": False, "right": True, "up": False, "down": True}
    assert api("pane.edges")["edges"]["pane_id"] == "w1:p1"  # focused pane by default
    assert api.error("pane.layout", {"pane_id": "w1:p9"})["code"] == "pane_not_found"
    assert api.error("pane.neighbor", {"pane_id": "w1:p9", "direction": "up"})["code"] == \
        "pane_not_found"
    check_snapshot(api)


# -- swap -----------------------------------------------------------------------------


def test_swap_directional_moves_the_leaves_and_focuses_the_source(api: Api) -> None:
    right = split(api, "w1:p1", "right", ratio=0.25)
    terminals = {p["pane_id"]: p["terminal_id"] for p in api("pane.list")["panes"]}
    watcher = watch(api, "layout.updated", "pane.focused")
    swap = api("pane.swap", {"pane_id": right, "direction": "left"})["swap"]
    assert swap["changed"] is True and swap.get("reason") is None
    assert (swap["source_pane_id"], swap["target_pane_id"]) == (right, "w1:p1")
    assert swap["focused_pane_id"] == right
    assert [p["pane_id"] for p in swap["layout"]["panes"]] == [right, "w1:p1"]
    assert [rect(p["rect"])[2] for p in swap["layout"]["panes"]] == [20, 60]
    assert swap["layout"]["splits"][0]["ratio"] == 0.25  # split shapes stay
    assert [e["event"] for e in drain(watcher, 2)] == ["layout_updated", "pane_focused"]
    after = {p["pane_id"]: p["terminal_id"] for p in api("pane.list")["panes"]}
    assert after == terminals  # processes keep running under their ids
    check_snapshot(api)
    none = api("pane.swap", {"pane_id": right, "direction": "left"})["swap"]
    assert none["changed"] is False and none["reason"] == "no_neighbor"
    assert none.get("target_pane_id") is None and none["focused_pane_id"] == right
    watcher.close()


def test_swap_explicit_reasons_and_invalid_forms(api: Api) -> None:
    p2 = split(api, "w1:p1")
    other_tab = api("tab.create", {})["root_pane"]["pane_id"]

    def swap(params: dict[str, Any]) -> dict[str, Any]:
        return dict(api("pane.swap", params)["swap"])

    same = swap({"source_pane_id": p2, "target_pane_id": p2})
    assert (same["changed"], same["reason"]) == (False, "same_pane")
    cross = swap({"source_pane_id": p2, "target_pane_id": other_tab})
    assert (cross["changed"], cross["reason"]) == (False, "cross_tab")
    missing = swap({"source_pane_id": p2, "target_pane_id": "w1:pZZ"})
    assert (missing["reason"], missing["target_pane_id"]) == ("not_found", "w1:pZZ")
    assert missing["layout"]["tab_id"] == "w1:t1"
    done = swap({"source_pane_id": "w1:p1", "target_pane_id": p2})
    assert done["changed"] and [p["pane_id"] for p in done["layout"]["panes"]] == [p2, "w1:p1"]
    for params in ({}, {"direction": "left", "source_pane_id": p2, "target_pane_id": "w1:p1"},
                   {"source_pane_id": p2}, {"direction": "left", "target_pane_id": p2}):
        err = api.error("pane.swap", params)
        assert err["code"] == "invalid_pane_swap", params
        assert err["message"] == ("provide either direction with optional pane_id, or "
                                  "source_pane_id and target_pane_id")
    assert api.error("pane.swap", {"pane_id": "w1:p9", "direction": "up"})["code"] == \
        "pane_not_found"
    check_snapshot(api)


# -- move -----------------------------------------------------------------------------


def test_move_across_workspaces_reminting_the_id_with_events_in_order(api: Api) -> None:
    ws2 = api("workspace.create", {"cwd": "/tmp"})
    mover = ws2["root_pane"]["pane_id"]
    assert mover == "w2:p1"
    terminal = ws2["root_pane"]["terminal_id"]
    watcher = watch(api, "tab.closed", "workspace.closed", "workspace.created", "tab.created",
                    "pane.moved", "layout.updated", "pane.created", "pane.closed",
                    "workspace.focused", "tab.focused", "pane.focused", "tab.renamed")
    result = api("pane.move", {"pane_id": mover, "focus": True, "destination": {
        "type": "tab", "tab_id": "w1:t1", "target_pane_id": "w1:p1", "split": "right",
        "ratio": 0.3}})["move_result"]
    assert result["changed"] is True and result.get("reason") is None
    assert (result["previous_pane_id"], result["previous_workspace_id"],
            result["previous_tab_id"]) == ("w2:p1", "w2", "w2:t1")
    new_id = result["pane"]["pane_id"]
    assert new_id == "w1:p2" and result["pane"]["terminal_id"] == terminal
    assert result["pane"]["focused"] and result["focused_pane_id"] == new_id
    assert result["closed_workspace_id"] == "w2" and result["closed_tab_id"] == "w2:t1"
    assert result.get("source_layout") is None
    assert [(p["pane_id"], rect(p["rect"])[2]) for p in result["target_layout"]["panes"]] == [
        ("w1:p1", 24), (new_id, 56)]
    events = drain(watcher, 7)
    assert [e["event"] for e in events] == [
        "tab_closed", "workspace_closed", "pane_moved", "layout_updated",
        "workspace_focused", "tab_focused", "pane_focused"]
    assert "workspace" not in events[1]["data"]
    moved = events[2]["data"]
    assert moved["previous_pane_id"] == "w2:p1" and moved["pane"]["pane_id"] == new_id
    assert moved["closed_workspace_id"] == "w2" and moved["closed_tab_id"] == "w2:t1"
    assert events[3]["data"]["layout"]["tab_id"] == "w1:t1"
    no_more_events(watcher, api)
    # The old id is an alias of the moved pane; the process kept running.
    assert api("pane.get", {"pane_id": "w2:p1"})["pane"]["pane_id"] == new_id
    api("pane.send_text", {"pane_id": "w2:p1", "text": "echo still-$((40+2))\r"})
    api.wait_text(new_id, "still-42")
    assert [w["workspace_id"] for w in api("workspace.list")["workspaces"]] == ["w1"]
    check_snapshot(api)
    watcher.close()


def test_move_to_a_new_tab_and_a_new_workspace(api: Api) -> None:
    p2 = split(api, "w1:p1")
    p3 = split(api, "w1:p1", "down")
    watcher = watch(api, "tab.created", "workspace.created", "pane.moved", "layout.updated",
                    "tab.closed", "workspace.closed", "tab.renamed")
    to_tab = api("pane.move", {"pane_id": p2, "destination": {
        "type": "new_tab", "label": "logs"}})["move_result"]
    created = to_tab["created_tab"]
    assert created["label"] == "logs" and created["tab_id"] == "w1:t2"
    assert to_tab["pane"]["pane_id"] == p2  # same workspace keeps the id
    assert to_tab["source_layout"]["tab_id"] == "w1:t1" and not to_tab["pane"]["focused"]
    assert [e["event"] for e in drain(watcher, 4)] == [
        "tab_created", "pane_moved", "layout_updated", "layout_updated"]
    to_ws = api("pane.move", {"pane_id": p3, "destination": {
        "type": "new_workspace", "label": "side", "tab_label": "main"}})["move_result"]
    assert to_ws["created_workspace"]["label"] == "side"
    assert to_ws["created_tab"]["label"] == "main"
    assert to_ws["pane"]["pane_id"] == "w2:p1" and to_ws["closed_workspace_id"] is None
    assert api("workspace.get", {"workspace_id": "w2"})["workspace"]["cwd"] == \
        to_ws["pane"]["cwd"]
    events = drain(watcher, 5)
    assert [e["event"] for e in events] == [
        "workspace_created", "tab_created", "pane_moved", "layout_updated", "layout_updated"]
    assert events[2]["data"]["created_workspace"]["workspace_id"] == "w2"
    no_more_events(watcher, api)
    # Moving the only pane of a tab into a new tab of another workspace closes the tab,
    # and the workspace it leaves behind empty.
    back = api("pane.move", {"pane_id": "w2:p1", "destination": {
        "type": "new_tab", "workspace_id": "w1"}})["move_result"]
    assert back["closed_tab_id"] == "w2:t1" and back["closed_workspace_id"] == "w2"
    assert back["pane"]["pane_id"] == "w1:p4"
    assert api("pane.get", {"pane_id": p3})["pane"]["pane_id"] == "w1:p4"
    check_snapshot(api)
    watcher.close()


def test_move_no_ops_and_errors_change_nothing(api: Api) -> None:
    p2 = split(api, "w1:p1")
    other = api("tab.create", {})
    other_pane = other["root_pane"]["pane_id"]
    before = check_snapshot(api)
    same = api("pane.move", {"pane_id": p2, "destination": {
        "type": "tab", "tab_id": "w1:t1", "split": "down"}})["move_result"]
    assert (same["changed"], same["reason"]) == (False, "same_tab")
    api("pane.zoom", {"pane_id": p2})
    zoomed = api("pane.move", {"pane_id": p2, "destination": {"type": "new_tab"}})
    assert zoomed["move_result"]["reason"] == "zoomed_tab"
    into_zoomed = api("pane.move", {"pane_id": other_pane, "destination": {
        "type": "tab", "tab_id": "w1:t1", "split": "right"}})["move_result"]
    assert (into_zoomed["changed"], into_zoomed["reason"]) == (False, "zoomed_tab")
    api("pane.zoom", {"pane_id": p2, "mode": "off"})
    for params, code in [
        ({"pane_id": "w1:p9", "destination": {"type": "new_tab"}}, "pane_not_found"),
        ({"pane_id": p2, "destination": {"type": "tab", "tab_id": "w1:t9", "split": "down"}},
         "tab_not_found"),
        ({"pane_id": p2, "destination": {"type": "new_tab", "workspace_id": "w7"}},
         "workspace_not_found"),
        ({"pane_id": p2, "destination": {"type": "elsewhere"}}, "invalid_params"),
    ]:
        assert api.error("pane.move", params)["code"] == code, params
    err = api.error("pane.move", {"pane_id": other_pane, "destination": {
        "type": "tab", "tab_id": "w1:t1", "target_pane_id": other_pane, "split": "down"}})
    assert err == {"code": "target_pane_not_found",
                   "message": f"target pane {other_pane} is not in tab w1:t1"}
    after = check_snapshot(api)

    def shapes(snap: dict[str, Any]) -> list[list[tuple[str, Any]]]:
        return [[(p["pane_id"], p["rect"]) for p in lay["panes"]] for lay in snap["layouts"]]

    assert shapes(after) == shapes(before)


# -- zoom, resize, focus, ratios -------------------------------------------------------


def test_zoom_modes_reasons_and_pty_sizes(api: Api) -> None:
    single = api("pane.zoom", {})["zoom"]
    assert (single["changed"], single["reason"], single["zoomed"]) == (False, "single_pane",
                                                                       False)
    assert api("pane.zoom", {"mode": "off"})["zoom"]["reason"] == "already_unzoomed"
    p2 = split(api, "w1:p1", "down")
    watcher = watch(api, "layout.updated", "pane.focused", "tab.renamed")
    on = api("pane.zoom", {"pane_id": p2, "mode": "on"})["zoom"]
    assert on["changed"] and on["zoom_changed"] and on["focus_changed"] and on["zoomed"]
    assert on["pane_id"] == p2 and on["focused_pane_id"] == p2 and on["layout"]["zoomed"]
    assert [e["event"] for e in drain(watcher, 2)] == ["pane_focused", "layout_updated"]
    info = api("pane.get", {"pane_id": p2})["pane"]
    assert (info["columns"], info["rows"]) == (80, 24)
    check_snapshot(api)
    again = api("pane.zoom", {"pane_id": p2, "mode": "on"})["zoom"]
    assert (again["changed"], again["reason"]) == (False, "already_zoomed")
    # Focusing another pane of a zoomed tab gives it the whole area instead.
    moved = api("pane.zoom", {"pane_id": "w1:p1", "mode": "on"})["zoom"]
    assert moved["changed"] and moved["focus_changed"] and not moved["zoom_changed"]
    assert moved["reason"] == "already_zoomed"
    check_snapshot(api)
    off = api("pane.zoom", {"pane_id": "w1:p1"})["zoom"]
    assert off["zoom_changed"] and not off["focus_changed"] and off["zoomed"] is False
    check_snapshot(api)
    watcher.close()


def test_resize_moves_the_divider_and_reports_unchanged(api: Api) -> None:
    assert api("pane.resize", {"direction": "right"})["resize"]["reason"] == "unchanged"
    p2 = split(api, "w1:p1")
    grow = api("pane.resize", {"pane_id": "w1:p1", "direction": "right", "amount": 0.25})
    assert grow["resize"]["changed"] and grow["resize"]["layout"]["splits"][0]["ratio"] == 0.75
    assert api("pane.get", {"pane_id": p2})["pane"]["columns"] == 20
    shrink = api("pane.resize", {"pane_id": p2, "direction": "right", "amount": 0.5})["resize"]
    assert shrink["layout"]["splits"][0]["ratio"] == 0.9
    clamped = api("pane.resize", {"pane_id": p2, "direction": "right"})["resize"]
    assert (clamped["changed"], clamped["reason"]) == (False, "unchanged")
    assert clamped["pane_id"] == p2 and clamped["focused_pane_id"] == "w1:p1"
    assert api("pane.resize", {"direction": "down"})["resize"]["reason"] == "unchanged"
    check_snapshot(api)


def test_stty_size_follows_a_resize(api: Api) -> None:
    p2 = api.run(["sh", "-c", "while true; do stty size; sleep 0.2; done"], direction="down")
    api.wait_text(p2, "12 80")
    api("pane.resize", {"pane_id": p2, "direction": "up", "amount": 0.25})
    lay = layout_of(api, p2)
    rows = rect(lay["panes"][1]["rect"])[3]
    assert rows == 18
    api.wait_text(p2, f"{rows} 80")
    api("pane.zoom", {"pane_id": p2})
    api.wait_text(p2, "24 80")


def test_focus_direction(api: Api) -> None:
    p2 = split(api, "w1:p1")
    api("tab.create", {"focus": True})
    watcher = watch(api, "layout.updated", "workspace.focused", "tab.focused", "pane.focused")
    moved = api("pane.focus_direction", {"pane_id": "w1:p1", "direction": "right"})["focus"]
    assert moved["changed"] and moved["focused_pane_id"] == p2 and moved["source_pane_id"] == \
        "w1:p1"
    assert [e["event"] for e in drain(watcher, 4)] == [
        "layout_updated", "workspace_focused", "tab_focused", "pane_focused"]
    assert api.focused_pane() == p2
    stay = api("pane.focus_direction", {"direction": "down"})["focus"]
    assert (stay["changed"], stay["reason"], stay["focused_pane_id"]) == (False, "no_neighbor",
                                                                          p2)
    check_snapshot(api)
    watcher.close()


def test_set_split_ratio(api: Api) -> None:
    p2 = split(api, "w1:p1")
    split(api, p2, "down")
    result = api("layout.set_split_ratio", {"path": [True], "ratio": 0.3})["layout"]
    assert result["root"]["second"]["ratio"] == 0.3
    assert api("pane.get", {"pane_id": p2})["pane"]["rows"] == 7
    clamped = api("layout.set_split_ratio", {"pane_id": p2, "path": [], "ratio": 5})
    assert clamped["layout"]["root"]["ratio"] == 0.9
    for params, code in [({"path": [False], "ratio": 0.5}, "split_not_found"),
                         ({"path": [True, True], "ratio": 0.5}, "split_not_found"),
                         ({"tab_id": "w1:t9", "path": [], "ratio": 0.5}, "layout_not_found"),
                         ({"tab_id": "w1:t1", "pane_id": p2, "path": [], "ratio": 0.5},
                          "layout_not_found")]:
        assert api.error("layout.set_split_ratio", params)["code"] == code
    check_snapshot(api)


# -- portable layouts -----------------------------------------------------------------


def strip_ids(node: dict[str, Any]) -> dict[str, Any]:
    if node["type"] == "pane":
        return {k: v for k, v in node.items() if k != "pane_id"}
    return {**node, "first": strip_ids(node["first"]), "second": strip_ids(node["second"])}


def test_export_apply_export_round_trip(api: Api, tmp_path: Path) -> None:
    p2 = split(api, "w1:p1", "right", ratio=0.333, cwd=str(tmp_path))
    p3 = split(api, p2, "down", command=["sh", "-c", "echo worker; sleep 60"])
    split(api, "w1:p1", "down", ratio=0.7)
    api("pane.rename", {"pane_id": p3, "label": "worker"})
    exported = api("layout.export", {})["layout"]
    assert exported["tab_id"] == "w1:t1" and exported["zoomed"] is False
    root = exported["root"]
    assert root["ratio"] == 0.333 and root["second"]["first"]["cwd"] == str(tmp_path)
    assert root["second"]["second"]["command"] == ["sh", "-c", "echo worker; sleep 60"]
    assert root["second"]["second"]["label"] == "worker"
    assert "env" not in json.dumps(root)
    watcher = watch(api, "tab.created", "pane.created", "layout.updated", "tab.closed",
                    "pane.closed", "tab.renamed")
    applied = api("layout.apply", {"root": root, "tab_label": "copy"})["layout"]
    assert applied["tab_id"] == "w1:t2"
    assert [e["event"] for e in drain(watcher, 6)] == [
        "tab_created", "pane_created", "pane_created", "pane_created", "pane_created",
        "layout_updated"]
    again = api("layout.export", {"tab_id": applied["tab_id"]})["layout"]
    assert strip_ids(again["root"]) == strip_ids(root)
    # Same geometry, and every PTY started at its rect.
    original = layout_of(api, "w1:p1")
    copy = layout_of(api, again["focused_pane_id"])
    assert [rect(p["rect"]) for p in copy["panes"]] == [rect(p["rect"]) for p in
                                                        original["panes"]]
    worker = again["root"]["second"]["second"]["pane_id"]
    api.wait_text(worker, "worker")
    check_snapshot(api)
    no_more_events(watcher, api)
    watcher.close()


def test_documented_example_layout_applies(api: Api) -> None:
    example = Path(__file__).parent.parent / "docs" / "examples" / "layouts" / "review.json"
    applied = api("layout.apply", {"root": json.loads(example.read_text()), "focus": True})
    root = applied["layout"]["root"]
    labels = [root["first"]["label"], root["second"]["first"]["label"],
              root["second"]["second"]["label"]]
    assert labels == ["editor", "tests", "logs"]
    tests = root["second"]["first"]["pane_id"]
    api.wait_text(tests, "run your tests here")
    api("pane.send_text", {"pane_id": tests, "text": "echo verbose=$TEST_VERBOSE\r"})
    api.wait_text(tests, "verbose=1")
    assert api.focused_pane() == root["first"]["pane_id"]
    check_snapshot(api)


def test_apply_replaces_a_tab_in_place(api: Api) -> None:
    api("tab.rename", {"tab_id": "w1:t1", "label": "main"})
    api("tab.create", {})
    tree = {"type": "split", "direction": "down", "ratio": 0.25,
            "first": {"type": "pane", "label": "top"}, "second": {"type": "pane"}}
    watcher = watch(api, "tab.created", "pane.created", "layout.updated", "tab.closed",
                    "pane.closed", "workspace.focused", "tab.focused", "pane.focused")
    result = api("layout.apply", {"tab_id": "w1:t1", "root": tree})["layout"]
    assert result["tab_id"] == "w1:t3"
    assert [e["event"] for e in drain(watcher, 9)] == [
        "tab_created", "pane_created", "pane_created", "layout_updated", "pane_closed",
        "tab_closed", "workspace_focused", "tab_focused", "pane_focused"]
    tabs = api("tab.list", {})["tabs"]
    assert [(t["tab_id"], t["label"], t["focused"]) for t in tabs] == [
        ("w1:t3", "main", True), ("w1:t2", "2", False)]
    top = api("pane.current")["pane"]
    assert top["label"] == "top" and (top["columns"], top["rows"]) == (80, 6)
    check_snapshot(api)
    watcher.close()


def test_apply_rolls_back_every_pane_when_a_spawn_fails(api: Api) -> None:
    before = check_snapshot(api)
    tree = {"type": "split", "direction": "right", "ratio": 0.5,
            "first": {"type": "split", "direction": "down", "ratio": 0.5,
                      "first": {"type": "pane", "command": ["sleep", "60"]},
                      "second": {"type": "pane", "command": ["sleep", "61"]}},
            "second": {"type": "pane", "command": ["/no/such/program-xyz"]}}
    watcher = watch(api, "tab.created", "pane.created", "pane.closed", "layout.updated",
                    "tab.renamed")
    err = api.error("layout.apply", {"root": tree})
    assert err["code"] == "layout_apply_failed"
    no_more_events(watcher, api)
    after = api("session.snapshot")["snapshot"]
    assert [p["pane_id"] for p in after["panes"]] == [p["pane_id"] for p in before["panes"]]
    assert [t["tab_id"] for t in after["tabs"]] == ["w1:t1"]

    def sleepers_gone() -> bool:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmd = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if cmd in (b"sleep\x0060\x00", b"sleep\x0061\x00") and _child_of(
                    int(entry.name), api.server.process.pid):
                return False
        return True

    wait_until(sleepers_gone, 30, message="rolled-back processes to end")
    # Nothing was published, so the next pane takes the next number.
    assert split(api, "w1:p1") == "w1:p2"
    watcher.close()


def _child_of(pid: int, parent: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return int(stat[stat.rfind(")") + 2:].split()[1]) == parent


def test_apply_validation(api: Api) -> None:
    def chain(depth: int) -> dict[str, Any]:
        node: dict[str, Any] = {"type": "pane"}
        for _ in range(depth):
            node = {"type": "split", "direction": "down", "ratio": 0.5, "first": node,
                    "second": {"type": "pane"}}
        return node

    def wide(count: int) -> dict[str, Any]:
        if count == 1:
            return {"type": "pane"}
        half = count // 2
        return {"type": "split", "direction": "right", "ratio": 0.5, "first": wide(half),
                "second": wide(count - half)}

    for root, code in [(chain(17), "invalid_layout"), (wide(25), "invalid_layout"),
                       ({"type": "pane", "command": []}, "invalid_layout"),
                       ({"type": "pane", "env": {"A=B": "x"}}, "invalid_env"),
                       ({"type": "box"}, "invalid_layout")]:
        assert api.error("layout.apply", {"root": root})["code"] == code
    assert api.error("layout.apply", {"root": {"type": "pane"}, "tab_id": "w1:t1",
                                      "workspace_id": "w1"})["code"] == "invalid_target"
    assert api.error("layout.apply", {"root": {"type": "pane"}, "tab_id": "w1:t7"})["code"] == \
        "tab_not_found"
    assert api.error("layout.apply", {"root": {"type": "pane"},
                                      "workspace_id": "w7"})["code"] == "workspace_not_found"
    assert api.error("layout.apply", {"root": {"type": "pane", "cwd": "/no/such/dir"}})[
        "code"] == "layout_apply_failed"
    assert api.error("layout.export", {"tab_id": "w1:t1", "pane_id": "w1:p1"})["code"] == \
        "layout_not_found"
    assert [t["tab_id"] for t in api("tab.list", {})["tabs"]] == ["w1:t1"]
    deep = api("layout.apply", {"root": chain(16)})["layout"]
    assert len(json.dumps(deep)) > 0
    check_snapshot(api)


# -- order ----------------------------------------------------------------------------


def test_tab_and_workspace_order(api: Api) -> None:
    api("tab.create", {})
    api("tab.create", {})
    watcher = watch(api, "tab.moved", "workspace.moved", "workspace.reordered",
                    "tab.renamed")
    tabs = api("tab.move", {"tab_id": "w1:t1", "insert_index": 3})["tabs"]
    assert [t["tab_id"] for t in tabs] == ["w1:t2", "w1:t3", "w1:t1"]
    assert watcher.event()["data"]["tab_id"] == "w1:t1"
    unchanged = api("tab.move", {"tab_id": "w1:t1", "insert_index": 3})["tabs"]
    assert [t["tab_id"] for t in unchanged] == ["w1:t2", "w1:t3", "w1:t1"]
    assert api.error("tab.move", {"tab_id": "w1:t1", "insert_index": 4})["code"] == \
        "tab_move_failed"
    no_more_events(watcher, api)
    for _ in range(3):
        api("workspace.create", {})
    order = api("workspace.move", {"workspace_id": "w4", "insert_index": 0})["workspaces"]
    assert [w["workspace_id"] for w in order] == ["w4", "w1", "w2", "w3"]
    assert [w["number"] for w in order] == [1, 2, 3, 4]
    assert watcher.event()["data"]["insert_index"] == 0
    assert api.error("workspace.move", {"workspace_id": "w1", "insert_index": 5})["code"] == \
        "workspace_move_failed"
    block = api("workspace.move_block", {"workspace_ids": ["w3", "w1"],
                                         "before_workspace_id": "w4"})["workspaces"]
    assert [w["workspace_id"] for w in block] == ["w3", "w1", "w4", "w2"]
    event = watcher.event()["data"]
    assert event["workspace_ids"] == ["w3", "w1"] and event["before_workspace_id"] == "w4"
    to_end = api("workspace.move_block", {"workspace_ids": ["w3"]})["workspaces"]
    assert [w["workspace_id"] for w in to_end] == ["w1", "w4", "w2", "w3"]
    watcher.event()
    same = api("workspace.move_block", {"workspace_ids": ["w2", "w3"]})["workspaces"]
    assert [w["workspace_id"] for w in same] == ["w1", "w4", "w2", "w3"]
    for params in ({"workspace_ids": []}, {"workspace_ids": ["w1", "1"]},
                   {"workspace_ids": ["w1"], "before_workspace_id": "w1"}):
        assert api.error("workspace.move_block", params)["code"] == \
            "workspace_move_block_failed"
    assert api.error("workspace.move_block", {"workspace_ids": ["w9"]})["code"] == \
        "workspace_not_found"
    no_more_events(watcher, api)
    watcher.close()


# -- a long random walk -----------------------------------------------------------------


DIRECTIONS = ("left", "right", "up", "down")


@pytest.mark.parametrize("seed", [4, 11, 2024])
def test_random_rearrangements_keep_every_invariant(api: Api, seed: int) -> None:
    """Seeded random split/close/swap/move/resize/zoom steps; invariants after each."""
    rng = random.Random(seed)
    deadline = time.monotonic() + 75
    terminals: dict[str, str] = {"w1:p1": api("pane.get", {"pane_id": "w1:p1"})["pane"][
        "terminal_id"]}
    old_ids: dict[str, str] = {}  # an id a pane had before a cross-workspace move → terminal
    steps = 0
    while steps < 150 and time.monotonic() < deadline:
        snap = api("session.snapshot")["snapshot"]
        panes = [p["pane_id"] for p in snap["panes"]]
        tabs = [t["tab_id"] for t in snap["tabs"]]
        zoomed = {lay["tab_id"] for lay in snap["layouts"] if lay["zoomed"]}
        pane = rng.choice(panes)
        same_tab = [p["pane_id"] for p in snap["panes"]
                    if p["tab_id"] == next(q["tab_id"] for q in snap["panes"]
                                           if q["pane_id"] == pane)]
        op = rng.choice(["split"] * 3 + ["close", "swap", "swap", "swap_explicit", "move",
                                         "move", "resize", "resize", "zoom", "focus", "ratio"])
        if op == "split" and len(panes) < 10:
            info = api("pane.split", {"target_pane_id": pane, "direction": rng.choice(
                ["right", "down"]), "ratio": rng.uniform(0.2, 0.8),
                "focus": rng.random() < 0.3})["pane"]
            terminals[info["pane_id"]] = info["terminal_id"]
        elif op == "close" and len(panes) > 1:
            api("pane.close", {"pane_id": pane})
            term = terminals.pop(pane)
            old_ids = {k: v for k, v in old_ids.items() if v != term}
        elif op == "swap":
            api("pane.swap", {"pane_id": pane, "direction": rng.choice(DIRECTIONS)})
        elif op == "swap_explicit":
            others = same_tab if rng.random() < 0.8 else panes
            api("pane.swap", {"source_pane_id": pane, "target_pane_id": rng.choice(others)})
        elif op == "move":
            kind = rng.choice(["tab", "tab", "tab", "new_tab", "new_workspace"])
            dest: dict[str, Any] = {"type": kind}
            if kind == "tab":
                pane_tab = next(p["tab_id"] for p in snap["panes"] if p["pane_id"] == pane)
                others = [t for t in tabs if t != pane_tab and rng.random() < 0.8] or tabs
                dest.update(tab_id=rng.choice(others), split=rng.choice(["right", "down"]),
                            ratio=rng.uniform(0.1, 0.9))
            result = api("pane.move", {"pane_id": pane, "destination": dest,
                                       "focus": rng.random() < 0.5})["move_result"]
            new_id = result["pane"]["pane_id"]
            if result["changed"]:
                assert (dest.get("tab_id") or "").split(":")[0] in ("", new_id.split(":")[0])
            else:
                pane_tab = next(p["tab_id"] for p in snap["panes"] if p["pane_id"] == pane)
                assert result["reason"] == ("same_tab" if dest.get("tab_id") == pane_tab
                                            else "zoomed_tab")
                assert pane_tab in zoomed or result["reason"] == "same_tab" or \
                    dest.get("tab_id") in zoomed
            if new_id != pane:
                old_ids[pane] = terminals[pane]
                terminals[new_id] = terminals.pop(pane)
        elif op == "resize":
            api("pane.resize", {"pane_id": pane, "direction": rng.choice(DIRECTIONS),
                                "amount": rng.uniform(0.01, 0.3)})
        elif op == "zoom":
            mode = rng.choice(["toggle", "on", "off", "off"])
            api("pane.zoom", {"pane_id": pane, "mode": mode})
        elif op == "focus":
            api("pane.focus_direction", {"pane_id": pane, "direction": rng.choice(DIRECTIONS)})
        elif op == "ratio":
            lay = layout_of(api, pane)
            if lay["splits"]:
                bits = rng.choice(lay["splits"])["id"].split("_")[-1]
                path = [] if bits == "root" else [b == "1" for b in bits]
                api("layout.set_split_ratio", {"pane_id": pane, "path": path,
                                               "ratio": rng.uniform(0, 1)})
        steps += 1
        checked = check_snapshot(api)
        assert {p["pane_id"]: p["terminal_id"] for p in checked["panes"]} == terminals, op
        for old, term in old_ids.items():
            assert api("pane.get", {"pane_id": old})["pane"]["terminal_id"] == term
    assert steps >= 60, f"only {steps} steps ran before the deadline"


def test_area_change_resizes_every_tab(api: Api) -> None:
    p2 = split(api, "w1:p1")
    api("tab.create", {})
    api("pane.zoom", {"pane_id": p2})
    api("server.set_area", {"width": 101, "height": 31})
    snap = check_snapshot(api)
    assert {lay["area"]["width"] for lay in snap["layouts"]} == {101}
    with pytest.raises(CmuxError):
        api("server.set_area", {"width": 0, "height": 0})


# -- the command line -------------------------------------------------------------------


def run_cli(api: Api, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run one ``cmux`` command in-process against the test server; returns its stdout."""
    parser = build_parser()
    args = parser.parse_args([*argv, "--socket", str(api.server.socket_path)])
    capsys.readouterr()
    assert args.func(args) == 0
    return capsys.readouterr().out


def test_cli_arranges_panes_and_saves_and_restores_a_layout(
        api: Api, capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CMUX_PANE_ID", raising=False)
    p2 = split(api, "w1:p1")
    p3 = split(api, p2, "down")

    def cli(*argv: str) -> str:
        return run_cli(api, capsys, *argv)

    assert cli("pane", "neighbor", "right", "--pane", "w1:p1") == f"{p2}\n"
    assert cli("pane", "edges", p3) == "right down\n"
    assert cli("pane", "swap", "left", "--pane", p3) == f"swapped {p3} with w1:p1\n"
    assert cli("pane", "swap", p2, "--pane", "w1:p1") == f"swapped w1:p1 with {p2}\n"
    assert cli("pane", "swap", "up", "--pane", p3) == "unchanged: no_neighbor\n"
    shown = cli("pane", "layout", p3)
    assert shown.splitlines()[0] == "tab w1:t1  area 80x24"
    assert "split_0_root" in shown and "split_1_1" in shown
    assert cli("pane", "focus-direction", "right", "--pane", p3) in (f"{p2}\n", "w1:p1\n")
    assert cli("pane", "resize", "right", "--pane", p3, "--amount", "0.2").startswith("tab ")
    assert cli("pane", "zoom", p3, "--on") == "zoomed\n"
    assert cli("pane", "zoom", p3, "--on") == "zoomed (already_zoomed)\n"
    assert cli("pane", "zoom", p3) == "unzoomed\n"
    assert cli("pane", "move", p2, "--new-workspace", "--label", "side") == "w2:p1\n"
    assert cli("pane", "move", "w2:p1", "--tab", "w1:t1", "--target", p3, "--split",
               "down") == "w1:p4\n"
    assert cli("workspace", "move", "w1", "0") == "w1\n"
    cli("layout", "set-ratio", "0.3", "--path", "0")
    saved = tmp_path / "setup.json"
    saved.write_text(cli("layout", "export", "--tab", "w1:t1"))
    tab_id = cli("layout", "apply", str(saved), "--workspace", "w1", "--label", "copy").strip()
    assert tab_id == "w1:t2"
    exported = json.loads(saved.read_text())
    again = json.loads(cli("layout", "export", "--tab", tab_id))
    assert strip_ids(again["root"]) == strip_ids(exported["root"])
    assert cli("tab", "move", tab_id, "0") == "w1:t2\nw1:t1\n"
    check_snapshot(api)
