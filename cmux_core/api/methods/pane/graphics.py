"""The ``pane.graphics.*`` methods: image layers over panes and their streams.

Every method answers ``feature_disabled`` unless pane graphics are on (``[experimental]
kitty_graphics = true`` or ``CMUX_EXPERIMENTAL_KITTY_GRAPHICS=1``). The layers and their
limits live in :mod:`cmux_core.graphics.layers`. An attached client (``pane.attach``) that
calls ``attach.graphics`` with its cell size in pixels gets ``graphics`` frames (a layer's
image) and ``graphics_clear`` frames (a layer gone) on its connection; it gets only the
latest image of each layer once it has taken what was sent before, so a slow client skips
frames instead of queueing them. A client whose terminal reads image files itself says so
(``file_frames``); frames leased from files (:mod:`cmux_core.graphics.leases`) reach it as
a path instead of bytes.

"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import os
from typing import Any, Literal

from pydantic import Field

from cmux_core.api.context import Call, Peer
from cmux_core.api.dispatch import MethodTable, Result, services
from cmux_core.api.framing import encode_error
from cmux_core.api.methods.shared.graphics import graphics_book
from cmux_core.config import Settings
from cmux_core.errors import CmuxError
from cmux_core.graphics.layers import (
    BYTES_PER_PIXEL,
    DEFAULT_LAYER,
    MAX_LAYERS_PER_PANE,
    PROGRAM_OWNER,
    SET_MAX_BYTES,
    STREAM_MAX_BYTES,
    GraphicsBook,
    Image,
    Layer,
    Placement,
    check_layer_id,
)
from cmux_core.graphics.sources import SourceRunner
from cmux_core.hookspecs import Params
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Pane


@services
class GraphicsServices:
    mux: Mux
    settings: Settings
    graphics: GraphicsBook
    graphics_sources: SourceRunner


methods = MethodTable()


log = logging.getLogger(__name__)


UINT32 = 2**32 - 1


INT32 = 2**31


def _pane_and_layer(call: Call[GraphicsServices], pane_id: str, layer_id: str) -> tuple[Pane, str]:
    pane = call.ctx.mux.pane(pane_id)
    return pane, check_layer_id(layer_id)


class PlacementParams(Params):
    viewport_col: int = Field(0, ge=-INT32, lt=INT32)
    viewport_row: int = Field(0, ge=-INT32, lt=INT32)
    grid_cols: int = Field(0, ge=0, le=UINT32)
    grid_rows: int = Field(0, ge=0, le=UINT32)

    def placement(self) -> Placement:
        return Placement(self.viewport_col, self.viewport_row, self.grid_cols, self.grid_rows)


def _placement(given: PlacementParams | None) -> Placement:
    return given.placement() if given is not None else Placement()


class LayerParams(Params):
    pane_id: str
    layer_id: str = DEFAULT_LAYER


class SetParams(LayerParams):
    format: Literal["png", "rgb", "rgba", "bgra"]
    image_width: int = Field(ge=0, le=UINT32)
    image_height: int = Field(ge=0, le=UINT32)
    data_base64: str = ""
    placement: PlacementParams | None = None


def _decode(p: SetParams, limit: int) -> Image:
    # Base64 grows data by 4/3: text this long cannot decode to `limit` bytes or fewer.
    if len(p.data_base64) > (limit + 2) // 3 * 4 + 4:
        raise CmuxError("image_too_large", f"the image is larger than {limit} bytes",
                        {"limit": limit})
    try:
        data = base64.b64decode(p.data_base64, validate=True)
    except (binascii.Error, ValueError):
        raise CmuxError("invalid_image", "data_base64 is not valid base64") from None
    return Image(p.format, p.image_width, p.image_height, data)


@methods.method("pane.graphics.set", SetParams)
async def graphics_set(call: Call[GraphicsServices], p: SetParams) -> Result:
    """Show an image (``data_base64`` of ``format`` png, rgb, rgba or bgra, at most 512 KiB
    decoded) on a layer of the pane (``layer_id``, default ``primary``), placed per
    ``placement`` (cells over the pane's viewport). Replaces the layer's image."""
    book = graphics_book(call.ctx.settings, call.ctx.graphics)
    pane, layer_id = _pane_and_layer(call, p.pane_id, p.layer_id)
    book.set(pane, layer_id, _decode(p, SET_MAX_BYTES), _placement(p.placement))
    return {"type": "ok"}


@methods.method("pane.graphics.clear", LayerParams)
async def graphics_clear(call: Call[GraphicsServices], p: LayerParams) -> Result:
    """Remove a layer (default ``primary``); a missing layer is no error."""
    book = graphics_book(call.ctx.settings, call.ctx.graphics)
    pane, layer_id = _pane_and_layer(call, p.pane_id, p.layer_id)
    book.clear(pane, layer_id)
    return {"type": "ok"}


class PaneParams(Params):
    pane_id: str


def pane_visible(call: Call[GraphicsServices], pane: Pane) -> bool:
    """On the active workspace, in its active tab, and not hidden by another pane's zoom."""
    tab = pane.tab
    ws = tab.workspace
    return (call.ctx.mux.active_workspace() is ws and ws.active_tab is tab
            and (not tab.zoomed or tab.focused == pane.key))


@methods.method("pane.graphics.info", PaneParams)
async def graphics_info(call: Call[GraphicsServices], p: PaneParams) -> Result:
    """The cell size in pixels of a client attached to the pane that draws graphics
    (``cell_size_unavailable`` when none is), whether the pane is visible, and the
    limits. While a client drawing the pane reads image files itself, the file-frame
    fields name the directory frames are leased from (``direct-kitty`` delivery); else
    they say there is none. No damage rectangles are taken, so ``file_frame_damage`` is
    false."""
    book = graphics_book(call.ctx.settings, call.ctx.graphics)
    pane = call.ctx.mux.pane(p.pane_id)
    cell = book.cell_size(pane.key)
    if cell is None:
        raise CmuxError("cell_size_unavailable", f"no client that draws graphics is attached "
                        f"to pane {pane.id}, so its cell size is unknown")
    direct = book.frames if book.direct_available(pane.key) else None
    return {"type": "pane_graphics_info", "cell_width_px": cell[0], "cell_height_px": cell[1],
            "pane_visible": pane_visible(call, pane),
            "file_frame_directory": str(direct.path) if direct else None,
            "file_frame_formats": ["rgba", "bgra"] if direct else [],
            "file_frame_max_bytes": STREAM_MAX_BYTES if direct else None,
            "file_frame_damage": False,
            "file_frame_transport": "direct-kitty" if direct else None,
            "max_layers_per_pane": MAX_LAYERS_PER_PANE, "pixel_mouse": False}


def layer_row(layer: Layer) -> dict[str, object]:
    image = layer.image
    return {"layer_id": layer.layer_id, "format": image.format if image else None,
            "image_width": image.width if image else None,
            "image_height": image.height if image else None, "bytes": layer.size,
            "lease": ({"path": image.lease.path, "bytes": image.lease.size}
                      if image and image.lease else None),
            "placement": layer.placement.to_dict(), "owner": layer.owner,
            "source": layer.source, "live": layer.live, "frames": layer.frames,
            "revision": layer.revision}


@methods.method("pane.graphics.layers", PaneParams)
async def graphics_layers(call: Call[GraphicsServices], p: PaneParams) -> Result:
    """The pane's layers: id, image format and size, bytes held, the file of a leased
    frame, placement, owner (a stream's owner or ``source:<plugin>/<name>``), frames shown
    and revision."""
    book = graphics_book(call.ctx.settings, call.ctx.graphics)
    pane = call.ctx.mux.pane(p.pane_id)
    layers = sorted(book.layers(pane.key), key=lambda layer: layer.layer_id)
    return {"type": "pane_graphics_layers", "pane_id": pane.id,
            "layers": [layer_row(layer) for layer in layers]}


FRAME_HEADER_MAX = 64 * 1024


BODY_TIMEOUT_S = 30.0
"""Time a frame's body has to arrive once its header did; past it the stream just closes."""


class FrameHeader(Params):
    format: Literal["png", "rgb", "rgba", "bgra"]
    image_width: int = Field(ge=0, le=UINT32)
    image_height: int = Field(ge=0, le=UINT32)
    data_length: int
    placement: PlacementParams | None = None


async def _frame_header(reader: asyncio.StreamReader) -> FrameHeader | None:
    """The next frame's header (blank lines skipped); None when the client closed."""
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError:
            return None
        except asyncio.LimitOverrunError:
            raise CmuxError("invalid_frame", "invalid frame header: longer than "
                            f"{FRAME_HEADER_MAX} bytes") from None
        if len(line) > FRAME_HEADER_MAX:
            raise CmuxError("invalid_frame", "invalid frame header: longer than "
                            f"{FRAME_HEADER_MAX} bytes")
        if line.strip():
            break
    try:
        return FrameHeader.model_validate_json(line)
    except ValueError as exc:
        first = str(exc).splitlines()
        raise CmuxError("invalid_frame", "invalid frame header: " +
                        " ".join(first[:3])) from None


async def _stream_frames(book: GraphicsBook, peer: Peer, reader: asyncio.StreamReader,
                         pane: Pane, layer_id: str, owner: str, request_id: object) -> None:
    """Read frames until the client closes or sends a bad one (answered with one error
    line); then the layer is cleared and the connection closed."""
    try:
        while True:
            header = await _frame_header(reader)
            if header is None:
                return
            if header.data_length <= 0:
                raise CmuxError("invalid_frame", "data_length must be greater than 0")
            if header.data_length > STREAM_MAX_BYTES:
                raise CmuxError("image_too_large", f"a streamed frame may be at most "
                                f"{STREAM_MAX_BYTES} bytes, not {header.data_length}")
            try:
                async with asyncio.timeout(BODY_TIMEOUT_S):
                    data = await reader.readexactly(header.data_length)
            except (TimeoutError, asyncio.IncompleteReadError):
                return
            book.set(pane, layer_id, Image(header.format, header.image_width,
                                           header.image_height, data),
                     _placement(header.placement), limit=STREAM_MAX_BYTES, owner=owner)
    except CmuxError as exc:
        peer.send(encode_error(request_id, exc))
        await peer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        book.release(pane, layer_id, owner)
        peer.finish()


@methods.method("pane.graphics.stream", LayerParams)
async def graphics_stream(call: Call[GraphicsServices], p: LayerParams) -> Result:
    """Turn this connection into a frame stream for a layer (default ``primary``): after
    the ``ok`` reply the client sends frames, each a JSON header line (``format``,
    ``image_width``, ``image_height``, ``data_length``, ``placement?``) and then
    ``data_length`` raw bytes (at most 16 MiB). No reply per frame; a bad frame is
    answered with one error line and ends the stream. When the stream ends the layer is
    cleared and the connection closed. Called from inside the server:
    ``stream_transport_required``."""
    book = graphics_book(call.ctx.settings, call.ctx.graphics)
    if call.connection is None:
        raise CmuxError("stream_transport_required", "pane.graphics.stream needs its own "
                        "client connection")
    peer = call.connection
    pane, layer_id = _pane_and_layer(call, p.pane_id, p.layer_id)
    owner = peer.client_id
    existing = book.layer(pane, layer_id)
    if existing is not None and existing.owner is None:
        book.clear(pane, layer_id)
    book.claim(pane, layer_id, owner, client_id=peer.client_id)
    try:
        reader = peer.take_raw()
    except CmuxError:
        book.release(pane, layer_id, owner)
        raise
    peer.run_task(_stream_frames(book, peer, reader, pane, layer_id, owner, call.request_id))
    return {"type": "ok"}


class OwnerParams(LayerParams):
    owner: str | None = Field(None, max_length=256)


def _owner(call: Call[GraphicsServices], given: str | None) -> str:
    """The stream's owner name: ``given``, else the calling connection's id."""
    owner = given if given is not None else (
        call.connection.client_id if call.connection else "")
    if not owner:
        raise CmuxError("invalid_stream", "a stream needs a non-empty owner")
    if owner == PROGRAM_OWNER:
        raise CmuxError("invalid_stream", f"owner {PROGRAM_OWNER!r} is reserved for the "
                        "images a pane's own program draws")
    return owner


@methods.method("pane.graphics.stream.open", OwnerParams)
async def stream_open(call: Call[GraphicsServices], p: OwnerParams) -> Result:
    """Claim a layer for a stream owned by ``owner`` (default: this connection's id). The
    stream lives while this connection does; after it leaves, the next call on the layer
    reclaims it."""
    book = graphics_book(call.ctx.settings, call.ctx.graphics)
    pane, layer_id = _pane_and_layer(call, p.pane_id, p.layer_id)
    owner = _owner(call, p.owner)
    client = call.connection.client_id if call.connection else None
    book.claim(pane, layer_id, owner, client_id=client)
    return {"type": "ok"}


class StreamSetParams(SetParams):
    owner: str | None = Field(None, max_length=256)


@methods.method("pane.graphics.stream.set", StreamSetParams)
async def stream_set(call: Call[GraphicsServices], p: StreamSetParams) -> Result:
    """One frame of an open stream, as ``pane.graphics.set`` takes it (up to 16 MiB)."""
    book = graphics_book(call.ctx.settings, call.ctx.graphics)
    pane, layer_id = _pane_and_layer(call, p.pane_id, p.layer_id)
    owner = _owner(call, p.owner)
    book.set(pane, layer_id, _decode(p, STREAM_MAX_BYTES), _placement(p.placement),
             limit=STREAM_MAX_BYTES, owner=owner)
    return {"type": "ok"}


class DirectParams(OwnerParams):
    path: str = Field(min_length=1)
    format: Literal["rgba", "bgra"] = "rgba"
    image_width: int = Field(ge=0, le=UINT32)
    image_height: int = Field(ge=0, le=UINT32)
    sequence: int = Field(0, ge=0)
    revision: int = Field(0, ge=0)
    placement: PlacementParams | None = None


def _read_frame_file(path: str, expected: int) -> bytes:
    """The file's bytes when it holds exactly ``expected``; else ``invalid_frame_file``."""
    if not os.path.isabs(path):
        raise CmuxError("invalid_frame_file", f"{path}: a frame file needs an absolute path")
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size != expected:
                raise CmuxError("invalid_frame_file", f"{path} holds {size} bytes; the frame "
                                f"needs {expected}", {"bytes": size, "expected": expected})
            data = f.read(expected + 1)
    except OSError as exc:
        raise CmuxError("invalid_frame_file", f"cannot read {path}: {exc.strerror}") from None
    if len(data) != expected:
        raise CmuxError("invalid_frame_file", f"{path} changed while it was read")
    return data


@methods.method("pane.graphics.stream.direct", DirectParams)
async def stream_direct(call: Call[GraphicsServices], p: DirectParams) -> Result:
    """One frame of an open stream read from a file of raw rgba or bgra pixels (exactly
    width x height x 4 bytes, at most 16 MiB); the reply echoes ``sequence`` and
    ``revision``. On the ``primary`` layer while direct delivery is available (see
    ``pane.graphics.info``) a frame whose path is in the frame directory is leased: the
    file must be a regular file there, and the layer keeps its path, not its bytes,
    outside the 64 MiB budget. Otherwise the bytes are copied into the layer and count
    against the budget. ``path`` is absolute."""
    book = graphics_book(call.ctx.settings, call.ctx.graphics)
    pane, layer_id = _pane_and_layer(call, p.pane_id, p.layer_id)
    owner = _owner(call, p.owner)
    layer = book.layer(pane, layer_id)
    if layer is None or layer.owner is None or not layer.live:
        raise CmuxError("stream_closed", f"no stream is open on layer {layer_id!r} of pane "
                        f"{pane.id}")
    if p.image_width <= 0 or p.image_height <= 0:
        raise CmuxError("invalid_image", "image_width and image_height must be greater than 0")
    expected = p.image_width * p.image_height * BYTES_PER_PIXEL[p.format]
    if expected > STREAM_MAX_BYTES:
        raise CmuxError("invalid_image", "image dimensions are too large")
    if (layer_id == DEFAULT_LAYER and book.frames and book.direct_available(pane.key)
            and book.frames.holds(p.path)):
        image = Image(p.format, p.image_width, p.image_height, b"",
                      book.frames.lease(p.path, expected))
    else:
        data = await asyncio.to_thread(_read_frame_file, p.path, expected)
        image = Image(p.format, p.image_width, p.image_height, data)
    book.set(pane, layer_id, image, _placement(p.placement), limit=STREAM_MAX_BYTES,
             owner=owner)
    return {"type": "pane_graphics_frame_ack", "sequence": p.sequence, "revision": p.revision}


@methods.method("pane.graphics.stream.close", OwnerParams)
async def stream_close(call: Call[GraphicsServices], p: OwnerParams) -> Result:
    """Release the stream's layer and remove it; from another owner, nothing happens."""
    book = graphics_book(call.ctx.settings, call.ctx.graphics)
    pane, layer_id = _pane_and_layer(call, p.pane_id, p.layer_id)
    book.release(pane, layer_id, _owner(call, p.owner))
    return {"type": "ok"}


class AttachSourceParams(LayerParams):
    source: str = Field(min_length=1, max_length=128)
    options: dict[str, Any] = Field(default_factory=dict)
    placement: PlacementParams | None = None


@methods.method("pane.graphics.attach_source", AttachSourceParams)
async def attach_source(call: Call[GraphicsServices], p: AttachSourceParams) -> Result:
    """Feed a layer (default ``primary``) from a plugin graphics source: the server calls
    its ``open(pane_id, options)`` and pulls frames into the layer until the source ends,
    fails, or is detached, or the layer, pane or plugin goes. The layer is the source's
    meanwhile (``stream_conflict`` for others)."""
    graphics_book(call.ctx.settings, call.ctx.graphics)
    runner = call.ctx.graphics_sources
    if runner is None:
        raise CmuxError("graphics_source_not_found", "this server has no plugin sources")
    pane, layer_id = _pane_and_layer(call, p.pane_id, p.layer_id)
    feed = runner.attach(pane, p.source, layer_id, p.options, _placement(p.placement))
    return {"type": "pane_graphics_source", "pane_id": pane.id, "layer_id": layer_id,
            "source": p.source, "plugin_id": feed.source.plugin_id}


@methods.method("pane.graphics.detach_source", LayerParams)
async def detach_source(call: Call[GraphicsServices], p: LayerParams) -> Result:
    """Stop the layer's plugin source (its iterator is closed) and remove the layer;
    ``graphics_source_not_attached`` when no source feeds it."""
    graphics_book(call.ctx.settings, call.ctx.graphics)
    pane, layer_id = _pane_and_layer(call, p.pane_id, p.layer_id)
    runner = call.ctx.graphics_sources
    if runner is None or not runner.detach(pane, layer_id):
        raise CmuxError("graphics_source_not_attached", f"no graphics source feeds layer "
                        f"{layer_id!r} of pane {pane.id}")
    return {"type": "ok"}
