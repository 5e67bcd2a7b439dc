"""The fleet over real OpenSSH: one local server and ten machines behind a real ``sshd``
(:mod:`fleet_sshd`), each machine its own home, remote server and socket, reached through
one master connection per machine carrying ``cmux bridge``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import Api
from fleet_sshd import Sshd, sshd, start_sshd  # noqa: F401 - the session fixture
from pty_terminal import Terminal

from cmux_core.client import Client
from cmux_core.errors import CmuxError
from cmux_core.testing import ServerProcess, start_server, wait_until

pytestmark = pytest.mark.xdist_group("fleet")

MACHINES = [f"m{i}" for i in range(1, 11)]


@dataclass
class FleetRig:
    sshd: Sshd
    local: ServerProcess
    homes: dict[str, Path]

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        with Client(self.local.socket_path, timeout=60) as c:
            return c.call(method, params)

    def state(self, name: str) -> dict[str, Any]:
        machine: dict[str, Any] = self.call("machine.status", {"machine": name})["machine"]
        return machine

    def wait_state(self, name: str, state: str, timeout: float = 60) -> dict[str, Any]:
        return wait_until(lambda: (m := self.state(name))["state"] == state and m, timeout,
                          interval=0.05, message=f"{name} {state}")

    def add(self, name: str, home: Path, **params: Any) -> None:
        options = params.pop("ssh_options", None) or self.sshd.options(home)
        self.call("machine.add", {"machine": name, "destination": "127.0.0.1",
                                  "ssh_options": options, **params})

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CMUX_")}
        return subprocess.run([sys.executable, "-m", "cmux_core", *args, "--socket",
                               str(self.local.socket_path)], capture_output=True, text=True,
                              env=env, timeout=60)


@pytest.fixture(scope="module")
def rig(sshd: Sshd) -> Iterator[FleetRig]:  # noqa: F811
    local = start_server()
    homes = {name: sshd.home(name) for name in MACHINES}
    fleet = FleetRig(sshd, local, homes)
    try:
        for name in MACHINES:
            fleet.add(name, homes[name], **({"session": "alt"} if name == "m10" else {}))
        for name in MACHINES:
            fleet.wait_state(name, "connected", timeout=90)
        yield fleet
    finally:
        local.stop()
        sshd.stop_remote()


def test_machines_are_saved_validated_and_listed(rig: FleetRig) -> None:
    listed = rig.call("machine.list")["machines"]
    assert [m["name"] for m in listed] == MACHINES
    assert all(m["state"] == "connected" and m["protocol"] == 20 for m in listed)
    saved = rig.local.home / "config" / "cmux" / "machines.toml"
    assert saved.stat().st_mode & 0o777 == 0o600
    assert '[machine.m10]' in saved.read_text()
    assert rig.sshd.remote_socket(rig.homes["m10"], "alt").is_socket()
    assert not rig.sshd.remote_socket(rig.homes["m10"]).exists()
    for bad in ("local", "Box", "a/b", "a:b", "1box", "x" * 33, ""):
        with pytest.raises(CmuxError) as err:
            rig.call("machine.add", {"machine": bad, "destination": "127.0.0.1"})
        assert err.value.code == "invalid_machine", bad
    for field, value in (("destination", "-oProxyCommand=x"), ("destination", "a b")):
        with pytest.raises(CmuxError, match="invalid destination"):
            rig.call("machine.add", {"machine": "z", field: value})
    with pytest.raises(CmuxError, match="set by the fleet"):
        rig.call("machine.add", {"machine": "z", "destination": "h",
                                 "ssh_options": {"ControlPath": "/tmp/x"}})
    with pytest.raises(CmuxError, match="already exists"):
        rig.call("machine.add", {"machine": "m1", "destination": "h"})
    assert "[machine.z]" not in saved.read_text()
    with pytest.raises(CmuxError) as err:
        rig.call("machine.status", {"machine": "nope"})
    assert err.value.code == "machine_not_found"


def test_calls_go_over_the_forwarded_socket_in_the_private_directory(rig: FleetRig
                                                                     ) -> None:
    control = rig.local.socket_path.parent / f"{rig.local.socket_path.name}.fleet"
    assert control.stat().st_mode & 0o777 == 0o700
    for name in MACHINES:
        assert rig.state(name)["transport"] == "forward", name
        forwarded = control / f"{name}.sock"
        assert forwarded.is_socket() and forwarded.stat().st_mode & 0o077 == 0
    assert rig.call("pane.get", {"pane_id": "m1/w1:p1"})["pane"]["pane_id"] == "m1/w1:p1"


def test_a_sshd_without_forwarding_falls_back_to_the_bridge(rig: FleetRig) -> None:
    strict = start_sshd(rig.sshd.root / "strict", config="AllowStreamLocalForwarding no\n")
    try:
        home = strict.home("strict")
        rig.add("strict", home, ssh_options=strict.options(home))
        assert rig.wait_state("strict", "connected")["transport"] == "bridge"
        check = rig.cli("machine", "check", "strict")
        assert check.returncode == 0 and "through cmux bridge" in check.stdout, check.stdout
        assert rig.call("pane.get", {"pane_id": "strict/w1:p1"})["machine"] == "strict"
        merged = rig.call("agent.list", {"machines": ["strict", "m1"]})
        assert merged["unreachable"] == []
        found = rig.call("pane.wait_for_output", {
            "pane_id": "strict/w1:p1", "match": {"type": "regex", "value": "."},
            "source": "recent", "timeout_ms": 20000})
        assert found["machine"] == "strict"
        control = rig.local.socket_path.parent / f"{rig.local.socket_path.name}.fleet"
        assert not (control / "strict.sock").exists()
    finally:
        rig.call("machine.remove", {"machine": "strict"})
        strict.stop()


def test_qualified_ids_reach_each_machine(rig: FleetRig) -> None:
    api = Api(rig.local)
    try:
        local_list = api("agent.list")
        assert "unreachable" not in local_list
        for name in MACHINES:
            api("pane.report_agent", {"pane_id": f"{name}/w1:p1", "source": "test",
                                      "agent": "claude", "state": "blocked"})
        merged = rig.call("agent.list", {"machines": "all"})
        remote = [a for a in merged["agents"] if a["machine"] != "local"]
        assert sorted(a["machine"] for a in remote) == sorted(MACHINES)
        assert {a["pane_id"] for a in remote} == {f"{n}/w1:p1" for n in MACHINES}
        assert all(a["agent_status"] == "blocked" for a in remote)
        assert merged["unreachable"] == []
        two = rig.call("agent.list", {"machines": ["m2", "m3"]})["agents"]
        assert [a["machine"] for a in two] == ["m2", "m3"]
        panes = rig.call("pane.list", {"machines": ["m3", "local", "m2"]})
        assert [(p["machine"], p["pane_id"]) for p in panes["panes"]][:1] == [
            ("m3", "m3/w1:p1")]
        assert [p["machine"] for p in panes["panes"]] == sorted(
            (p["machine"] for p in panes["panes"]), key=["m3", "local", "m2"].index)
        assert {p["machine"] for p in panes["panes"]} == {"m3", "local", "m2"}
        assert panes["unreachable"] == []
        assert api("agent.list") == local_list

        rig.call("pane.send_text", {"pane_id": "m4/w1:p1", "text": "echo fleet-$((6*7))\n"})
        found = rig.call("pane.wait_for_output", {"pane_id": "m4/w1:p1", "match":
                                                  {"type": "substring", "value": "fleet-42"},
                                                  "timeout_ms": 30000})
        assert found["machine"] == "m4" and found["pane_id"] == "m4/w1:p1"
        read = rig.call("pane.read", {"pane_id": "w1:p1", "machines": "m4"})
        assert "fleet-42" in read["read"]["text"] and read["machine"] == "m4"
        assert "fleet-42" not in api("pane.read", {"pane_id": "w1:p1"})["read"]["text"]
        with pytest.raises(CmuxError, match="acts on one machine"):
            rig.call("pane.read", {"pane_id": "w1:p1", "machines": "all"})
        with pytest.raises(CmuxError, match=r"machine\.relay"):
            rig.call("pane.attach", {"pane_id": "m4/w1:p1"})
        with pytest.raises(CmuxError, match="a call goes to one machine"):
            rig.call("pane.move", {"pane_id": "m1/w1:p1", "target_pane_id": "m2/w1:p1"})
        waited = rig.call("agent.wait", {"target": "w1:p1", "machines": ["m5", "m6"],
                                         "until": ["blocked"], "timeout_ms": 20000})
        assert waited["machine"] in ("m5", "m6")
        assert waited["agent"]["pane_id"] == f"{waited['machine']}/w1:p1"
    finally:
        api.close()


def test_events_from_machines_carry_their_name(rig: FleetRig) -> None:
    with Client(rig.local.socket_path, timeout=30) as c:
        started = c.call("events.subscribe", {
            "machines": ["local", "m7"],
            "subscriptions": [{"type": "pane.agent_status_changed"}]})
        assert started["machines"] == ["local", "m7"]
        rig.call("pane.report_agent", {"pane_id": "m7/w1:p1", "source": "test",
                                       "agent": "claude", "state": "working"})
        event = _next_event(c)
        assert event["data"]["machine"] == "m7"
        assert event["data"]["pane_id"] == "m7/w1:p1"
        rig.call("pane.report_agent", {"pane_id": "w1:p1", "source": "test",
                                       "agent": "claude", "state": "working"})
        event = _next_event(c)
        assert event["data"]["machine"] == "local" and event["data"]["pane_id"] == "w1:p1"


def test_machine_state_events_follow_a_cut_link_and_the_book(rig: FleetRig) -> None:
    with Client(rig.local.socket_path, timeout=60) as c:
        c.call("events.subscribe", {"subscriptions": [{"type": "machine.state_changed"},
                                                      {"type": "machine.removed"}]})
        os.kill(rig.state("m5")["master_pid"], signal.SIGKILL)
        seen = _machine_events(c, "m5", until="connected")
        first = seen[0]
        assert first["event"] == "machine_state_changed"
        assert first["data"]["state"] == "offline" and first["data"]["previous"] == "connected"
        assert first["data"]["reason"] and "ssh_error" in first["data"]
        assert [e["data"]["state"] for e in seen][-2:] == ["connecting", "connected"]
        assert seen[-1]["data"]["connects"] == first["data"]["connects"] + 1

        rig.add("passing", rig.homes["m5"])
        seen = _machine_events(c, "passing", until="connected")
        assert seen[0]["data"]["state"] == "connecting"
        assert seen[0]["data"]["previous"] is None
        rig.call("machine.disable", {"machine": "passing"})
        gone = _machine_events(c, "passing", until="offline")[-1]["data"]
        assert gone["reason"] == "disabled" and gone["previous"] == "connected"
        rig.call("machine.remove", {"machine": "passing"})
        removed = _machine_events(c, "passing", until="removed")[-1]
        assert removed == {"event": "machine_removed", "data": {
            "type": "machine_removed", "machine": "passing", "new_name": None}}


def test_a_merged_stream_follows_a_machine_across_a_cut_link(rig: FleetRig) -> None:
    with Client(rig.local.socket_path, timeout=60) as c:
        c.call("events.subscribe", {"machines": "all", "subscriptions": [
            {"type": "pane.agent_status_changed"}]})
        os.kill(rig.state("m7")["master_pid"], signal.SIGKILL)
        # Status changes of earlier tests' panes may still come in: only m7's link matters.
        link = next(e for e in iter(lambda: _next_event(c), None)
                    if e["event"].startswith("machine."))
        assert link == {"event": "machine.link_closed", "data": {"machine": "m7"}}
        assert _next_event_of(c, "machine.link_restored") == {
            "event": "machine.link_restored", "data": {"machine": "m7"}}
        assert rig.state("m7")["state"] == "connected"
        for state in ("blocked", "idle"):
            rig.call("pane.report_agent", {"pane_id": "m7/w1:p1", "source": "test",
                                           "agent": "claude", "state": state})
            event = _next_event_of(c, "pane_agent_status_changed", pane_id="m7/w1:p1")
            assert event["data"]["machine"] == "m7", event
            assert event["data"]["agent_status"] == state
        # Another machine's stream was never cut: it goes on as it was.
        new = rig.call("pane.split", {"pane_id": "m1/w1:p1"})["pane"]["pane_id"]
        rig.call("pane.report_agent", {"pane_id": new, "source": "test",
                                       "agent": "claude", "state": "blocked"})
        event = _next_event_of(c, "pane_agent_status_changed", pane_id=new)
        assert event["data"]["machine"] == "m1"


def test_a_merged_stream_waits_for_a_machine_that_is_down(rig: FleetRig) -> None:
    rig.call("machine.disable", {"machine": "m4"})
    try:
        with Client(rig.local.socket_path, timeout=60) as c:
            started = c.call("events.subscribe", {"machines": ["local", "m4"],
                                                  "subscriptions": [
                                                      {"type": "pane.agent_status_changed"}]})
            assert started["waiting"] == ["m4"]
            rig.call("machine.enable", {"machine": "m4"})
            assert _next_event(c) == {"event": "machine.link_restored",
                                      "data": {"machine": "m4"}}
            new = rig.call("pane.split", {"pane_id": "m4/w1:p1"})["pane"]["pane_id"]
            rig.call("pane.report_agent", {"pane_id": new, "source": "test",
                                           "agent": "claude", "state": "working"})
            event = _next_event(c)
            assert event["data"]["machine"] == "m4" and event["data"]["pane_id"] == new
    finally:
        if not rig.state("m4")["enabled"]:
            rig.call("machine.enable", {"machine": "m4"})
        rig.wait_state("m4", "connected")


def _machine_events(c: Client, name: str, until: str) -> list[dict[str, Any]]:
    """The machine events about ``name`` up to the first in state ``until`` (``removed``:
    up to its removal)."""
    seen = []
    while True:
        event = _next_event(c)
        if event["data"].get("machine") != name:
            continue
        seen.append(event)
        if event["event"] == "machine_removed" if until == "removed" else \
                event["data"].get("state") == until:
            return seen


def _next_event_of(c: Client, kind: str, **data: Any) -> dict[str, Any]:
    """The next event of ``kind`` whose data has ``data``'s values; others are passed by."""
    while True:
        event = _next_event(c)
        if event["event"] == kind and all(event["data"].get(k) == v for k, v in data.items()):
            return event


