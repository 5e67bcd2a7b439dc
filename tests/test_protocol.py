"""Envelope and framing: every malformed input gets a clear error and changes nothing."""

from __future__ import annotations

import json
import socket
import threading

import pytest
from conftest import Api, Raw

from cmux_core.api.framing import LineSplitter
from cmux_core.errors import CmuxError
from cmux_core.testing import ServerProcess, wait_until


def snapshot(api: Api) -> dict[str, object]:
    snap = api("session.snapshot")["snapshot"]
    return {"workspaces": [w["workspace_id"] for w in snap["workspaces"]],
            "panes": [p["pane_id"] for p in snap["panes"]],
            "focused": snap.get("focused_pane_id")}


def test_success_envelope_echoes_id_of_any_json_type(shared_raw: Raw) -> None:
    raw = shared_raw
    for request_id in (7, "abc", None, [1, 2], {"k": 1}, 1.5):
        raw.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "system.ping"}).encode()
                 + b"\n")
        reply = raw.line()
        assert reply == {"id": request_id, "ok": True,
                         "result": {"type": "pong", "pong": True}}


def test_request_without_id_gets_null_id_and_params_default(shared_raw: Raw) -> None:
    raw = shared_raw
    raw.send(b'{"method":"ping"}\n')
    reply = raw.line()
    assert reply["id"] is None and reply["ok"] is True
    assert reply["result"]["type"] == "pong" and reply["result"]["protocol"] == 20


@pytest.mark.parametrize(("line", "code", "text"), [
    (b"{not json", "parse_error", "invalid JSON"),
    (b'"a string"', "invalid_request", "object"),
    (b"42", "invalid_request", "object"),
    (b'[{"id":1,"method":"ping"}]', "invalid_request", "batch"),
    (b'{"jsonrpc":"1.0","id":1,"method":"ping"}', "invalid_request", "jsonrpc"),
    (b'{"id":1}', "invalid_request", "method"),
    (b'{"id":1,"method":""}', "invalid_request", "method"),
    (b'{"id":1,"method":7}', "invalid_request", "method"),
    (b'{"id":1,"method":"no.such_method"}', "method_not_found", "no.such_method"),
    (b'{"id":1,"method":"ping","params":[1]}', "invalid_params", "params"),
    (b'{"id":1,"method":"pane.get","params":{"pane_id":5}}', "invalid_params", "pane_id"),
    (b'{"id":1,"method":"pane.get","params":{}}', "invalid_params", "pane_id"),
    (b'{"id":1,"method":"pane.get","params":{"pane_id":"w9:p9"}}', "pane_not_found", "w9:p9"),
    (b'{"id":1,"method":"workspace.get","params":{"workspace_id":"w77"}}',
     "workspace_not_found", "w77"),
    (b'{"id":1,"method":"tab.get","params":{"tab_id":"w1:t9"}}', "tab_not_found", "w1:t9"),
    (b"\xff\xfe{}", "invalid_utf8", "UTF-8"),
])
def test_malformed_requests_get_clear_errors(shared_api: Api, shared_raw: Raw, line: bytes,
                                              code: str, text: str) -> None:
    api, raw = shared_api, shared_raw
    before = snapshot(api)
    raw.send(line + b"\n")
    reply = raw.line()
    assert reply["ok"] is False
    assert reply["error"]["code"] == code
    assert text in reply["error"]["message"]
    # The connection survives and nothing changed.
    raw.send(b'{"id":"after","method":"ping"}\n')
    assert raw.line()["id"] == "after"
    assert snapshot(api) == before


def test_error_data_names_the_field(shared_raw: Raw) -> None:
    raw = shared_raw
    raw.send(b'{"id":1,"method":"pane.split","params":{"direction":"sideways"}}\n')
    error = raw.line()["error"]
    assert error["code"] == "invalid_params"
    assert error["data"] == {"field": "direction"}


def test_crlf_line_endings(shared_raw: Raw) -> None:
    raw = shared_raw
    raw.send(b'{"id":1,"method":"ping"}\r\n{"id":2,"method":"system.ping"}\r\n')
    assert raw.line()["id"] == 1
    assert raw.line()["id"] == 2


