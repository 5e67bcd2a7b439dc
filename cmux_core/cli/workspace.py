"""``cmux workspace``: list, show, create, focus, rename, close and reorder workspaces."""

from __future__ import annotations

from typing import Any

from cmux_core.cli.common import (
    ARGV,
    CWD,
    ENV,
    FOCUS,
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

WORKSPACE = arg("workspace_id", metavar="WORKSPACE", help="w1, workspace:1, UUID or number")


def show_workspaces(r: Result) -> None:
    table(r["workspaces"], [
        ("NUMBER", lambda w: w.get("number")),
        ("ID", lambda w: w["workspace_id"]),
        ("LABEL", lambda w: w.get("label")),
        ("TABS", lambda w: w.get("tab_count")),
        ("PANES", lambda w: w.get("pane_count")),
        ("FOCUSED", lambda w: star(w.get("focused"))),
    ])


COMMANDS = [
    Command("list", "workspace.list", "list workspaces", render=show_workspaces),
    Command("get", "workspace.get", "show one workspace", (WORKSPACE,),
            show_object("workspace")),
    Command("create", "workspace.create", "create a workspace (prints its id)",
            (CWD, arg("--label", help="label of the workspace"), FOCUS, ENV,
             arg("--description", help="free text shown with the workspace"), ARGV),
            show_key("workspace", "workspace_id")),
    Command("focus", "workspace.focus", "make a workspace the active one", (WORKSPACE,)),
    Command("rename", "workspace.rename", "set a workspace label", (WORKSPACE, LABEL)),
    Command("close", "workspace.close", "close a workspace and its panes", (WORKSPACE,)),
    Command("move", "workspace.move", "move a workspace; prints the new order",
            (WORKSPACE, arg("insert_index", type=int, metavar="INDEX",
                            help="gap to move to: 0 is before the first, N after the last")),
            show_list("workspaces", "workspace_id")),
    Command("move-block", "workspace.move_block", "move several workspaces, in the order "
            "given, before another (default: to the end); prints the new order",
            (arg("workspace_ids", nargs="+", metavar="WORKSPACE",
                 help="the workspaces to move, in their new order"),
             arg("--before", dest="before_workspace_id", metavar="WORKSPACE",
                 help="the workspace they go before (default: they go last)")),
            show_list("workspaces", "workspace_id")),
]


def add_workspace_commands(sub: Any, add_common: AddCommon) -> None:
    """Add the ``workspace`` group to ``sub``."""
    add_group(sub, "workspace", "manage workspaces", COMMANDS, add_common)
