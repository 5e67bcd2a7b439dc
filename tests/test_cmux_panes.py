"""cmux v2 pane methods on a real server: create, surfaces, last, break, join and the
cmux form of pane.swap, with cmux's parameter names and result shapes."""

from __future__ import annotations

from typing import Any

from cmux_v2 import V2

from cmux_core.testing import ServerProcess


def focused(v2: V2) -> dict[str, Any]:
    return dict(v2("system.identify")["focused"])


def test_create_surfaces_and_last(cmux_server: ServerProcess) -> None:
    with V2(cmux_server.socket_path) as v2:
        start = focused(v2)
        made = v2("pane.create", direction="down")
        assert made["type"] == "terminal" and made["pane_id"] != start["pane_id"]
        assert made["workspace_id"] == start["workspace_id"]
        assert focused(v2)["pane_id"] == start["pane_id"]
        listed = v2("pane.surfaces", pane_id=made["pane_id"])
        assert listed["pane_id"] == made["pane_id"] and listed["window_id"]
        assert listed["surfaces"] == [{"id": made["surface_id"], "ref": made["surface_ref"],
                                       "index": 0, "title": listed["surfaces"][0]["title"],
                                       "type": "terminal", "selected": True,
                                       "agent_status": "unknown"}]
        assert v2("pane.surfaces")["pane_id"] == start["pane_id"]

        assert v2.error("pane.last").code == "not_found"
        v2("pane.focus", pane_id=made["pane_id"])
        back = v2("pane.last")
        assert back["pane_id"] == start["pane_id"] and back["surface_id"] == start["surface_id"]
        assert focused(v2)["pane_id"] == start["pane_id"]
        assert v2("pane.last")["pane_id"] == made["pane_id"]
        assert v2.error("pane.create", direction="diagonal").code == "invalid_params"


def test_swap_in_cmux_form_exchanges_selected_surfaces(cmux_server: ServerProcess) -> None:
    with V2(cmux_server.socket_path) as v2:
        start = focused(v2)
        other = v2("surface.split", direction="right")
        swapped = v2("pane.swap", pane_id=start["pane_id"], target_pane_id=other["pane_id"])
        assert swapped["pane_id"] == start["pane_id"]
        assert swapped["target_pane_id"] == other["pane_id"]
        assert swapped["source_surface_id"] == start["surface_id"]
        assert swapped["target_surface_id"] == other["surface_id"]
        assert swapped["window_id"] == start["window_id"]
        left = v2("pane.surfaces", pane_id=start["pane_id"])["surfaces"]
        right = v2("pane.surfaces", pane_id=other["pane_id"])["surfaces"]
        assert [s["id"] for s in left] == [other["surface_id"]]
        assert [s["id"] for s in right] == [start["surface_id"]]
        # Without "focus" the focused pane stays; with it, focus follows the surface.
        assert focused(v2)["pane_id"] == start["pane_id"]
        v2("pane.swap", pane_id=start["pane_id"], target_pane_id=other["pane_id"], focus=True)
        assert focused(v2)["pane_id"] == other["pane_id"]

        same = v2.error("pane.swap", pane_id=start["pane_id"], target_pane_id=start["pane_id"])
        assert same.code == "invalid_params" and same.data == {"field": "target_pane_id"}
        ws2 = v2("workspace.create")
        far = v2.error("pane.swap", pane_id=start["pane_id"], target_pane_id=ws2["pane_id"])
        assert far.code == "invalid_params"
        # The Local API's forms still answer in their own shape.
        herdr = v2("pane.swap", source_pane_id=start["pane_id"],
                   target_pane_id=other["pane_id"])
        assert herdr["type"] == "pane_swap" and "swap" in herdr


def test_break_and_join(cmux_server: ServerProcess) -> None:
    with V2(cmux_server.socket_path) as v2:
        start = focused(v2)
        extra = v2("surface.create", pane_id=start["pane_id"])
        split = v2("surface.split", direction="right")

        joined = v2("pane.join", pane_id=split["pane_id"], target_pane_id=start["pane_id"])
        assert joined["surface_id"] == split["surface_id"]
        assert joined["pane_id"] == start["pane_id"]
        panes = v2("pane.list", workspace_id=start["workspace_id"])["panes"]
        assert [p["id"] for p in panes] == [start["pane_id"]]
        assert panes[0]["surface_count"] == 3
        again = v2.error("pane.join", surface_id=split["surface_id"],
                         target_pane_id=start["pane_id"])
        assert again.code == "invalid_params"
        assert v2.error("pane.join", target_pane_id=start["pane_id"]).code == "invalid_params"

        broken = v2("pane.break", surface_id=extra["surface_id"], title="broken out")
        assert broken["surface_id"] == extra["surface_id"]
        assert broken["workspace_id"] != start["workspace_id"]
        assert broken["window_id"] == start["window_id"]
        rows = v2("workspace.list")["workspaces"]
        assert [r["title"] for r in rows if r["id"] == broken["workspace_id"]] == ["broken out"]
        assert v2("workspace.current")["workspace_id"] == start["workspace_id"]
        left = v2("pane.surfaces", pane_id=start["pane_id"])["surfaces"]
        assert extra["surface_id"] not in [s["id"] for s in left]

        focused_break = v2("pane.break", surface_id=split["surface_id"], focus=True)
        assert v2("workspace.current")["workspace_id"] == focused_break["workspace_id"]


def test_resize_in_pixels_and_the_debug_layout(cmux_server: ServerProcess) -> None:
    with V2(cmux_server.socket_path) as v2:
        start = focused(v2)
        v2("surface.split", direction="right")

        def width() -> int:
            panes = v2("debug.layout")["layout"]["layout"]["panes"]
            return int(next(p for p in panes if p["paneId"] == start["pane_id"])
                       ["frame"]["width"])

        before = width()  # 80 columns split in two, 8 pixels a cell
        assert before == 40 * 8
        out = v2("pane.resize", pane_id=start["pane_id"], direction="right", amount=80)
        assert out["pane_id"] == start["pane_id"] and out["changed"] is True
        assert out["workspace_id"] == start["workspace_id"]
        assert width() == before + 80
        # A fraction is the Local API's share of the split, with its own result only.
        local = v2("pane.resize", pane_id=start["pane_id"], direction="left", amount=0.125)
        assert "pane_id" not in local and local["resize"]["changed"] is True
        assert width() == before + 80 - 10 * 8