def test_blank_lines_are_ignored(shared_raw: Raw) -> None:
    raw = shared_raw
    raw.send(b'\n\r\n   \n{"id":3,"method":"ping"}\n')
    assert raw.line()["id"] == 3


def test_oversized_line_is_rejected_and_skipped(shared_api: Api, shared_raw: Raw) -> None:
    api, raw = shared_api, shared_raw
    before = snapshot(api)
    big = b'{"id":1,"method":"pane.send_text","params":{"text":"' + b"x" * (1 << 20) + b'"}}'
    raw.send(big + b'\n{"id":"next","method":"ping"}\n')
    reply = raw.line()
    assert reply["ok"] is False and reply["error"]["code"] == "request_too_large"
    assert raw.line()["id"] == "next"
    assert snapshot(api) == before


def test_pipelined_requests_are_answered_in_order(shared_raw: Raw) -> None:
    raw = shared_raw
    lines = b"".join(json.dumps({"id": i, "method": "ping" if i % 2 else "system.ping"}).encode()
                     + b"\n" for i in range(500))
    raw.send(lines)
    assert [raw.line()["id"] for _ in range(500)] == list(range(500))


def test_one_shot_connections_with_half_close(shared_server: ServerProcess) -> None:
    for _ in range(20):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(str(shared_server.socket_path))
            s.sendall(b'{"id":"once","method":"workspace.list","params":{}}\n')
            s.shutdown(socket.SHUT_WR)
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        reply = json.loads(data)
        assert reply["ok"] and reply["result"]["type"] == "workspace_list"


def test_client_disconnecting_mid_request_leaves_server_serving(
        shared_server: ServerProcess, shared_api: Api) -> None:
    api = shared_api
    pane = api.focused_pane()
    for _ in range(5):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(str(shared_server.socket_path))
        s.sendall(json.dumps({"id": 1, "method": "pane.wait_for_output", "params": {
            "pane_id": pane, "source": "recent",
            "match": {"type": "substring", "value": "never-printed-marker"}}}).encode() + b"\n")
        s.sendall(b'{"id":2,"method":"ping"}')  # a partial line, then gone
        s.close()
    assert api("ping")["type"] == "pong"
    assert api("pane.get", {"pane_id": pane})["pane"]["pane_id"] == pane
    wait_until(lambda: api("server.stats")["pending_waits"] == 0, message="waits to be dropped")


def test_many_concurrent_clients(shared_server: ServerProcess) -> None:
    failures: list[BaseException] = []

    def worker() -> None:
        try:
            with shared_server.client() as c:
                for _ in range(50):
                    assert c.call("ping")["type"] == "pong"
        except BaseException as exc:  # collected and re-raised in the test thread
            failures.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not failures


def test_capabilities_lists_every_method_it_implements(api: Api) -> None:
    methods = api("system.capabilities")["methods"]
    assert methods == sorted(methods)
    for name in ("ping", "server.stop", "session.snapshot", "workspace.create", "tab.create",
                 "pane.split", "pane.wait_for_output", "system.tree", "window.list"):
        assert name in methods
    # Every advertised method is really dispatched (none answers method_not_found).
    for name in methods:
        if name in ("server.stop",):
            continue
        reply = api.request(name, {"__probe": True}) if name != "events.subscribe" else None
        if reply is not None and not reply["ok"]:
            assert reply["error"]["code"] != "method_not_found", name


def test_line_splitter_caps_lines_whatever_the_chunking() -> None:
    def split(chunks: list[bytes]) -> list[bytes | str]:
        splitter = LineSplitter(limit=8)
        out: list[bytes | str] = []
        for chunk in chunks:
            out += [x.code if isinstance(x, CmuxError) else x for x in splitter.feed(chunk)]
        return out

    assert split([b"ab", b"c\n", b"\n  \nde\nf"]) == [b"abc", b"de"]
    assert split([b"12345678\n"]) == [b"12345678"]
    assert split([b"123456789\nok\n"]) == ["request_too_large", b"ok"]
    # an over-long line arriving in pieces is reported once and skipped up to its newline
    assert split([b"12345", b"6789", b"abcdefghij", b"xyz\nok\n"]) == ["request_too_large", b"ok"]
