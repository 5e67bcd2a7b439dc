"""The documentation keeps up with the server and the CLI: every method is documented
somewhere, and every ``cmux`` command line shown in a shell block parses.

Command lines come from the fenced ``sh``/``bash``/``shell``/``console`` blocks of
``docs/*.md`` and ``README.md`` (``$(cmux ...)`` included). A concrete line must parse as
written; a synopsis (``list|get``, ``[--tab T]``, placeholders such as ``PANE``) must name
commands that exist and options they take. Concrete read-only lines are also run against
a real server, except the few in :data:`NOT_RUN`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import cmux_mcp.cli
import pytest

from cmux_core.api.dispatch import MethodTable
from cmux_core.api.methods import register_core_methods
from cmux_core.cli.main import build_parser
from cmux_core.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SHELL_BLOCKS = ("sh", "bash", "shell", "console")
SEPARATORS = {";", "&", "&&", "||", "|"}
REDIRECT = re.compile(r"^\d*(>>?|<)(&\d+)?")
SYNOPSIS_WORD = re.compile(r"\[[-\w.|]*\]?|[-\w.|]*\]|[-\w]+(\|[-\w]+)+|\.\.\.|"
                           r"[A-Z][A-Z0-9_]*(x[A-Z]+)?")
"""``[--opt``, ``ARG]``, ``a|b``, ``...`` or a placeholder such as ``PANE`` or ``COLSxROWS``."""
READ_ONLY = {("ping",), ("tree",), ("capabilities",), ("api", "schema"),
             ("session", "snapshot"), ("window", "list"), ("window", "current"),
             ("workspace", "list"), ("tab", "list"), ("pane", "list"), ("pane", "read"),
             ("pane", "current"), ("agent", "list"), ("agent", "explain"), ("agents",),
             ("plugin", "list"), ("manifests", "list"), ("manifests", "check"),
             ("manifests", "test"), ("events",)}
"""Command paths that change nothing, so their documented lines are run for real."""
SHELL_VARIABLES = {"$p": "w1:p1"}
"""Shell variables documented lines use, as the first pane of a fresh server."""
NOT_RUN = {
    "cmux events": "streams events until interrupted",
    "cmux agent explain w1:p2": "needs an agent running in pane w1:p2",
    "cmux agents --watch": "draws on a terminal until q is pressed",
    "cmux agents -w": "draws on a terminal until q is pressed",
}
"""Read-only command lines (by prefix) that are parsed but not run, and why."""


def test_every_method_is_documented() -> None:
    table = MethodTable()
    register_core_methods(table)
    text = "".join(p.read_text() for p in DOCS.glob("*.md"))
    missing = [name for name in table.names() if f"`{name}`" not in text]
    assert not missing, f"methods missing from docs/*.md: {missing}"


def test_readme_links_resolve() -> None:
    readme = (DOCS.parent / "README.md").read_text()
    for part in readme.split("](")[1:]:
        target = part.split(")", 1)[0]
        if not target.startswith(("http", "#")):
            assert (DOCS.parent / target).exists(), target


# -- documented command lines ----------------------------------------------------------


@dataclass(frozen=True)
class DocCommand:
    where: str
    argv: tuple[str, ...]
    """The words after ``cmux``."""

    @property
    def synopsis(self) -> bool:
        return any(SYNOPSIS_WORD.fullmatch(w) for w in self.argv)

    @property
    def text(self) -> str:
        return shlex.join(("cmux", *self.argv))


def logical_lines(block: str, console: bool) -> list[tuple[int, str]]:
    """The block's command lines and the index of the row each starts on: continuations
    and multi-line quotes joined, console output dropped."""
    lines: list[tuple[int, str]] = []
    pending = ""
    start = 0
    for row, raw in enumerate(block.splitlines()):
        if not pending:
            start = row
        if not pending and console:
            if not raw.startswith("$ "):
                continue
            raw = raw[2:]
        line = f"{pending}\n{raw}" if pending else raw
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        try:
            shlex.split(line, comments=True)
        except ValueError:
            pending = line
            continue
        pending = ""
        lines.append((start, line))
    assert not pending, f"unterminated command line: {pending!r}"
    return lines


def substitutions(line: str) -> tuple[str, list[str]]:
    """``line`` with each ``$(...)`` replaced by a word, and the commands they held."""
    inner: list[str] = []
    while (start := line.find("$(")) >= 0:
        depth, quote, i = 0, "", start + 1
        for i in range(start + 1, len(line)):
            c = line[i]
            if quote:
                quote = "" if c == quote else quote
            elif c in "'\"":
                quote = c
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    break
        inner.append(line[start + 2:i])
        line = f"{line[:start]}SUBSTITUTED{line[i + 1:]}"
    return line, inner


def cmux_commands(line: str) -> list[tuple[str, ...]]:
    """The ``cmux`` invocations in one shell line, as the words after ``cmux``."""
    line, inner = substitutions(line)
    found = [c for sub in inner for c in cmux_commands(sub)]
    words = shlex.split(line, comments=True)
    segment: list[str] = []
    depth = 0  # inside a synopsis's [...], where | separates alternatives
    for word in [*words, ";"]:
        depth += word.count("[") - word.count("]")
        if word not in SEPARATORS or (depth > 0 and word == "|"):
            segment.append(word)
            continue
        while segment and segment[0] in ("do", "then", "else", "!", "time", "exec"):
            segment.pop(0)
        if segment and segment[0] == "cmux":
            argv: list[str] = []
            skip = False
            for w in segment[1:]:
                if skip:
                    skip = False
                elif REDIRECT.match(w):
                    skip = REDIRECT.fullmatch(w) is not None
                else:
                    argv.append(w)
            found.append(tuple(argv))
        segment = []
    return found


def documented_commands() -> list[DocCommand]:
    found: list[DocCommand] = []
    for path in sorted([*DOCS.glob("*.md"), ROOT / "README.md"]):
        text = path.read_text()
        for block in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
            if block.group(1) not in SHELL_BLOCKS:
                continue
            first = text.count("\n", 0, block.start(2)) + 1
            for row, line in logical_lines(block.group(2), block.group(1) == "console"):
                found.extend(DocCommand(f"{path.name}:{first + row}", argv)
                             for argv in cmux_commands(line))
    return found


COMMANDS = documented_commands()


EXTENSION_PARSERS = {"mcp": cmux_mcp.cli.parser}
"""The parsers of the subcommands first-party distributions add (group ``cmux.cli``)."""


def parse(argv: list[str]) -> tuple[int, str]:
    """Parse ``argv`` with the real ``cmux`` parser, or an added subcommand's own: (exit
    status, what it printed)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            if argv and argv[0] in EXTENSION_PARSERS:
                EXTENSION_PARSERS[argv[0]]().parse_args(argv[1:])
            else:
                build_parser().parse_args(argv)
        except SystemExit as exc:
            return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


