"""Plugin graphics sources feeding layers: the server pulls, the source yields.

A plugin registers a source with ``cmux_register_graphics_sources``; attaching it to a pane
layer (:meth:`SourceRunner.attach`) calls its ``open(pane_id, options)`` and then pulls one
frame at a time from the async iterator it returned. Each frame replaces the layer's image,
so nothing queues: a source is asked for its next frame only once the last one is stored,
and attached clients take only the latest image of a layer (a slow client skips frames).

Every pull is a plugin call under the host's time budget (see
:meth:`~cmux_core.plugin_host.host.PluginHost.invoke`). A source may yield ``None`` to say
"nothing new" and keep its place. One that raises, yields something that is not a valid
frame, or takes longer than the budget for one frame is stopped, recorded against its
plugin, and its layer cleared. One that ends normally leaves its last image in a layer
anyone may then change. The iterator is closed when the source is detached, its layer is
reclaimed, its pane closes or its plugin is unloaded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from cmux_core.errors import CmuxError
from cmux_core.graphics.layers import (
    BYTES_PER_PIXEL,
    STREAM_MAX_BYTES,
    GraphicsBook,
    Image,
    Layer,
    Placement,
)
from cmux_core.model.tree import Pane
from cmux_core.plugin_host.host import PluginHost
from cmux_core.plugin_host.registry import GraphicsSource

log = logging.getLogger(__name__)

_END = object()
CLOSE_TIMEOUT_S = 2.0
"""How long a source's iterator may take to close before it is abandoned."""


def frame_image(frame: object) -> tuple[Image, Placement | None]:
    """The image (and placement, if the frame has one) of a frame a source yielded;
    ValueError naming what is wrong otherwise."""
    if not isinstance(frame, Mapping):
        raise ValueError(f"a frame must be a mapping, not {type(frame).__name__}")
    fmt, width, height, data = (frame.get(k) for k in
                                ("format", "image_width", "image_height", "data"))
    if fmt not in BYTES_PER_PIXEL:
        raise ValueError(f"frame format must be one of {', '.join(BYTES_PER_PIXEL)}, "
                         f"not {fmt!r}")
    if type(width) is not int or type(height) is not int:
        raise ValueError("frame image_width and image_height must be integers")
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ValueError("frame data must be bytes")
    placement = frame.get("placement")
    place = None
    if placement is not None:
        if not isinstance(placement, Mapping) or not all(
                type(placement.get(k, 0)) is int for k in
                ("viewport_col", "viewport_row", "grid_cols", "grid_rows")):
            raise ValueError("frame placement must map viewport_col, viewport_row, "
                             "grid_cols and grid_rows to integers")
        place = Placement(placement.get("viewport_col", 0), placement.get("viewport_row", 0),
                          max(0, placement.get("grid_cols", 0)),
                          max(0, placement.get("grid_rows", 0)))
    return Image(str(fmt), width, height, bytes(data)), place


@dataclass(slots=True)
class Feed:
    """One source attached to one layer."""

    source: GraphicsSource
    pane: Pane
    layer: Layer
    owner: str
    placement: Placement
    task: asyncio.Task[None] | None = None
    ended: str | None = None
    """Why the feed stopped: ``finished``, ``failed``, ``detached``, ``closed``."""
    options: dict[str, Any] = field(default_factory=dict)


