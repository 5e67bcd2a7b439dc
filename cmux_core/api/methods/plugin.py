"""plugin.* methods: list, enable, disable, link and unlink plugins of the running server.

Result shapes follow the herdr Local API (``plugin_list {plugins}``, ``plugin_enabled
{plugin}``, ``plugin_unlinked {plugin_id, removed}``); each plugin entry is
:meth:`cmux_core.plugin_host.host.Plugin.to_wire`. The host is ``call.ctx.plugins``.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from cmux_core.api.context import Call
from cmux_core.api.dispatch import MethodTable, Result, services
from cmux_core.hookspecs import Params
from cmux_core.plugin_host.host import PluginHost


@services
class PluginServices:
    plugins: PluginHost


methods = MethodTable()


def _host(call: Call[PluginServices]) -> PluginHost:
    return call.ctx.plugins


class PluginListParams(Params):
    plugin_id: str | None = None


class PluginIdParams(Params):
    plugin_id: str = Field(min_length=1)


class PluginLinkParams(Params):
    path: str = Field(min_length=1)
    enabled: bool = True
    source: dict[str, Any] | None = None

    @field_validator("path")
    @classmethod
    def _no_nul(cls, value: str) -> str:
        if "\0" in value:
            raise ValueError("must not contain NUL")
        return value


@methods.method("plugin.list", PluginListParams)
async def plugin_list(call: Call[PluginServices], p: PluginListParams) -> Result:
    """Every known plugin (or just ``plugin_id``) with source, hooks, registrations, errors."""
    host = _host(call)
    plugins = [host.get(p.plugin_id)] if p.plugin_id else host.plugins()
    return {"type": "plugin_list", "plugins": [plugin.to_wire() for plugin in plugins]}


@methods.method("plugin.enable", PluginIdParams)
async def plugin_enable(call: Call[PluginServices], p: PluginIdParams) -> Result:
    """Enable and load a plugin (a blocked one is retried); remembered across restarts."""
    plugin = await _host(call).enable(p.plugin_id)
    return {"type": "plugin_enabled", "plugin": plugin.to_wire()}


@methods.method("plugin.disable", PluginIdParams)
async def plugin_disable(call: Call[PluginServices], p: PluginIdParams) -> Result:
    """Unload a plugin and withdraw its registrations; remembered across restarts."""
    plugin = await _host(call).disable(p.plugin_id)
    return {"type": "plugin_disabled", "plugin": plugin.to_wire()}


@methods.method("plugin.link", PluginLinkParams)
async def plugin_link(call: Call[PluginServices], p: PluginLinkParams) -> Result:
    """Load the plugin(s) at an absolute ``path`` now and on every start."""
    plugins = await _host(call).link(p.path, enabled=p.enabled)
    wire = [plugin.to_wire() for plugin in plugins]
    return {"type": "plugin_linked", "plugin": wire[0] if wire else None, "plugins": wire}


class PluginRescanParams(Params):
    pass


@methods.method("plugin.rescan", PluginRescanParams)
async def plugin_rescan(call: Call[PluginServices], p: PluginRescanParams) -> Result:
    """Load the plugins of distributions installed since the server started (and reload
    upgraded ones, drop uninstalled ones): what ``cmux plugin install`` calls."""
    host = _host(call)
    changes = await host.rescan()
    return {"type": "plugin_rescanned", **changes,
            "plugins": [plugin.to_wire() for plugin in host.plugins()]}


@methods.method("plugin.unlink", PluginIdParams)
async def plugin_unlink(call: Call[PluginServices], p: PluginIdParams) -> Result:
    """Forget the link that provides ``plugin_id``; ``removed`` is False when not linked."""
    removed = await _host(call).unlink(p.plugin_id)
    return {"type": "plugin_unlinked", "plugin_id": p.plugin_id, "removed": bool(removed),
            "plugin_ids": removed}
