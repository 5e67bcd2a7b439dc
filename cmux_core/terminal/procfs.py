"""Everything cmux reads from ``/proc`` (Linux) about the processes in its terminals.

A process's names (``comm``, ``cmdline``, the ``exe`` link), its working directory,
chosen variables of its environment, its parents, and the process groups (one scan of every
``/proc/<pid>/stat``). Each read is a handful of small file reads; a process that is
gone, or that another user owns, reads as nothing (``None``, empty), never as an
error. ``proc_root`` stands in for ``/proc`` in tests.
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass

PROC_ROOT = "/proc"


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """What ``/proc/<pid>`` says about one process's program.

    ``comm`` is the kernel's name, ``argv`` the command line (a trailing empty
    argument dropped), ``exe`` the executable's path (without the `` (deleted)``
    the kernel adds once it is replaced), empty where the link is unreadable.
    """

    pid: int
    comm: str
    argv: tuple[str, ...]
    exe: str = ""


def read_process(pid: int, proc_root: str = PROC_ROOT) -> ProcessInfo | None:
    """Read ``comm``, ``cmdline`` and the ``exe`` link; None when the process is gone."""
    base = f"{proc_root}/{pid}"
    try:
        with open(f"{base}/cmdline", "rb") as f:
            raw = f.read()
        with open(f"{base}/comm", "rb") as f:
            comm = f.read().decode("utf-8", "replace").rstrip("\n")
    except OSError:
        return None
    argv = tuple(a.decode("utf-8", "replace") for a in raw.split(b"\0"))
    if argv and argv[-1] == "":
        argv = argv[:-1]
    try:
        exe = os.readlink(f"{base}/exe")
    except OSError:
        exe = ""
    return ProcessInfo(pid, comm, argv, exe.removesuffix(" (deleted)"))


def cwd(pid: int, proc_root: str = PROC_ROOT) -> str | None:
    """The process's working directory; None when it is gone or not ours to read."""
    try:
        return os.readlink(f"{proc_root}/{pid}/cwd")
    except OSError:
        return None


