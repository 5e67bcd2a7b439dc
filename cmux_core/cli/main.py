"""The ``cmux`` command: ``serve``, ``call METHOD [JSON|-]``, ``ping``, ``events``, ``api``,
``tree``, ``capabilities``, and one group module per command group under it; a name it
does not know is looked up among the subcommands other distributions add
(:mod:`~cmux_core.cli.extensions`).

Every command takes ``--json``. Errors the server answers print ``code: message`` and exit
1; a wrong command line or configuration prints ``cmux: <what is wrong>`` and exits 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from cmux_core.cli.agent import add_agent_commands
from cmux_core.cli.attach import add_attach_command
from cmux_core.cli.bridge import add_bridge_command
from cmux_core.cli.common import (
    Command,
    Result,
    add_command,
    add_common,
    arg,
    client,
    outline,
    print_json,
    size_arg,
    star,
)
from cmux_core.cli.extensions import find_extension
from cmux_core.cli.integration import add_integration_commands
from cmux_core.cli.layout import add_layout_commands
from cmux_core.cli.machine import add_machine_commands
from cmux_core.cli.manifests import add_explain_command, add_manifest_commands
from cmux_core.cli.markdown import add_markdown_commands
from cmux_core.cli.new_workspace import add_new_workspace_command
from cmux_core.cli.notification import add_notification_commands
from cmux_core.cli.pane import add_pane_commands
from cmux_core.cli.plugin import add_plugin_commands
from cmux_core.cli.server import (
    add_server_commands,
    add_session_file_options,
    apply_session_file_options,
    print_banner,
)
from cmux_core.cli.session import add_session_commands
from cmux_core.cli.sidebar import add_sidebar_commands
from cmux_core.cli.tab import add_tab_commands
from cmux_core.cli.ui import add_ui_command
from cmux_core.cli.window import add_window_commands
from cmux_core.cli.workspace import add_workspace_commands
from cmux_core.config import ConfigError, Settings, socket_path
from cmux_core.errors import CmuxError
from cmux_core.events import SUBSCRIBABLE

Handler = Callable[[argparse.Namespace], int]
LOG_FORMAT = "cmux %(levelname)s %(name)s: %(message)s"
USAGE_ERROR = 2


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, ``cmux: <what is wrong>``;
    the subcommands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"cmux: {message} (see: {self.prog} --help)\n")


def cmd_serve(args: argparse.Namespace) -> int:
    # The server and the method table are imported by the commands that use them: they
    # would add a quarter of a second to every other command's start.
    from cmux_core.app import serve

    if not args.quiet:
        logging.getLogger().setLevel(logging.INFO)
    settings = Settings.load()
    if args.size:
        settings.columns, settings.rows = args.size
    if args.emulator:
        settings.emulator = args.emulator
    if args.event_loop:
        settings.event_loop = args.event_loop
    if args.shell:
        settings.shell = args.shell
    settings.empty = args.empty
    settings.plugins_dirs.extend(Path(p) for p in args.plugins_dir or [])
    settings.manifests_dirs.extend(Path(p) for p in args.manifests_dir or [])
    apply_session_file_options(args, settings)
    return serve(settings, socket_path(args.socket, args.session), session=args.session,
                 on_ready=None if args.quiet else print_banner)


def cmd_call(args: argparse.Namespace) -> int:
    raw = args.params
    if raw == "-":
        raw = sys.stdin.read()
    try:
        params = json.loads(raw) if raw else {}
    except json.JSONDecodeError as exc:
        raise CmuxError("invalid_params", f"params are not valid JSON: {exc}") from None
    if not isinstance(params, dict):
        raise CmuxError("invalid_params", "params must be a JSON object")
    with client(args, timeout=None) as c:
        print_json(c.call(args.method, params))
    return 0


def cmd_ping(args: argparse.Namespace) -> int:
    with client(args) as c:
        result = c.call("ping")
    if args.json:
        print_json(result)
    else:
        print(f"pong: cmux {result.get('version')} (protocol {result.get('protocol')})")
    return 0


def cmd_events(args: argparse.Namespace) -> int:
    types = args.types or sorted(SUBSCRIBABLE)
    with client(args, timeout=None) as c:
        for event in c.events(types):
            print(json.dumps(event, ensure_ascii=False), flush=True)
    return 0


def cmd_api_schema(args: argparse.Namespace) -> int:
    """Print every method's params schema, generated from the params models."""
    from cmux_core.app import method_schema

    schema = method_schema()
    if args.json:
        print_json(schema)
    else:
        for name, entry in schema["methods"].items():
            fields = ", ".join(entry["params"].get("properties", {}))
            print(f"{name}({fields})")
    return 0


def show_tree(r: Result) -> None:
    for window in r["windows"]:
        outline(0, window["ref"], star(window.get("key")))
        for ws in window["workspaces"]:
            outline(1, ws["ref"], ws["workspace_id"], ws.get("title"), star(ws.get("selected")))
            for pane in ws["panes"]:
                surface = pane["surfaces"][0] if pane["surfaces"] else {}
                outline(2, pane["ref"], surface.get("public_pane_id"), star(pane.get("focused")),
                        surface.get("title"))


