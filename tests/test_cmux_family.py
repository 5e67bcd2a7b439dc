"""The cmux v2 method family on the same socket: handles, refs and result shapes."""

from __future__ import annotations

import re

from conftest import Raw

from cmux_core.testing import wait_until

UUID = re.compile(r"^[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}$")


class V2:
    """Speaks like the cmux v2 clients: jsonrpc 2.0, integer ids, reads ``ok``."""

    def __init__(self, raw: Raw) -> None:
        self.raw = raw
        self.next_id = 0

    def __call__(self, method: str, **params: object) -> dict[str, object]:
        import json

        self.next_id += 1
        self.raw.send(json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                                  "params": params}).encode() + b"\n")
        reply = self.raw.line()
        assert reply["id"] == self.next_id
        if not reply["ok"]:
            raise AssertionError(f"{reply['error']['code']}: {reply['error']['message']}")
        return dict(reply["result"])


def test_system_methods(shared_raw: Raw) -> None:
    raw = shared_raw
    v2 = V2(raw)
    assert v2("system.ping")["pong"] is True
    caps = v2("system.capabilities")
    assert caps["protocol"] == "cmux-socket" and caps["version"] == 2
    assert "surface.send_text" in caps["methods"]  # type: ignore[operator]
    ident = v2("system.identify")
    focused = ident["focused"]
    assert isinstance(focused, dict)
    assert UUID.match(focused["workspace_id"]) and focused["surface_ref"] == "surface:1"
    assert focused["pane_ref"] == "pane:1" and focused["window_ref"] == "window:1"
    tree = v2("system.tree")
    windows = tree["windows"]
    assert isinstance(windows, list) and len(windows) == 1
    ws = windows[0]["workspaces"][0]
    assert ws["selected"] is True and ws["panes"][0]["surface_count"] == 1
    assert v2("auth.login", password="x") == {"type": "auth", "authenticated": True,
                                                "required": False}


def test_window_methods(shared_raw: Raw) -> None:
    raw = shared_raw
    v2 = V2(raw)
    windows = v2("window.list")["windows"]
    assert isinstance(windows, list)
    assert windows[0]["key"] is True and windows[0]["ref"] == "window:1"
    current = v2("window.current")
    assert current["window_id"] == windows[0]["id"]


def test_workspace_create_with_cmux_params_and_refs(raw: Raw) -> None:
    v2 = V2(raw)
    created = v2("workspace.create", title="build", working_directory="/tmp",
                 initial_command="echo from-initial-command; exec cat")
    assert UUID.match(str(created["workspace_id"])) and created["workspace_ref"] == "workspace:2"
    listed = v2("workspace.list")["workspaces"]
    assert isinstance(listed, list)
    assert [w["title"] for w in listed] == [listed[0]["title"], "build"]
    assert [w["selected"] for w in listed] == [True, False]  # creation keeps the selection
    surface = str(created["surface_ref"])
    wait_until(lambda: "from-initial-command" in str(
        v2("surface.read_text", surface_id=surface)["text"]), 30)
    # Any handle form addresses the same workspace.
    for handle in (created["workspace_id"], created["workspace_ref"], "w2", "2"):
        assert v2("workspace.select", workspace_id=handle)["workspace_ref"] == "workspace:2"
    assert v2("workspace.current")["workspace_ref"] == "workspace:2"


def test_surface_send_and_read(raw: Raw) -> None:
    v2 = V2(raw)
    surfaces = v2("surface.list")["surfaces"]
    assert isinstance(surfaces, list) and surfaces[0]["type"] == "terminal"
    sid = surfaces[0]["id"]
    v2("surface.send_text", surface_id=sid, text="echo cmux-v2-$((6*7))")
    v2("surface.send_key", surface_id=sid, key="enter")
    wait_until(lambda: "cmux-v2-42" in str(v2("surface.read_text", surface_id=sid)["text"]), 30)
    read = v2("surface.read_text", surface_id=sid, lines=5)
    assert "base64" in read and read["surface_ref"] == "surface:1"
    current = v2("surface.current")
    assert current["surface_id"] == sid


def test_unknown_send_key_is_invalid_params(shared_raw: Raw) -> None:
    raw = shared_raw
    import json

    raw.send(json.dumps({"id": 1, "method": "surface.send_key",
                         "params": {"key": "hyperdrive"}}).encode() + b"\n")
    error = raw.line()["error"]
    assert error["code"] == "invalid_params" and error["data"] == {"key": "hyperdrive"}
