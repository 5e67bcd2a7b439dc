"""The ``cmux`` command run as a real subprocess against a real server."""

from __future__ import annotations

import argparse
import ast
import json
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cmux_core.cli.commands import COMMANDS
from cmux_core.cli.main import build_parser
from cmux_core.testing import ServerProcess, wait_until


def cmux(server: ServerProcess, *args: str, stdin: str | None = None,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``cmux ARGS --socket S`` (the socket goes before a ``--`` argv)."""
    argv = list(args)
    at = argv.index("--") if "--" in argv else len(argv)
    argv[at:at] = ["--socket", str(server.socket_path)]
    return subprocess.run([sys.executable, "-m", "cmux_core", *argv], input=stdin,
                          capture_output=True, text=True, timeout=30,
                          env={**server.env, **(env or {})})


def ok(server: ServerProcess, *args: str, stdin: str | None = None,
       env: dict[str, str] | None = None) -> str:
    proc = cmux(server, *args, stdin=stdin, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    return proc.stdout


def table(text: str) -> list[dict[str, str]]:
    """Parse an aligned table by its header's column offsets (cells may be blank)."""
    header, *lines = text.splitlines()
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    names = header.split()
    bounds = [*starts[1:], None]
    return [{name: line[a:b].strip() for name, a, b in zip(names, starts, bounds, strict=True)}
            for line in lines]


def test_ping(shared_server: ServerProcess) -> None:
    assert re.fullmatch(r"pong: cmux \S+ \(protocol \d+\)\n", ok(shared_server, "ping"))


def test_call_prints_the_result_as_json(cmux_server: ServerProcess) -> None:
    result = json.loads(ok(cmux_server, "call", "workspace.list"))
    assert [w["workspace_id"] for w in result["workspaces"]] == ["w1"]


def test_call_reads_params_from_stdin(cmux_server: ServerProcess) -> None:
    out = ok(cmux_server, "call", "workspace.create", "-", stdin='{"label": "from-stdin"}')
    created = json.loads(out)["workspace"]
    listed = cmux_server.call("workspace.list")["workspaces"]
    assert [w["label"] for w in listed if w["workspace_id"] == created["workspace_id"]] == [
        "from-stdin"]


@pytest.mark.parametrize(("args", "code"), [
    (("pane", "get", "nope"), "pane_not_found"),
    (("workspace", "focus", "w9"), "workspace_not_found"),
    (("call", "workspace.list", "{not json"), "invalid_params"),
    (("call", "no.such.method"), "method_not_found"),
])
def test_errors_exit_non_zero_with_code_and_message(shared_server: ServerProcess,
                                                   args: tuple[str, ...], code: str) -> None:
    proc = cmux(shared_server, *args)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert re.fullmatch(rf"{code}: .+\n", proc.stderr), proc.stderr


def test_workspace_create_then_list(cmux_server: ServerProcess) -> None:
    new_id = ok(cmux_server, "workspace", "create", "--label", "build").strip()
    rows = table(ok(cmux_server, "workspace", "list"))
    assert [(r["ID"], r["LABEL"], r["TABS"], r["PANES"]) for r in rows] == [
        ("w1", rows[0]["LABEL"], "1", "1"), (new_id, "build", "1", "1")]
    assert [r["FOCUSED"] for r in rows] == ["*", ""]
    ok(cmux_server, "workspace", "rename", new_id, "renamed")
    assert ok(cmux_server, "workspace", "get", new_id).count("renamed") >= 1
    ok(cmux_server, "workspace", "close", new_id)
    assert [r["ID"] for r in table(ok(cmux_server, "workspace", "list"))] == ["w1"]


def test_pane_split_and_list_table(cmux_server: ServerProcess) -> None:
    new_id = ok(cmux_server, "pane", "split", "--direction", "down").strip()
    rows = table(ok(cmux_server, "pane", "list"))
    assert list(rows[0]) == ["PANE", "WORKSPACE", "TAB", "FOCUSED", "SIZE", "PID", "CWD",
                             "TITLE"]
    assert [(r["PANE"], r["WORKSPACE"], r["TAB"], r["FOCUSED"]) for r in rows] == [
        ("w1:p1", "w1", "w1:t1", "*"), (new_id, "w1", "w1:t1", "")]
    sizes = [tuple(map(int, r["SIZE"].split("x"))) for r in rows]
    assert all(cols == 80 for cols, _ in sizes)
    assert all(0 < rows_ < 24 for _, rows_ in sizes)
    assert all(r["PID"].isdigit() for r in rows)
    listed = json.loads(ok(cmux_server, "pane", "list", "--json"))["panes"]
    assert [p["pane_id"] for p in listed] == ["w1:p1", new_id]


def test_tab_commands(cmux_server: ServerProcess) -> None:
    tab_id = ok(cmux_server, "tab", "create", "--label", "logs", "--focus").strip()
    rows = table(ok(cmux_server, "tab", "list", "--workspace", "w1"))
    assert [(r["TAB"], r["LABEL"], r["FOCUSED"]) for r in rows] == [
        ("w1:t1", rows[0]["LABEL"], ""), (tab_id, "logs", "*")]
    ok(cmux_server, "tab", "close", tab_id)
    assert [r["TAB"] for r in table(ok(cmux_server, "tab", "list"))] == ["w1:t1"]


def test_send_text_wait_and_read(cmux_server: ServerProcess) -> None:
    # The typed line reads hel''lo-cli, so only the command's output matches hello-cli.
    ok(cmux_server, "pane", "send-text", "w1:p1", "echo hel''lo-cli", "--enter")
    assert ok(cmux_server, "pane", "wait", "w1:p1", "hello-cli", "--timeout", "30") == (
        "hello-cli\n")
    # recent counts rows before dropping the blank tail, so ask for more than the 24 rows.
    text = ok(cmux_server, "pane", "read", "w1:p1", "--source", "recent", "--lines", "30")
    assert "hello-cli" in text.splitlines()
    ok(cmux_server, "pane", "send-text", "w1:p1", "-", "--enter", stdin="echo std''in-ok")
    assert ok(cmux_server, "pane", "wait", "w1:p1", r"^std\w+-ok$", "--regex",
              "--timeout", "30") == "stdin-ok\n"
    ok(cmux_server, "pane", "send-input", "w1:p1", "echo in''put-ok", "--enter")
    ok(cmux_server, "pane", "wait", "w1:p1", "input-ok", "--timeout", "30")
    assert "hello-cli" in ok(cmux_server, "pane", "read").splitlines()


def test_omitted_pane_is_the_callers_then_the_focused_one(cmux_server: ServerProcess) -> None:
    new_id = ok(cmux_server, "pane", "split").strip()
    assert new_id != "w1:p1"
    assert json.loads(ok(cmux_server, "pane", "get", "--json"))["pane"]["pane_id"] == "w1:p1"
    inside = {"CMUX_PANE_ID": new_id}
    for command in (("pane", "get"), ("pane", "current")):
        shown = json.loads(ok(cmux_server, *command, "--json", env=inside))
        assert shown["pane"]["pane_id"] == new_id
    third = ok(cmux_server, "pane", "split", "--direction", "down", env=inside).strip()
    layout = cmux_server.call("session.snapshot")["snapshot"]["layouts"][0]["panes"]
    rects = {p["pane_id"]: p["rect"] for p in layout}
    assert rects[third]["x"] == rects[new_id]["x"]
    assert rects[third]["y"] > rects[new_id]["y"]


def test_wait_timeout_exits_non_zero(shared_server: ServerProcess) -> None:
    proc = cmux(shared_server, "pane", "wait", "w1:p1", "never-printed", "--timeout", "0.2")
    assert proc.returncode == 124
    assert proc.stderr.startswith("timeout: ")


def test_split_runs_argv_with_env(cmux_server: ServerProcess) -> None:
    new_id = ok(cmux_server, "pane", "split", "--pane", "w1:p1", "--env", "GREETING=hi",
                "--ratio", "0.3", "--", "/bin/sh", "-c", 'echo "$GREETING-there"; exec cat'
                ).strip()
    assert ok(cmux_server, "pane", "wait", new_id, "hi-there", "--timeout", "30") == (
        "hi-there\n")

    def foreground() -> list[str]:
        info = json.loads(ok(cmux_server, "pane", "process-info", new_id, "--json"))
        return [p["name"] for p in info["process_info"]["foreground_processes"]]

    # The shell execs cat just after its echo: the first look may still find the shell.
    wait_until(lambda: "cat" in foreground(), timeout=30, message="cat in the foreground")


def test_json_output_parses_everywhere(cmux_server: ServerProcess) -> None:
    commands = [("workspace", "list"), ("workspace", "get", "w1"), ("tab", "list"),
                ("tab", "get", "w1:t1"), ("pane", "list"), ("pane", "get", "w1:p1"),
                ("pane", "current"), ("pane", "read", "w1:p1"), ("window", "list"),
                ("window", "current"), ("tree",), ("capabilities",), ("session", "snapshot")]
    results: dict[str, Any] = {" ".join(c): json.loads(ok(cmux_server, *c, "--json"))
                               for c in commands}
    assert results["pane current"]["pane"]["pane_id"] == "w1:p1"
    assert "pane.split" in results["capabilities"]["methods"]
    assert results["session snapshot"]["snapshot"]["focused_pane_id"] == "w1:p1"


def test_human_views(cmux_server: ServerProcess) -> None:
    assert "pane.wait_for_output" in ok(cmux_server, "capabilities").splitlines()
    assert "w1:p1" in ok(cmux_server, "tree")
    assert "w1:p1" in ok(cmux_server, "session", "snapshot")
    assert table(ok(cmux_server, "window", "list"))[0]["WINDOW"] == "window:1"
    assert ok(cmux_server, "pane", "current").splitlines()[0].startswith("pane_id")
    assert ok(cmux_server, "server", "set-area", "100x30") == "100x30\n"
    assert table(ok(cmux_server, "pane", "list"))[0]["SIZE"] == "100x30"


def test_server_stop(cmux_server: ServerProcess) -> None:
    assert ok(cmux_server, "server", "stop") == ""
    wait_until(lambda: cmux_server.process.poll() is not None, timeout=30,
               message="the server to exit")
    assert cmux_server.process.returncode == 0


def test_events_streams_pane_created(cmux_server: ServerProcess) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "cmux_core", "events", "pane.created", "--socket",
         str(cmux_server.socket_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cmux_server.env)
    try:
        assert proc.stdout is not None
        # The subscription starts at some unknown moment, so split until an event arrives.
        created: list[str] = []
        deadline = time.monotonic() + 60  # the client's start, on a loaded machine
        line = ""
        while not line:
            assert time.monotonic() < deadline, "no pane.created event"
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            created.append(cmux_server.call("pane.split", {})["pane"]["pane_id"])
            if select.select([proc.stdout], [], [], 0.2)[0]:
                line = proc.stdout.readline()
        event = json.loads(line)
        assert event["event"] == "pane_created"
        assert event["data"]["pane"]["pane_id"] in created
    finally:
        proc.terminate()
        proc.wait(10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


# -- the parser ---------------------------------------------------------------------------------


def subparsers(parser: argparse.ArgumentParser, path: str = "cmux"
               ) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from subparsers(sub, f"{path} {name}")


def test_every_argument_has_plain_help() -> None:
    missing, markup = [], []
    for path, parser in subparsers(build_parser()):
        for action in parser._actions:
            if not isinstance(action, argparse._SubParsersAction | argparse._HelpAction) \
                    and not action.help:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
        if "``" in parser.format_help() or ":func:" in parser.format_help():
            markup.append(path)
    assert not missing, f"arguments without help: {missing}"
    assert not markup, f"help with reStructuredText markup: {markup}"


def test_help_runs_as_a_command() -> None:
    proc = subprocess.run([sys.executable, "-m", "cmux_core", "agents", "--help"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith("usage: cmux agents") and "`" not in proc.stdout


def test_cli_modules_import_as_a_tree() -> None:
    """main builds the parser from the command table (commands), which names the group
    modules; they import common (and the shared helpers: kitty graphics, the outer
    terminal, the fleet's grouping of agent lists), the helpers none of them. Only main
    imports inside functions (what a command needs, when it runs); no other import of ours
    hides inside a function."""
    cli = Path(__file__).resolve().parents[1] / "cmux_core" / "cli"
    imports: dict[str, set[str]] = {}
    for path in sorted(cli.glob("*.py")):
        tree = ast.parse(path.read_text())
        found = {node.module.removeprefix("cmux_core.cli.") for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module
                 and node.module.startswith("cmux_core.cli.")}
        top = {node.module.removeprefix("cmux_core.cli.") for node in tree.body
               if isinstance(node, ast.ImportFrom) and node.module
               and node.module.startswith("cmux_core.cli.")}
        if path.stem == "main":
            assert top == {"commands", "common"}, top
        else:
            assert found == top, f"{path.name} imports {found - top} inside a function"
        imports[path.stem] = found
    # Helpers are shared by the groups and import no module of cli; a part (``ui_pane``,
    # ``plugin_install``, ``machine_ssh``) is a piece of one group, or of main
    # (``extensions``), imported by it alone.
    helpers = {"common", "kitty", "outer_terminal", "fleet_view"}
    parts = {"ui_pane": "ui", "plugin_install": "plugin", "machine_ssh": "machine",
             "extensions": "main"}
    groups = set(imports) - {"main", "commands", "__init__"} - helpers - set(parts)
    assert imports["commands"] == {"common"}
    named = {e.loader.partition(":")[0].removeprefix("cmux_core.cli.") for e in COMMANDS}
    for helper in helpers | {"__init__"}:
        assert imports[helper] == set(), f"{helper} imports {imports[helper]}"
    for part, owner in parts.items():
        assert imports[part] <= helpers, f"{part} imports {imports[part]}"
        assert {m for m, found in imports.items() if part in found} == {owner}
    for group in groups:
        own = {part for part, owner in parts.items() if owner == group}
        table = {"commands"} if group == "completion" else set()
        assert "common" in imports[group] and imports[group] <= helpers | own | table, \
            f"{group} imports {imports[group]}"
    # Every group is reached from the table or from a command of main.
    assert (named | imports["main"]) - {"main", "common", "commands", "extensions"} == groups