TOP_LEVEL = [
    Command("tree", "system.tree", "windows, workspaces and panes as a tree",
            (arg("--all", dest="all_windows", action="store_true", help="every window"),
             arg("--workspace", dest="workspace_id", metavar="WORKSPACE",
                 help="only this workspace")), show_tree),
    Command("capabilities", "system.capabilities", "list every method the server answers",
            render=lambda r: print("\n".join(r["methods"]))),
]


def add_serve_command(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the server in the foreground",
                       description="Run the server in the foreground until Ctrl-C, SIGTERM "
                       "or cmux server stop. Options override ~/.config/cmux/config.toml.")
    add_common(p)
    p.add_argument("--size", type=size_arg, metavar="COLSxROWS",
                   help="virtual area every tab is laid out in (default 120x40)")
    p.add_argument("--emulator", choices=["auto", "pyte", "ghostty"],
                   help="screen backend (default auto: ghostty when it imports, else pyte)")
    p.add_argument("--event-loop", choices=["auto", "asyncio", "uvloop"],
                   help="asyncio event loop (default auto: uvloop when it imports)")
    p.add_argument("--shell", metavar="PROGRAM",
                   help="program for new panes (default $SHELL, else /bin/sh)")
    p.add_argument("--plugins-dir", action="append", metavar="DIR",
                   help="load *.py plugins from DIR too (repeatable)")
    p.add_argument("--manifests-dir", action="append", metavar="DIR",
                   help="agent-detection manifests above all others (repeatable)")
    p.add_argument("--quiet", action="store_true",
                   help="no startup banner; log warnings and errors only")
    p.add_argument("--empty", action="store_true",
                   help="start with no workspace (unless a saved session is restored)")
    add_session_file_options(p)
    p.set_defaults(func=cmd_serve)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="cmux", description="Headless terminal multiplexer for AI coding "
                    "agents.")
    add_common(parser, top=True)
    parser.add_argument("--machine", dest="on_machine", metavar="NAME", help="run the "
                        "command on this saved machine, through the local server "
                        "(default: $CMUX_MACHINE)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    add_serve_command(sub)
    p = sub.add_parser("call", help="call any method: cmux call METHOD [JSON|-]",
                       description="Call any socket method and print its result as JSON.")
    add_common(p)
    p.add_argument("method", help="method name, e.g. workspace.list (cmux capabilities "
                   "lists them)")
    p.add_argument("params", nargs="?", default="", help="params as a JSON object, or - to "
                   "read them from standard input (default: none)")
    p.set_defaults(func=cmd_call)

    p = sub.add_parser("ping", help="check that the server answers")
    add_common(p)
    p.set_defaults(func=cmd_ping)

    p = sub.add_parser("events", help="stream events as JSON lines")
    add_common(p)
    p.add_argument("types", nargs="*", metavar="TYPE",
                   help="dotted event names, e.g. pane.created (default: all)")
    p.set_defaults(func=cmd_events)

    p = sub.add_parser("api", help="describe the socket API")
    api_sub = p.add_subparsers(dest="api_command", metavar="COMMAND", required=True)
    p = api_sub.add_parser("schema", help="params schema of every method (from the models)")
    add_common(p)
    p.set_defaults(func=cmd_api_schema)

    for add in (add_workspace_commands, add_tab_commands, add_pane_commands,
                add_window_commands, add_server_commands, add_session_commands,
                add_markdown_commands):
        add(sub, add_common)
    for cmd in TOP_LEVEL:
        add_command(sub, cmd, add_common)
    add_layout_commands(sub, add_common)
    add_explain_command(add_agent_commands(sub, add_common), add_common)
    add_sidebar_commands(sub, add_common)
    add_new_workspace_command(sub, add_common)
    add_attach_command(sub, add_common)
    add_ui_command(sub, add_common)
    add_manifest_commands(sub, add_common)
    add_plugin_commands(sub, add_common)
    add_integration_commands(sub, add_common)
    add_notification_commands(sub, add_common)
    add_machine_commands(sub, add_common)
    add_bridge_command(sub, add_common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT)
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    extension = find_extension(parser, argv)
    if extension is not None:
        return extension(argv[1:])
    args = parser.parse_args(argv)
    func: Handler | None = getattr(args, "func", None)
    if args.on_machine:
        os.environ["CMUX_MACHINE"] = args.on_machine
    if func is None:
        parser.print_help()
        return USAGE_ERROR
    try:
        return func(args)
    except CmuxError as exc:
        print(f"{exc.code}: {exc.message}", file=sys.stderr)
        return 1
    except ConfigError as exc:
        print(f"cmux: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except BrokenPipeError:
        return 0
    except (ConnectionError, TimeoutError) as exc:
        print(f"server_unavailable: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
