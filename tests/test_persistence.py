"""Sessions survive restarts: real servers stopped (SIGTERM or SIGKILL) and started again on
the same socket and state directory bring back workspaces, tabs, splits with their ratios,
names, cwd, ids and agent sessions, which resume through their manifest's ``[resume]``
command. Bad session files are set aside; ``--no-restore`` starts clean.

The agent is a small fake (``fakebot_agent.py``) that prints the arguments it was started
with; a manifest in ``--manifests-dir`` identifies it by its script name and resumes it by
running it again with ``--resume <id>``, and a plugin declares the session source.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cmux_core.config import session_file
from cmux_core.state.keeper import READS_ONLY
from cmux_core.testing import ServerProcess, start_server, wait_until

AGENT = textwrap.dedent("""\
    import sys
    print("FAKEBOT started with", " ".join(sys.argv[1:]) or "nothing", flush=True)
    print("> ", flush=True)
    for line in sys.stdin:
        if line.strip() == "quit":
            break
""")

PLUGIN = textwrap.dedent('''\
    from cmux_core import hookimpl

    @hookimpl
    def cmux_register_integrations(register):
        register("fakebot-sessions", install=lambda: None, uninstall=lambda: None,
                 status=lambda: {"installed": True}, source="test:fakebot", agent="fakebot",
                 authority="session")
''')


def manifest(script: Path) -> str:
    return textwrap.dedent(f"""\
        id = "fakebot"
        process_names = ["fakebot_agent"]

        [[rules]]
        id = "prompt"
        state = "idle"
        contains = ["> "]

        [resume]
        argv = [{json.dumps(sys.executable)}, {json.dumps(str(script))}, "--resume",
                "{{session_id}}"]
        """)


@dataclass
class Place:
    """One socket and state directory that successive servers share."""

    socket: Path
    state: Path
    root: Path
    agent: Path
    extra: list[str]

    @property
    def file(self) -> Path:
        return session_file(self.socket, self.state / "cmux")

    def start(self, *args: str, config: Path | None = None) -> ServerProcess:
        env = {"XDG_STATE_HOME": str(self.state)}
        if config is not None:
            env["XDG_CONFIG_HOME"] = str(config)
        return start_server(["--socket", str(self.socket), *self.extra, *args], env=env)

    def saved(self) -> dict[str, Any]:
        return dict(json.loads(self.file.read_text()))


@pytest.fixture
def place(tmp_path: Path) -> Iterator[Place]:
    socket_dir = Path(tempfile.mkdtemp(prefix="cmux-p-", dir=tempfile.gettempdir()))
    agent = tmp_path / "fakebot_agent.py"
    agent.write_text(AGENT)
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "fakebot.toml").write_text(manifest(agent))
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "fakebot_sessions.py").write_text(PLUGIN)
    extra = ["--manifests-dir", str(tmp_path / "manifests"),
             "--plugins-dir", str(tmp_path / "plugins")]
    try:
        yield Place(socket_dir / "s.sock", tmp_path / "state", tmp_path, agent, extra)
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)


def kill_hard(server: ServerProcess) -> None:
    server.process.send_signal(signal.SIGKILL)
    server.process.wait(10)
    server.stop()


def pane(server: ServerProcess, pane_id: str) -> dict[str, Any]:
    return dict(server.call("pane.get", {"pane_id": pane_id})["pane"])


def layout(server: ServerProcess, tab_id: str) -> dict[str, Any]:
    return dict(server.call("layout.export", {"tab_id": tab_id})["layout"])


def panes(server: ServerProcess) -> list[tuple[str, str, str]]:
    return [(p["pane_id"], p["uuid"], p["ref"]) for p in server.call("pane.list")["panes"]]


def workspaces(server: ServerProcess) -> list[tuple[str, str, str, str]]:
    return [(w["workspace_id"], w["label"], w["uuid"], w["ref"])
            for w in server.call("workspace.list")["workspaces"]]


def text(server: ServerProcess, pane_id: str) -> str:
    """The pane's recent text with its (narrow pane's) line breaks taken out."""
    return str(server.call("pane.read", {"pane_id": pane_id, "source": "recent",
                                         "lines": 200})["read"]["text"]).replace("\n", "")


def build(server: ServerProcess, root: Path) -> None:
    """Two workspaces (a third closed in between), splits with ratios, names, cwds."""
    for name in ("left", "right", "bottom", "moved", "other"):
        (root / name).mkdir()
    call = server.call
    call("pane.split", {"pane_id": "w1:p1", "direction": "right", "ratio": 0.3,
                        "cwd": str(root / "right")})
    call("pane.split", {"pane_id": "w1:p2", "direction": "down", "ratio": 0.7,
                        "cwd": str(root / "bottom")})
    call("pane.rename", {"pane_id": "w1:p3", "label": "logs"})
    call("workspace.rename", {"workspace_id": "w1", "label": "alpha"})
    call("tab.create", {"workspace_id": "w1", "label": "second tab", "cwd": str(root / "left")})
    call("tab.rename", {"tab_id": "w1:t1", "label": "main"})
    call("workspace.create", {"label": "closed", "cwd": str(root / "other")})
    call("workspace.create", {"label": "beta", "cwd": str(root / "other")})
    call("workspace.close", {"workspace_id": "w2"})
    call("workspace.action", {"workspace_id": "w3", "action": "pin"})
    call("workspace.action", {"workspace_id": "w3", "action": "set_color", "color": "#00ff00"})
    call("agent.view.set", {"client_id": "sidebar-1", "source": "test:sidebar",
                            "label": "Blocked first",
                            "filter": {"op": "not", "filter": {"op": "eq", "field": "status",
                                                               "value": "unknown"}},
                            "sort": [{"field": "attention", "direction": "desc"}]})
    call("agent.view.set", {"source": "test:connection-only"})
    call("pane.send_text", {"pane_id": "w1:p1", "text": f"cd {root / 'moved'}\r"})
    wait_until(lambda: pane(server, "w1:p1").get("foreground_cwd") == str(root / "moved"),
               message="the shell's cd")


def test_a_stopped_server_comes_back_as_it_was(place: Place) -> None:
    first = place.start()
    build(first, place.root)
    before = (workspaces(first), panes(first), layout(first, "w1:t1"), layout(first, "w1:t2"),
              layout(first, "w3:t1"))
    first_view = first.call("agent.view.get", {"client_id": "sidebar-1"})
    assert first_view["active"] is True
    assert first.stop() == 0
    mode = stat.S_IMODE(os.stat(place.file).st_mode)
    assert mode == 0o600, oct(mode)
    assert place.saved()["version"] == 2
    assert '"text"' not in place.file.read_text(), "text is saved only when asked"

    second = place.start()
    after = (workspaces(second), panes(second), layout(second, "w1:t1"),
             layout(second, "w1:t2"), layout(second, "w3:t1"))
    assert after == before
    root = layout(second, "w1:t1")["root"]
    assert (root["direction"], root["ratio"]) == ("right", 0.3)
    assert (root["second"]["direction"], root["second"]["ratio"]) == ("down", 0.7)
    assert root["first"]["cwd"] == str(place.root / "moved")
    assert root["second"]["second"]["label"] == "logs"
    view = second.call("agent.view.get", {"client_id": "sidebar-1"})
    assert view == first_view
    assert second.call("agent.view.get")["active"] is False
    beta = second.call("workspace.get", {"workspace_id": "w3"})["workspace"]
    assert (beta["pinned"], beta["custom_color"]) == (True, "#00ff00")
    tabs = second.call("tab.list", {"workspace_id": "w1"})["tabs"]
    assert [t["label"] for t in tabs] == ["main", "second tab"]
    # The restored shell really runs in its directory, and the allocators go on.
    second.call("pane.send_text", {"pane_id": "w1:p1", "text": "pwd\r"})
    wait_until(lambda: str(place.root / "moved") in text(second, "w1:p1"), message="pwd")
    split = second.call("pane.split", {"pane_id": "w1:p1", "direction": "down"})["pane"]
    assert split["pane_id"] == "w1:p5"
    assert split["ref"] == "pane:7"
    created = second.call("workspace.create", {"label": "gamma"})["workspace"]
    assert created["workspace_id"] == "w4"
    second.stop()


def test_a_killed_server_keeps_what_it_saved_a_moment_before(place: Place) -> None:
    first = place.start()
    first.call("pane.split", {"pane_id": "w1:p1", "direction": "down", "ratio": 0.25})
    first.call("workspace.rename", {"workspace_id": "w1", "label": "survivor"})
    # A pin publishes no event: the request itself leads to the save.
    first.call("workspace.action", {"workspace_id": "w1", "action": "pin"})

    def saved_change() -> bool:
        try:
            ws = place.saved()["windows"][0]["workspaces"][0]
        except (OSError, ValueError, KeyError, IndexError):
            return False
        return (ws.get("label") == "survivor" and ws["tabs"][0]["root"]["type"] == "split"
                and ws.get("pinned") is True)

    wait_until(saved_change, timeout=30, message="the change in the session file")
    kill_hard(first)

    second = place.start()
    assert workspaces(second)[0][:2] == ("w1", "survivor")
    root = layout(second, "w1:t1")["root"]
    assert (root["direction"], root["ratio"]) == ("down", 0.25)
    second.stop()


def test_an_idle_server_does_not_rewrite_its_file(place: Place) -> None:
    first = place.start()
    first.call("pane.split", {"pane_id": "w1:p1"})
    assert first.stop() == 0
    written = place.file.stat().st_mtime_ns
    second = place.start()
    second.call("pane.list")
    assert second.stop() == 0
    assert place.file.stat().st_mtime_ns == written


@pytest.mark.parametrize(("content", "suffix"), [
    (b"{not json", ".corrupt-"),
    (b'{"version": 1, "windows": [{"uuid": "x"}]}', ".corrupt-"),
    (b'{"version": 99, "windows": [], "from": "a later cmux"}', ".future-"),
])
def test_a_file_that_cannot_be_restored_is_set_aside(place: Place, content: bytes,
                                                     suffix: str) -> None:
    place.file.parent.mkdir(parents=True)
    place.file.write_bytes(content)
    server = place.start()
    assert [p[0] for p in panes(server)] == ["w1:p1"]
    aside = [p for p in place.file.parent.iterdir() if suffix in p.name]
    assert len(aside) == 1 and aside[0].read_bytes() == content
    assert not place.file.exists()
    assert "set aside as" in server.log() and "starting a fresh session" in server.log()
    server.stop()


def test_no_restore_starts_clean_and_keeps_the_file_until_something_changes(
        place: Place) -> None:
    first = place.start()
    first.call("pane.split", {"pane_id": "w1:p1"})
    first.stop()
    old = place.file.read_bytes()

    clean = place.start("--no-restore")
    assert [p[0] for p in panes(clean)] == ["w1:p1"]
    clean.call("pane.list")
    assert place.file.read_bytes() == old
    clean.call("workspace.rename", {"workspace_id": "w1", "label": "new life"})
    wait_until(lambda: place.file.read_bytes() != old, timeout=30, message="a save")
    clean.stop()
    assert place.saved()["windows"][0]["workspaces"][0]["label"] == "new life"


def test_state_file_option_names_the_file(place: Place) -> None:
    chosen = place.root / "elsewhere" / "mine.json"
    first = place.start("--state-file", str(chosen))
    first.call("workspace.rename", {"workspace_id": "w1", "label": "chosen"})
    first.stop()
    assert json.loads(chosen.read_text())["windows"][0]["workspaces"][0]["label"] == "chosen"
    assert not place.file.exists()
    second = place.start("--state-file", str(chosen))
    assert workspaces(second)[0][1] == "chosen"
    second.stop()


def test_two_servers_never_share_a_file(place: Place) -> None:
    shared = place.root / "shared.json"
    first = place.start("--state-file", str(shared))
    first.call("workspace.rename", {"workspace_id": "w1", "label": "first"})
    other = start_server(["--socket", str(place.socket.with_name("t.sock")),
                          "--state-file", str(shared)],
                         env={"XDG_STATE_HOME": str(place.state)})
    other.call("workspace.rename", {"workspace_id": "w1", "label": "second"})
    other.call("pane.split", {"pane_id": "w1:p1"})
    assert "in use by another server" in other.log()
    assert other.stop() == 0
    first.stop()
    saved = json.loads(shared.read_text())["windows"][0]["workspaces"][0]
    assert saved["label"] == "first"
    assert saved["tabs"][0]["root"]["type"] == "pane"


def test_terminal_text_comes_back_when_asked(place: Place) -> None:
    config = place.root / "config"
    (config / "cmux").mkdir(parents=True)
    (config / "cmux" / "config.toml").write_text("[server]\nrestore_text_lines = 50\n")
    first = place.start(config=config)
    first.call("pane.send_text", {"pane_id": "w1:p1", "text": "echo marker-$((6*7))\r"})
    wait_until(lambda: "marker-42" in text(first, "w1:p1"), message="the echo")
    first.stop()
    saved = place.saved()["windows"][0]["workspaces"][0]["tabs"][0]["root"]
    assert "marker-42" in saved["surfaces"][0]["text"]

    second = place.start(config=config)
    wait_until(lambda: "marker-42" in text(second, "w1:p1"), message="the restored text")
    second.call("pane.send_text", {"pane_id": "w1:p1", "text": "echo again-$((6*8))\r"})
    wait_until(lambda: "again-48" in text(second, "w1:p1"), message="a live shell")
    second.stop()
    # Saves after changes leave the text out again; the save at stop puts it back.
    assert "again-48" in place.saved()["windows"][0]["workspaces"][0]["tabs"][0]["root"][
        "surfaces"][0]["text"]


def start_agent(server: ServerProcess, place: Place, pane_id: str, session: str) -> None:
    """Wait for ``pane_id``'s fakebot to be detected, then report its session."""
    wait_until(lambda: pane(server, pane_id).get("agent") == "fakebot", timeout=30,
               message=f"fakebot detected in {pane_id}")
    result = server.call("pane.report_agent_session", {
        "pane_id": pane_id, "source": "test:fakebot", "agent": "fakebot",
        "agent_session_id": session})
    assert result["type"] == "ok"
    assert pane(server, pane_id)["agent_session"]["value"] == session


