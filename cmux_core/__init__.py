"""cmux_core: a headless terminal multiplexer for AI coding agents."""

from __future__ import annotations

from .hookspecs import hookimpl

__version__ = "0.1.0"

__all__ = ["__version__", "hookimpl"]
