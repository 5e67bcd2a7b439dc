"""Start a background task when the server starts and stop it on shutdown."""

from __future__ import annotations

import asyncio

from cmux_core.hookspecs import hookimpl

BEATS: list[int] = []
_TASK: list[asyncio.Task[None]] = []


async def _beat() -> None:
    while True:
        BEATS.append(len(BEATS))
        await asyncio.sleep(0.01)


@hookimpl
async def cmux_startup(plugin_id: str) -> None:
    _TASK.append(asyncio.create_task(_beat(), name=f"{plugin_id}-heartbeat"))


@hookimpl
async def cmux_shutdown() -> None:
    while _TASK:
        _TASK.pop().cancel()
