"""``cmux pane``: list, create, type into, read, wait on and arrange panes.

The arranging commands (``swap``, ``move``, ``zoom``, ``resize``, ``layout``,
``neighbor``, ``edges``, ``focus-direction``) take the pane to start from with
``--pane``, defaulting like the rest to ``$CMUX_PANE_ID``, else the focused pane.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from cmux_core.cli.common import (
    IN_WORKSPACE,
    LABEL,
    LINES,
    TIMEOUT,
    AddCommon,
    Command,
    Result,
    add_arguments,
    arg,
    launching,
    pane_title,
    run_and_print,
    seconds_to_ms,
    show_key,
    show_object,
    show_table,
    show_text,
    source_arg,
    starred,
    table,
    text_arg,
)
from cmux_core.errors import CmuxError

PANE = arg("pane_id", metavar="PANE", help="pane id (w1:p1) or handle")
OPTIONAL_PANE = arg("pane_id", metavar="PANE", nargs="?",
                    help="pane id (default: $CMUX_PANE_ID, else the focused pane)")
SOURCE_PANE = arg("--pane", dest="pane_id", metavar="PANE",
                  help="pane to start from (default: $CMUX_PANE_ID, else the focused pane)")
DIRECTIONS = ("left", "right", "up", "down")
DIRECTION = arg("direction", choices=DIRECTIONS, help="left, right, up or down")


def pane_pid(p: Result) -> object:
    return f"exited {p.get('exit_code')}" if p.get("exited") else p.get("pid")


show_panes = show_table("panes", [
    ("PANE", "pane_id"), ("WORKSPACE", "workspace_id"), ("TAB", "tab_id"),
    ("FOCUSED", starred("focused")), ("SIZE", lambda p: f"{p.get('columns')}x{p.get('rows')}"),
    ("PID", pane_pid), ("CWD", lambda p: p.get("foreground_cwd") or p.get("cwd")),
    ("TITLE", pane_title),
])


def show_process_info(r: Result) -> None:
    info = r["process_info"]
    print(f"pane {info['pane_id']}  shell pid {info.get('shell_pid', '-')}  "
          f"foreground group {info.get('foreground_process_group_id', '-')}")
    table(info.get("foreground_processes", []),
          [("PID", "pid"), ("NAME", "name"), ("CWD", "cwd"), ("COMMAND", "cmdline")])


def send_text_params(ns: argparse.Namespace) -> Result:
    text = text_arg(ns.text)
    return {"pane_id": ns.pane_id, "text": text + "\r" if ns.enter else text}


def send_input_params(ns: argparse.Namespace) -> Result:
    keys = [*ns.keys, "enter"] if ns.enter else ns.keys
    return {"pane_id": ns.pane_id, "text": text_arg(ns.text), "keys": keys}


def wait_params(ns: argparse.Namespace) -> Result:
    return {"pane_id": ns.pane_id, "source": ns.source, "lines": ns.lines,
            "match": {"type": "regex" if ns.regex else "substring", "value": ns.pattern},
            "timeout_ms": seconds_to_ms(ns.timeout)}


# -- arranging ------------------------------------------------------------------------


def _unchanged(result: Result) -> bool:
    """Print ``unchanged: <reason>`` for a no-op result; True when it was one."""
    if result.get("changed"):
        return False
    print(f"unchanged: {result.get('reason') or 'no change'}")
    return True


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
    rects = [{"pane_id": p["pane_id"], **p["rect"], "focused": p["focused"]}
             for p in lay["panes"]]
    table(rects, [("PANE", "pane_id"), ("X", "x"), ("Y", "y"), ("WIDTH", "width"),
                  ("HEIGHT", "height"), ("FOCUSED", starred("focused"))])
    if lay["splits"]:
        print()
        table(lay["splits"], [("SPLIT", "id"), ("DIRECTION", "direction"), ("RATIO", "ratio")])


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


COMMANDS = [
    Command("list", "pane.list", "list panes", (IN_WORKSPACE,), show_panes),
    Command("get", "pane.get", "show one pane", (OPTIONAL_PANE,), show_object("pane"),
            pane_default=True),
    Command("current", "pane.current", "show the focused pane (or $CMUX_PANE_ID's)",
            render=show_object("pane"),
            params=lambda ns: {"caller_pane_id": os.environ.get("CMUX_PANE_ID")}),
    Command("split", "pane.split", "split a pane (prints the new pane's id)",
            launching(arg("--pane", dest="pane_id", metavar="PANE",
                          help="pane to split (default: $CMUX_PANE_ID, else the focused "
                               "pane)"),
                      arg("--direction", choices=["right", "down"], default="right",
                          help="where the new pane goes: right (side by side) or down "
                               "(stacked); default right"),
                      arg("--ratio", type=float, help="split ratio (clamped to 0.1-0.9)")),
            show_key("pane", "pane_id"), pane_default=True),
    Command("focus", "pane.focus", "focus a pane (and its workspace and tab)", (PANE,)),
    Command("rename", "pane.rename", "set a pane label", (PANE, LABEL)),
    Command("close", "pane.close", "close a pane and end its processes", (PANE,)),
    Command("send-text", "pane.send_text", "type text into a pane (raw, no paste)",
            (PANE, arg("text", help="text, or - for standard input"),
             arg("--enter", action="store_true", help="append a carriage return")),
            params=send_text_params),
    Command("send-keys", "pane.send_keys", "send key combos (enter, ctrl+c, ...)",
            (PANE, arg("keys", nargs="+", metavar="KEY",
                       help="a key or combo: enter, tab, esc, up, ctrl+c, alt+x, ...")),),
    Command("send-input", "pane.send_input", "paste text, then send keys",
            (PANE, arg("text", help="text, or - for standard input"),
             arg("keys", nargs="*", metavar="KEY", help="keys to send after the text"),
             arg("--enter", action="store_true", help="press enter after the keys")),
            params=send_input_params),
    Command("read", "pane.read", "print a pane's screen or recent output",
            (OPTIONAL_PANE, source_arg("visible"), LINES,
             arg("--ansi", dest="format", action="store_const", const="ansi",
                 help="keep colours and attributes as escape sequences")),
            show_text, pane_default=True),
    Command("wait", "pane.wait_for_output", "wait for a matching line and print it",
            (PANE, arg("pattern", metavar="PATTERN", help="text a line must contain "
                       "(with --regex, a regex a line must match)"),
             arg("--regex", action="store_true", help="pattern is a regex"),
             TIMEOUT, source_arg("recent, with wrapped lines joined"), LINES),
            show_key("matched_line"), params=wait_params),
    Command("process-info", "pane.process_info", "show a pane's foreground processes",
            (OPTIONAL_PANE,), show_process_info, pane_default=True),
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


def add_cmux_commands(sub: Any, add_common: AddCommon) -> None:
    """Add cmux's ``read-screen`` and surface commands to ``sub``."""
    add_read_screen_command(sub, add_common)
    add_cmux_surface_commands(sub, add_common)


