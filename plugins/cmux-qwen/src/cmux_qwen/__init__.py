"""cmux-qwen: Qwen Code's own hooks report to the cmux pane Qwen Code runs in.

``cmux integration install qwen`` (the integration ``qwen``, plugin id ``cmux-qwen``):

* copies ``cmux-hook`` (with its Python body) to ``$XDG_CONFIG_HOME/cmux/hooks/qwen/``;
* adds one command hook running it to each event in :data:`EVENTS` of Qwen Code's user
  settings, ``~/.qwen/settings.json`` (``$QWEN_HOME/settings.json`` when set), keeping
  every other key and hook as it was.

Qwen Code's hook payloads have Claude Code's shape, and the hook reads them the same way.
Uninstall removes exactly those hook entries (an event, or ``hooks``, left empty by that is
removed too) and the copied hook. The reports use source ``cmux:qwen`` with the ``shared``
authority; see ``docs/agents.md``.
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

HOOK_FILES = {"cmux-hook": 0o755, "cmux_hook.py": 0o644}
MARKER = "/cmux/hooks/qwen/cmux-hook"
"""Part of every command this integration installs, wherever the config dir was."""


def qwen_dir() -> Path:
    return Path(os.environ.get("QWEN_HOME") or Path.home() / ".qwen")


def settings_path() -> Path:
    return qwen_dir() / "settings.json"


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


def install(*, dry_run: bool = False) -> list[FileChange | str]:
    """Copy the hook and add it to Qwen Code's settings."""
    changes: list[FileChange | str] = [edit_json(settings_path(), add_hooks, dry_run=dry_run)]
    for name, mode in HOOK_FILES.items():
        changes.append(write_text(hook_dir() / name, _data(f"hooks/{name}"), mode=mode,
                                  dry_run=dry_run))
    return changes


def uninstall(*, dry_run: bool = False) -> list[FileChange | str]:
    """Remove our hook entries and the copied hook."""
    changes: list[FileChange | str] = []
    if settings_path().exists():
        changes.append(edit_json(settings_path(), remove_hooks, dry_run=dry_run))
    for name in HOOK_FILES:
        changes.append(remove_file(hook_dir() / name, dry_run=dry_run))
    if not dry_run:
        _remove_empty_dirs(hook_dir())
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
        "missing_events": [e for e in EVENTS if e not in hooked], "source": SOURCE}
    if error:
        result["error"] = error
    return result


@hookimpl
def cmux_register_integrations(register: RegisterIntegration) -> None:
    register(AGENT, install=install, uninstall=uninstall, status=status,
             description="Qwen Code hooks: session, prompt, tool and permission reports",
             source=SOURCE, agent=AGENT, authority="shared")
