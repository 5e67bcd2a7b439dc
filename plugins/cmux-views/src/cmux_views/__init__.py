"""cmux-views: sort keys and filters for agent views.

Registered under the plugin id ``cmux-views``; a view names them as
``{"plugin": "cmux-views/<name>"}``:

sorts
    ``longest-wait``     agents waiting on you (blocked or done), the one waiting longest
                         first; everything else after them in its previous order.
    ``triage``           blocked, then done, then working, then idle; oldest state first
                         within each group.
filters
    ``waiting``          blocked or done: an agent that cannot go on without you.
    ``running``          working or blocked: an agent in the middle of a task.

Every callable is a pure function of one agent row (an AgentInfo mapping), as the hooks
require: no clock, no I/O. Time in state comes from the row's ``status_changed_at``
(unix seconds) with ``state_change_seq`` as the tie-break and the fallback for servers that
do not report it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cmux_core.hookspecs import RegisterViewFilter, RegisterViewSort, hookimpl

__version__ = "0.1.0"

WAITING = ("blocked", "done")
"""Statuses in which an agent waits for a person."""

TRIAGE_ORDER = {"blocked": 0, "done": 1, "working": 2, "idle": 3, "unknown": 4}


def _status(row: Mapping[str, Any]) -> str:
    return str(row.get("agent_status", "unknown"))


def _since(row: Mapping[str, Any]) -> tuple[float, int]:
    """When the row entered its status, as a sortable pair (older is smaller)."""
    changed = row.get("status_changed_at")
    seq = row.get("state_change_seq")
    return (float(changed) if isinstance(changed, int | float) else 0.0,
            seq if isinstance(seq, int) else 0)


def longest_wait(row: Mapping[str, Any]) -> tuple[float, int] | None:
    """Sort key: when a waiting agent started waiting; None (sorted last) for the rest."""
    return _since(row) if _status(row) in WAITING else None


def triage(row: Mapping[str, Any]) -> tuple[int, float, int]:
    """Sort key: status group (blocked first), then oldest state first."""
    return (TRIAGE_ORDER.get(_status(row), len(TRIAGE_ORDER)), *_since(row))


def waiting(row: Mapping[str, Any]) -> bool:
    """Filter: the agent is blocked or done."""
    return _status(row) in WAITING


def running(row: Mapping[str, Any]) -> bool:
    """Filter: the agent is working or blocked."""
    return _status(row) in ("working", "blocked")


@hookimpl
def cmux_register_view_sorts(register: RegisterViewSort) -> None:
    register("longest-wait", longest_wait,
             description="blocked or done agents, the one waiting longest first")
    register("triage", triage,
             description="blocked, done, working, idle; oldest state first in each group")


@hookimpl
def cmux_register_view_filters(register: RegisterViewFilter) -> None:
    register("waiting", waiting, description="agents that are blocked or done")
    register("running", running, description="agents that are working or blocked")
