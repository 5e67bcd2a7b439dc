"""``pane.attach`` and the ``attach.*`` methods: a connection shows one pane live and types
into it, and may draw the pane's graphics layers (``attach.graphics``).

``pane.attach`` turns its connection into an attach session (see
:mod:`cmux_core.api.attach` for the frames the server then writes); ``attach.input``,
``attach.resize`` and ``attach.detach`` are sent on that same connection.

"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
from typing import Literal

from pydantic import Field

from cmux_core.api.attach import AttachBook, AttachSession, frame
from cmux_core.api.context import Call, Peer
from cmux_core.api.dispatch import MethodTable, Result, services
from cmux_core.api.methods.shared.graphics import graphics_book
from cmux_core.config import Settings
from cmux_core.errors import CmuxError, InvalidParams
from cmux_core.graphics.layers import GraphicsBook
from cmux_core.graphics.leases import read_lease
from cmux_core.hookspecs import Params
from cmux_core.model.mux import Mux


@services
class AttachServices:
    mux: Mux
    settings: Settings
    attach: AttachBook
    graphics: GraphicsBook


methods = MethodTable()


SIZE_MAX = 1000


INPUT_MAX = 256 * 1024
"""Bytes one ``attach.input`` may carry (a longer paste is sent in pieces)."""


def _peer(call: Call[AttachServices]) -> Peer:
    if call.connection is None:
        raise CmuxError("invalid_request", f"{call.method} needs a client connection")
    return call.connection


def _session(call: Call[AttachServices]) -> AttachSession:
    session = call.ctx.attach.session(_peer(call).client_id)
    if session is None:
        raise CmuxError("not_attached", f"{call.method}: this connection is not attached to a "
                        "pane (call pane.attach first)")
    return session


class AttachParams(Params):
    pane_id: str | None = None
    columns: int = Field(ge=2, le=SIZE_MAX)
    lines: int = Field(ge=1, le=SIZE_MAX)
    read_only: bool = False
    resize: bool = True
    frames: Literal["screen", "rows"] = "screen"


@methods.method("pane.attach", AttachParams)
async def pane_attach(call: Call[AttachServices], p: AttachParams) -> Result:
    """Show the pane (default: the focused one; a surface handle selects that surface in
    its pane first) on this connection: after this reply the
    server writes frames (a ``screen`` frame with the whole screen, then changes, and a
    last ``end`` frame). ``columns`` x ``lines`` is the attached terminal's size; unless
    ``resize: false``, the pane takes it while this client is the most
    recent one to type or attach. ``frames: "rows"`` sends changed rows as styled text
    instead of terminal bytes."""
    peer = _peer(call)
    book = call.ctx.attach
    if book.session(peer.client_id) is not None:
        raise CmuxError("already_attached", "this connection is already attached to a pane")
    mux = call.ctx.mux
    pane = mux.pane(p.pane_id)
    surface = mux.find_surface(p.pane_id) if p.pane_id is not None else None
    if surface is not None and surface.pane is pane:
        if surface.term is None:
            raise CmuxError("invalid_params", "Surface is not a terminal",
                            {"surface_id": surface.uuid, "type": surface.kind})
        pane.selected = surface  # a surface handle: the pane shows that surface
    if pane.terminal.exited:
        raise CmuxError("pane_exited", f"the process of pane {pane.id} has exited")
    session = AttachSession(book, mux, pane, peer, columns=p.columns, lines=p.lines,
                            read_only=p.read_only, resize=p.resize, rows=p.frames == "rows")
    book.add(session)
    peer.run_task(session.run())
    return {"type": "pane_attach", "pane_id": pane.id, "columns": pane.terminal.columns,
            "lines": pane.terminal.rows, "read_only": p.read_only, "resize": p.resize,
            "frames": p.frames}


class InputParams(Params):
    data: str | None = None
    data_base64: str | None = None


@methods.method("attach.input", InputParams)
async def attach_input(call: Call[AttachServices], p: InputParams) -> Result:
    """Write bytes to the attached pane as typed (``data`` as UTF-8, or ``data_base64``);
    this client becomes the most recent one, so the pane takes its size."""
    session = _session(call)
    if (p.data is None) == (p.data_base64 is None):
        raise InvalidParams("data", "give exactly one of data and data_base64")
    if p.data is not None:
        data = p.data.encode("utf-8", "surrogateescape")
    else:
        try:
            data = base64.b64decode(p.data_base64 or "", validate=True)
        except (binascii.Error, ValueError):
            raise InvalidParams("data_base64", "not valid base64") from None
    if len(data) > INPUT_MAX:
        raise InvalidParams("data", f"at most {INPUT_MAX} bytes per call")
    if session.read_only:
        raise CmuxError("read_only", "this client attached read-only")
    terminal = session.pane.terminal
    if terminal.exited:
        raise CmuxError("pane_send_failed", "the pane's process has exited")
    session.touch()
    terminal.write(data)
    return {"type": "ok"}


class ResizeParams(Params):
    columns: int = Field(ge=2, le=SIZE_MAX)
    lines: int = Field(ge=1, le=SIZE_MAX)


@methods.method("attach.resize", ResizeParams)
async def attach_resize(call: Call[AttachServices], p: ResizeParams) -> Result:
    """The attached terminal changed size: the screen is drawn again for it, and the pane
    takes the size when this client is the one sizing it."""
    _session(call).set_size(p.columns, p.lines)
    return {"type": "ok"}


class DetachParams(Params):
    pass


@methods.method("attach.detach", DetachParams)
async def attach_detach(call: Call[AttachServices], p: DetachParams) -> Result:
    """End the session: an ``end`` frame with reason ``detached`` follows this reply. The
    pane keeps running."""
    _session(call).end("detached")
    return {"type": "ok"}


log = logging.getLogger(__name__)


class Viewer:
    """Sends one attached client the images of its pane's layers as they change."""

    RECHECK_S = 0.5
    """How often the viewer checks that its attach session still runs."""

    def __init__(self, book: GraphicsBook, session: AttachSession, peer: Peer,
                 lookup: AttachLookup) -> None:
        self.book = book
        self.session = session
        self.peer = peer
        self.lookup = lookup
        self.sent: dict[str, int] = {}
        self.wake = asyncio.Event()
        self.wake.set()

    def on_change(self, pane_key: str) -> None:
        if pane_key == self.session.pane.key:
            self.wake.set()

    def reads_files(self) -> bool:
        """Whether this client's terminal loads leased frames from their files itself."""
        return self.peer.client_id in self.book.file_readers

    def attached(self) -> bool:
        return (self.lookup(self.peer.client_id) is self.session
                and self.session.ending is None)

    async def run(self) -> None:
        self.book.watch(self.on_change)
        pane = self.session.pane
        try:
            while self.attached():
                self.wake.clear()
                current = {layer.layer_id: layer for layer in self.book.layers(pane.key)
                           if layer.image is not None}
                for layer_id in [i for i in self.sent if i not in current]:
                    del self.sent[layer_id]
                    self.peer.send(frame("graphics_clear", pane_id=pane.id, layer_id=layer_id))
                for layer_id, layer in current.items():
                    image = layer.image
                    if image is None or self.sent.get(layer_id) == layer.revision:
                        continue
                    self.sent[layer_id] = layer.revision
                    fields: dict[str, object] = {
                        "pane_id": pane.id, "layer_id": layer_id, "format": image.format,
                        "image_width": image.width, "image_height": image.height,
                        "placement": layer.placement.to_dict(), "revision": layer.revision,
                        **layer.placement.drawing()}
                    data = image.data
                    if image.lease is not None:
                        if image.format == "rgba" and self.reads_files():
                            fields.update(path=image.lease.path, bytes=image.lease.size)
                        else:
                            found = await asyncio.to_thread(read_lease, image.lease)
                            if found is None:
                                log.info("leased frame %s is gone or changed; not sent",
                                         image.lease.path)
                                continue
                            data = found
                    self.peer.send(frame("graphics", data, **fields))
                # Only what the client has taken is followed by more: later frames replace
                # the ones a slow client could not take yet.
                await self.peer.drain()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.RECHECK_S):
                        await self.wake.wait()
        finally:
            self.book.unwatch(self.on_change)
            self.book.cell_sizes.pop(self.peer.client_id, None)
            self.book.file_readers.pop(self.peer.client_id, None)


