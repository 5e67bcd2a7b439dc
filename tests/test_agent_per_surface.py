"""Agent state per terminal surface, through a real server: two tabs of one pane running two
fake agents, hook reports that name a surface (or come from a process in a background
tab), surfaces moved and closed, and what the herdr family's pane shows meanwhile.

``alphabot`` and ``betabot`` are two small programs (``fake_agent.screens_program``), each
known to its own test manifest by its script name; each line typed into one shows the
screen that line names.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Api
from fake_agent import (
    agent_argv,
    manifest,
    manifest_server,
    rule,
    screens_program,
    start_in_shell,
    wait_agent,
    write_agent,
    write_manifests,
)

from cmux_core.cli.agent import show_agents
from cmux_core.cli.sidebar import DEFAULT_COLUMNS, Board, columns_from, render_rows, row_key
from cmux_core.config import session_file
from cmux_core.testing import ServerProcess, start_server, wait_until

REPORT_BLOCKED_BY_PANE = textwrap.dedent("""\
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(os.environ["CMUX_SOCKET_PATH"])
    sock.sendall(json.dumps({"id": 1, "method": "pane.report_agent", "params": {
        "pane_id": os.environ["CMUX_PANE_ID"], "source": "custom:hookbot",
        "agent": "hookbot", "state": "blocked"}}).encode() + b"\\n")
    print("reply:", sock.recv(65536).decode().strip(), flush=True)
    time.sleep(120)
""")
"""A program's lines that report hookbot ``blocked`` naming only ``$CMUX_PANE_ID``, as
herdr's own hooks do, then stay alive (it needs ``json``, ``os``, ``socket``, ``time``)."""


def bot_manifest(name: str) -> str:
    word = name.upper()
    return manifest(
        name,
        rule("asks", "blocked", 30, visible_blocker=True, contains=[f"{word} asks"]),
        rule("busy", "working", 20, contains=[f"{word} busy"]),
        rule("prompt", "idle", 10, visible_idle=True, contains=[f"{word} ready"]),
    )


def screens(name: str, first: str) -> dict[str, str]:
    word = name.upper()
    shown = {"busy": f"{word} busy", "ask": f"{word} asks: allow? [y/n]",
             "idle": f"{word} ready\n> "}
    return {first: shown[first], **shown}


WAIT_S = 30.0
"""Generous bound for detection on a loaded machine (it waits out a 3 s startup grace)."""


@pytest.fixture
def cmux_server(tmp_path: Path) -> Iterator[ServerProcess]:
    manifests = write_manifests(tmp_path, {"alphabot": bot_manifest("alphabot"),
                                           "betabot": bot_manifest("betabot")})
    with manifest_server(manifests) as proc:
        yield proc


class Tabs:
    """One pane whose shown tab runs alphabot (typed into its shell, busy) and whose
    background tab runs betabot (its command, asking)."""

    def __init__(self, api: Api, tmp_path: Path) -> None:
        self.api = api
        alpha = write_agent(tmp_path, "alphabot_agent",
                            screens_program(screens("alphabot", "busy")))
        beta = write_agent(tmp_path, "betabot_agent",
                           screens_program(screens("betabot", "ask")))
        self.pane_id = start_in_shell(api, alpha)
        pane = api("pane.get", {"pane_id": self.pane_id})["pane"]
        self.pane_uuid = pane["uuid"]
        self.alpha_surface = pane["surface_id"]
        self.alpha_terminal = pane["terminal_id"]
        self.beta_dir = tmp_path / "beta"
        self.beta_dir.mkdir()
        created = api("surface.create", {"pane_id": self.pane_id,
                                         "working_directory": str(self.beta_dir),
                                         "command": shlex.join(agent_argv(beta))})
        self.beta_surface = created["surface_id"]
        wait_agent(api, self.pane_id, "alphabot", "working", timeout=WAIT_S)
        wait_until(lambda: self.agent("betabot").get("agent_status") == "blocked",
                   timeout=WAIT_S, message="betabot blocked in the background tab")
        self.beta_terminal = self.agent("betabot")["terminal_id"]

    def agents(self) -> dict[str, dict[str, Any]]:
        return {row.get("agent") or row.get("name") or "?": row
                for row in self.api("agent.list")["agents"]}

    def agent(self, label: str) -> dict[str, Any]:
        return self.agents().get(label, {})

    def pane(self) -> dict[str, Any]:
        return dict(self.api("pane.get", {"pane_id": self.pane_id})["pane"])

    def type(self, surface: str, line: str) -> None:
        self.api("surface.send_text", {"surface_id": surface, "text": line + "\n"})


