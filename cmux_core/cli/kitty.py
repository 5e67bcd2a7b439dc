"""The kitty graphics protocol on the client side: asking the terminal, and drawing layers.

:func:`probe` asks the terminal whether it draws kitty graphics (a one-pixel query image
that is never stored), whether it loads images from files (the same query with the pixel in
a file, ``t=f``) and for its cell size, with a primary device attributes request behind
them: every terminal answers that one, so one that ignores the graphics query is
known at once instead of after the timeout. :func:`transmit` sends a ``graphics`` frame's
image and shows it in one sequence; :func:`store`, :func:`place` and :func:`hide` are the
same in steps: the data is sent once, each move is a few bytes. A frame that comes as a
``path`` (one the server leased from a file) is sent as that path (``t=f``): the terminal
reads the file. :class:`AreaLayers` turns the server's ``graphics`` and ``graphics_clear``
frames (see docs/graphics.md) into these sequences, one image id per layer, each drawn at
its placement over an area of the screen (``cmux ui``'s pane area, ``cmux attach``'s whole
terminal) and cropped to it (:func:`fit`). Responses are
suppressed (``q=2``) so the terminal never types replies into the pane.
"""

from __future__ import annotations

import base64
import fcntl
import os
import re
import select
import struct
import tempfile
import termios
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

QUERY = b"\x1b_Gi=31,s=1,v=1,a=q,t=d,f=24;AAAA\x1b\\"
FILE_QUERY_ID = 32
CELL_SIZE_QUERY = b"\x1b[16t"
DEVICE_ATTRIBUTES = b"\x1b[c"
PROBE_TIMEOUT_S = 0.5
CHUNK = 4096
"""Base64 bytes per APC chunk (the protocol's limit)."""
FIRST_ID = 0x434D0001
"""Image ids this client uses count up from here, clear of small ids programs pick."""

_GRAPHICS_REPLY = re.compile(rb"\x1b_Gi=31;([^\x1b]*)\x1b\\")
_FILE_REPLY = re.compile(rb"\x1b_Gi=32;([^\x1b]*)\x1b\\")
_CELL_REPLY = re.compile(rb"\x1b\[6;(\d+);(\d+)t")
_DA_REPLY = re.compile(rb"\x1b\[\?[\d;]*c")
_FORMATS = {"png": 100, "rgb": 24, "rgba": 32, "bgra": 32}


@dataclass(frozen=True, slots=True)
class Probe:
    """What the terminal said: whether it draws kitty graphics, its cell size in pixels
    (None when unknown), and bytes read meanwhile that were not replies (typed keys)."""

    graphics: bool
    cell: tuple[int, int] | None
    typed: bytes
    files: bool = False
    """Whether it loaded the query image from a file this client wrote (``t=f``)."""


