"""cmux-gemini: Gemini CLI's own hooks report to the cmux pane Gemini CLI runs in.

``cmux integration install gemini`` (the integration ``gemini``, plugin id ``cmux-gemini``):

* copies cmux's bundled ``cmux-hook`` (with its Python body) to
  ``$XDG_CONFIG_HOME/cmux/hooks/gemini/``;
* adds one command hook named ``cmux`` running it to each event in :data:`EVENTS` of Gemini
  CLI's user settings, ``~/.gemini/settings.json`` (``$GEMINI_CLI_HOME/.gemini/`` when set),
  keeping every other key and hook as it was.

Uninstall removes exactly those hook entries (an event, or ``hooks``, left empty by that is
removed too) and the copied hook. The reports use source ``cmux:gemini`` with the ``shared``
authority; see ``docs/agents.md``.
"""

from __future__ import annotations

import os
from pathlib import Path

from cmux_core.hookspecs import RegisterIntegration, hookimpl
from cmux_core.plugin_host import hook_kit

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
install = INTEGRATION.install
uninstall = INTEGRATION.uninstall
status = INTEGRATION.status


@hookimpl
def cmux_register_integrations(register: RegisterIntegration) -> None:
    register(AGENT, install=install, uninstall=uninstall, status=status,
             description="Gemini CLI hooks: session, prompt, tool and permission reports",
             source=SOURCE, agent=AGENT, authority="shared")
