"""Remember the latest metadata tokens each pane reported."""

from __future__ import annotations

from collections.abc import Mapping

from cmux_core.hookspecs import hookimpl

LATEST: dict[str, dict[str, str]] = {}


@hookimpl
async def cmux_on_report_metadata(pane_id: str, tokens: Mapping[str, str | None]) -> None:
    # An async function: it runs on the plugin's own event loop, never the server's.
    pane = LATEST.setdefault(pane_id, {})
    for key, value in tokens.items():
        if value is None:
            pane.pop(key, None)
        else:
            pane[key] = value