def _next_event(c: Client) -> dict[str, Any]:
    while True:
        line = json.loads(c._readline(30))  # the stream after the reply
        if "event" in line:
            return dict(line)


def test_machine_flag_runs_any_command_there(rig: FleetRig) -> None:
    done = rig.cli("--machine", "m8", "pane", "list", "--json")
    assert done.returncode == 0, done.stderr
    panes = json.loads(done.stdout)["panes"]
    assert [p["pane_id"] for p in panes] == ["w1:p1"]
    assert panes[0]["cwd"] != str(rig.local.home)
    split = rig.cli("--machine", "m8", "pane", "split")
    assert split.returncode == 0, split.stderr
    assert rig.call("pane.get", {"pane_id": f"m8/{split.stdout.strip()}"})["machine"] == "m8"
    rig.call("pane.report_agent", {"pane_id": "m8/w1:p1", "source": "test",
                                   "agent": "claude", "state": "idle"})
    agents = rig.cli("agent", "list", "--machines", "all")
    assert agents.returncode == 0, agents.stderr
    assert agents.stdout.startswith("MACHINE") and "m8/w1:p1" in agents.stdout
    board = rig.cli("agents", "--machines", "all", "--color", "never")
    assert board.returncode == 0, board.stderr
    assert "MACHINE" in board.stdout.splitlines()[0]
    assert any(line.split()[1:2] == ["m8"] for line in board.stdout.splitlines())
    listed = rig.cli("machine", "list")
    assert listed.returncode == 0 and "m10" in listed.stdout and "connected" in listed.stdout
    check = rig.cli("machine", "check", "m9")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "protocol 20" in check.stdout and "round trip" in check.stdout
    assert "forwarded over the master" in check.stdout
    install = rig.cli("machine", "install", "nope")
    assert install.returncode == 1 and "machine_not_found" in install.stderr
    missing = rig.cli("--machine", "nope", "pane", "list")
    assert missing.returncode == 1 and "machine_not_found" in missing.stderr


