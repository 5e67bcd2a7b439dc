"""docs/socket-api.md's table of cmux v2 methods says what the server really answers."""

from __future__ import annotations

import re
from pathlib import Path

from cmux_v2 import V2

from cmux_core.api.methods.cmux_v2_catalog import CMUX_METHODS, NOT_SUPPORTED
from cmux_core.testing import ServerProcess

DOC = Path(__file__).parent.parent / "docs" / "socket-api.md"
ROW = re.compile(r"^\| `([a-z_.*]+)` \| (supported|not_supported|GUI-only|missing) \|")


def table() -> dict[str, str]:
    text = DOC.read_text()
    section = text[text.index("### cmux v2 family"):]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        m = ROW.match(line)
        if m:
            assert m[1] not in rows, f"{m[1]} has two rows"
            rows[m[1]] = m[2]
    return rows


def test_every_cmux_method_has_one_row() -> None:
    rows = table()
    assert sorted(set(CMUX_METHODS) | {"browser.*"}) == sorted(rows)


def test_each_row_is_what_the_server_answers(cmux_server: ServerProcess) -> None:
    rows = table()
    with V2(cmux_server.socket_path) as v2:
        advertised = set(v2("system.capabilities")["methods"])
        for method, status in rows.items():
            if method == "browser.*":
                for name in ("browser.open_split", "browser.navigate", "browser.eval"):
                    error = v2.error(name)
                    assert error.code == "not_supported" and name in error.message
                    assert error.data == {"method": name}
                    assert name not in advertised
                continue
            reply = v2.reply(method, {})
            code = None if reply["ok"] else reply["error"]["code"]
            if status == "supported":
                assert code not in ("not_supported", "method_not_found"), (method, reply)
                assert method in advertised, method
            elif status == "not_supported":
                assert code == "not_supported", (method, reply)
                assert NOT_SUPPORTED[method] in reply["error"]["message"]
                assert reply["error"]["data"] == {"method": method}
                assert method not in advertised
            else:
                assert code == "method_not_found", (method, reply)
