"""The pane area of ``cmux ui``: one pane's rows kept current through its own
``pane.attach`` connection (:class:`PanePreview`), turned into prompt_toolkit fragments
(:class:`Fragments`), and the terminal modes and mouse reports of typing into it beside the
sidebar (:func:`outer_modes`, :func:`outer_keyboard`, :func:`mouse_for_pane`).

prompt_toolkit is imported where it is used, as in :mod:`cmux_core.cli.ui`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from cmux_core.cli import kitty
from cmux_core.client import Client
from cmux_core.errors import CmuxError

if TYPE_CHECKING:
    from prompt_toolkit.formatted_text import StyleAndTextTuples

FRAGMENT_CACHE_ROWS = 4096
"""Styled rows whose parsed fragments are kept (a row that did not change is not parsed
again)."""


class Fragments:
    """Styled rows as prompt_toolkit fragments, one fragment per run of one style.

    Parsing SGR gives a fragment per character, which prompt_toolkit then splits and
    measures one by one; merged runs and a cache by row text keep a redraw cheap.
    """

    def __init__(self) -> None:
        self._cache: dict[str, StyleAndTextTuples] = {}

    def row(self, text: str) -> StyleAndTextTuples:
        hit = self._cache.get(text)
        if hit is None:
            from prompt_toolkit.formatted_text import ANSI  # see the module docstring

            hit = []
            for fragment in ANSI(text).__pt_formatted_text__():
                style, chars = fragment[0], fragment[1]
                if hit and hit[-1][0] == style:
                    hit[-1] = (style, hit[-1][1] + chars)
                else:
                    hit.append((style, chars))
            if len(self._cache) >= FRAGMENT_CACHE_ROWS:
                self._cache.clear()
            self._cache[text] = hit
        return hit

    def rows(self, texts: list[str]) -> StyleAndTextTuples:
        out: StyleAndTextTuples = []
        for i, text in enumerate(texts):
            if i:
                out.append(("", "\n"))
            out.extend(self.row(text))
        return out


_SGR_MOUSE = re.compile(r"\x1b\[<(\d+);(\d+);(\d+)([Mm])")


def outer_modes(modes: Mapping[str, Any]) -> tuple[bool, bool, int]:
    """What the ui's terminal is switched to while keys go to a pane whose program set
    ``modes``: application cursor keys, application keypad, mouse tracking (0: off)."""
    return (bool(modes.get("app_cursor")), bool(modes.get("app_keypad")),
            int(modes.get("mouse_tracking") or 0))


def switch_modes(new: tuple[bool, bool, int], old: tuple[bool, bool, int]) -> bytes:
    """Sequences that take a terminal from ``old`` to ``new`` (see :func:`outer_modes`).
    Mouse reports are asked for in SGR form, whatever the program wants: the ui moves them
    into the pane's coordinates and encodes them again (:func:`mouse_for_pane`)."""
    out = b""
    if new[0] != old[0]:
        out += b"\x1b[?1h" if new[0] else b"\x1b[?1l"
    if new[1] != old[1]:
        out += b"\x1b=" if new[1] else b"\x1b>"
    if new[2] != old[2]:
        if old[2]:
            out += f"\x1b[?{old[2]}l\x1b[?1006l".encode()
        if new[2]:
            out += f"\x1b[?{new[2]}h\x1b[?1006h".encode()
    return out


def outer_keyboard(modes: Mapping[str, Any]) -> tuple[bool, int]:
    """The keyboard modes the ui's terminal is switched to while keys go to a pane whose
    program set ``modes``: focus reporting (mode 1004) and the kitty keyboard protocol's
    enabled flags (0: off)."""
    return bool(modes.get("focus_reporting")), int(modes.get("kitty_flags") or 0)


def switch_keyboard(new: tuple[bool, int], old: tuple[bool, int]) -> bytes:
    """Sequences that take a terminal from ``old`` to ``new`` (see :func:`outer_keyboard`).
    The kitty flags are pushed on the terminal's own stack (``CSI > flags u``), changed in
    place while pushed, and popped (``CSI < u``) when the pane no longer wants them, so the
    terminal's flags from before come back."""
    out = b""
    if new[0] != old[0]:
        out += b"\x1b[?1004h" if new[0] else b"\x1b[?1004l"
    if new[1] != old[1]:
        if not old[1]:
            out += b"\x1b[>%du" % new[1]
        elif new[1]:
            out += b"\x1b[=%d;1u" % new[1]
        else:
            out += b"\x1b[<u"
    return out


def mouse_for_pane(report: str, area: tuple[int, int, int, int],
                   modes: Mapping[str, Any]) -> str | None:
    """The mouse ``report`` the terminal sent (SGR or X10 form, screen cells) as the pane's
    program expects it: in the pane area's cells, SGR or X10 as it asked; None when it
    happened outside the area or cannot be encoded."""
    found = _SGR_MOUSE.fullmatch(report)
    if found is not None:
        button, x, y = int(found[1]), int(found[2]), int(found[3])
        release = found[4] == "m"
    elif report.startswith("\x1b[M") and len(report) == 6:
        button, x, y = (ord(c) - 32 for c in report[3:])
        release = button & 3 == 3 and not button & 64
    else:
        return None
    left, top, width, height = area
    x, y = x - left, y - top
    if not (1 <= x <= width and 1 <= y <= height):
        return None
    if modes.get("mouse_sgr"):
        return f"\x1b[<{button};{x};{y}{'m' if release else 'M'}"
    if release:
        button = button & ~3 | 3
    if max(button, x, y) > 223:
        return None
    return "\x1b[M" + "".join(chr(32 + n) for n in (button, x, y))