def subcommand(words: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """The parser of the command ``words`` name, and the words left after its path."""
    parser = build_parser()
    while words:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or words[0] not in subs[0].choices:
            break
        parser = subs[0].choices[words[0]]
        words = words[1:]
    return parser, words


def check_parses(command: DocCommand) -> None:
    """A concrete line parses as written; a synopsis names commands and options that
    exist (each ``a|b`` alternative of its last command word, with ``--help``)."""
    if not command.synopsis:
        status, output = parse(list(command.argv))
        assert status == 0, f"{command.where}: {command.text}\n{output}"
        return
    words = [w for w in command.argv if not w.startswith(("-", "["))]
    path = []
    for word in words:
        if not re.fullmatch(r"[a-z][a-z0-9-]*(\|[a-z][a-z0-9-]*)*", word):
            break
        path.append(word)
    alternatives = [[]] if not path else [[*path[:-1], alt] for alt in path[-1].split("|")]
    for alt in alternatives:
        parser, rest = subcommand(list(alt))
        assert rest == [], f"{command.where}: {command.text}: no command cmux {' '.join(alt)}"
        status, output = parse([*alt, "--help"])
        assert status == 0, f"{command.where}: cmux {' '.join(alt)} --help\n{output}"
        options = {o for w in command.argv for o in w.strip("[]").split("|")
                   if o.startswith("-") and o != "--"}
        unknown = sorted(options - set(parser._option_string_actions))
        assert not unknown, f"{command.where}: {command.text}: cmux {' '.join(alt)} " \
                            f"takes no {', '.join(unknown)}"


def test_documented_commands_are_found() -> None:
    argvs = {c.argv for c in COMMANDS}
    assert ("ping",) in argvs
    assert ("pane", "split", "--direction", "down", "--", "python3", "-i") in argvs
    assert ("agent", "wait", "fix-$task", "--timeout", "1800") in argvs
    assert ("layout", "export", "[--tab", "TAB", "|", "--pane", "PANE]") in argvs
    assert len(COMMANDS) > 50


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: f"{c.where} {c.text}")
def test_documented_command_line_parses(command: DocCommand) -> None:
    check_parses(command)


