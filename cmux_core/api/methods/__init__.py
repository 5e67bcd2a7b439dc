"""Socket method handlers, one module per domain, each with its own ``methods`` table.

:func:`register_core_methods` merges them into the server's table. A module that
cannot be imported (an optional subsystem) is skipped and logged.
"""

from __future__ import annotations

import importlib
import logging

from cmux_core.api.dispatch import MethodTable

log = logging.getLogger(__name__)

CORE_MODULES = ("server", "workspace", "pane", "layout", "system", "plugin", "views", "detect",
                "report", "agent")


def register_core_methods(table: MethodTable) -> None:
    for name in CORE_MODULES:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            continue
        table.merge(module.methods)
