"""``cmux markdown open``: show a file in a markdown surface (``markdown.open``)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from cmux_core.cli.common import SELECTED_WORKSPACE, AddCommon, Command, Result, add_group, arg


def open_params(ns: argparse.Namespace) -> Result:
    """Params of ``markdown.open``; inside a pane with no target given, the tab opens
    beside the calling surface (``$CMUX_SURFACE_ID``)."""
    surface = ns.surface_id
    if surface is None and ns.pane_id is None and ns.workspace_id is None \
            and ns.window_id is None:
        surface = os.environ.get("CMUX_SURFACE_ID") or None
    # A relative path names a file where the command runs, not in the workspace's directory.
    return {"path": os.path.abspath(os.path.expanduser(ns.path)),
            "workspace_id": ns.workspace_id, "surface_id": surface,
            "pane_id": ns.pane_id, "window_id": ns.window_id, "focus": ns.focus or None}


def show_opened(r: Result) -> None:
    print(f"OK surface={r['surface_ref']} pane={r['pane_ref']} path={r['path']}")


COMMANDS = [
    Command("open", "markdown.open",
            "show a file as a markdown tab beside the source surface (in its pane)",
            (arg("path", help="the file (relative to the current directory)"),
             SELECTED_WORKSPACE,
             arg("--surface", dest="surface_id", metavar="SURFACE",
                 help="the source surface: the tab goes into its pane, after it"),
             arg("--pane", dest="pane_id", metavar="PANE", help="the pane to open it in"),
             arg("--window", dest="window_id", metavar="WINDOW", help="the window"),
             arg("--focus", action="store_true", help="focus the new tab")),
            show_opened, params=open_params),
]


def add_markdown_commands(sub: Any, add_common: AddCommon) -> None:
    """Add the ``markdown`` group to ``sub``."""
    add_group(sub, "markdown", "show markdown files", COMMANDS, add_common)
