"""Count events by kind and expose the counts as plugin.event_counter.counts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from cmux_core.hookspecs import RegisterMethod, hookimpl

COUNTS: Counter[str] = Counter()


@hookimpl
async def cmux_on_event(kind: str, data: Mapping[str, Any]) -> None:
    COUNTS[kind] += 1


@hookimpl
def cmux_register_methods(register: RegisterMethod) -> None:
    async def counts(call: Any, params: dict[str, Any]) -> dict[str, Any]:
        return {"type": "event_counts", "counts": dict(COUNTS)}

    register("counts", counts)
