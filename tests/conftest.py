"""Shared test helpers: a schema-checking API client, a raw socket connection, and the
``server``/``tmux`` fixtures of the tests that drive cmux inside a real tmux.

Every reply to a method that the herdr Local API schema knows, and every event
of a kind it knows, is validated against ``tests/data/herdr-api.schema.json``.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

import jsonschema
import pytest
from tmux_driver import Tmux

from cmux_core.errors import CmuxError
from cmux_core.plugin_host.host import PluginHost
from cmux_core.testing import ServerProcess, async_wait_until, start_server

SCHEMA_PATH = Path(__file__).parent / "data" / "herdr-api.schema.json"

REPLY_WAIT_S = 30.0
"""How long ``Api`` and ``Raw`` wait for a reply or an event by default: one that comes
returns at once, and a loaded machine can take seconds to answer."""

OUTPUT_WAIT_MS = 30000
"""How long ``Api.wait_text``/``wait_line`` wait for a pane's output by default: a program
(a python3 start, a shell) can take seconds to print on a loaded machine."""


@functools.cache
def _schema() -> dict[str, Any]:
    return dict(json.loads(SCHEMA_PATH.read_text()))


@functools.cache
def schema_methods() -> frozenset[str]:
    return frozenset(v["properties"]["method"]["const"]
                     for v in _schema()["schemas"]["request"]["oneOf"])


@functools.cache
def schema_event_kinds() -> frozenset[str]:
    kinds = _schema()["schemas"]["event"]["$defs"]["EventKind"]
    return frozenset(kinds.get("enum", []) or [v.get("const") for v in kinds.get("oneOf", [])])


@functools.cache
def _validator(name: str) -> jsonschema.Draft202012Validator:
    schema = _schema()
    root = {"schemas": schema["schemas"], **schema["schemas"][name]}
    return jsonschema.Draft202012Validator(root)


def check_reply(method: str, reply: dict[str, Any]) -> None:
    """Validate a reply to ``method`` when the herdr schema covers it."""
    if method not in schema_methods():
        return
    kind = "success_response" if reply.get("ok") else "error_response"
    errors = sorted(_validator(kind).iter_errors(reply), key=lambda e: e.path)
    assert not errors, f"{method} reply does not match {kind}: {errors[0].message}\n{reply}"


def check_event(event: dict[str, Any]) -> None:
    if event.get("event") not in schema_event_kinds():
        return
    errors = list(_validator("event").iter_errors(event))
    assert not errors, f"event does not match the schema: {errors[0].message}\n{event}"


class Raw:
    """A raw connection to a server's socket, for tests that speak the wire themselves:
    bytes out, and a line or a count of bytes back. Closed on leaving a ``with`` block."""

    def __init__(self, path: Path, timeout: float = REPLY_WAIT_S) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self.buf = b""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_request(self, request_id: Any, method: str,
                     params: dict[str, Any] | None = None) -> None:
        self.send(json.dumps({"id": request_id, "method": method,
                              "params": params or {}}).encode() + b"\n")

    def fill(self, n: int) -> None:
        """Read until ``n`` bytes are buffered; ConnectionError if the server hangs up first."""
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk

    def take(self, n: int) -> bytes:
        """The next ``n`` bytes."""
        self.fill(n)
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def line_bytes(self, timeout: float | None = None) -> bytes:
        """The next line, without its newline; ``timeout`` (when given) from now on bounds
        each read."""
        if timeout is not None:
            self.sock.settimeout(timeout)
        while b"\n" not in self.buf:
            self.fill(len(self.buf) + 1)
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    def line(self, timeout: float | None = None) -> dict[str, Any]:
        """The next line as a JSON object."""
        return dict(json.loads(self.line_bytes(timeout)))


class Api(Raw):
    """A persistent connection that checks every reply and event against the schema."""

    def __init__(self, server: ServerProcess) -> None:
        super().__init__(server.socket_path)
        self.server = server
        self.ids = itertools.count(1)

    def readline(self, timeout: float = REPLY_WAIT_S) -> dict[str, Any]:
        return self.line(timeout)

    def request(self, method: str, params: dict[str, Any] | None = None,
                timeout: float = REPLY_WAIT_S) -> dict[str, Any]:
        request_id = f"t{next(self.ids)}"
        self.send_request(request_id, method, params)
        while True:
            reply = self.readline(timeout)
            if "event" in reply and "id" not in reply:
                check_event(reply)
                continue
            assert reply["id"] == request_id
            check_reply(method, reply)
            return reply

    def __call__(self, method: str, params: dict[str, Any] | None = None,
                 timeout: float = REPLY_WAIT_S) -> dict[str, Any]:
        reply = self.request(method, params, timeout)
        if not reply["ok"]:
            err = reply["error"]
            raise CmuxError(err["code"], err["message"], err.get("data"))
        return dict(reply["result"])

    def error(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Call expecting an error; returns the error object."""
        reply = self.request(method, params)
        assert not reply["ok"], f"{method} unexpectedly succeeded: {reply}"
        return dict(reply["error"])

    def event(self, timeout: float = REPLY_WAIT_S) -> dict[str, Any]:
        event = self.readline(timeout)
        assert "event" in event, event
        check_event(event)
        return event

    # conveniences over the running server

    def focused_pane(self) -> str:
        return str(self("pane.current")["pane"]["pane_id"])

    def read(self, pane_id: str, source: str = "visible", **kw: Any) -> str:
        return str(self("pane.read", {"pane_id": pane_id, "source": source, **kw})["read"]["text"])

    def wait_text(self, pane_id: str, needle: str, timeout_ms: int = OUTPUT_WAIT_MS,
                  source: str = "recent") -> str:
        result = self("pane.wait_for_output", {
            "pane_id": pane_id, "source": source, "timeout_ms": timeout_ms,
            "match": {"type": "substring", "value": needle}}, timeout=timeout_ms / 1000 + 5)
        return str(result["matched_line"])

    def wait_line(self, pane_id: str, pattern: str, timeout_ms: int = OUTPUT_WAIT_MS) -> str:
        """Wait for a whole screen line matching the regex ``pattern`` and return it.

        A PTY read can stop in the middle of a line, so ``wait_text`` may return a prefix of
        the line it finds; a test that checks what a line says waits with this instead. On a
        timeout the assertion shows the screen."""
        try:
            return self.wait_text_match(pane_id, f"^(?:{pattern})$", timeout_ms)
        except CmuxError as err:
            if err.code != "timeout":
                raise
            screen = self.read(pane_id, "recent", lines=50)
            raise AssertionError(f"no line matching {pattern!r}; screen:\n{screen}") from err

    def wait_text_match(self, pane_id: str, regex: str, timeout_ms: int = OUTPUT_WAIT_MS
                        ) -> str:
        result = self("pane.wait_for_output", {
            "pane_id": pane_id, "source": "recent", "timeout_ms": timeout_ms,
            "match": {"type": "regex", "value": regex}}, timeout=timeout_ms / 1000 + 5)
        return str(result["matched_line"])

    def run(self, argv: list[str], **kw: Any) -> str:
        """Split the focused pane running ``argv``; returns the new pane id."""
        result = self("pane.split", {"command": argv, **kw})
        return str(result["pane"]["pane_id"])