def runnable(command: DocCommand) -> bool:
    if command.synopsis:
        return False
    words = [w for w in command.argv if not w.startswith("-")]
    return any(tuple(words[:len(p)]) == p for p in READ_ONLY)


def test_documented_read_only_commands_run(cmux_server: ServerProcess,
                                           tmp_path: Path) -> None:
    # ``plugin list --outdated`` asks the package index; offline it still runs its whole
    # path (an empty answer) without waiting on the network.
    env = {**cmux_server.env, "CMUX_SOCKET_PATH": str(cmux_server.socket_path),
           "PIP_NO_INDEX": "1", "UV_OFFLINE": "1"}
    ran: list[str] = []
    failures: list[str] = []
    seen: set[tuple[str, ...]] = set()
    for command in filter(runnable, COMMANDS):
        if any(command.text.startswith(prefix) for prefix in NOT_RUN):
            continue
        argv = [SHELL_VARIABLES.get(w, w) for w in command.argv]
        assert not any("$" in w for w in argv), \
            f"{command.where}: {command.text}: give its variables in SHELL_VARIABLES"
        if tuple(argv) in seen:  # documented in several places: one run checks them all
            ran.append(command.text)
            continue
        seen.add(tuple(argv))
        proc = subprocess.run([sys.executable, "-m", "cmux_core", *argv], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=60)
        ran.append(command.text)
        if proc.returncode != 0:
            failures.append(f"{command.where}: {command.text}: exit {proc.returncode}\n"
                            f"{proc.stderr}")
    assert not failures, "\n".join(failures)
    assert {"cmux ping", "cmux agents --json", "cmux plugin list"} <= set(ran)


def test_not_run_lists_only_documented_lines() -> None:
    for prefix in NOT_RUN:
        assert any(c.text.startswith(prefix) for c in COMMANDS if runnable(c)), prefix


def test_a_line_that_does_not_parse_fails() -> None:
    """The extraction and the checks above catch a wrong command line."""
    lines = cmux_commands('p=$(cmux pane split --direction sideways) && cmux pane wait "$p"')
    assert lines == [("pane", "split", "--direction", "sideways"), ("pane", "wait", "$p")]
    assert parse(list(lines[0]))[0] == 2
    assert parse(list(lines[1]))[0] == 2
    synopsis = DocCommand("x", ("pane", "list|get|fly"))
    assert synopsis.synopsis
    assert not DocCommand("x", ("pane", "wait", "$p", "--regex", "[0-9]+ (passed|failed)")
                          ).synopsis
    with pytest.raises(AssertionError, match="no command cmux pane fly"):
        check_parses(synopsis)
    with pytest.raises(AssertionError, match="takes no --sideways"):
        check_parses(DocCommand("x", ("pane", "read", "[--sideways]")))
    with pytest.raises(AssertionError, match="invalid choice: 'sideways'"):
        check_parses(DocCommand("x", lines[0]))
