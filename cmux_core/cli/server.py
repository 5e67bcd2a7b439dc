"""``cmux server``: stop the running server or resize its virtual area; and the session file
options and start-up banner of ``cmux serve``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmux_core.cli.common import AddCommon, Command, Result, add_group, arg, size_arg
from cmux_core.config import Settings

if TYPE_CHECKING:
    from cmux_core.app import App


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


def print_banner(app: App) -> None:
    """Tell the user of ``cmux serve`` where the started server listens and how to reach it."""
    settings, socket_path = app.settings, app.socket_path
    pane = app.mux.focused_pane()
    backend = pane.terminal.emulator.backend if pane else settings.emulator
    bin_dir = Path(sys.executable).parent
    print(f"cmux {app.info.version} listening on {socket_path} "
          f"(area {settings.columns}x{settings.rows}, {backend} screens, pane "
          f"{pane.id if pane else '-'} running {settings.shell})\n"
          "In another shell:\n"
          f"  export CMUX_SOCKET_PATH={socket_path} PATH={bin_dir}:$PATH\n"
          "  cmux ping && cmux workspace list && cmux pane list\n"
          "Stop with Ctrl-C or `cmux server stop`.", flush=True)