def cmd_read_screen(ns: argparse.Namespace) -> int:
    if ns.lines is not None and ns.lines <= 0:
        raise CmuxError("invalid_params", "--lines must be greater than 0")
    params = {"workspace_id": ns.workspace_id, "surface_id": ns.surface_id,
              "scrollback": True if ns.scrollback else None, "lines": ns.lines,
              "format": ns.format}
    return run_and_print(ns, "surface.read_text", params, print_screen)


def print_screen(r: Result) -> None:
    sys.stdout.write(r["text"])


def add_read_screen_command(sub: Any, add_common: AddCommon) -> None:
    """``cmux read-screen`` (alias ``capture-pane``), as cmux's own command line names it."""
    p = sub.add_parser("read-screen", aliases=["capture-pane"],
                       help="print a surface's screen (surface.read_text)",
                       description="Print a surface's visible screen, or with --scrollback "
                       "or --lines the recent rows including the scrollback.")
    p.add_argument("--workspace", dest="workspace_id", metavar="WORKSPACE",
                   help="workspace (default: the one holding --surface, else the active one)")
    p.add_argument("--surface", dest="surface_id", metavar="SURFACE",
                   help="surface (default: the workspace's focused surface)")
    p.add_argument("--scrollback", action="store_true", help="include the scrollback")
    p.add_argument("--lines", type=int, metavar="N", help="the last N rows (N > 0)")
    p.add_argument("--format", choices=["text", "vt"], default=None,
                   help="text (default) or vt: colours and styles as escape sequences")
    add_common(p)
    p.set_defaults(func=cmd_read_screen)


# -- cmux's own command names for surfaces -------------------------------------------------


