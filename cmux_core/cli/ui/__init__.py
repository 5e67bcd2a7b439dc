"""``cmux ui``: the agents sidebar beside a live pane, in one terminal.

The application itself is in :mod:`cmux_core.cli.ui.app`, imported only when the command
runs (its drawing library would slow every other command's start).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from cmux_core.cli.common import AddCommon
from cmux_core.cli.sidebar import DEFAULT_CLIENT, view_params
from cmux_core.config import socket_path
from cmux_core.errors import CmuxError

SIDEBAR_WIDTH = 36


def cmd_ui(args: argparse.Namespace) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise CmuxError("not_a_terminal", "cmux ui needs a terminal on stdin and stdout")
    try:
        params = view_params(args.filter, args.sort, args.label)
    except ValueError as exc:
        raise CmuxError("invalid_params", str(exc)) from None
    view: bool | str = True if params is not None else (args.client or DEFAULT_CLIENT)
    path = str(socket_path(args.socket, args.session))
    from cmux_core.cli.ui.app import Ui

    ui = Ui(path, view, params, sidebar_width=args.sidebar_width)
    code = asyncio.run(ui.run())
    if code and ui.notice:
        print(ui.notice, file=sys.stderr)
    return code


def add_ui_command(sub: Any, add_common: AddCommon) -> None:
    p = sub.add_parser(
        "ui", help="the agents sidebar beside a live pane",
        description="The agents sidebar (through a view, as cmux agents shows it) beside a "
        "live pane. j/k or arrows move between agents, tab/shift-tab step through panes, "
        "b jumps to the next blocked agent, enter attaches full-screen (the detach key "
        "comes back), f focuses the pane on the server, q quits.")
    add_common(p)
    p.add_argument("--client", default=None, metavar="ID",
                   help=f"follow the view of client ID (default {DEFAULT_CLIENT}); ignored "
                        "with --filter/--sort")
    p.add_argument("--filter", action="append", default=[], metavar="EXPR",
                   help="a view filter for this ui, as cmux agents --filter")
    p.add_argument("--sort", action="append", default=[], metavar="KEY",
                   help="a view sort key for this ui, as cmux agents --sort")
    p.add_argument("--label", help="label of the view set by --filter/--sort")
    p.add_argument("--sidebar-width", type=int, default=SIDEBAR_WIDTH, metavar="CELLS",
                   help=f"width of the sidebar (default {SIDEBAR_WIDTH})")
    p.set_defaults(func=cmd_ui)
