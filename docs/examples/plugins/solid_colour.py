"""A graphics source that streams a few frames of one solid colour."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from cmux_core.hookspecs import GraphicsFrame, RegisterGraphicsSource, hookimpl


async def solid(pane_id: str, options: Mapping[str, Any]) -> AsyncIterator[GraphicsFrame]:
    width, height = int(options.get("width", 4)), int(options.get("height", 2))
    pixel = bytes(options.get("rgb", (255, 128, 0)))
    for _ in range(int(options.get("frames", 3))):
        yield {"format": "rgb", "image_width": width, "image_height": height,
               "data": pixel * (width * height)}


@hookimpl
def cmux_register_graphics_sources(register: RegisterGraphicsSource) -> None:
    register("solid", solid, description="frames of one colour (options: width, height, rgb)")
