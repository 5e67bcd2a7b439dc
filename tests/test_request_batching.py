"""Requests a client pipelines: what the server reads ahead is bounded in bytes as well as
lines, and replies gathered for one write are never held behind a request that waits."""

from __future__ import annotations

import json
import socket
import time

from conftest import Api, Raw
from test_backpressure import _flood

from cmux_core.testing import ServerProcess, wait_until

MiB = 1 << 20


def _wait_request(pane: str, timeout_ms: int) -> bytes:
    return json.dumps({"id": "w", "method": "pane.wait_for_output", "params": {
        "pane_id": pane, "timeout_ms": timeout_ms,
        "match": {"type": "substring", "value": "never printed here"}}}).encode() + b"\n"


def test_big_lines_behind_a_wait_are_read_ahead_up_to_a_mebibyte_not_sixteen_lines(
        cmux_server: ServerProcess, api: Api) -> None:
    before = api("server.stats")
    pad = "x" * (512 * 1024)
    line = json.dumps({"method": "ping", "params": {"pad": pad}}).encode() + b"\n"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(cmux_server.socket_path))
    try:
        sock.sendall(_wait_request(api.focused_pane(), 600_000))
        wait_until(lambda: api("server.stats")["pending_waits"] == before["pending_waits"] + 1)
        sent = _flood(sock, line * 40, stall_s=1.0)
        # 16 queued lines of 512 KiB would be 8 MiB read ahead; the byte cap keeps it to
        # about 1 MiB plus one line, one read and the socket's buffers.
        assert sent < 4 * MiB, f"the server read {sent / MiB:.1f} MiB ahead of a wait"
        assert api("ping")["type"] == "pong"
    finally:
        sock.close()
    wait_until(lambda: api("server.stats")["connections"] == before["connections"], 30,
               message="the connection to be gone")


def test_a_reply_is_not_held_behind_the_wait_pipelined_after_it(
        cmux_server: ServerProcess, api: Api) -> None:
    pane = api.focused_pane()
    with Raw(cmux_server.socket_path, timeout=20) as raw:
        started = time.monotonic()
        raw.send(b'{"id":1,"method":"ping"}\n{"id":2,"method":"ping"}\n'
                 + _wait_request(pane, 8_000))
        first, second = raw.line(), raw.line()
        answered = time.monotonic() - started
        assert (first["id"], second["id"]) == (1, 2)
        # Generous on a loaded machine, far below the wait's 8 s.
        assert answered < 5.0, f"the pings came back with the wait, after {answered:.1f} s"
        assert raw.line()["id"] == "w"


def test_a_thousand_pipelined_requests_come_back_in_order_with_errors_in_place(
        cmux_server: ServerProcess) -> None:
    lines = []
    for i in range(1000):
        lines.append(b'{"id":%d,"method":"ping"}\n' % i if i % 7 else
                     b'{"id":%d,"method":"no.such.method"}\n' % i)
    with Raw(cmux_server.socket_path, timeout=30) as raw:
        raw.send(b"".join(lines))
        replies = [raw.line() for _ in range(1000)]
    assert [r["id"] for r in replies] == list(range(1000))
    assert all(r["ok"] is bool(i % 7) for i, r in enumerate(replies))
