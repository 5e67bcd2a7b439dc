"""cmux-status-card: a pane graphics source drawing a card of the pane's agent.

Registered as the graphics source ``status-card`` (plugin id ``cmux-status-card``). Attached
to a pane (``pane.graphics.attach_source {"pane_id": ..., "source": "status-card"}``), it
yields a PNG card showing the pane's agent, its state, how long it has been in that state
and its reported tokens, coloured by state. A new card is drawn as soon as an event about
the pane changes the agent, its state or its tokens (checked when an event about the pane
arrives, and at least once a second), and every ``interval`` seconds for the time in
state; otherwise it yields ``None`` ("nothing new").

The pane is read with ``pane.get`` over the server's own socket (the path comes with
``cmux_startup``). Cards are drawn with Pillow on a worker thread.

Options: ``width`` (pixels, 160 to 1024, default 320), ``interval`` (seconds between
refreshes of the time in state, 0.2 to 60, default 1).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from cmux_core.hookspecs import GraphicsFrame, RegisterGraphicsSource, hookimpl

__version__ = "0.1.0"

COLOURS = {"idle": (46, 125, 50), "working": (21, 101, 192), "blocked": (198, 40, 40),
           "done": (245, 124, 0), "unknown": (84, 84, 84)}
"""Card background per agent state."""
LINE_PX = 16
PAD_PX = 8

_socket_path: str | None = None
_wakers: dict[str, set[asyncio.Event]] = {}


@dataclass(frozen=True, slots=True)
class Card:
    """What one card shows."""

    agent: str
    state: str
    age_s: int
    tokens: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of_pane(cls, pane: Mapping[str, Any], now: float) -> Card:
        """The card of a ``pane.get`` pane at unix time ``now``."""
        changed = pane.get("status_changed_at")
        age = int(now - changed) if isinstance(changed, int | float) else 0
        tokens = pane.get("tokens")
        pairs = tuple(sorted((str(k), str(v)) for k, v in tokens.items())) \
            if isinstance(tokens, Mapping) else ()
        return cls(str(pane.get("agent") or "no agent"), str(pane.get("agent_status") or
                                                             "unknown"), max(0, age), pairs)

    def facts(self) -> tuple[str, str, tuple[tuple[str, str], ...]]:
        """Everything but the time in state: a change here draws a new card at once."""
        return self.agent, self.state, self.tokens

    def lines(self) -> list[str]:
        return [self.agent, f"{self.state} for {_duration(self.age_s)}",
                *(f"{key}: {value}" for key, value in self.tokens)]


def _duration(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s"
    return f"{seconds // 3600}h {seconds // 60 % 60:02d}m"


def render(card: Card, width: int = 320) -> bytes:
    """The card as PNG bytes: ``width`` pixels wide, one line per fact."""
    # Imported when the first card is drawn, so loading the plugin stays quick.
    from PIL import Image, ImageDraw, ImageFont
    lines = card.lines()
    height = PAD_PX * 2 + LINE_PX * len(lines)
    image = Image.new("RGB", (width, height), COLOURS.get(card.state, COLOURS["unknown"]))
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default()
    for n, text in enumerate(lines):
        draw.text((PAD_PX, PAD_PX + n * LINE_PX), text, fill=(255, 255, 255), font=font)
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def _option(options: Mapping[str, Any], name: str, default: float, low: float,
            high: float) -> float:
    value = options.get(name, default)
    if not isinstance(value, int | float) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"status-card option {name} must be a number from {low:g} to {high:g}")
    return float(value)


async def status_card(pane_id: str, options: Mapping[str, Any]
                      ) -> AsyncIterator[GraphicsFrame | None]:
    """Cards of ``pane_id`` until the pane goes (then the source ends)."""
    width = int(_option(options, "width", 320, 160, 1024))
    interval = _option(options, "interval", 1.0, 0.2, 60.0)
    if _socket_path is None:
        raise RuntimeError("status-card needs the server's socket (cmux_startup gives it)")
    reader, writer = await asyncio.open_unix_connection(_socket_path)
    wake = asyncio.Event()
    _wakers.setdefault(pane_id, set()).add(wake)
    try:
        shown: Card | None = None
        drawn_at = 0.0
        while True:
            wake.clear()
            writer.write(json.dumps({"id": 1, "method": "pane.get",
                                     "params": {"pane_id": pane_id}}).encode() + b"\n")
            reply = json.loads(await reader.readline())
            if not reply.get("ok"):
                return  # the pane is gone
            card = Card.of_pane(reply["result"]["pane"], time.time())
            now = time.monotonic()
            if shown is not None and card.facts() == shown.facts() and now - drawn_at < interval:
                yield None
            else:
                data = await asyncio.to_thread(render, card, width)
                shown, drawn_at = card, now
                yield {"format": "png", "image_width": width,
                       "image_height": PAD_PX * 2 + LINE_PX * len(card.lines()), "data": data}
            # Each frame is a plugin call under the host's budget: never wait long for one.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(interval, 1.0)):
                    await wake.wait()
    finally:
        _wakers.get(pane_id, set()).discard(wake)
        if not _wakers.get(pane_id):
            _wakers.pop(pane_id, None)
        writer.close()


@hookimpl
def cmux_register_graphics_sources(register: RegisterGraphicsSource) -> None:
    register("status-card", status_card,
             description="the pane's agent, state, time in state and tokens (options: width, "
                         "interval)")


@hookimpl
async def cmux_startup(socket_path: str | None) -> None:
    # async: on the plugin's loop, where its sources and event wake-ups run too
    global _socket_path
    _socket_path = socket_path


@hookimpl
async def cmux_on_event(kind: str, data: Mapping[str, Any]) -> None:
    pane_id = data.get("pane_id")
    if isinstance(pane_id, str):
        for wake in _wakers.get(pane_id, ()):
            wake.set()
