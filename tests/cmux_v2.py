"""A cmux v2 client for the tests: integer ids, replies read by ``ok``, as cmux's own
Python client speaks. Errors come back as :class:`V2Error` carrying the code."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any


class V2Error(Exception):
    def __init__(self, code: str, message: str, data: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.data = data


class V2:
    def __init__(self, path: Path, timeout: float = 30.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self.buf = b""
        self.next_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> V2:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def reply(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        self.sock.sendall(json.dumps({"id": self.next_id, "method": method,
                                      "params": params or {}}).encode() + b"\n")
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        reply = dict(json.loads(line))
        assert reply["id"] == self.next_id
        return reply

    def __call__(self, method: str, **params: Any) -> dict[str, Any]:
        reply = self.reply(method, params)
        if not reply["ok"]:
            err = reply["error"]
            raise V2Error(err["code"], err["message"], err.get("data"))
        return dict(reply["result"])

    def error(self, method: str, **params: Any) -> V2Error:
        """Call expecting an error; returns it."""
        reply = self.reply(method, params)
        assert not reply["ok"], f"{method} unexpectedly succeeded: {reply}"
        err = reply["error"]
        return V2Error(err["code"], err["message"], err.get("data"))
