"""cmux-qwen: Qwen Code's own hooks report to the cmux pane Qwen Code runs in.

``cmux integration install qwen`` (the integration ``qwen``, plugin id ``cmux-qwen``):

* copies cmux's bundled ``cmux-hook`` (with its Python body) to
  ``$XDG_CONFIG_HOME/cmux/hooks/qwen/``;
* adds one command hook running it to each event in :data:`EVENTS` of Qwen Code's user
  settings, ``~/.qwen/settings.json`` (``$QWEN_HOME/settings.json`` when set), keeping
  every other key and hook as it was.

Qwen Code's hook payloads have Claude Code's shape, and the hook reads them the same way.
Uninstall removes exactly those hook entries (an event, or ``hooks``, left empty by that is
removed too) and the copied hook. The reports use source ``cmux:qwen`` with the ``shared``
authority; see ``docs/agents.md``.
"""

from __future__ import annotations

import os
from pathlib import Path

from cmux_core.hookspecs import RegisterIntegration, hookimpl
from cmux_core.plugin_host import hook_kit

__version__ = "0.1.0"

AGENT = "qwen"
SOURCE = "cmux:qwen"
EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure",
          "PermissionRequest", "Notification", "Stop", "StopFailure", "PreCompact",
          "PostCompact", "SessionEnd")
"""The Qwen Code hook events the integration hooks (what each reports: docs/agents.md)."""

MATCHERS = {
    "PreToolUse": "*", "PostToolUse": "*", "PostToolUseFailure": "*", "PermissionRequest": "*",
    "Notification": "permission_prompt|idle_prompt|elicitation_dialog",
}
"""Events whose hooks take a matcher: every tool, and only the notifications that matter."""

HOOKS = hook_kit.JsonHookGroups(AGENT, EVENTS, matchers=MATCHERS)


def qwen_dir() -> Path:
    return Path(os.environ.get("QWEN_HOME") or Path.home() / ".qwen")


def settings_path() -> Path:
    return qwen_dir() / "settings.json"


INTEGRATION = hook_kit.JsonHookIntegration(HOOKS, settings_path, SOURCE)
install = INTEGRATION.install
uninstall = INTEGRATION.uninstall
status = INTEGRATION.status


@hookimpl
def cmux_register_integrations(register: RegisterIntegration) -> None:
    register(AGENT, install=install, uninstall=uninstall, status=status,
             description="Qwen Code hooks: session, prompt, tool and permission reports",
             source=SOURCE, agent=AGENT, authority="shared")
