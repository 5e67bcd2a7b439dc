"""Report-only sockets (``pane.open_report_socket``) against a real server: reports land on
their own pane, everything else is refused, and the socket goes with its pane or its opener.
The last test runs ``cmux machine ssh`` in a pane against a real ``sshd`` on 127.0.0.1 and
sees the remote's hook report arrive through the forwarded socket.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Api

from cmux_core.testing import ServerProcess, wait_until

ROOT = Path(__file__).resolve().parents[1]
HOOK = ROOT / "hooks" / "cmux-hook"
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """An sshd on 127.0.0.1 with its own host key that lets this user in with a fresh key;
    yields its port and the client key."""
    if not os.access(SSHD, os.X_OK) or shutil.which("ssh") is None:
        pytest.skip("OpenSSH's sshd and ssh are not installed")
    keys = tmp_path / "keys"
    keys.mkdir(mode=0o700)
    for name in ("host", "client"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", keys / name],
                       check=True)
    (keys / "authorized_keys").write_bytes((keys / "client.pub").read_bytes())
    port = _free_port()
    config = keys / "sshd_config"
    config.write_text(f"Port {port}\nListenAddress 127.0.0.1\nHostKey {keys / 'host'}\n"
                      f"AuthorizedKeysFile {keys / 'authorized_keys'}\n"
                      f"PidFile {keys / 'sshd.pid'}\nStrictModes no\nUsePAM no\n"
                      "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                      "PermitRootLogin prohibit-password\nAllowStreamLocalForwarding yes\n"
                      "LogLevel ERROR\n")
    if os.getuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    log = keys / "sshd.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([SSHD, "-D", "-e", "-f", config], stderr=out)
    try:
        wait_until(lambda: proc.poll() is not None or _accepts(port))
        assert proc.poll() is None, log.read_text()
        yield port, keys / "client"
    finally:
        proc.terminate()
        proc.wait(10)


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
    except OSError:
        return False
    return True


def test_cmux_machine_ssh_carries_a_remote_hook_report_to_its_pane(
        api: Api, sshd: tuple[int, Path]) -> None:
    port, key = sshd
    payload = json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": "hello"})
    remote = f"printf %s {shlex.quote(payload)} | {HOOK} claude && echo REPORTED && read line"
    ssh = shlex.join([sys.executable, "-m", "cmux_core", "machine", "ssh", "127.0.0.1",
                      "-p", str(port), "-i", str(key), "-F", "/dev/null",
                      "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                      "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
                      "--", remote])
    # In a shell that outlives ssh, so what clears the agent is the socket closing, not
    # the pane's process exiting.
    pane = api.run(["sh", "-c", f"{ssh}; echo SSH-ENDED $?; exec sleep 600"])
    api.wait_line(pane, "REPORTED")
    row = wait_until(lambda: agent_row(api, pane))
    assert row["agent"] == "claude" and row["agent_status"] == "working", row
    api("pane.send_text", {"pane_id": pane, "text": "\r"})
    # ssh ends with the remote command; the report socket and its authority go with it.
    api.wait_line(pane, "SSH-ENDED 0")
    wait_until(lambda: agent_row(api, pane) is None)
