"""Subcommands other distributions add to ``cmux``.

A distribution declares an entry point in group ``cmux.cli``; its name is the subcommand
and its object a callable taking the arguments after that name and returning the exit
status (``cmux mcp --read-only`` calls ``main(["--read-only"])``; options written before
the name come first: ``cmux --socket S mcp`` calls ``main(["--socket", "S"])``). A name
that is one of cmux's own commands is never looked up, so a distribution cannot replace a
built-in command, and the entry points are read only for a name cmux does not know.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points

GROUP = "cmux.cli"

Extension = Callable[[list[str]], int]


def find_extension(name: str) -> Extension | None:
    """The callable a distribution provides for the subcommand ``name``, or None. The
    caller asks only for a name that is not a built-in command."""
    for point in entry_points(group=GROUP, name=name):
        command: Extension = point.load()
        return command
    return None
