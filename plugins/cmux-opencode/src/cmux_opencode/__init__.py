"""cmux-opencode: an OpenCode plugin reports OpenCode's turns to the cmux pane it runs in.

``cmux integration install opencode`` (the integration ``opencode``, plugin id
``cmux-opencode``):

* copies cmux's bundled ``cmux-hook`` (with its Python body) to
  ``$XDG_CONFIG_HOME/cmux/hooks/opencode/``;
* writes cmux's bundled JS plugin ``cmux.js`` to OpenCode's global plugin directory,
  ``$XDG_CONFIG_HOME/opencode/plugins/`` (``$OPENCODE_CONFIG_DIR/plugins/`` when that is
  set), with the path of the copied hook filled in. OpenCode loads every ``*.js`` there.

The JS plugin forwards session, permission, prompt and tool events of the main session (not
a subagent's child session) to the hook, one at a time, without OpenCode waiting for them.
Uninstall removes the hook and a ``cmux.js`` that is still as installed. The reports use
source ``cmux:opencode`` with the ``shared`` authority; see ``docs/agents.md``.
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


def plugin_text() -> str:
    """The JS plugin as installed: the bundled ``cmux.js`` pointing at the copied hook."""
    hook = hook_kit.hook_dir(AGENT) / "cmux-hook"
    return hook_kit.bundled_text("opencode/cmux.js").replace(PLACEHOLDER, json.dumps(str(hook)))


def install(*, dry_run: bool = False) -> list[FileChange | str]:
    """Copy the hook and write the JS plugin to OpenCode's plugin directory."""
    return [*hook_kit.install_hook(AGENT, dry_run=dry_run),
            write_text(plugin_path(), plugin_text(), dry_run=dry_run)]


def uninstall(*, dry_run: bool = False) -> list[FileChange | str]:
    """Remove the copied hook, and the JS plugin unless it was changed since."""
    return [*hook_kit.remove_unchanged(plugin_path(), plugin_text(), dry_run=dry_run),
            *hook_kit.uninstall_hook(AGENT, dry_run=dry_run)]


def status() -> dict[str, Any]:
    """``installed`` when the hook and the JS plugin are in place as installed."""
    plugin = plugin_path()
    try:
        current = plugin.read_text(encoding="utf-8", errors="replace") == plugin_text()
    except OSError:
        current = False
    return {"installed": hook_kit.hook_installed(AGENT) and current, "plugin": str(plugin),
            "plugin_changed": plugin.exists() and not current,
            "hook": str(hook_kit.hook_dir(AGENT) / "cmux-hook"), "source": SOURCE}


@hookimpl
def cmux_register_integrations(register: RegisterIntegration) -> None:
    register(AGENT, install=install, uninstall=uninstall, status=status,
             description="OpenCode JS plugin: session, prompt, tool and permission reports",
             source=SOURCE, agent=AGENT, authority="shared")