@pytest.fixture
def tabs(api: Api, tmp_path: Path) -> Tabs:
    return Tabs(api, tmp_path)


def test_two_tabs_of_one_pane_have_their_own_agents(api: Api, tabs: Tabs) -> None:
    pane = tabs.pane()
    assert (pane["agent"], pane["agent_status"]) == ("alphabot", "working"), \
        "the herdr pane is the terminal it shows"
    assert pane["terminal_id"] == tabs.alpha_terminal
    alpha, beta = tabs.agent("alphabot"), tabs.agent("betabot")
    assert alpha["agent_status"] == "working" and "shown" not in alpha
    assert alpha["surface_id"] == tabs.alpha_surface
    assert beta["agent_status"] == "blocked" and beta["shown"] is False
    assert (beta["pane_id"], beta["surface_id"]) == (tabs.pane_id, tabs.beta_surface)
    assert beta["terminal_id"] != tabs.alpha_terminal and beta["focused"] is False
    assert beta["cwd"] == beta["foreground_cwd"] == str(tabs.beta_dir), "its own directory"
    assert alpha.get("foreground_cwd") != str(tabs.beta_dir)
    assert api("agent.get", {"target": tabs.beta_surface})["agent"]["agent"] == "betabot"
    assert api("agent.get", {"target": tabs.beta_terminal})["agent"]["agent"] == "betabot"
    assert api("agent.get", {"target": tabs.pane_id})["agent"]["agent"] == "alphabot"
    read = api("agent.read", {"target": "betabot"})["read"]
    assert "BETABOT asks" in read["text"] and "ALPHABOT" not in read["text"]
    # The rollups count the background tab: its blocked agent needs attention.
    ws = api("workspace.get", {"workspace_id": pane["workspace_id"]})["workspace"]
    assert ws["agent_status"] == "blocked"
    rows = {row["id"]: row for row in api("surface.list")["surfaces"]}
    assert (rows[tabs.alpha_surface]["agent"], rows[tabs.alpha_surface]["agent_status"]) == (
        "alphabot", "working")
    assert (rows[tabs.beta_surface]["agent"], rows[tabs.beta_surface]["agent_status"]) == (
        "betabot", "blocked")
    own = {row["id"]: row for row in api("pane.surfaces", {"pane_id": tabs.pane_id})
           ["surfaces"]}
    assert own[tabs.beta_surface]["agent_status"] == "blocked"
    tree = {row["id"]: row for window in api("system.tree")["windows"]
            for ws in window["workspaces"] for pane in ws["panes"] for row in pane["surfaces"]}
    assert (tree[tabs.beta_surface]["agent"], tree[tabs.alpha_surface]["agent"]) == (
        "betabot", "alphabot")