def test_agents_once_shows_the_whole_fleet_by_default(rig: FleetRig) -> None:
    for pane in ("m8/w1:p1", "w1:p1"):
        rig.call("pane.report_agent", {"pane_id": pane, "source": "test", "agent": "claude",
                                       "state": "blocked"})
    rig.add("down", rig.homes["m1"], ssh_options={**rig.sshd.options(rig.homes["m1"]),
                                                   "Port": "1"})
    try:
        rig.wait_state("down", "offline")
        board = rig.cli("agents", "--color", "never")
        assert board.returncode == 0, board.stderr
        lines = board.stdout.splitlines()
        assert "MACHINE" in lines[0]
        # Grouped per machine in the book's order, this one first, each with its state.
        headings = [line.split(" · ")[0].strip() for line in lines if " · " in line]
        assert headings == ["local", *MACHINES, "down"], headings
        assert any(line.strip().startswith("local · local · ") for line in lines)
        assert any(line.strip().startswith("m8 · connected · ") for line in lines)
        assert any(line.strip().startswith("down · offline (") for line in lines)
        m8 = lines.index(next(line for line in lines if line.strip().startswith("m8 · ")))
        assert "m8/w1:p1" in lines[m8 + 1]

        alone = rig.cli("agents", "--machines", "local", "--color", "never")
        assert alone.returncode == 0, alone.stderr
        assert "MACHINE" not in alone.stdout and " · " not in alone.stdout
        assert "w1:p1" in alone.stdout and "m8/" not in alone.stdout

        listed = rig.cli("agents", "--json")
        assert listed.returncode == 0, listed.stderr
        agents = json.loads(listed.stdout)["agents"]
        assert {"local", "m8"} <= {a["machine"] for a in agents}
        assert all(a["pane_id"].startswith(f"{a['machine']}/") for a in agents
                   if a["machine"] != "local")
        local_only = json.loads(rig.cli("agents", "--json", "--machines", "local").stdout)
        assert local_only["agents"] and {a["machine"] for a in local_only["agents"]} == {
            "local"}
    finally:
        rig.call("machine.remove", {"machine": "down"})


