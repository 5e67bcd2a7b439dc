"""The events the plugin host publishes about its plugins.

Each carries the plugin's record; its wire data (``plugin_id`` and the ``plugin.list``
entry) is read from the record when the event is published (``cmux_core.api.wire``).
"""

from __future__ import annotations

from cmux_core.events import Event, Notice, event, notice
from cmux_core.plugin_host.record import Plugin

__all__ = [
    "PluginError", "PluginEvent", "PluginLoaded", "PluginRegistrationsChanged",
    "PluginUnloaded",
]


@event("plugin_loaded")
class PluginLoaded(Event):
    plugin: Plugin
    reloaded: bool


@event("plugin_unloaded")
class PluginUnloaded(Event):
    """``reason``: why (``disabled``, ``unlinked``, ``blocked``, ``replaced``, ...)."""

    plugin: Plugin
    reason: str


@event("plugin_error")
class PluginError(Event):
    """A hook of ``plugin`` failed (``blocked``: and the plugin was blocked for it)."""

    plugin: Plugin
    hook: str
    message: str
    blocked: bool


PluginEvent = PluginLoaded | PluginUnloaded | PluginError


@notice
class PluginRegistrationsChanged(Notice):
    """What ``plugin_id`` registers changed: ``kinds`` names the tables touched
    (``manifests``, ``view_sorts``, ...), so detection or views can rebuild."""

    plugin_id: str
    kinds: frozenset[str]
