"""The version of cmux_core, read from the installed distribution's metadata, so that
``pyproject.toml`` is the one place it is written."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "cmux-core"

try:
    __version__ = version(DISTRIBUTION)
except PackageNotFoundError:
    # Imported from a source tree that was never installed (no metadata to read).
    __version__ = "0+unknown"
