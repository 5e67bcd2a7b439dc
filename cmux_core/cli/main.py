"""The ``cmux`` command: ``serve``, ``call METHOD [JSON|-]``, ``ping``, ``events``, ``api``,
``tree``, ``capabilities``, and one group module per command group under it.

Every command takes ``--json``. Errors the server answers print ``code: message`` and exit
1, a wait that timed out exits 124, and a wrong command line or configuration prints
``cmux: <what is wrong>`` and exits 2.

Agents and scripts run ``cmux`` in loops, so start-up is kept short: :data:`COMMANDS` names
every command with its one-line help and the module that builds it, and only the module of
the command being run is imported. ``cmux --help`` imports none of them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

from cmux_core.cli.common import AddCommon, add_common
from cmux_core.errors import CmuxError

if TYPE_CHECKING:
    from cmux_core.cli.common import Result

Handler = Callable[[argparse.Namespace], int]
LOG_FORMAT = "cmux %(levelname)s %(name)s: %(message)s"
USAGE_ERROR = 2
TIMED_OUT = 124
"""The exit code of a wait that gave up (``--timeout``), as ``timeout(1)`` uses it."""

MAIN = "main commands"
COMPAT = "cmux-compatible commands"


class Entry(NamedTuple):
    """One top-level command: its name and one-line help, and ``loader``, the
    ``module:function`` that adds it (and any command sharing that loader) to the parser."""

    name: str
    help: str
    loader: str
    example: str = ""
    """A command line shown in ``cmux --help`` and the command's own help; every main
    command has one."""
    group: str = MAIN
    aliases: tuple[str, ...] = ()


_M = "cmux_core.cli.main"
_P = "cmux_core.cli.pane"

COMMANDS: tuple[Entry, ...] = (
    Entry("serve", "run the server in the foreground", f"{_M}:add_serve_command",
          "cmux serve --size 160x48 --no-restore"),
    Entry("ping", "check that the server answers", f"{_M}:add_basic_commands", "cmux ping"),
    Entry("tree", "windows, workspaces and panes as a tree", f"{_M}:add_system_commands",
          "cmux tree --all"),
    Entry("workspace", "manage workspaces", "cmux_core.cli.workspace:add_workspace_commands",
          "cmux workspace list"),
    Entry("tab", "manage tabs", "cmux_core.cli.tab:add_tab_commands", "cmux tab list"),
    Entry("pane", "manage panes", f"{_P}:add_pane_commands",
          "cmux pane wait \"$p\" passed --timeout 60"),
    Entry("layout", "save and apply tab layouts", "cmux_core.cli.layout:add_layout_commands",
          "cmux layout save review"),
    Entry("window", "manage windows", "cmux_core.cli.window:add_window_commands",
          "cmux window list"),
    Entry("agent", "start, prompt, wait for and inspect agents", f"{_M}:add_agent_group",
          "cmux agent prompt builder \"fix the failing test\" --wait"),
    Entry("agents", "the agent list through your view (--watch: live)",
          "cmux_core.cli.sidebar:add_sidebar_commands", "cmux agents --watch"),
    Entry("attach", "show a pane in this terminal and type into it",
          "cmux_core.cli.attach:add_attach_command", "cmux attach claude"),
    Entry("ui", "the agents sidebar beside a live pane", "cmux_core.cli.ui:add_ui_command",
          "cmux ui"),
    Entry("events", "stream events as JSON lines", f"{_M}:add_basic_commands",
          "cmux events pane.agent_status_changed"),
    Entry("call", "call any method: cmux call METHOD [JSON|-]", f"{_M}:add_basic_commands",
          "cmux call workspace.list '{}'"),
    Entry("api", "describe the socket API", f"{_M}:add_basic_commands",
          "cmux api schema --json"),
    Entry("capabilities", "list every method the server answers",
          f"{_M}:add_system_commands", "cmux capabilities"),
    Entry("server", "manage the server", "cmux_core.cli.server:add_server_commands",
          "cmux server stop"),
    Entry("session", "inspect the session", "cmux_core.cli.session:add_session_commands",
          "cmux session snapshot --json"),
    Entry("markdown", "show markdown files", "cmux_core.cli.markdown:add_markdown_commands",
          "cmux markdown open README.md"),
    Entry("manifests", "list, validate and test agent-detection manifests (offline)",
          "cmux_core.cli.manifests:add_manifest_commands", "cmux manifests check my-agent.toml"),
    Entry("plugin", "install, list, enable, link and scaffold plugins",
          "cmux_core.cli.plugin:add_plugin_commands", "cmux plugin install cmux-hello"),
    Entry("integration", "list, install and uninstall agent integrations (hooks)",
          "cmux_core.cli.integration:add_integration_commands",
          "cmux integration install claude --dry-run"),
    Entry("config", "the configuration file's JSON Schema",
          "cmux_core.cli.config:add_config_commands",
          "cmux config schema > config.schema.json"),
    Entry("completion", "print a shell completion script (bash, zsh, fish)",
          "cmux_core.cli.completion:add_completion_command",
          "source <(cmux completion bash)"),
    Entry("new-workspace", "create a workspace (workspace.create); focus stays put unless "
          "--focus true", "cmux_core.cli.new_workspace:add_new_workspace_command", group=COMPAT),
    Entry("new-split", "split a surface's pane with a new terminal (surface.split)",
          f"{_P}:add_pane_commands", group=COMPAT),
    Entry("new-surface", "add a terminal tab to a pane (surface.create)",
          f"{_P}:add_pane_commands", group=COMPAT),
    Entry("close-surface", "close a surface (surface.close)", f"{_P}:add_pane_commands",
          group=COMPAT),
    Entry("send", "type text into a surface; \\n is Enter (surface.send_text)",
          f"{_P}:add_pane_commands", group=COMPAT),
    Entry("send-key", "press a key in a surface (surface.send_key)", f"{_P}:add_pane_commands",
          group=COMPAT),
    Entry("read-screen", "print a surface's screen (surface.read_text)",
          f"{_P}:add_pane_commands", group=COMPAT, aliases=("capture-pane",)),
    Entry("list-pane-surfaces", "list a pane's surfaces (pane.surfaces)",
          f"{_P}:add_pane_commands", group=COMPAT),
    Entry("tab-action", "run a tab action on a surface (tab.action)",
          "cmux_core.cli.tab:add_tab_commands", group=COMPAT),
    Entry("notify", "notify about a surface (notification.create)",
          "cmux_core.cli.notification:add_notification_commands", group=COMPAT),
    Entry("list-notifications", "list the notifications (notification.list)",
          "cmux_core.cli.notification:add_notification_commands", group=COMPAT),
    Entry("clear-notifications", "drop the notifications (notification.clear)",
          "cmux_core.cli.notification:add_notification_commands", group=COMPAT),
)


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, ``cmux: <what is wrong>``;
    the subcommands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"cmux: {message} (see: {self.prog} --help)\n")


# -- the commands this module runs ----------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    # The server and the method table are imported by the commands that use them: they
    # would add a quarter of a second to every other command's start.
    import logging
    from pathlib import Path

    from cmux_core.app import serve
    from cmux_core.cli.server import apply_session_file_options, print_banner
    from cmux_core.config import socket_path
    from cmux_core.config_file import load_settings

    if not args.quiet:
        logging.getLogger().setLevel(logging.INFO)
    settings = load_settings()
    if args.size:
        settings.columns, settings.rows = args.size
    if args.emulator:
        settings.emulator = args.emulator
    if args.event_loop:
        settings.event_loop = args.event_loop
    if args.shell:
        settings.shell = args.shell
    settings.empty = args.empty
    settings.plugins_dirs.extend(Path(p) for p in args.plugins_dir or [])
    settings.manifests_dirs.extend(Path(p) for p in args.manifests_dir or [])
    apply_session_file_options(args, settings)
    return serve(settings, socket_path(args.socket, args.session), session=args.session,
                 on_ready=None if args.quiet else print_banner)


def cmd_call(args: argparse.Namespace) -> int:
    import json

    from cmux_core.cli.common import client, print_json

    raw = args.params
    if raw == "-":
        raw = sys.stdin.read()
    try:
        params = json.loads(raw) if raw else {}
    except json.JSONDecodeError as exc:
        raise CmuxError("invalid_params", f"params are not valid JSON: {exc}") from None
    if not isinstance(params, dict):
        raise CmuxError("invalid_params", "params must be a JSON object")
    with client(args, timeout=None) as c:
        print_json(c.call(args.method, params))
    return 0


def cmd_ping(args: argparse.Namespace) -> int:
    from cmux_core.cli.common import client, print_json

    with client(args) as c:
        result = c.call("ping")
    if args.json:
        print_json(result)
    else:
        print(f"pong: cmux {result.get('version')} (protocol {result.get('protocol')})")
    return 0


def cmd_events(args: argparse.Namespace) -> int:
    import json

    from cmux_core.cli.common import client
    from cmux_core.events import SUBSCRIBABLE

    types = args.types or sorted(SUBSCRIBABLE)
    with client(args, timeout=None) as c:
        for event in c.events(types):
            print(json.dumps(event, ensure_ascii=False), flush=True)
    return 0


def cmd_api_schema(args: argparse.Namespace) -> int:
    """Print every method's params schema, generated from the params models."""
    from cmux_core.app import method_schema
    from cmux_core.cli.common import print_json

    schema = method_schema()
    if args.json:
        print_json(schema)
    else:
        for name, entry in schema["methods"].items():
            fields = ", ".join(entry["params"].get("properties", {}))
            print(f"{name}({fields})")
    return 0


