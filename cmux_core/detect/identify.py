"""Which agent runs in a pane: told from the processes of the PTY's foreground group.

The evidence, strongest first: ``CMUX_AGENT=<label>`` (or ``HERDR_AGENT``) in the
group leader's environment; the leader's normalised process names; the hint on
any other member of the group; the best-scoring member by name. A name is
matched by a ``lookup`` callable (the manifest registry: every loaded manifest's
``id``, ``aliases`` and ``process_names``), so a new agent needs a manifest and
no code here.

Normalising a process turns what the kernel shows into names a manifest can
list: the basename of ``argv[0]`` (``/usr/bin/claude.exe`` → ``claude``), the
script behind a runtime or shell (``node /usr/bin/codex`` → ``codex``), the npm
package a script lives in (``…/node_modules/@anthropic-ai/claude-code/cli.js`` →
``claude-code``), the module of ``python -m``, symlink targets, and wrapper
names (nix's ``.codex-wrapped``). A pane whose foreground is ``tmux`` never
hosts an agent.

Nothing here reads the system's processes itself: :func:`identify_group` asks a
:class:`ProcessSource` (``cmux_core.terminal.procfs`` reads ``/proc``), and the rest
classifies the :class:`ProcessFacts` it is given. Those reads are a handful of small
ones per process; callers keep them off hot paths (the detection runtime probes on a
foreground change and on a slow timer, never per output batch).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Protocol

HINT_VARIABLES = ("CMUX_AGENT", "HERDR_AGENT")
"""Environment variables a launcher sets to name the agent it starts, strongest first."""

SHELLS = frozenset({"sh", "bash", "zsh", "fish", "dash", "ksh", "mksh", "ash", "tcsh", "csh",
                    "busybox"})
JS_RUNTIMES = frozenset({"node", "nodejs", "bun", "deno", "tsx", "ts-node"})
NEVER_AGENTS = frozenset({"tmux"})
_PYTHON_RE = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?[mtd]?$")
_LABEL_SUFFIX_RE = re.compile(r"\.(exe|cmd|bat|ps1|js)$")
_SCRIPT_SUFFIX_RE = re.compile(r"\.(exe|cmd|bat|ps1|js|mjs|cjs|ts|mts|py|pyw|sh|bash)$")
_WRAPPED_RE = re.compile(r"^\.?(.+?)[-_]wrapped$")
# Option flags that consume the next argument, per runtime family.
_JS_VALUE_OPTS = frozenset({"-r", "--require", "--loader", "--import", "--experimental-loader",
                            "--inspect-port", "--title", "--conditions", "-C", "--env-file",
                            "--config", "-c"})
_PY_VALUE_OPTS = frozenset({"-W", "-X", "-Q"})
_SHELL_VALUE_OPTS = frozenset({"-o", "-O", "+o", "+O", "--rcfile", "--init-file"})
_JS_EVAL_OPTS = frozenset({"-e", "--eval", "-p", "--print"})
# Script basenames that say nothing; the directory (or package) above them does.
_GENERIC_SCRIPTS = frozenset({"cli", "main", "index", "__main__", "app", "run", "entry", "bin",
                              "start"})
_GENERIC_DIRS = frozenset({"bin", "dist", "build", "lib", "src", "bundle", "out", "cli",
                           "scripts", "node_modules", "site-packages", ".bin", "esm", "cjs"})


def normalize_label(name: str) -> str:
    """The form names are compared in: trimmed, lowercased, one Windows/JS suffix removed."""
    return _LABEL_SUFFIX_RE.sub("", name.strip().lower(), count=1)


class ProcessFacts(Protocol):
    """What identification needs to know of one process.

    ``comm`` is the kernel's name for it, ``argv`` its command line and ``exe`` its
    executable's path (empty strings where unknown).
    """

    @property
    def pid(self) -> int: ...

    @property
    def comm(self) -> str: ...

    @property
    def argv(self) -> tuple[str, ...]: ...

    @property
    def exe(self) -> str: ...


class ProcessSource(Protocol):
    """Where :func:`identify_group` learns about processes; every call may read the system."""

    def process(self, pid: int) -> ProcessFacts | None:
        """The facts of ``pid``, or None when it is gone."""

    def environment(self, pid: int, names: Collection[str]) -> Mapping[str, str]:
        """Those of ``names`` set to a non-empty value in ``pid``'s environment."""

    def group_members(self, pgid: int) -> list[int]:
        """Every pid in process group ``pgid``."""


