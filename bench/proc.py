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