def test_a_merged_agent_list_goes_through_this_machines_view(rig: FleetRig) -> None:
    reported = {"m3/w1:p1": "blocked", "m5/w1:p1": "working", "w1:p1": "blocked"}
    for pane, state in reported.items():
        rig.call("pane.report_agent", {"pane_id": pane, "source": "test", "agent": "claude",
                                       "state": state})
    try:
        with Client(rig.local.socket_path, timeout=60) as c:
            c.call("agent.view.set", {"source": "test", "label": "blocked",
                                      "filter": {"op": "in", "field": "status",
                                                 "values": ["blocked"]}})
            viewed = c.call("agent.list", {"view": True, "machines": "all"})
            panes = [a["pane_id"] for a in viewed["agents"]]
            # The view is this machine's, applied to every machine's rows.
            assert "m3/w1:p1" in panes and "w1:p1" in panes and "m5/w1:p1" not in panes
            assert panes.index("w1:p1") < panes.index("m3/w1:p1")
            every = c.call("agent.list", {"machines": "all"})["agents"]
            assert "m5/w1:p1" in [a["pane_id"] for a in every]
    finally:
        for pane in reported:
            rig.call("pane.clear_agent_authority", {"pane_id": pane, "source": "test"})


def test_attach_a_remote_pane_through_the_bridge(rig: FleetRig) -> None:
    term = Terminal(rig.local, "attach", "m9/w1:p1", kitty=False, size=(24, 80), cell=(0, 0))
    try:
        term.until(lambda: term.answers > 0 or b"$" in term.out or b"#" in term.out)
        term.type(b"echo attached-$((40+2))\r")
        wait_until(lambda: "attached-42" in rig.call(
            "pane.read", {"pane_id": "m9/w1:p1"})["read"]["text"], 30,
            message="typed text in the remote pane")
        term.type(b"\x1c")
        assert term.exited() == 0
    finally:
        if term.proc.poll() is None:
            term.proc.kill()


