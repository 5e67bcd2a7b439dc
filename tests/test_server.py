"""Server lifecycle: binding, permissions, peers, shutdown; event subscriptions."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import Api, check_reply

from cmux_core.testing import ServerProcess, start_server, wait_until


def test_socket_and_directory_permissions(shared_server: ServerProcess) -> None:
    mode = stat.S_IMODE(os.stat(shared_server.socket_path).st_mode)
    assert mode == 0o600
    parent = shared_server.socket_path.parent / "nested" / "dir"
    server = start_server(["--socket", str(parent / "x.sock")])
    try:
        assert stat.S_IMODE(os.stat(parent).st_mode) == 0o700
    finally:
        server.stop()


def test_a_directory_named_with_socket_keeps_its_mode(tmp_path: Path) -> None:
    # /tmp or another shared directory must never be made private by a server started in it.
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    server = start_server(["--socket", str(shared / "x.sock")])
    try:
        assert stat.S_IMODE(os.stat(shared).st_mode) == 0o1777
        assert stat.S_IMODE(os.stat(shared / "x.sock").st_mode) == 0o600
    finally:
        server.stop()
    # cmux's own runtime directory is made private even when it already exists.
    runtime = tmp_path / "run"
    (runtime / "cmux").mkdir(parents=True)
    os.chmod(runtime / "cmux", 0o755)
    server = start_server(["--socket", str(runtime / "cmux" / "cmux.sock")],
                          env={"XDG_RUNTIME_DIR": str(runtime)})
    try:
        assert stat.S_IMODE(os.stat(runtime / "cmux").st_mode) == 0o700
    finally:
        server.stop()


def test_refuses_to_start_when_a_live_server_answers(shared_server: ServerProcess) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cmux_core", "serve", "--socket", str(shared_server.socket_path),
         "--quiet"], capture_output=True, text=True, timeout=30, env=shared_server.env)
    assert proc.returncode == 1
    assert "already running" in proc.stderr
    assert shared_server.call("ping")["type"] == "pong"


def test_stale_socket_file_is_replaced(tmp_path_factory: pytest.TempPathFactory) -> None:
    first = start_server()
    path = first.socket_path
    first.process.kill()  # dies without cleaning up: the socket file stays behind
    first.process.wait()
    assert path.exists()
    second = start_server(["--socket", str(path)])
    try:
        assert second.call("ping")["type"] == "pong"
    finally:
        second.stop()


def _pane_pid(server: ServerProcess) -> int:
    info = server.call("pane.process_info", {"pane_id": "w1:p1"})["process_info"]
    return int(info["shell_pid"])


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("how", ["sigterm", "sigint", "server.stop"])
def test_graceful_shutdown(how: str) -> None:
    server = start_server()
    pid = _pane_pid(server)
    if how == "server.stop":
        assert server.call("server.stop") == {"type": "ok"}
    else:
        server.process.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGINT)
    assert server.process.wait(15) == 0
    assert not server.socket_path.exists()
    assert not server.socket_path.with_name(server.socket_path.name + ".fleet").exists()
    wait_until(lambda: _gone(pid), 30, message="pane shell to end")


def _reply_as_nobody(path: Path) -> dict[str, Any]:
    """What the server says to a client running as uid 65534 (a forked child)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child becomes "nobody" and reports what the server said
        try:
            os.setgid(65534)
            os.setuid(65534)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(60)
            s.connect(str(path))
            # The server speaks first to a refused peer, then hangs up: just read.
            reply = b""
            while not reply.endswith(b"\n"):
                chunk = s.recv(4096)
                if not chunk:
                    break
                reply += chunk
            os.write(write_end, reply or b'{"child": "connection closed without a reply"}')
        except BaseException as exc:  # reported to the parent, which fails the test with it
            os.write(write_end, json.dumps({"child": repr(exc)}).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    with os.fdopen(read_end, "rb") as f:
        return dict(json.loads(f.read()))


def test_peer_of_another_uid_is_rejected() -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to connect as another user")
    # A directory another user can reach (the temp dir may be private), opened up on purpose.
    shared = Path(tempfile.mkdtemp(dir="/dev/shm"))
    cmux_server = start_server(["--socket", str(shared / "open.sock")])
    try:
        os.chmod(shared, 0o755)
        os.chmod(cmux_server.socket_path, 0o666)
        reply = _reply_as_nobody(cmux_server.socket_path)
        assert "child" not in reply, reply
        assert reply["ok"] is False and reply["error"]["code"] == "forbidden"
        assert "another user" in reply["error"]["message"]
        assert cmux_server.call("ping")["type"] == "pong"
    finally:
        cmux_server.stop()
        shutil.rmtree(shared, ignore_errors=True)
        shutil.rmtree(cmux_server.home, ignore_errors=True)


def test_pane_close_returns_before_a_hup_ignoring_process_is_killed(api: Api) -> None:
    pane = api.run(["sh", "-c", "trap '' HUP; echo armed; while :; do sleep 1; done"])
    api.wait_text(pane, "armed")
    pid = api("pane.process_info", {"pane_id": pane})["process_info"]["shell_pid"]
    api("pane.close", {"pane_id": pane})
    # The reply came while the process still lives: close never waits for it.
    assert not _gone(pid)
    assert api("ping")["type"] == "pong"
    wait_until(lambda: _gone(pid), 30, message="SIGKILL after the grace period")


def test_subscription_stream_is_ordered_and_schema_valid(api: Api) -> None:
    api("events.subscribe", {"subscriptions": [{"type": "pane.created"},
                                               {"type": "pane.closed"}]})
    other = Api(api.server)
    created = other("pane.split", {})["pane"]["pane_id"]
    other("pane.close", {"pane_id": created})
    first, second = api.event(), api.event()
    assert first["event"] == "pane_created" and first["data"]["pane"]["pane_id"] == created
    assert second == {"event": "pane_closed", "data": {"type": "pane_closed",
                                                       "pane_id": created,
                                                       "workspace_id": "w1"}}
    other.close()


def test_unknown_subscription_type_is_invalid_params(shared_api: Api) -> None:
    api = shared_api
    err = api.error("events.subscribe", {"subscriptions": [{"type": "pane.created"},
                                                           {"type": "pane.exploded"}]})
    assert err["code"] == "invalid_params" and "subscriptions[1].type" in err["message"]


def test_slow_subscriber_is_dropped_without_slowing_anyone(cmux_server: ServerProcess) -> None:
    stalled = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.connect(str(cmux_server.socket_path))
    stalled.sendall(b'{"id":1,"method":"events.subscribe","params":{"subscriptions":'
                    b'[{"type":"tab.renamed"}]}}\n')
    reader = Api(cmux_server)
    reader("events.subscribe", {"subscriptions": [{"type": "tab.renamed"}]})
    seen: list[str] = []
    thread = threading.Thread(target=lambda: seen.extend(
        reader.readline(60)["data"]["label"][:11] for _ in range(10_000)))
    thread.start()
    producer = Api(cmux_server)
    # Renames in batches of as many lines as the server queues per client, each batch
    # answered before the next is sent: one round trip per batch, not per event.
    batch = 16
    for start in range(0, 10_000, batch):
        for i in range(start, start + batch):
            producer.send_request(f"r{i}", "tab.rename", {
                "tab_id": "w1:t1", "label": f"label-{i:05d}-" + "x" * 40})
        for i in range(start, start + batch):
            reply = producer.readline()
            assert reply["id"] == f"r{i}" and reply["ok"], reply
            if i < batch:  # the replies are alike: the schema is checked on the first few
                check_reply("tab.rename", reply)
    thread.join(120)
    # The reading subscriber got every event, in order, despite the stalled one.
    assert len(seen) == 10_000
    assert seen[0] == "label-00000" and seen[-1] == "label-09999"
    assert producer("ping")["type"] == "pong"
    # The stalled subscriber was cut off with a final overflow notice.
    stalled.settimeout(30)
    data = b""
    while chunk := stalled.recv(1 << 20):
        data += chunk
    lines = [json.loads(line) for line in data.splitlines()]
    assert lines[0]["result"]["type"] == "subscription_started"
    assert lines[-1]["event"] == "subscription_overflow"
    assert len(lines) < 10_000
    for conn in (stalled, reader.sock, producer.sock):
        conn.close()


def test_server_stats(api: Api) -> None:
    api("pane.split", {})
    stats = api("server.stats")
    assert stats["type"] == "server_stats" and stats["panes"] == 2 and stats["workspaces"] == 1
    assert stats["connections"] >= 1 and stats["rss_bytes"] > 0
    assert set(stats["loop_lag"]) == {"max_ms", "p99_ms", "recent_max_ms"}
    assert sum(stats["emulators"].values()) == 2
    assert stats["event_loop"] == "uvloop"  # auto, and uvloop is a dependency


def test_event_loop_choice(tmp_path: Path) -> None:
    server = start_server(["--event-loop", "asyncio"])
    try:
        assert server.call("server.stats")["event_loop"] == "asyncio"
        assert server.call("pane.read", {"pane_id": "w1:p1"})["read"]["source"] == "visible"
    finally:
        server.stop()
    config = tmp_path / "config" / "cmux"
    config.mkdir(parents=True)
    (config / "config.toml").write_text('[server]\nevent_loop = "trio"\n')
    done = subprocess.run(
        [sys.executable, "-m", "cmux_core", "serve", "--socket", str(tmp_path / "s.sock")],
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")},
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == f"cmux: {config / 'config.toml'}: [server] event_loop must be one of " \
                          "auto, asyncio, uvloop, not 'trio'\n"
    assert not (tmp_path / "s.sock").exists()


def test_a_server_lifecycle_leaves_nothing_in_the_temporary_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Start, panes, pane graphics, a close and a stop: the temporary directory the test
    and the server share is as empty afterwards as before."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    server = start_server(env={"CMUX_EXPERIMENTAL_KITTY_GRAPHICS": "1"})
    try:
        pane = server.call("tab.create", {"command": ["cat"]})["root_pane"]["pane_id"]
        server.call("pane.close", {"pane_id": pane})
        assert server.call("pane.list")["panes"]
    finally:
        server.stop()
    assert list(scratch.iterdir()) == []
