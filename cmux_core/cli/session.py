"""``cmux session``: everything the server holds, at once."""

from __future__ import annotations

from typing import Any

from cmux_core.cli.common import (
    AddCommon,
    Command,
    Result,
    add_group,
    outline,
    pane_title,
    star,
)


def show_snapshot(r: Result) -> None:
    snap = r["snapshot"]
    print(f"cmux {snap.get('version')} (protocol {snap.get('protocol')})")
    for ws in snap["workspaces"]:
        outline(0, ws["workspace_id"], ws.get("label"), star(ws.get("focused")))
        for tab in (t for t in snap["tabs"] if t["workspace_id"] == ws["workspace_id"]):
            outline(1, tab["tab_id"], tab.get("label"), star(tab.get("focused")))
            for p in (p for p in snap["panes"] if p["tab_id"] == tab["tab_id"]):
                outline(2, p["pane_id"], f"{p.get('columns')}x{p.get('rows')}",
                        star(p.get("focused")), pane_title(p))


COMMANDS = [
    Command("snapshot", "session.snapshot", "everything at once: workspaces, tabs, panes",
            render=show_snapshot),
]


def add_session_commands(sub: Any, add_common: AddCommon) -> None:
    """Add the ``session`` group to ``sub``."""
    add_group(sub, "session", "inspect the session", COMMANDS, add_common)