class SourceRunner:
    """Attaches plugin sources to layers and runs them: the feeding on the server loop, each
    pull of a frame on the plugin's own loop."""

    def __init__(self, book: GraphicsBook, plugins: PluginHost) -> None:
        self.book = book
        self.plugins = plugins
        self._feeds: dict[tuple[str, str], Feed] = {}

    def feeds(self) -> list[Feed]:
        return list(self._feeds.values())

    def attach(self, pane: Pane, name: str, layer_id: str, options: dict[str, Any],
               placement: Placement) -> Feed:
        """Start pulling ``name``'s frames into the layer.

        ``graphics_source_not_found`` for an unknown source; the layer's errors
        (``stream_conflict``, ``layer_limit``) when it cannot be claimed.
        """
        source = self.plugins.graphics_sources().get(name)
        if source is None:
            known = ", ".join(sorted(self.plugins.graphics_sources())) or "none"
            raise CmuxError("graphics_source_not_found", f"no graphics source {name!r} "
                            f"(registered: {known})", {"source": name})
        label = f"{source.plugin_id}/{source.name}"
        owner = f"source:{label}"
        layer = self.book.claim(pane, layer_id, owner, source=label)
        feed = Feed(source, pane, layer, owner, placement, options=options)
        self._feeds[(pane.key, layer_id)] = feed
        feed.task = asyncio.get_running_loop().create_task(self._run(feed))
        return feed

    def detach(self, pane: Pane, layer_id: str) -> bool:
        """Stop the layer's source and remove the layer; False when none feeds it."""
        feed = self._feeds.get((pane.key, layer_id))
        if feed is None:
            return False
        self._stop(feed, "detached")
        self.book.release(pane, layer_id, feed.owner)
        return True

    def plugin_unloaded(self, plugin_id: str) -> None:
        """Stop every source of the plugin and remove their layers."""
        for feed in [f for f in self._feeds.values() if f.source.plugin_id == plugin_id]:
            self._stop(feed, "closed")
            self.book.release(feed.pane, feed.layer.layer_id, feed.owner)

    async def stop(self) -> None:
        """Stop every source (server shutdown) and wait for their iterators to close."""
        feeds = list(self._feeds.values())
        for feed in feeds:
            self._stop(feed, "closed")
        tasks = [f.task for f in feeds if f.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=CLOSE_TIMEOUT_S)

    def layer_reclaimed(self, layer: Layer) -> None:
        """``layer`` was taken from its owner: a feed into it stops."""
        feed = self._feeds.get((layer.pane_key, layer.layer_id))
        if feed is not None and feed.layer is layer:
            self._stop(feed, "closed")

    def _stop(self, feed: Feed, reason: str) -> None:
        if self._feeds.get((feed.pane.key, feed.layer.layer_id)) is feed:
            del self._feeds[(feed.pane.key, feed.layer.layer_id)]
        if feed.ended is None:
            feed.ended = reason
        if feed.task is not None and feed.task is not asyncio.current_task():
            feed.task.cancel()

    async def _run(self, feed: Feed) -> None:
        source = feed.source
        label = f"graphics source {source.name}"
        iterator: AsyncIterator[Any] | None = None
        try:
            opened = await self.plugins.invoke(source.plugin_id, label, source.open,
                                               feed.pane.id, dict(feed.options))
            if not hasattr(opened, "__anext__"):
                raise CmuxError("plugin_failed", f"{label} did not return an async iterator")
            iterator = opened

            async def next_frame() -> Any:
                assert iterator is not None
                try:
                    frame = await iterator.__anext__()
                except StopAsyncIteration:
                    return _END
                return None if frame is None else frame_image(frame)

            while True:
                got = await self.plugins.invoke(source.plugin_id, label, next_frame)
                if got is _END:
                    feed.ended = "finished"
                    break
                if got is None:
                    continue
                image, placement = got
                if placement is not None:
                    feed.placement = placement
                self.book.set(feed.pane, feed.layer.layer_id, image, feed.placement,
                              limit=STREAM_MAX_BYTES, owner=feed.owner)
                await asyncio.sleep(0)  # one frame at a time, others served in between
        except asyncio.CancelledError:
            pass
        except CmuxError as exc:
            feed.ended = feed.ended or "failed"
            log.warning("%s of plugin %s stopped on pane %s: %s", label, source.plugin_id,
                        feed.pane.id, exc.message, extra={"cmux_plugin": source.plugin_id})
        finally:
            if self._feeds.get((feed.pane.key, feed.layer.layer_id)) is feed:
                del self._feeds[(feed.pane.key, feed.layer.layer_id)]
                if feed.ended == "finished":
                    self.book.disown(feed.layer)
                else:
                    feed.ended = feed.ended or "failed"
                    self.book.release(feed.pane, feed.layer.layer_id, feed.owner)
            if iterator is not None:
                await self._close(source, iterator)

    async def _close(self, source: GraphicsSource, iterator: AsyncIterator[Any]) -> None:
        """Close ``iterator`` where it runs, on its plugin's loop; a plugin that is gone
        closed its loop, and the iterator with it."""
        aclose = getattr(iterator, "aclose", None)
        if aclose is None:
            return
        with contextlib.suppress(Exception, asyncio.CancelledError):
            label = f"graphics source {source.name} close"
            await asyncio.wait_for(self.plugins.invoke(source.plugin_id, label, aclose),
                                   CLOSE_TIMEOUT_S)
