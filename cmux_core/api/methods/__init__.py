"""Socket method handlers, one module per domain, each with its own ``methods`` table.

:func:`register_core_methods` merges them all into the server's table.
"""

from __future__ import annotations

from cmux_core.api.dispatch import MethodTable
from cmux_core.api.methods import (
    agent,
    attach,
    cmux_catalog,
    detect,
    graphics,
    integration,
    layout,
    notification,
    pane,
    pane_events,
    plugin,
    report,
    saved_layouts,
    server,
    surface,
    system,
    views,
    window,
    workspace,
)

CORE_MODULES = (server, workspace, pane, layout, system, plugin, views, detect, report, agent,
                attach, window, saved_layouts, integration, surface, cmux_catalog,
                notification, graphics, pane_events)


def register_core_methods(table: MethodTable) -> None:
    """Add every core method to ``table``; ValueError if a name is already taken."""
    for module in CORE_MODULES:
        table.merge(module.methods)