def show_tree(r: Result) -> None:
    from cmux_core.cli.common import outline, star

    for window in r["windows"]:
        outline(0, window["ref"], star(window.get("key")))
        for ws in window["workspaces"]:
            outline(1, ws["ref"], ws["workspace_id"], ws.get("title"), star(ws.get("selected")))
            for pane in ws["panes"]:
                surface = pane["surfaces"][0] if pane["surfaces"] else {}
                outline(2, pane["ref"], surface.get("public_pane_id"), star(pane.get("focused")),
                        surface.get("title"))


# -- the parsers of this module's commands ---------------------------------------------------


def add_serve_command(sub: Any, add_common: AddCommon) -> None:
    from cmux_core.cli.common import size_arg
    from cmux_core.cli.server import add_session_file_options

    p = sub.add_parser("serve", help="run the server in the foreground",
                       description="Run the server in the foreground until Ctrl-C, SIGTERM "
                       "or cmux server stop. Options override ~/.config/cmux/config.toml.")
    add_common(p)
    p.add_argument("--size", type=size_arg, metavar="COLSxROWS",
                   help="virtual area every tab is laid out in (default 120x40)")
    p.add_argument("--emulator", choices=["auto", "pyte", "ghostty"],
                   help="screen backend (default auto: ghostty when it imports, else pyte)")
    p.add_argument("--event-loop", choices=["auto", "asyncio", "uvloop"],
                   help="asyncio event loop (default auto: uvloop when it imports)")
    p.add_argument("--shell", metavar="PROGRAM",
                   help="program for new panes (default $SHELL, else /bin/sh)")
    p.add_argument("--plugins-dir", action="append", metavar="DIR",
                   help="load *.py plugins from DIR too (repeatable)")
    p.add_argument("--manifests-dir", action="append", metavar="DIR",
                   help="agent-detection manifests above all others (repeatable)")
    p.add_argument("--quiet", action="store_true",
                   help="no startup banner; log warnings and errors only")
    p.add_argument("--empty", action="store_true",
                   help="start with no workspace (unless a saved session is restored)")
    add_session_file_options(p)
    p.set_defaults(func=cmd_serve)


