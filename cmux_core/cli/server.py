"""``cmux server``: stop the running server or resize its virtual area."""

from __future__ import annotations

import argparse
from typing import Any

from cmux_core.cli.common import AddCommon, Command, Result, add_group, arg, size_arg


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
