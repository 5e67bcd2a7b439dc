"""Alternating runs of a cmux half and a tmux half, each with its server's CPU time.

A case that compares cmux with tmux runs each half ``repeat`` times, cmux and tmux in
turn, both servers alive but only one working at a time. Each run records its figure
(wall seconds, or a rate) and the CPU-seconds (utime + stime, from ``/proc``) its server
used for that run; a row reports the medians of both. Wall time on a shared machine
carries every other process's load; CPU time counts only what the server itself did.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from .proc import run_seconds
from .report import Row

T = TypeVar("T")


def with_cpu(pid: int, run: Callable[[], T]) -> tuple[T, float]:
    """``run()``'s result and the CPU-seconds process ``pid`` used meanwhile (utime +
    stime, read at nanosecond resolution from the threads' schedstat rather than in the
    10 ms ticks of ``/proc/PID/stat``, so short runs count too)."""
    before = run_seconds(pid)
    result = run()
    return result, run_seconds(pid) - before


@dataclass
class Runs:
    """One side's runs of one figure: the figure of each run and its server's CPU-seconds."""

    values: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def add(self, value: float, cpu: float | None = None) -> None:
        """One run's figure, and its server's CPU-seconds when they mean something."""
        self.values.append(value)
        if cpu is not None:
            self.cpu.append(cpu)

    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    def median_cpu(self) -> float | None:
        return statistics.median(self.cpu) if self.cpu else None


def paired_row(key: str, label: str, cmux: Runs, tmux: Runs | None,
               better: Literal["lower", "higher"], note: str = "", *,
               scale: float = 1.0, detail: dict[str, Any] | None = None) -> Row:
    """A row of the medians of ``cmux``'s and ``tmux``'s runs (values times ``scale``),
    with both servers' median CPU-seconds per run; the raw runs go to the JSON detail."""
    def scaled(runs: Runs | None) -> float | None:
        value = runs.median() if runs is not None else None
        return None if value is None else value * scale

    extra: dict[str, Any] = {"cmux_runs": cmux.values, "cmux_cpu_s": cmux.cpu}
    if tmux is not None:
        extra.update(tmux_runs=tmux.values, tmux_cpu_s=tmux.cpu)
    return Row(key, label, scaled(cmux), scaled(tmux), better, note,
               {**(detail or {}), **extra}, cmux_cpu=cmux.median_cpu(),
               tmux_cpu=tmux.median_cpu() if tmux is not None else None,
               runs=len(cmux.values))
