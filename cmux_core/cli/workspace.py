"""``cmux workspace``: list, show, create, focus, rename, close and reorder workspaces, step
through them, move them between windows and run their sidebar actions."""

from __future__ import annotations

import argparse

from cmux_core.cli.common import (
    FOCUS,
    SELECTED_WORKSPACE,
    Command,
    Result,
    arg,
    container_commands,
    show_key,
    show_list,
    starred,
)

WORKSPACE = arg("workspace_id", metavar="WORKSPACE", help="w1, workspace:1, UUID or number")
IN_WINDOW = arg("--window", dest="window_id", metavar="WINDOW",
                help="the window (default: the active one)")
SELECTED = show_key("workspace_id")

COMMANDS = [
    *container_commands(
        "workspace", WORKSPACE,
        [("NUMBER", "number"), ("ID", "workspace_id"), ("LABEL", "label"),
         ("TABS", "tab_count"), ("PANES", "pane_count"), ("FOCUSED", starred("focused"))],
        creating=(arg("--label", help="label of the workspace"),
                  arg("--description", help="free text shown with the workspace")),
        focus="make a workspace the active one", move="move a workspace; prints the new order"),
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
             SELECTED_WORKSPACE,
             arg("--title", help="new name for rename"),
             arg("--description", help="text for set_description"),
             arg("--color", help="color for set_color")),
            params=lambda ns: action_params(ns)),
    Command("env", "workspace.env", "print the environment a workspace gives its terminals",
            (SELECTED_WORKSPACE,),
            lambda r: print("\n".join(f"{k}={v}" for k, v in r["env"].items()))),
    Command("equalize", "workspace.equalize_splits", "give every split of a workspace an "
            "even share", (SELECTED_WORKSPACE,)),
]


def action_params(ns: argparse.Namespace) -> Result:
    params = {"action": ns.action, "workspace_id": ns.workspace_id, "title": ns.title,
              "description": ns.description, "color": ns.color}
    return {k: v for k, v in params.items() if v is not None}