def test_a_background_agent_finishing_is_done_until_looked_at(api: Api, tabs: Tabs) -> None:
    listener = Api(api.server)
    try:
        listener("events.subscribe", {"subscriptions": [
            {"type": "pane.agent_status_changed"}, {"type": "surface.agent_status_changed"}]})
        tabs.type(tabs.beta_surface, "idle")
        wait_until(lambda: tabs.agent("betabot").get("agent_status") == "done",
                   timeout=WAIT_S, message="betabot done in the background")
        while True:
            event = listener.event(timeout=WAIT_S)
            if event["data"].get("terminal_id") == tabs.beta_terminal:
                break
        data = event["data"]
        assert event["event"] == "surface_agent_status_changed", "not the pane's event"
        assert (data["pane_id"], data["surface_id"], data["shown"]) == (
            tabs.pane_id, tabs.beta_surface, False)
        assert tabs.pane()["agent_status"] == "working", "the shown terminal is unmoved"
        focused = api("agent.focus", {"target": "betabot"})["agent"]
        assert focused["surface_id"] == tabs.beta_surface and "shown" not in focused
        pane = tabs.pane()
        assert (pane["agent"], pane["agent_status"]) == ("betabot", "idle"), \
            "looking at the tab marked it seen, and the pane now shows it"
        while True:  # the pane showing another terminal is published as its status
            event = listener.event(timeout=WAIT_S)
            if event["event"] == "pane_agent_status_changed" \
                    and event["data"]["pane_id"] == tabs.pane_id:
                break
        assert event["data"]["agent"] == "betabot"
    finally:
        listener.close()
    assert tabs.agent("alphabot")["shown"] is False
    # A pane's shown terminal comes first in agent.list, its other tabs after it.
    assert [row["agent"] for row in api("agent.list")["agents"]] == ["betabot", "alphabot"]


def test_showing_another_tab_publishes_the_panes_new_status(api: Api, tabs: Tabs) -> None:
    """``surface.focus`` in the pane that already has focus: the herdr pane now is the
    other terminal, and its status is published for the pane."""
    api("pane.focus", {"pane_id": tabs.pane_id})
    listener = Api(api.server)
    try:
        listener("events.subscribe", {"subscriptions": [{"type": "pane.agent_status_changed"}]})
        api("surface.focus", {"surface_id": tabs.beta_surface})
        while True:
            data = listener.event(timeout=WAIT_S)["data"]
            if "shown" not in data and data["pane_id"] == tabs.pane_id:
                break
        assert (data["agent"], data["agent_status"], data["surface_id"]) == (
            "betabot", "blocked", tabs.beta_surface)
    finally:
        listener.close()
    pane = tabs.pane()
    assert (pane["agent"], pane["terminal_id"]) == ("betabot", tabs.beta_terminal)


def test_pane_scoped_waits_follow_the_shown_terminal(api: Api, tabs: Tabs) -> None:
    """A pane's background tab going idle does not satisfy a wait on the pane."""
    waiter = Api(api.server)
    try:
        waiter.send_request("w", "events.wait", {
            "match_event": {"event": "pane_agent_status_changed", "pane_id": tabs.pane_id,
                            "agent_status": "done"}, "timeout_ms": 4000})
        tabs.type(tabs.beta_surface, "idle")
        wait_until(lambda: tabs.agent("betabot").get("agent_status") == "done",
                   timeout=WAIT_S, message="betabot done in the background")
        reply = waiter.readline(timeout=WAIT_S)
        assert reply["ok"] is False and reply["error"]["code"] == "timeout", reply
    finally:
        waiter.close()


def test_hook_reports_land_on_the_surface_they_name(api: Api, tabs: Tabs) -> None:
    report = {"pane_id": tabs.pane_id, "source": "custom:tabs", "agent": "betabot",
              "state": "working"}
    api("pane.report_agent", {**report, "surface_id": tabs.beta_surface})
    beta = tabs.agent("betabot")
    assert (beta["agent_status"], beta["status_source"]) == ("working", "hook")
    assert tabs.pane()["agent_status"] == "working"
    assert tabs.agent("alphabot")["status_source"] == "screen"
    # A surface handle wins over a stale pane id (a moved surface keeps its env).
    api("pane.report_agent", {**report, "pane_id": "w1:p999", "surface_id": tabs.beta_surface,
                              "state": "idle"})
    assert tabs.agent("betabot")["agent_status"] in ("idle", "done")
    api("pane.report_metadata", {"surface_id": tabs.beta_surface, "source": "custom:tabs",
                                 "tokens": {"branch": "beta"}})
    assert tabs.agent("betabot")["tokens"] == {"branch": "beta"}
    assert "tokens" not in tabs.pane()
    # Only a pane id, from a process in no terminal of the pane: the shown terminal.
    api("pane.report_metadata", {"pane_id": tabs.pane_id, "source": "custom:tabs",
                                 "tokens": {"branch": "alpha"}})
    assert tabs.pane()["tokens"] == {"branch": "alpha"}
    assert tabs.agent("betabot")["tokens"] == {"branch": "beta"}
    bad = api.error("pane.report_agent", {**report, "surface_id": "surface:999"})
    assert bad["code"] == "not_found" or "not_found" in bad["code"]
    missing = api.error("pane.report_agent", {k: v for k, v in report.items()
                                              if k != "pane_id"})
    assert missing["code"] == "invalid_params" and "pane_id" in missing["message"]


