"""``cmux window``: list windows, show the active one, create, focus and close windows."""

from __future__ import annotations

from cmux_core.cli.common import CWD, FOCUS, Command, arg, show_key, show_table, starred

WINDOW = arg("window_id", metavar="WINDOW", help="window:1 or the window's UUID")

COMMANDS = [
    Command("list", "window.list", "list windows", render=show_table("windows", [
        ("WINDOW", "ref"), ("ID", "id"), ("WORKSPACES", "workspace_count"),
        ("SELECTED", "selected_workspace_ref"), ("ACTIVE", starred("key"))])),
    Command("current", "window.current", "show the active window",
            render=lambda r: print(f"{r['window_ref']}  {r['window_id']}")),
    Command("create", "window.create", "create a window with one workspace (prints its ref)",
            (CWD, FOCUS), show_key("window_ref")),
    Command("focus", "window.focus", "make a window the active one", (WINDOW,)),
    Command("close", "window.close", "close a window, its workspaces and their panes",
            (WINDOW,)),
]
