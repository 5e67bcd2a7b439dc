"""The cmux side: a private server started for one case and a pipelining connection."""

from __future__ import annotations

import itertools
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from cmux_core.errors import CmuxError
from cmux_core.testing import ServerProcess, start_server

from .lines import LineReader


class Connection:
    """One persistent socket connection that may pipeline requests.

    Replies come back in request order; event lines are skipped. ``call`` raises
    :class:`CmuxError` for an error reply and ``TimeoutError`` when no reply
    arrives within ``timeout`` seconds.
    """

    def __init__(self, path: Path) -> None:
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect(str(path))
        self._reader = LineReader(self._sock.fileno())
        self._ids = itertools.count(1)

    def close(self) -> None:
        self._sock.close()

    def send(self, requests: list[tuple[str, dict[str, Any]]]) -> None:
        """Write every request in one ``sendall``."""
        self._sock.sendall(b"".join(
            orjson.dumps({"jsonrpc": "2.0", "id": next(self._ids), "method": method,
                          "params": params}) + b"\n"
            for method, params in requests))

    def reply(self, timeout: float = 30.0) -> dict[str, Any]:
        """The next reply's ``result``; raises CmuxError for an error reply."""
        deadline = time.monotonic() + timeout
        while True:
            message = orjson.loads(self._reader.readline(deadline))
            if "id" not in message:
                continue
            if message.get("ok") is False or "error" in message:
                error = message.get("error") or {}
                raise CmuxError(error.get("code", "internal_error"), error.get("message", ""))
            result = message.get("result")
            return result if isinstance(result, dict) else {}

    def call(self, method: str, params: dict[str, Any] | None = None,
             timeout: float = 30.0) -> dict[str, Any]:
        self.send([(method, params or {})])
        return self.reply(timeout)


def wait_request(pane_id: str, text: str, timeout: float) -> tuple[str, dict[str, Any]]:
    """A ``pane.wait_for_output`` request for a substring of the pane's recent output."""
    return ("pane.wait_for_output", {
        "pane_id": pane_id, "source": "recent", "timeout_ms": int(timeout * 1000),
        "match": {"type": "substring", "value": text}})


class CmuxSide:
    """A ``cmux serve`` at ``size`` with the given emulator backend, and one connection.

    The server starts with its default pane (a ``/bin/sh``); ``close`` stops the
    server and removes its temporary home.
    """

    def __init__(self, emulator: str, size: tuple[int, int] = (80, 24)) -> None:
        self.server: ServerProcess = start_server(["--emulator", emulator],
                                                  size=f"{size[0]}x{size[1]}")
        self.conn = Connection(self.server.socket_path)
        self.backend = ""

    def __enter__(self) -> CmuxSide:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int:
        return self.server.process.pid

    def connect(self) -> Connection:
        """A further connection, owned by the caller."""
        return Connection(self.server.socket_path)

    def close(self) -> None:
        self.conn.close()
        self.server.stop()
        shutil.rmtree(self.server.home, ignore_errors=True)

    def new_pane(self, argv: list[str]) -> str:
        """A new tab whose one pane (the whole area) runs ``argv``; returns the pane id."""
        pane = self.conn.call("tab.create", {"command": argv})["root_pane"]
        self.backend = str(pane.get("emulator", ""))
        return str(pane["pane_id"])

    def close_pane(self, pane_id: str) -> None:
        self.conn.call("pane.close", {"pane_id": pane_id})

    def send_text(self, pane_id: str, text: str) -> None:
        self.conn.call("pane.send_text", {"pane_id": pane_id, "text": text})

    def wait_for(self, pane_id: str, text: str, timeout: float = 30.0) -> None:
        """Block until ``text`` is in the pane's recent output; ``CmuxError`` on timeout."""
        method, params = wait_request(pane_id, text, timeout)
        self.conn.call(method, params, timeout=timeout + 5)


def python_argv(script: Path, *args: str) -> list[str]:
    """Run one of the bench's own scripts with this interpreter."""
    return [sys.executable, str(script), *args]