def unescape_text(text: str) -> str:
    r"""``\n``, ``\r``, ``\t`` and ``\\`` in ``text`` as the characters, as cmux's ``send``
    reads them; any other backslash stays."""
    out, i = [], 0
    while i < len(text):
        pair = text[i:i + 2]
        if pair in ("\\n", "\\r", "\\t", "\\\\"):
            out.append({"\\n": "\n", "\\r": "\r", "\\t": "\t", "\\\\": "\\"}[pair])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def caller_surface(ns: argparse.Namespace) -> str | None:
    """``--surface``, else (without ``--workspace``) the caller's own ``$CMUX_SURFACE_ID``."""
    if ns.surface_id is not None or ns.workspace_id is not None:
        return str(ns.surface_id) if ns.surface_id is not None else None
    return os.environ.get("CMUX_SURFACE_ID") or None


def show_ok(key: str) -> Any:
    return lambda r: print(f"OK {r.get(key)}")


def cmd_new_split(ns: argparse.Namespace) -> int:
    params = {"direction": ns.direction, "surface_id": caller_surface(ns),
              "workspace_id": ns.workspace_id, "focus": True if ns.focus else None}
    return run_and_print(ns, "surface.split", params, show_ok("surface_ref"))


def cmd_new_surface(ns: argparse.Namespace) -> int:
    params = {"pane_id": ns.pane_id, "workspace_id": ns.workspace_id,
              "focus": True if ns.focus else None}
    return run_and_print(ns, "surface.create", params, show_ok("surface_ref"))


def cmd_close_surface(ns: argparse.Namespace) -> int:
    params = {"surface_id": caller_surface(ns), "workspace_id": ns.workspace_id}
    return run_and_print(ns, "surface.close", params, show_ok("surface_ref"))


def cmd_send(ns: argparse.Namespace) -> int:
    text = unescape_text(" ".join(ns.text))
    if not text:
        raise CmuxError("invalid_params", "send requires text")
    params = {"text": text, "surface_id": caller_surface(ns), "workspace_id": ns.workspace_id}
    return run_and_print(ns, "surface.send_text", params, show_ok("surface_ref"))


def cmd_send_key(ns: argparse.Namespace) -> int:
    params = {"key": ns.key, "surface_id": caller_surface(ns),
              "workspace_id": ns.workspace_id}
    return run_and_print(ns, "surface.send_key", params, show_ok("surface_ref"))


show_pane_surfaces = show_table("surfaces", [("INDEX", "index"), ("SURFACE", "ref"),
                                             ("SELECTED", starred("selected")),
                                             ("TITLE", "title")])


def cmd_list_pane_surfaces(ns: argparse.Namespace) -> int:
    return run_and_print(ns, "pane.surfaces", {"pane_id": ns.pane_id,
                                               "workspace_id": ns.workspace_id},
                         show_pane_surfaces)


def add_cmux_surface_commands(sub: Any, add_common: AddCommon) -> None:
    """cmux's ``new-split``, ``new-surface``, ``close-surface``, ``send``, ``send-key``
    and ``list-pane-surfaces``."""
    def parser(name: str, help: str, func: Any, *, surface: bool = True,
               pane: bool = False) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help, description=help + ".")
        p.add_argument("--workspace", dest="workspace_id", metavar="WORKSPACE",
                       help="workspace (default: the active one)")
        if surface:
            p.add_argument("--surface", dest="surface_id", metavar="SURFACE",
                           help="surface (default: $CMUX_SURFACE_ID without --workspace, "
                           "else the focused one)")
        if pane:
            p.add_argument("--pane", dest="pane_id", metavar="PANE",
                           help="pane (default: the focused one)")
        add_common(p)
        p.set_defaults(func=func)
        return p

    p = parser("new-split", "split a surface's pane with a new terminal (surface.split)",
               cmd_new_split)
    add_arguments(p, (DIRECTION,))
    p.add_argument("--focus", action="store_true", help="focus the new surface")
    p = parser("new-surface", "add a terminal tab to a pane (surface.create)",
               cmd_new_surface, surface=False, pane=True)
    p.add_argument("--focus", action="store_true", help="select and focus it")
    parser("close-surface", "close a surface (surface.close)", cmd_close_surface)
    p = parser("send", "type text into a surface; \\n is Enter (surface.send_text)", cmd_send)
    p.add_argument("text", nargs="+", help="the text (words are joined with spaces)")
    p = parser("send-key", "press a key in a surface (surface.send_key)", cmd_send_key)
    p.add_argument("key", help="key name: enter, ctrl-c, up, ...")
    parser("list-pane-surfaces", "list a pane's surfaces (pane.surfaces)",
           cmd_list_pane_surfaces, surface=False, pane=True)