def add_basic_commands(sub: Any, add_common: AddCommon) -> None:
    """``call``, ``ping``, ``events`` and ``api``."""
    p = sub.add_parser("call", help="call any method: cmux call METHOD [JSON|-]",
                       description="Call any socket method and print its result as JSON.")
    add_common(p)
    p.add_argument("method", help="method name, e.g. workspace.list (cmux capabilities "
                   "lists them)")
    p.add_argument("params", nargs="?", default="", help="params as a JSON object, or - to "
                   "read them from standard input (default: none)")
    p.set_defaults(func=cmd_call)

    p = sub.add_parser("ping", help="check that the server answers")
    add_common(p)
    p.set_defaults(func=cmd_ping)

    p = sub.add_parser("events", help="stream events as JSON lines")
    add_common(p)
    p.add_argument("types", nargs="*", metavar="TYPE",
                   help="dotted event names, e.g. pane.created (default: all)")
    p.set_defaults(func=cmd_events)

    p = sub.add_parser("api", help="describe the socket API")
    api_sub = p.add_subparsers(dest="api_command", metavar="COMMAND", required=True)
    p = api_sub.add_parser("schema", help="params schema of every method (from the models)")
    add_common(p)
    p.set_defaults(func=cmd_api_schema)


def add_system_commands(sub: Any, add_common: AddCommon) -> None:
    """``tree`` and ``capabilities``."""
    from cmux_core.cli.common import Command, add_command, arg

    add_command(sub, Command(
        "tree", "system.tree", "windows, workspaces and panes as a tree",
        (arg("--all", dest="all_windows", action="store_true", help="every window"),
         arg("--workspace", dest="workspace_id", metavar="WORKSPACE",
             help="only this workspace")), show_tree), add_common)
    add_command(sub, Command("capabilities", "system.capabilities",
                             "list every method the server answers",
                             render=lambda r: print("\n".join(r["methods"]))), add_common)


