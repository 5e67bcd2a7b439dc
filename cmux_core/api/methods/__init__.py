"""Socket method handlers, one module (or package) per method family, each module with its
own ``methods`` table. Helpers several families use live in :mod:`.shared`.

:func:`register_core_methods` merges them all into the server's table.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import ModuleType

from cmux_core.api.dispatch import MethodTable
from cmux_core.api.methods import (
    agent,
    cmux_v2_catalog,
    events,
    herdr_extras,
    integration,
    layout,
    machine,
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

CORE_MODULES: tuple[tuple[ModuleType, type | None], ...] = (
    (server, server.ServerServices), (workspace, workspace.WorkspaceServices),
    (tab, tab.TabServices), (pane.lifecycle, pane.lifecycle.LifecycleServices),
    (pane.io, pane.io.PaneIoServices), (pane.arrangement, pane.arrangement.ArrangementServices),
    (pane.reports, pane.reports.ReportServices), (pane.graphics, pane.graphics.GraphicsServices),
    (pane.attach, pane.attach.AttachServices), (layout, layout.LayoutServices),
    (system, system.SystemServices), (plugin, plugin.PluginServices),
    (agent, agent.AgentServices), (window, window.WindowServices),
    (integration, integration.IntegrationServices), (surface, surface.SurfaceServices),
    (cmux_v2_catalog, None), (notification, notification.NotificationServices),
    (events, events.EventServices), (machine, machine.MachineServices),
    (herdr_extras, None))
"""Each methods module with the type of the context its handlers use (None: none)."""


def register_core_methods(table: MethodTable, contexts: Iterable[object] = ()) -> None:
    """Add every core method to ``table``, each module's bound to the one of ``contexts``
    that is of its context type. Without contexts (the schema) nothing is bound; with them,
    a module whose context is missing, or a context no module takes, is a ValueError, as is
    a method name already taken."""
    given = {type(context): context for context in contexts}
    binding = bool(given)
    for module, kind in CORE_MODULES:
        context = given.pop(kind, None) if kind is not None else None
        if binding and kind is not None and context is None:
            raise ValueError(f"no context for {module.__name__}")
        table.merge(module.methods, context=context)
    if given:
        raise ValueError(f"contexts no methods module takes: {sorted(map(str, given))}")
