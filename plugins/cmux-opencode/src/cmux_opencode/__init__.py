"""cmux-opencode: an OpenCode plugin reports OpenCode's turns to the cmux pane it runs in.

``cmux integration install opencode`` (the integration ``opencode``, plugin id
``cmux-opencode``):

* copies ``cmux-hook`` (with its Python body) to ``$XDG_CONFIG_HOME/cmux/hooks/opencode/``;
* writes the JS plugin ``cmux.js`` to OpenCode's global plugin directory,
  ``$XDG_CONFIG_HOME/opencode/plugins/`` (``$OPENCODE_CONFIG_DIR/plugins/`` when that is
  set), with the path of the copied hook filled in. OpenCode loads every ``*.js`` there.

The JS plugin forwards session, permission, prompt and tool events of the main session (not
a subagent's child session) to the hook, one at a time, without OpenCode waiting for them.
Uninstall removes the hook and a ``cmux.js`` that is still as installed. The reports use
source ``cmux:opencode`` with the ``shared`` authority; see ``docs/agents.md``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

from cmux_core.config import config_dir
from cmux_core.hookspecs import RegisterIntegration, hookimpl
from cmux_core.plugin_host.settings_files import FileChange, remove_file, write_text

__version__ = "0.1.0"

AGENT = "opencode"
SOURCE = "cmux:opencode"
HOOK_FILES = {"cmux-hook": 0o755, "cmux_hook.py": 0o644}
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


def hook_dir() -> Path:
    return config_dir() / "hooks" / AGENT


def _data(name: str) -> str:
    return (resources.files(__name__) / name).read_text(encoding="utf-8")


def plugin_text() -> str:
    """The JS plugin as installed: the packaged ``cmux.js`` pointing at the copied hook."""
    return _data("hooks/cmux.js").replace(PLACEHOLDER, json.dumps(str(hook_dir() / "cmux-hook")))


def install(*, dry_run: bool = False) -> list[FileChange | str]:
    """Copy the hook and write the JS plugin to OpenCode's plugin directory."""
    changes: list[FileChange | str] = []
    for name, mode in HOOK_FILES.items():
        changes.append(write_text(hook_dir() / name, _data(f"hooks/{name}"), mode=mode,
                                  dry_run=dry_run))
    changes.append(write_text(plugin_path(), plugin_text(), dry_run=dry_run))
    return changes


def uninstall(*, dry_run: bool = False) -> list[FileChange | str]:
    """Remove the copied hook, and the JS plugin unless it was changed since."""
    changes: list[FileChange | str] = []
    plugin = plugin_path()
    if plugin.exists():
        if plugin.read_text(encoding="utf-8", errors="replace") == plugin_text():
            changes.append(remove_file(plugin, dry_run=dry_run))
        else:
            changes.append(f"{plugin}: kept (changed since it was installed)")
    for name in HOOK_FILES:
        changes.append(remove_file(hook_dir() / name, dry_run=dry_run))
    if not dry_run:
        # gone if only the lock files of our edits and the hook's compiled form are left
        with contextlib.suppress(OSError):
            for lock in hook_dir().glob(".*.cmux-lock"):
                lock.unlink()
            shutil.rmtree(hook_dir() / "__pycache__", ignore_errors=True)
            hook_dir().rmdir()
    return changes


def status() -> dict[str, Any]:
    """``installed`` when the hook and the JS plugin are in place as installed."""
    plugin = plugin_path()
    try:
        current = plugin.read_text(encoding="utf-8", errors="replace") == plugin_text()
    except OSError:
        current = False
    files = all((hook_dir() / name).is_file() for name in HOOK_FILES)
    return {"installed": files and current, "plugin": str(plugin),
            "plugin_changed": plugin.exists() and not current,
            "hook": str(hook_dir() / "cmux-hook"), "source": SOURCE}


@hookimpl
def cmux_register_integrations(register: RegisterIntegration) -> None:
    register(AGENT, install=install, uninstall=uninstall, status=status,
             description="OpenCode JS plugin: session, prompt, tool and permission reports",
             source=SOURCE, agent=AGENT, authority="shared")
