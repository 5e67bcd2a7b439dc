"""What else a restart brings back: the old ids of moved panes, metadata tokens,
notifications and unread flags, the env of surfaces built from cmux layout trees and the
titles programs set. Real servers are stopped and started again on one socket and state
directory, as in ``test_persistence.py``.
"""

from __future__ import annotations

import json
import shutil
import signal
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cmux_core.config import session_file
from cmux_core.testing import ServerProcess, start_server, wait_until


@dataclass
class Place:
    """One socket and state directory that successive servers share."""

    socket: Path
    state: Path

    @property
    def file(self) -> Path:
        return session_file(self.socket, self.state / "cmux")

    def start(self) -> ServerProcess:
        return start_server(["--socket", str(self.socket)],
                            env={"XDG_STATE_HOME": str(self.state)})


@pytest.fixture
def place(tmp_path: Path) -> Iterator[Place]:
    socket_dir = Path(tempfile.mkdtemp(prefix="cmux-r-", dir=tempfile.gettempdir()))
    try:
        yield Place(socket_dir / "s.sock", tmp_path / "state")
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)


def text(server: ServerProcess, pane_id: str) -> str:
    return str(server.call("pane.read", {"pane_id": pane_id, "source": "recent",
                                         "lines": 100})["read"]["text"])


def surfaces(server: ServerProcess, pane_id: str) -> list[dict[str, Any]]:
    return list(server.call("pane.surfaces", {"pane_id": pane_id})["surfaces"])


def shows(server: ServerProcess, surface_id: str, line: str) -> bool:
    read = server.call("surface.read_text", {"surface_id": surface_id})
    return line in str(read["text"])


def test_layout_surfaces_keep_their_env(place: Place) -> None:
    first = place.start()
    layout = {"pane": {"surfaces": [
        {"type": "terminal", "name": "one", "env": {"RESTORE_MARK": "first"}},
        {"type": "terminal", "name": "two", "env": {"RESTORE_MARK": "second"}}]}}
    created = first.call("workspace.create", {"layout": layout, "title": "laid out"})
    pane_id = created["pane_id"]
    before = [s["id"] for s in surfaces(first, pane_id)]
    # Every surface's shell is told its own surface id.
    first.call("surface.send_text", {"surface_id": before[1],
                                     "text": "echo id-$CMUX_SURFACE_ID-end\r"})
    wait_until(lambda: shows(first, before[1], f"id-{before[1]}-end"), 30,
               message="CMUX_SURFACE_ID")
    assert first.stop() == 0

    second = place.start()
    after = [s["id"] for s in surfaces(second, pane_id)]
    assert after == before
    for surface_id, mark in zip(after, ("first", "second"), strict=True):
        # The typed line shows the variable's name; only the shell's output holds its value.
        second.call("surface.send_text", {"surface_id": surface_id,
                                          "text": "echo got-$RESTORE_MARK-end\r"})
        wait_until(lambda s=surface_id, m=mark: shows(second, s, f"got-{m}-end"), 30,
                   message=f"{mark} surface's env")


def layout_of(server: ServerProcess) -> dict[str, Any]:
    """Every pane's id, UUID, ref and surfaces (UUID, ref), and the windows' workspaces."""
    panes = {p["pane_id"]: (p["uuid"], p["ref"],
                            [(s["id"], s["ref"]) for s in surfaces(server, p["pane_id"])])
             for p in server.call("pane.list")["panes"]}
    windows = [(w["ref"], w["workspace_count"], w["selected_workspace_ref"])
               for w in server.call("window.list")["windows"]]
    return {"panes": panes, "windows": windows}


