"""cmux_core: a headless terminal multiplexer for AI coding agents.

The public surface: :class:`Client` and :class:`AsyncClient` to talk to a server,
:class:`CmuxError` for the errors they raise, and :data:`hookimpl` to write plugins.
"""

from __future__ import annotations

from cmux_core.client import AsyncClient, Client
from cmux_core.errors import CmuxError
from cmux_core.hookspecs import hookimpl

__version__ = "0.1.0"

__all__ = ["AsyncClient", "Client", "CmuxError", "__version__", "hookimpl"]
