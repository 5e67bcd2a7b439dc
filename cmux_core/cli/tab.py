"""``cmux tab``: list, show, create, focus, rename, close and reorder tabs."""

from __future__ import annotations

from typing import Any

from cmux_core.cli.common import (
    ARGV,
    CWD,
    ENV,
    FOCUS,
    IN_WORKSPACE,
    LABEL,
    AddCommon,
    Command,
    Result,
    add_group,
    arg,
    show_key,
    show_list,
    show_object,
    star,
    table,
)

TAB = arg("tab_id", metavar="TAB", help="tab id (w1:t1) or handle")


def show_tabs(r: Result) -> None:
    table(r["tabs"], [
        ("TAB", lambda t: t["tab_id"]),
        ("WORKSPACE", lambda t: t["workspace_id"]),
        ("NUMBER", lambda t: t.get("number")),
        ("LABEL", lambda t: t.get("label")),
        ("PANES", lambda t: t.get("pane_count")),
        ("FOCUSED", lambda t: star(t.get("focused"))),
    ])


COMMANDS = [
    Command("list", "tab.list", "list tabs", (IN_WORKSPACE,), show_tabs),
    Command("get", "tab.get", "show one tab", (TAB,), show_object("tab")),
    Command("create", "tab.create", "create a tab (prints its id)",
            (arg("--workspace", dest="workspace_id", metavar="WORKSPACE",
                 help="the workspace (default: the active one)"),
             CWD, arg("--label", help="label of the tab"), FOCUS, ENV, ARGV),
            show_key("tab", "tab_id")),
    Command("focus", "tab.focus", "focus a tab", (TAB,)),
    Command("rename", "tab.rename", "set a tab label", (TAB, LABEL)),
    Command("close", "tab.close", "close a tab and its panes", (TAB,)),
    Command("move", "tab.move", "move a tab within its workspace; prints the new order",
            (TAB, arg("insert_index", type=int, metavar="INDEX",
                      help="gap to move to: 0 is before the first, N after the last")),
            show_list("tabs", "tab_id")),
]


def add_tab_commands(sub: Any, add_common: AddCommon) -> None:
    """Add the ``tab`` group to ``sub``."""
    add_group(sub, "tab", "manage tabs", COMMANDS, add_common)
