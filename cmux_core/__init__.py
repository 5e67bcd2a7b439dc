"""cmux_core: a headless terminal multiplexer for AI coding agents.

The public surface: :class:`Client` and :class:`AsyncClient` to talk to a server,
:class:`CmuxError` for the errors they raise, and :data:`hookimpl` to write plugins.

Each name is imported when it is first used, so ``import cmux_core.cli.main`` (every
``cmux`` command) does not pay for pydantic and pluggy, which only plugins need.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cmux_core.client import AsyncClient, Client
    from cmux_core.errors import CmuxError
    from cmux_core.hookspecs import hookimpl

__all__ = ["AsyncClient", "Client", "CmuxError", "__version__", "hookimpl"]

_HOMES = {"AsyncClient": "cmux_core.client", "Client": "cmux_core.client",
          "CmuxError": "cmux_core.errors", "hookimpl": "cmux_core.hookspecs",
          "__version__": "cmux_core.version"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'cmux_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
