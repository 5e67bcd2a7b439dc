"""``cmux workspace``: list, show, create, focus, rename, close and reorder workspaces, step
through them, move them between windows and run their sidebar actions."""

from __future__ import annotations

import argparse

from cmux_core.cli.common import (
    FOCUS,
    LABEL,
    Command,
    Result,
    arg,
    launching,
    show_key,
    show_list,
    show_object,
    starred,
    table,
)

WORKSPACE = arg("workspace_id", metavar="WORKSPACE", help="w1, workspace:1, UUID or number")
IN_WINDOW = arg("--window", dest="window_id", metavar="WINDOW",
                help="the window (default: the active one)")
SELECTED = show_key("workspace_id")


def show_workspaces(r: Result) -> None:
    table(r["workspaces"], [("NUMBER", "number"), ("ID", "workspace_id"), ("LABEL", "label"),
                            ("TABS", "tab_count"), ("PANES", "pane_count"),
                            ("FOCUSED", starred("focused"))])


COMMANDS = [
    Command("list", "workspace.list", "list workspaces", render=show_workspaces),
    Command("get", "workspace.get", "show one workspace", (WORKSPACE,),
            show_object("workspace")),
    Command("create", "workspace.create", "create a workspace (prints its id)",
            launching(arg("--label", help="label of the workspace"),
                      arg("--description", help="free text shown with the workspace")),
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
    Command("next", "workspace.next", "select the next workspace of the window (wraps); "
            "prints it", (IN_WINDOW,), SELECTED),
    Command("previous", "workspace.previous", "select the previous workspace of the window "
            "(wraps); prints it", (IN_WINDOW,), SELECTED),
    Command("last", "workspace.last", "select the workspace selected before the current "
            "one; prints it", (IN_WINDOW,), SELECTED),
    Command("move-to-window", "workspace.move_to_window", "move a workspace to the end of "
            "another window", (WORKSPACE, arg("window_id", metavar="WINDOW",
                                              help="window:2 or the window's UUID"), FOCUS)),
    Command("reorder", "workspace.reorder", "move a workspace within its window to INDEX "
            "(0 is first)", (WORKSPACE, arg("index", type=int, metavar="INDEX",
                                            help="its new position, 0-based"))),
    Command("action", "workspace.action", "run a sidebar action: pin, unpin, rename, "
            "clear_name, set_description, clear_description, set_color, clear_color, "
            "move_up, move_down, move_top, move_bottom, close_others",
            (arg("action", help="the action"),
             arg("--workspace", dest="workspace_id", metavar="WORKSPACE",
                 help="the workspace (default: the selected one)"),
             arg("--title", help="new name for rename"),
             arg("--description", help="text for set_description"),
             arg("--color", help="color for set_color")),
            params=lambda ns: action_params(ns)),
    Command("env", "workspace.env", "print the environment a workspace gives its terminals",
            (arg("--workspace", dest="workspace_id", metavar="WORKSPACE",
                 help="the workspace (default: the selected one)"),),
            lambda r: print("\n".join(f"{k}={v}" for k, v in r["env"].items()))),
    Command("equalize", "workspace.equalize_splits", "give every split of a workspace an "
            "even share", (arg("--workspace", dest="workspace_id", metavar="WORKSPACE",
                               help="the workspace (default: the selected one)"),)),
]


def action_params(ns: argparse.Namespace) -> Result:
    params = {"action": ns.action, "workspace_id": ns.workspace_id, "title": ns.title,
              "description": ns.description, "color": ns.color}
    return {k: v for k, v in params.items() if v is not None}