def test_moved_panes_keep_their_ids_and_old_ids_after_a_restart(place: Place) -> None:
    first = place.start()
    call = first.call
    call("pane.split", {"pane_id": "w1:p1", "direction": "right"})  # w1:p2
    call("workspace.create", {"label": "two"})  # w2
    moved = call("pane.move", {"pane_id": "w1:p2", "destination": {
        "type": "new_tab", "workspace_id": "w2"}})["move_result"]["pane"]
    assert moved["pane_id"] == "w2:p2"
    # A surface moved into another pane, broken out into a workspace (w3) and joined back.
    extra = call("surface.create", {"pane_id": "w1:p1"})["surface_id"]
    call("surface.move", {"surface_id": extra, "pane_id": "w2:p1"})
    broken = call("pane.break", {"surface_id": extra})
    third = call("surface.create", {"pane_id": "w1:p1"})["surface_id"]
    call("pane.join", {"surface_id": third, "target_pane_id": "w2:p1"})
    # A workspace moved to another window (made with its own workspace, w4).
    call("window.create", {})
    window_2 = call("window.list")["windows"][1]["id"]
    call("workspace.move_to_window", {"workspace_id": "w2", "window_id": window_2})
    # The last workspace (w5) closes when its one pane moves out.
    call("workspace.create", {"label": "five"})
    emptied = call("pane.move", {"pane_id": "w5:p1", "destination": {
        "type": "tab", "tab_id": "w1:t1", "split": "down"}})["move_result"]
    assert emptied["closed_workspace_id"] == "w5"
    from_w5 = emptied["pane"]["pane_id"]
    # The last pane made is closed: its ref is never handed out again.
    closed = call("pane.split", {"pane_id": "w1:p1", "direction": "down"})["pane"]
    call("pane.close", {"pane_id": closed["pane_id"]})
    before = layout_of(first)
    old_ids = {"w1:p2": moved["uuid"], "w5:p1": emptied["pane"]["uuid"]}
    assert {old: call("pane.get", {"pane_id": old})["pane"]["uuid"]
            for old in old_ids} == old_ids
    assert first.stop() == 0

    second = place.start()
    assert layout_of(second) == before
    assert broken["pane_ref"] in {ref for _, ref, _ in before["panes"].values()}
    # The old ids still name the moved panes.
    assert {old: second.call("pane.get", {"pane_id": old})["pane"]["uuid"]
            for old in old_ids} == old_ids
    # No id or ref is handed out twice: not w5, not the closed pane's ref.
    fresh = second.call("workspace.create", {"label": "six"})
    assert fresh["workspace"]["workspace_id"] == "w6"
    split = second.call("pane.split", {"pane_id": "w1:p1", "direction": "down"})["pane"]
    assert int(split["ref"].split(":")[1]) > int(closed["ref"].split(":")[1])
    assert second.call("pane.get", {"pane_id": "w5:p1"})["pane"]["pane_id"] == from_w5


def tokens(server: ServerProcess, pane_id: str) -> dict[str, str]:
    return dict(server.call("pane.get", {"pane_id": pane_id})["pane"].get("tokens", {}))


def workspace_tokens(server: ServerProcess, ws_id: str) -> dict[str, str]:
    found = server.call("workspace.get", {"workspace_id": ws_id})["workspace"]
    return dict(found.get("tokens", {}))


def test_metadata_tokens_come_back_but_not_the_running_tool(place: Place) -> None:
    first = place.start()
    call = first.call
    # What an agent's hooks report mid-turn, and a token of another client's.
    call("pane.report_metadata", {"pane_id": "w1:p1", "source": "test:hooks", "seq": 1,
                                  "tokens": {"prompt": "fix the bug", "model": "m-1",
                                             "tool": "Bash", "tool_input": "make test"}})
    call("pane.report_metadata", {"pane_id": "w1:p1", "source": "test:ci",
                                  "tokens": {"branch": "main"}})
    # One that lasts a while, one that is gone before the stop.
    call("pane.report_metadata", {"pane_id": "w1:p1", "source": "test:ci",
                                  "tokens": {"eta": "soon"}, "ttl_ms": 25_000})
    call("pane.report_metadata", {"pane_id": "w1:p1", "source": "test:ci",
                                  "tokens": {"blink": "x"}, "ttl_ms": 50})
    call("workspace.report_metadata", {"workspace_id": "w1", "source": "test:ci",
                                       "tokens": {"project": "alpha"}})
    wait_until(lambda: "blink" not in tokens(first, "w1:p1"), message="a token's expiry")
    assert first.stop() == 0

    second = place.start()
    assert tokens(second, "w1:p1") == {"prompt": "fix the bug", "model": "m-1",
                                       "branch": "main", "eta": "soon"}
    assert workspace_tokens(second, "w1") == {"project": "alpha"}
    # The expiring token keeps its deadline across the restart.
    wait_until(lambda: "eta" not in tokens(second, "w1:p1"), 60, message="eta's expiry")
    # Sequence numbers start afresh: a hook's next report is taken.
    second.call("pane.report_metadata", {"pane_id": "w1:p1", "source": "test:hooks",
                                         "seq": 1, "tokens": {"tool": "Read"}})
    assert tokens(second, "w1:p1")["tool"] == "Read"


