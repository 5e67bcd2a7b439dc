"""Subcommands other distributions add to ``cmux``.

A distribution declares an entry point in group ``cmux.cli``; its name is the subcommand
and its object a callable taking the arguments after that name and returning the exit
status (``cmux mcp --read-only`` calls ``main(["--read-only"])``). A name the ``cmux``
parser already has is never looked up, so a distribution cannot replace a built-in command,
and the entry points are read only for a name the parser does not know.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points

GROUP = "cmux.cli"

Extension = Callable[[list[str]], int]


def builtin_commands(parser: argparse.ArgumentParser) -> set[str]:
    """The subcommand names ``parser`` knows."""
    return {name for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for name in action.choices}


def find_extension(parser: argparse.ArgumentParser, argv: Sequence[str]) -> Extension | None:
    """The callable a distribution provides for ``argv[0]``, or None (no such entry point,
    an option, or a built-in command)."""
    if not argv or argv[0].startswith("-") or argv[0] in builtin_commands(parser):
        return None
    for point in entry_points(group=GROUP, name=argv[0]):
        command: Extension = point.load()
        return command
    return None
