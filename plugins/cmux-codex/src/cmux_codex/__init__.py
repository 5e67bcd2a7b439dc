"""cmux-codex: Codex's own lifecycle hooks report to the cmux pane Codex runs in.

``cmux integration install codex`` (the integration ``codex``, plugin id ``cmux-codex``):

* copies cmux's bundled ``cmux-hook`` (with its Python body) to
  ``$XDG_CONFIG_HOME/cmux/hooks/codex/``;
* adds one command hook running it to each event in :data:`EVENTS` as inline ``[hooks]``
  tables of ``$CODEX_HOME/config.toml`` (``~/.codex/config.toml``), through ``tomlkit`` so
  the file's comments, layout and every other key stay as they were;
* with ``options={"mcp": true}``, also registers cmux's MCP server (``cmux mcp``, from the
  ``cmux-mcp`` distribution) as ``[mcp_servers.cmux]`` in the same file.

Codex runs a hook it has not seen before only after the user trusts it (``/hooks`` in
Codex, or the "Hooks need review" prompt it shows at start-up). Install says so, and
``status()`` reports whether Codex will run each of our hooks (:mod:`cmux_codex.trust`:
Codex's ``[hooks.state]`` in ``config.toml``, confirmed through ``codex app-server`` when a
``codex`` executable is on ``PATH``). The trust itself is never written: it is Codex's own
hash of each hook's definition, recorded only when the user reviews it. Codex's older
``notify`` program is not used: it also fires for Codex's own side requests (a session
title), so it does not mark the end of a turn.

Uninstall removes exactly those hook entries (an event, or ``hooks``, left empty by that is
removed too), the copied hook and ``[mcp_servers.cmux]``. The reports use source
``cmux:codex`` with the ``shared`` authority; see ``docs/agents.md``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import tomlkit

from cmux_codex import trust
from cmux_core.hookspecs import RegisterIntegration, hookimpl
from cmux_core.plugin_host import hook_kit
from cmux_core.plugin_host.settings_files import FileChange, SettingsError, edit_toml

__version__ = "0.1.0"

AGENT = "codex"
SOURCE = "cmux:codex"
EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse",
          "PreCompact", "PostCompact", "Stop", "SessionEnd")
"""The Codex hook events the integration hooks (what each reports: docs/agents.md)."""

TRUST_NOTE = ("Codex runs new or changed hooks only once you trust them: start codex, open "
              "/hooks and press t to trust all (or review each); a hook that changes later "
              "needs trusting again")
SKIPPED_NOTE = ("Codex skips the cmux hooks that 'trust' lists as untrusted, modified or "
                "disabled: start codex, open /hooks, press t to trust all (or review each) "
                "and switch disabled ones back on")
UNCONFIRMED_NOTE = ("Codex records a trust for every cmux hook, but no codex executable on "
                    "PATH answered to confirm the hooks are unchanged since")


def codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")


def config_path() -> Path:
    return codex_home() / "config.toml"


def _ours(hook: Any) -> bool:
    return hook_kit.is_our_hook(hook, AGENT)


def add_hooks(doc: Any) -> None:
    """Make every event run our command once; a stale command of ours is updated in place.

    Codex's ``[hooks]`` are TOML arrays of tables (``[[hooks.Stop]]`` with
    ``[[hooks.Stop.hooks]]``); new ones are added as such, through ``tomlkit``.
    """
    hooks = doc.get("hooks")
    if hooks is None:
        hooks = tomlkit.table(is_super_table=True)
        doc["hooks"] = hooks
    if not isinstance(hooks, dict):
        raise SettingsError(f"{config_path()}: 'hooks' is not a table")
    cmd = hook_kit.hook_command(AGENT)
    for event in EVENTS:
        groups = hooks.get(event)
        if groups is None:
            groups = tomlkit.aot()
            hooks[event] = groups
        if not isinstance(groups, list):
            raise SettingsError(f"{config_path()}: 'hooks.{event}' is not an array of tables")
        mine = [h for g in groups for h in hook_kit.handlers(g) if _ours(h)]
        if mine:
            for hook in mine:
                if hook["command"] != cmd:
                    hook["command"] = cmd
            continue
        handler = tomlkit.table()
        handler["type"] = "command"
        handler["command"] = cmd
        handlers = tomlkit.aot()
        handlers.append(handler)
        group = tomlkit.table()
        group["hooks"] = handlers
        groups.append(group)


def remove_hooks(doc: Any) -> None:
    """Drop every hook entry of ours; containers that only held ours go too. Entries are
    deleted in place, so the tables around them keep their comments and layout."""
    hooks = doc.get("hooks")
    if not isinstance(hooks, dict):
        return
    removed = False
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        touched = False
        for index in reversed(range(len(groups))):
            group = groups[index]
            handlers = hook_kit.handlers(group)
            if not any(_ours(h) for h in handlers):
                continue
            removed = touched = True
            inner = group["hooks"]
            for position in reversed(range(len(handlers))):
                if _ours(handlers[position]):
                    del inner[position]
            if not len(inner):
                del groups[index]
        if touched and not len(groups):
            del hooks[event]
    if removed and not len(hooks):
        del doc["hooks"]


MCP_KEY = "mcp_servers"



def install(*, dry_run: bool = False, options: dict[str, Any] | None = None
            ) -> list[FileChange | str]:
    """Copy the hook and add it to Codex's ``config.toml``; with the option ``mcp`` (a bool,
    or ``true``/``false`` from ``--option mcp=true``) also register cmux's MCP server. Any
    other option or value raises :class:`SettingsError` before anything is written."""
    flags = hook_kit.flag_options(options, ("mcp",), AGENT)
    changes: list[FileChange | str] = [edit_toml(config_path(), add_hooks, dry_run=dry_run)]
    changes += hook_kit.install_hook(AGENT, dry_run=dry_run)
    if flags["mcp"]:
        changes.append(hook_kit.install_mcp_server(config_path(), MCP_KEY,
                                                   dry_run=dry_run, toml=True))
    changes.append(TRUST_NOTE)
    return changes


def uninstall(*, dry_run: bool = False) -> list[FileChange | str]:
    """Remove our hook entries, the copied hook and the MCP server's entry."""
    changes: list[FileChange | str] = []
    if config_path().exists():
        changes.append(edit_toml(config_path(), remove_hooks, dry_run=dry_run))
        changes += hook_kit.uninstall_mcp_server(config_path(), MCP_KEY, dry_run=dry_run,
                                                 toml=True)
    changes += hook_kit.uninstall_hook(AGENT, dry_run=dry_run)
    return changes


