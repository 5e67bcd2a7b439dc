"""What every ``cmux`` command group shares: the common options, the client, the command
table and the renderers.

The modules of ``cmux_core.cli`` import as a tree: :mod:`~cmux_core.cli.main` builds the
parser from the group modules (``workspace``, ``tab``, ``pane``, ``layout``, ``window``,
``server``, ``session``, ``agent``, ``sidebar``, ``manifests``, ``plugin``, ...), importing
only the one of the command being run; each group module imports this one (and its own
helpers); this one imports nothing from ``cmux_core.cli``, and the client and the
configuration only inside the functions that use them, so building the parser stays cheap.

A group made of socket methods is a list of :class:`Command` rows: the method a
subcommand calls, its arguments and how the result is shown. An argument's ``dest`` is
the method's param name, so most rows need no code of their own; rows that shape params
differently (stdin text, timeouts in seconds, sizes) name a ``params`` function.

Commands that create something print the new id alone, so ``p=$(cmux pane split)``
works; actions that only answer ``ok`` print nothing; ``--json`` prints the raw
result everywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from cmux_core.client import Client

Result = dict[str, Any]
Render = Callable[[Result], None]
Arg = tuple[tuple[str, ...], dict[str, Any], str | None]
AddCommon = Callable[[argparse.ArgumentParser], None]
"""Adds the common options to a subcommand's parser (:func:`add_common`)."""


# -- options every command takes ---------------------------------------------------------


def session_name(text: str) -> str:
    """``--session``'s type: a name the socket path can be made from."""
    from cmux_core.config import valid_session_name

    if not valid_session_name(text):
        raise argparse.ArgumentTypeError(f"invalid session name {text!r}: use 1-64 of "
                                         "A-Z a-z 0-9 . _ -")
    return text


