"""Socket method handlers, one module (or package) per method family, each module with its
own ``methods`` table. Helpers several families use live in :mod:`.shared`.

:func:`register_core_methods` merges them all into the server's table.
"""

from __future__ import annotations

from cmux_core.api.dispatch import MethodTable
from cmux_core.api.methods import (
    agent,
    cmux_v2_catalog,
    events,
    integration,
    layout,
    notification,
    pane,
    plugin,
    server,
    surface,
    system,
    tab,
    window,
    workspace,
)

CORE_MODULES = (server, workspace, tab, *pane.MODULES, layout, system, plugin, agent, window,
                integration, surface, cmux_v2_catalog, notification, events)


def register_core_methods(table: MethodTable) -> None:
    """Add every core method to ``table``; ValueError if a name is already taken."""
    for module in CORE_MODULES:
        table.merge(module.methods)
