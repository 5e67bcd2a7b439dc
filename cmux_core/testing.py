"""pytest plugin for cmux_core and its plugin authors (registered as ``pytest11``).

Fixtures:

``cmux_server``
    A real ``cmux serve`` in a subprocess on a short unique socket path, with its
    own config/state dirs, area 80x24 and ``/bin/sh`` as the pane shell. It is
    stopped, and its temporary home removed, even when the test fails. Options can
    be changed with ``@pytest.mark.cmux_server(args=[...], env={...})``.
``cmux_client``
    A connected :class:`~cmux_core.client.Client` for ``cmux_server``.
``wait_until``
    The :func:`wait_until` function, for tests that take their helpers as fixtures.

Functions:

:func:`wait_until` and :func:`async_wait_until`
    Poll ``predicate`` until it returns something truthy (which is returned) and fail
    the test with ``AssertionError`` after ``timeout`` seconds. Use them instead of
    ``sleep``; the async one sleeps with ``asyncio.sleep`` so the loop under test runs.
:func:`start_server`
    What ``cmux_server`` runs, for tests that need other options or several servers.
    :meth:`ServerProcess.stop` ends the server and removes its home; a server a test
    started and did not stop is stopped after that test.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from cmux_core.client import Client

T = TypeVar("T")


DEFAULT_WAIT = 30.0
"""Seconds :func:`wait_until` and :func:`async_wait_until` wait by default: long, since a
wait that is met returns at once and a loaded machine can take seconds to get there."""

START_WAIT = 60.0
"""Seconds :func:`start_server` gives a server to answer ``ping`` (a server's start can
take tens of seconds on a heavily loaded machine)."""


def wait_until(predicate: Callable[[], T], timeout: float = DEFAULT_WAIT,
               interval: float = 0.01, message: str = "condition") -> T:
    """Call ``predicate`` every ``interval`` seconds until it returns something truthy and
    return that; raise AssertionError naming ``message`` once ``timeout`` seconds passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


async def async_wait_until(predicate: Callable[[], T | Awaitable[T]],
                           timeout: float = DEFAULT_WAIT, interval: float = 0.01,
                           message: str = "condition") -> T:
    """:func:`wait_until` for code on an event loop: between calls the loop runs. The
    predicate may be a coroutine function; its result is awaited."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        await asyncio.sleep(interval)


@dataclass
class ServerProcess:
    """A running ``cmux serve`` subprocess and where to reach it; a ``with`` block over it
    stops it at the end."""

    socket_path: Path
    home: Path
    process: subprocess.Popen[bytes]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self, timeout: float | None = 30.0) -> Client:
        return Client(self.socket_path, timeout=timeout)

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        with self.client() as c:
            return c.call(method, params)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM the server and wait (SIGKILL when it does not exit in ``timeout``), then
        remove its home, log included. Returns the exit status; calling it again (or
        after the server ended by itself) only does what is left to do."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.home, ignore_errors=True)
        _unstopped[:] = [s for s in _unstopped if s is not self]
        return self.process.returncode


_unstopped: list[ServerProcess] = []
"""Servers :func:`start_server` started whose :meth:`ServerProcess.stop` has not run."""


def start_server(args: list[str] | None = None, env: dict[str, str] | None = None,
                 size: str = "80x24", command: Sequence[str] | None = None) -> ServerProcess:
    """Start a real server in a fresh temporary home; returns once it answers ``ping``.

    The socket is ``<home>/s.sock`` unless ``args`` holds ``--socket PATH``. ``command``
    is what runs cmux (default: this interpreter's ``-m cmux_core``), e.g. another
    installation's ``cmux`` script. Raises RuntimeError, with the server's log, when it
    exits or does not answer within :data:`START_WAIT` seconds; its home is removed then too.
    """
    home = Path(tempfile.mkdtemp(prefix="cmux-t-", dir=tempfile.gettempdir()))
    args = list(args or [])
    if "--socket" in args:
        sock = Path(args[args.index("--socket") + 1])
    else:
        sock = home / "s.sock"
        args[:0] = ["--socket", str(sock)]
    log_path = home / "server.log"
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("CMUX_")}
    full_env.update({
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_STATE_HOME": str(home / "state"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "SHELL": "/bin/sh",
        "PS1": "$ ",
        "ENV": "",
    })
    full_env.update(env or {})
    program = list(command) if command else [sys.executable, "-m", "cmux_core"]
    cmd = [*program, "serve", "--size", size, "--quiet", *args]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                env=full_env, cwd=str(home))
    server = ServerProcess(sock, home, proc, log_path, full_env)
    _unstopped.append(server)
    deadline = time.monotonic() + START_WAIT
    while True:
        if proc.poll() is not None:
            failure = f"cmux serve exited with {proc.returncode}:\n{server.log()}"
            server.stop()
            raise RuntimeError(failure)
        if sock.exists():
            try:
                server.call("ping")
                return server
            except (ConnectionError, OSError):
                pass
        if time.monotonic() > deadline:
            failure = f"cmux serve did not start:\n{server.log()}"
            server.stop()
            raise RuntimeError(failure)
        time.sleep(0.02)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cmux_server(args=None, env=None, size='80x24'): "
                            "options for the cmux_server fixture")


@pytest.fixture
def cmux_server(request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    marker = request.node.get_closest_marker("cmux_server")
    kwargs = dict(marker.kwargs) if marker else {}
    server = start_server(kwargs.get("args"), kwargs.get("env"), kwargs.get("size", "80x24"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def cmux_client(cmux_server: ServerProcess) -> Iterator[Client]:
    with cmux_server.client() as client:
        yield client


@pytest.fixture(name="wait_until")
def wait_until_fixture() -> Callable[..., Any]:
    return wait_until


@pytest.fixture(autouse=True)
def _cmux_stop_unstopped_servers() -> Iterator[None]:
    """Stop the servers a test started with :func:`start_server` and left running."""
    before = {id(server) for server in _unstopped}
    yield
    for server in reversed([s for s in _unstopped if id(s) not in before]):
        server.stop()
