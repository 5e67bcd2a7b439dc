"""Wrappers over the workspace, tab, pane, window and server methods for the ``cmux`` command.

Each subcommand is one :class:`Command` row: the method it calls, its arguments
and how the result is shown. An argument's ``dest`` is the method's param name,
so most rows need no code of their own; rows that shape params differently
(stdin text, timeouts in seconds, sizes) name a ``params`` function.

Commands that create something print the new id alone, so ``p=$(cmux pane split)``
works; actions that only answer ``ok`` print nothing; ``--json`` prints the raw
result everywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cmux_core.cli.main import run_and_print
from cmux_core.client import Client
from cmux_core.config import parse_size, socket_path

Result = dict[str, Any]
Render = Callable[[Result], None]
Arg = tuple[tuple[str, ...], dict[str, Any], str | None]


def arg(*flags: str, param: str | None = None, **kwargs: Any) -> Arg:
    """An ``add_argument`` call; its value is sent as ``param``, by default its dest."""
    return flags, kwargs, param


class EnvAction(argparse.Action):
    """Collects repeated ``--env K=V`` into one dict."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None
                 ) -> None:
        key, sep, value = str(values).partition("=")
        if not sep or not key:
            parser.error(f"{option_string} wants KEY=VALUE, not {values!r}")
        env = dict(getattr(namespace, self.dest) or {})
        env[key] = value
        setattr(namespace, self.dest, env)


# -- rendering ------------------------------------------------------------------------


