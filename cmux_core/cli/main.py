"""The ``cmux`` command: ``serve``, ``call METHOD [JSON|-]``, ``ping``, ``events`` and
thin wrappers over the socket methods. Every command takes ``--json``; errors
print ``code: message`` and exit non-zero.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cmux_core.client import Client
from cmux_core.config import Settings, parse_size, socket_path
from cmux_core.errors import CmuxError

Handler = Callable[[argparse.Namespace], int]


def _client(args: argparse.Namespace, timeout: float | None = 30.0) -> Client:
    return Client(socket_path(args.socket, args.session), timeout=timeout)


def _print_json(obj: object) -> None:
    print(json.dumps(obj, indent=2, ensure_ascii=False))


def cmd_serve(args: argparse.Namespace) -> int:
    from cmux_core.app import serve

    settings = Settings.load()
    if args.size:
        settings.columns, settings.rows = parse_size(args.size)
    if args.emulator:
        settings.emulator = args.emulator
    if args.event_loop:
        settings.event_loop = args.event_loop
    if args.shell:
        settings.shell = args.shell
    settings.plugins_dirs.extend(Path(p) for p in args.plugins_dir or [])
    settings.manifests_dirs.extend(Path(p) for p in args.manifests_dir or [])
    return serve(settings, socket_path(args.socket, args.session), session=args.session,
                 announce=not args.quiet)


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
    with _client(args, timeout=None) as client:
        _print_json(client.call(args.method, params))
    return 0


def cmd_ping(args: argparse.Namespace) -> int:
    with _client(args) as client:
        result = client.call("ping")
    if args.json:
        _print_json(result)
    else:
        print(f"pong: cmux {result.get('version')} (protocol {result.get('protocol')})")
    return 0


def cmd_events(args: argparse.Namespace) -> int:
    from cmux_core.events import SUBSCRIBABLE

    types = args.types or sorted(SUBSCRIBABLE)
    with _client(args, timeout=None) as client:
        for event in client.events(types):
            print(json.dumps(event, ensure_ascii=False), flush=True)
    return 0


def cmd_api_schema(args: argparse.Namespace) -> int:
    """Print every method's params schema, generated from the params models."""
    from cmux_core.api.dispatch import MethodTable
    from cmux_core.api.methods import register_core_methods

    table = MethodTable()
    register_core_methods(table)
    schema = table.schema()
    if args.json:
        _print_json(schema)
    else:
        for name, entry in schema["methods"].items():
            fields = ", ".join(entry["params"].get("properties", {}))
            print(f"{name}({fields})")
    return 0


def add_common(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    """``--socket``, ``--session``, ``--json``; accepted before or after the subcommand."""
    keep = None if top else argparse.SUPPRESS
    parser.add_argument("--socket", default=keep, help="socket path (default: "
                        "$CMUX_SOCKET_PATH or the per-user default)")
    parser.add_argument("--session", default=keep, help="named session (its own socket)")
    parser.add_argument("--json", action="store_true", default=False if top else keep,
                        help="print raw JSON results")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cmux", description="Headless terminal multiplexer "
                                     "for AI coding agents.")
    add_common(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("serve", help="run the server in the foreground")
    add_common(p)
    p.add_argument("--size", help="virtual area COLSxROWS (default 120x40)")
    p.add_argument("--emulator", choices=["auto", "pyte", "ghostty"])
    p.add_argument("--event-loop", choices=["auto", "asyncio", "uvloop"],
                   help="asyncio event loop (default auto: uvloop when it imports)")
    p.add_argument("--shell", help="program for new panes (default $SHELL)")
    p.add_argument("--plugins-dir", action="append", help="extra plugin directory")
    p.add_argument("--manifests-dir", action="append", help="extra manifests directory")
    p.add_argument("--quiet", action="store_true", help="do not print the startup banner")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("call", help="call any method: cmux call METHOD [JSON|-]")
    add_common(p)
    p.add_argument("method")
    p.add_argument("params", nargs="?", default="")
    p.set_defaults(func=cmd_call)

    p = sub.add_parser("ping", help="check that the server answers")
    add_common(p)
    p.set_defaults(func=cmd_ping)

    p = sub.add_parser("events", help="stream events as JSON lines")
    add_common(p)
    p.add_argument("types", nargs="*", help="dotted event names (default: all)")
    p.set_defaults(func=cmd_events)

    p = sub.add_parser("api", help="describe the socket API")
    api_sub = p.add_subparsers(dest="api_command", metavar="COMMAND", required=True)
    p = api_sub.add_parser("schema", help="params schema of every method (from the models)")
    add_common(p)
    p.set_defaults(func=cmd_api_schema)

    from cmux_core.cli.commands import add_object_commands

    add_object_commands(sub, add_common)
    from cmux_core.cli.layout import add_layout_commands

    add_layout_commands(sub, add_common)
    from cmux_core.cli.agent import add_agent_commands
    from cmux_core.cli.manifests import add_manifest_commands

    add_agent_commands(sub, add_common)
    from cmux_core.cli.sidebar import add_sidebar_commands

    add_sidebar_commands(sub, add_common)

    add_manifest_commands(sub, add_common)
    try:
        from cmux_core.cli.plugin import add_plugin_commands
    except ImportError:
        pass
    else:
        add_plugin_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Handler | None = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    try:
        return func(args)
    except CmuxError as exc:
        print(f"{exc.code}: {exc.message}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except (ConnectionError, TimeoutError) as exc:
        print(f"server_unavailable: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def run_and_print(args: argparse.Namespace, method: str, params: dict[str, Any],
                  render: Callable[[dict[str, Any]], None]) -> int:
    """Call ``method``; print JSON with ``--json``, else the human ``render``."""
    with _client(args, timeout=None) as client:
        result = client.call(method, {k: v for k, v in params.items() if v is not None})
    if args.json:
        _print_json(result)
    else:
        render(result)
    return 0
