"""Framing at its limits: ids of any size echoed exactly, nesting past the parser's depth,
and many clients connecting at once."""

from __future__ import annotations

import errno
import json
import socket
from pathlib import Path

import pytest
from conftest import Raw

from cmux_core.api.framing import encode_error, encode_success, parse_line
from cmux_core.errors import CmuxError
from cmux_core.testing import ServerProcess


@pytest.mark.parametrize("id_text", [
    b"18446744073709551616",            # 2**64: one past what orjson reads as an integer
    b"-9223372036854775809",            # one below the smallest 64-bit integer
    b"123456789012345678901234567890123456789",
    b'[1, 18446744073709551616, {"n": 99999999999999999999}]',
])
def test_an_id_beyond_64_bits_is_echoed_exactly(shared_raw: Raw, id_text: bytes) -> None:
    raw = shared_raw
    raw.send(b'{"id":' + id_text + b',"method":"ping"}\n')
    reply = raw.line_bytes()
    compact = id_text.replace(b", ", b",").replace(b": ", b":")
    assert reply.startswith(b'{"id":' + compact + b',"ok":true'), reply
    raw.send(b'{"id":' + id_text + b',"method":"no.such_method"}\n')
    reply = raw.line_bytes()
    assert reply.startswith(b'{"id":' + compact + b',"ok":false'), reply
    assert b'"method_not_found"' in reply


def test_a_big_id_survives_an_envelope_error_too() -> None:
    line = b'{"id":18446744073709551617,"jsonrpc":"1.0","method":"ping"}'
    with pytest.raises(CmuxError) as info:
        parse_line(line)
    request_id = info.value.request_id  # type: ignore[attr-defined]
    assert request_id == 18446744073709551617 and isinstance(request_id, int)
    assert encode_error(request_id, info.value).startswith(b'{"id":18446744073709551617,')


def test_fractional_ids_keep_their_value() -> None:
    request = parse_line(b'{"id":[1.5,1e2,18446744073709551616],"method":"ping"}')
    assert request.id == [1.5, 100.0, 18446744073709551616]
    assert encode_success(request.id, {"type": "pong"}) == (
        b'{"id":[1.5,100.0,18446744073709551616],"ok":true,"result":{"type":"pong"}}\n')


def test_an_unencodable_result_still_raises_with_a_big_id() -> None:
    with pytest.raises(TypeError):
        encode_success(1 << 70, {"value": object()})


def _pong(reply: dict[str, object], request_id: object) -> bool:
    result = reply.get("result")
    return (reply.get("id") == request_id and reply.get("ok") is True
            and isinstance(result, dict) and result.get("type") == "pong")


def test_nesting_past_1024_levels_is_a_parse_error_with_null_id(shared_raw: Raw) -> None:
    raw = shared_raw
    def nested(levels: int) -> bytes:  # the envelope and params are two of the levels
        inner = levels - 2
        return (b'{"id":5,"method":"ping","params":{"x":' + b"[" * inner + b"]" * inner
                + b"}}\n")

    raw.send(nested(1025))
    reply = raw.line()
    assert reply["id"] is None and reply["ok"] is False
    assert reply["error"]["code"] == "parse_error"
    assert "depth" in reply["error"]["message"]
    raw.send(nested(1024))
    assert _pong(raw.line(), 5)


def _somaxconn() -> int:
    try:
        return int(Path("/proc/sys/net/core/somaxconn").read_text())
    except (OSError, ValueError):
        return 0


def test_500_clients_connecting_at_once_are_all_queued(cmux_server: ServerProcess) -> None:
    if _somaxconn() < 500:
        pytest.skip("net.core.somaxconn is below 500: the kernel caps the listen backlog")
    socks: list[socket.socket] = []
    refused = 0
    try:
        for _ in range(500):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            socks.append(s)
            try:
                s.connect(str(cmux_server.socket_path))
            except BlockingIOError as exc:
                assert exc.errno == errno.EAGAIN
                refused += 1
        assert refused == 0, f"{refused} of 500 non-blocking connects were refused"
        for s in socks:
            s.setblocking(True)
            s.settimeout(30)
            s.sendall(b'{"id":1,"method":"ping"}\n')
        for s in socks:
            reply = b""
            while not reply.endswith(b"\n"):
                chunk = s.recv(4096)
                assert chunk, "server closed a queued connection"
                reply += chunk
            assert _pong(json.loads(reply), 1), reply
    finally:
        for s in socks:
            s.close()
