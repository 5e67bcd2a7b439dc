"""Append every agent state report to a log file in the plugin's state directory."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cmux_core.hookspecs import hookimpl

LOG: list[Path] = []


@hookimpl
def cmux_startup(state_dir: Path) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    LOG[:] = [state_dir / "reports.jsonl"]


@hookimpl
def cmux_on_report_agent(pane_id: str, agent: str, state: str,
                         report: Mapping[str, Any]) -> None:
    # A plain function: it runs on this plugin's own worker thread, so file I/O is fine.
    if LOG:
        with LOG[0].open("a") as f:
            f.write(json.dumps({"pane_id": pane_id, "agent": agent, "state": state,
                                "seq": report.get("seq")}) + "\n")