def test_agents_resume_their_sessions_after_a_restart(place: Place) -> None:
    first = place.start()
    # One agent typed into the pane's shell, one that is the pane's own program.
    first.call("pane.send_text", {"pane_id": "w1:p1",
                                  "text": f"{sys.executable} {place.agent}\r"})
    start_agent(first, place, "w1:p1", "sess-in-shell")
    first.call("pane.split", {"pane_id": "w1:p1", "command": [sys.executable,
                                                              str(place.agent)]})
    start_agent(first, place, "w1:p2", "sess-own")
    first.stop()
    saved = place.saved()["windows"][0]["workspaces"][0]["tabs"][0]["root"]
    assert saved["first"]["agent"]["resume"][-2:] == ["--resume", "sess-in-shell"]
    assert saved["first"]["agent"]["in_shell"] is True
    assert saved["second"]["agent"]["in_shell"] is False

    second = place.start()
    wait_until(lambda: "started with --resume sess-in-shell" in text(second, "w1:p1"),
               timeout=30, message="the typed resume")
    wait_until(lambda: "started with --resume sess-own" in text(second, "w1:p2"),
               timeout=30, message="the pane's own resume")
    for pane_id, session in (("w1:p1", "sess-in-shell"), ("w1:p2", "sess-own")):
        assert pane(second, pane_id)["agent_session"]["value"] == session
    # The pane keeps the command it was launched with; its session is saved again.
    assert layout(second, "w1:t1")["root"]["second"]["command"] == [sys.executable,
                                                                    str(place.agent)]
    wait_until(lambda: pane(second, "w1:p1").get("agent") == "fakebot", timeout=30,
               message="the resumed agent detected")
    second.stop()
    again = place.saved()["windows"][0]["workspaces"][0]["tabs"][0]["root"]
    assert again["first"]["agent"]["session"]["value"] == "sess-in-shell"
    assert again["second"]["agent"]["session"]["value"] == "sess-own"


