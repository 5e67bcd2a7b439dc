"""The switch in front of every pane graphics method (``pane.graphics.*``,
``attach.graphics``)."""

from __future__ import annotations

from cmux_core.config import Settings
from cmux_core.errors import CmuxError
from cmux_core.graphics.layers import GraphicsBook


def graphics_book(settings: Settings, book: GraphicsBook) -> GraphicsBook:
    """``book`` when pane graphics are on; ``feature_disabled`` otherwise."""
    if not settings.kitty_graphics:
        raise CmuxError("feature_disabled", "pane graphics are off: set [experimental] "
                        "kitty_graphics = true in config.toml or "
                        "CMUX_EXPERIMENTAL_KITTY_GRAPHICS=1 for the server")
    return book