class PanePreview:
    """One pane's rows, kept current through a ``pane.attach`` connection (rows frames).

    :meth:`show` switches to another pane (closing the previous connection);
    ``on_change`` is called on the loop after every frame. With ``graphics`` (the terminal
    draws kitty images), the connection also asks for the pane's graphics layers
    (``attach.graphics`` with the terminal's cell size, and ``file_frames`` when ``files``)
    and gives their frames to it.
    """

    def __init__(self, path: str, on_change: Callable[[], None],
                 graphics: kitty.AreaLayers | None = None, *, files: bool = False) -> None:
        self.path = path
        self.on_change = on_change
        self.graphics = graphics
        self.files = files
        """The terminal loads images from files: leased frames come as their path."""
        self.pane_id: str | None = None
        self.rows: list[str] = []
        self.title: str | None = None
        self.bracketed_paste = False
        self.modes: dict[str, Any] = {}
        """The input modes the pane's program set (a rows frame's ``modes``)."""
        self.ended: str | None = None
        self.size = (0, 0)
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None

    async def show(self, pane_id: str | None, columns: int, lines: int) -> None:
        if pane_id == self.pane_id and self._task is not None and not self._task.done():
            await self.resize(columns, lines)
            return
        await self.close()
        self.pane_id, self.rows, self.title, self.ended = pane_id, [], None, None
        self.modes = {}
        self.size = (columns, lines)
        if self.graphics is not None:
            self.graphics.reset()
        if pane_id is None:
            return
        # A machine-qualified pane (box/w1:p2) is attached through that machine's relay.
        machine, sep, local_id = pane_id.partition("/")
        client = Client(self.path, timeout=10, machine=machine if sep else None)
        try:
            client.call("pane.attach", {"pane_id": local_id if sep else pane_id,
                                        "columns": columns, "lines": lines,
                                        "frames": "rows"})
        except CmuxError as exc:
            client.close()
            self.ended = exc.message
            self.on_change()
            return
        sock, pending = client.take_connection()
        reader, writer = await asyncio.open_unix_connection(sock=sock, limit=1 << 24)
        self._writer = writer
        if self.graphics is not None:
            cell_w, cell_h = self.graphics.cell
            writer.write(json.dumps({"id": "ui-graphics", "method": "attach.graphics",
                                     "params": {"cell_width_px": cell_w,
                                                "cell_height_px": cell_h,
                                                "file_frames": self.files}}).encode() + b"\n")
        self._task = asyncio.create_task(self._follow(reader, pending))

    async def resize(self, columns: int, lines: int) -> None:
        if (columns, lines) == self.size or self._writer is None:
            return
        self.size = (columns, lines)
        self._writer.write(json.dumps({"method": "attach.resize", "params": {
            "columns": columns, "lines": lines}}).encode() + b"\n")
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.drain()

    async def type(self, data: str) -> None:
        """Write ``data`` to the pane as typed (``attach.input``)."""
        if self._writer is None or not data:
            return
        self._writer.write(json.dumps({"method": "attach.input", "params": {
            "data": data}}).encode() + b"\n")
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.drain()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    async def _follow(self, reader: asyncio.StreamReader, pending: bytes) -> None:
        # Frames: a header line, then ``length`` bytes when it says so. What came with the
        # reply (``pending``) is read before the connection.
        buf = bytearray(pending)

        async def more() -> bool:
            chunk = await reader.read(1 << 16)
            buf.extend(chunk)
            return bool(chunk)

        try:
            while self.ended is None:
                while (end := buf.find(b"\n")) < 0:
                    if not await more():
                        self.ended = "the server closed the connection"
                        return
                line = bytes(buf[:end])
                del buf[:end + 1]
                if not line.strip():
                    continue
                header = json.loads(line)
                length = int(header.get("length", 0)) if "frame" in header else 0
                while len(buf) < length:
                    if not await more():
                        self.ended = "the server closed the connection"
                        return
                payload = bytes(buf[:length])
                del buf[:length]
                self._apply(header, payload)
        finally:
            self.on_change()

    def _apply(self, header: dict[str, Any], payload: bytes) -> None:
        kind = header.get("frame")
        if kind == "rows":
            lines = int(header["lines"])
            if header.get("whole") or len(self.rows) != lines:
                self.rows = [""] * lines
            for index, text in header["rows"]:
                self.rows[index] = text
            self.title = header.get("title")
            self.bracketed_paste = bool(header.get("bracketed_paste"))
            self.modes = dict(header.get("modes") or {})
            self.on_change()
        elif kind in ("graphics", "graphics_clear"):
            if self.graphics is not None:
                self.graphics.frame(header, payload)
                self.on_change()
        elif kind == "end":
            self.ended = str(header.get("reason"))