@dataclass(frozen=True, slots=True)
class Identity:
    """An identified agent: its canonical label, the process that gave it away, and how."""

    label: str
    pid: int
    evidence: str


# -- normalising names ------------------------------------------------------------------------


def _strip_wrapper(name: str) -> str:
    m = _WRAPPED_RE.match(name)
    return m.group(1) if m else name


def base_name(path: str) -> str:
    """Basename of a path or command with a script/executable suffix and wrapper removed
    (and the ``-`` a login shell's ``argv[0]`` starts with)."""
    name = PurePosixPath(path.replace("\\", "/")).name.lstrip("-")
    return _strip_wrapper(_SCRIPT_SUFFIX_RE.sub("", name.lower(), count=1))


def package_names(path: str) -> list[str]:
    """npm package a script belongs to: ``@scope/name`` and ``name`` (most specific first)."""
    parts = path.replace("\\", "/").split("/")
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] != "node_modules" or i + 1 >= len(parts):
            continue
        first = parts[i + 1]
        if first.startswith("@") and i + 2 < len(parts):
            return [f"{first}/{parts[i + 2]}".lower(), parts[i + 2].lower()]
        if first and not first.startswith("."):
            return [first.lower()]
    return []


def script_names(path: str, *, resolve: bool = True) -> list[str]:
    """Names a script path may be known by, most specific first.

    Its basename (unless generic like ``cli``/``index``), the package around it,
    the meaningful directory above a generic basename, then the same for the
    symlink-resolved path when it differs (``/usr/bin/gemini`` →
    ``…/@google/gemini-cli/bundle/gemini.js``).
    """
    names: list[str] = []

    def add(name: str) -> None:
        if name and name not in names:
            names.append(name)

    def from_path(p: str) -> None:
        base = base_name(p)
        if base not in _GENERIC_SCRIPTS:
            add(base)
        for pkg in package_names(p):
            add(pkg)
        if base in _GENERIC_SCRIPTS:
            for parent in reversed(PurePosixPath(p).parent.parts):
                if parent.lower() not in _GENERIC_DIRS and parent not in ("/", "."):
                    add(base_name(parent))
                    break

    from_path(path)
    if resolve and "/" in path.strip("/"):
        try:
            real = os.path.realpath(path)
        except (OSError, ValueError):
            real = path
        if real != path:
            from_path(real)
    return names


def _runtime_kind(name: str) -> str | None:
    if name in SHELLS:
        return "shell"
    if name in JS_RUNTIMES:
        return "js"
    if _PYTHON_RE.match(name):
        return "python"
    return None


def _script_argument(kind: str, args: Iterable[str]) -> tuple[str, str] | None:
    """The runtime's script (``("path", p)``) or module (``("module", m)``), or None.

    Options are skipped (with their values where they take one); an eval flag
    (``-e``, ``-c``) ends the search with nothing, since inline code names nothing.
    """
    it = iter(args)
    value_opts = {"js": _JS_VALUE_OPTS, "python": _PY_VALUE_OPTS, "shell": _SHELL_VALUE_OPTS}[kind]
    for arg in it:
        if arg == "--":
            nxt = next(it, None)
            return ("path", nxt) if nxt else None
        if kind == "python" and arg == "-m":
            module = next(it, None)
            return ("module", module) if module else None
        if kind == "python" and arg.startswith("-m") and len(arg) > 2:
            return ("module", arg[2:])
        if arg == "-c" and kind in ("python", "shell"):
            return None
        if kind == "js" and (arg in _JS_EVAL_OPTS or arg.startswith(("--eval=", "--print="))):
            return None
        if arg.startswith("-") and len(arg) > 1:
            if arg in value_opts:
                next(it, None)
            continue
        if kind == "js" and arg in ("run", "x", "exec") and not arg.startswith("/"):
            # deno run / bun x / bun exec: the script follows the subcommand.
            continue
        return ("path", arg)
    return None