def window_cell_size(fd: int) -> tuple[int, int] | None:
    """The cell size from the terminal's window size in pixels, when it reports one."""
    try:
        rows, cols, xpix, ypix = struct.unpack(
            "HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
    except OSError:
        return None
    if not (rows and cols and xpix and ypix):
        return None
    return xpix // cols, ypix // rows


def probe(in_fd: int, out_fd: int, timeout: float = PROBE_TIMEOUT_S) -> Probe:
    """Ask the terminal on ``out_fd`` (answering on ``in_fd``, in raw mode) whether it draws
    kitty graphics, whether it loads them from files, and its cell size; waits for the
    device attributes reply or ``timeout`` seconds, whichever comes first."""
    with tempfile.NamedTemporaryFile(prefix="cmux-probe-", suffix=".rgb") as pixel:
        pixel.write(b"\0\0\0")
        pixel.flush()
        data = _ask(in_fd, out_fd, QUERY + file_query(pixel.name) + CELL_SIZE_QUERY
                    + DEVICE_ATTRIBUTES, timeout)
    graphics = _GRAPHICS_REPLY.search(data)
    supported = graphics is not None and graphics.group(1).startswith(b"OK")
    from_file = _FILE_REPLY.search(data)
    files = supported and from_file is not None and from_file.group(1).startswith(b"OK")
    cell = window_cell_size(in_fd)
    reply = _CELL_REPLY.search(data)
    if cell is None and reply is not None and int(reply.group(1)) and int(reply.group(2)):
        cell = int(reply.group(2)), int(reply.group(1))
    typed = _DA_REPLY.sub(b"", _CELL_REPLY.sub(b"", _FILE_REPLY.sub(
        b"", _GRAPHICS_REPLY.sub(b"", data))))
    return Probe(supported, cell, typed, files)


def file_query(path: str) -> bytes:
    """The kitty graphics query for a one-pixel rgb image in the file at ``path``."""
    return _apc(f"i={FILE_QUERY_ID},s=1,v=1,a=q,t=f,f=24",
                base64.standard_b64encode(path.encode()))


def _ask(in_fd: int, out_fd: int, queries: bytes, timeout: float) -> bytes:
    """Write ``queries``; return what the terminal sends back until its device attributes
    reply or ``timeout``. Past the deadline what has already arrived is still read (this
    process may only get to look after it on a loaded machine), without waiting for more."""
    os.write(out_fd, queries)
    data = b""
    deadline = time.monotonic() + timeout
    while not _DA_REPLY.search(data):
        left = deadline - time.monotonic()
        ready, _, _ = select.select([in_fd], [], [], max(0.0, left))
        if not ready:
            break
        chunk = os.read(in_fd, 4096)
        if not chunk:
            break
        data += chunk
    return data


def _apc(control: str, payload: bytes = b"") -> bytes:
    return b"\x1b_G" + control.encode() + (b";" + payload if payload else b"") + b"\x1b\\"


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a stored image is shown: its top-left cell on the screen (zero-based), the
    cells it is scaled to (0: its own size), the part of it shown, in pixels
    (``source`` ``(x, y, width, height)``; None: all of it), its offset in pixels from
    that cell's corner and its stacking order ``z``."""

    row: int
    col: int
    cols: int = 0
    rows: int = 0
    source: tuple[int, int, int, int] | None = None
    offset: tuple[int, int] = (0, 0)
    z: int = 0


TOP_LEFT = Placement(0, 0)


def transmit(image_id: int, header: dict[str, Any], data: bytes,
             where: Placement = TOP_LEFT) -> bytes:
    """Sequences that show ``data`` (a ``graphics`` frame's image) as image ``image_id``
    at ``where`` (see :func:`fit`), replacing what that id showed; the cursor is saved and
    restored around them."""
    return _at(where, _image(f"a=T,q=2,C=1,i={image_id},p=1" + _shown(where), header, data))


def _shown(where: Placement) -> str:
    """The placement keys for ``where``'s size in cells, part of the image, offset into
    its cell and stacking order."""
    control = ""
    if where.cols:
        control += f",c={where.cols}"
    if where.rows:
        control += f",r={where.rows}"
    if where.source is not None:
        x, y, w, h = where.source
        control += f",x={x},y={y},w={w},h={h}"
    if where.offset[0]:
        control += f",X={where.offset[0]}"
    if where.offset[1]:
        control += f",Y={where.offset[1]}"
    if where.z:
        control += f",z={where.z}"
    return control


def _at(where: Placement, sequences: bytes) -> bytes:
    """``sequences`` written with the cursor at ``where``'s cell, then put back."""
    return b"\x1b7" + f"\x1b[{where.row + 1};{where.col + 1}H".encode() + sequences + b"\x1b8"


def _image(control: str, header: dict[str, Any], data: bytes) -> bytes:
    """``data`` (of ``header``'s format and size) sent in chunks, the first one carrying
    ``control`` plus the format keys; bgra is sent as rgba (kitty has no bgra). A header
    with a ``path`` (a leased rgba frame, no data) is sent as that file (``t=f``)."""
    fmt = str(header.get("format"))
    if header.get("path"):
        control += f",t=f,S={int(header.get('bytes', 0))}"
        data = str(header["path"]).encode()
    elif fmt == "bgra":
        swapped = bytearray(data)
        swapped[0::4], swapped[2::4] = data[2::4], data[0::4]
        data = bytes(swapped)
    control += f",f={_FORMATS.get(fmt, 100)}"
    if fmt != "png":
        control += f",s={int(header['image_width'])},v={int(header['image_height'])}"
    encoded = base64.standard_b64encode(data)
    chunks = [encoded[i:i + CHUNK] for i in range(0, len(encoded), CHUNK)] or [b""]
    out = []
    for n, chunk in enumerate(chunks):
        more = 1 if n < len(chunks) - 1 else 0
        out.append(_apc((control + "," if n == 0 else "q=2,") + f"m={more}", chunk))
    return b"".join(out)


def store(image_id: int, header: dict[str, Any], data: bytes) -> bytes:
    """The sequence that stores ``data`` (a ``graphics`` frame's image) as image
    ``image_id`` without showing it (see :func:`place`), replacing what that id held."""
    return _image(f"a=t,q=2,i={image_id}", header, data)


def place(image_id: int, where: Placement) -> bytes:
    """The sequences that show stored image ``image_id`` at ``where`` (its one placement,
    moved there if it was shown elsewhere), the cursor saved and restored around them."""
    return _at(where, _apc(f"a=p,q=2,C=1,i={image_id},p=1" + _shown(where)))


def fit(header: dict[str, Any], cell: tuple[int, int], area: tuple[int, int, int, int]
        ) -> Placement | None:
    """Where a ``graphics`` frame's image shows inside ``area`` (screen column, row, width
    and height in cells, the pane's top-left cell first): at its placement relative to the
    area, the part outside the area cropped away; None when none of it is inside. ``cell``
    is the terminal's cell size in pixels.

    The frame's ``source_px`` (the part of the image shown), ``offset_px`` (pixels from
    the first cell's corner, kept inside the cell) and ``z`` are honoured: a crop takes its
    share of the source part, and an offset stays only while the first cell shows.
    """
    width, height = int(header["image_width"]), int(header["image_height"])
    place = header.get("placement") or {}
    col, row = int(place.get("viewport_col", 0)), int(place.get("viewport_row", 0))
    grid_cols, grid_rows = int(place.get("grid_cols", 0)), int(place.get("grid_rows", 0))
    cell_w, cell_h = cell
    given = header.get("source_px")
    src_x, src_y, src_w, src_h = (int(v) for v in given) if given else (0, 0, width, height)
    offset = header.get("offset_px") or (0, 0)
    off_x = max(0, min(int(offset[0]), cell_w - 1))
    off_y = max(0, min(int(offset[1]), cell_h - 1))
    z = int(header.get("z", 0))
    # The cells the image covers (the terminal keeps the aspect for a missing one).
    cols = grid_cols or (-(-grid_rows * cell_h * src_w // (src_h * cell_w)) if grid_rows
                         else -(-(off_x + src_w) // cell_w))
    rows = grid_rows or (-(-grid_cols * cell_w * src_h // (src_w * cell_h)) if grid_cols
                         else -(-(off_y + src_h) // cell_h))
    left, top, area_w, area_h = area
    c0, c1 = max(0, -col), min(cols, area_w - col)
    r0, r1 = max(0, -row), min(rows, area_h - row)
    if c1 <= c0 or r1 <= r0:
        return None
    at_row, at_col = top + row + r0, left + col + c0
    scaled = bool(grid_cols or grid_rows)
    if (c0, r0, c1, r1) == (0, 0, cols, rows):
        return Placement(at_row, at_col, grid_cols, grid_rows,
                         (src_x, src_y, src_w, src_h) if given else None, (off_x, off_y), z)
    # In pixels from the first cell's corner, the image spans [offset, end): its own size,
    # or to the edge of its cells when scaled. The shown cells keep their share of it.
    x, w, shown_x = _crop(off_x, off_x + src_w if not scaled else cols * cell_w,
                          c0 * cell_w, c1 * cell_w, src_x, src_w)
    y, h, shown_y = _crop(off_y, off_y + src_h if not scaled else rows * cell_h,
                          r0 * cell_h, r1 * cell_h, src_y, src_h)
    if scaled:
        return Placement(at_row, at_col, c1 - c0, r1 - r0, (x, y, w, h),
                         (shown_x, shown_y), z)
    return Placement(at_row, at_col, 0, 0, (x, y, w, h), (shown_x, shown_y), z)


def _crop(start: int, end: int, keep_from: int, keep_to: int, source: int, size: int
          ) -> tuple[int, int, int]:
    """One axis of a crop: the image spans pixels ``start`` to ``end`` of its cells and
    shows ``size`` pixels of its own from ``source``; only ``keep_from`` to ``keep_to``
    stay. Returns the first source pixel shown, how many, and the offset from the first
    kept cell's corner."""
    first, last = max(start, keep_from), min(end, keep_to)
    span = end - start
    begin = source + (first - start) * size // span
    return begin, max(1, source + (last - start) * size // span - begin), first - keep_from


def hide(image_id: int) -> bytes:
    """The sequence that removes image ``image_id``'s placements, keeping its data."""
    return _apc(f"a=d,d=i,i={image_id},q=2")


def delete(image_id: int) -> bytes:
    """The sequence that deletes image ``image_id`` and frees its data."""
    return _apc(f"a=d,d=I,i={image_id},q=2")


class AreaLayers:
    """A pane's layers as kitty images over an area of the screen (``cmux ui``'s pane
    area, or the whole terminal under ``cmux attach``), written through ``write``.

    :meth:`frame` takes the server's ``graphics``/``graphics_clear`` frames; :meth:`draw`,
    called after each screen is drawn, sends what changed: a layer's image once per new
    image (:func:`store`), then its placement over the area, cropped to it (:func:`fit`),
    again only when the area or the placement moved; a layer wholly outside the area is
    hidden. With ``one_step``, a new image that shows is sent and placed in one sequence
    (:func:`transmit`), which suits a client whose layers rarely move. :meth:`forget`
    deletes every image.
    """

    def __init__(self, write: Callable[[bytes], None], cell: tuple[int, int], *,
                 one_step: bool = False) -> None:
        self.write = write
        self.cell = cell
        self.one_step = one_step
        self._layers: dict[str, tuple[dict[str, Any], bytes]] = {}
        self._ids: dict[str, int] = {}
        self._stored: set[str] = set()
        """Layers whose latest image the terminal holds."""
        self._placed: dict[str, Placement | None] = {}
        self._gone: list[int] = []

    def frame(self, header: dict[str, Any], payload: bytes) -> None:
        layer = str(header.get("layer_id"))
        if header.get("frame") == "graphics":
            self._ids.setdefault(layer, FIRST_ID + len(self._ids))
            self._layers[layer] = (header, payload)
            self._stored.discard(layer)
        elif layer in self._layers:
            del self._layers[layer]
            self._stored.discard(layer)
            self._placed.pop(layer, None)
            self._gone.append(self._ids[layer])

    def draw(self, area: tuple[int, int, int, int] | None) -> None:
        """Bring the terminal's images up to date for the pane area ``area`` (screen column,
        row, width, height; None: not on screen)."""
        out = [delete(image_id) for image_id in self._gone]
        self._gone.clear()
        for layer, (header, payload) in self._layers.items():
            image_id = self._ids[layer]
            where = None if area is None else fit(header, self.cell, area)
            if layer not in self._stored:
                self._stored.add(layer)
                if self.one_step and where is not None:
                    out.append(transmit(image_id, header, payload, where))
                    self._placed[layer] = where
                    continue
                out.append(store(image_id, header, payload))
                self._placed.pop(layer, None)
            if layer in self._placed and self._placed[layer] == where:
                continue
            if where is not None:
                out.append(place(image_id, where))
            elif self._placed.get(layer) is not None:
                out.append(hide(image_id))
            self._placed[layer] = where
        if out:
            self.write(b"".join(out))

    def erased(self) -> None:
        """The screen was erased (terminals may drop images then): the next :meth:`draw`
        sends every image again."""
        self._stored.clear()
        self._placed.clear()

    def forget(self) -> None:
        """Delete every image from the terminal (the ui leaves the screen); the layers are
        kept, so the next :meth:`draw` shows them again."""
        if self._ids:
            self.write(b"".join(delete(image_id) for image_id in self._ids.values()))
        self._stored.clear()
        self._placed.clear()
        self._gone.clear()

    def reset(self) -> None:
        """Delete every image and forget the layers (another pane is shown)."""
        self.forget()
        self._layers.clear()
        self._ids.clear()