def environment(pid: int, names: Collection[str], proc_root: str = PROC_ROOT) -> dict[str, str]:
    """Those of ``names`` set to a non-empty value in the process's environment.

    The environment is the one the program started with (``/proc/<pid>/environ``);
    empty when it cannot be read.
    """
    try:
        with open(f"{proc_root}/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return {}
    found: dict[str, str] = {}
    for entry in raw.split(b"\0"):
        key, sep, value = entry.partition(b"=")
        if sep and value:
            name = key.decode("ascii", "replace")
            if name in names:
                found[name] = value.decode("utf-8", "replace")
    return found


def parent_pid(pid: int, proc_root: str = PROC_ROOT) -> int | None:
    """The process's parent (``ppid`` of ``/proc/<pid>/stat``); None when it is gone."""
    try:
        with open(f"{proc_root}/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # "pid (comm) state ppid ..."; comm may hold spaces and parentheses.
    fields = stat[stat.rfind(b")") + 2:].split()
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None


def ancestry(pid: int, limit: int, proc_root: str = PROC_ROOT) -> list[int]:
    """``pid``, its parent, that one's parent and so on: it ends before pid 1, after a
    process whose parent cannot be read, at ``limit`` pids, or where a pid would come
    twice. One small read per step."""
    chain: list[int] = []
    current: int | None = pid
    while current is not None and current > 1 and len(chain) < limit \
            and current not in chain:
        chain.append(current)
        current = parent_pid(current, proc_root)
    return chain


def rss_bytes(pid: int | str = "self", proc_root: str = PROC_ROOT) -> int:
    """Resident memory of ``pid`` (this process by default) in bytes; 0 when unreadable."""
    try:
        with open(f"{proc_root}/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def _stats(proc_root: str) -> Iterator[tuple[int, bytes]]:
    """``(pid, contents of /proc/<pid>/stat)`` for every process still there to read."""
    try:
        entries = os.scandir(proc_root)
    except OSError:
        return
    with entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"{proc_root}/{entry.name}/stat", "rb") as f:
                    yield int(entry.name), f.read()
            except OSError:
                continue


def process_groups(proc_root: str = PROC_ROOT) -> dict[int, list[int]]:
    """Every process group on the system → its pids (one scan of ``proc_root``).

    Each list starts with the group's leader when it is alive, the rest in pid order.
    """
    groups: dict[int, list[int]] = {}
    for pid, stat in _stats(proc_root):
        # "pid (comm) state ppid pgrp ..."; comm may hold spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 2 and fields[2].isdigit():
            groups.setdefault(int(fields[2]), []).append(pid)
    for pgid, pids in groups.items():
        pids.sort(key=lambda pid: (pid != pgid, pid))
    return groups


def group_members(pgid: int, proc_root: str = PROC_ROOT) -> list[int]:
    """Every pid in process group ``pgid``, the leader first (scans ``proc_root``)."""
    return process_groups(proc_root).get(pgid, [])


class ProcessReader:
    """The reads process identification makes, as one object to hand it.

    It is what :func:`cmux_core.detect.identify.identify_group` takes. The
    process-group table is kept for ``groups_max_age`` seconds, so probes of many
    panes close together share one scan of ``proc_root`` (0: every call scans).
    """

    def __init__(self, proc_root: str = PROC_ROOT, *, groups_max_age: float = 0.0) -> None:
        self.proc_root = proc_root
        self.groups_max_age = groups_max_age
        self._groups: dict[int, list[int]] = {}
        self._groups_at = -float("inf")

    def process(self, pid: int) -> ProcessInfo | None:
        """:func:`read_process`."""
        return read_process(pid, self.proc_root)

    def environment(self, pid: int, names: Collection[str]) -> dict[str, str]:
        """:func:`environment`."""
        return environment(pid, names, self.proc_root)

    def group_members(self, pgid: int) -> list[int]:
        """:func:`group_members`, from a table at most ``groups_max_age`` seconds old."""
        now = time.monotonic()
        if now - self._groups_at >= self.groups_max_age:
            self._groups, self._groups_at = process_groups(self.proc_root), now
        return self._groups.get(pgid, [])


@dataclass(frozen=True, slots=True)
class ProcessStat:
    """One process as ``/proc/<pid>/stat`` shows it: its family (parent, group,
    session), its terminal, CPU time used so far (seconds) and resident memory (bytes)."""

    pid: int
    ppid: int
    pgid: int
    session: int
    comm: str
    state: str
    tty: str | None
    cpu_seconds: float
    rss_bytes: int


def _tty_name(tty_nr: int) -> str | None:
    """``/dev/pts/<n>`` for a pseudo-terminal device number (majors 136-143), else None."""
    major = (tty_nr >> 8) & 0xFFF
    minor = (tty_nr & 0xFF) | ((tty_nr >> 12) & 0xFFF00)
    if 136 <= major <= 143:
        return f"/dev/pts/{(major - 136) * 256 + minor}"
    return None


def process_table(proc_root: str = PROC_ROOT) -> list[ProcessStat]:
    """Every process on the system (one scan of ``proc_root``), in pid order."""
    ticks = os.sysconf("SC_CLK_TCK")
    page = os.sysconf("SC_PAGE_SIZE")
    table: list[ProcessStat] = []
    for pid, stat in _stats(proc_root):
        close = stat.rfind(b")")
        comm = stat[stat.find(b"(") + 1:close].decode("utf-8", "replace")
        fields = stat[close + 2:].split()
        try:
            table.append(ProcessStat(
                pid, int(fields[1]), int(fields[2]), int(fields[3]), comm,
                fields[0].decode(), _tty_name(int(fields[4])),
                (int(fields[11]) + int(fields[12])) / ticks, int(fields[21]) * page))
        except (IndexError, ValueError):
            continue
    table.sort(key=lambda p: p.pid)
    return table
