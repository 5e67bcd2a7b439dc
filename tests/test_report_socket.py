"""Report-only sockets (``pane.open_report_socket``) against a real server: reports land on
their own pane, everything else is refused, and the socket goes with its pane or its opener.
The last test runs ``cmux machine ssh`` in a pane against a real ``sshd`` on 127.0.0.1 and
sees the remote's hook report arrive through the forwarded socket.
"""

from __future__ import annotations

import json
import shlex
import socket
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Api
from fleet_sshd import Sshd, running_sshd

from cmux_core.testing import ServerProcess, wait_until

ROOT = Path(__file__).resolve().parents[1]
HOOK = ROOT / "hooks" / "cmux-hook"
REPORT = {"source": "cmux:claude", "agent": "claude", "state": "working"}


class ReportLine:
    """A plain client of a report socket (no schema checks: it answers errors by design)."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        try:
            self.sock.connect(path)
        except OSError:
            self.sock.close()
            raise
        self.file = self.sock.makefile("rb")

    def __call__(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.sock.sendall(json.dumps({"id": 1, "method": method,
                                      "params": params or {}}).encode() + b"\n")
        reply: dict[str, Any] = json.loads(self.file.readline())
        return reply

    def close(self) -> None:
        self.file.close()
        self.sock.close()


@pytest.fixture(scope="module")
def cmux_server(shared_server: ServerProcess) -> ServerProcess:
    """One server for the module: each test works in panes of its own."""
    return shared_server


@pytest.fixture
def opened(api: Api) -> Iterator[tuple[str, dict[str, Any], ReportLine]]:
    pane = api.run(["sh"])
    result = api("pane.open_report_socket", {"pane_id": pane})
    line = ReportLine(result["path"])
    try:
        yield pane, result, line
    finally:
        line.close()


def agent_row(api: Api, pane: str) -> dict[str, Any] | None:
    return next((r for r in api("agent.list")["agents"] if r["pane_id"] == pane), None)


def test_a_report_through_the_socket_shows_the_agent_on_its_pane(
        api: Api, opened: tuple[str, dict[str, Any], ReportLine]) -> None:
    pane, result, line = opened
    assert result["type"] == "report_socket" and result["pane_id"] == pane
    path = Path(result["path"])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert line("ping")["ok"]
    assert agent_row(api, pane) is None
    reply = line("pane.report_agent", {**REPORT, "message": "from afar"})
    assert reply["ok"], reply
    row = agent_row(api, pane)
    assert row is not None and row["agent"] == "claude" and row["agent_status"] == "working", row
    # Its own pane's id, in any of its forms, is accepted too.
    assert line("pane.report_metadata", {"pane_id": pane, "source": "cmux:claude",
                                         "tokens": {"tool": "Bash"}})["ok"]


def test_other_methods_and_other_panes_are_forbidden(
        api: Api, opened: tuple[str, dict[str, Any], ReportLine]) -> None:
    pane, _result, line = opened
    other = api("pane.split", {"pane_id": pane})["pane"]["pane_id"]
    other_surface = api("pane.get", {"pane_id": other})["pane"]
    for method, params in [("pane.send_text", {"pane_id": pane, "text": "echo hi\n"}),
                           ("pane.list", {}), ("pane.open_report_socket", {}),
                           ("events.subscribe", {"subscriptions": ["pane.created"]})]:
        reply = line(method, params)
        assert not reply["ok"] and reply["error"]["code"] == "forbidden", (method, reply)
        assert "report-only" in reply["error"]["message"]
    for params in ({"pane_id": other}, {"pane_id": "w9:p9"},
                   {"surface_id": other_surface.get("surface_id") or other}):
        reply = line("pane.report_agent", {**REPORT, **params})
        assert not reply["ok"] and reply["error"]["code"] == "forbidden", (params, reply)
    assert agent_row(api, other) is None and agent_row(api, pane) is None
    assert line("ping")["ok"], "a refused request leaves the socket serving"


def test_closing_the_pane_removes_the_socket(api: Api, cmux_server: ServerProcess) -> None:
    pane = api.run(["sh"])
    path = Path(api("pane.open_report_socket", {"pane_id": pane})["path"])
    assert path.exists()
    api("pane.close", {"pane_id": pane})
    wait_until(lambda: not path.exists())
    with pytest.raises(OSError):
        ReportLine(str(path))


def test_the_opener_leaving_closes_the_socket_and_clears_its_reports(
        cmux_server: ServerProcess, api: Api) -> None:
    pane = api.run(["sh"])
    opener = Api(cmux_server)
    path = opener("pane.open_report_socket", {"pane_id": pane})["path"]
    line = ReportLine(path)
    assert line("pane.report_agent", REPORT)["ok"]
    assert agent_row(api, pane) is not None
    line.close()
    opener.close()
    wait_until(lambda: not Path(path).exists())
    wait_until(lambda: agent_row(api, pane) is None)


# -- through a real ssh -----------------------------------------------------------------------


@pytest.fixture
def sshd() -> Iterator[Sshd]:
    with running_sshd() as server:
        yield server


def test_cmux_machine_ssh_carries_a_remote_hook_report_to_its_pane(
        api: Api, sshd: Sshd) -> None:
    payload = json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": "hello"})
    remote = (f"printf %s {shlex.quote(payload)} | {HOOK} claude && "
              'echo REPORTED "$(stat -c %a "$CMUX_SOCKET_PATH")" && read line')
    ssh = shlex.join([sys.executable, "-m", "cmux_core", "machine", "ssh", "127.0.0.1",
                      *sshd.ssh_args(), "--", remote])
    # In a shell that outlives ssh, so what clears the agent is the socket closing, not
    # the pane's process exiting.
    pane = api.run(["sh", "-c", f"{ssh}; echo SSH-ENDED $?; exec sleep 600"])
    api.wait_line(pane, "REPORTED 600")  # the forwarded end is the remote user's alone
    row = wait_until(lambda: agent_row(api, pane))
    assert row["agent"] == "claude" and row["agent_status"] == "working", row
    api("pane.send_text", {"pane_id": pane, "text": "\r"})
    # ssh ends with the remote command; the report socket and its authority go with it.
    api.wait_line(pane, "SSH-ENDED 0")
    wait_until(lambda: agent_row(api, pane) is None)
