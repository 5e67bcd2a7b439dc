"""cmux-opencode: an OpenCode plugin reports OpenCode's turns to the cmux pane it runs in.

``cmux integration install opencode`` (the integration ``opencode``, plugin id
``cmux-opencode``):

* copies cmux's bundled ``cmux-hook`` (with its Python body) to
  ``$XDG_CONFIG_HOME/cmux/hooks/opencode/``;
* writes cmux's bundled JS plugin ``cmux.js`` to OpenCode's global plugin directory,
  ``$XDG_CONFIG_HOME/opencode/plugins/`` (``$OPENCODE_CONFIG_DIR/plugins/`` when that is
  set), with the path of the copied hook filled in. OpenCode loads every ``*.js`` there;
* with ``options={"mcp": true}``, also registers cmux's MCP server (``cmux mcp``, from the
  ``cmux-mcp`` distribution) as ``mcp.cmux`` in OpenCode's global configuration,
  ``opencode.json`` in the same directory.

The JS plugin forwards session, permission, prompt and tool events of the main session (not
a subagent's child session) to the hook, one at a time, without OpenCode waiting for them.
Uninstall removes the hook, a ``cmux.js`` that is still as installed and ``mcp.cmux``. The
reports use source ``cmux:opencode`` with the ``shared`` authority; see ``docs/agents.md``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from cmux_core.hookspecs import RegisterIntegration, hookimpl
from cmux_core.plugin_host import hook_kit
from cmux_core.plugin_host.settings_files import FileChange, write_text

__version__ = "0.1.0"

AGENT = "opencode"
SOURCE = "cmux:opencode"
PLACEHOLDER = '"@CMUX_HOOK@"'
"""Where ``hooks/opencode/cmux.js`` takes the hook's path (as a JS string literal)."""


def opencode_dir() -> Path:
    explicit = os.environ.get("OPENCODE_CONFIG_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "opencode"


def plugin_path() -> Path:
    return opencode_dir() / "plugins" / "cmux.js"


def config_path() -> Path:
    return opencode_dir() / "opencode.json"


MCP_KEY = "mcp"


def mcp_entry() -> dict[str, Any]:
    return {"type": "local", "command": hook_kit.mcp_argv(), "enabled": True}


def plugin_text() -> str:
    """The JS plugin as installed: the bundled ``cmux.js`` pointing at the copied hook."""
    hook = hook_kit.hook_dir(AGENT) / "cmux-hook"
    return hook_kit.bundled_text("opencode/cmux.js").replace(PLACEHOLDER, json.dumps(str(hook)))


def install(*, dry_run: bool = False, options: dict[str, Any] | None = None
            ) -> list[FileChange | str]:
    """Copy the hook and write the JS plugin to OpenCode's plugin directory; with the option
    ``mcp`` (a bool, or ``true``/``false`` from ``--option mcp=true``) also register cmux's
    MCP server. Any other option or value raises :class:`SettingsError` before anything is
    written."""
    flags = hook_kit.flag_options(options, ("mcp",), AGENT)
    changes: list[FileChange | str] = [*hook_kit.install_hook(AGENT, dry_run=dry_run),
                                       write_text(plugin_path(), plugin_text(), dry_run=dry_run)]
    if flags["mcp"]:
        changes.append(hook_kit.install_mcp_server(config_path(), MCP_KEY, mcp_entry(),
                                                   dry_run=dry_run))
    return changes


def uninstall(*, dry_run: bool = False) -> list[FileChange | str]:
    """Remove the copied hook, the JS plugin unless it was changed since, and the MCP
    server's entry."""
    return [*hook_kit.remove_unchanged(plugin_path(), plugin_text(), dry_run=dry_run),
            *hook_kit.uninstall_hook(AGENT, dry_run=dry_run),
            *hook_kit.uninstall_mcp_server(config_path(), MCP_KEY, dry_run=dry_run)]


def status() -> dict[str, Any]:
    """``installed`` when the hook and the JS plugin are in place as installed; ``mcp``
    whether cmux's MCP server is registered."""
    plugin = plugin_path()
    try:
        current = plugin.read_text(encoding="utf-8", errors="replace") == plugin_text()
    except OSError:
        current = False
    return {"installed": hook_kit.hook_installed(AGENT) and current, "plugin": str(plugin),
            "plugin_changed": plugin.exists() and not current,
            "hook": str(hook_kit.hook_dir(AGENT) / "cmux-hook"), "source": SOURCE,
            "mcp": hook_kit.has_mcp_server(config_path(), MCP_KEY), "config": str(config_path())}


@hookimpl
def cmux_register_integrations(register: RegisterIntegration) -> None:
    register(AGENT, install=install, uninstall=uninstall, status=status,
             description="OpenCode JS plugin: session, prompt, tool and permission reports "
                         "(option mcp=true registers cmux mcp)",
             source=SOURCE, agent=AGENT, authority="shared")