def notes(server: ServerProcess) -> list[dict[str, Any]]:
    return list(server.call("notification.list")["notifications"])


def unread_flags(server: ServerProcess) -> dict[str, bool]:
    return {s["id"]: s["unread"] for s in server.call("surface.list")["surfaces"]}


def test_notifications_and_unread_flags_come_back(place: Place) -> None:
    first = place.start()
    call = first.call
    right = call("pane.split", {"pane_id": "w1:p1", "direction": "right"})["pane"]
    right_surface = surfaces(first, right["pane_id"])[0]["id"]
    left_surface = surfaces(first, "w1:p1")[0]["id"]
    read = call("notification.create_for_surface", {
        "surface_id": left_surface, "title": "Build", "body": "done"})["notification_id"]
    call("notification.create_for_surface", {"surface_id": right_surface, "title": "Tests",
                                             "subtitle": "unit", "body": "3 failed"})
    call("notification.mark_read", {"notification_id": read})
    # A program's own notification (OSC 9), and a surface marked unread by hand.
    call("workspace.create", {"label": "other"})
    call("pane.send_text", {"pane_id": "w2:p1",
                            "text": "printf '\\033]9;%s\\007' from-the-program\r"})
    wait_until(lambda: any(n["title"] == "from-the-program" for n in notes(first)), 30,
               message="the terminal notification")
    call("surface.action", {"surface_id": right_surface, "action": "mark_unread"})
    before_notes, before_flags = notes(first), unread_flags(first)
    assert [n["is_read"] for n in before_notes] == [True, False, False]
    assert before_flags[right_surface] is True and before_flags[left_surface] is False
    assert first.stop() == 0

    second = place.start()
    assert notes(second) == before_notes
    assert unread_flags(second) == before_flags
    jumped = second.call("notification.jump_to_unread")
    assert jumped["surface_id"] in {n["surface_id"] for n in before_notes[1:]}


def titles(server: ServerProcess) -> dict[str, str]:
    return {s["id"]: s["title"] for s in server.call("surface.list")["surfaces"]}


def set_title(server: ServerProcess, pane_id: str, title: str) -> None:
    """The pane's shell sets its terminal's title with OSC 0 (OSC 2 where ``title`` says)."""
    code = 2 if "two" in title else 0
    server.call("pane.send_text", {"pane_id": pane_id,
                                   "text": f"printf '\\033]{code};%s\\007' {title}\r"})


def test_titles_programs_set_come_back(place: Place) -> None:
    first = place.start()
    right = first.call("pane.split", {"pane_id": "w1:p1", "direction": "right"})["pane"]
    left_surface = surfaces(first, "w1:p1")[0]["id"]
    right_surface = surfaces(first, right["pane_id"])[0]["id"]
    set_title(first, "w1:p1", "title-by-osc-zero")
    set_title(first, right["pane_id"], "title-by-osc-two")
    wait_until(lambda: titles(first) == {left_surface: "title-by-osc-zero",
                                         right_surface: "title-by-osc-two"}, 30,
               message="the programs' titles")
    assert first.stop() == 0

    second = place.start()
    assert titles(second) == {left_surface: "title-by-osc-zero",
                              right_surface: "title-by-osc-two"}
    # It is the terminal's own title again, which its new program may change.
    set_title(second, "w1:p1", "a-later-title")
    wait_until(lambda: titles(second)[left_surface] == "a-later-title", 30,
               message="the new program's title")


