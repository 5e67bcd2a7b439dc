"""What the agent lists of ``cmux agents`` (:mod:`~cmux_core.cli.sidebar`) and ``cmux ui``
(:mod:`~cmux_core.cli.ui`) share: the view they follow, the events that change the list,
and how a row's status and its time in that status are shown."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

from cmux_core.cli.fleet_view import Row

DEFAULT_CLIENT = "sidebar"
"""The client whose view a list follows when no ``--client`` names one."""
WATCH_EVENTS = (
    "surface.agent_status_changed", "surface.agent_detected", "pane.updated", "pane.created",
    "pane.closed", "pane.exited", "pane.focused", "pane.moved", "tab.created", "tab.closed",
    "tab.renamed", "tab.moved", "tab.focused", "workspace.created", "workspace.closed",
    "workspace.renamed", "workspace.moved", "workspace.focused", "plugin.loaded",
    "plugin.unloaded",
)
"""What makes a list fetch its agents again."""
VIEW_EVENT = "agent.view_changed"
"""A change of the followed view, which redraws at once (an older server lacks it)."""

STATUS_ORDER = ("blocked", "done", "working", "idle", "unknown")
"""Most urgent first, as the counts per status are given."""
GLYPH = {"blocked": "●", "done": "✔", "idle": "○", "unknown": "·"}
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
SPIN_SECONDS = 0.1
"""How long one frame of the spinner of a working agent stays."""


def followed_view(params: dict[str, Any] | None, client: str | None) -> bool | str:
    """The ``view`` of ``agent.list``: True (the connection's own view) when ``params`` set
    one, else the view of ``client`` (default :data:`DEFAULT_CLIENT`)."""
    return True if params is not None else (client or DEFAULT_CLIENT)


def status_glyph(status: str, frame: int) -> str:
    """The spinner at ``frame`` for a working agent, else the status's glyph (``·`` for a
    status it does not know)."""
    return SPINNER[frame % len(SPINNER)] if status == "working" else GLYPH.get(status, "·")


def status_counts(rows: Iterable[Row]) -> Counter[str]:
    """How many of ``rows`` are in each status (a row without one is ``unknown``)."""
    return Counter(str(row.get("agent_status", "unknown")) for row in rows)


def age(seconds: float) -> str:
    """A compact duration: ``5s``, ``2m05s``, ``1h02m``, ``3d04h``."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def next_tick(rows: Iterable[Row]) -> float:
    """Seconds until the list is drawn again for the clock alone: a spinner frame while an
    agent works, else until the next whole second (the times in status change)."""
    working = any(row.get("agent_status") == "working" for row in rows)
    return SPIN_SECONDS if working else 1.0 - time.time() % 1.0
