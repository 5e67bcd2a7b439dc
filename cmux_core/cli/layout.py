"""``cmux`` commands for arranging panes, tabs and workspaces, and for saving and
restoring layouts.

``cmux pane swap|move|zoom|resize|layout|neighbor|edges|focus-direction`` join the
``pane`` group, ``cmux tab move`` and ``cmux workspace move`` their groups, and
``cmux layout export|apply|set-ratio`` form the ``layout`` group::

    cmux layout export --tab w1:t1 > review.json
    cmux layout apply review.json --workspace w2 --focus

``layout apply`` reads what ``layout export`` printed (or a bare LayoutNode tree).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from cmux_core.cli.commands import (
    OPTIONAL_PANE,
    PANE,
    TAB,
    WORKSPACE,
    Command,
    Result,
    add_command,
    arg,
    fields,
    table,
)
from cmux_core.errors import CmuxError

DIRECTIONS = ("left", "right", "up", "down")
DIRECTION = arg("direction", choices=DIRECTIONS)
SOURCE_PANE = arg("--pane", dest="pane_id", metavar="PANE",
                  help="pane to start from (default: $CMUX_PANE_ID, else the focused pane)")


def _unchanged(result: Result) -> bool:
    """Print ``unchanged: <reason>`` for a no-op result; True when it was one."""
    if result.get("changed"):
        return False
    print(f"unchanged: {result.get('reason') or 'no change'}")
    return True


# -- pane commands --------------------------------------------------------------------


def swap_params(ns: argparse.Namespace) -> Result:
    if ns.target in DIRECTIONS:
        return {"pane_id": ns.pane_id, "direction": ns.target}
    return {"source_pane_id": ns.pane_id, "target_pane_id": ns.target}


def show_swap(r: Result) -> None:
    swap = r["swap"]
    if not _unchanged(swap):
        print(f"swapped {swap['source_pane_id']} with {swap['target_pane_id']}")


def move_params(ns: argparse.Namespace) -> Result:
    destination: Result
    if [ns.tab_id is not None, ns.new_tab, ns.new_workspace].count(True) != 1:
        raise CmuxError("invalid_params", "give exactly one of --tab, --new-tab and "
                        "--new-workspace")
    if ns.tab_id is not None:
        destination = {"type": "tab", "tab_id": ns.tab_id, "target_pane_id": ns.target,
                       "split": ns.split, "ratio": ns.ratio}
    elif ns.new_tab:
        destination = {"type": "new_tab", "workspace_id": ns.workspace_id, "label": ns.label}
    else:
        destination = {"type": "new_workspace", "label": ns.label,
                       "tab_label": ns.tab_label}
    return {"pane_id": ns.pane_id, "focus": ns.focus,
            "destination": {k: v for k, v in destination.items() if v is not None}}


def show_move(r: Result) -> None:
    moved = r["move_result"]
    if not _unchanged(moved):
        print(moved["pane"]["pane_id"])


def zoom_params(ns: argparse.Namespace) -> Result:
    return {"pane_id": ns.pane_id, "mode": ns.mode or "toggle"}


def show_zoom(r: Result) -> None:
    zoom = r["zoom"]
    state = "zoomed" if zoom["zoomed"] else "unzoomed"
    print(state if zoom["zoom_changed"] else f"{state} ({zoom.get('reason')})")


def show_resize(r: Result) -> None:
    if not _unchanged(r["resize"]):
        show_layout({"layout": r["resize"]["layout"]})


def show_layout(r: Result) -> None:
    lay = r["layout"]
    area = lay["area"]
    print(f"tab {lay['tab_id']}  area {area['width']}x{area['height']}"
          f"{'  zoomed' if lay['zoomed'] else ''}")
    table(lay["panes"], [
        ("PANE", lambda p: p["pane_id"]),
        ("X", lambda p: p["rect"]["x"]),
        ("Y", lambda p: p["rect"]["y"]),
        ("WIDTH", lambda p: p["rect"]["width"]),
        ("HEIGHT", lambda p: p["rect"]["height"]),
        ("FOCUSED", lambda p: "*" if p["focused"] else ""),
    ])
    if lay["splits"]:
        print()
        table(lay["splits"], [
            ("SPLIT", lambda s: s["id"]),
            ("DIRECTION", lambda s: s["direction"]),
            ("RATIO", lambda s: s["ratio"]),
        ])


def show_neighbor(r: Result) -> None:
    neighbor = r["neighbor"].get("neighbor_pane_id")
    if neighbor:
        print(neighbor)


def show_edges(r: Result) -> None:
    edges = r["edges"]
    print(" ".join(side for side in DIRECTIONS if edges[side]))


def show_focus(r: Result) -> None:
    focus = r["focus"]
    if not _unchanged(focus):
        print(focus["focused_pane_id"])


PANE_COMMANDS = [
    Command("swap", "pane.swap", "swap a pane with its neighbour in a direction, or with "
            "another pane of its tab; focus follows the pane",
            (arg("target", metavar="DIRECTION|PANE",
                 help="left, right, up, down, or the pane to swap with"), SOURCE_PANE),
            show_swap, params=swap_params, pane_default=True),
    Command("move", "pane.move", "move a pane (its process keeps running) into another tab, "
            "a new tab or a new workspace; prints its id afterwards",
            (PANE,
             arg("--tab", dest="tab_id", metavar="TAB", help="split into this tab"),
             arg("--new-tab", action="store_true", help="into a new tab"),
             arg("--new-workspace", action="store_true", help="into a new workspace"),
             arg("--target", metavar="PANE", help="with --tab: the pane to split "
                 "(default: that tab's focused pane)"),
             arg("--split", choices=["right", "down"], default="right",
                 help="with --tab: where the pane goes beside the target"),
             arg("--ratio", type=float, help="with --tab: share the target keeps (0.1-0.9)"),
             arg("--workspace", dest="workspace_id", metavar="WORKSPACE",
                 help="with --new-tab: the workspace (default: the pane's)"),
             arg("--label", help="label of the new tab or workspace"),
             arg("--tab-label", help="with --new-workspace: label of its tab"),
             arg("--focus", action="store_true", help="focus the moved pane")),
            show_move, params=move_params),
    Command("zoom", "pane.zoom", "focus a pane and show it alone over its tab (toggle)",
            (OPTIONAL_PANE,
             arg("--on", dest="mode", action="store_const", const="on", help="zoom in"),
             arg("--off", dest="mode", action="store_const", const="off", help="zoom out")),
            show_zoom, params=zoom_params, pane_default=True),
    Command("resize", "pane.resize", "move the divider beside a pane toward a direction",
            (DIRECTION, SOURCE_PANE,
             arg("--amount", type=float, help="share of the split to move (default 0.05)")),
            show_resize, pane_default=True),
    Command("layout", "pane.layout", "show the rectangles and splits of a pane's tab",
            (OPTIONAL_PANE,), show_layout, pane_default=True),
    Command("neighbor", "pane.neighbor", "print the nearest pane in a direction (if any)",
            (DIRECTION, SOURCE_PANE), show_neighbor, pane_default=True),
    Command("edges", "pane.edges", "print which sides of the area a pane touches",
            (OPTIONAL_PANE,), show_edges, pane_default=True),
    Command("focus-direction", "pane.focus_direction",
            "focus the nearest pane in a direction; prints it",
            (DIRECTION, SOURCE_PANE), show_focus, pane_default=True),
]


# -- order ----------------------------------------------------------------------------


def _show_list(key: str, id_key: str) -> Callable[[Result], None]:
    return lambda r: print("\n".join(str(item[id_key]) for item in r[key]))


INSERT_INDEX = arg("insert_index", type=int, metavar="INDEX",
                   help="gap to move to: 0 is before the first, N after the last")

TAB_COMMANDS = [
    Command("move", "tab.move", "move a tab within its workspace; prints the new order",
            (TAB, INSERT_INDEX), _show_list("tabs", "tab_id")),
]
WORKSPACE_COMMANDS = [
    Command("move", "workspace.move", "move a workspace; prints the new order",
            (WORKSPACE, INSERT_INDEX), _show_list("workspaces", "workspace_id")),
    Command("move-block", "workspace.move_block", "move several workspaces, in the order "
            "given, before another (default: to the end); prints the new order",
            (arg("workspace_ids", nargs="+", metavar="WORKSPACE"),
             arg("--before", dest="before_workspace_id", metavar="WORKSPACE")),
            _show_list("workspaces", "workspace_id")),
]


# -- portable layouts -----------------------------------------------------------------


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


def ratio_params(ns: argparse.Namespace) -> Result:
    bits = "" if ns.path in ("", "root") else ns.path
    if any(c not in "01" for c in bits):
        raise CmuxError("invalid_params", "path: use bits like 0, 10, 011 or 'root'")
    return {"tab_id": ns.tab_id, "pane_id": ns.pane_id, "ratio": ns.ratio,
            "path": [c == "1" for c in bits]}


def print_json(r: Result) -> None:
    print(json.dumps(r, indent=2, ensure_ascii=False))


LAYOUT_COMMANDS = [
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
             arg("--tab", dest="tab_id", metavar="TAB"),
             arg("--pane", dest="pane_id", metavar="PANE")),
            lambda r: fields({"tab": r["layout"]["tab_id"],
                              "root ratio": r["layout"]["root"].get("ratio")}),
            params=ratio_params),
]


def _group(sub: Any, name: str, noun: str) -> Any:
    """The ``ACTION`` subparsers of group ``name``, created when it does not exist yet."""
    parser = sub.choices.get(name)
    if parser is None:
        parser = sub.add_parser(name, help=f"manage {noun}", description=f"Manage {noun}.")
        return parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def add_layout_commands(sub: Any, add_common: Callable[[argparse.ArgumentParser], None]
                        ) -> None:
    """Add the arranging commands to the ``pane``, ``tab`` and ``workspace`` groups of
    ``sub`` (call after those groups exist) and the ``layout`` group."""
    for name, noun, commands in (("pane", "panes", PANE_COMMANDS),
                                 ("tab", "tabs", TAB_COMMANDS),
                                 ("workspace", "workspaces", WORKSPACE_COMMANDS),
                                 ("layout", "layouts", LAYOUT_COMMANDS)):
        inner = _group(sub, name, noun)
        for cmd in commands:
            add_command(inner, cmd, add_common)
