"""``cmux layout``: save a tab's layout and build tabs from saved layouts::

    cmux layout export --tab w1:t1 > review.json
    cmux layout apply review.json --workspace w2 --focus

``layout apply`` reads what ``layout export`` printed (or a bare LayoutNode tree).
Named saved layouts (cmux's layout trees, kept by the server) are ``layout save``,
``layout list``, ``layout show``, ``layout open`` and ``layout delete``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from cmux_core.cli.common import (
    SELECTED_WORKSPACE,
    Command,
    Result,
    arg,
    fields,
    print_json,
    show_key,
    show_table,
)
from cmux_core.errors import CmuxError


def read_layout(path: str) -> Any:
    """The LayoutNode tree in ``path`` (``-`` = stdin): an export result, its ``layout``
    object, or a bare tree."""
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
    except OSError as exc:
        raise CmuxError("invalid_params", f"cannot read {path}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CmuxError("invalid_layout", f"{path} is not valid JSON: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("layout"), dict):
        data = data["layout"]
    if isinstance(data, dict) and "root" in data:
        data = data["root"]
    return data


def apply_params(ns: argparse.Namespace) -> Result:
    return {"root": read_layout(ns.file), "workspace_id": ns.workspace_id,
            "tab_id": ns.tab_id, "tab_label": ns.tab_label, "focus": ns.focus}


NAME = arg("name", help="the saved layout's name")


show_saved = show_table("layouts", [
    ("NAME", "name"), ("PANES", lambda row: row.get("pane_count", row.get("error"))),
    ("SURFACES", "surface_count"), ("TITLE", "title")])


def ratio_params(ns: argparse.Namespace) -> Result:
    bits = "" if ns.path in ("", "root") else ns.path
    if any(c not in "01" for c in bits):
        raise CmuxError("invalid_params", "path: use bits like 0, 10, 011 or 'root'")
    return {"tab_id": ns.tab_id, "pane_id": ns.pane_id, "ratio": ns.ratio,
            "path": [c == "1" for c in bits]}


COMMANDS = [
    Command("export", "layout.export", "print a tab's layout (splits, ratios, and each "
            "pane's label, cwd and command) as JSON",
            (arg("--tab", dest="tab_id", metavar="TAB", help="the tab (default: the active "
                 "tab)"),
             arg("--pane", dest="pane_id", metavar="PANE", help="the tab holding this pane")),
            lambda r: print_json(r["layout"])),
    Command("apply", "layout.apply", "build a new tab from a saved layout (prints its id); "
            "with --tab it replaces that tab",
            (arg("file", metavar="FILE", help="layout JSON from 'layout export', or -"),
             arg("--workspace", dest="workspace_id", metavar="WORKSPACE",
                 help="add the tab here (default: the active workspace)"),
             arg("--tab", dest="tab_id", metavar="TAB", help="replace this tab"),
             arg("--label", dest="tab_label", help="label of the new tab"),
             arg("--focus", action="store_true", help="focus the new tab")),
            lambda r: print(r["layout"]["tab_id"]), params=apply_params),
    Command("set-ratio", "layout.set_split_ratio", "set the ratio of one split",
            (arg("ratio", type=float, help="share of the first child (0.1-0.9)"),
             arg("--path", default="root", help="split path from the root as bits, 0 = "
                 "first child, 1 = second (default: root)"),
             arg("--tab", dest="tab_id", metavar="TAB",
                 help="the tab (default: the active tab)"),
             arg("--pane", dest="pane_id", metavar="PANE", help="the tab holding this pane")),
            lambda r: fields({"tab": r["layout"]["tab_id"],
                              "root ratio": r["layout"]["root"].get("ratio")}),
            params=ratio_params),
    Command("save", "layout.save", "save a workspace's layout under NAME",
            (NAME, SELECTED_WORKSPACE,
             arg("--overwrite", action="store_true", help="replace a layout of that name")),
            show_key("path")),
    Command("list", "layout.list", "list the saved layouts", render=show_saved),
    Command("show", "layout.get", "print a saved layout as JSON", (NAME,),
            lambda r: print_json(r["workspace"])),
    Command("open", "layout.open", "open a new workspace from a saved layout (prints its id)",
            (NAME, arg("--focus", action="store_true", help="select the new workspace")),
            show_key("workspace", "workspace_id")),
    Command("delete", "layout.delete", "delete a saved layout", (NAME,)),
]