def status() -> dict[str, Any]:
    """``installed`` when the hook is in place and every event runs it; ``trusted``,
    ``trust`` and ``trust_checked_by`` say whether Codex will run the hooks
    (:func:`cmux_codex.trust.trust_status`), with a ``note`` on what to do when not; ``mcp``
    whether cmux's MCP server is registered."""
    path = config_path()
    try:
        doc: Any = tomlkit.parse(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, tomlkit.exceptions.TOMLKitError):
        doc = {}  # settings_status reports the error
    extra = trust.trust_status(doc, path, EVENTS)
    if not extra["trust"]:
        extra["note"] = TRUST_NOTE  # nothing of ours to trust yet
    elif extra["trusted"] is False:
        extra["note"] = SKIPPED_NOTE
    elif extra["trusted"] is None:
        extra["note"] = UNCONFIRMED_NOTE
    extra["mcp"] = hook_kit.has_mcp_server(path, MCP_KEY, toml=True)
    return hook_kit.settings_status(AGENT, path, EVENTS, parse=tomlkit.parse, key="config",
                                    source=SOURCE, **extra)


@hookimpl
def cmux_register_integrations(register: RegisterIntegration) -> None:
    register(AGENT, install=install, uninstall=uninstall, status=status,
             description="Codex lifecycle hooks in config.toml: session, prompt, tool and "
                         "permission reports (option mcp=true registers cmux mcp)",
             source=SOURCE, agent=AGENT, authority="shared")
