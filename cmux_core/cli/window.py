"""``cmux window``: list windows and show the active one."""

from __future__ import annotations

from typing import Any

from cmux_core.cli.common import AddCommon, Command, Result, add_group, star, table


def show_windows(r: Result) -> None:
    table(r["windows"], [
        ("WINDOW", lambda w: w["ref"]),
        ("ID", lambda w: w["id"]),
        ("WORKSPACES", lambda w: w.get("workspace_count")),
        ("SELECTED", lambda w: w.get("selected_workspace_ref")),
        ("ACTIVE", lambda w: star(w.get("key"))),
    ])


COMMANDS = [
    Command("list", "window.list", "list windows", render=show_windows),
    Command("current", "window.current", "show the active window",
            render=lambda r: print(f"{r['window_ref']}  {r['window_id']}")),
]


def add_window_commands(sub: Any, add_common: AddCommon) -> None:
    """Add the ``window`` group to ``sub``."""
    add_group(sub, "window", "manage windows", COMMANDS, add_common)
