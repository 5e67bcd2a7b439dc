"""A real OpenSSH ``sshd`` on 127.0.0.1 for the fleet tests, and "machines" behind it.

The server runs from a temporary directory with its own host key, ``authorized_keys`` and
config, on a free port, as the user running the tests. Each machine is that same login with
its own ``HOME`` (and so its own remote server and socket): the client sends
``CMUX_TEST_HOME`` (``SetEnv``) and sshd's ``ForceCommand`` runs the requested command with
``HOME`` set to it, since sshd itself never takes ``HOME`` from a client. The remote cmux is
this checkout's ``.venv``, linked where ``cmux machine install`` would put it.

The remote servers the machines start (``cmux bridge`` starts one when none answers) live
on after their links end, as they would on a real machine: :meth:`Sshd.stop_remote` stops
every one of them under the harness's homes, and :meth:`Sshd.stop` does that first. Tests
that only need ``ssh`` to reach this user use :func:`running_sshd` and
:meth:`Sshd.ssh_args`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cmux_core.client import Client
from cmux_core.errors import CmuxError

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
VENV = Path(sys.executable).parent.parent

LOGIN = """#!/bin/sh
export HOME="${CMUX_TEST_HOME:-$HOME}" PATH=/usr/bin:/bin
unset CMUX_TEST_HOME
exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
"""


@dataclass
class Sshd:
    root: Path
    port: int
    identity: Path
    known_hosts: Path
    process: subprocess.Popen[bytes]

    def home(self, name: str, *, cmux: bool = True) -> Path:
        """A fresh home for machine ``name``; with ``cmux``, the checkout's venv is linked
        at ``~/.local/share/cmux/venv``."""
        home = self.root / "homes" / name
        (home / ".local" / "share" / "cmux").mkdir(parents=True, exist_ok=True)
        (home / "run").mkdir(mode=0o700, exist_ok=True)
        if cmux:
            link = home / ".local" / "share" / "cmux" / "venv"
            if not link.exists():
                link.symlink_to(VENV)
        return home

    def options(self, home: Path, known_hosts: Path | None = None) -> dict[str, str]:
        """The ``--ssh-option``s that reach this server as a machine living in ``home``."""
        return {"Port": str(self.port), "IdentityFile": str(self.identity),
                "IdentitiesOnly": "yes", "UserKnownHostsFile": str(known_hosts
                                                                  or self.known_hosts),
                "SetEnv": f"CMUX_TEST_HOME={home} XDG_RUNTIME_DIR={home}/run "
                          f"XDG_CONFIG_HOME={home}/config XDG_STATE_HOME={home}/state",
                "LogLevel": "ERROR"}

    def remote_socket(self, home: Path, session: str | None = None) -> Path:
        runtime = home / "run" / "cmux"
        return runtime / "sessions" / f"{session}.sock" if session else runtime / "cmux.sock"

    def ssh_args(self) -> list[str]:
        """``ssh`` options that reach this server as this user (with this user's real
        ``HOME``), reading no user config and never prompting."""
        return ["-p", str(self.port), "-i", str(self.identity), "-F", "/dev/null",
                "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                "-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "LogLevel=ERROR"]

    def remote_sockets(self, home: Path | None = None) -> list[Path]:
        """The server sockets (default and sessions') under ``home``, or every home."""
        pattern = "run/cmux/**/*.sock" if home else "*/run/cmux/**/*.sock"
        return sorted((home or self.root / "homes").glob(pattern))

    def stop_remote(self, home: Path | None = None, timeout: float = 10.0) -> None:
        """Stop the remote servers running under ``home`` (default: every home):
        ``server.stop`` through each socket, then SIGTERM and at last SIGKILL for a server
        process that is still running (or never answered); returns when those are gone.
        A link still up starts a new server on its next connection, so stop the local
        servers first when nothing may be left behind."""
        running = self.remote_servers(home)
        for sock in self.remote_sockets(home):
            with contextlib.suppress(ConnectionError, OSError, CmuxError), \
                    Client(sock, timeout=timeout) as c:
                c.call("server.stop")
        for sent in (None, signal.SIGTERM, signal.SIGKILL):
            running = [pid for pid in self.remote_servers(home) if pid in running]
            for pid in running if sent else []:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sent)
            deadline = time.monotonic() + timeout
            while running and time.monotonic() < deadline:
                time.sleep(0.05)
                running = [pid for pid in self.remote_servers(home) if pid in running]
            if not running:
                return
        raise RuntimeError(f"remote servers {running} do not stop")

    def remote_servers(self, home: Path | None = None) -> list[int]:
        """The pids of this user's ``cmux serve`` processes whose command line names a path
        under ``home`` (default: under any home)."""
        where = f"{home or self.root / 'homes'}/".encode()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if entry.stat().st_uid != os.getuid():
                    continue
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"serve" in argv and any(a.startswith(where) for a in argv):
                found.append(int(entry.name))
        return found

    def stop(self) -> None:
        """Stop the remote servers, then sshd."""
        try:
            self.stop_remote()
        finally:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                   check=True)


def start_sshd(root: Path | None = None, config: str = "") -> Sshd:
    """Start sshd with its files in ``root`` (made, or a new temporary directory) and the
    lines of ``config`` added to its configuration; raises RuntimeError when it is not
    installed or does not start."""
    if not os.access(SSHD, os.X_OK):
        raise RuntimeError("OpenSSH sshd is not installed (make test installs "
                           "openssh-server)")
    if root is None:
        root = Path(tempfile.mkdtemp(prefix="cmux-ssh-", dir=tempfile.gettempdir()))
    else:
        root.mkdir(mode=0o700, parents=True)
    _keygen(root / "host_key")
    _keygen(root / "client_key")
    shutil.copy(root / "client_key.pub", root / "authorized_keys")
    login = root / "login.sh"
    login.write_text(LOGIN)
    login.chmod(0o755)
    port = _free_port()
    host_pub = (root / "host_key.pub").read_text().split()
    (root / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    (root / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {root}/host_key\n"
        f"AuthorizedKeysFile {root}/authorized_keys\nPidFile {root}/sshd.pid\n"
        "StrictModes no\nUsePAM no\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
        "AcceptEnv CMUX_TEST_HOME XDG_*\nMaxSessions 100\nMaxStartups 100:30:200\n"
        f"ForceCommand {login}\nLogLevel ERROR\n{config}")
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    log = open(root / "sshd.log", "wb")  # noqa: SIM115 - the server's own stream
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(root / "sshd_config")],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    log.close()
    server = Sshd(root, port, root / "client_key", root / "known_hosts", proc)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                server.stop()
                raise RuntimeError("sshd did not start:\n"
                                   + (root / "sshd.log").read_text()) from None
            time.sleep(0.02)


def _skip_without_openssh() -> None:
    if not os.access(SSHD, os.X_OK) or shutil.which("ssh") is None:
        pytest.skip("OpenSSH's sshd and ssh are not installed (make test installs "
                    "openssh-server)")


@contextlib.contextmanager
def running_sshd() -> Iterator[Sshd]:
    """An sshd of its own until the block ends (skips the test when OpenSSH is not
    installed); the remote servers it started are stopped with it and its files removed.
    Its files live in a short directory of their own, not under a test's ``tmp_path``: the
    remote servers' sockets under its homes must stay within the 108 bytes of a socket
    path."""
    _skip_without_openssh()
    server = start_sshd()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)


@pytest.fixture(scope="session")
def sshd() -> Iterator[Sshd]:
    """The shared sshd; the fleet tests skip when it is not installed."""
    with running_sshd() as server:
        yield server