def table(rows: list[Result], columns: list[tuple[str, Callable[[Result], object]]]) -> None:
    """Print ``rows`` as left-aligned columns under upper-case headers."""
    cells = [[h for h, _ in columns]]
    cells += [["" if (v := get(row)) is None else str(v) for _, get in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    for line in cells:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())


def fields(obj: Result) -> None:
    """Print an object as aligned ``key  value`` lines; non-strings as JSON."""
    width = max((len(k) for k in obj), default=0)
    for key, value in obj.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        print(f"{key.ljust(width)}  {shown}".rstrip())


def star(flag: object) -> str:
    return "*" if flag else ""


def pane_title(p: Result) -> object:
    return p.get("label") or p.get("terminal_title_stripped") or p.get("terminal_title")


def pane_pid(p: Result) -> object:
    return f"exited {p.get('exit_code')}" if p.get("exited") else p.get("pid")


PANE_COLUMNS: list[tuple[str, Callable[[Result], object]]] = [
    ("PANE", lambda p: p["pane_id"]),
    ("WORKSPACE", lambda p: p["workspace_id"]),
    ("TAB", lambda p: p["tab_id"]),
    ("FOCUSED", lambda p: star(p.get("focused"))),
    ("SIZE", lambda p: f"{p.get('columns')}x{p.get('rows')}"),
    ("PID", pane_pid),
    ("CWD", lambda p: p.get("foreground_cwd") or p.get("cwd")),
    ("TITLE", pane_title),
]


def show_workspaces(r: Result) -> None:
    table(r["workspaces"], [
        ("NUMBER", lambda w: w.get("number")),
        ("ID", lambda w: w["workspace_id"]),
        ("LABEL", lambda w: w.get("label")),
        ("TABS", lambda w: w.get("tab_count")),
        ("PANES", lambda w: w.get("pane_count")),
        ("FOCUSED", lambda w: star(w.get("focused"))),
    ])


def show_tabs(r: Result) -> None:
    table(r["tabs"], [
        ("TAB", lambda t: t["tab_id"]),
        ("WORKSPACE", lambda t: t["workspace_id"]),
        ("NUMBER", lambda t: t.get("number")),
        ("LABEL", lambda t: t.get("label")),
        ("PANES", lambda t: t.get("pane_count")),
        ("FOCUSED", lambda t: star(t.get("focused"))),
    ])


def show_panes(r: Result) -> None:
    table(r["panes"], PANE_COLUMNS)


def show_windows(r: Result) -> None:
    table(r["windows"], [
        ("WINDOW", lambda w: w["ref"]),
        ("ID", lambda w: w["id"]),
        ("WORKSPACES", lambda w: w.get("workspace_count")),
        ("SELECTED", lambda w: w.get("selected_workspace_ref")),
        ("ACTIVE", lambda w: star(w.get("key"))),
    ])


def outline(depth: int, *parts: object) -> None:
    """One indented line of a tree; empty parts are left out."""
    print("  " * depth + "  ".join(str(p) for p in parts if p not in (None, "")))


def show_tree(r: Result) -> None:
    for window in r["windows"]:
        outline(0, window["ref"], star(window.get("key")))
        for ws in window["workspaces"]:
            outline(1, ws["ref"], ws["workspace_id"], ws.get("title"), star(ws.get("selected")))
            for pane in ws["panes"]:
                surface = pane["surfaces"][0] if pane["surfaces"] else {}
                outline(2, pane["ref"], surface.get("public_pane_id"), star(pane.get("focused")),
                        surface.get("title"))


def show_snapshot(r: Result) -> None:
    snap = r["snapshot"]
    print(f"cmux {snap.get('version')} (protocol {snap.get('protocol')})")
    for ws in snap["workspaces"]:
        outline(0, ws["workspace_id"], ws.get("label"), star(ws.get("focused")))
        for tab in (t for t in snap["tabs"] if t["workspace_id"] == ws["workspace_id"]):
            outline(1, tab["tab_id"], tab.get("label"), star(tab.get("focused")))
            for p in (p for p in snap["panes"] if p["tab_id"] == tab["tab_id"]):
                outline(2, p["pane_id"], f"{p.get('columns')}x{p.get('rows')}",
                        star(p.get("focused")), pane_title(p))


def show_text(r: Result) -> None:
    text: str = r["read"]["text"]
    sys.stdout.write(text if not text or text.endswith("\n") else text + "\n")


def show_process_info(r: Result) -> None:
    info = r["process_info"]
    print(f"pane {info['pane_id']}  shell pid {info.get('shell_pid', '-')}  "
          f"foreground group {info.get('foreground_process_group_id', '-')}")
    table(info.get("foreground_processes", []), [
        ("PID", lambda p: p["pid"]),
        ("NAME", lambda p: p.get("name")),
        ("CWD", lambda p: p.get("cwd")),
        ("COMMAND", lambda p: p.get("cmdline")),
    ])


def show_key(*path: str) -> Render:
    """Print the value at ``path`` in the result (the new object's id, for creations)."""
    def render(r: Result) -> None:
        value: Any = r
        for key in path:
            value = value[key]
        print(value)
    return render


def show_object(key: str) -> Render:
    return lambda r: fields(r[key])


def show_nothing(r: Result) -> None:
    pass


# -- params ---------------------------------------------------------------------------


def text_arg(value: str) -> str:
    """``-`` means standard input, read whole."""
    return sys.stdin.read() if value == "-" else value


def send_text_params(ns: argparse.Namespace) -> Result:
    text = text_arg(ns.text)
    return {"pane_id": ns.pane_id, "text": text + "\r" if ns.enter else text}


def send_input_params(ns: argparse.Namespace) -> Result:
    keys = [*ns.keys, "enter"] if ns.enter else ns.keys
    return {"pane_id": ns.pane_id, "text": text_arg(ns.text), "keys": keys}


def wait_params(ns: argparse.Namespace) -> Result:
    return {"pane_id": ns.pane_id, "source": ns.source, "lines": ns.lines,
            "match": {"type": "regex" if ns.regex else "substring", "value": ns.pattern},
            "timeout_ms": None if ns.timeout is None else round(ns.timeout * 1000)}


def area_params(ns: argparse.Namespace) -> Result:
    width, height = ns.size
    return {"width": width, "height": height}


def size_arg(text: str) -> tuple[int, int]:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# -- the command table ------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    name: str
    method: str
    help: str
    args: tuple[Arg, ...] = ()
    render: Render = show_nothing
    params: Callable[[argparse.Namespace], Result] | None = None
    """Builds the params; None sends every argument by its dest, empty lists left out."""
    pane_default: bool = False
    """An omitted ``pane_id`` becomes ``$CMUX_PANE_ID``, else the focused pane."""


WORKSPACE = arg("workspace_id", metavar="WORKSPACE", help="w1, workspace:1, UUID or number")
TAB = arg("tab_id", metavar="TAB", help="tab id (w1:t1) or handle")
PANE = arg("pane_id", metavar="PANE", help="pane id (w1:p1) or handle")
OPTIONAL_PANE = arg("pane_id", metavar="PANE", nargs="?",
                    help="pane id (default: $CMUX_PANE_ID, else the focused pane)")
IN_WORKSPACE = arg("--workspace", dest="workspace_id", metavar="WORKSPACE",
                   help="only this workspace")
CWD = arg("--cwd", help="working directory of the new pane")
FOCUS = arg("--focus", action="store_true", help="focus what is created")
ENV = arg("--env", action=EnvAction, metavar="KEY=VALUE", help="environment (repeatable)")
ARGV = arg("argv", param="command", nargs="*", metavar="-- ARGV",
           help="program to run instead of the shell")
LABEL = arg("label", help="new label (empty restores the default)")
SOURCE = arg("--source", choices=["visible", "recent", "recent_unwrapped", "detection"])
LINES = arg("--lines", type=int, help="how many lines (at most 1000)")

GROUPS: dict[str, tuple[str, list[Command]]] = {
    "workspace": ("workspaces", [
        Command("list", "workspace.list", "list workspaces", render=show_workspaces),
        Command("get", "workspace.get", "show one workspace", (WORKSPACE,),
                show_object("workspace")),
        Command("create", "workspace.create", "create a workspace (prints its id)",
                (CWD, arg("--label"), FOCUS, ENV, arg("--description"), ARGV),
                show_key("workspace", "workspace_id")),
        Command("focus", "workspace.focus", "make a workspace the active one", (WORKSPACE,)),
        Command("rename", "workspace.rename", "set a workspace label", (WORKSPACE, LABEL)),
        Command("close", "workspace.close", "close a workspace and its panes", (WORKSPACE,)),
    ]),
    "tab": ("tabs", [
        Command("list", "tab.list", "list tabs", (IN_WORKSPACE,), show_tabs),
        Command("get", "tab.get", "show one tab", (TAB,), show_object("tab")),
        Command("create", "tab.create", "create a tab (prints its id)",
                (IN_WORKSPACE, CWD, arg("--label"), FOCUS, ENV, ARGV),
                show_key("tab", "tab_id")),
        Command("focus", "tab.focus", "focus a tab", (TAB,)),
        Command("rename", "tab.rename", "set a tab label", (TAB, LABEL)),
        Command("close", "tab.close", "close a tab and its panes", (TAB,)),
    ]),
    "pane": ("panes", [
        Command("list", "pane.list", "list panes", (IN_WORKSPACE,), show_panes),
        Command("get", "pane.get", "show one pane", (OPTIONAL_PANE,), show_object("pane"),
                pane_default=True),
        Command("current", "pane.current", "show the focused pane (or $CMUX_PANE_ID's)",
                render=show_object("pane"),
                params=lambda ns: {"caller_pane_id": os.environ.get("CMUX_PANE_ID")}),
        Command("split", "pane.split", "split a pane (prints the new pane's id)",
                (arg("--pane", dest="pane_id", metavar="PANE",
                     help="pane to split (default: $CMUX_PANE_ID, else the focused pane)"),
                 arg("--direction", choices=["right", "down"], default="right"),
                 arg("--ratio", type=float, help="split ratio (clamped to 0.1-0.9)"),
                 CWD, ENV, FOCUS, ARGV),
                show_key("pane", "pane_id"), pane_default=True),
        Command("focus", "pane.focus", "focus a pane (and its workspace and tab)", (PANE,)),
        Command("rename", "pane.rename", "set a pane label", (PANE, LABEL)),
        Command("close", "pane.close", "close a pane and end its processes", (PANE,)),
        Command("send-text", "pane.send_text", "type text into a pane (raw, no paste)",
                (PANE, arg("text", help="text, or - for standard input"),
                 arg("--enter", action="store_true", help="append a carriage return")),
                params=send_text_params),
        Command("send-keys", "pane.send_keys", "send key combos (enter, ctrl+c, ...)",
                (PANE, arg("keys", nargs="+", metavar="KEY"))),
        Command("send-input", "pane.send_input", "paste text, then send keys",
                (PANE, arg("text", help="text, or - for standard input"),
                 arg("keys", nargs="*", metavar="KEY"),
                 arg("--enter", action="store_true", help="press enter after the keys")),
                params=send_input_params),
        Command("read", "pane.read", "print a pane's screen or recent output",
                (OPTIONAL_PANE, SOURCE, LINES,
                 arg("--ansi", dest="format", action="store_const", const="ansi",
                     help="keep colours and attributes as escape sequences")),
                show_text, pane_default=True),
        Command("wait", "pane.wait_for_output", "wait for a matching line and print it",
                (PANE, arg("pattern"),
                 arg("--regex", action="store_true", help="pattern is a regex"),
                 arg("--timeout", type=float, help="seconds (default: forever)"),
                 SOURCE, LINES),
                show_key("matched_line"), params=wait_params),
        Command("process-info", "pane.process_info", "show a pane's foreground processes",
                (OPTIONAL_PANE,), show_process_info, pane_default=True),
    ]),
    "window": ("windows", [
        Command("list", "window.list", "list windows", render=show_windows),
        Command("current", "window.current", "show the active window",
                render=lambda r: print(f"{r['window_ref']}  {r['window_id']}")),
    ]),
    "server": ("the server", [
        Command("stop", "server.stop", "stop the server and every pane"),
        Command("set-area", "server.set_area", "resize the virtual area (COLSxROWS)",
                (arg("size", type=size_arg, metavar="COLSxROWS"),), params=area_params,
                render=lambda r: print(f"{r['area']['width']}x{r['area']['height']}")),
    ]),
    "session": ("the session", [
        Command("snapshot", "session.snapshot", "everything at once: workspaces, tabs, panes",
                render=show_snapshot),
    ]),
}

TOP_LEVEL = [
    Command("tree", "system.tree", "windows, workspaces and panes as a tree",
            (arg("--all", dest="all_windows", action="store_true", help="every window"),
             arg("--workspace", dest="workspace_id", metavar="WORKSPACE")), show_tree),
    Command("capabilities", "system.capabilities", "list every method the server answers",
            render=lambda r: print("\n".join(r["methods"]))),
]


def default_pane(ns: argparse.Namespace) -> str:
    """``$CMUX_PANE_ID`` (set inside panes), else the server's focused pane."""
    env = os.environ.get("CMUX_PANE_ID")
    if env:
        return env
    with Client(socket_path(ns.socket, ns.session)) as client:
        pane_id: str = client.call("pane.current")["pane"]["pane_id"]
    return pane_id


def runner(cmd: Command, dests: dict[str, str]) -> Callable[[argparse.Namespace], int]:
    """The handler for ``cmd``; ``dests`` maps each param name to its argument's dest."""
    def run(ns: argparse.Namespace) -> int:
        if cmd.pane_default and ns.pane_id is None:
            ns.pane_id = default_pane(ns)
        if cmd.params is not None:
            params = cmd.params(ns)
        else:
            params = {name: v for name, d in dests.items() if (v := getattr(ns, d)) != []}
        return run_and_print(ns, cmd.method, params, cmd.render)
    return run


def add_command(sub: Any, cmd: Command,
                add_common: Callable[[argparse.ArgumentParser], None]) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(cmd.name, help=cmd.help,
                                                     description=cmd.help)
    dests = {}
    for flags, kwargs, param in cmd.args:
        dest = parser.add_argument(*flags, **kwargs).dest
        dests[param or dest] = dest
    add_common(parser)
    parser.set_defaults(func=runner(cmd, dests))


def add_object_commands(sub: Any, add_common: Callable[[argparse.ArgumentParser], None]
                        ) -> None:
    """Add the ``workspace``, ``tab``, ``pane``, ``window``, ``server`` and ``session``
    groups and the ``tree`` and ``capabilities`` commands to ``sub``."""
    for group, (noun, commands) in GROUPS.items():
        parser = sub.add_parser(group, help=f"manage {noun}", description=f"Manage {noun}.")
        inner = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
        for cmd in commands:
            add_command(inner, cmd, add_common)
    for cmd in TOP_LEVEL:
        add_command(sub, cmd, add_common)
