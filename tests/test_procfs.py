"""``/proc`` reads: processes, working directories, environments and process groups.

Most tests read a real process this test starts; the parsing of odd kernel output
(a ``comm`` holding spaces and parentheses, a replaced executable) is checked on a
small directory laid out like ``/proc``, through ``proc_root``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cmux_core.terminal import procfs
from cmux_core.testing import wait_until


@pytest.fixture
def sleeper(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A process group of its own: ``sleep`` under ``sh``, in ``tmp_path``, with a hint."""
    env = {**os.environ, "CMUX_AGENT": "sleepy", "EMPTY": ""}
    p = subprocess.Popen(["/bin/sh", "-c", "sleep 30; true"], cwd=tmp_path, env=env,
                         process_group=0)
    # Under load the kernel may not show the new program's cmdline the instant Popen returns.
    wait_until(lambda: _cmdline(p.pid) == b"/bin/sh\0-c\0sleep 30; true\0",
               message="sh running")
    yield p
    p.kill()
    p.wait()


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _fake_process(root: Path, pid: int, stat: bytes, *, cmdline: bytes = b"x\0",
                  comm: bytes = b"x\n") -> None:
    d = root / str(pid)
    d.mkdir()
    (d / "stat").write_bytes(stat)
    (d / "cmdline").write_bytes(cmdline)
    (d / "comm").write_bytes(comm)


def test_read_process_of_a_live_process(sleeper: subprocess.Popen[bytes]) -> None:
    info = procfs.read_process(sleeper.pid)
    assert info is not None
    assert info.pid == sleeper.pid
    assert info.argv == ("/bin/sh", "-c", "sleep 30; true")
    assert info.comm == "sh"
    assert info.exe and os.path.basename(info.exe) in ("sh", "dash", "bash", "busybox")


def test_a_process_that_is_gone_reads_as_nothing(tmp_path: Path) -> None:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert procfs.read_process(p.pid) is None
    assert procfs.cwd(p.pid) is None
    assert procfs.environment(p.pid, ["PATH"]) == {}
    assert procfs.group_members(p.pid) == []


def test_cwd_and_environment(sleeper: subprocess.Popen[bytes], tmp_path: Path) -> None:
    assert procfs.cwd(sleeper.pid) == str(tmp_path)
    # Only the names asked for, and only when set to something.
    assert procfs.environment(sleeper.pid, ["CMUX_AGENT", "EMPTY", "NOT_SET"]) == {
        "CMUX_AGENT": "sleepy"}


def test_group_members_start_with_the_leader(sleeper: subprocess.Popen[bytes]) -> None:
    def members() -> list[int]:
        return procfs.group_members(sleeper.pid)

    def both() -> list[int] | None:
        found = members()
        return found if len(found) == 2 else None

    found = wait_until(both, message="sleep to join its group")
    assert found[0] == sleeper.pid and len(found) == 2
    assert procfs.process_groups()[sleeper.pid] == found


def test_parsing_of_stat_cmdline_and_comm(tmp_path: Path) -> None:
    # comm may hold spaces and parentheses; the group is the fifth field after it.
    _fake_process(tmp_path, 7, b"7 (a) b (c) S 1 5 5 0\n")
    _fake_process(tmp_path, 5, b"5 (lead) S 1 5 5 0\n",
                  cmdline=b"node\0\0/x/cli.js\0", comm=b"node\n")
    _fake_process(tmp_path, 9, b"9 (other) S 1 9 9 0\n")
    os.symlink("/usr/bin/node (deleted)", tmp_path / "5" / "exe")
    root = str(tmp_path)
    assert procfs.process_groups(root) == {5: [5, 7], 9: [9]}
    assert procfs.group_members(5, root) == [5, 7]
    info = procfs.read_process(5, root)
    # Only the trailing empty argument goes; the one inside stays.
    assert info == procfs.ProcessInfo(5, "node", ("node", "", "/x/cli.js"), "/usr/bin/node")
    assert procfs.read_process(7, root) == procfs.ProcessInfo(7, "x", ("x",), "")


def test_the_reader_keeps_the_group_table_as_long_as_asked(tmp_path: Path) -> None:
    _fake_process(tmp_path, 5, b"5 (a) S 1 5 5 0\n")
    kept = procfs.ProcessReader(str(tmp_path), groups_max_age=3600)
    fresh = procfs.ProcessReader(str(tmp_path))
    assert kept.group_members(5) == fresh.group_members(5) == [5]
    _fake_process(tmp_path, 6, b"6 (b) S 1 5 5 0\n")
    assert kept.group_members(5) == [5]
    assert fresh.group_members(5) == [5, 6]


def test_ancestry_follows_parents_up_to_init(sleeper: subprocess.Popen[bytes]) -> None:
    """The sleeper's ``sh`` is this test's child: its ancestry runs through this process."""
    chain = procfs.ancestry(sleeper.pid, 64)
    assert chain[:3] == [sleeper.pid, os.getpid(), os.getppid()]
    assert 1 not in chain
    assert procfs.ancestry(sleeper.pid, 2) == [sleeper.pid, os.getpid()]


def test_ancestry_stops_at_a_loop_or_an_unreadable_process(tmp_path: Path) -> None:
    _fake_process(tmp_path, 7, b"7 (a) b (c) S 8 7 7 0\n")
    _fake_process(tmp_path, 8, b"8 (b) S 9 7 7 0\n")
    _fake_process(tmp_path, 9, b"9 (c) S 7 7 7 0\n")
    _fake_process(tmp_path, 4, b"4 (d) S 3 4 4 0\n")
    root = str(tmp_path)
    assert procfs.ancestry(7, 64, root) == [7, 8, 9]
    assert procfs.ancestry(4, 64, root) == [4, 3]
    assert procfs.parent_pid(7, root) == 8 and procfs.parent_pid(3, root) is None