class AttachLookup:
    def __init__(self, call: Call[AttachServices]) -> None:
        self.attach = call.ctx.attach

    def __call__(self, client_id: str) -> AttachSession | None:
        return self.attach.session(client_id)


class AttachGraphicsParams(Params):
    cell_width_px: int = Field(ge=1, le=1000)
    cell_height_px: int = Field(ge=1, le=1000)
    file_frames: bool = False


@methods.method("attach.graphics", AttachGraphicsParams)
async def attach_graphics(call: Call[AttachServices], p: AttachGraphicsParams) -> Result:
    """This attached client draws graphics and its cells are ``cell_width_px`` x
    ``cell_height_px`` pixels: from now on the pane's layers come as ``graphics`` frames
    (header with ``layer_id``, ``format``, ``image_width``, ``image_height``,
    ``placement``, ``revision``, then the image bytes) and ``graphics_clear`` frames.
    With ``file_frames`` true (its terminal loads images from files) a leased rgba frame
    comes with ``path`` and ``bytes`` instead of the image bytes."""
    book = graphics_book(call.ctx.settings, call.ctx.graphics)
    if call.connection is None:
        raise CmuxError("invalid_request", "attach.graphics needs a client connection")
    peer = call.connection
    session = call.ctx.attach.session(peer.client_id)
    if session is None:
        raise CmuxError("not_attached", "attach.graphics: this connection is not attached to "
                        "a pane (call pane.attach first)")
    first = peer.client_id not in book.cell_sizes
    book.cell_sizes[peer.client_id] = (session.pane.key, p.cell_width_px, p.cell_height_px)
    if p.file_frames:
        book.file_readers[peer.client_id] = session.pane.key
    else:
        book.file_readers.pop(peer.client_id, None)
    if first:
        peer.run_task(Viewer(book, session, peer, AttachLookup(call)).run())
    return {"type": "ok"}
