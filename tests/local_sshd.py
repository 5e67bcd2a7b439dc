"""OpenSSH's ``sshd`` on 127.0.0.1 for tests: its own host key, and a fresh client key that
lets this user in. Tests that use it skip where ``sshd`` or ``ssh`` is not installed."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cmux_core.testing import wait_until

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


@dataclass(frozen=True)
class Sshd:
    port: int
    key: Path

    def ssh_args(self) -> list[str]:
        """``ssh`` options that reach this server as this user, with no user config, no
        prompt and no known-hosts entry."""
        return ["-p", str(self.port), "-i", str(self.key), "-F", "/dev/null",
                "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
    except OSError:
        return False
    return True


@contextlib.contextmanager
def running_sshd(directory: Path) -> Iterator[Sshd]:
    """Run an sshd whose keys, config and log are in ``directory`` until the block ends."""
    if not os.access(SSHD, os.X_OK) or shutil.which("ssh") is None:
        pytest.skip("OpenSSH's sshd and ssh are not installed")
    keys = directory / "sshd"
    keys.mkdir(mode=0o700)
    for name in ("host", "client"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", keys / name],
                       check=True)
    (keys / "authorized_keys").write_bytes((keys / "client.pub").read_bytes())
    port = _free_port()
    config = keys / "sshd_config"
    config.write_text(f"Port {port}\nListenAddress 127.0.0.1\nHostKey {keys / 'host'}\n"
                      f"AuthorizedKeysFile {keys / 'authorized_keys'}\n"
                      f"PidFile {keys / 'sshd.pid'}\nStrictModes no\nUsePAM no\n"
                      "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                      "PermitRootLogin prohibit-password\nAllowStreamLocalForwarding yes\n"
                      "LogLevel ERROR\n")
    if os.getuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # its privilege separation
    log = keys / "sshd.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([SSHD, "-D", "-e", "-f", config], stderr=out)
    try:
        wait_until(lambda: proc.poll() is not None or _accepts(port))
        assert proc.poll() is None, log.read_text()
        yield Sshd(port, keys / "client")
    finally:
        proc.terminate()
        proc.wait(10)
