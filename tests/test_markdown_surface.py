"""Markdown surfaces on a real server: a tab of a pane showing a file, with no process.

They come from a ``workspace.create`` layout, ``surface.create {type: "markdown"}`` and
``markdown.open``; rows name them ``type: "markdown"`` with their ``path``;
``surface.read_text`` reads the file as it is now; input is refused with cmux's
"Surface is not a terminal"; a pane always keeps a terminal, so the herdr family's panes
stay terminals.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from cmux_v2 import V2
from conftest import Api

from cmux_core.client import Client
from cmux_core.testing import ServerProcess, start_server, wait_until


def md(path: str, **fields: Any) -> dict[str, Any]:
    return {"type": "markdown", "path": path, **fields}


def counts(api: Api) -> tuple[int, int]:
    workspaces = api("workspace.list")["workspaces"]
    panes = sum(len(api("pane.list", {"workspace_id": w["id"]})["panes"])
                for w in workspaces)
    return len(workspaces), panes


def rows(api: Api, ws: str) -> list[dict[str, Any]]:
    return list(api("surface.list", {"workspace_id": ws})["surfaces"])


def docs(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "docs").mkdir()
    readme, plan = tmp_path / "README.md", tmp_path / "docs" / "plan.md"
    readme.write_text("# Readme\n")
    plan.write_text("# Plan\n\n- one\n- two\n")
    return readme, plan


def layout_workspace(api: Api, tmp_path: Path) -> str:
    layout = {"pane": {"surfaces": [{"type": "terminal", "name": "Shell"}, md("README.md"),
                                    md("docs/plan.md", name="The plan", focus=True)]}}
    return str(api("workspace.create", {"title": "docs", "cwd": str(tmp_path),
                                        "layout": layout})["workspace_id"])


def test_layout_markdown_surfaces_are_tabs_with_resolved_paths(api: Api,
                                                               tmp_path: Path) -> None:
    readme, plan = docs(tmp_path)
    ws = layout_workspace(api, tmp_path)
    surfaces = rows(api, ws)
    assert [s["type"] for s in surfaces] == ["terminal", "markdown", "markdown"]
    assert [s.get("path") for s in surfaces] == [None, str(readme), str(plan)]
    assert [s["title"] for s in surfaces][1:] == ["README.md", "The plan"]
    assert len({s["pane_id"] for s in surfaces}) == 1
    assert [s["selected_in_pane"] for s in surfaces] == [False, False, True]
    api("workspace.select", {"workspace_id": ws})
    assert [s["focused"] for s in rows(api, ws)] == [False, False, True]
    pane_id = surfaces[0]["pane_id"]
    tabs = api("pane.surfaces", {"pane_id": pane_id})["surfaces"]
    assert [(t["type"], t.get("path")) for t in tabs] == [
        ("terminal", None), ("markdown", str(readme)), ("markdown", str(plan))]
    tree = api("system.tree", {"all_windows": True})
    tree_rows = [s for w in tree["windows"] for space in w["workspaces"]
                 for p in space["panes"] for s in p["surfaces"] if s["pane_id"] == pane_id]
    assert [s["type"] for s in tree_rows] == ["terminal", "markdown", "markdown"]
    current = api("surface.current", {"workspace_id": ws})
    assert current["surface_type"] == "markdown"
    # Saved as a layout, the documents come back as markdown tabs with their paths.
    api("layout.save", {"name": "with-docs", "workspace_id": ws})
    opened = api("layout.open", {"name": "with-docs"})
    again = rows(api, opened["workspace_id"])
    assert [(s["type"], s.get("path"), s["title"]) for s in again] == [
        (s["type"], s.get("path"), s["title"]) for s in surfaces]
    assert [s["selected_in_pane"] for s in again] == [False, False, True]


def test_a_missing_file_or_a_pane_of_documents_creates_nothing(api: Api,
                                                               tmp_path: Path) -> None:
    docs(tmp_path)
    before = counts(api)
    missing = {"pane": {"surfaces": [{"type": "terminal"}, md("missing.md")]}}
    err = api.error("workspace.create", {"cwd": str(tmp_path), "layout": missing})
    assert err["code"] == "invalid_layout"
    assert err["data"] == {"path": "layout.pane.surfaces[1].path"}
    assert "Invalid layout" in err["message"] and "not_found" in err["message"]
    only_docs = {"direction": "horizontal", "children": [
        {"pane": {"surfaces": [{"type": "terminal"}]}},
        {"pane": {"surfaces": [md("README.md")]}}]}
    err = api.error("workspace.create", {"cwd": str(tmp_path), "layout": only_docs})
    assert err["code"] == "invalid_layout"
    assert err["data"] == {"path": "layout.children[1].pane.surfaces"}
    no_path = {"pane": {"surfaces": [{"type": "terminal"}, {"type": "markdown"}]}}
    err = api.error("workspace.create", {"cwd": str(tmp_path), "layout": no_path})
    assert err["data"] == {"path": "layout.pane.surfaces[1].path"}
    assert counts(api) == before


def test_read_text_reads_the_file_now_and_input_is_refused(api: Api, tmp_path: Path) -> None:
    _, plan = docs(tmp_path)
    ws = layout_workspace(api, tmp_path)
    doc = rows(api, ws)[2]["id"]
    got = api("surface.read_text", {"surface_id": doc})
    assert got["text"] == "# Plan\n\n- one\n- two\n"
    assert base64.b64decode(got["base64"]).decode() == got["text"]
    assert api("surface.read_text", {"surface_id": doc, "lines": 2})["text"] == "- one\n- two\n"
    err = api.error("pane.attach", {"pane_id": doc, "columns": 80, "lines": 24})
    assert err["code"] == "invalid_params" and err["message"] == "Surface is not a terminal"
    plan.write_text("# Plan, revised\n")
    assert api("surface.read_text", {"surface_id": doc})["text"] == "# Plan, revised\n"
    for method, extra in (("surface.send_text", {"text": "x"}),
                          ("surface.send_key", {"key": "enter"})):
        err = api.error(method, {"surface_id": doc, **extra})
        assert err["code"] == "invalid_params"
        assert err["message"] == "Surface is not a terminal"
    plan.write_bytes(b"x" * (4 * 1024 * 1024 + 1))
    err = api.error("surface.read_text", {"surface_id": doc})
    assert err["code"] == "file_too_large"
    plan.unlink()
    err = api.error("surface.read_text", {"surface_id": doc})
    assert err["code"] == "not_found" and str(plan) in err["message"]


def test_markdown_open_and_surface_create_add_a_tab(api: Api, tmp_path: Path) -> None:
    readme, plan = docs(tmp_path)
    ws = api("workspace.create", {"cwd": str(tmp_path)})["workspace_id"]
    term = rows(api, ws)[0]
    focused_before = api("workspace.current")["workspace_id"]
    opened = api("markdown.open", {"path": str(plan), "surface_id": term["id"]})
    assert opened["path"] == str(plan) and opened["surface_type"] == "markdown"
    assert opened["pane_id"] == opened["source_pane_id"] == term["pane_id"]
    assert opened["source_surface_id"] == term["id"]
    assert api("workspace.current")["workspace_id"] == focused_before
    created = api("surface.create", {"type": "markdown", "path": "README.md",
                                     "workspace_id": ws, "title": "Read me"})
    assert created["type"] == "markdown" and created["path"] == str(readme)
    listed = rows(api, ws)
    assert [(s["type"], s["title"]) for s in listed][1:] == [
        ("markdown", "plan.md"), ("markdown", "Read me")]
    before = counts(api)
    err = api.error("markdown.open", {"path": str(tmp_path / "nope.md"), "workspace_id": ws})
    assert err["code"] == "not_found"
    err = api.error("markdown.open", {"workspace_id": ws})
    assert err["code"] == "invalid_params" and err["data"] == {"field": "path"}
    err = api.error("surface.create", {"type": "markdown", "path": str(tmp_path),
                                       "workspace_id": ws})
    assert err["code"] == "invalid_params"
    err = api.error("surface.split", {"type": "markdown", "direction": "right",
                                      "workspace_id": ws})
    assert err["code"] == "not_supported"
    assert counts(api) == before and len(rows(api, ws)) == 3


def test_focus_move_reorder_close_and_the_pane_keeps_a_terminal(api: Api,
                                                                 tmp_path: Path) -> None:
    docs(tmp_path)
    ws = layout_workspace(api, tmp_path)
    term, readme, plan = (s["id"] for s in rows(api, ws))
    api("surface.focus", {"surface_id": readme})
    assert api("surface.current", {"workspace_id": ws})["surface_id"] == readme
    api("surface.reorder", {"surface_id": plan, "index": 0})
    assert [s["id"] for s in rows(api, ws)] == [plan, term, readme]
    # The pane's only terminal may not leave while documents stay.
    for method, params in (("surface.close", {"surface_id": term}),
                           ("surface.split_off", {"surface_id": term, "direction": "right"}),
                           ("tab.action", {"surface_id": readme, "action": "close_others"})):
        err = api.error(method, params)
        assert err["code"] == "invalid_state", (method, err)
    assert len(rows(api, ws)) == 3
    # A second pane: a document moves there and back, and closes like any tab.
    other = api("surface.split", {"surface_id": term, "direction": "right"})
    api("surface.move", {"surface_id": readme, "pane_id": other["pane_id"]})
    moved = {s["id"]: s["pane_id"] for s in rows(api, ws)}
    assert moved[readme] == other["pane_id"]
    err = api.error("surface.split_off", {"surface_id": readme, "direction": "down"})
    assert err["code"] == "invalid_state"
    api("surface.close", {"surface_id": readme})
    assert readme not in {s["id"] for s in rows(api, ws)}
    api("surface.close", {"surface_id": plan})
    assert [s["type"] for s in rows(api, ws)] == ["terminal", "terminal"]


def test_the_herdr_family_sees_the_pane_as_its_terminal(api: Api, tmp_path: Path) -> None:
    docs(tmp_path)
    ws = layout_workspace(api, tmp_path)
    term, _, plan = rows(api, ws)
    herdr_id = term["public_pane_id"]
    listed = api("pane.list", {"workspace_id": ws})["panes"]  # schema-checked
    assert len(listed) == 1
    assert listed[0]["surface_id"] == term["id"]  # the pane's terminal, not the document
    api("agent.list", {})
    # The selected tab is a document; herdr's input goes to the pane's terminal.
    assert plan["selected_in_pane"]
    api("pane.send_text", {"pane_id": herdr_id, "text": "echo HERDR-$((6*7))\n"})
    api.wait_text(herdr_id, "HERDR-42")
    assert "HERDR-42" in api.read(herdr_id, "recent")
    api("system.memory", {})
    health = api("surface.health", {"workspace_id": ws})["surfaces"]
    assert [h["type"] for h in health] == ["terminal", "markdown", "markdown"]
    assert all(h["alive"] for h in health)
    terminals = api("debug.terminals", {})["terminals"]
    assert plan["id"] not in {t["surface_id"] for t in terminals}
    assert term["id"] in {t["surface_id"] for t in terminals}


def test_a_restart_restores_documents_even_when_their_file_vanished(tmp_path: Path) -> None:
    readme, plan = docs(tmp_path)
    sock_dir = Path(tempfile.mkdtemp(prefix="cmux-md-", dir=tempfile.gettempdir()))
    args = ["--socket", str(sock_dir / "s.sock")]
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    try:
        first = start_server(args, env=env)
        try:
            layout = {"pane": {"surfaces": [md("README.md"), {"type": "terminal"},
                                            md("docs/plan.md", name="The plan", focus=True)]}}
            ws = first.call("workspace.create", {"cwd": str(tmp_path), "layout": layout})
            before = first.call("surface.list", {"workspace_id": ws["workspace_id"]})
        finally:
            first.stop()
        plan.unlink()
        second = start_server(args, env=env)
        try:
            after = second.call("surface.list", {"workspace_id": ws["workspace_id"]})
            keys = ("id", "ref", "type", "path", "title", "selected_in_pane", "index_in_pane")
            assert [[s.get(k) for k in keys] for s in after["surfaces"]] == \
                [[s.get(k) for k in keys] for s in before["surfaces"]]
            assert [s["type"] for s in after["surfaces"]] == ["markdown", "terminal", "markdown"]
            ids = [s["id"] for s in after["surfaces"]]
            text = second.call("surface.read_text", {"surface_id": ids[0]})["text"]
            assert text == readme.read_text()
            with second.client() as c:
                reply = c.request("surface.read_text", {"surface_id": ids[2]})
            assert reply["error"]["code"] == "not_found"
            assert str(plan) in reply["error"]["message"]
        finally:
            second.stop()
    finally:
        shutil.rmtree(sock_dir, ignore_errors=True)


def test_tab_actions_and_swaps_on_documents(api: Api, tmp_path: Path) -> None:
    docs(tmp_path)
    ws = layout_workspace(api, tmp_path)
    term, readme, plan = (s["id"] for s in rows(api, ws))
    renamed = api("tab.action", {"surface_id": plan, "action": "clear_name"})
    assert renamed["title"] == "plan.md"  # the file name once the given name is cleared
    dup = api("tab.action", {"surface_id": readme, "action": "duplicate"})
    listed = rows(api, ws)
    assert [s["id"] for s in listed][:3] == [term, readme, dup["created_surface_id"]]
    assert listed[2]["type"] == "markdown" and listed[2].get("path") == listed[1].get("path")
    # cmux's pane.swap exchanges selected surfaces; a pane may not be left with documents
    # only, so swapping the lone terminal of a plain pane for a document is refused.
    other = api("surface.split", {"surface_id": term, "direction": "right"})
    # (cmux's form of pane.swap is not the herdr schema's: asked with cmux's client.)
    api("surface.focus", {"surface_id": readme})
    with V2(api.server.socket_path) as v2:
        err = v2.error("pane.swap", pane_id=listed[0]["pane_id"],
                       target_pane_id=other["pane_id"])
        assert err.code == "invalid_state"
        api("surface.focus", {"surface_id": term})
        v2("pane.swap", pane_id=listed[0]["pane_id"], target_pane_id=other["pane_id"])
    after = {s["id"]: s["pane_id"] for s in rows(api, ws)}
    assert after[term] == other["pane_id"] and after[other["surface_id"]] == listed[0]["pane_id"]


def test_the_terminal_behind_a_document_reports_notifications_and_exit(
        api: Api, tmp_path: Path) -> None:
    docs(tmp_path)
    ws = layout_workspace(api, tmp_path)
    term, _, plan = rows(api, ws)
    assert plan["selected_in_pane"]
    herdr_id = term["public_pane_id"]
    api("pane.send_text", {"pane_id": herdr_id,
                           "text": "printf '\\033]9;from-the-shell\\007'\n"})

    def noted() -> bool:
        return any(n["title"] == "from-the-shell" and n["surface_id"] == term["id"]
                   for n in api("notification.list", {})["notifications"])

    wait_until(noted, 30, message="the shell's notification, on its terminal surface")
    api("events.subscribe", {"subscriptions": [{"type": "pane.exited"}]})
    api("pane.send_text", {"pane_id": herdr_id, "text": "exit 5\n"})
    event = api.event(20)
    assert event["event"] == "pane_exited" and event["data"]["pane_id"] == herdr_id
    assert event["data"]["exit_code"] == 5


def test_herdr_layout_export_describes_the_terminal_behind_a_document(
        api: Api, tmp_path: Path) -> None:
    _, plan = docs(tmp_path)
    pane_id = api.run(["sh"])
    surface = api("pane.get", {"pane_id": pane_id})["pane"]["surface_id"]
    api("markdown.open", {"path": str(plan), "surface_id": surface})
    exported = api("layout.export", {"pane_id": pane_id})["layout"]

    def leaves(node: dict[str, Any]) -> list[dict[str, Any]]:
        if node["type"] == "pane":
            return [node]
        return leaves(node["first"]) + leaves(node["second"])

    leaf = next(x for x in leaves(exported["root"]) if x["pane_id"] == pane_id)
    assert leaf["command"] == ["sh"]


def test_cmux_markdown_open_on_the_command_line(cmux_server: ServerProcess,
                                                tmp_path: Path) -> None:
    _, plan = docs(tmp_path)
    with Client(cmux_server.socket_path) as c:
        term = c.call("surface.list", {})["surfaces"][0]
    proc = subprocess.run(
        [sys.executable, "-m", "cmux_core", "markdown", "open", "docs/plan.md",
         "--socket", str(cmux_server.socket_path)],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={**cmux_server.env, "CMUX_SURFACE_ID": term["id"]})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("OK surface=surface:") and f"path={plan}" in proc.stdout
    with Client(cmux_server.socket_path) as c:
        listed = c.call("surface.list", {})["surfaces"]
    assert [(s["type"], s.get("path")) for s in listed] == [
        ("terminal", None), ("markdown", str(plan))]
    assert listed[1]["pane_id"] == term["pane_id"]