def test_an_agent_that_exited_is_not_resumed(place: Place) -> None:
    first = place.start()
    first.call("workspace.rename", {"workspace_id": "w1", "label": "kept"})
    first.call("pane.send_text", {"pane_id": "w1:p1",
                                  "text": f"{sys.executable} {place.agent}\r"})
    start_agent(first, place, "w1:p1", "sess-gone")
    first.call("pane.send_text", {"pane_id": "w1:p1", "text": "quit\r"})
    wait_until(lambda: pane(first, "w1:p1").get("agent") is None, timeout=30,
               message="the agent's exit")
    first.stop()
    assert "agent" not in place.saved()["windows"][0]["workspaces"][0]["tabs"][0]["root"]

    second = place.start()
    second.call("pane.send_text", {"pane_id": "w1:p1", "text": "echo shell-is-back\r"})
    wait_until(lambda: "shell-is-back" in text(second, "w1:p1").split("echo")[-1],
               message="a plain shell")
    assert "--resume" not in text(second, "w1:p1")
    assert pane(second, "w1:p1").get("agent_session") is None
    second.stop()


def surfaces(server: ServerProcess) -> list[tuple[Any, ...]]:
    keys = ("id", "ref", "pane_ref", "public_pane_id", "index_in_pane", "selected_in_pane",
            "pinned", "initial_command", "focused")
    rows = server.call("surface.list", {"workspace_id": "w1"})["surfaces"]
    return [tuple(row[k] for k in keys) for row in rows]