def test_agents_watch_shows_every_machine_live(rig: FleetRig) -> None:
    rig.call("pane.report_agent", {"pane_id": "m6/w1:p1", "source": "test",
                                   "agent": "claude", "state": "idle"})
    term = Terminal(rig.local, "agents", "--watch", "--machines", "all", kitty=False,
                    size=(40, 120), cell=(0, 0))
    try:
        term.until(lambda: term.shows("m6/w1:p1") and term.shows("MACHINE"))
        new = rig.call("pane.split", {"pane_id": "m6/w1:p1"})["pane"]["pane_id"]
        # The stream from m6 may open after the list was first drawn: report until a
        # report's event reaches the screen.
        deadline = time.monotonic() + 60
        states = iter(["blocked", "working"] * 100)
        while not term.shows(new):
            assert time.monotonic() < deadline, "the remote agent never showed"
            rig.call("pane.report_agent", {"pane_id": new, "source": "test",
                                           "agent": "claude", "state": next(states)})
            for _ in range(10):
                term.pump()
        # Grouped per machine, each with its state; one that is down says so and why,
        # and the board follows the fleet's own events as machines come and go.
        assert term.shows("m6 · connected") and term.shows("local · local")
        rig.add("down", rig.homes["m1"], ssh_options={**rig.sshd.options(rig.homes["m1"]),
                                                       "Port": "1"})
        term.until(lambda: term.shows("down · offline ("))
        rig.call("machine.remove", {"machine": "down"})
        term.until(lambda: not term.shows("down ·"))
        term.type(b"q")
        assert term.exited() == 0
    finally:
        if term.proc.poll() is None:
            term.proc.kill()


