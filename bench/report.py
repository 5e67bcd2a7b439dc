"""Result rows, the printed table and the JSON file."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass
class Row:
    """One compared figure: cmux's and tmux's value of the same measurement.

    ``better`` says which direction is good for cmux; ``detail`` holds raw figures
    for the JSON file only. ``cmux_cpu`` and ``tmux_cpu``, when measured, are each
    server's CPU-seconds (utime + stime) for the same work, the median over ``runs``
    alternating runs like the figures themselves.
    """

    key: str
    label: str
    cmux: float | None
    tmux: float | None
    better: Literal["lower", "higher"]
    note: str = ""
    detail: dict[str, Any] = field(default_factory=dict)
    cmux_cpu: float | None = None
    tmux_cpu: float | None = None
    runs: int | None = None

    @property
    def ratio(self) -> float | None:
        if self.cmux is None or self.tmux is None or self.tmux == 0:
            return None
        return self.cmux / self.tmux

    @property
    def cpu_ratio(self) -> float | None:
        """cmux's server CPU-seconds over tmux's for the same work (lower is better)."""
        if self.cmux_cpu is None or self.tmux_cpu is None or self.tmux_cpu == 0:
            return None
        return self.cmux_cpu / self.tmux_cpu

    def reading(self) -> str:
        """The ratio in words: who wins and by what factor."""
        ratio = self.ratio
        if ratio is None:
            return "n/a"
        if ratio == 0:
            return "cmux wins (tmux/0)"
        good = ratio <= 1 if self.better == "lower" else ratio >= 1
        factor = 1 / ratio if ratio < 1 else ratio
        if math.isclose(factor, 1.0, rel_tol=0.05):
            return "about even"
        return f"{'cmux' if good else 'tmux'} {factor:.1f}x better"

    def as_json(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "cmux": self.cmux, "tmux": self.tmux,
                "ratio": self.ratio, "better": self.better, "reading": self.reading(),
                "cmux_cpu_s": self.cmux_cpu, "tmux_cpu_s": self.tmux_cpu,
                "cpu_ratio": self.cpu_ratio, "runs": self.runs,
                "note": self.note, "detail": self.detail}


def number(value: float | None) -> str:
    if value is None:
        return "-"
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 0.1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def table(rows: list[Row]) -> str:
    """The rows as a fixed-width text table, notes under it. The last four columns are
    the alternating runs each figure is the median of and, where measured, the servers'
    CPU-seconds for the same work."""
    header = ("measurement", "cmux", "tmux", "cmux/tmux", "better", "reading", "runs",
              "cpu-s cmux", "cpu-s tmux", "cpu cmux/tmux")
    body = [(r.label, number(r.cmux), number(r.tmux), number(r.ratio), r.better, r.reading(),
             str(r.runs) if r.runs else "-", number(r.cmux_cpu), number(r.tmux_cpu),
             number(r.cpu_ratio)) for r in rows]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

    def fmt(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) if i in (0, 4, 5) else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    lines = [fmt(header), "  ".join("-" * w for w in widths)]
    lines += [fmt(cells) for cells in body]
    notes = [f"* {r.label}: {r.note}" for r in rows if r.note]
    if notes:
        lines += ["", *notes]
    return "\n".join(lines)
