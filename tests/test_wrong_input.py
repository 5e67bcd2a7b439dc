"""Wrong input through a real server: every case gets its own clear error and changes nothing.

Clients that leave in the middle of a wait, params of the wrong JSON type, paths the
filesystem refuses (names too long, NUL), env keys no environment keeps, and a state file
that cannot be written because the disk is full.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Api, regex_literal

from cmux_core.testing import ServerProcess, start_server, wait_until

LONG_NAME = "d" * 300
"""One path component over the 255 bytes Linux filesystems allow."""


def state(api: Api) -> tuple[Any, ...]:
    """What a rejected request must leave as it was."""
    return (api("workspace.list")["workspaces"], api("pane.list")["panes"],
            [(p["plugin_id"], p["enabled"], p["status"])
             for p in api("plugin.list")["plugins"]])


def no_failure_logged(server: ServerProcess) -> None:
    log = server.log()
    assert "Traceback" not in log and "ERROR" not in log, log


# -- clients leaving mid-wait -----------------------------------------------------------


WAITS = [
    ("pane.wait_for_output", {"pane_id": "w1:p1", "timeout_ms": 60000,
                              "match": {"type": "substring", "value": "never-printed"}}),
    ("events.wait", {"timeout_ms": 60000, "match_event": {
        "event": "pane_agent_status_changed", "pane_id": "w1:p1", "agent_status": "done"}}),
    ("agent.wait", {"target": "w1:p1", "until": ["done"], "timeout_ms": 60000}),
]


def test_client_leaving_mid_wait_is_silent_and_leaves_nothing(
        cmux_server: ServerProcess, api: Api) -> None:
    api("pane.report_agent", {"pane_id": "w1:p1", "source": "custom:test", "agent": "bot",
                              "state": "working"})
    subscribers = api("server.stats")["subscribers"]
    for method, params in WAITS:
        # Gone while the wait is held, and gone before the server even got to it.
        for settle in (True, False):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(str(cmux_server.socket_path))
            sock.sendall(json.dumps({"id": 1, "method": method, "params": params}).encode()
                         + b"\n")
            if settle:
                wait_until(lambda: api("server.stats")["pending_waits"] == 1,
                           message=f"{method} waiting")
            sock.close()
            wait_until(lambda: api("server.stats")["connections"] == 1,
                       message=f"{method} connection closed")
            stats = api("server.stats")
            assert (stats["pending_waits"], stats["subscribers"]) == (0, subscribers), method
    assert api("agent.get", {"target": "w1:p1"})["agent"]["agent_status"] == "working"
    no_failure_logged(cmux_server)


# -- params of the wrong type -----------------------------------------------------------


WRONG_TYPES = [
    ("pane.read", {"pane_id": "w1:p1", "lines": "5"}, "lines"),
    ("pane.read", {"pane_id": "w1:p1", "lines": 5.0}, "lines"),
    ("pane.read", {"pane_id": "w1:p1", "lines": True}, "lines"),
    ("pane.read", {"pane_id": "w1:p1", "strip_ansi": "true"}, "strip_ansi"),
    ("pane.split", {"focus": 1}, "focus"),
    ("pane.split", {"ratio": "0.5"}, "ratio"),
    ("pane.split", {"ratio": True}, "ratio"),
    ("workspace.create", {"focus": "false"}, "focus"),
    ("server.set_area", {"width": "100", "height": 30}, "width"),
    ("tab.move", {"tab_id": "w1:t1", "insert_index": "0"}, "insert_index"),
    ("pane.resize", {"pane_id": "w1:p1", "direction": "left", "amount": "3"}, "amount"),
    ("pane.report_agent", {"pane_id": "w1:p1", "source": "custom:test", "agent": "bot",
                           "state": "idle", "seq": "3"}, "seq"),
    ("pane.report_metadata", {"pane_id": "w1:p1", "source": "custom:test",
                              "clear_title": 1}, "clear_title"),
    ("pane.wait_for_output", {"pane_id": "w1:p1", "timeout_ms": "100",
                              "match": {"type": "substring", "value": "x"}}, "timeout_ms"),
    ("agent.prompt", {"target": "w1:p1", "text": "x", "wait": {"timeout_ms": "5"}},
     "wait.timeout_ms"),
    ("events.subscribe", {"subscriptions": [{
        "type": "pane.output_matched", "pane_id": "w1:p1", "source": "recent", "lines": "3",
        "match": {"type": "substring", "value": "x"}}]}, "subscriptions[0].lines"),
    ("surface.read_text", {"scrollback": 1}, "scrollback"),
    ("system.tree", {"all_windows": "true"}, "all_windows"),
    ("plugin.link", {"path": "/nonexistent.py", "enabled": "yes"}, "enabled"),
    ("agent.list", {"view": 1}, "view"),
    ("layout.set_split_ratio", {"path": [1], "ratio": 0.5}, "path[0]"),
    ("pane.send_text", {"pane_id": "w1:p1", "text": 5}, "text"),
    ("pane.split", {"command": ["/bin/sh", 5]}, "command[1]"),
    ("workspace.create", {"command": 5}, "command"),
]


@pytest.mark.parametrize(("method", "params", "field"), WRONG_TYPES,
                         ids=[f"{m}-{f}-{json.dumps(p)[-24:]}" for m, p, f in WRONG_TYPES])
def test_a_param_of_the_wrong_type_is_invalid_params_naming_it(
        shared_api: Api, method: str, params: dict[str, Any], field: str) -> None:
    before = state(shared_api)
    error = shared_api.error(method, params)
    assert error["code"] == "invalid_params", error
    assert error["data"] == {"field": field}, error
    assert error["message"].startswith(f"{field}: "), error
    assert state(shared_api) == before


def test_json_integers_still_fill_float_fields(shared_api: Api) -> None:
    pane = shared_api("pane.split", {"direction": "down", "ratio": 1})["pane"]["pane_id"]
    try:
        shared_api("pane.resize", {"pane_id": pane, "direction": "up", "amount": 2})
        assert shared_api("pane.read", {"pane_id": pane, "lines": 3})["read"]["pane_id"] == pane
    finally:
        shared_api("pane.close", {"pane_id": pane})


# -- paths the filesystem refuses ---------------------------------------------------------


@pytest.mark.parametrize(("method", "params", "field", "fragment"), [
    ("pane.split", {"cwd": f"/tmp/{LONG_NAME}"}, "cwd", "File name too long"),
    ("pane.split", {"cwd": "/tmp/a\u0000b"}, "cwd", "NUL"),
    ("pane.split", {"location": f"/tmp/{LONG_NAME}/x"}, "cwd", "File name too long"),
    ("workspace.create", {"cwd": f"/tmp/{LONG_NAME}"}, "cwd", "File name too long"),
    ("workspace.create", {"working_directory": f"/tmp/{LONG_NAME}"}, "working_directory",
     "File name too long"),
    ("tab.create", {"cwd": f"/tmp/{LONG_NAME}"}, "cwd", "File name too long"),
    ("pane.split", {"cwd": sys.executable}, "cwd", "not a directory"),
    ("plugin.link", {"path": "/tmp/plugin\u0000.py"}, "path", "NUL"),
    ("plugin.link", {"path": f"/tmp/{LONG_NAME}.py"}, "path", "File name too long"),
    ("plugin.link", {"path": f"/tmp/{LONG_NAME}"}, "path", "File name too long"),
    ("pane.split", {"command": ["/bin/sh", "-c", "echo a\u0000b"]}, "command[2]", "NUL"),
    ("workspace.create", {"command": "echo a\u0000b"}, "command", "NUL"),
])
def test_a_path_the_filesystem_refuses_is_invalid_params_naming_it(
        shared_server: ServerProcess, shared_api: Api, method: str, params: dict[str, Any],
        field: str, fragment: str) -> None:
    before = state(shared_api)
    error = shared_api.error(method, params)
    assert error["code"] == "invalid_params", error
    assert error["data"] == {"field": field} and fragment in error["message"], error
    assert state(shared_api) == before
    no_failure_logged(shared_server)


def test_a_program_that_cannot_be_started_is_a_spawn_error_not_internal(
        shared_server: ServerProcess, shared_api: Api) -> None:
    # layout.apply hands its leaves' commands to the spawn unchecked; the spawn refuses.
    before = state(shared_api)
    error = shared_api.error("layout.apply", {"root": {
        "type": "pane", "command": ["/bin/sh", "-c", "echo a\u0000b"]}})
    assert error["code"] == "layout_apply_failed", error
    assert "argv[2] must not contain NUL" in error["message"], error
    assert state(shared_api) == before
    no_failure_logged(shared_server)


# -- env keys ------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["\n", "A B", "A\tB", "\u001b[0m", "A-B", "1A", "É", " A"])
def test_an_env_key_no_environment_keeps_is_invalid_env_naming_it(
        shared_api: Api, key: str) -> None:
    before = state(shared_api)
    for method in ("pane.split", "workspace.create", "tab.create"):
        error = shared_api.error(method, {"env": {"GOOD": "1", key: "x"}})
        assert error["code"] == "invalid_env", error
        assert repr(key) in error["message"], error
    error = shared_api.error("agent.start", {"name": "envbot", "argv": ["cat"],
                                              "env": {key: "x"}})
    assert error["code"] == "invalid_env" and repr(key) in error["message"], error
    error = shared_api.error("layout.apply", {"root": {"type": "pane", "env": {key: "x"}}})
    assert error["code"] == "invalid_env" and repr(key) in error["message"], error
    assert error["data"] == {"path": "root"}, error
    assert state(shared_api) == before


@pytest.mark.parametrize("method", ["pane.read", "pane.wait_for_output"])
def test_a_negative_line_count_is_invalid_params(shared_api: Api, method: str) -> None:
    params: dict[str, Any] = {"pane_id": "w1:p1", "lines": -5, "timeout_ms": 0,
                              "match": {"type": "substring", "value": "x"}}
    error = shared_api.error(method, params)
    assert error["code"] == "invalid_params" and error["data"] == {"field": "lines"}, error


def test_a_layout_leaf_cwd_the_filesystem_refuses_is_a_layout_error(
        shared_server: ServerProcess, shared_api: Api) -> None:
    before = state(shared_api)
    error = shared_api.error("layout.apply", {"root": {"type": "pane",
                                                       "cwd": f"/tmp/{LONG_NAME}"}})
    assert error["code"] == "layout_apply_failed", error
    assert "File name too long" in error["message"], error
    assert state(shared_api) == before
    no_failure_logged(shared_server)


def test_env_names_a_shell_keeps_reach_the_program(shared_api: Api) -> None:
    script = "import os;print('|'.join(os.environ[k] for k in ['_a','Ab_9','lower']))"
    pane = shared_api.run([sys.executable, "-c", script + ";input()"],
                          env={"_a": "1", "Ab_9": "2", "lower": "3"})
    try:
        shared_api.wait_line(pane, regex_literal("1|2|3"))
    finally:
        shared_api("pane.close", {"pane_id": pane})


# -- a full disk ---------------------------------------------------------------------------


@pytest.fixture
def full_disk() -> Iterator[tuple[Path, Path]]:
    """A 64 KiB tmpfs (needs root and mount rights) and a file that fills it when called."""
    mount = Path(tempfile.mkdtemp(prefix="cmux-full-"))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        mount.rmdir()
        pytest.skip(f"cannot mount a small tmpfs to fill: {done.stderr.strip()}")
    try:
        yield mount, mount / "filler"
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
        mount.rmdir()


def fill(filler: Path) -> None:
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == 28, exc
    finally:
        os.close(fd)


def test_a_state_file_the_full_disk_refuses_is_its_own_error(
        full_disk: tuple[Path, Path], tmp_path: Path) -> None:
    mount, filler = full_disk
    plugin = tmp_path / "diskcheck.py"
    plugin.write_text("VALUE = 1\n")
    server = start_server(env={"XDG_STATE_HOME": str(mount)})
    try:
        api = Api(server)
        api("plugin.link", {"path": str(plugin)})
        state_file = mount / "cmux" / "plugins.json"
        saved = state_file.read_text()
        fill(filler)
        error = api.error("plugin.disable", {"plugin_id": "diskcheck"})
        assert error["code"] == "plugin_state_save_failed", error
        assert error["data"] == {"path": str(state_file), "errno": "ENOSPC"}, error
        assert "No space left on device" in error["message"], error
        assert state_file.read_text() == saved
        # No half-written copy is left (the session file and its lock are another file's).
        assert sorted(p.name for p in state_file.parent.iterdir()
                      if "plugins" in p.name) == ["plugins.json"]
        # A choice that cannot be saved is not made: the plugin stays enabled and loaded.
        [listed] = [p for p in api("plugin.list")["plugins"] if p["plugin_id"] == "diskcheck"]
        assert (listed["enabled"], listed["status"]) == (True, "loaded"), listed
        assert api.error("plugin.unlink", {"plugin_id": "diskcheck"})["code"] == \
            "plugin_state_save_failed"
        assert [p["plugin_id"] for p in api("plugin.list")["plugins"]
                if p["plugin_id"] == "diskcheck"] == ["diskcheck"]
        filler.unlink()
        assert api("plugin.disable", {"plugin_id": "diskcheck"})["type"] == "plugin_disabled"
        assert json.loads(state_file.read_text())["disabled"] == ["diskcheck"]
        api.close()
        no_failure_logged(server)
    finally:
        server.stop()
