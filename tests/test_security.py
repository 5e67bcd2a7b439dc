"""Who may own the socket, its directory and the server: the checks against another user on
the same machine (docs/security.md).

"Another user" is uid 65534: directories are handed to it with ``os.chown`` and a rogue
listener runs in a forked child that drops to it before binding. Both need root.
"""

from __future__ import annotations

import asyncio
import os
import select
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from cmux_core.client import AsyncClient, Client
from cmux_core.errors import CmuxError
from cmux_core.testing import ServerProcess, wait_until

NOBODY = 65534
needs_root = pytest.mark.skipif(os.getuid() != 0,
                                reason="needs root to act as another user (uid 65534)")


def _env(home: Path, **extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("CMUX_") and k != "XDG_RUNTIME_DIR"}
    return {**clean, "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_STATE_HOME": str(home / "state"), "SHELL": "/bin/sh", **extra}


def _serve(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``cmux serve`` that is expected to refuse at once; a server that starts instead is
    killed after 20 s and fails the test."""
    try:
        return subprocess.run([sys.executable, "-m", "cmux_core", "serve", "--quiet", *args],
                              capture_output=True, text=True, timeout=20, cwd=home,
                              env=_env(home, **env))
    except subprocess.TimeoutExpired:
        pytest.fail("the server started instead of refusing the socket path")


def _refused(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("cmux: "), proc.stderr
    return lines[0]


def _answers(sock: Path) -> bool:
    try:
        with Client(sock, timeout=10) as client:
            return client.call("ping")["type"] == "pong"
    except ConnectionError:
        return False


def _state(path: Path) -> tuple[int, int, int]:
    st = os.lstat(path)
    return st.st_uid, stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode)


# -- the server refuses a directory or socket someone else controls --------------------------


@needs_root
@pytest.mark.parametrize(("owner", "mode", "why"), [
    (NOBODY, 0o777, "owned by uid 65534"),
    (NOBODY, 0o700, "owned by uid 65534"),
    (0, 0o777, "written by group or others"),
    (0, 0o1777, "written by group or others"),
])
def test_a_runtime_directory_someone_else_controls_is_refused(
        tmp_path: Path, owner: int, mode: int, why: str) -> None:
    runtime = tmp_path / "run"
    (runtime / "cmux").mkdir(parents=True)
    os.chown(runtime / "cmux", owner, owner)
    os.chmod(runtime / "cmux", mode)
    before = _state(runtime / "cmux")
    err = _refused(_serve(tmp_path, XDG_RUNTIME_DIR=str(runtime)))
    assert f"unsafe socket directory {runtime / 'cmux'}" in err and why in err, err
    assert _state(runtime / "cmux") == before
    assert os.listdir(runtime / "cmux") == []


@needs_root
def test_a_sessions_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    runtime = tmp_path / "run"
    (runtime / "cmux" / "sessions").mkdir(parents=True)
    os.chmod(runtime / "cmux", 0o700)
    os.chown(runtime / "cmux" / "sessions", NOBODY, NOBODY)
    err = _refused(_serve(tmp_path, "--session", "work", XDG_RUNTIME_DIR=str(runtime)))
    assert f"{runtime / 'cmux' / 'sessions'}" in err and "uid 65534" in err, err
    assert os.listdir(runtime / "cmux" / "sessions") == []


def test_a_symlink_as_the_runtime_directory_is_refused(tmp_path: Path) -> None:
    runtime = tmp_path / "run"
    runtime.mkdir()
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    (runtime / "cmux").symlink_to(tmp_path / "elsewhere")
    err = _refused(_serve(tmp_path, XDG_RUNTIME_DIR=str(runtime)))
    assert "symbolic link" in err, err
    assert os.listdir(tmp_path / "elsewhere") == []


def test_the_runtime_directory_is_created_private(tmp_path: Path) -> None:
    runtime = tmp_path / "run"
    runtime.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "cmux_core", "serve", "--quiet",
                             "--session", "s1"], cwd=tmp_path, stderr=subprocess.PIPE,
                            env=_env(tmp_path, XDG_RUNTIME_DIR=str(runtime)))
    sock = runtime / "cmux" / "sessions" / "s1.sock"
    try:
        wait_until(lambda: _answers(sock), 30, message="the server to answer")
        assert stat.S_IMODE(os.stat(runtime / "cmux").st_mode) == 0o700
        assert stat.S_IMODE(os.stat(runtime / "cmux" / "sessions").st_mode) == 0o700
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    finally:
        proc.terminate()
        proc.wait(15)
        assert proc.stderr is not None
        proc.stderr.close()


def test_a_regular_file_at_the_socket_path_is_kept(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("precious\n")
    err = _refused(_serve(tmp_path, "--socket", str(target)))
    assert f"{target} exists and is a regular file, not a socket" in err, err
    assert target.read_text() == "precious\n"


def test_a_symlink_at_the_socket_path_is_kept(tmp_path: Path) -> None:
    (tmp_path / "real").write_text("x")
    link = tmp_path / "link.sock"
    link.symlink_to(tmp_path / "real")
    err = _refused(_serve(tmp_path, "--socket", str(link)))
    assert "is a symbolic link, not a socket" in err, err
    assert link.is_symlink() and (tmp_path / "real").read_text() == "x"


def test_a_directory_at_the_socket_path_is_kept(tmp_path: Path) -> None:
    (tmp_path / "d.sock").mkdir()
    err = _refused(_serve(tmp_path, "--socket", str(tmp_path / "d.sock")))
    assert "is a directory, not a socket" in err, err
    assert (tmp_path / "d.sock").is_dir()


def _stale_socket(path: Path) -> None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.close()  # nobody listens: the file stays behind


@needs_root
def test_a_socket_of_another_user_in_a_sticky_directory_is_kept(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    sock = shared / "x.sock"
    _stale_socket(sock)
    os.chown(sock, NOBODY, NOBODY)
    err = _refused(_serve(tmp_path, "--socket", str(sock)))
    assert f"{sock} is a socket owned by uid 65534" in err, err
    assert _state(sock)[:2] == (NOBODY, stat.S_IFSOCK)


@needs_root
@pytest.mark.parametrize(("owner", "mode", "why"), [
    (NOBODY, 0o755, "owned by uid 65534"),
    (0, 0o777, "not sticky"),
    (0, 0o775, "not sticky"),
])
def test_a_socket_directory_others_can_change_is_refused(
        tmp_path: Path, owner: int, mode: int, why: str) -> None:
    named = tmp_path / "named"
    named.mkdir()
    os.chown(named, owner, owner)
    os.chmod(named, mode)
    err = _refused(_serve(tmp_path, "--socket", str(named / "deeper" / "x.sock")))
    assert str(named) in err and why in err, err
    assert os.listdir(named) == [] and _state(named)[2] == mode


def test_a_stale_socket_of_ours_is_replaced(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    sock = shared / "x.sock"
    _stale_socket(sock)
    proc = subprocess.Popen([sys.executable, "-m", "cmux_core", "serve", "--quiet",
                             "--socket", str(sock)], cwd=tmp_path, env=_env(tmp_path),
                            stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: _answers(sock), 30, message="the server to take over the socket")
        assert stat.S_IMODE(os.stat(shared).st_mode) == 0o1777
    finally:
        proc.terminate()
        proc.wait(15)


# -- the client refuses a server of another uid ------------------------------------------------


@dataclass
class Rogue:
    """A listener run by uid 65534; :meth:`received` is everything a client sent it."""

    path: Path
    pid: int
    result_fd: int

    def received(self) -> bytes:
        os.waitpid(self.pid, 0)
        with os.fdopen(self.result_fd, "rb") as f:
            return f.read()


@contextmanager
def rogue_listener() -> Iterator[Rogue]:
    base = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    directory = Path(tempfile.mkdtemp(dir=base))
    os.chown(directory, NOBODY, NOBODY)
    os.chmod(directory, 0o755)
    path = directory / "cmux.sock"
    ready_r, ready_w = os.pipe()
    result_r, result_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: become uid 65534, listen, answer one request like a server
        data = b""
        try:
            os.close(ready_r)
            os.close(result_r)
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.bind(str(path))
            os.chmod(path, 0o666)
            server.listen(8)
            os.write(ready_w, b"R")
            server.settimeout(30)
            conn, _ = server.accept()
            conn.settimeout(30)
            while not data.endswith(b"\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            if data:
                conn.sendall(b'{"id":1,"ok":true,"result":{"type":"ok"}}\n')
        except BaseException as exc:  # reported as what was "received"; the test fails on it
            data += f"child failed: {exc!r}".encode()
        finally:
            os.write(result_w, data)
            os._exit(0)
    os.close(ready_w)
    os.close(result_w)
    try:
        ready, _, _ = select.select([ready_r], [], [], 30)
        assert ready and os.read(ready_r, 1) == b"R", "the rogue listener did not start"
        yield Rogue(path, pid, result_r)
    finally:
        os.close(ready_r)
        shutil.rmtree(directory, ignore_errors=True)


def _untrusted(exc: CmuxError, path: Path) -> None:
    assert exc.code == "untrusted_server"
    assert "uid 65534" in exc.message and str(path) in exc.message
    assert exc.data == {"path": str(path), "uid": NOBODY}


@needs_root
def test_the_client_refuses_a_server_of_another_uid() -> None:
    with rogue_listener() as rogue:
        with pytest.raises(CmuxError) as info, Client(rogue.path, timeout=10) as client:
            client.call("pane.send_text", {"pane_id": "w1:p1", "text": "hunter2"})
        _untrusted(info.value, rogue.path)
        assert rogue.received() == b""


@needs_root
def test_the_async_client_refuses_a_server_of_another_uid() -> None:
    async def main(path: Path) -> None:
        client = AsyncClient(path, timeout=10)
        try:
            await client.call("pane.send_text", {"pane_id": "w1:p1", "text": "hunter2"})
        finally:
            await client.close()

    with rogue_listener() as rogue:
        with pytest.raises(CmuxError) as info:
            asyncio.run(main(rogue.path))
        _untrusted(info.value, rogue.path)
        assert rogue.received() == b""


@needs_root
def test_the_cli_sends_no_secret_to_a_server_of_another_uid(tmp_path: Path) -> None:
    with rogue_listener() as rogue:
        proc = subprocess.run(
            [sys.executable, "-m", "cmux_core", "pane", "send-text", "w1:p1", "hunter2",
             "--socket", str(rogue.path)],
            capture_output=True, text=True, timeout=30, env=_env(tmp_path))
        assert proc.returncode == 1, proc
        assert proc.stderr.startswith("untrusted_server: "), proc.stderr
        assert "uid 65534" in proc.stderr
        assert rogue.received() == b""


def test_the_clients_trust_a_server_of_their_own_uid(cmux_server: ServerProcess) -> None:
    with Client(cmux_server.socket_path) as client:
        assert client.call("ping")["type"] == "pong"

    async def main() -> str:
        async with AsyncClient(cmux_server.socket_path) as client:
            return str((await client.call("ping"))["type"])

    assert asyncio.run(main()) == "pong"
