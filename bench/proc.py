"""Readings of another process from ``/proc`` (Linux only)."""

from __future__ import annotations

import os

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