def process_names(proc: ProcessFacts, *, resolve: bool = True) -> list[str]:
    """Normalised names of one process, most telling first; ``[]`` for tmux and bare runtimes.

    For a runtime or shell (``node``, ``bun``, ``deno``, ``python3.12``, ``bash``)
    only the script or module it runs counts; for anything else ``argv[0]``,
    the kernel's name, the executable and their symlink targets do.
    """
    argv0 = proc.argv[0] if proc.argv else proc.comm
    if len(proc.argv) == 1 and " " in argv0 and not os.path.isabs(argv0):
        # A program that rewrote its title ("claude --resume") keeps one argument.
        argv0 = argv0.split()[0]
    first = base_name(argv0) if argv0 else base_name(proc.comm)
    if first in NEVER_AGENTS or base_name(proc.comm) in NEVER_AGENTS:
        return []
    kind = _runtime_kind(first)
    if kind is not None:
        target = _script_argument(kind, proc.argv[1:])
        if target is None:
            return []
        what, value = target
        if what == "module":
            top = value.split(".")[0].lower()
            return [n for n in dict.fromkeys((value.lower(), top)) if n]
        return script_names(value, resolve=resolve)
    names: list[str] = []
    for name in (first, *package_names(argv0), base_name(proc.comm)):
        if name and name not in names:
            names.append(name)
    for path in (argv0, proc.exe):
        if path and "/" in path:
            for name in script_names(path, resolve=resolve):
                if name not in names:
                    names.append(name)
    return names


def is_generic_runtime(proc: ProcessFacts) -> bool:
    argv0 = proc.argv[0] if proc.argv else proc.comm
    return _runtime_kind(base_name(argv0)) is not None


def is_interactive_shell(proc: ProcessFacts) -> bool:
    """A shell with no script and no ``-c``: with job control its group is only itself."""
    argv0 = proc.argv[0] if proc.argv else proc.comm
    if _runtime_kind(base_name(argv0)) != "shell":
        return False
    args = proc.argv[1:]
    return "-c" not in args and all(a.startswith(("-", "+")) for a in args)


# -- identification -----------------------------------------------------------------------------


Lookup = Callable[[str], str | None]


def environment_hint(environment: Mapping[str, str]) -> str | None:
    """The first of :data:`HINT_VARIABLES` in ``environment`` that is more than
    whitespace, stripped."""
    for name in HINT_VARIABLES:
        value = environment.get(name, "").strip()
        if value:
            return value
    return None


def identify_process(proc: ProcessFacts, lookup: Lookup, *, resolve: bool = True
                     ) -> tuple[str, str] | None:
    """``(label, name)`` for the first of the process's names ``lookup`` knows."""
    for name in process_names(proc, resolve=resolve):
        label = lookup(normalize_label(name))
        if label is not None:
            return label, name
    return None


def identify_group(pgid: int, lookup: Lookup, processes: ProcessSource) -> Identity | None:
    """Identify the agent in foreground process group ``pgid``, or None.

    Order: the leader's environment hint, the leader's names, any member's hint,
    then the best member by name (a wrapped agent, whose normalised name differs
    from its kernel name, beats a plain program, which beats a runtime; ties keep
    the lowest pid). A tmux leader means no agent. Hints naming no loaded
    manifest are ignored. The group's other members are only asked of
    ``processes`` when the leader is not an interactive shell (listing them may
    scan every process).
    """
    leader = processes.process(pgid)
    if leader is not None:
        argv0 = leader.argv[0] if leader.argv else leader.comm
        if base_name(argv0) in NEVER_AGENTS or base_name(leader.comm) in NEVER_AGENTS:
            return None
        hint = environment_hint(processes.environment(pgid, HINT_VARIABLES))
        if hint is not None:
            label = lookup(normalize_label(hint))
            if label is not None:
                return Identity(label, pgid, f"environment hint {hint!r} of pid {pgid}")
        found = identify_process(leader, lookup)
        if found is not None:
            return Identity(found[0], pgid, f"process name {found[1]!r} of pid {pgid}")
        if is_interactive_shell(leader):
            return None
    others = [pid for pid in processes.group_members(pgid) if pid != pgid]
    for pid in others:
        hint = environment_hint(processes.environment(pid, HINT_VARIABLES))
        if hint is not None:
            label = lookup(normalize_label(hint))
            if label is not None:
                return Identity(label, pid, f"environment hint {hint!r} of pid {pid}")
    best: tuple[int, Identity] | None = None
    for pid in others:
        member = processes.process(pid)
        if member is None:
            continue
        found = identify_process(member, lookup)
        if found is None:
            continue
        label, name = found
        if name != base_name(member.comm):
            score = 3
        elif not is_generic_runtime(member):
            score = 2
        else:
            score = 1
        if best is None or score > best[0]:
            best = (score, Identity(label, pid, f"process name {name!r} of pid {pid}"))
    return best[1] if best else None
