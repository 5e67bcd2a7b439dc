"""Where a plugin's code runs: ``thread`` (in the server) or ``process`` (a process of its own).

Decided at each load, first match wins:

1. ``config.toml``: ``[plugins] process = [ids]`` or ``thread = [ids]`` (a plugin id or a
   distribution name);
2. the plugin's own declaration, read without running it: a loose or linked ``.py`` file's
   top-level ``CMUX_ISOLATION = "process"`` (or ``"thread"``), a linked distribution's
   ``[tool.cmux] isolation`` in its ``pyproject.toml``; an installed distribution cannot
   declare one (configure it);
3. ``[plugins] isolation`` (default ``thread``) for every other plugin.
"""

from __future__ import annotations

import ast
import tomllib
from typing import TYPE_CHECKING

from cmux_core.plugin_host.loader import PluginSource
from cmux_core.plugin_host.record import Isolation

if TYPE_CHECKING:
    from cmux_core.config import Settings

__all__ = ["DECLARATION", "declared_isolation", "isolation_of"]

DECLARATION = "CMUX_ISOLATION"
"""The top-level name a plugin file declares its isolation with."""


def isolation_of(source: PluginSource, settings: Settings) -> Isolation:
    """The isolation ``source`` loads with under ``settings`` (see the module docstring)."""
    names = {source.plugin_id, source.dist_name}
    for choice in ("process", "thread"):
        chosen: list[str] = settings.plugin_isolation.get(choice, [])
        if names & set(chosen):
            return _checked(choice) or "thread"
    return declared_isolation(source) or _checked(settings.plugin_default_isolation) or "thread"


def declared_isolation(source: PluginSource) -> Isolation | None:
    """What the plugin declares for itself, None when it declares nothing usable."""
    try:
        if source.kind == "file" and source.path is not None:
            tree = ast.parse(source.path.read_bytes(), str(source.path))
            for node in tree.body:
                if isinstance(node, ast.Assign | ast.AnnAssign):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    if any(isinstance(t, ast.Name) and t.id == DECLARATION for t in targets) \
                            and isinstance(node.value, ast.Constant):
                        return _checked(node.value.value)
        elif source.kind == "package" and source.path is not None:
            tool = tomllib.loads(source.path.read_text()).get("tool", {})
            cmux = tool.get("cmux", {}) if isinstance(tool, dict) else {}
            return _checked(cmux.get("isolation") if isinstance(cmux, dict) else None)
    except (OSError, SyntaxError, ValueError):
        return None  # the import reports what is wrong with the file
    return None


def _checked(value: object) -> Isolation | None:
    if value == "process":
        return "process"
    if value == "thread":
        return "thread"
    return None