def test_ui_groups_machines_and_shows_a_remote_pane_through_the_link(rig: FleetRig) -> None:
    rig.call("pane.report_agent", {"pane_id": "m9/w1:p1", "source": "test",
                                   "agent": "claude", "state": "blocked"})
    rig.call("pane.send_text", {"pane_id": "m9/w1:p1", "text": "echo far-$((20+3))\n"})
    # With machines saved, the ui shows the whole fleet unless told otherwise.
    term = Terminal(rig.local, "ui", kitty=False, size=(60, 120), cell=(0, 0))
    try:
        term.until(lambda: term.shows("local · local") and term.shows("m1 · connected"))
        term.type(b"q")
        assert term.exited() == 0
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
    term = Terminal(rig.local, "ui", "--machines", "m9", kitty=False, size=(30, 120),
                    cell=(0, 0))
    try:
        term.until(lambda: term.shows("m9 · connected · 1 agent") and term.shows("far-23"))
        term.type(b"i")
        term.until(lambda: term.shows("returns to the sidebar"))
        term.type(b"echo typed-$((5*5))\r")
        wait_until(lambda: "typed-25" in rig.call(
            "pane.read", {"pane_id": "m9/w1:p1"})["read"]["text"], 30,
            message="typed text in the remote pane")
        term.until(lambda: term.shows("typed-25"))
        term.type(b"\x1c")
        term.until(lambda: term.shows("q quit"))
        term.type(b"q")
        assert term.exited() == 0
    finally:
        if term.proc.poll() is None:
            term.proc.kill()


