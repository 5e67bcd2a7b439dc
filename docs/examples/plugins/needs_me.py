"""A view filter that keeps only agents waiting for a human."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cmux_core.hookspecs import RegisterViewFilter, hookimpl


def needs_me(row: Mapping[str, Any]) -> bool:
    return row.get("agent_status") in ("blocked", "done")


@hookimpl
def cmux_register_view_filters(register: RegisterViewFilter) -> None:
    register("needs-me", needs_me, description="agents that are blocked or done")
