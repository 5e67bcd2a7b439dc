"""cmux-copilot: GitHub Copilot CLI's own hooks report to the cmux pane Copilot CLI runs in.

``cmux integration install copilot`` (the integration ``copilot``, plugin id ``cmux-copilot``):

* copies cmux's bundled ``cmux-hook`` (with its Python body) to
  ``$XDG_CONFIG_HOME/cmux/hooks/copilot/``;
* adds one command hook running it to each event in :data:`EVENTS` of Copilot CLI's user
  settings, ``~/.copilot/settings.json`` (``$COPILOT_HOME/settings.json`` when set), keeping
  every other key and hook as it was.

Copilot CLI takes Claude Code's hook groups under Claude Code's event names and then hands
those hooks Claude Code's payload shape, except ``PermissionRequest`` (Copilot's own
camelCase shape) and ``Notification`` (``sessionId``), which the hook reads as they come
(``hooks/cmux_hook.py``, its ``copilot`` table). Uninstall removes exactly those hook
entries (an event, or ``hooks``, left empty by that is removed too) and the copied hook. The
reports use source ``cmux:copilot`` with the ``shared`` authority; see ``docs/agents.md``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from cmux_core.hookspecs import RegisterIntegration, hookimpl
from cmux_core.plugin_host import hook_kit

__version__ = "0.1.0"

AGENT = "copilot"
SOURCE = "cmux:copilot"
EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PermissionRequest",
          "Notification", "Stop", "SessionEnd")
"""The Copilot CLI hook events the integration hooks (what each reports: docs/agents.md)."""

MATCHERS = {"PreToolUse": "*", "PostToolUse": "*", "PermissionRequest": "*"}
"""Events whose hooks take a matcher: every tool. Copilot CLI runs no Notification hook
whose matcher is ``*``, so that one has none (the hook keeps the notifications it knows)."""

HOOKS = hook_kit.JsonHookGroups(AGENT, EVENTS, matchers=MATCHERS)


def copilot_dir() -> Path:
    return Path(os.environ.get("COPILOT_HOME") or Path.home() / ".copilot")


def settings_path() -> Path:
    return copilot_dir() / "settings.json"


INTEGRATION = hook_kit.JsonHookIntegration(HOOKS, settings_path, SOURCE)
install = INTEGRATION.install
uninstall = INTEGRATION.uninstall


def status() -> dict[str, Any]:
    """The integration's status; with Copilot CLI's ``disableAllHooks`` set in the same
    settings, ``hooks_disabled`` is true and ``note`` says that no hook runs."""
    result = INTEGRATION.status()
    try:
        data = json.loads(settings_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return result  # a missing file, or the error status() already reports
    if isinstance(data, dict) and data.get("disableAllHooks") is True:
        result["hooks_disabled"] = True
        result["note"] = (f"{settings_path()}: disableAllHooks is true, so Copilot CLI runs "
                          "no hooks, these included")
    return result


@hookimpl
def cmux_register_integrations(register: RegisterIntegration) -> None:
    register(AGENT, install=install, uninstall=uninstall, status=status,
             description="GitHub Copilot CLI hooks: session, prompt, tool and permission reports",
             source=SOURCE, agent=AGENT, authority="shared")