def test_cut_links_reconnect_and_never_hang(rig: FleetRig) -> None:
    before = rig.state("m2")
    os.kill(before["master_pid"], signal.SIGKILL)
    started = time.monotonic()
    for _ in range(20):
        try:
            rig.call("pane.read", {"pane_id": "m2/w1:p1"})
        except CmuxError as exc:
            assert exc.code in ("machine_offline", "machine_timeout")
    assert time.monotonic() - started < 30
    back = rig.wait_state("m2", "connected")
    assert back["connects"] == before["connects"] + 1
    assert back["master_pid"] != before["master_pid"]

    rig.sshd.stop_remote(rig.homes["m3"])
    wait_until(lambda: rig.state("m3")["connects"] > 1 and rig.state("m3")["state"]
               == "connected", 60, interval=0.05, message="m3 back with a new server")
    assert [p["pane_id"] for p in rig.call("pane.list", {"workspace_id": "m3/w1"})["panes"]
            ] == ["m3/w1:p1"]

    rig.call("machine.disable", {"machine": "m10"})
    assert rig.state("m10")["state"] == "offline" and rig.state("m10")["reason"] == "disabled"
    merged = rig.call("agent.list", {"machines": "all"})
    assert "m10" not in {a["machine"] for a in merged["agents"]}
    with pytest.raises(CmuxError) as err:
        rig.call("pane.read", {"pane_id": "m10/w1:p1"})
    assert err.value.code == "machine_offline"
    rig.call("machine.enable", {"machine": "m10"})
    rig.wait_state("m10", "connected")
    rig.call("machine.rename", {"machine": "m10", "new_name": "tenth"})
    rig.wait_state("tenth", "connected")
    read = rig.call("pane.read", {"pane_id": "tenth/w1:p1"})
    assert read["read"]["pane_id"] == "tenth/w1:p1"
    rig.call("machine.rename", {"machine": "tenth", "new_name": "m10"})
    rig.wait_state("m10", "connected")


def test_failure_states_say_why(rig: FleetRig, tmp_path: Path) -> None:
    home = rig.homes["m1"]
    empty_known = tmp_path / "known_hosts"
    empty_known.touch()
    rig.add("stranger", home, ssh_options=rig.sshd.options(home, empty_known))
    stranger = rig.wait_state("stranger", "auth_failed")
    assert "host key" in stranger["reason"]
    assert "Host key verification failed" in stranger["ssh_error"]
    rig.call("machine.remove", {"machine": "stranger"})
    rig.add("trusting", home, ssh_options=rig.sshd.options(home, empty_known),
            accept_new=True)
    rig.wait_state("trusting", "connected")
    assert "ssh-ed25519" in empty_known.read_text()
    rig.call("machine.remove", {"machine": "trusting"})

    bare = rig.sshd.home("bare", cmux=False)
    rig.add("bare", bare)
    state = rig.wait_state("bare", "incompatible")
    assert "cmux machine install" in state["reason"]
    # What the reason says to do brings it up: the running cmux is copied there over ssh.
    with Client(rig.local.socket_path, timeout=600) as c:
        core = {"machine": "bare", "plugins": []}
        installed = c.call("machine.install", core)
        assert installed["copied"] and installed["version"]
        rig.wait_state("bare", "connected")
        assert c.call("machine.install", core)["copied"] == []
    refused = {**rig.sshd.options(home), "Port": "1"}
    rig.add("gone", home, ssh_options=refused)
    state = rig.wait_state("gone", "offline")
    assert "refused" in state["ssh_error"].lower()
    wrong_key = {**rig.sshd.options(home), "IdentityFile": str(rig.sshd.root / "host_key")}
    rig.add("denied", home, ssh_options=wrong_key)
    state = rig.wait_state("denied", "auth_failed")
    assert "Permission denied" in state["ssh_error"]
    for name in ("bare", "gone", "denied"):
        rig.call("machine.remove", {"machine": name})
    # The server the install's link started on "bare" outlives the link, as on a real
    # machine; the harness stops it, and nothing of it is left.
    assert rig.sshd.remote_sockets(bare)
    rig.sshd.stop_remote(bare)
    assert not rig.sshd.remote_sockets(bare)
    assert not rig.sshd.remote_servers(bare)
    assert [m["name"] for m in rig.call("machine.list")["machines"]] == MACHINES