def test_a_report_with_only_a_pane_id_lands_on_the_reporting_tab(api: Api, tabs: Tabs,
                                                                   tmp_path: Path) -> None:
    """A hook that knows only ``$CMUX_PANE_ID`` (as herdr's own hooks do) running in a
    background tab reports for that tab, not for the one the pane shows."""
    script = tmp_path / "reporter.py"
    script.write_text("import json, os, socket, time\n" + REPORT_BLOCKED_BY_PANE)
    created = api("surface.create", {"pane_id": tabs.pane_id,
                                     "command": shlex.join([sys.executable, "-u", str(script)])})
    wait_until(lambda: tabs.agent("hookbot").get("agent_status") == "blocked",
               timeout=WAIT_S, message="hookbot blocked in its own tab")
    hookbot = tabs.agent("hookbot")
    assert (hookbot["surface_id"], hookbot["shown"]) == (created["surface_id"], False)
    pane = tabs.pane()
    assert (pane["agent"], pane["agent_status"]) == ("alphabot", "working")
    # Closing the tab drops its agent.
    api("surface.close", {"surface_id": created["surface_id"]})
    assert "hookbot" not in tabs.agents()
    assert api.error("agent.get", {"target": "hookbot"})["code"] == "agent_not_found"



def test_a_report_from_a_process_that_left_the_tabs_session_lands_on_that_tab(
        api: Api, tabs: Tabs, tmp_path: Path) -> None:
    """A background tab's program starts a helper in a session of its own (``setsid``,
    as tmux or a daemonising tool does) that reports with only ``$CMUX_PANE_ID``: the
    report still lands on that tab, found through the helper's parent processes."""
    script = tmp_path / "detached.py"
    script.write_text("import json, os, socket, sys, time\n"
                      "if os.fork() == 0:\n"
                      "    os.setsid()\n"
                      "    assert os.getsid(0) == os.getpid()\n"
                      + textwrap.indent(REPORT_BLOCKED_BY_PANE, "    ")
                      + "    sys.exit(0)\n"
                      "os.wait()\n")
    # The shell runs the program as its child; the helper is that program's child.
    command = f"{shlex.join([sys.executable, '-u', str(script)])}; sleep 120"
    created = api("surface.create", {"pane_id": tabs.pane_id,
                                     "command": shlex.join(["sh", "-c", command])})
    wait_until(lambda: tabs.agent("hookbot").get("agent_status") is not None,
               timeout=WAIT_S, message="hookbot's report applied")
    hookbot = tabs.agent("hookbot")
    assert (hookbot["surface_id"], hookbot["shown"], hookbot["agent_status"]) == (
        created["surface_id"], False, "blocked")
    pane = tabs.pane()
    assert (pane["agent"], pane["agent_status"]) == ("alphabot", "working")


