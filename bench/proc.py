"""Readings of another process from ``/proc`` (Linux only)."""

from __future__ import annotations

import os
import time

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
"""Kernel clock ticks per second, the unit of /proc CPU times."""


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process itself has used, in seconds (children excluded)."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    # Fields after the parenthesised command name, which may itself contain spaces.
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def run_seconds(pid: int) -> float:
    """CPU time all live threads of the process have run, in seconds, to the nanosecond:
    the sum of each thread's ``/proc/PID/task/TID/schedstat`` run time, the figure the
    kernel splits into utime and stime. A thread that ended between two readings drops
    out of the later one (a server's threads live as long as it does)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total / 1e9


def rss_bytes(pid: int) -> int:
    """Resident set size of the process, in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def steady_rss(pid: int, window: float = 1.0, limit: float = 10.0) -> int:
    """RSS in bytes once it has stayed within 1 % for ``window`` seconds (sampled every
    0.25 s), or the last sample after ``limit`` seconds; lets a server finish work it
    defers to quiet time (scrollback compaction) before it is measured."""
    samples = [rss_bytes(pid)]
    needed = max(2, round(window / 0.25) + 1)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        recent = samples[-needed:]
        if len(recent) == needed and max(recent) - min(recent) <= max(recent) // 100:
            break
        time.sleep(0.25)
        samples.append(rss_bytes(pid))
    return samples[-1]


def thread_wakeups(pid: int) -> dict[str, int]:
    """Voluntary context switches of each live thread of the process, summed by thread name.

    A thread makes one each time it blocks (on a timer, a poll, a lock) and is woken
    again, so the difference of two readings counts its wake-ups. Threads that ended
    between two readings drop out of the later one.
    """
    counts: dict[str, int] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                switches = next(int(line.split()[1]) for line in f
                                if line.startswith("voluntary_ctxt_switches:"))
        except (FileNotFoundError, ProcessLookupError, StopIteration):
            continue
        name = "main" if tid == str(pid) else name
        counts[name] = counts.get(name, 0) + switches
    return counts


def wakeups_per_second(pid: int, seconds: float) -> tuple[float, dict[str, float]]:
    """Wake-ups per second of the whole process over ``seconds``, and per thread name
    (only names that woke at all)."""
    before = thread_wakeups(pid)
    start = time.monotonic()
    time.sleep(seconds)
    after = thread_wakeups(pid)
    wall = time.monotonic() - start
    rates = {name: (count - before.get(name, 0)) / wall for name, count in after.items()}
    rates = {name: rate for name, rate in sorted(rates.items()) if rate > 0}
    return sum(rates.values()), rates


def run_queue_seconds(pid: int) -> float:
    """Time the process's main thread has spent runnable but waiting for a CPU, in seconds
    (``/proc/PID/schedstat``): what a loaded machine adds to its latencies."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[1]) / 1e9
