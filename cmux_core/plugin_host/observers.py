"""The observer hooks: each plugin's queue of calls, delivered in order, never blocking.

``cmux_on_event``, ``cmux_on_report_agent`` and ``cmux_on_report_metadata`` are queued per
plugin (the plugin's ``inbox``) and return at once; one task per plugin drains its queue,
calling each hookimpl of the serving version contained (:class:`PluginCaller`). A plugin
is given observer calls only once its ``cmux_startup`` has run: calls queued while it loaded
wait and are delivered after it, in order. A queue at :data:`OBSERVER_QUEUE_LIMIT` drops new
calls until it has drained to half of that; each overflow is warned twice, when it starts
and when it ends (with the count dropped), however long it lasts.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Callable, Mapping
from typing import Any

import pluggy

from cmux_core.plugin_host.calls import PluginCaller
from cmux_core.plugin_host.record import Plugin

__all__ = ["OBSERVER_HOOKS", "OBSERVER_QUEUE_LIMIT", "ObserverQueues"]

OBSERVER_HOOKS = ("cmux_on_report_agent", "cmux_on_report_metadata", "cmux_on_event")
OBSERVER_QUEUE_LIMIT = 1000
"""Observer calls one plugin may have waiting before new ones are dropped."""
OBSERVER_RESUME = OBSERVER_QUEUE_LIMIT // 2
"""Once dropping, a plugin's queue takes calls again when no more than this many wait."""


class ObserverQueues:
    """Queues and delivers observer calls for the plugins of ``plugins``.

    ``plugins`` is the host's live table of plugin records; ``impls(module, hook)`` lists the
    hookimpls of one loaded version. Runs on the server loop; queueing outside a running
    loop does nothing.
    """

    def __init__(self, plugins: Mapping[str, Plugin], *,
                 impls: Callable[[object, str], list[pluggy.HookImpl]],
                 caller: PluginCaller) -> None:
        self._plugins = plugins
        self._impls = impls
        self._caller = caller

    def on_event(self, kind: str, data: Mapping[str, Any]) -> None:
        """Queue ``cmux_on_event`` for every observer; returns at once and never raises."""
        if kind == "plugin_error":
            return
        self._fan_out("cmux_on_event", {"kind": kind, "data": types.MappingProxyType(data)})

    def notify_report_agent(self, pane_id: str, report: Mapping[str, Any]) -> None:
        """Queue ``cmux_on_report_agent`` with the accepted ``pane.report_agent`` params."""
        self._fan_out("cmux_on_report_agent", {
            "pane_id": pane_id, "source": str(report.get("source", "")),
            "agent": str(report.get("agent", "")), "state": str(report.get("state", "")),
            "message": report.get("message"), "report": types.MappingProxyType(dict(report)),
        })

    def notify_report_metadata(self, pane_id: str, report: Mapping[str, Any]) -> None:
        """Queue ``cmux_on_report_metadata`` with the accepted ``pane.report_metadata`` params."""
        self._fan_out("cmux_on_report_metadata", {
            "pane_id": pane_id, "source": str(report.get("source", "")),
            "tokens": types.MappingProxyType(dict(report.get("tokens") or {})),
            "report": types.MappingProxyType(dict(report)),
        })

    def kick(self, plugin: Plugin, loop: asyncio.AbstractEventLoop) -> None:
        """Start delivering ``plugin``'s queued calls unless a delivery task is running."""
        if plugin.inbox and (plugin.drain is None or plugin.drain.done()):
            plugin.drain = loop.create_task(self._drain(plugin))

    def discard(self, plugin: Plugin) -> None:
        """Drop ``plugin``'s queued calls and stop its delivery (its version is withdrawn)."""
        if plugin.drain is not None and plugin.drain is not asyncio.current_task():
            plugin.drain.cancel()
        plugin.drain = None
        plugin.inbox.clear()

    def _fan_out(self, hook: str, kwargs: dict[str, Any]) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        for plugin in self._plugins.values():
            if plugin.status != "loaded" or hook not in plugin.hooks:
                continue
            if self._overflowing(plugin):
                plugin.overflow_dropped += 1
                plugin.dropped_calls += 1
                continue
            plugin.inbox.append((hook, kwargs))
            if plugin.started:  # else they wait for its cmux_startup, which kicks them
                self.kick(plugin, loop)

    def _overflowing(self, plugin: Plugin) -> bool:
        """Whether ``plugin``'s queue is dropping calls; warns as an overflow starts and ends."""
        waiting = len(plugin.inbox)
        if not plugin.overflowing:
            if waiting < OBSERVER_QUEUE_LIMIT:
                return False
            plugin.overflowing = True
            plugin.overflow_dropped = 0
            self._caller.warn(plugin, f"observer queue full ({OBSERVER_QUEUE_LIMIT} calls); "
                                      f"dropping calls until it drains to {OBSERVER_RESUME}")
            return True
        if waiting > OBSERVER_RESUME:
            return True
        plugin.overflowing = False
        self._caller.warn(plugin, f"observer queue drained to {waiting}; "
                                  f"{plugin.overflow_dropped} calls were dropped")
        return False

    async def _drain(self, plugin: Plugin) -> None:
        module = plugin.module
        while plugin.inbox and plugin.module is module and module is not None:
            hook, kwargs = plugin.inbox.popleft()
            for impl in self._impls(module, hook):
                await self._caller.call_impl(plugin, hook, impl, kwargs)
