"""cmux-gemini: Gemini CLI's own hooks report to the cmux pane Gemini CLI runs in.

``cmux integration install gemini`` (the integration ``gemini``, plugin id ``cmux-gemini``):

* copies cmux's bundled ``cmux-hook`` (with its Python body) to
  ``$XDG_CONFIG_HOME/cmux/hooks/gemini/``;
* adds one command hook named ``cmux`` running it to each event in :data:`EVENTS` of Gemini
  CLI's user settings, ``~/.gemini/settings.json`` (``$GEMINI_CLI_HOME/.gemini/`` when set),
  keeping every other key and hook as it was;
* with ``options={"mcp": true}``, also registers cmux's MCP server (``cmux mcp``, from the
  ``cmux-mcp`` distribution) as ``mcpServers.cmux`` in the same file.

Uninstall removes exactly those hook entries (an event, or ``hooks``, left empty by that is
removed too), the copied hook and ``mcpServers.cmux``. The reports use source
``cmux:gemini`` with the ``shared`` authority; see ``docs/agents.md``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cmux_core.hookspecs import RegisterIntegration, hookimpl
from cmux_core.plugin_host import hook_kit
from cmux_core.plugin_host.settings_files import FileChange

__version__ = "0.1.0"

AGENT = "gemini"
SOURCE = "cmux:gemini"
EVENTS = ("SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "Notification",
          "AfterAgent", "PreCompress", "SessionEnd")
"""The Gemini CLI hook events the integration hooks (what each reports: docs/agents.md)."""

MATCHERS = {"BeforeTool": "*", "AfterTool": "*"}
"""Tool events match every tool; the others match everything with an empty matcher."""

HOOKS = hook_kit.JsonHookGroups(AGENT, EVENTS, name="cmux",
                                matchers={e: MATCHERS.get(e, "") for e in EVENTS})


def gemini_dir() -> Path:
    return Path(os.environ.get("GEMINI_CLI_HOME") or Path.home()) / ".gemini"


def settings_path() -> Path:
    return gemini_dir() / "settings.json"


INTEGRATION = hook_kit.JsonHookIntegration(HOOKS, settings_path, SOURCE)
MCP_KEY = "mcpServers"



def install(*, dry_run: bool = False, options: dict[str, Any] | None = None
            ) -> list[FileChange | str]:
    """Add our hook to the settings and copy it; with the option ``mcp`` (a bool, or
    ``true``/``false`` from ``--option mcp=true``) also register cmux's MCP server. Any
    other option or value raises :class:`SettingsError` before anything is written."""
    flags = hook_kit.flag_options(options, ("mcp",), AGENT)
    changes = INTEGRATION.install(dry_run=dry_run)
    if flags["mcp"]:
        changes.append(hook_kit.install_mcp_server(settings_path(), MCP_KEY,
                                                   dry_run=dry_run))
    return changes


def uninstall(*, dry_run: bool = False) -> list[FileChange | str]:
    """Remove our hook entries, the copied hook and the MCP server's entry."""
    return [*INTEGRATION.uninstall(dry_run=dry_run),
            *hook_kit.uninstall_mcp_server(settings_path(), MCP_KEY, dry_run=dry_run)]


def status() -> dict[str, Any]:
    """``installed`` when the hook is in place and every event runs it; ``mcp`` whether
    cmux's MCP server is registered."""
    return {**INTEGRATION.status(), "mcp": hook_kit.has_mcp_server(settings_path(), MCP_KEY)}


@hookimpl
def cmux_register_integrations(register: RegisterIntegration) -> None:
    register(AGENT, install=install, uninstall=uninstall, status=status,
             description="Gemini CLI hooks: session, prompt, tool and permission reports "
                         "(option mcp=true registers cmux mcp)",
             source=SOURCE, agent=AGENT, authority="shared")
