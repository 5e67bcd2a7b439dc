"""Image layers over panes: validation, limits, and who may change a layer.

A :class:`GraphicsBook` holds every layer of every pane. A layer is addressed by its pane
and ``layer_id`` and holds at most one image (the latest frame) with its placement. A
layer may be *owned*: by a stream (``owner`` is the stream's owner name and the layer is
live while the connection that opened it stays) or by a plugin graphics source. Only the
owner changes an owned layer; a stale one (its owner gone) is reclaimed by the next call
that touches it.

Limits: :data:`MAX_LAYERS_PER_PANE` layers per pane, :data:`MAX_LAYERS` in the server,
:data:`SET_MAX_BYTES` per inline image, :data:`STREAM_MAX_BYTES` per streamed frame, and
:data:`BUDGET_BYTES` of image data across all layers. A call that would break one changes
nothing.

A frame leased from a file (see :mod:`~cmux_core.graphics.leases`) holds no bytes: its
:class:`Image` carries the :class:`~cmux_core.graphics.leases.Lease` instead and counts
nothing against the budget.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from cmux_core.errors import CmuxError
from cmux_core.graphics.leases import FrameDirectory, Lease
from cmux_core.model.tree import Pane

log = logging.getLogger(__name__)

MAX_LAYERS_PER_PANE = 16
MAX_LAYERS = 64
SET_MAX_BYTES = 512 * 1024
"""Image bytes one ``pane.graphics.set`` may carry (after base64 decoding)."""
STREAM_MAX_BYTES = 16 * 1024 * 1024
"""Image bytes one streamed frame may carry."""
BUDGET_BYTES = 64 * 1024 * 1024
"""Image bytes held across all layers of the server."""
DEFAULT_LAYER = "primary"
PROGRAM_OWNER = "program"
"""The owner of the layers images drawn by a pane's own program become; no client stream
may take this name."""

BYTES_PER_PIXEL = {"png": 0, "rgb": 3, "rgba": 4, "bgra": 4}
"""The formats a layer takes; 0: compressed, no length contract."""
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_LAYER_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")


def check_layer_id(layer_id: str) -> str:
    """``layer_id`` when it is 1 to 64 of ``A-Z a-z 0-9 . _ : -``; else ``invalid_layer_id``."""
    if not _LAYER_ID.fullmatch(layer_id):
        raise CmuxError("invalid_layer_id", f"layer_id {layer_id!r} must be 1 to 64 characters "
                        "from A-Z, a-z, 0-9, '.', '_', ':', '-'")
    return layer_id


@dataclass(frozen=True, slots=True)
class Placement:
    """Where an image sits over the pane, in cells: its top-left corner relative to the
    pane's viewport (may be negative) and the cells it spans (0: the image's own size).

    Images a program draws may say more, as the kitty protocol lets them: ``offset_x`` and
    ``offset_y``, pixels from the top-left cell's corner to the image's; ``source``, the
    part of the image shown (``x, y, width, height`` in its pixels; None: all of it); and
    ``z``, its stacking order (negative: under the text). The API's placement has only
    the four cell fields (:meth:`to_dict`); these go to attached clients that draw the
    image (:meth:`drawing`).
    """

    viewport_col: int = 0
    viewport_row: int = 0
    grid_cols: int = 0
    grid_rows: int = 0
    offset_x: int = 0
    offset_y: int = 0
    source: tuple[int, int, int, int] | None = None
    z: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"viewport_col": self.viewport_col, "viewport_row": self.viewport_row,
                "grid_cols": self.grid_cols, "grid_rows": self.grid_rows}

    def drawing(self) -> dict[str, object]:
        """The fields of a ``graphics`` frame that say how to draw beyond the cells:
        ``offset_px`` ``[x, y]``, ``source_px`` ``[x, y, width, height]`` and ``z``, each
        only when set."""
        fields: dict[str, object] = {}
        if self.offset_x or self.offset_y:
            fields["offset_px"] = [self.offset_x, self.offset_y]
        if self.source is not None:
            fields["source_px"] = list(self.source)
        if self.z:
            fields["z"] = self.z
        return fields


@dataclass(frozen=True, slots=True)
class Image:
    format: str
    width: int
    height: int
    data: bytes
    lease: Lease | None = None
    """Set (and ``data`` empty) for a frame held as a file."""


def check_image(image: Image, limit: int) -> Image:
    """``image`` when it is usable, at most ``limit`` bytes: ``invalid_image`` for a bad
    size, empty data, a raw length that is not width x height x bytes per pixel or PNG data
    without the PNG signature; ``image_too_large`` beyond ``limit``."""
    if image.format not in BYTES_PER_PIXEL:
        raise CmuxError("invalid_image", f"format {image.format!r} must be one of "
                        f"{', '.join(BYTES_PER_PIXEL)}")
    if image.width <= 0 or image.height <= 0:
        raise CmuxError("invalid_image", "image_width and image_height must be greater than 0")
    if not image.data:
        raise CmuxError("invalid_image", "the image data is empty")
    if len(image.data) > limit:
        raise CmuxError("image_too_large", f"the image is {len(image.data)} bytes; at most "
                        f"{limit} are taken", {"bytes": len(image.data), "limit": limit})
    bpp = BYTES_PER_PIXEL[image.format]
    if bpp:
        expected = image.width * image.height * bpp
        if expected > limit:
            raise CmuxError("invalid_image", "image dimensions are too large")
        if len(image.data) != expected:
            raise CmuxError("invalid_image", f"{image.format} data of {image.width}x"
                            f"{image.height} must be {expected} bytes, not {len(image.data)}")
    elif not image.data.startswith(PNG_SIGNATURE):
        raise CmuxError("invalid_image", "png data does not start with the PNG signature")
    return image


@dataclass(slots=True)
class Layer:
    """One layer of one pane."""

    pane_key: str
    layer_id: str
    image: Image | None = None
    placement: Placement = field(default_factory=Placement)
    revision: int = 0
    """Raised by every change of image or placement."""
    frames: int = 0
    """Images this layer has shown."""
    owner: str | None = None
    """A stream's owner name, or ``source:<plugin>/<name>`` for a plugin source."""
    client_id: str | None = None
    """The connection that opened the stream (None: opened inside the server)."""
    live: bool = False
    """Whether the owner is still there; a stale owned layer is reclaimed when touched."""
    source: str | None = None
    """``<plugin>/<name>`` of the plugin source feeding this layer."""

    @property
    def size(self) -> int:
        return len(self.image.data) if self.image else 0


