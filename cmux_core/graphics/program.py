"""Images a program in a pane draws with the kitty graphics protocol, as layers of its pane.

With pane graphics on, :class:`ProgramGraphics` sits where a pane's output reaches its
emulator (the terminal's ``output_hook``). It takes the kitty graphics commands out of the
output (see :mod:`~cmux_core.graphics.kitty_apc`), answers them on the PTY as a kitty
terminal does, and turns each image placed on the screen into a layer of the pane owned by
``program`` (layer id ``program:<image id>``, or ``program:<image id>:<placement id>``),
which attached clients draw like any other layer.

A placed image sits at the cursor's cell and the cursor moves past it (unless ``C=1``); it
moves up as the screen scrolls, is dropped once it has scrolled off, and every placement
goes when the screen is erased (``ED 2``, ``ED 3``, ``RIS``) or the program switches
between the main and the alternate screen. Program layers count toward the book's limits;
a command that would break one is answered ``ENOSPC`` and changes nothing.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from cmux_core.errors import CmuxError
from cmux_core.graphics.kitty_apc import (
    APC_MAX_BYTES,
    IMAGE_MAX_BYTES,
    Command,
    KittyError,
    OutputScanner,
    Pixels,
    decode_base64,
    load_pixels,
    parse_command,
    read_medium,
    reply,
)
from cmux_core.graphics.layers import (
    BUDGET_BYTES,
    PROGRAM_OWNER,
    GraphicsBook,
    Image,
    Placement,
)
from cmux_core.model.tree import Pane

log = logging.getLogger(__name__)

OWNER = PROGRAM_OWNER
STORE_MAX_BYTES = 64 * 1024 * 1024
"""Transmitted image bytes kept for later placement across the server; past it the
oldest images are forgotten first."""
DEFAULT_CELL = (10, 20)
"""Cell size in pixels assumed for an image's span when no attached client said its own."""
ANONYMOUS_FIRST_ID = 0xC0000000
"""Ids given to images sent without ``i`` (or with ``I``) count up from here."""
_ERROR_CODES = {"layer_limit": "ENOSPC", "graphics_budget_exceeded": "ENOSPC",
                "image_too_large": "EFBIG", "stream_conflict": "EBUSY",
                "invalid_image": "EINVAL"}
_REPLY = re.compile(rb"(?:[iIp]=\d+,?)+;(?:OK|E[A-Z]+:.*)", re.DOTALL)
_ID_KEYS = re.compile(rb"(?:^|,)([iIp])=(\d{1,10})(?=,|;|$)")

Feed = Callable[[bytes], None]


class _Modes(Protocol):
    @property
    def alt_screen(self) -> bool: ...


class _Screen(Protocol):
    @property
    def lines(self) -> int: ...

    @property
    def columns(self) -> int: ...

    @property
    def modes(self) -> _Modes: ...

    @property
    def scrolled(self) -> int: ...

    def cursor(self) -> tuple[int, int]: ...

    def take_replies(self) -> bytes: ...


class ProgramTerminal(Protocol):
    """What is used of a pane's terminal: its screen, writing to its PTY, and the hook
    its output passes through on the way to the screen."""

    @property
    def emulator(self) -> _Screen: ...

    output_hook: Callable[[bytes, Feed], None] | None

    def write(self, data: bytes) -> None: ...


@dataclass(slots=True)
class Placed:
    """One image on the screen: its layer, its cells (row relative to the viewport), its
    stacking order, its offset in pixels into its first cell, the part of it shown and the
    cells it was asked to be scaled to (``c`` and ``r``; 0: its own size)."""

    layer_id: str
    image_id: int
    placement_id: int
    col: int
    row: int
    cols: int
    rows: int
    z: int
    offset: tuple[int, int] = (0, 0)
    source: tuple[int, int, int, int] | None = None
    scaled: tuple[int, int] = (0, 0)


class ProgramGraphics:
    """Every pane's program images: the transmitted ones kept for placement and a
    :class:`ProgramScreen` per terminal."""

    def __init__(self, book: GraphicsBook) -> None:
        self.book = book
        self.images: OrderedDict[tuple[str, int], Pixels] = OrderedDict()
        self.numbers: dict[tuple[str, int], int] = {}
        """(pane key, image number ``I``) -> the image id it was given."""
        self._stored = 0
        self._screens: dict[str, list[ProgramScreen]] = {}

    def terminal_started(self, pane: Pane, terminal: ProgramTerminal) -> None:
        """Pass ``terminal``'s output through a screen of ``pane`` from now on."""
        screen = ProgramScreen(self, pane, terminal)
        self._screens.setdefault(pane.key, []).append(screen)
        terminal.output_hook = screen.feed

    def pane_closed(self, pane_key: str) -> None:
        """Forget the pane's images (the book drops its layers itself)."""
        self._screens.pop(pane_key, None)
        for key in [key for key in self.images if key[0] == pane_key]:
            self._forget(key)
        for key in [key for key in self.numbers if key[0] == pane_key]:
            del self.numbers[key]

    def store(self, pane_key: str, image_id: int, pixels: Pixels) -> None:
        key = (pane_key, image_id)
        if key in self.images:
            self._forget(key)
        while self.images and self._stored + len(pixels.data) > STORE_MAX_BYTES:
            self._forget(next(iter(self.images)))
        self.images[key] = pixels
        self._stored += len(pixels.data)

    def forget(self, pane_key: str, image_id: int) -> None:
        if (pane_key, image_id) in self.images:
            self._forget((pane_key, image_id))

    def _forget(self, key: tuple[str, int]) -> None:
        self._stored -= len(self.images.pop(key).data)


