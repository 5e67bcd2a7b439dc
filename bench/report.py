"""Result rows, the printed table and the JSON file."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass
class Row:
    """One compared figure: cmux's and tmux's value of the same measurement.

    ``better`` says which direction is good for cmux; ``detail`` holds raw figures
    for the JSON file only.
    """

    key: str
    label: str
    cmux: float | None
    tmux: float | None
    better: Literal["lower", "higher"]
    note: str = ""
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.cmux is None or self.tmux is None or self.tmux == 0:
            return None
        return self.cmux / self.tmux

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
    return f"{value:.3f}"


def table(rows: list[Row]) -> str:
    """The rows as a fixed-width text table, notes under it."""
    header = ("measurement", "cmux", "tmux", "cmux/tmux", "better", "reading")
    body = [(r.label, number(r.cmux), number(r.tmux), number(r.ratio), r.better, r.reading())
            for r in rows]
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