def test_a_restored_session_with_expiring_tokens_is_not_rewritten_unchanged(
        place: Place) -> None:
    first = place.start()
    first.call("pane.report_metadata", {"pane_id": "w1:p1", "source": "test:ci",
                                        "tokens": {"eta": "later"}, "ttl_ms": 600_000})
    first.call("notification.create", {"title": "kept"})
    assert first.stop() == 0
    written = place.file.stat().st_mtime_ns
    second = place.start()
    assert tokens(second, "w1:p1") == {"eta": "later"}
    second.call("pane.list")
    assert second.stop() == 0
    assert place.file.stat().st_mtime_ns == written


def test_a_workspaces_proposed_title_and_last_prompt_come_back(place: Place) -> None:
    first = place.start()
    first.call("workspace.set_auto_title", {"workspace_id": "w1", "title": "Fixing login"})
    first.call("workspace.prompt_submit", {"workspace_id": "w1", "message": "fix the login"})
    keys = ("title", "latest_submitted_message", "latest_submitted_at")
    row = first.call("workspace.get", {"workspace_id": "w1"})["workspace"]
    before = {k: row[k] for k in keys}
    assert before["title"] == "Fixing login"
    assert first.stop() == 0

    second = place.start()
    row = second.call("workspace.get", {"workspace_id": "w1"})["workspace"]
    assert {k: row[k] for k in keys} == before


def strip_version_2(node: Any) -> Any:
    """``node`` without the keys version 2 added, as a version 1 server wrote it."""
    added = {"aliases", "tokens", "terminal_title", "unread", "requested_command",
             "auto_title", "last_prompt", "last_prompt_at", "next_workspace_number", "refs",
             "notifications", "path"}
    if isinstance(node, dict):
        return {k: strip_version_2(v) for k, v in node.items() if k not in added}
    if isinstance(node, list):
        return [strip_version_2(v) for v in node]
    return node


def test_a_version_1_file_is_restored_and_saved_again_as_version_2(place: Place) -> None:
    first = place.start()
    first.call("pane.split", {"pane_id": "w1:p1", "direction": "right", "ratio": 0.25})
    first.call("workspace.rename", {"workspace_id": "w1", "label": "from version 1"})
    before = layout_of(first)
    assert first.stop() == 0
    old = strip_version_2({**json.loads(place.file.read_text()), "version": 1})
    place.file.write_text(json.dumps(old))

    second = place.start()
    assert layout_of(second) == before
    label = second.call("workspace.get", {"workspace_id": "w1"})["workspace"]["label"]
    assert label == "from version 1"
    second.call("pane.rename", {"pane_id": "w1:p2", "label": "now saved"})
    wait_until(lambda: json.loads(place.file.read_text())["version"] == 2, 30,
               message="the file saved as version 2")
    assert second.stop() == 0
    assert list(place.file.parent.glob("*.corrupt-*")) == []


def test_a_killed_server_keeps_what_programs_and_clients_reported(place: Place) -> None:
    first = place.start()
    first.call("pane.report_metadata", {"pane_id": "w1:p1", "source": "test:ci",
                                        "tokens": {"branch": "main"}})
    first.call("pane.send_text", {"pane_id": "w1:p1", "text":
                                  "printf '\\033]2;%s\\007\\033]9;%s\\007' killed-title "
                                  "killed-note\r"})

    def saved() -> bool:
        content = place.file.read_text() if place.file.exists() else ""
        return all(word in content for word in ("branch", "killed-title", "killed-note"))

    # Saved within a moment of the report and of the program's output, with no stop.
    wait_until(saved, 30, message="the reports in the session file")
    first.process.send_signal(signal.SIGKILL)
    first.process.wait(10)
    first.stop()

    second = place.start()
    assert tokens(second, "w1:p1") == {"branch": "main"}
    assert [n["title"] for n in notes(second)] == ["killed-note"]
    assert "killed-title" in titles(second).values()
