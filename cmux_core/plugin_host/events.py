"""The events the plugin host publishes about its plugins.

Each carries the plugin's record; its wire data (``plugin_id`` and the ``plugin.list``
entry) is read from the record when the event is published (``cmux_core.api.wire``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from cmux_core.events import Event, Notice
from cmux_core.plugin_host.record import Plugin

__all__ = [
    "PluginError", "PluginEvent", "PluginLoaded", "PluginRegistrationsChanged",
    "PluginUnloaded",
]


@dataclass(frozen=True, slots=True)
class PluginLoaded(Event):
    kind: ClassVar[str] = "plugin_loaded"
    plugin: Plugin
    reloaded: bool


@dataclass(frozen=True, slots=True)
class PluginUnloaded(Event):
    """``reason``: why (``disabled``, ``unlinked``, ``blocked``, ``replaced``, ...)."""

    kind: ClassVar[str] = "plugin_unloaded"
    plugin: Plugin
    reason: str


@dataclass(frozen=True, slots=True)
class PluginError(Event):
    """A hook of ``plugin`` failed (``blocked``: and the plugin was blocked for it)."""

    kind: ClassVar[str] = "plugin_error"
    plugin: Plugin
    hook: str
    message: str
    blocked: bool


PluginEvent = PluginLoaded | PluginUnloaded | PluginError


@dataclass(frozen=True, slots=True)
class PluginRegistrationsChanged(Notice):
    """What ``plugin_id`` registers changed: ``kinds`` names the tables touched
    (``manifests``, ``view_sorts``, ...), so detection or views can rebuild."""

    plugin_id: str
    kinds: frozenset[str]
