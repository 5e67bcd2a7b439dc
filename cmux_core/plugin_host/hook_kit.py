"""Building blocks for agent hook integrations: cmux's own hook programs and the edits of
Claude-style JSON hook settings.

cmux ships the hook programs agents run inside panes (the top-level ``hooks/`` of the
source tree, installed as the package ``cmux_core._hooks``): ``cmux-hook`` with its body
``cmux_hook.py``, the OpenCode plugin ``opencode/cmux.js`` and the skill
``skills/cmux/SKILL.md``. An integration plugin does not carry copies of them; it installs
the core's:

* :func:`bundled_text` reads one of them; :func:`install_hook` / :func:`uninstall_hook`
  write / remove ``cmux-hook`` and ``cmux_hook.py`` under ``config_dir()/hooks/<agent>/``,
  and :func:`hook_command` is the command line an agent's settings run
  (``<that dir>/cmux-hook <agent>``).
* :class:`JsonHookGroups` adds that command to the ``hooks`` table of a JSON settings file
  shaped like Claude Code's (``{"hooks": {EVENT: [{"matcher": ..., "hooks": [handler]}]}}``,
  also Qwen Code's and Gemini CLI's), removes only ours, and reports which events run it.
* :class:`JsonHookIntegration` is a whole integration of that kind: its ``install``,
  ``uninstall`` and ``status`` are what ``register`` takes.
* :func:`settings_status` is the ``status()`` answer those integrations share;
  :func:`remove_unchanged` removes a file the integration wrote unless the user changed it.
* :func:`flag_options` reads ``install``'s ``--option NAME=true|false`` options;
  :func:`install_mcp_server`, :func:`uninstall_mcp_server` and :func:`has_mcp_server`
  register cmux's MCP server (``cmux mcp``, the ``cmux-mcp`` distribution; started as
  :func:`mcp_argv`) as ``cmux`` in a table of an agent's JSON or TOML settings
  (``mcpServers``, ``mcp_servers``, ...).

Every write goes through :mod:`cmux_core.plugin_host.settings_files` and comes back as a
:class:`~cmux_core.plugin_host.settings_files.FileChange`, so dry runs, backups, atomic
writes and locking are the same as there. Like those functions, these block.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions

from cmux_core.config import config_dir
from cmux_core.plugin_host.settings_files import (
    FileChange,
    SettingsError,
    edit_json,
    edit_toml,
    remove_file,
    write_text,
)

__all__ = [
    "BUNDLED_PACKAGE",
    "HOOK_FILES",
    "JsonHookGroups",
    "JsonHookIntegration",
    "bundled_text",
    "flag_options",
    "handlers",
    "has_mcp_server",
    "hook_command",
    "hook_dir",
    "hook_installed",
    "hooked_events",
    "install_hook",
    "install_mcp_server",
    "is_our_hook",
    "mcp_argv",
    "mcp_stdio_entry",
    "remove_empty_dir",
    "remove_unchanged",
    "settings_status",
    "uninstall_hook",
    "uninstall_mcp_server",
]

BUNDLED_PACKAGE = "cmux_core._hooks"
HOOK_FILES = {"cmux-hook": 0o755, "cmux_hook.py": 0o644}
"""The files :func:`install_hook` writes for each agent, with their modes."""

MCP_SERVER = "cmux"
"""The name cmux's MCP server is registered under in an agent's settings."""

_FLAGS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}

_AGENT = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def bundled_text(name: str) -> str:
    """The text of one bundled file, by its path under ``hooks/`` (``"cmux-hook"``,
    ``"opencode/cmux.js"``, ``"skills/cmux/SKILL.md"``)."""
    return resources.files(BUNDLED_PACKAGE).joinpath(*name.split("/")).read_text(
        encoding="utf-8")


def hook_dir(agent: str) -> Path:
    """Where :func:`install_hook` puts the agent's copy: ``config_dir()/hooks/<agent>``.

    ``agent`` is 1-64 of ``a-z 0-9 _ -``, starting with a letter or digit (it is both a
    directory name and the hook's argument); anything else raises ``ValueError``.
    """
    if not _AGENT.fullmatch(agent):
        raise ValueError(f"agent name {agent!r}: use 1-64 of a-z 0-9 _ -, "
                         "starting with a letter or digit")
    return config_dir() / "hooks" / agent


def hook_command(agent: str) -> str:
    """The shell command an agent's settings run: the installed ``cmux-hook`` and ``agent``
    (which picks the hook's table of events: ``claude``, ``codex``, ``qwen``, ``gemini``,
    ``opencode``)."""
    return f"{shlex.quote(str(hook_dir(agent) / 'cmux-hook'))} {agent}"


def is_our_hook(handler: Any, agent: str) -> bool:
    """Whether a settings entry (a mapping with ``command``) runs the agent's installed hook,
    wherever the config directory was when it was installed."""
    marker = f"/cmux/hooks/{agent}/cmux-hook"
    return isinstance(handler, Mapping) and marker in str(handler.get("command", ""))


def handlers(group: Any) -> list[Any]:
    """The handlers of one hook group (its ``hooks`` list); ``[]`` for anything else."""
    inner = group.get("hooks") if isinstance(group, Mapping) else None
    return list(inner) if isinstance(inner, list) else []


def hooked_events(data: Any, agent: str, events: Sequence[str]) -> list[str]:
    """Which of ``events`` run our hook in a parsed settings document (JSON or ``tomlkit``)
    whose ``hooks`` table maps each event to a list of hook groups."""
    table = data.get("hooks") if isinstance(data, Mapping) else None
    if not isinstance(table, Mapping):
        return []
    return [event for event in events if isinstance(table.get(event), list)
            and any(is_our_hook(h, agent) for g in table[event] for h in handlers(g))]


def install_hook(agent: str, *, dry_run: bool = False) -> list[FileChange]:
    """Write the bundled ``cmux-hook`` (mode 0755) and ``cmux_hook.py`` to
    :func:`hook_dir`; files already as bundled are left alone."""
    return [write_text(hook_dir(agent) / name, bundled_text(name), mode=mode, dry_run=dry_run)
            for name, mode in HOOK_FILES.items()]


def uninstall_hook(agent: str, *, dry_run: bool = False) -> list[FileChange]:
    """Remove the agent's hook files, then (unless ``dry_run``) its directory if nothing of
    anyone else's is left in it (see :func:`remove_empty_dir`)."""
    changes = [remove_file(hook_dir(agent) / name, dry_run=dry_run) for name in HOOK_FILES]
    if not dry_run:
        remove_empty_dir(hook_dir(agent))
    return changes


def hook_installed(agent: str) -> bool:
    """Whether every hook file is in :func:`hook_dir` (not whether its content is current)."""
    return all((hook_dir(agent) / name).is_file() for name in HOOK_FILES)


def remove_empty_dir(directory: Path) -> None:
    """Remove ``directory`` if nothing is left in it but the lock files of our edits
    (``.*.cmux-lock``) and the hook's compiled form (``__pycache__``); else leave it."""
    with contextlib.suppress(OSError):
        for lock in directory.glob(".*.cmux-lock"):
            lock.unlink()
        shutil.rmtree(directory / "__pycache__", ignore_errors=True)
        directory.rmdir()


def remove_unchanged(path: Path, text: str, *, dry_run: bool = False) -> list[FileChange | str]:
    """Remove a file the integration wrote with ``text`` if it still holds exactly that;
    a changed one is kept, and said so. A missing file is ``[]``."""
    if not path.exists():
        return []
    if path.read_text(encoding="utf-8", errors="replace") == text:
        return [remove_file(path, dry_run=dry_run)]
    return [f"{path}: kept (changed since it was installed)"]


def settings_status(agent: str, path: Path, events: Sequence[str], *,
                    parse: Callable[[str], Any] = json.loads, key: str = "settings",
                    **extra: Any) -> dict[str, Any]:
    """A ``status()`` answer for an integration whose settings file (``path``, read with
    ``parse``; ``tomlkit.parse`` for TOML) runs our hook for ``events``.

    ``installed`` is true when the hook files are in place and every event runs the hook;
    then come ``key`` (the settings path), ``hook``, ``events`` (those that run it),
    ``missing_events``, ``extra`` in order, and ``error`` when the file cannot be read.
    """
    hooked: list[str] = []
    error = None
    try:
        text = path.read_text(encoding="utf-8")
        hooked = hooked_events(parse(text) if text.strip() else {}, agent, events)
    except FileNotFoundError:
        pass
    except (OSError, ValueError, tomlkit.exceptions.TOMLKitError) as exc:
        error = f"{path}: {exc}"
    result: dict[str, Any] = {
        "installed": hook_installed(agent) and len(hooked) == len(events), key: str(path),
        "hook": str(hook_dir(agent) / "cmux-hook"), "events": hooked,
        "missing_events": [e for e in events if e not in hooked], **extra}
    if error:
        result["error"] = error
    return result


@dataclass(frozen=True)
class JsonHookGroups:
    """Our hook command in the ``hooks`` table of a Claude-style JSON settings file.

    ``events`` each get one group ``{"matcher": ..., "hooks": [{"type": "command", "command":
    hook_command(agent)}]}``; ``matchers`` gives an event's matcher (an event not in it gets
    a group without one), ``name`` adds ``"name"`` to our handler (Gemini CLI shows it).
    """

    agent: str
    events: tuple[str, ...]
    matchers: Mapping[str, str] = field(default_factory=dict)
    name: str | None = None

    def handler(self) -> dict[str, Any]:
        name = {} if self.name is None else {"name": self.name}
        return {"type": "command", **name, "command": hook_command(self.agent)}

    def add(self, data: Any, *, path: Path) -> None:
        """Make every event run our command once, in place; a command of ours that differs
        (the config directory moved) is updated where it is. ``path`` names the file in
        errors: content that is not an object, or a ``hooks`` that is not one."""
        if not isinstance(data, dict):
            raise SettingsError(f"{path}: is not a JSON object")
        table = data.setdefault("hooks", {})
        if not isinstance(table, dict):
            raise SettingsError(f"{path}: 'hooks' is not an object")
        command = hook_command(self.agent)
        for event in self.events:
            groups = table.setdefault(event, [])
            if not isinstance(groups, list):
                continue
            mine = [h for g in groups for h in handlers(g) if is_our_hook(h, self.agent)]
            for hook in mine:
                hook["command"] = command
            if not mine:
                matcher = {"matcher": self.matchers[event]} if event in self.matchers else {}
                groups.append({**matcher, "hooks": [self.handler()]})

    def remove(self, data: Any) -> None:
        """Drop every handler of ours (of any event); a group, an event or ``hooks`` that
        held only ours goes too, so what is left is what the user had."""
        if not isinstance(data, dict) or not isinstance(data.get("hooks"), dict):
            return
        table = data["hooks"]
        removed = False
        for event in list(table):
            groups = table[event]
            if not isinstance(groups, list):
                continue
            kept = []
            for group in groups:
                inner = handlers(group)
                if any(is_our_hook(h, self.agent) for h in inner):
                    inner = [h for h in inner if not is_our_hook(h, self.agent)]
                    if not inner:
                        continue
                    group = {**group, "hooks": inner}
                kept.append(group)
            if kept != groups:
                removed = True
                if kept:
                    table[event] = kept
                else:
                    del table[event]
        if removed and not table:
            del data["hooks"]

    def install(self, path: Path, *, dry_run: bool = False) -> FileChange:
        """:meth:`add` applied to the file at ``path`` (created if missing)."""
        return edit_json(path, lambda data: self.add(data, path=path), dry_run=dry_run)

    def uninstall(self, path: Path, *, dry_run: bool = False) -> list[FileChange]:
        """:meth:`remove` applied to the file at ``path``; ``[]`` when there is none."""
        if not path.exists():
            return []
        return [edit_json(path, self.remove, dry_run=dry_run)]

    def status(self, path: Path, **extra: Any) -> dict[str, Any]:
        """:func:`settings_status` for this file and these events."""
        return settings_status(self.agent, path, self.events, **extra)


@dataclass(frozen=True)
class JsonHookIntegration:
    """An integration that is only our hook in a Claude-style JSON settings file.

    ``install`` adds ``hooks`` to the file and copies the bundled hook (:func:`install_hook`),
    ``uninstall`` takes both back, ``status`` is :meth:`JsonHookGroups.status` with
    ``source``. ``settings_path`` is called at every use, so an environment override of the
    agent's home counts when the integration runs, not when the plugin was imported.
    """

    hooks: JsonHookGroups
    settings_path: Callable[[], Path]
    source: str

    def install(self, *, dry_run: bool = False) -> list[FileChange | str]:
        """Add our hook to the agent's settings and copy the hook."""
        return [self.hooks.install(self.settings_path(), dry_run=dry_run),
                *install_hook(self.hooks.agent, dry_run=dry_run)]

    def uninstall(self, *, dry_run: bool = False) -> list[FileChange | str]:
        """Remove our hook entries and the copied hook."""
        return [*self.hooks.uninstall(self.settings_path(), dry_run=dry_run),
                *uninstall_hook(self.hooks.agent, dry_run=dry_run)]

    def status(self) -> dict[str, Any]:
        """``installed`` when the hook is in place and every event runs it."""
        return self.hooks.status(self.settings_path(), source=self.source)


def flag_options(options: Mapping[str, Any] | None, names: Sequence[str], integration: str
                 ) -> dict[str, bool]:
    """``install``'s options as booleans, each of ``names`` (default false). A value is a
    bool or what ``--option NAME=true`` sends (``true``/``false``, ``yes``/``no``,
    ``1``/``0``); another value or name raises :class:`SettingsError` naming it."""
    given = dict(options or {})
    flags = {name: _FLAGS.get(str(given.pop(name, False)).lower()) for name in names}
    wrong = sorted(given) or [name for name, value in flags.items() if value is None]
    if wrong:
        takes = " ".join(f"{name}=true|false" for name in names)
        raise SettingsError(f"unknown option or value: {', '.join(wrong)}; the {integration} "
                            f"integration takes {takes}")
    return {name: bool(value) for name, value in flags.items()}


def mcp_argv() -> list[str]:
    """How an agent starts cmux's MCP server: the ``cmux`` beside this interpreter (an
    agent may start it with another ``PATH``), else ``cmux`` from ``PATH``; then ``mcp``."""
    beside = Path(sys.executable).with_name("cmux")
    return [str(beside) if beside.is_file() else "cmux", "mcp"]


def mcp_stdio_entry(**extra: Any) -> dict[str, Any]:
    """The ``{"command": ..., "args": [...]}`` entry of :func:`mcp_argv` most agents' MCP
    settings take, with ``extra`` keys after them."""
    command, *args = mcp_argv()
    return {"command": command, "args": args, **extra}


def _servers(data: Any, key: str, path: Path) -> Any:
    if not isinstance(data, Mapping):
        raise SettingsError(f"{path}: is not a table of settings")
    table = data.get(key)
    if table is not None and not isinstance(table, Mapping):
        raise SettingsError(f"{path}: '{key}' is not an object")
    return table


def _set_mcp_server(data: Any, key: str, entry: Mapping[str, Any], *, path: Path) -> None:
    """Make ``data[key]["cmux"]`` be ``entry``, in place (``key``'s table is created when
    missing; every other server in it stays)."""
    table = _servers(data, key, path)
    if table is None:
        data[key] = table = {}
    if table.get(MCP_SERVER) != entry:
        table[MCP_SERVER] = dict(entry)


def _drop_mcp_server(data: Any, key: str, *, path: Path) -> None:
    """Remove ``data[key]["cmux"]``; a ``key`` table left empty by that goes too."""
    table = _servers(data, key, path)
    if table is not None and MCP_SERVER in table:
        del table[MCP_SERVER]
        if not table:
            del data[key]


def has_mcp_server(path: Path, key: str, *, toml: bool = False) -> bool:
    """Whether the settings file at ``path`` (TOML when ``toml``) registers ``cmux`` under
    ``key``."""
    parse: Callable[[str], Any] = tomlkit.parse if toml else json.loads
    try:
        text = path.read_text(encoding="utf-8")
        table = _servers(parse(text) if text.strip() else {}, key, path)
    except (OSError, ValueError, SettingsError, tomlkit.exceptions.TOMLKitError):
        return False
    return table is not None and MCP_SERVER in table


def install_mcp_server(path: Path, key: str, entry: Mapping[str, Any] | None = None, *,
                       dry_run: bool = False, toml: bool = False) -> FileChange:
    """Register ``entry`` (default :func:`mcp_stdio_entry`) as ``key.cmux`` of the settings
    file at ``path`` (TOML through ``tomlkit`` when ``toml``), created when missing; every
    other server stays."""
    entry = mcp_stdio_entry() if entry is None else entry
    edit = edit_toml if toml else edit_json
    return edit(path, lambda data: _set_mcp_server(data, key, entry, path=path),
                dry_run=dry_run)


def uninstall_mcp_server(path: Path, key: str, *, dry_run: bool = False,
                         toml: bool = False) -> list[FileChange]:
    """Remove ``key.cmux`` from the settings file at ``path``; ``[]`` when it has none."""
    if not has_mcp_server(path, key, toml=toml):
        return []
    edit = edit_toml if toml else edit_json
    return [edit(path, lambda data: _drop_mcp_server(data, key, path=path), dry_run=dry_run)]