def test_a_panes_surfaces_and_env_come_back(place: Place) -> None:
    first = place.start()
    first.call("pane.split", {"pane_id": "w1:p1", "env": {"PANE_NOTE": "from-the-split"}})
    extra = first.call("surface.create", {"pane_id": "w1:p1", "command": "cat",
                                          "initial_env": {"SURFACE_NOTE": "x"}})
    shell = first.call("surface.create", {"pane_id": "w1:p1",
                                          "initial_env": {"SURFACE_NOTE": "from-a-surface"}})
    first.call("surface.action", {"surface_id": extra["surface_id"], "action": "pin"})
    before = surfaces(first)
    assert len(before) == 4
    first.stop()

    second = place.start()
    assert surfaces(second) == before
    second.call("pane.send_text", {"pane_id": "w1:p2", "text": "echo note=$PANE_NOTE\r"})
    wait_until(lambda: "note=from-the-split" in text(second, "w1:p2"), message="pane env")
    second.call("surface.send_text", {"surface_id": shell["surface_id"],
                                       "text": "echo note=$SURFACE_NOTE\r"})
    wait_until(lambda: "note=from-a-surface" in second.call(
        "surface.read_text", {"surface_id": shell["surface_id"]})["text"].replace("\n", ""),
               message="surface env")
    second.stop()