def test_a_moved_surface_keeps_its_agent(api: Api, tabs: Tabs) -> None:
    tabs.api("pane.report_metadata", {"surface_id": tabs.beta_surface,
                                      "source": "custom:tabs", "tokens": {"task": "t1"}})
    other = api("pane.split", {"pane_id": tabs.pane_id, "direction": "right"})["pane"]
    api("surface.move", {"surface_id": tabs.beta_surface, "pane_id": other["pane_id"]})
    beta = tabs.agent("betabot")
    assert beta["pane_id"] == other["pane_id"] and beta["agent_status"] == "blocked"
    assert beta["tokens"] == {"task": "t1"} and "shown" not in beta
    moved = api("pane.get", {"pane_id": other["pane_id"]})["pane"]
    assert (moved["agent"], moved["agent_status"]) == ("betabot", "blocked"), \
        "the pane it moved into shows it"
    assert tabs.pane()["agent"] == "alphabot"
    # Into a new workspace: the pane it leaves held only it, and closes.
    ws = api("workspace.create", {})["workspace"]
    api("surface.move", {"surface_id": tabs.beta_surface, "workspace_id": ws["workspace_id"]})
    beta = tabs.agent("betabot")
    assert beta["workspace_id"] == ws["workspace_id"]
    assert (beta["agent_status"], beta["tokens"]) == ("blocked", {"task": "t1"})
    tabs.type(tabs.beta_surface, "busy")
    wait_until(lambda: tabs.agent("betabot").get("agent_status") == "working",
               timeout=WAIT_S, message="betabot still detected after its moves")


RESUMING_AGENT = textwrap.dedent("""\
    import sys
    print("KEEPBOT started with", " ".join(sys.argv[1:]) or "nothing", flush=True)
    print("> ", flush=True)
    for line in sys.stdin:
        pass
""")

SESSION_PLUGIN = textwrap.dedent('''\
    from cmux_core import hookimpl

    @hookimpl
    def cmux_register_integrations(register):
        register("keepbot-sessions", install=lambda: None, uninstall=lambda: None,
                 status=lambda: {"installed": True}, source="test:keepbot", agent="keepbot",
                 authority="session")
''')


def agent_row(server: ServerProcess, surface: str) -> dict[str, Any]:
    """``surface``'s row of ``agent.list`` (empty while it runs no agent)."""
    return next((dict(row) for row in server.call("agent.list")["agents"]
                 if row.get("surface_id") == surface), {})


def test_a_background_tabs_session_resumes_in_that_tab(tmp_path: Path) -> None:
    """The session file keeps each terminal's agent: a background tab's session resumes
    in that tab after a restart, and the shown shell stays a shell."""
    script = write_agent(tmp_path, "keepbot_agent", RESUMING_AGENT)
    manifests = write_manifests(tmp_path, {"keepbot": textwrap.dedent(f"""\
        id = "keepbot"
        process_names = ["keepbot_agent"]

        [[rules]]
        id = "prompt"
        state = "idle"
        contains = ["> "]

        [resume]
        argv = [{json.dumps(sys.executable)}, {json.dumps(str(script))}, "--resume",
                "{{session_id}}"]
        """)})
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "keepbot_sessions.py").write_text(SESSION_PLUGIN)
    socket_dir = Path(tempfile.mkdtemp(prefix="cmux-s-", dir=tempfile.gettempdir()))
    args = ["--socket", str(socket_dir / "s.sock"), "--manifests-dir", str(manifests),
            "--plugins-dir", str(tmp_path / "plugins")]
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    try:
        first = start_server(args, env=env)
        try:
            surface = first.call("surface.create", {
                "pane_id": "w1:p1", "command": shlex.join([sys.executable, str(script)])}
            )["surface_id"]
            wait_until(lambda: agent_row(first, surface).get("agent") == "keepbot",
                       timeout=WAIT_S, message="keepbot in its tab")
            first.call("pane.report_agent_session", {
                "surface_id": surface, "source": "test:keepbot", "agent": "keepbot",
                "agent_session_id": "sess-bg"})
            assert "agent_session" not in first.call("pane.get", {"pane_id": "w1:p1"})["pane"]
        finally:
            first.stop()
        saved = json.loads(session_file(socket_dir / "s.sock", tmp_path / "state" / "cmux")
                           .read_text())["windows"][0]["workspaces"][0]["tabs"][0]["root"]
        assert "agent" not in saved
        assert saved["surfaces"][1]["uuid"] == surface
        assert saved["surfaces"][1]["agent"]["resume"][-2:] == ["--resume", "sess-bg"]

        second = start_server(args, env=env)
        try:
            def tab_text() -> str:
                return str(second.call("surface.read_text", {"surface_id": surface})["text"])

            wait_until(lambda: "started with --resume sess-bg" in tab_text(), timeout=WAIT_S,
                       message="the background tab's resume")
            pane = second.call("pane.get", {"pane_id": "w1:p1"})["pane"]
            assert "agent_session" not in pane and "agent" not in pane
            wait_until(lambda: agent_row(second, surface).get("agent") == "keepbot",
                       timeout=WAIT_S, message="the resumed agent detected in its tab")
            info = second.call("agent.get", {"target": surface})["agent"]
            assert info["agent_session"]["value"] == "sess-bg"
        finally:
            second.stop()
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)


