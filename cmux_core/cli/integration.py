"""``cmux integration list|status|install|uninstall``: the ``integration.*`` methods, run
in this process.

No server is needed or asked: the plugins of this environment (installed, linked, in the
plugin directories) are loaded by the command itself, so an install edits the files of the
user who runs it (this process's ``HOME``, ``CLAUDE_CONFIG_DIR``, ``XDG_CONFIG_HOME``, ...),
whichever user a server runs as. The first line says so and names that user.

``install`` and ``uninstall`` print one line per message; with ``--dry-run`` the messages
carry the diff of every file that would change, and nothing is written.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
from pathlib import Path
from typing import Any

from cmux_core.cli.common import AddCommon, add_subcommand, add_subcommand_group, print_json


def add_integration_commands(subparsers: Any, add_common: AddCommon) -> None:
    """Add the ``integration`` command group to the ``cmux`` parser's subparsers."""
    sub = add_subcommand_group(
        subparsers, "integration", add_common,
        help="list, install and uninstall agent integrations (hooks)",
        description="List, inspect, install and uninstall the agent integrations plugins "
                    "register. Runs in this process, no server needed: the files changed "
                    "are those of the user running the command.")

    p = add_subcommand(sub, "list", add_common, cmd_list,
                       help="every registered integration and whether it is installed")
    _add_plugins_dir(p)

    p = add_subcommand(sub, "status", add_common, cmd_status,
                       help="one integration's declaration and status")
    _add_plugins_dir(p)
    p.add_argument("target", metavar="NAME", help="the integration (cmux integration list)")

    for action, text in (("install", "install an integration into the agent's settings"),
                         ("uninstall", "remove what an integration installed")):
        p = add_subcommand(sub, action, add_common, cmd_run, help=text)
        _add_plugins_dir(p)
        p.add_argument("target", metavar="NAME", help="the integration (cmux integration list)")
        p.add_argument("--dry-run", action="store_true",
                       help="print the diff of every file it would change; write nothing")
        if action == "install":
            p.add_argument("--option", action="append", type=_option, default=[],
                           metavar="KEY=VALUE", help="an option for the integration "
                           "(repeatable; see its documentation)")
        p.set_defaults(action=action)


def _add_plugins_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plugins-dir", action="append", default=[], metavar="DIR",
                   help="load *.py plugins from DIR too, as for cmux serve (repeatable)")


def _option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"invalid option {text!r}: use KEY=VALUE")
    return key, value


def _call(args: argparse.Namespace, method: str, params: dict[str, Any]) -> dict[str, Any]:
    from cmux_core.app import integration_call
    from cmux_core.config_file import load_settings

    settings = load_settings()
    settings.plugins_dirs.extend(Path(d).expanduser() for d in args.plugins_dir)
    return integration_call(settings, method, params)


def whose_files() -> str:
    """The first line of every human answer: where the integrations ran, for whom."""
    try:
        user = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        user = f"uid {os.getuid()}"
    return f"(run in this process, no server involved: the files of user {user}, " \
           f"HOME={os.environ.get('HOME') or Path.home()})"


def _emit(args: argparse.Namespace, result: dict[str, Any], lines: list[str]) -> int:
    if args.json:
        print_json(result)
    else:
        for line in [whose_files(), *lines]:
            print(line)
    return 0


def _installed(status: dict[str, Any] | None) -> str:
    if not status:
        return "-"
    if status.get("error"):
        return f"status failed: {status['error'].get('message', '')}"
    return "installed" if status.get("installed") else "not installed"


def describe(row: dict[str, Any]) -> list[str]:
    """Human lines for one integration (a ``integration.list`` row or a status result)."""
    lines = [f"{row['name']}  [{_installed(row.get('status'))}]  plugin {row['plugin_id']}"]
    if row.get("description"):
        lines.append(f"    {row['description']}")
    if row.get("source"):
        authority = row.get("authority") or "-"
        lines.append(f"    reports as {row['source']} for {row['agent']} "
                     f"(authority: {authority})")
    status = row.get("status") or {}
    for key, value in status.items():
        if key not in ("installed", "error"):
            lines.extend(_field(key, value, "    "))
    return lines


def _field(key: str, value: Any, indent: str) -> list[str]:
    """``key: value`` as text: a mapping one entry per line below it, a list joined by
    commas, null as ``-``."""
    if isinstance(value, dict):
        if not value:
            return [f"{indent}{key}: -"]
        return [f"{indent}{key}:"] + [line for k, v in value.items()
                                       for line in _field(str(k), v, indent + "  ")]
    if isinstance(value, list):
        text = ", ".join(_scalar(v) for v in value) if value else "-"
        return [f"{indent}{key}: {text}"]
    return [f"{indent}{key}: {_scalar(value)}"]


def _scalar(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(", ", ": "))
    return str(value)


def cmd_list(args: argparse.Namespace) -> int:
    result = _call(args, "integration.list", {})
    rows = result.get("integrations") or []
    lines = [line for row in rows for line in describe(row)] or ["no integrations registered"]
    return _emit(args, result, lines)


def cmd_status(args: argparse.Namespace) -> int:
    result = _call(args, "integration.status", {"target": args.target})
    return _emit(args, result, describe(result))


def cmd_run(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"target": args.target, "dry_run": args.dry_run}
    if getattr(args, "option", None):
        params["options"] = dict(args.option)
    result = _call(args, f"integration.{args.action}", params)
    lines = list(result.get("messages") or [])
    if not lines:
        lines = [f"{args.target}: nothing to do"]
    if args.dry_run:
        lines.append("(dry run: nothing was written)")
    return _emit(args, result, lines)
