"""cmux-claude: Claude Code's own hooks report to the cmux pane Claude runs in.

``cmux integration install claude`` (the integration ``claude``, plugin id ``cmux-claude``):

* copies ``cmux-hook`` (with its Python body) to ``$XDG_CONFIG_HOME/cmux/hooks/claude/``;
* adds one command hook running it to each event in :data:`EVENTS` of Claude Code's user
  settings, ``$CLAUDE_CONFIG_DIR/settings.json`` (``~/.claude/settings.json``), keeping every
  other key and hook as it was;
* with ``options={"skill": true}``, also writes the cmux skill to
  ``<claude dir>/skills/cmux/SKILL.md``, which teaches Claude to drive cmux.

Uninstall removes exactly those hook entries (an event, or ``hooks``, left empty by that is
removed too), the copied hook and a skill file that is still as installed. The reports use
source ``cmux:claude`` with the ``shared`` authority: the hooks give the session reference,
tokens and a fast ``working``; the screen keeps the last word on ``blocked`` and on turns that
end without a hook (an interrupt, a denied permission). See ``docs/agents.md``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

from cmux_core.config import config_dir
from cmux_core.hookspecs import RegisterIntegration, hookimpl
from cmux_core.plugin_host.settings_files import (
    FileChange,
    SettingsError,
    edit_json,
    remove_file,
    write_text,
)

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

SKILL_VALUES = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
HOOK_FILES = {"cmux-hook": 0o755, "cmux_hook.py": 0o644}
MARKER = "/cmux/hooks/claude/cmux-hook"
"""Part of every command this integration installs, wherever the config dir was."""


def claude_dir() -> Path:
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")


def settings_path() -> Path:
    return claude_dir() / "settings.json"


def skill_path() -> Path:
    return claude_dir() / "skills" / "cmux" / "SKILL.md"


def hook_dir() -> Path:
    return config_dir() / "hooks" / AGENT


def command() -> str:
    return f"{shlex.quote(str(hook_dir() / 'cmux-hook'))} {AGENT}"


def _data(name: str) -> str:
    return (resources.files(__name__) / name).read_text(encoding="utf-8")


def _ours(hook: Any) -> bool:
    return isinstance(hook, dict) and MARKER in str(hook.get("command", ""))


def _hooks_table(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise SettingsError(f"{settings_path()}: is not a JSON object")
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsError(f"{settings_path()}: 'hooks' is not an object")
    return hooks


def add_hooks(data: Any) -> None:
    """Make every event run our command once; a stale command of ours is updated in place."""
    hooks = _hooks_table(data)
    cmd = command()
    for event in EVENTS:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            continue
        mine = [h for g in groups if isinstance(g, dict)
                for h in g.get("hooks", []) if _ours(h)]
        if mine:
            for hook in mine:
                hook["command"] = cmd
            continue
        group: dict[str, Any] = {"hooks": [{"type": "command", "command": cmd}]}
        if event in MATCHERS:
            group = {"matcher": MATCHERS[event], **group}
        groups.append(group)


def remove_hooks(data: Any) -> None:
    """Drop every hook entry of ours; containers that only held ours go too."""
    if not isinstance(data, dict) or not isinstance(data.get("hooks"), dict):
        return
    hooks = data["hooks"]
    removed = False
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = []
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if isinstance(inner, list) and any(_ours(h) for h in inner):
                inner = [h for h in inner if not _ours(h)]
                if not inner:
                    continue
                group = {**group, "hooks": inner}
            kept.append(group)
        if kept != groups:
            removed = True
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
    if removed and not hooks:
        del data["hooks"]


def install(*, dry_run: bool = False, options: dict[str, Any] | None = None
            ) -> list[FileChange | str]:
    """Copy the hook, add it to Claude Code's settings, and with ``skill`` the skill.

    ``options``: ``skill`` (a bool, or the strings ``true``/``false`` the CLI's ``--option
    skill=true`` sends). Any other option, or another value, raises :class:`SettingsError`
    (the host answers ``integration_install_failed`` with its message) before anything is
    written.
    """
    options = dict(options or {})
    skill = SKILL_VALUES.get(str(options.pop("skill", False)).lower())
    if options or skill is None:
        unknown = ", ".join(sorted(options)) or "skill"
        raise SettingsError(f"unknown option or value: {unknown}; the claude integration "
                            "takes skill=true|false")
    changes: list[FileChange | str] = [edit_json(settings_path(), add_hooks, dry_run=dry_run)]
    for name, mode in HOOK_FILES.items():
        changes.append(write_text(hook_dir() / name, _data(f"hooks/{name}"), mode=mode,
                                  dry_run=dry_run))
    if skill:
        changes.append(write_text(skill_path(), _data("skills/cmux/SKILL.md"), dry_run=dry_run))
    return changes


def uninstall(*, dry_run: bool = False) -> list[FileChange | str]:
    """Remove our hook entries, the copied hook, and the skill if it is as installed."""
    changes: list[FileChange | str] = []
    if settings_path().exists():
        changes.append(edit_json(settings_path(), remove_hooks, dry_run=dry_run))
    for name in HOOK_FILES:
        changes.append(remove_file(hook_dir() / name, dry_run=dry_run))
    skill = skill_path()
    if skill.exists():
        if skill.read_text(encoding="utf-8", errors="replace") == _data("skills/cmux/SKILL.md"):
            changes.append(remove_file(skill, dry_run=dry_run))
        else:
            changes.append(f"{skill}: kept (changed since it was installed)")
    if not dry_run:
        _remove_empty_dirs(hook_dir(), skill.parent)
    return changes


def _remove_empty_dirs(*dirs: Path) -> None:
    """Remove each directory if nothing but the lock files of our edits and the hook's
    compiled form is left in it."""
    for directory in dirs:
        with contextlib.suppress(OSError):
            for lock in directory.glob(".*.cmux-lock"):
                lock.unlink()
            shutil.rmtree(directory / "__pycache__", ignore_errors=True)
            directory.rmdir()


def status() -> dict[str, Any]:
    """``installed`` when the hook is in place and every event runs it."""
    hooked: list[str] = []
    error = None
    try:
        data = json.loads(settings_path().read_text(encoding="utf-8") or "{}")
        hooks = data.get("hooks", {}) if isinstance(data, dict) else {}
        hooked = [e for e in EVENTS if isinstance(hooks.get(e), list) and any(
            _ours(h) for g in hooks[e] if isinstance(g, dict) for h in g.get("hooks", []))]
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as exc:
        error = f"{settings_path()}: {exc}"
    files = all((hook_dir() / name).is_file() for name in HOOK_FILES)
    result: dict[str, Any] = {
        "installed": files and len(hooked) == len(EVENTS), "settings": str(settings_path()),
        "hook": str(hook_dir() / "cmux-hook"), "events": hooked,
        "missing_events": [e for e in EVENTS if e not in hooked],
        "skill": skill_path().is_file(), "source": SOURCE}
    if error:
        result["error"] = error
    return result


@hookimpl
def cmux_register_integrations(register: RegisterIntegration) -> None:
    register(AGENT, install=install, uninstall=uninstall, status=status,
             description="Claude Code hooks: session, prompt, tool and permission reports "
                         "(option skill=true installs the cmux skill)",
             source=SOURCE, agent=AGENT, authority="shared")
