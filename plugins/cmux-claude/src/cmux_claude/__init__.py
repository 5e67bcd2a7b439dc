"""cmux-claude: Claude Code's own hooks report to the cmux pane Claude runs in.

``cmux integration install claude`` (the integration ``claude``, plugin id ``cmux-claude``):

* copies cmux's bundled ``cmux-hook`` (with its Python body) to
  ``$XDG_CONFIG_HOME/cmux/hooks/claude/``;
* adds one command hook running it to each event in :data:`EVENTS` of Claude Code's user
  settings, ``$CLAUDE_CONFIG_DIR/settings.json`` (``~/.claude/settings.json``), keeping every
  other key and hook as it was;
* with ``options={"skill": true}``, also writes the cmux skill to
  ``<claude dir>/skills/cmux/SKILL.md``, which teaches Claude to drive cmux;
* with ``options={"mcp": true}``, also registers cmux's MCP server (``cmux mcp``, from the
  ``cmux-mcp`` distribution) as ``mcpServers.cmux`` in Claude Code's user configuration,
  ``~/.claude.json`` (``$CLAUDE_CONFIG_DIR/.claude.json`` when set).

Uninstall removes exactly those hook entries (an event, or ``hooks``, left empty by that is
removed too), the copied hook, a skill file that is still as installed and the
``mcpServers.cmux`` entry. The reports use
source ``cmux:claude`` with the ``shared`` authority: the hooks give the session reference,
tokens and a fast ``working``; the screen keeps the last word on ``blocked`` and on turns that
end without a hook (an interrupt, a denied permission). See ``docs/agents.md``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cmux_core.hookspecs import RegisterIntegration, hookimpl
from cmux_core.plugin_host import hook_kit
from cmux_core.plugin_host.settings_files import FileChange, write_text

__version__ = "0.1.0"

AGENT = "claude"
SOURCE = "cmux:claude"
EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure",
          "PermissionRequest", "Notification", "Stop", "StopFailure", "PreCompact",
          "PostCompact", "SessionEnd")
"""The Claude Code hook events the integration hooks (what each reports: docs/agents.md)."""

MATCHERS = {
    "PreToolUse": "*", "PostToolUse": "*", "PostToolUseFailure": "*", "PermissionRequest": "*",
    "Notification": "permission_prompt|idle_prompt|elicitation_dialog",
}
"""Events whose hooks take a matcher: every tool, and only the notifications that matter."""

HOOKS = hook_kit.JsonHookGroups(AGENT, EVENTS, matchers=MATCHERS)
SKILL = "skills/cmux/SKILL.md"
MCP_KEY = "mcpServers"


def claude_dir() -> Path:
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")


def settings_path() -> Path:
    return claude_dir() / "settings.json"


def skill_path() -> Path:
    return claude_dir() / "skills" / "cmux" / "SKILL.md"


def mcp_config_path() -> Path:
    """Claude Code's user configuration, where its user-scope MCP servers are."""
    explicit = os.environ.get("CLAUDE_CONFIG_DIR")
    return (Path(explicit) if explicit else Path.home()) / ".claude.json"



def install(*, dry_run: bool = False, options: dict[str, Any] | None = None
            ) -> list[FileChange | str]:
    """Copy the hook, add it to Claude Code's settings, and with ``skill`` the skill.

    ``options``: ``skill`` and ``mcp``, each a bool or the strings ``true``/``false`` the
    CLI's ``--option skill=true`` sends. Any other option, or another value, raises
    :class:`SettingsError` (the host answers ``integration_install_failed`` with its
    message) before anything is written.
    """
    flags = hook_kit.flag_options(options, ("skill", "mcp"), AGENT)
    changes: list[FileChange | str] = [HOOKS.install(settings_path(), dry_run=dry_run)]
    changes += hook_kit.install_hook(AGENT, dry_run=dry_run)
    if flags["skill"]:
        changes.append(write_text(skill_path(), hook_kit.bundled_text(SKILL), dry_run=dry_run))
    if flags["mcp"]:
        entry = hook_kit.mcp_stdio_entry(type="stdio", env={})
        changes.append(hook_kit.install_mcp_server(mcp_config_path(), MCP_KEY, entry,
                                                   dry_run=dry_run))
    return changes


def uninstall(*, dry_run: bool = False) -> list[FileChange | str]:
    """Remove our hook entries, the copied hook, the skill if it is as installed, and the
    MCP server's entry."""
    changes: list[FileChange | str] = [*HOOKS.uninstall(settings_path(), dry_run=dry_run)]
    changes += hook_kit.uninstall_hook(AGENT, dry_run=dry_run)
    changes += hook_kit.remove_unchanged(skill_path(), hook_kit.bundled_text(SKILL),
                                         dry_run=dry_run)
    if not dry_run:
        hook_kit.remove_empty_dir(skill_path().parent)
    changes += hook_kit.uninstall_mcp_server(mcp_config_path(), MCP_KEY, dry_run=dry_run)
    return changes


def status() -> dict[str, Any]:
    """``installed`` when the hook is in place and every event runs it; ``skill`` and
    ``mcp`` say whether the skill and the MCP server are installed too."""
    return HOOKS.status(settings_path(), skill=skill_path().is_file(),
                        mcp=hook_kit.has_mcp_server(mcp_config_path(), MCP_KEY),
                        mcp_config=str(mcp_config_path()), source=SOURCE)


@hookimpl
def cmux_register_integrations(register: RegisterIntegration) -> None:
    register(AGENT, install=install, uninstall=uninstall, status=status,
             description="Claude Code hooks: session, prompt, tool and permission reports "
                         "(option skill=true installs the cmux skill, mcp=true registers cmux mcp)",
             source=SOURCE, agent=AGENT, authority="shared")
