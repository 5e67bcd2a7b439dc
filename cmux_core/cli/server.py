"""``cmux server``: stop the running server or resize its virtual area; and the session file
options of ``cmux serve``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cmux_core.cli.common import AddCommon, Command, Result, add_group, arg, size_arg
from cmux_core.config import Settings


def area_params(ns: argparse.Namespace) -> Result:
    width, height = ns.size
    return {"width": width, "height": height}


COMMANDS = [
    Command("stop", "server.stop", "stop the server and every pane"),
    Command("set-area", "server.set_area", "resize the virtual area (COLSxROWS)",
            (arg("size", type=size_arg, metavar="COLSxROWS",
                 help="the area every tab is laid out in, e.g. 160x48"),),
            params=area_params,
            render=lambda r: print(f"{r['area']['width']}x{r['area']['height']}")),
]


def add_server_commands(sub: Any, add_common: AddCommon) -> None:
    """Add the ``server`` group to ``sub``."""
    add_group(sub, "server", "manage the server", COMMANDS, add_common)


def add_session_file_options(p: argparse.ArgumentParser) -> None:
    """``cmux serve --no-restore`` and ``--state-file PATH``."""
    p.add_argument("--no-restore", action="store_true",
                   help="start a fresh session instead of restoring the saved one (the saved "
                   "file stays until this session changes)")
    p.add_argument("--state-file", metavar="PATH",
                   help="where the session is saved and restored from (default: "
                   "$XDG_STATE_HOME/cmux/<session or socket name>.json)")


def apply_session_file_options(args: argparse.Namespace, settings: Settings) -> None:
    if args.no_restore:
        settings.restore = False
    if args.state_file:
        settings.state_file = Path(args.state_file).expanduser().absolute()
