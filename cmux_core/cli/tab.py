"""``cmux tab``: list, show, create, focus, rename, close and reorder tabs; and cmux's
``cmux tab-action`` (a tab context-menu action on a surface)."""

from __future__ import annotations

import argparse
from typing import Any

from cmux_core.cli.common import (
    IN_WORKSPACE,
    AddCommon,
    arg,
    container_commands,
    run_and_print,
    starred,
)
from cmux_core.errors import CmuxError

TAB = arg("tab_id", metavar="TAB", help="tab id (w1:t1) or handle")

COMMANDS = container_commands(
    "tab", TAB, [("TAB", "tab_id"), ("WORKSPACE", "workspace_id"), ("NUMBER", "number"),
                 ("LABEL", "label"), ("PANES", "pane_count"), ("FOCUSED", starred("focused"))],
    listing=(IN_WORKSPACE,),
    creating=(arg("--workspace", dest="workspace_id", metavar="WORKSPACE",
                  help="the workspace (default: the active one)"),
              arg("--label", help="label of the tab")),
    focus="focus a tab", move="move a tab within its workspace; prints the new order")


TAB_ACTION_EPILOG = """\
Target tab: --tab takes the surface the action is for, as tab:<n> (the tab ref), a
surface ref (surface:<n>) or a UUID; without it, the focused surface of --workspace
(else of the active workspace).

Examples:
  cmux tab-action --tab tab:3 --action rename --title build
  cmux tab-action --workspace workspace:2 --tab tab:5 --action pin
  cmux tab-action --tab tab:3 move_to_new_workspace
"""


def cmd_tab_action(ns: argparse.Namespace) -> int:
    action = ns.action or ns.action_word
    if not action:
        raise CmuxError("invalid_params", "give an action (--action ACTION)")
    params = {"action": action, "workspace_id": ns.workspace_id, "tab_id": ns.tab_id,
              "title": ns.title, "focus": True if ns.focus else None}
    return run_and_print(ns, "tab.action", params,
                         lambda r: print(f"OK {r.get('tab_ref')} {r.get('action')}"))


def add_tab_action_command(sub: Any, add_common: AddCommon) -> None:
    """``cmux tab-action``, as cmux's own command line names it."""
    p = sub.add_parser("tab-action", help="run a tab action on a surface (tab.action)",
                       description="Run a tab context-menu action on a surface:\n"
                       "rename, clear_name, close_left, close_right, close_others,\n"
                       "new_terminal_right, duplicate, pin, unpin, mark_unread, mark_read,\n"
                       "move_to_new_workspace.",
                       epilog=TAB_ACTION_EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action_word", nargs="?", metavar="ACTION", help="the action")
    p.add_argument("--action", help="the action (instead of the positional ACTION)")
    p.add_argument("--tab", "--surface", dest="tab_id", metavar="TAB",
                   help="target tab: tab:<n>, surface:<n> or a UUID")
    p.add_argument("--workspace", dest="workspace_id", metavar="WORKSPACE",
                   help="workspace of the target (default: the one holding --tab)")
    p.add_argument("--title", help="new title (rename)")
    p.add_argument("--focus", action="store_true", help="focus what the action creates")
    add_common(p)
    p.set_defaults(func=cmd_tab_action)
