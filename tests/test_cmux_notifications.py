"""cmux v2 notifications and app focus on a real server: what is kept, replaced, read,
opened, listed from terminals, and published as events."""

from __future__ import annotations

import json
import socket
from typing import Any

from cmux_v2 import V2

from cmux_core.testing import ServerProcess, wait_until


def focused(v2: V2) -> dict[str, Any]:
    return dict(v2("system.identify")["focused"])


def titles(v2: V2) -> list[str]:
    return [n["title"] for n in v2("notification.list")["notifications"]]


def test_create_replace_suppress_and_clear(cmux_server: ServerProcess) -> None:
    with V2(cmux_server.socket_path) as v2:
        here = focused(v2)
        made = v2("notification.create", title="first", body="b1")
        assert made["suppressed"] is False and made["surface_id"] == here["surface_id"]
        v2("notification.create", title="second", subtitle="s", body="b2")
        notes = v2("notification.list")["notifications"]
        # A new notification replaces the older ones of the same surface.
        assert len(notes) == 1
        note = notes[0]
        assert (note["title"], note["subtitle"], note["body"]) == ("second", "s", "b2")
        assert note["is_read"] is False and note["surface_id"] == here["surface_id"]
        assert note["workspace_id"] == here["workspace_id"] and note["source"] == "api"

        # While the app is active, the surface in view gets none.
        assert v2("app.focus_override.set", state="active")["override"] is True
        assert v2("notification.create", title="seen")["suppressed"] is True
        assert titles(v2) == ["second"]
        other = v2("surface.split", direction="right")
        v2("notification.create_for_surface", surface_id=other["surface_id"], title="aside")
        assert sorted(titles(v2)) == ["aside", "second"]
        assert v2("app.focus_override.set", state="clear")["override"] is None

        ws2 = v2("workspace.create")
        v2("notification.create_for_target", workspace_id=ws2["workspace_id"],
           surface_id=ws2["surface_id"], title="elsewhere")
        wrong = v2.error("notification.create_for_target", workspace_id=ws2["workspace_id"],
                         surface_id=here["surface_id"], title="x")
        assert wrong.code == "not_found"
        assert v2.error("notification.create").code == "invalid_params"
        by_ws = v2("notification.list", workspace_id=ws2["workspace_id"])["notifications"]
        assert [n["title"] for n in by_ws] == ["elsewhere"]

        # A pane's own CMUX_WORKSPACE_ID / CMUX_SURFACE_ID say where the caller is.
        mine = v2("notification.create_for_caller", workspace_id=ws2["workspace_id"],
                  surface_id=ws2["surface_id"], title="from the pane")
        assert (mine["workspace_id"], mine["surface_id"]) == (ws2["workspace_id"],
                                                               ws2["surface_id"])
        assert mine["window_id"] == here["window_id"] and mine["surface_ref"]
        assert [n["title"] for n in v2("notification.list", workspace_id=ws2["workspace_id"])
                ["notifications"]] == ["from the pane"]
        assert v2("notification.clear", workspace_id=ws2["workspace_id"])["cleared"] == 1
        assert sorted(titles(v2)) == ["aside", "second"]
        # A closed workspace takes its notifications with it.
        v2("notification.create_for_surface", surface_id=ws2["surface_id"], title="gone")
        v2("workspace.close", workspace_id=ws2["workspace_id"])
        assert "gone" not in titles(v2)
        assert v2("notification.clear")["cleared"] == 2
        assert titles(v2) == []


def test_read_dismiss_open_and_jump(cmux_server: ServerProcess) -> None:
    with V2(cmux_server.socket_path) as v2:
        here = focused(v2)
        other = v2("surface.split", direction="right")
        first = v2("notification.create", title="one")["notification_id"]
        second = v2("notification.create_for_surface", surface_id=other["surface_id"],
                    title="two")["notification_id"]

        opened = v2("notification.open", id=second)
        assert opened["surface_id"] == other["surface_id"]
        assert focused(v2)["surface_id"] == other["surface_id"]
        assert v2("debug.flash.count", surface_id=other["surface_id"])["count"] >= 1
        rows = {n["id"]: n for n in v2("notification.list")["notifications"]}
        assert rows[second]["is_read"] is False

        jumped = v2("notification.jump_to_unread")
        assert jumped["id"] == second
        assert v2("notification.mark_read", id=second)["marked"] == 1
        assert v2("notification.jump_to_unread")["surface_id"] == here["surface_id"]
        v2("notification.mark_read", all_read=True)
        assert v2.error("notification.jump_to_unread").code == "not_found"

        assert v2("notification.dismiss", id=first)["dismissed"] == 1
        assert v2.error("notification.dismiss", id=first).code == "not_found"
        assert v2("notification.dismiss", all_read=True)["dismissed"] == 1
        assert v2.error("notification.open").code == "invalid_params"


def test_focus_on_a_surface_with_an_unread_notification_flashes_it(
        cmux_server: ServerProcess) -> None:
    with V2(cmux_server.socket_path) as v2:
        other = v2("surface.split", direction="right")
        v2("notification.create_for_surface", surface_id=other["surface_id"], title="look")
        assert v2("debug.flash.count", surface_id=other["surface_id"])["count"] == 0
        v2("surface.focus", surface_id=other["surface_id"])
        assert v2("debug.flash.count", surface_id=other["surface_id"])["count"] == 1
        assert v2("notification.list")["notifications"][0]["is_read"] is False
        v2("debug.notification.focus", surface_id=other["surface_id"])
        assert v2("debug.flash.count", surface_id=other["surface_id"])["count"] == 2


def test_terminal_notifications_are_listed(cmux_server: ServerProcess) -> None:
    with V2(cmux_server.socket_path) as v2:
        sid = focused(v2)["surface_id"]
        v2("surface.send_text", surface_id=sid,
           text="printf '\\033]777;notify;Build;it passed\\007'\n")
        wait_until(lambda: v2("notification.list")["notifications"])
        note = v2("notification.list")["notifications"][0]
        assert (note["title"], note["body"], note["source"]) == ("Build", "it passed",
                                                                  "terminal")
        assert note["surface_id"] == sid


def test_created_notifications_are_pane_notification_events(
        cmux_server: ServerProcess) -> None:
    sub = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sub.settimeout(20)
    sub.connect(str(cmux_server.socket_path))
    try:
        sub.sendall(json.dumps({"id": "s", "method": "events.subscribe", "params": {
            "subscriptions": [{"type": "pane.notification"}]}}).encode() + b"\n")
        stream = sub.makefile("rb")
        assert json.loads(stream.readline())["ok"] is True
        with V2(cmux_server.socket_path) as v2:
            v2("notification.create", title="hello", body="world")
        event = json.loads(stream.readline())
        assert event["event"] == "pane_notification"
        assert event["data"]["title"] == "hello" and event["data"]["body"] == "world"
    finally:
        sub.close()


def test_app_activity(cmux_server: ServerProcess) -> None:
    with V2(cmux_server.socket_path) as v2:
        # Nothing is active until a client says so: the surface in view still gets one.
        assert v2("notification.create", title="a")["suppressed"] is False
        assert v2("app.simulate_active")["active"] is True
        assert v2("notification.create", title="b")["suppressed"] is True
        assert v2("app.focus_override.set", focused=False)["override"] is False
        assert v2("notification.create", title="c")["suppressed"] is False
        assert v2("debug.app.activate")["active"] is False  # the override still wins
        assert v2.error("app.focus_override.set", state="sometimes").code == "invalid_params"
