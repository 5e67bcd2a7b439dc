"""What every bench case is given: its sizes and a context, and the percentile helpers."""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .cmux import CmuxSide
from .tmux import Tmux


@dataclass(frozen=True)
class Sizes:
    """How much work each case does."""

    ingest_lines: int
    round_trips: int
    """Round trips of each kind in one run."""
    pings: int
    """Sequential pings in one run."""
    pipelined_pings: int
    """Pipelined pings in one run."""
    idle_panes: int
    idle_seconds: float
    rss_panes: int
    rss_lines: int
    flood_bytes: int
    flood_timeout: float


FULL = Sizes(ingest_lines=2_000_000, round_trips=200, pings=5_000, pipelined_pings=20_000,
             idle_panes=50, idle_seconds=10.0, rss_panes=10, rss_lines=10_000,
             flood_bytes=100_000_000, flood_timeout=90.0)
QUICK = Sizes(ingest_lines=200_000, round_trips=50, pings=1_000, pipelined_pings=4_000,
              idle_panes=50, idle_seconds=3.0, rss_panes=3, rss_lines=10_000,
              flood_bytes=10_000_000, flood_timeout=30.0)
FULL_REPEAT = 5
QUICK_REPEAT = 3
"""Alternating cmux/tmux runs per compared figure, unless ``--repeat`` says otherwise."""


def percentile(values: list[float], p: float) -> float:
    """The nearest-rank ``p``-th percentile (0 < p <= 100) of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def ms(seconds: float) -> float:
    return seconds * 1000


@dataclass
class Context:
    """What every case gets: sizes, the emulator to ask cmux for, a scratch directory,
    and how many alternating runs of each half a compared figure is the median of."""

    sizes: Sizes
    emulator: str
    workdir: Path
    repeat: int = FULL_REPEAT
    backends: set[str] = field(default_factory=set)

    def cmux(self) -> CmuxSide:
        return CmuxSide(self.emulator)

    def tmux(self) -> Tmux:
        return Tmux(Path(tempfile.mkdtemp(prefix="tmux-", dir=self.workdir)))