def test_a_named_agent_without_a_session_starts_afresh_under_its_name(place: Place) -> None:
    first = place.start()
    started = first.call("agent.start", {"name": "helper",
                                         "argv": [sys.executable, str(place.agent)]})
    pane_id = started["agent"]["pane_id"]
    wait_until(lambda: "started with nothing" in text(first, pane_id), message="the agent")
    first.stop()
    assert place.saved()["windows"][0]["workspaces"][0]["tabs"][0]["root"]["second"][
        "agent"] == {"name": "helper", "in_shell": False}

    second = place.start()
    wait_until(lambda: "started with nothing" in text(second, pane_id), message="afresh")
    agent = second.call("agent.get", {"target": "helper"})["agent"]
    assert agent["pane_id"] == pane_id
    second.stop()


def test_read_only_requests_ask_for_no_session_check(place: Place) -> None:
    server = place.start()

    def checks() -> int:
        return int(server.call("server.stats")["session"]["checks"])

    def counts() -> tuple[int, int]:
        stats = server.call("server.stats")
        return int(stats["session"]["checks"]), int(stats["event_seq"])

    settled = [counts(), time.monotonic()]

    def quiet_for_a_while() -> bool:
        """No check and no event for longer than any delay a check is armed with, so no
        check is pending when the polling starts."""
        now = counts()
        if now != settled[0]:
            settled[:] = [now, time.monotonic()]
        return time.monotonic() - settled[1] > 1.5
    answered = set(server.call("system.capabilities")["methods"])
    assert answered >= READS_ONLY, sorted(READS_ONLY - answered)
    wait_until(lambda: server.call("pane.read", {"pane_id": "w1:p1", "source": "visible"})[
        "read"]["text"].strip(), timeout=20, message="the shell's prompt")
    wait_until(quiet_for_a_while, timeout=20, message="the start-up saves")
    # An event (an agent status settling, say) asks for a check of its own, and so may a
    # late redraw of the shell (output): only checks beyond the events published meanwhile
    # and that one come from the requests. Before, the polling asked for one every second.
    before, events_before = counts()
    polling_until = time.monotonic() + 3.2
    while time.monotonic() < polling_until:
        for method in ("pane.list", "workspace.list", "agent.list", "system.tree"):
            server.call(method)
        server.call("pane.read", {"pane_id": "w1:p1", "source": "visible"})
        time.sleep(0.05)
    time.sleep(0.5)
    events = server.call("server.stats")["event_seq"] - events_before
    assert checks() - before <= events + 1
    server.call("workspace.action", {"workspace_id": "w1", "action": "pin"})
    wait_until(lambda: checks() > before, timeout=10, message="a check after the pin")
    wait_until(lambda: place.saved()["windows"][0]["workspaces"][0].get("pinned") is True,
               timeout=10, message="the pin saved")
    assert server.call("server.stats")["session"]["saves"] >= 1
    assert server.stop() == 0
