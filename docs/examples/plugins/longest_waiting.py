"""Sort agents so the one that has waited longest for its human comes first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cmux_core.hookspecs import RegisterViewSort, hookimpl


def waiting_since(row: Mapping[str, Any]) -> float:
    # Rows that are not waiting sort last; older waits (smaller times) sort first.
    if row.get("agent_status") not in ("blocked", "done"):
        return float("inf")
    return float(row.get("status_changed_unix_ms") or 0)


@hookimpl
def cmux_register_view_sorts(register: RegisterViewSort) -> None:
    register("longest-waiting", waiting_since,
             description="blocked or done agents, longest waiting first")
