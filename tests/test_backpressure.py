"""Clients that write without reading, and subscribers that stop reading, cost the server a
bounded amount of memory and never stall it for anyone else."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

from conftest import Api, Raw

from cmux_core.testing import ServerProcess, wait_until

MiB = 1 << 20
PING = b'{"method":"ping"}\n'


def _flood(sock: socket.socket, data: bytes, stall_s: float = 1.5,
           limit_s: float = 60.0) -> int:
    """Write ``data`` without reading; stop once the server took nothing for ``stall_s``.
    Returns the bytes the server accepted."""
    sock.setblocking(False)
    view = memoryview(data)
    sent = 0
    progress = time.monotonic()
    deadline = progress + limit_s
    while sent < len(data) and time.monotonic() < deadline:
        try:
            sent += sock.send(view[sent:sent + MiB])
            progress = time.monotonic()
        except BlockingIOError:
            if time.monotonic() - progress > stall_s:
                break
            time.sleep(0.005)
    return sent


def test_a_client_that_writes_without_reading_stops_being_read(
        cmux_server: ServerProcess, api: Api) -> None:
    before = api("server.stats")
    flood = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    flood.connect(str(cmux_server.socket_path))
    data = PING * (50 * MiB // len(PING))
    try:
        sent = _flood(flood, data)
        # Other clients are served while the flood is held back.
        assert api("ping")["type"] == "pong"
        during = api("server.stats")
        assert during["connections"] == before["connections"] + 1
        assert sent < len(data) // 4, f"the server read {sent} bytes it could not answer"
        grown = during["rss_bytes"] - before["rss_bytes"]
        assert grown < 30 * MiB, f"RSS grew by {grown / MiB:.1f} MiB"
    finally:
        flood.close()
    wait_until(lambda: api("server.stats")["connections"] == before["connections"], 30,
               message="the flooding connection to be gone")


def test_a_client_that_writes_and_reads_gets_every_reply_in_order(
        cmux_server: ServerProcess) -> None:
    count = 20_000
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(cmux_server.socket_path))
    payload = b"".join(b'{"id":%d,"method":"ping"}\n' % i for i in range(count))
    writer = threading.Thread(target=sock.sendall, args=(payload,), daemon=True)
    writer.start()
    sock.settimeout(30)
    buf = b""
    ids: list[int] = []
    try:
        while len(ids) < count:
            chunk = sock.recv(65536)
            assert chunk, "the server closed the connection"
            buf += chunk
            *lines, buf = buf.split(b"\n")
            ids.extend(json.loads(line)["id"] for line in lines)
    finally:
        writer.join(10)
        sock.close()
    assert ids == list(range(count))


def test_a_client_that_leaves_while_held_back_cancels_its_wait(
        cmux_server: ServerProcess, api: Api) -> None:
    before = api("server.stats")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(cmux_server.socket_path))
    wait = {"id": "w", "method": "pane.wait_for_output", "params": {
        "pane_id": api.focused_pane(), "timeout_ms": 600_000,
        "match": {"type": "substring", "value": "never printed"}}}
    sock.sendall(json.dumps(wait).encode() + b"\n")
    wait_until(lambda: api("server.stats")["pending_waits"] == before["pending_waits"] + 1)
    # Requests queued behind the wait: the server stops reading them.
    _flood(sock, PING * 200_000, stall_s=1.0)
    sock.close()
    wait_until(lambda: (s := api("server.stats"))["pending_waits"] == before["pending_waits"]
               and s["connections"] == before["connections"], 30,
               message="the wait and the connection to be dropped")


def _rename_many(path: Path, count: int, label: str) -> None:
    """``count`` workspace renames (each one event), pipelined 200 at a time."""
    producer = Raw(path)
    try:
        for start in range(0, count, 200):
            n = min(200, count - start)
            producer.send(b"".join(json.dumps({
                "id": start + i, "method": "workspace.rename",
                "params": {"workspace_id": "w1", "label": f"{start + i} {label}"}}).encode()
                + b"\n" for i in range(n)))
            for _ in range(n):
                assert producer.line()["ok"]
    finally:
        producer.close()


def _subscribe(path: Path) -> Raw:
    sub = Raw(path)
    sub.send(json.dumps({"id": 1, "method": "events.subscribe", "params": {
        "subscriptions": [{"type": "workspace.renamed"}]}}).encode() + b"\n")
    assert sub.line()["result"]["type"] == "subscription_started"
    return sub


def _read_to_eof(sub: Raw, timeout: float = 20.0) -> list[dict[str, object]]:
    """Every line left on ``sub`` until the server closes it."""
    sub.sock.settimeout(timeout)
    data = sub.buf
    while chunk := sub.sock.recv(1 << 16):
        data += chunk
    return [json.loads(line) for line in data.split(b"\n") if line]


def _drop_subscriber(api: Api, path: Path, baseline: int) -> int:
    """Rename until the subscribers are back to ``baseline``; returns the events made."""
    made = 0
    while api("server.stats")["subscribers"] > baseline:
        assert made < 20_000, "the stalled subscriber was never dropped"
        _rename_many(path, 500, "x" * 1000)
        made += 500
    return made


def test_a_subscriber_that_stops_reading_is_dropped_with_the_overflow_notice(
        cmux_server: ServerProcess, api: Api) -> None:
    before = api("server.stats")
    sub = _subscribe(cmux_server.socket_path)
    try:
        made = _drop_subscriber(api, cmux_server.socket_path, before["subscribers"])
        assert api("ping")["type"] == "pong"
        lines = _read_to_eof(sub)
    finally:
        sub.close()
    # What was left for it: the events its socket and the server's write buffer held,
    # then the notice; the rest of its queue was dropped, not buffered.
    assert lines[-1]["event"] == "subscription_overflow"
    assert all(line["event"] == "workspace_renamed" for line in lines[:-1])
    assert len(lines) <= made - 4096
    assert sum(len(json.dumps(line)) for line in lines) < 2 * MiB
    wait_until(lambda: api("server.stats")["connections"] == before["connections"], 30,
               message="the dropped subscriber's connection to be gone")


def test_a_dropped_subscriber_that_leaves_without_reading_is_forgotten(
        cmux_server: ServerProcess, api: Api) -> None:
    before = api("server.stats")
    sub = _subscribe(cmux_server.socket_path)
    _drop_subscriber(api, cmux_server.socket_path, before["subscribers"])
    sub.close()
    wait_until(lambda: api("server.stats")["connections"] == before["connections"], 30,
               message="the dropped subscriber's connection to be gone")
