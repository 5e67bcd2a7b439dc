"""cmux's ``new-workspace`` command line: create a workspace through the cmux v2
``workspace.create`` and print ``OK workspace:<n>``, as cmux's own program does."""

from __future__ import annotations

import argparse
from typing import Any

from cmux_core.cli.common import AddCommon, Result, run_and_print
from cmux_core.errors import CmuxError

_TRUE = ("true", "yes", "1", "on")
_FALSE = ("false", "no", "0", "off")


def focus_value(text: str) -> bool:
    """``--focus true|false`` (cmux spells the flag with a value)."""
    word = text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise CmuxError("invalid_params", f"--focus takes true or false, not {text!r}",
                    {"field": "focus"})


def show_created(r: Result) -> None:
    print(f"OK {r.get('workspace_ref') or r.get('workspace_id')}")


def cmd_new_workspace(ns: argparse.Namespace) -> int:
    params: dict[str, Any] = {
        "cwd": ns.cwd,
        "description": ns.description,
        "window_id": ns.window_id,
        # cmux types the command into the new shell and presses Enter.
        "initial_input": ns.command + "\r" if ns.command else None,
        "focus": focus_value(ns.focus) if ns.focus is not None else None,
    }
    return run_and_print(ns, "workspace.create", params, show_created)


def add_new_workspace_command(sub: Any, add_common: AddCommon) -> None:
    help = "create a workspace (workspace.create); focus stays put unless --focus true"
    p: argparse.ArgumentParser = sub.add_parser("new-workspace", help=help,
                                                description=help + ".")
    p.add_argument("--cwd", help="working directory of its shell")
    p.add_argument("--command", help="typed into the new shell, followed by Enter")
    p.add_argument("--description", help="its sidebar description")
    p.add_argument("--window", dest="window_id", metavar="WINDOW",
                   help="the window (default: the active one)")
    p.add_argument("--focus", metavar="true|false", help="select and focus it (default false)")
    add_common(p)
    p.set_defaults(func=cmd_new_workspace)
