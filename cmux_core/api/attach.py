"""Terminals attached to panes: who watches which pane, who sizes it, and the frames sent.

An :class:`AttachSession` is one client connection showing one pane (``pane.attach``).
From the reply on, the server writes frames on that connection: a JSON header line,
then, when the header has a ``length``, exactly that many raw bytes. ``screen`` frames
carry terminal bytes made by a :class:`~cmux_core.terminal.redraw.Painter` (the whole
screen first, then only what changed), at most one per :data:`FRAME_GAP_S` while output
flows, so a pane printing megabytes costs its clients a bounded number of screens, not
a copy of every byte. A session asked for ``rows`` frames gets the changed rows as styled
text in the header instead (for a client that lays the pane out itself). The last frame
is ``end`` with a ``reason``.

The :class:`AttachBook` keeps every session, and decides a pane's size: the most recent
session that typed (or attached), among those that may size it (not ``resize: false``;
read-only sessions too, as tmux's read-only clients do), gives the pane its terminal's
size, also after a layout change; once none is left the pane goes back to the size its
layout gives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from dataclasses import KW_ONLY, asdict, dataclass, field
from typing import Protocol

from cmux_core.model import layout
from cmux_core.model.events import LayoutUpdated
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Pane
from cmux_core.terminal.redraw import Painter, ScreenImage, capture

log = logging.getLogger(__name__)


class Peer(Protocol):
    """What an attach session needs of its client connection (``api.context.Peer`` has it)."""

    client_id: str

    def send(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

FRAME_GAP_S = 0.008
"""Least time between two screen frames to one client while output keeps coming."""

_activity = itertools.count(1)


def rows_frame(last: ScreenImage | None, image: ScreenImage) -> bytes:
    """A ``rows`` frame: the rows of ``image`` that differ from ``last`` (all of them when
    ``last`` is None or of another size) as ``[index, styled text]`` pairs, plus the size,
    cursor, title, whether the program wants pastes bracketed and the input modes it set
    (``modes``: what a client typing for it sends); empty when nothing changed."""
    if last == image:
        return b""
    whole = last is None or (last.columns, last.lines) != (image.columns, image.lines)
    rows = [[y, row] for y, row in enumerate(image.rows)
            if whole or last is None or row != last.rows[y]]
    return frame("rows", columns=image.columns, lines=image.lines, whole=whole,
                 cursor=list(image.cursor), cursor_visible=image.cursor_visible,
                 title=image.title, bracketed_paste=image.modes.bracketed_paste,
                 modes=asdict(image.modes), rows=rows)


def frame(kind: str, payload: bytes = b"", **fields: object) -> bytes:
    """One frame: its JSON header line, then ``payload`` (``length`` is set when any)."""
    header: dict[str, object] = {"frame": kind, **fields}
    if payload:
        header["length"] = len(payload)
    return json.dumps(header, separators=(",", ":")).encode() + b"\n" + payload


@dataclass(eq=False)
class AttachSession:
    """One connection showing one pane; runs until the pane closes or exits, the client
    detaches, or the connection ends (its task is then cancelled)."""

    book: AttachBook
    mux: Mux
    pane: Pane
    peer: Peer
    _: KW_ONLY
    columns: int
    lines: int
    read_only: bool
    resize: bool
    rows: bool = False
    active: int = field(init=False, default_factory=lambda: next(_activity))
    painter: Painter = field(init=False)
    _image: ScreenImage | None = field(init=False, default=None)
    wake: asyncio.Event = field(init=False, default_factory=asyncio.Event)
    ending: str | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.painter = Painter(self.columns, self.lines)

    @property
    def sizes_pane(self) -> bool:
        return self.resize

    def touch(self) -> None:
        """The client typed: it is now the most recent, so its size wins."""
        self.active = next(_activity)
        self.book.apply_size(self.pane)

    def set_size(self, columns: int, lines: int) -> None:
        self.columns, self.lines = columns, lines
        self.painter.set_viewport(columns, lines)
        self.book.apply_size(self.pane)
        self.wake.set()

    def end(self, reason: str) -> None:
        """Stop after the current frame; the last frame says ``reason``."""
        self.ending = reason
        self.wake.set()

    async def run(self) -> None:
        watcher = asyncio.create_task(self._watch_output())
        try:
            await self._paint_loop()
        except asyncio.CancelledError:
            pass  # the connection ended
        finally:
            watcher.cancel()
            self.book.remove(self)

    async def _watch_output(self) -> None:
        # The pane's output signal also fires on exit and close.
        while self.mux.panes.get(self.pane.key) is self.pane:
            await self.mux.output_signal(self.pane).wait()
            self.wake.set()

    async def _paint_loop(self) -> None:
        pane = self.pane
        loop = asyncio.get_running_loop()
        while True:
            self.wake.clear()
            if self.ending is None:
                if self.mux.panes.get(pane.key) is not pane:
                    self.ending = "pane_closed"
                else:
                    terminal = pane.terminal
                    image = capture(terminal.emulator)
                    if self.rows:
                        self.peer.send(rows_frame(self._image, image))
                        self._image = image
                    else:
                        data = self.painter.paint(image)
                        if data:
                            self.peer.send(frame("screen", data))
                    if terminal.exited:
                        self.ending = "pane_exited"
            if self.ending is not None:
                self.peer.send(frame("end", reason=self.ending))
                await self.peer.drain()
                return
            await self.peer.drain()
            painted = loop.time()
            await self.wake.wait()
            # A change right after a frame waits out the gap; one after a quiet spell does not.
            gap = painted + FRAME_GAP_S - loop.time()
            if gap > 0:
                await asyncio.sleep(gap)


class AttachBook:
    """Every attach session, by connection and by pane."""

    def __init__(self) -> None:
        self._by_client: dict[str, AttachSession] = {}
        self._by_pane: dict[str, list[AttachSession]] = {}

    def session(self, client_id: str) -> AttachSession | None:
        return self._by_client.get(client_id)

    def sessions(self, pane: Pane) -> list[AttachSession]:
        return list(self._by_pane.get(pane.key, ()))

    def add(self, session: AttachSession) -> None:
        self._by_client[session.peer.client_id] = session
        self._by_pane.setdefault(session.pane.key, []).append(session)
        self.apply_size(session.pane)

    def remove(self, session: AttachSession) -> None:
        """Forget ``session``. The pane takes the size of the next most recent sizing
        session; when none is left, the size its layout gives it again."""
        if self._by_client.get(session.peer.client_id) is session:
            del self._by_client[session.peer.client_id]
        pane = session.pane
        group = self._by_pane.get(pane.key, [])
        with contextlib.suppress(ValueError):
            group.remove(session)
        if not group:
            self._by_pane.pop(pane.key, None)
        if any(s.sizes_pane for s in group):
            self.apply_size(pane)
        elif session.sizes_pane and session.mux.panes.get(pane.key) is pane:
            mux = session.mux
            # pane_rects has only the zoomed pane of a zoomed tab; the others keep their rect.
            rect = (mux.pane_rects(pane.tab).get(pane.key)
                    or layout.rects(pane.tab.tree, mux.area).get(pane.key))
            if rect is not None:
                pane.terminal.resize(rect.width, rect.height)
                for other in group:
                    other.wake.set()

    def layout_updated(self, event: LayoutUpdated) -> None:
        """A layout change sized its panes to their rectangles; attached ones take their
        client's size again."""
        if self._by_pane:
            for group in list(self._by_pane.values()):
                if group and group[0].pane.tab is event.tab:
                    self.apply_size(group[0].pane)

    def apply_size(self, pane: Pane) -> None:
        """Give ``pane`` the size of its most recently active sizing session, if any."""
        sizing = [s for s in self._by_pane.get(pane.key, ()) if s.sizes_pane]
        if not sizing:
            return
        owner = max(sizing, key=lambda s: s.active)
        terminal = pane.terminal
        if (terminal.columns, terminal.rows) != (owner.columns, owner.lines):
            terminal.resize(owner.columns, owner.lines)
            for session in self._by_pane.get(pane.key, ()):
                session.wake.set()
