"""The table of every ``cmux`` command and the parser built from it.

Agents and scripts run ``cmux`` in loops, so start-up is kept short: :data:`COMMANDS` names
every command with its one-line help, its example and the ``module:function`` that adds its
parser (or the ``module:TABLE`` of the commands of its group), and :func:`build_parser`
imports only the module of the command being run; ``cmux --help`` imports none of them. A
command another module adds is one more :class:`Entry`.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from typing import Any, NamedTuple, NoReturn

from cmux_core.cli.common import add_common, add_group

USAGE_ERROR = 2
TIMED_OUT = 124
"""The exit code of a wait that gave up (``--timeout``), as ``timeout(1)`` uses it."""

MAIN = "main commands"
COMPAT = "cmux-compatible commands"


class Entry(NamedTuple):
    """One top-level command: its name and one-line help, and ``loader``, the
    ``module:function`` that adds it (and any command sharing that loader) to the parser, or
    the ``module:TABLE`` of :class:`~cmux_core.cli.common.Command` rows its group is made of."""

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
    Entry("workspace", "manage workspaces", "cmux_core.cli.workspace:COMMANDS",
          "cmux workspace list"),
    Entry("tab", "manage tabs", "cmux_core.cli.tab:COMMANDS", "cmux tab list"),
    Entry("pane", "manage panes", f"{_P}:COMMANDS",
          "cmux pane wait \"$p\" passed --timeout 60"),
    Entry("layout", "save and apply tab layouts", "cmux_core.cli.layout:COMMANDS",
          "cmux layout save review"),
    Entry("window", "manage windows", "cmux_core.cli.window:COMMANDS",
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
    Entry("machine", "saved machines reached over ssh (the fleet)",
          "cmux_core.cli.machine:add_machine_commands", "cmux machine add box me@box.example"),
    Entry("bridge", "relay stdin/stdout to the server's socket (what the fleet runs over ssh)",
          "cmux_core.cli.bridge:add_bridge_command", "cmux bridge --session work"),
    Entry("config", "the configuration file's JSON Schema",
          "cmux_core.cli.config:add_config_commands",
          "cmux config schema > config.schema.json"),
    Entry("completion", "print a shell completion script (bash, zsh, fish)",
          "cmux_core.cli.completion:add_completion_command",
          "source <(cmux completion bash)"),
    Entry("new-workspace", "create a workspace (workspace.create); focus stays put unless "
          "--focus true", "cmux_core.cli.new_workspace:add_new_workspace_command", group=COMPAT),
    Entry("new-split", "split a surface's pane with a new terminal (surface.split)",
          f"{_P}:add_cmux_commands", group=COMPAT),
    Entry("new-surface", "add a terminal tab to a pane (surface.create)",
          f"{_P}:add_cmux_commands", group=COMPAT),
    Entry("close-surface", "close a surface (surface.close)", f"{_P}:add_cmux_commands",
          group=COMPAT),
    Entry("send", "type text into a surface; \\n is Enter (surface.send_text)",
          f"{_P}:add_cmux_commands", group=COMPAT),
    Entry("send-key", "press a key in a surface (surface.send_key)", f"{_P}:add_cmux_commands",
          group=COMPAT),
    Entry("read-screen", "print a surface's screen (surface.read_text)",
          f"{_P}:add_cmux_commands", group=COMPAT, aliases=("capture-pane",)),
    Entry("list-pane-surfaces", "list a pane's surfaces (pane.surfaces)",
          f"{_P}:add_cmux_commands", group=COMPAT),
    Entry("tab-action", "run a tab action on a surface (tab.action)",
          "cmux_core.cli.tab:add_tab_action_command", group=COMPAT),
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
    takes_value = {"--socket", "--session", "--machine"}
    words = iter(argv)
    for word in words:
        if word in takes_value:
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def load(sub: Any, entry: Entry) -> None:
    """Import ``entry``'s module and let it add its commands to ``sub``; a loader naming a
    command table (a sequence of :class:`~cmux_core.cli.common.Command`) becomes the group
    ``entry.name`` of those commands."""
    module, _, name = entry.loader.partition(":")
    found = getattr(importlib.import_module(module), name)
    if isinstance(found, Sequence):
        add_group(sub, entry.name, entry.help, found, add_common)
    else:
        found(sub, add_common)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``cmux`` parser: with ``command``, only the commands its module adds (none for
    an unknown name or ``""``), else every command."""
    parser = Parser(prog="cmux", usage="%(prog)s [--socket PATH] [--session NAME] "
                    "[--machine NAME] [--json] COMMAND ...", description="Headless terminal "
                    "multiplexer for AI coding agents.", epilog=top_help(),
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=VersionAction)
    add_common(parser, top=True)
    parser.add_argument("--machine", dest="on_machine", metavar="NAME", help="run the "
                        "command on this saved machine, through the local server "
                        "(default: $CMUX_MACHINE)")
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
            first = f"example: {entry.example}"
            if not built.epilog:
                built.epilog = first
            elif first not in built.epilog:
                built.epilog = f"{first}\n\n{built.epilog}"
    return parser
