"""The ``cmux`` command: ``serve``, ``call METHOD [JSON|-]``, ``ping``, ``events``, ``api``,
``tree``, ``capabilities``, and one group module per command group under it; a name it
does not know is looked up among the subcommands other distributions add
(:mod:`~cmux_core.cli.extensions`).

Every command takes ``--json``. Errors the server answers print ``code: message`` and exit
1, a wait that timed out exits 124, and a wrong command line or configuration prints
``cmux: <what is wrong>`` and exits 2.

The parser is built from the table in :mod:`~cmux_core.cli.commands`; what a command needs
is imported when it runs, so that ``cmux --help`` and ``cmux ping`` start fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from cmux_core.cli.commands import (
    COMMANDS,
    COMPAT,
    MAIN,
    TIMED_OUT,
    USAGE_ERROR,
    build_parser,
    command_word,
)
from cmux_core.cli.common import AddCommon, add_common, add_subcommand
from cmux_core.errors import CmuxError

if TYPE_CHECKING:
    from cmux_core.cli.common import Result

Handler = Callable[[argparse.Namespace], int]
LOG_FORMAT = "cmux %(levelname)s %(name)s: %(message)s"

__all__ = ["COMMANDS", "COMPAT", "MAIN", "add_common", "build_parser", "main"]

# -- the commands this module runs ----------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    # The server and the method table are imported by the commands that use them: they
    # would add a quarter of a second to every other command's start.
    import logging
    from pathlib import Path

    from cmux_core.app import serve
    from cmux_core.cli.server import apply_session_file_options, print_banner
    from cmux_core.config import socket_path
    from cmux_core.config_file import load_settings

    if not args.quiet:
        logging.getLogger().setLevel(logging.INFO)
    settings = load_settings()
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
    import json

    from cmux_core.cli.common import client, print_json

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
    from cmux_core.cli.common import client, print_json

    with client(args) as c:
        result = c.call("ping")
    if args.json:
        print_json(result)
    else:
        print(f"pong: cmux {result.get('version')} (protocol {result.get('protocol')})")
    return 0


def cmd_events(args: argparse.Namespace) -> int:
    import json

    from cmux_core.cli.common import client
    from cmux_core.events import SUBSCRIBABLE

    types = args.types or sorted(SUBSCRIBABLE)
    with client(args, timeout=None) as c:
        for event in c.events(types):
            print(json.dumps(event, ensure_ascii=False), flush=True)
    return 0


def cmd_api_schema(args: argparse.Namespace) -> int:
    """Print every method's params schema, generated from the params models."""
    from cmux_core.app import method_schema
    from cmux_core.cli.common import print_json

    schema = method_schema()
    if args.json:
        print_json(schema)
    else:
        for name, entry in schema["methods"].items():
            fields = ", ".join(entry["params"].get("properties", {}))
            print(f"{name}({fields})")
    return 0


def show_tree(r: Result) -> None:
    from cmux_core.cli.common import outline, star

    for window in r["windows"]:
        outline(0, window["ref"], star(window.get("key")))
        for ws in window["workspaces"]:
            outline(1, ws["ref"], ws["workspace_id"], ws.get("title"), star(ws.get("selected")))
            for pane in ws["panes"]:
                surface = pane["surfaces"][0] if pane["surfaces"] else {}
                outline(2, pane["ref"], surface.get("public_pane_id"), star(pane.get("focused")),
                        surface.get("title"))


# -- the parsers of this module's commands ---------------------------------------------------


def add_serve_command(sub: Any, add_common: AddCommon) -> None:
    from cmux_core.cli.common import size_arg
    from cmux_core.cli.server import add_session_file_options

    p = add_subcommand(sub, "serve", add_common, cmd_serve, help="run the server in the foreground",
                       description="Run the server in the foreground until Ctrl-C, SIGTERM "
                       "or cmux server stop. Options override ~/.config/cmux/config.toml.")
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


def add_basic_commands(sub: Any, add_common: AddCommon) -> None:
    """``call``, ``ping``, ``events`` and ``api``."""
    p = add_subcommand(sub, "call", add_common, cmd_call,
                       help="call any method: cmux call METHOD [JSON|-]",
                       description="Call any socket method and print its result as JSON.")
    p.add_argument("method", help="method name, e.g. workspace.list (cmux capabilities "
                   "lists them)")
    p.add_argument("params", nargs="?", default="", help="params as a JSON object, or - to "
                   "read them from standard input (default: none)")

    p = add_subcommand(sub, "ping", add_common, cmd_ping, help="check that the server answers")

    p = add_subcommand(sub, "events", add_common, cmd_events, help="stream events as JSON lines")
    p.add_argument("types", nargs="*", metavar="TYPE",
                   help="dotted event names, e.g. pane.created (default: all)")

    p = sub.add_parser("api", help="describe the socket API")
    api_sub = p.add_subparsers(dest="api_command", metavar="COMMAND", required=True)
    p = api_sub.add_parser("schema", help="params schema of every method (from the models)")
    add_common(p)
    p.set_defaults(func=cmd_api_schema)


def add_system_commands(sub: Any, add_common: AddCommon) -> None:
    """``tree`` and ``capabilities``."""
    from cmux_core.cli.common import IN_WORKSPACE, Command, add_command, arg

    add_command(sub, Command(
        "tree", "system.tree", "windows, workspaces and panes as a tree",
        (arg("--all", dest="all_windows", action="store_true", help="every window"),
         IN_WORKSPACE), show_tree), add_common)
    add_command(sub, Command("capabilities", "system.capabilities",
                             "list every method the server answers",
                             render=lambda r: print("\n".join(r["methods"]))), add_common)


def add_agent_group(sub: Any, add_common: AddCommon) -> None:
    """``agent``, with ``agent explain`` from the manifests module."""
    from cmux_core.cli.agent import add_agent_commands
    from cmux_core.cli.manifests import add_explain_command

    add_explain_command(add_agent_commands(sub, add_common), add_common)


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    command = command_word(words)
    parser = build_parser(command or "")
    if command is not None and not any(command in (e.name, *e.aliases) for e in COMMANDS):
        from cmux_core.cli.extensions import find_extension

        extension = find_extension(command)
        if extension is not None:
            at = words.index(command)
            return extension([*words[:at], *words[at + 1:]])
        parser.error(f"unknown command {command!r}")
    args = parser.parse_args(words)
    # After parsing: ``--help`` and usage errors need no logging.
    import logging

    logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT)
    func: Handler | None = getattr(args, "func", None)
    if args.on_machine:
        import os

        os.environ["CMUX_MACHINE"] = args.on_machine
    if func is None:
        parser.print_help()
        return USAGE_ERROR
    try:
        return func(args)
    except CmuxError as exc:
        print(f"{exc.code}: {exc.message}", file=sys.stderr)
        return TIMED_OUT if exc.code == "timeout" else 1
    except BrokenPipeError:
        return 0
    except (ConnectionError, TimeoutError) as exc:
        print(f"server_unavailable: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        from cmux_core.config import ConfigError

        if not isinstance(exc, ConfigError):
            raise
        print(f"cmux: {exc}", file=sys.stderr)
        return USAGE_ERROR