def regex_literal(text: str) -> str:
    """``text`` as a pattern in the server's (Rust) regex dialect, which rejects escapes of
    characters that are not metacharacters, such as ``re.escape``'s escaped spaces."""
    return "".join("\\" + c if c in "\\.+*?()|[]{}^$#&-~" else c for c in text)


@pytest.fixture(scope="module")
def shared_server() -> Iterator[ServerProcess]:
    """One default server for a whole test module, for tests that each work in panes or
    objects of their own."""
    with start_server() as server:
        yield server


@pytest.fixture
def shared_api(shared_server: ServerProcess) -> Iterator[Api]:
    """A connection of its own to the module's :func:`shared_server`, for tests that only
    read, or that check a refused request changed nothing (so they can share a server)."""
    with Api(shared_server) as conn:
        yield conn


@pytest.fixture
def shared_raw(shared_server: ServerProcess) -> Iterator[Raw]:
    """A raw connection of its own to the module's :func:`shared_server`."""
    with Raw(shared_server.socket_path) as conn:
        yield conn


@pytest.fixture
def server(cmux_server: ServerProcess) -> ServerProcess:
    """The default test server (80x24, /bin/sh panes) under the name the tmux-driven tests
    use; a module that needs other options defines its own ``server``."""
    return cmux_server