def add_common(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    """``--socket``, ``--session``, ``--json``; accepted before or after the subcommand.

    Only the ``top`` parser sets defaults, so an option given before the subcommand is
    not reset by the subcommand's parser.
    """
    keep = None if top else argparse.SUPPRESS
    parser.add_argument("--socket", default=keep, metavar="PATH", help="socket path "
                        "(default: $CMUX_SOCKET_PATH, else the session's or the per-user "
                        "default)")
    parser.add_argument("--session", default=keep, type=session_name, metavar="NAME",
                        help="named session with its own socket (default: $CMUX_SESSION)")
    parser.add_argument("--json", action="store_true", default=False if top else keep,
                        help="print raw JSON results")


def client(args: argparse.Namespace, timeout: float | None = 30.0) -> Client:
    """A client for the server ``--socket``/``--session`` name (not yet connected)."""
    # Imported here, so that building the parser (and ``--help``) does not load it.
    from cmux_core.client import Client
    from cmux_core.config import socket_path

    return Client(socket_path(args.socket, args.session), timeout=timeout)


def print_json(obj: object) -> None:
    print(json.dumps(obj, indent=2, ensure_ascii=False))


def run_and_print(args: argparse.Namespace, method: str, params: Result,
                  render: Render) -> int:
    """Call ``method`` (params that are None left out); print JSON with ``--json``, else
    the human ``render``. Returns the exit code."""
    with client(args, timeout=None) as c:
        result = c.call(method, {k: v for k, v in params.items() if v is not None})
    if args.json:
        print_json(result)
    else:
        render(result)
    return 0


# -- argument types and params ---------------------------------------------------------------


def arg(*flags: str, param: str | None = None, **kwargs: Any) -> Arg:
    """An ``add_argument`` call; its value is sent as ``param``, by default its dest."""
    return flags, kwargs, param


class EnvAction(argparse.Action):
    """Collects repeated ``--env K=V`` into one dict."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None
                 ) -> None:
        key, sep, value = str(values).partition("=")
        if not sep or not key:
            parser.error(f"{option_string} wants KEY=VALUE, not {values!r}")
        env = dict(getattr(namespace, self.dest) or {})
        env[key] = value
        setattr(namespace, self.dest, env)


def size_arg(text: str) -> tuple[int, int]:
    """``COLSxROWS`` as an argument type, so a bad size is a usage error."""
    from cmux_core.config import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def text_arg(value: str) -> str:
    """``-`` means standard input, read whole."""
    return sys.stdin.read() if value == "-" else value


def seconds_to_ms(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1000)


CWD = arg("--cwd", metavar="DIR", help="working directory of the new pane")
FOCUS = arg("--focus", action="store_true", help="focus what is created")
ENV = arg("--env", action=EnvAction, metavar="KEY=VALUE", help="environment (repeatable)")
ARGV = arg("argv", param="command", nargs="*", metavar="-- ARGV",
           help="program to run instead of the shell")
LABEL = arg("label", help="new label (empty restores the default)")
INSERT_INDEX = arg("insert_index", type=int, metavar="INDEX",
                   help="gap to move to: 0 is before the first, N after the last")


def launching(*own: Arg) -> tuple[Arg, ...]:
    """The arguments of a command that starts a program in a new pane: ``own``, then
    ``--cwd``, ``--focus``, ``--env`` and the program's argv."""
    return (*own, CWD, FOCUS, ENV, ARGV)


IN_WORKSPACE = arg("--workspace", dest="workspace_id", metavar="WORKSPACE",
                   help="only this workspace")
SELECTED_WORKSPACE = arg("--workspace", dest="workspace_id", metavar="WORKSPACE",
                         help="the workspace (default: the selected one)")


def source_arg(default: str) -> Arg:
    """``--source``: which text a read or wait looks at."""
    return arg("--source", choices=["visible", "recent", "recent_unwrapped", "detection"],
               help="visible: the screen; recent: the screen and its scrollback; "
                    "recent_unwrapped: the same with wrapped lines joined; detection: "
                    f"what agent detection reads (default: {default})")


LINES = arg("--lines", type=int, help="how many of the last rows, at most 1000 (default: "
            "the whole screen; 80 for recent)")
TIMEOUT = arg("--timeout", type=float, metavar="SECONDS", help="give up after SECONDS, "
              "exiting 1 (default: wait forever)")


# -- rendering ------------------------------------------------------------------------------


Column = tuple[str, str | Callable[[Result], object]]
"""A table column: its header, and the row's key it shows or a function of the row."""


def _cell(row: Result, get: str | Callable[[Result], object]) -> str:
    value = row.get(get) if isinstance(get, str) else get(row)
    return "" if value is None else str(value)


def table(rows: list[Result], columns: list[Column]) -> None:
    """Print ``rows`` as left-aligned columns under upper-case headers (a key a row lacks
    shows blank)."""
    cells = [[h for h, _ in columns]]
    cells += [[_cell(row, get) for _, get in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    for line in cells:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())


def show_table(key: str, columns: list[Column]) -> Render:
    """Print the rows of ``key`` as a :func:`table` of ``columns`` (a list, for ``list``
    commands)."""
    return lambda r: table(r[key], columns)


def fields(obj: Result) -> None:
    """Print an object as aligned ``key  value`` lines; non-strings as JSON."""
    width = max((len(k) for k in obj), default=0)
    for key, value in obj.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        print(f"{key.ljust(width)}  {shown}".rstrip())


def star(flag: object) -> str:
    return "*" if flag else ""


def starred(key: str) -> Callable[[Result], str]:
    """A column showing ``*`` where the row's ``key`` is true."""
    return lambda row: star(row.get(key))


def outline(depth: int, *parts: object) -> None:
    """One indented line of a tree; empty parts are left out."""
    print("  " * depth + "  ".join(str(p) for p in parts if p not in (None, "")))


def pane_title(p: Result) -> object:
    return p.get("label") or p.get("terminal_title_stripped") or p.get("terminal_title")


def show_text(r: Result) -> None:
    text: str = r["read"]["text"]
    sys.stdout.write(text if not text or text.endswith("\n") else text + "\n")


def show_key(*path: str) -> Render:
    """Print the value at ``path`` in the result (the new object's id, for creations)."""
    def render(r: Result) -> None:
        value: Any = r
        for key in path:
            value = value[key]
        print(value)
    return render


def show_object(key: str) -> Render:
    return lambda r: fields(r[key])


def show_nothing(r: Result) -> None:
    pass


def show_list(key: str, id_key: str) -> Render:
    """Print the id of each item of ``key``, one a line (a new order, for moves)."""
    return lambda r: print("\n".join(str(item[id_key]) for item in r[key]))


# -- the command table ------------------------------------------------------------------------


class Command(NamedTuple):
    name: str
    method: str
    help: str
    args: tuple[Arg, ...] = ()
    render: Render = show_nothing
    params: Callable[[argparse.Namespace], Result] | None = None
    """Builds the params; None sends every argument by its dest, empty lists left out."""
    pane_default: bool = False
    """An omitted ``pane_id`` becomes ``$CMUX_PANE_ID``, else the focused pane."""


def default_pane(ns: argparse.Namespace) -> str:
    """``$CMUX_PANE_ID`` (set inside panes), else the server's focused pane."""
    env = os.environ.get("CMUX_PANE_ID")
    if env:
        return env
    with client(ns) as c:
        pane_id: str = c.call("pane.current")["pane"]["pane_id"]
    return pane_id


def runner(cmd: Command, dests: dict[str, str]) -> Callable[[argparse.Namespace], int]:
    """The handler for ``cmd``; ``dests`` maps each param name to its argument's dest."""
    def run(ns: argparse.Namespace) -> int:
        if cmd.pane_default and ns.pane_id is None:
            ns.pane_id = default_pane(ns)
        if cmd.params is not None:
            params = cmd.params(ns)
        else:
            params = {name: v for name, d in dests.items() if (v := getattr(ns, d)) != []}
        return run_and_print(ns, cmd.method, params, cmd.render)
    return run


def add_command(sub: Any, cmd: Command, add_common: AddCommon) -> None:
    """Add ``cmd`` to the subparsers ``sub``."""
    parser: argparse.ArgumentParser = sub.add_parser(cmd.name, help=cmd.help,
                                                     description=cmd.help)
    dests = add_arguments(parser, cmd.args)
    add_common(parser)
    parser.set_defaults(func=runner(cmd, dests))


def add_arguments(parser: argparse.ArgumentParser, args: Sequence[Arg]) -> dict[str, str]:
    """Add ``args`` to ``parser``; returns each one's param name mapped to its dest."""
    dests = {}
    for flags, kwargs, param in args:
        dest = parser.add_argument(*flags, **kwargs).dest
        dests[param or dest] = dest
    return dests


def add_subcommand(sub: Any, name: str, add_common: AddCommon,
                   run: Callable[[argparse.Namespace], int], **parser: Any
                   ) -> argparse.ArgumentParser:
    """Add the subcommand ``name`` (``parser``: its ``help``, ``description``, ...) to the
    subparsers ``sub``, with the common options, run by ``run``; returns its parser for the
    command's own arguments."""
    p: argparse.ArgumentParser = sub.add_parser(name, **parser)
    add_common(p)
    p.set_defaults(func=run)
    return p


def add_subcommand_group(sub: Any, name: str, add_common: AddCommon, **parser: Any) -> Any:
    """Add the group ``name`` (``parser``: its ``help``, ``description``, ...) to the
    subparsers ``sub``, with the common options; returns the group's subparsers, whose
    ``ACTION`` lands in ``<name>_command``."""
    group: argparse.ArgumentParser = sub.add_parser(name, **parser)
    add_common(group)
    return group.add_subparsers(dest=f"{name}_command", metavar="ACTION", required=True)


def add_group(sub: Any, name: str, help: str, commands: Sequence[Command],
              add_common: AddCommon) -> Any:
    """Add the group ``name`` made of ``commands`` to ``sub``; returns its subparsers."""
    parser = sub.add_parser(name, help=help, description=help[:1].upper() + help[1:] + ".")
    inner = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    for cmd in commands:
        add_command(inner, cmd, add_common)
    return inner


def container_commands(kind: str, target: Arg, columns: list[Column], *,
                       creating: Sequence[Arg], focus: str, move: str,
                       listing: tuple[Arg, ...] = ()) -> list[Command]:
    """The commands of the ``kind`` groups that hold panes and are ordered and labelled
    (``workspace``, ``tab``): ``list`` (``listing`` its arguments, ``columns`` its table),
    ``get``, ``create`` (``creating`` its own arguments, before those of the program it
    starts), ``focus``, ``rename``, ``close`` and ``move``, each calling the method of its
    name; ``target`` names the one acted on, ``focus`` and ``move`` are their help."""
    plural, id_key = f"{kind}s", f"{kind}_id"
    return [
        Command("list", f"{kind}.list", f"list {plural}", listing, show_table(plural, columns)),
        Command("get", f"{kind}.get", f"show one {kind}", (target,), show_object(kind)),
        Command("create", f"{kind}.create", f"create a {kind} (prints its id)",
                launching(*creating), show_key(kind, id_key)),
        Command("focus", f"{kind}.focus", focus, (target,)),
        Command("rename", f"{kind}.rename", f"set a {kind} label", (target, LABEL)),
        Command("close", f"{kind}.close", f"close a {kind} and its panes", (target,)),
        Command("move", f"{kind}.move", move, (target, INSERT_INDEX),
                show_list(plural, id_key)),
    ]