@dataclass(slots=True)
class _Transfer:
    """A transmission arriving in chunks (``m=1``): its first command and the payload."""

    command: Command
    parts: list[bytes]
    size: int
    error: KittyError | None = None


class ProgramScreen:
    """One terminal's kitty graphics: its output scanner, a transmission in progress and
    the images placed on its screen."""

    def __init__(self, owner: ProgramGraphics, pane: Pane, terminal: ProgramTerminal) -> None:
        self.owner = owner
        self.book = owner.book
        self.pane = pane
        self.terminal = terminal
        self.scanner = OutputScanner()
        self.placed: dict[str, Placed] = {}
        self._transfer: _Transfer | None = None
        self._next_id = ANONYMOUS_FIRST_ID
        self._alt = terminal.emulator.modes.alt_screen
        self._scrolled = terminal.emulator.scrolled

    # -- output -------------------------------------------------------------------------

    def feed(self, data: bytes, feed: Feed) -> None:
        """Give ``data``'s text to the screen through ``feed`` and act on its graphics, in
        the order they came."""
        for piece in self.scanner.scan(data):
            if piece.kind == "text":
                feed(piece.data)
                self._follow_screen()
                continue
            try:
                if piece.kind == "clear":
                    self._remove_all()
                elif piece.kind == "too_large":
                    self._too_large()
                else:
                    self._command(piece.data, feed)
            except Exception:
                # A fault here loses this command, never the pane's output.
                log.exception("kitty graphics command of pane %s failed", self.pane.id)

    def _follow_screen(self) -> None:
        """Move placed images up by the rows the whole screen scrolled (the emulator's
        count: main or alternate screen, scrollback full or not); drop them all when the
        program switched screens."""
        alt = self.terminal.emulator.modes.alt_screen
        now = self.terminal.emulator.scrolled
        scrolled, self._scrolled = now - self._scrolled, now
        if alt != self._alt:
            self._alt = alt
            self._remove_all()
        elif scrolled > 0 and self.placed:
            for placed in list(self.placed.values()):
                self._move(placed, placed.row - scrolled)

    def _move(self, placed: Placed, row: int) -> None:
        layer = self.book.layer(self.pane, placed.layer_id)
        if layer is None or layer.owner != OWNER or layer.image is None:
            self.placed.pop(placed.layer_id, None)
            return
        placed.row = row
        if row + placed.rows <= 0:
            self._remove(placed)
            return
        self.book.move(layer, self._placement(placed))

    def _remove(self, placed: Placed) -> None:
        self.placed.pop(placed.layer_id, None)
        self.book.release(self.pane, placed.layer_id, OWNER)

    def _remove_all(self) -> None:
        for placed in list(self.placed.values()):
            self._remove(placed)

    @staticmethod
    def _placement(placed: Placed) -> Placement:
        return Placement(placed.col, placed.row, placed.scaled[0], placed.scaled[1],
                         placed.offset[0], placed.offset[1], placed.source, placed.z)

    # -- commands -----------------------------------------------------------------------

    def _command(self, data: bytes, feed: Feed) -> None:
        transfer = self._transfer
        if transfer is not None:
            self._chunk(transfer, data, feed)
            return
        try:
            command = parse_command(data)
        except (KittyError, UnicodeDecodeError) as exc:
            ids = {key.decode(): int(value) for key, value in
                   _ID_KEYS.findall(data.partition(b";")[0])}
            error = exc if isinstance(exc, KittyError) else KittyError("EINVAL", "not ASCII")
            if ids.get("i") or ids.get("I"):
                self._write(reply(ids.get("i", 0), ids.get("I", 0), ids.get("p", 0),
                                  f"{error.code}:{error.message}"))
            return
        if _REPLY.fullmatch(data):
            return  # a terminal's answer echoed back; answering it would never end
        action = command.action
        if action in "tTq" and command.int("m"):
            self._transfer = _Transfer(command, [command.payload], len(command.payload))
            return
        self._act(command, command.payload, feed)

    def _chunk(self, transfer: _Transfer, data: bytes, feed: Feed) -> None:
        control, _, payload = data.partition(b";")
        more = re.search(rb"(?:^|,)m=1(?:,|$)", control) is not None
        if transfer.error is None:
            transfer.size += len(payload)
            if transfer.size > APC_MAX_BYTES:
                transfer.error = KittyError("EFBIG", "the image is too large")
                transfer.parts.clear()
            else:
                transfer.parts.append(payload)
        if more:
            return
        self._transfer = None
        if transfer.error is not None:
            self._answer(transfer.command, transfer.error)
        else:
            self._act(transfer.command, b"".join(transfer.parts), feed)

    def _too_large(self) -> None:
        transfer, self._transfer = self._transfer, None
        error = KittyError("EFBIG", "the command is too large")
        if transfer is not None:
            self._answer(transfer.command, error)
        else:
            log.info("dropped an oversized kitty graphics command of pane %s", self.pane.id)

    def _act(self, command: Command, payload: bytes, feed: Feed) -> None:
        action = command.action
        try:
            if action in "tTq":
                image_id = self._transmit(command, payload, feed)
                if action == "q":
                    image_id = command.int("i")
            elif action == "p":
                image_id = self._image_id(command)
                pixels = self.owner.images.get((self.pane.key, image_id))
                if pixels is None:
                    raise KittyError("ENOENT", f"no image with id {image_id}")
                self._put(command, image_id, pixels, feed)
            elif action == "d":
                self._delete(command)
                return
            else:
                raise KittyError("ENOTSUP", f"action a={action} is not supported")
        except KittyError as exc:
            self._answer(command, exc)
            return
        except CmuxError as exc:
            self._answer(command, KittyError(_ERROR_CODES.get(exc.code, "EINVAL"),
                                             exc.message))
            return
        self._answer(command, None, image_id)

    def _answer(self, command: Command, error: KittyError | None, image_id: int = 0) -> None:
        """Reply as kitty does: only to commands naming an image (``i`` or ``I``), not
        with ``OK`` under ``q=1`` and not at all under ``q=2``."""
        quiet = command.int("q")
        number = command.int("I")
        image_id = image_id or command.int("i")
        if not (command.int("i") or number) or quiet >= 2 or (error is None and quiet == 1):
            return
        message = "OK" if error is None else f"{error.code}:{error.message}"
        self._write(reply(image_id, number, command.int("p"), message))

    def _write(self, data: bytes) -> None:
        # Replies the screen owes for earlier output go first, so answers keep their order.
        with contextlib.suppress(CmuxError):
            self.terminal.write(self.terminal.emulator.take_replies() + data)

    def _image_id(self, command: Command) -> int:
        image_id, number = command.int("i"), command.int("I")
        if image_id and number:
            raise KittyError("EINVAL", "i and I must not both be given")
        if number:
            known = self.owner.numbers.get((self.pane.key, number))
            if known is None:
                raise KittyError("ENOENT", f"no image with number {number}")
            return known
        if not image_id:
            raise KittyError("EINVAL", "i or I is required")
        return image_id

    def _transmit(self, command: Command, payload: bytes, feed: Feed) -> int:
        """Load the image a ``t``, ``T`` or ``q`` command carries; keep it (not for ``q``)
        and place it (``T``). Returns its id."""
        if command.int("i") and command.int("I"):
            raise KittyError("EINVAL", "i and I must not both be given")
        pixels = load_pixels(command, read_medium(command, decode_base64(payload)))
        if command.action == "q":
            return 0
        image_id = command.int("i")
        if not image_id:
            image_id = self._next_id
            self._next_id += 1
        if command.action == "T":
            self._put(command, image_id, pixels, feed)
        self.owner.store(self.pane.key, image_id, pixels)
        if command.int("I"):
            self.owner.numbers[(self.pane.key, command.int("I"))] = image_id
        return image_id

    def _put(self, command: Command, image_id: int, pixels: Pixels, feed: Feed) -> None:
        """Place image ``image_id`` at the cursor and move the cursor past it; raises,
        changing nothing, when it cannot be placed."""
        if command.char("U", "0") == "1" or command.int("P") or command.int("Q"):
            raise KittyError("ENOTSUP", "virtual and relative placements are not supported")
        placement_id = command.int("p")
        layer_id = f"{OWNER}:{image_id}" + (f":{placement_id}" if placement_id else "")
        source = _source(command, pixels)
        width, height = (pixels.width, pixels.height) if source is None else source[2:]
        offset = command.int("X"), command.int("Y")
        cell_w, cell_h = self.book.cell_size(self.pane.key) or DEFAULT_CELL
        cols, rows = command.int("c"), command.int("r")
        if cols and not rows:  # scaled to a width: its height keeps the aspect
            rows = math.ceil(cols * cell_w * height / (width * cell_h))
        elif rows and not cols:
            cols = math.ceil(rows * cell_h * width / (height * cell_w))
        cols = cols or math.ceil((offset[0] + width) / cell_w)
        rows = rows or math.ceil((offset[1] + height) / cell_h)
        col, row = self.terminal.emulator.cursor()
        placed = Placed(layer_id, image_id, placement_id, col, row, cols, rows, command.int("z"),
                        offset, source, (command.int("c"), command.int("r")))
        image = Image(pixels.format, pixels.width, pixels.height, pixels.data)
        layer = self.book.layer(self.pane, layer_id)
        if layer is None or layer.owner != OWNER:
            held = self.book.bytes_held + len(image.data)
            if held > BUDGET_BYTES:
                raise KittyError("ENOSPC", f"the {BUDGET_BYTES >> 20} MiB graphics budget "
                                 "is full")
            self.book.claim(self.pane, layer_id, OWNER)
        try:
            self.book.set(self.pane, layer_id, image, self._placement(placed),
                          limit=IMAGE_MAX_BYTES, owner=OWNER)
        except CmuxError:
            if layer is None or layer.owner != OWNER:
                self.book.release(self.pane, layer_id, OWNER)
            raise
        self.placed[layer_id] = placed
        if command.int("C") != 1:
            self._move_cursor(col, cols, rows, feed)

    def _move_cursor(self, col: int, cols: int, rows: int, feed: Feed) -> None:
        """Put the cursor after the image's last cell as kitty does: on its bottom row,
        right of it, or at the start of the next line when that is past the edge."""
        moves = b"\x1bD" * max(0, rows - 1)
        if col + cols >= self.terminal.emulator.columns:
            moves += b"\r\x1bD"
        else:
            moves += f"\x1b[{col + cols + 1}G".encode()
        feed(moves)
        self._follow_screen()

    def _delete(self, command: Command) -> None:
        """``a=d``: remove the placements ``d`` selects; an uppercase ``d`` also forgets
        the images left without a placement."""
        target = command.char("d", "a")
        which = target.lower()
        x, y = command.int("x"), command.int("y")
        selected: list[Placed]
        placed = list(self.placed.values())
        if which == "a":
            selected = placed
        elif which in "in":
            image_id = self._image_id(command)
            pid = command.int("p")
            selected = [p for p in placed
                        if p.image_id == image_id and (not pid or p.placement_id == pid)]
            if target.isupper():
                self._forget_unplaced(image_id, selected)
        elif which == "c":
            col, row = self.terminal.emulator.cursor()
            selected = [p for p in placed if _covers(p, col, row)]
        elif which == "p":
            selected = [p for p in placed if _covers(p, x - 1, y - 1)]
        elif which == "x":
            selected = [p for p in placed if p.col <= x - 1 < p.col + p.cols]
        elif which == "y":
            selected = [p for p in placed if p.row <= y - 1 < p.row + p.rows]
        elif which == "z":
            selected = [p for p in placed if p.z == command.int("z")]
        elif which == "r":
            selected = [p for p in placed if x <= p.image_id <= y]
        else:
            raise KittyError("EINVAL", f"unknown delete target d={target}")
        for p in selected:
            self._remove(p)
        if target.isupper() and which not in "in":
            left = {p.image_id for p in self.placed.values()}
            for key in [k for k in self.owner.images if k[0] == self.pane.key]:
                if key[1] not in left and (which == "a" or
                                           key[1] in {p.image_id for p in selected}):
                    self.owner.forget(*key)

    def _forget_unplaced(self, image_id: int, removing: list[Placed]) -> None:
        staying = [p for p in self.placed.values()
                   if p.image_id == image_id and p not in removing]
        if not staying:
            self.owner.forget(self.pane.key, image_id)


def _source(command: Command, pixels: Pixels) -> tuple[int, int, int, int] | None:
    """The part of the image a placement shows (``x``, ``y``, ``w``, ``h``; a zero or
    missing width or height reaches the image's edge, a larger one stops there); None for
    all of it. ``EINVAL`` when it starts outside the image."""
    x, y, w, h = (command.int(key) for key in "xywh")
    if not (x or y or w or h):
        return None
    if x >= pixels.width or y >= pixels.height:
        raise KittyError("EINVAL", f"source {x},{y} is outside the "
                         f"{pixels.width}x{pixels.height} image")
    w = min(w or pixels.width, pixels.width - x)
    h = min(h or pixels.height, pixels.height - y)
    if (x, y, w, h) == (0, 0, pixels.width, pixels.height):
        return None
    return x, y, w, h


def _covers(placed: Placed, col: int, row: int) -> bool:
    return (placed.col <= col < placed.col + placed.cols
            and placed.row <= row < placed.row + placed.rows)
