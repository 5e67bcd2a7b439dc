"""Attach methods: a connection shows one pane live and types into it.

``pane.attach`` turns its connection into an attach session (see
:mod:`cmux_core.api.attach` for the frames the server then writes); ``attach.input``,
``attach.resize`` and ``attach.detach`` are sent on that same connection.
"""

from __future__ import annotations

import base64
import binascii
from typing import Literal

from pydantic import Field

from cmux_core.api.attach import AttachSession
from cmux_core.api.context import Call, Peer
from cmux_core.api.dispatch import MethodTable, Result
from cmux_core.errors import CmuxError, InvalidParams
from cmux_core.hookspecs import Params

methods = MethodTable()

SIZE_MAX = 1000
INPUT_MAX = 256 * 1024
"""Bytes one ``attach.input`` may carry (a longer paste is sent in pieces)."""


def _peer(call: Call) -> Peer:
    if call.connection is None:
        raise CmuxError("invalid_request", f"{call.method} needs a client connection")
    return call.connection


def _session(call: Call) -> AttachSession:
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
async def pane_attach(call: Call, p: AttachParams) -> Result:
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
async def attach_input(call: Call, p: InputParams) -> Result:
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
async def attach_resize(call: Call, p: ResizeParams) -> Result:
    """The attached terminal changed size: the screen is drawn again for it, and the pane
    takes the size when this client is the one sizing it."""
    _session(call).set_size(p.columns, p.lines)
    return {"type": "ok"}


class DetachParams(Params):
    pass


@methods.method("attach.detach", DetachParams)
async def attach_detach(call: Call, p: DetachParams) -> Result:
    """End the session: an ``end`` frame with reason ``detached`` follows this reply. The
    pane keeps running."""
    _session(call).end("detached")
    return {"type": "ok"}
