"""A cmux v2 client for the tests: integer ids, replies read by ``ok``, as cmux's own
Python client speaks. Errors come back as :class:`V2Error` carrying the code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import Raw


class V2Error(Exception):
    def __init__(self, code: str, message: str, data: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.data = data


class V2(Raw):
    def __init__(self, path: Path, timeout: float = 30.0) -> None:
        super().__init__(path, timeout)
        self.next_id = 0

    def reply(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        self.send_request(self.next_id, method, params)
        reply = self.line()
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
