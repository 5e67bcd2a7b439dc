"""``cmux config schema``: the JSON Schema of ``config.toml``, for editors; no server needed."""

from __future__ import annotations

import argparse
from typing import Any

from cmux_core.cli.common import AddCommon, print_json


def add_config_commands(sub: Any, add_common: AddCommon) -> None:
    group = sub.add_parser("config", help="the configuration file's JSON Schema",
                           description="About ~/.config/cmux/config.toml.")
    inner = group.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    p = inner.add_parser("schema", help="print the JSON Schema of config.toml",
                         description="Print the JSON Schema of config.toml; editors that "
                         "read TOML schemas (taplo, Even Better TOML) check the file with "
                         "it (docs/getting-started.md).")
    p.set_defaults(func=cmd_schema)


def cmd_schema(args: argparse.Namespace) -> int:
    from cmux_core.config_file import config_schema

    print_json(config_schema())
    return 0