def add_agent_group(sub: Any, add_common: AddCommon) -> None:
    """``agent``, with ``agent explain`` from the manifests module."""
    from cmux_core.cli.agent import add_agent_commands
    from cmux_core.cli.manifests import add_explain_command

    add_explain_command(add_agent_commands(sub, add_common), add_common)


# -- building the parser ----------------------------------------------------------------------


def top_help() -> str:
    """The command list of ``cmux --help``: the groups in order, each main command with
    its example."""
    width = max(len(e.name) for e in COMMANDS if e.group == MAIN) + 3
    lines: list[str] = []
    for group in (MAIN, COMPAT):
        lines += ["", f"{group}:"]
        for e in COMMANDS:
            if e.group == group:
                names = ", ".join((e.name, *e.aliases))
                lines.append(f"  {names.ljust(width)}{e.help}" if len(names) < width
                             else f"  {names}\n  {'':{width}}{e.help}")
                if e.example:
                    lines.append(f"  {'':{width}}  $ {e.example}")
    lines += ["", "exit codes: 0 done, 1 the server answered an error or is unavailable, "
              "2 a wrong", "command line or configuration, 124 a wait timed out "
              "(docs/getting-started.md)."]
    return "\n".join(lines[1:])


def print_version(parser: argparse.ArgumentParser) -> NoReturn:
    from cmux_core.version import __version__

    print(f"cmux {__version__}")
    parser.exit(0)


class VersionAction(argparse.Action):
    """``--version``: the version is read only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None
                 ) -> None:
        print_version(parser)


def command_word(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word that is neither an option nor the value
    of a top-level option taking one."""
    takes_value = {"--socket", "--session"}
    words = iter(argv)
    for word in words:
        if word in takes_value:
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def load(sub: Any, entry: Entry) -> None:
    """Import ``entry``'s module and let it add its commands to ``sub``."""
    module, _, function = entry.loader.partition(":")
    getattr(importlib.import_module(module), function)(sub, add_common)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``cmux`` parser: with ``command``, only the commands its module adds (none for
    an unknown name or ``""``), else every command."""
    parser = Parser(prog="cmux", usage="%(prog)s [--socket PATH] [--session NAME] [--json] "
                    "COMMAND ...", description="Headless terminal multiplexer for AI coding "
                    "agents.", epilog=top_help(),
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=VersionAction)
    add_common(parser, top=True)
    # The commands are listed by the epilog, in groups.
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", help=argparse.SUPPRESS,
                                prog="cmux")
    chosen = [e for e in COMMANDS if command is None or command in (e.name, *e.aliases)]
    for entry in chosen:
        if entry.name not in sub.choices:
            load(sub, entry)
    for entry in COMMANDS:
        built = sub.choices.get(entry.name)
        if entry.example and built is not None:
            built.epilog = built.epilog or f"example: {entry.example}"
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    command = command_word(words)
    parser = build_parser(command or "")
    if command is not None and not any(command in (e.name, *e.aliases) for e in COMMANDS):
        parser.error(f"unknown command {command!r}")
    args = parser.parse_args(words)
    # After parsing: ``--help`` and usage errors need no logging.
    import logging

    logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT)
    func: Handler | None = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return USAGE_ERROR
    try:
        return func(args)
    except CmuxError as exc:
        print(f"{exc.code}: {exc.message}", file=sys.stderr)
        return TIMED_OUT if exc.code == "timeout" else 1
    except BrokenPipeError:
        return 0
    except (ConnectionError, TimeoutError) as exc:
        print(f"server_unavailable: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        from cmux_core.config import ConfigError

        if not isinstance(exc, ConfigError):
            raise
        print(f"cmux: {exc}", file=sys.stderr)
        return USAGE_ERROR
