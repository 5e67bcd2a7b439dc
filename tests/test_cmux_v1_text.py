"""cmux's plain-text commands on the same socket as the JSON requests, against a real
server: ``ping``, the window and workspace commands with cmux's answer lines, "Unknown
command" for the rest, and JSON lines (even ``true`` or a quoted string) still answered
as JSON. Each text command is followed by a JSON ping, whose reply marks where the text
answer ends."""

from __future__ import annotations

import json

from cmux_v2 import V2
from conftest import Raw

from cmux_core.testing import ServerProcess


class Text(Raw):
    def __init__(self, server: ServerProcess) -> None:
        super().__init__(server.socket_path)

    def __call__(self, command: str) -> list[str]:
        """The answer's lines to one text command."""
        self.send(command.encode() + b'\n{"id":"end","method":"ping"}\n')
        lines = []
        while not (line := self.line_bytes()).startswith(b'{"id":"end"'):
            lines.append(line.decode())
        return lines


def test_ping_unknown_and_json_lines(cmux_server: ServerProcess) -> None:
    text = Text(cmux_server)
    assert text("ping") == ["PONG"]
    assert text("  PING  ") == ["PONG"]
    assert text("auth secret") == ["OK: Authentication not required"]
    assert text("frobnicate now") == [
        "ERROR: Unknown command 'frobnicate'. Use 'help' for available commands."]
    assert "select_workspace" in text("help")[0]
    for literal in ("true", "null", '"a string"', "42"):
        [reply] = text(literal)
        assert json.loads(reply)["error"]["code"] == "invalid_request"
    [reply] = text("{not json")
    assert json.loads(reply)["error"]["code"] == "parse_error"
    text.sock.close()


def test_window_and_workspace_commands(cmux_server: ServerProcess) -> None:
    text = Text(cmux_server)
    with V2(cmux_server.socket_path) as v2:
        first = v2("workspace.current")["workspace_id"]
        window = v2("window.current")["window_id"]
        assert text("current_window") == [window]
        assert text("list_windows") == [
            f"* 0: {window} selected_workspace={first} workspaces=1"]
        assert text("current_workspace") == [first]

        [made] = text("new_workspace build logs")
        assert made.startswith("OK ")
        second = made[3:]
        assert v2("workspace.current")["workspace_id"] == first
        title = v2("workspace.current")["workspace"]["title"]
        assert text("list_workspaces") == [f"* 0: {first} {title}", f"  1: {second} build logs"]

        assert text(f"select_workspace {second}") == ["OK"]
        assert v2("workspace.current")["workspace_id"] == second
        assert text("select_workspace 0") == ["OK"]
        assert text("current_workspace") == [first]

        before = v2("workspace.list")["workspaces"]
        assert text("select_workspace 7") == ["ERROR: Tab not found"]
        assert text("select_workspace workspace:99") == ["ERROR: Tab not found"]
        assert text("select_workspace") == ["ERROR: Usage: select_workspace <id|index>"]
        assert v2("workspace.list")["workspaces"] == before

        assert text(f"close_workspace {second}") == ["OK"]
        assert [w["id"] for w in v2("workspace.list")["workspaces"]] == [first]
    text.sock.close()