def test_a_background_tabs_notification_names_that_tab(api: Api) -> None:
    pane_id = api.focused_pane()
    shown = api("pane.get", {"pane_id": pane_id})["pane"]["surface_id"]
    created = api("surface.create", {
        "pane_id": pane_id,
        "command": "sleep 0.5; printf '\\033]9;from the background\\007'; sleep 60"})

    def notes() -> list[dict[str, Any]]:
        return [n for n in api("notification.list")["notifications"]
                if n["title"] == "from the background"]

    wait_until(lambda: notes(), timeout=WAIT_S, message="the background tab's notification")
    assert notes()[0]["surface_id"] == created["surface_id"] != shown


def test_the_sidebar_selects_one_tab_of_a_pane() -> None:
    """Two agents in one pane are two rows; the selection (and Enter's ``agent.focus``)
    names one terminal, not the pane."""
    rows = [{"pane_id": "w1:p1", "terminal_id": "term_a", "agent": "alphabot",
             "agent_status": "working", "workspace_id": "w1"},
            {"pane_id": "w1:p1", "terminal_id": "term_b", "agent": "betabot",
             "agent_status": "blocked", "workspace_id": "w1", "shown": False}]
    lines = render_rows(Board(rows, 2), columns_from(DEFAULT_COLUMNS), width=80, now=0.0,
                        selected="term_b")
    assert [row_key(r) for r in rows] == ["term_a", "term_b"]
    assert "\x1b[48;5;236m" in lines[2] and "\x1b[48;5;236m" not in lines[1]


def test_cmux_hook_reports_for_the_tab_its_surface_id_names(api: Api, tabs: Tabs) -> None:
    """The real hook program, run with a background tab's environment: its tokens land on
    that tab's agent, not on the terminal the pane shows."""
    root = Path(__file__).resolve().parent.parent
    payload = json.loads((root / "tests" / "data" / "hook_payloads" / "claude"
                          / "02-UserPromptSubmit.json").read_text())["stdin"]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "CMUX_SOCKET_PATH": str(api.server.socket_path), "CMUX_PANE_ID": tabs.pane_id,
           "CMUX_SURFACE_ID": tabs.beta_surface}
    done = subprocess.run([str(root / "hooks" / "cmux-hook"), "claude"], input=payload.encode(),
                          env=env, capture_output=True, timeout=10)
    assert (done.returncode, done.stderr) == (0, b"")
    assert "prompt" in tabs.agent("betabot").get("tokens", {})
    assert "prompt" not in tabs.pane().get("tokens", {})


def test_agent_list_on_the_command_line_marks_background_tabs(
        capsys: pytest.CaptureFixture[str]) -> None:
    row = {"agent_status": "blocked", "pane_id": "w1:p1", "agent": "betabot"}
    show_agents({"agents": [row, {**row, "agent": "gammabot", "shown": False}]})
    lines = capsys.readouterr().out.splitlines()
    assert "(tab)" not in lines[1] and lines[2].split()[-2:] == ["w1:p1", "(tab)"]