LayerWatcher = Callable[[str], None]
"""Called with a pane's key after its layers changed (an image, a placement, a layer added
or removed)."""


class GraphicsBook:
    """Every pane's layers.

    ``on_reclaimed`` is called with each owned layer removed because its owner went (its
    source stops). ``make_frames`` makes the directory frames are leased from (None: no
    direct delivery), at :meth:`open_frames`. Attached clients follow the layers with
    :meth:`watch`.
    """

    def __init__(self, *, on_reclaimed: Callable[[Layer], None] | None = None,
                 make_frames: Callable[[], FrameDirectory | None] | None = None) -> None:
        self._layers: dict[tuple[str, str], Layer] = {}
        self._watchers: dict[LayerWatcher, None] = {}
        """The watching attach sessions' callbacks, in the order they came."""
        self._on_reclaimed = on_reclaimed
        self._make_frames = make_frames
        self.cell_sizes: dict[str, tuple[str, int, int]] = {}
        """Attached clients that draw graphics: connection id -> (pane key, cell width,
        cell height in pixels)."""
        self.file_readers: dict[str, str] = {}
        """Those of them whose terminal reads image files itself: connection id -> pane
        key."""
        self.frames: FrameDirectory | None = None
        """The directory frames are leased from; None: no direct delivery."""
        self._bytes = 0

    def open_frames(self) -> None:
        """Make the frame directory, when the book has a maker for one."""
        if self._make_frames is not None:
            self.frames = self._make_frames()

    def remove_frames(self) -> None:
        """Remove the frame directory with every file left in it."""
        if self.frames is not None:
            self.frames.remove()
            self.frames = None

    def watch(self, watcher: LayerWatcher) -> None:
        """Call ``watcher`` after each change of any pane's layers, until :meth:`unwatch`."""
        self._watchers[watcher] = None

    def unwatch(self, watcher: LayerWatcher) -> None:
        """Stop calling ``watcher`` (nothing happens when it does not watch)."""
        self._watchers.pop(watcher, None)

    def direct_available(self, pane_key: str) -> bool:
        """Whether frames for ``pane_key`` may be leased: the server has a frame directory
        and a client drawing that pane reads image files itself."""
        return self.frames is not None and pane_key in self.file_readers.values()

    def cell_size(self, pane_key: str) -> tuple[int, int] | None:
        """The cell size of the latest client drawing ``pane_key``, else of any client
        drawing graphics; None when no client draws."""
        sizes = list(self.cell_sizes.values())
        for key, width, height in reversed(sizes):
            if key == pane_key:
                return width, height
        return (sizes[-1][1], sizes[-1][2]) if sizes else None

    @property
    def bytes_held(self) -> int:
        return self._bytes

    def layers(self, pane_key: str) -> list[Layer]:
        return [layer for (key, _), layer in self._layers.items() if key == pane_key]

    def layer(self, pane: Pane, layer_id: str) -> Layer | None:
        return self._layers.get((pane.key, layer_id))

    def count(self) -> int:
        return len(self._layers)

    # -- changes ------------------------------------------------------------------------

    def set(self, pane: Pane, layer_id: str, image: Image, placement: Placement, *,
            limit: int = SET_MAX_BYTES, owner: str | None = None) -> Layer:
        """Show ``image`` on the layer, creating it when missing.

        ``owner`` None: a plain set, refused with ``stream_conflict`` while a live owner
        holds the layer. With ``owner``: a frame of that owner's stream or source, refused
        with ``stream_closed`` when the layer has no live owner and ``stream_conflict`` when
        another holds it. Raises the image's and the limits' errors; changes nothing then.
        """
        if image.lease is None:
            check_image(image, limit)
        layer = self._usable(pane, layer_id)
        if owner is not None:
            if layer is None or layer.owner is None:
                raise CmuxError("stream_closed", f"no stream is open on layer {layer_id!r} "
                                f"of pane {pane.id}")
            if layer.owner != owner:
                raise CmuxError("stream_conflict", f"layer {layer_id!r} of pane {pane.id} is "
                                f"streamed by another owner")
        elif layer is not None and layer.owner is not None:
            raise self._conflict(pane, layer)
        if layer is None:
            self._check_room(pane)
        held = self._bytes - (layer.size if layer else 0) + len(image.data)
        if held > BUDGET_BYTES:
            raise CmuxError("graphics_budget_exceeded", f"layers would hold {held} bytes; the "
                            f"server keeps at most {BUDGET_BYTES}",
                            {"bytes": held, "limit": BUDGET_BYTES})
        if layer is None:
            layer = self._add(pane, layer_id)
        self._bytes = held
        layer.image = image
        layer.placement = placement
        layer.revision += 1
        layer.frames += 1
        self._changed(pane.key)
        return layer

    def clear(self, pane: Pane, layer_id: str) -> None:
        """Remove the layer (nothing when missing); ``stream_conflict`` while owned."""
        layer = self._usable(pane, layer_id)
        if layer is None:
            return
        if layer.owner is not None:
            raise self._conflict(pane, layer)
        self._remove(layer)

    def claim(self, pane: Pane, layer_id: str, owner: str, *, client_id: str | None = None,
              source: str | None = None) -> Layer:
        """Make ``owner`` the layer's owner (a stream opened or a source attached).

        The layer keeps an image it already had. ``stream_conflict`` when a live owner
        holds it, ``layer_limit`` when it is new and there is no room.
        """
        layer = self._usable(pane, layer_id)
        if layer is not None and layer.owner is not None:
            raise self._conflict(pane, layer)
        if layer is None:
            self._check_room(pane)
            layer = self._add(pane, layer_id)
        layer.owner, layer.client_id, layer.live, layer.source = owner, client_id, True, source
        self._changed(pane.key)
        return layer

    def release(self, pane: Pane, layer_id: str, owner: str) -> bool:
        """Remove the layer when ``owner`` holds it; False (nothing done) otherwise."""
        layer = self._layers.get((pane.key, layer_id))
        if layer is None or layer.owner != owner:
            return False
        self._remove(layer)
        return True

    def move(self, layer: Layer, placement: Placement) -> None:
        """Give the layer a new placement, keeping its image (no new frame)."""
        if self._layers.get((layer.pane_key, layer.layer_id)) is layer \
                and placement != layer.placement:
            layer.placement = placement
            layer.revision += 1
            self._changed(layer.pane_key)

    def disown(self, layer: Layer) -> None:
        """Keep the layer and its image but let anyone change it (a source that ended)."""
        if self._layers.get((layer.pane_key, layer.layer_id)) is layer:
            layer.owner, layer.client_id, layer.live, layer.source = None, None, False, None

    def remove(self, layer: Layer) -> None:
        if self._layers.get((layer.pane_key, layer.layer_id)) is layer:
            self._remove(layer)

    def connection_closed(self, client_id: str) -> None:
        """The connection's streams become stale (reclaimed by the next call on them)."""
        for layer in self._layers.values():
            if layer.client_id == client_id:
                layer.live = False

    def pane_closed(self, pane_key: str) -> None:
        """Drop the pane's layers (their owners are told through ``on_reclaimed``)."""
        for layer in self.layers(pane_key):
            self._remove(layer)
            if layer.owner is not None:
                self._tell_reclaimed(layer)

    # -- inside -------------------------------------------------------------------------

    def _usable(self, pane: Pane, layer_id: str) -> Layer | None:
        """The layer, after removing it when its owner is gone."""
        layer = self._layers.get((pane.key, layer_id))
        if layer is not None and layer.owner is not None and not layer.live:
            log.info("reclaiming stale graphics layer %s of pane %s", layer_id, pane.id)
            self._remove(layer)
            self._tell_reclaimed(layer)
            return None
        return layer

    def _tell_reclaimed(self, layer: Layer) -> None:
        if self._on_reclaimed is not None:
            self._on_reclaimed(layer)

    def _conflict(self, pane: Pane, layer: Layer) -> CmuxError:
        holder = (f"plugin source {layer.source}" if layer.source else
                  "an image the pane's program drew" if layer.owner == PROGRAM_OWNER else
                  "a stream")
        return CmuxError("stream_conflict", f"layer {layer.layer_id!r} of pane {pane.id} is "
                         f"held by {holder}")

    def _check_room(self, pane: Pane) -> None:
        if len(self.layers(pane.key)) >= MAX_LAYERS_PER_PANE:
            raise CmuxError("layer_limit", f"pane {pane.id} already has "
                            f"{MAX_LAYERS_PER_PANE} layers", {"limit": MAX_LAYERS_PER_PANE})
        if len(self._layers) >= MAX_LAYERS:
            raise CmuxError("layer_limit", f"the server already has {MAX_LAYERS} layers",
                            {"limit": MAX_LAYERS})

    def _add(self, pane: Pane, layer_id: str) -> Layer:
        layer = Layer(pane.key, layer_id)
        self._layers[(pane.key, layer_id)] = layer
        return layer

    def _remove(self, layer: Layer) -> None:
        del self._layers[(layer.pane_key, layer.layer_id)]
        self._bytes -= layer.size
        layer.live = False
        self._changed(layer.pane_key)

    def _changed(self, pane_key: str) -> None:
        for watcher in list(self._watchers):
            try:
                watcher(pane_key)
            except Exception:
                log.exception("graphics watcher failed")
