"""pytest plugin for cmux_core and its plugin authors (registered as ``pytest11``).

Fixtures:

``cmux_server``
    A real ``cmux serve`` in a subprocess on a short unique socket path, with its
    own config/state dirs, area 80x24 and ``/bin/sh`` as the pane shell. It is
    stopped (and its socket removed) even when the test fails. Options can be
    changed with ``@pytest.mark.cmux_server(args=[...], env={...})``.
``cmux_client``
    A connected :class:`~cmux_core.client.Client` for ``cmux_server``.
``wait_until``
    ``wait_until(predicate, timeout=5.0, message=...)`` polls until the predicate
    returns something truthy (returned) or fails the test after ``timeout``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from cmux_core.client import Client

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float = 5.0, interval: float = 0.01,
             message: str = "condition") -> T:
    """Poll ``predicate`` until it returns something truthy; raise AssertionError on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


@dataclass
class ServerProcess:
    """A running ``cmux serve`` subprocess and where to reach it."""

    socket_path: Path
    home: Path
    process: subprocess.Popen[bytes]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)

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
        """SIGTERM the server and wait; SIGKILL when it does not exit in ``timeout``."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def start_server(args: list[str] | None = None, env: dict[str, str] | None = None,
                 size: str = "80x24") -> ServerProcess:
    """Start a real server in a fresh temporary home; returns once it answers ``ping``.

    The socket is ``<home>/s.sock`` unless ``args`` holds ``--socket PATH``.
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
        "SHELL": "/bin/sh",
        "PS1": "$ ",
        "ENV": "",
    })
    full_env.update(env or {})
    cmd = [sys.executable, "-m", "cmux_core", "serve", "--size", size, "--quiet", *args]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                env=full_env, cwd=str(home))
    server = ServerProcess(sock, home, proc, log_path, full_env)
    deadline = time.monotonic() + 20
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"cmux serve exited with {proc.returncode}:\n{server.log()}")
        if sock.exists():
            try:
                server.call("ping")
                return server
            except (ConnectionError, OSError):
                pass
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"cmux serve did not start:\n{server.log()}")
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
        shutil.rmtree(server.home, ignore_errors=True)


@pytest.fixture
def cmux_client(cmux_server: ServerProcess) -> Iterator[Client]:
    with cmux_server.client() as client:
        yield client


@pytest.fixture
def wait_until() -> Callable[..., Any]:
    return wait_for