@pytest.fixture
def tmux(server: ServerProcess) -> Iterator[Tmux]:
    """A private tmux server whose shells run cmux with ``server``'s config and state dirs;
    killed after the test."""
    t = Tmux({"XDG_CONFIG_HOME": str(server.home / "config"),
              "XDG_STATE_HOME": str(server.home / "state")})
    try:
        yield t
    finally:
        t.kill()


@pytest.fixture
def api(cmux_server: ServerProcess) -> Iterator[Api]:
    with Api(cmux_server) as conn:
        yield conn


@pytest.fixture
def raw(cmux_server: ServerProcess) -> Iterator[Raw]:
    with Raw(cmux_server.socket_path) as conn:
        yield conn


def now() -> float:
    return time.monotonic()


async def plugin_version(host: PluginHost) -> int | None:
    """What ``plugin.live.version`` (the hot-reload test plugins) answers; None while it
    fails. A plugin's method needs no core services, so the host's table answers it alone."""
    try:
        result = await host.methods.call("plugin.live.version", {}, request_id=1)
    except CmuxError:
        return None
    return int(result["version"])


async def wait_version(host: PluginHost, wanted: int, timeout: float = 30.0) -> None:
    async def answers() -> bool:
        return await plugin_version(host) == wanted
    await async_wait_until(answers, timeout, 0.02, message=f"version {wanted} to answer")


# Nothing of a run may stay in the temporary directory: the controller (not an xdist
# worker) lists the cmux entries there before the run and after it, and a run that leaves
# new ones, or processes running from new ones, fails, naming them.
TEMP_PREFIX = "cmux"
LEFTOVER_GRACE_S = 10.0
"""How long entries may take to go once the last test is done (servers shutting down)."""

_temp_before: set[str] = set()


def _temp_entries() -> set[str]:
    return {name for name in os.listdir(tempfile.gettempdir()) if name.startswith(TEMP_PREFIX)}


def _temp_processes() -> set[str]:
    """Processes still running from an entry of the temporary directory made during the run
    (a server whose home was removed under it), as ``pid: command line``."""
    base = os.path.join(tempfile.gettempdir(), TEMP_PREFIX)
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        for arg in argv:
            at = arg.find(base)
            if at < 0:
                continue
            entry = arg[at + len(tempfile.gettempdir()) + 1:].split("/")[0]
            if entry not in _temp_before:
                found.add(f"{pid}: {' '.join(argv).strip()[:200]}")
                break
    return found


def _leftovers() -> set[str]:
    return (_temp_entries() - _temp_before) | _temp_processes()


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):
        _temp_before.update(_temp_entries())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput") or session.config.option.collectonly:
        return
    if session.testscollected == 0:
        return
    deadline = time.monotonic() + LEFTOVER_GRACE_S
    left = _leftovers()
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = _leftovers()
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = (f"the run left {len(left)} thing{'' if len(left) == 1 else 's'} in "
                   f"{tempfile.gettempdir()} (entries, or processes running from them): "
                   + "; ".join(sorted(left)))
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
