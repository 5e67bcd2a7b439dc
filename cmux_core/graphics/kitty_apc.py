"""The kitty graphics protocol as a program in a pane speaks it: finding its sequences in
the pane's output, parsing a command, loading the image it carries, and the replies.

:class:`OutputScanner` splits a pane's output into text for the emulator and the pieces
graphics cares about: kitty graphics commands (``ESC _ G <control> ; <payload> ESC \\``)
and the sequences that erase the screen (``ED 2``, ``ED 3``, ``RIS``). It keeps its state
across reads, so a sequence split between two reads is found whole. It is bounded: a
command longer than :data:`APC_MAX_BYTES` is dropped as it arrives (and reported as too
large once it ends), and a command that never ends ends at the first byte that cannot be
in one (a control character other than its terminator, or a non-ASCII byte); that byte
and what follows are text again.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import re
import stat
import struct
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

IMAGE_MAX_BYTES = 16 * 1024 * 1024
"""Decoded (and decompressed) image bytes one program image may hold."""
APC_MAX_BYTES = IMAGE_MAX_BYTES * 4 // 3 + 4096
"""Bytes one graphics command may carry: an image's base64 in one piece, plus its keys."""

FORMATS = {24: "rgb", 32: "rgba", 100: "png"}
"""``f`` values a program may send and the layer formats they become."""

_CHAR_KEYS = frozenset("atodU")
_INT_KEYS = frozenset("fsvSOiIpxywhXYcrCzPQHVmq")
_SIGNED_KEYS = frozenset("zHV")
_TEXT_EVENT = re.compile(rb"\x1b(?:_G|c|\[[23]J)")
_TEXT_TAIL = re.compile(rb"\x1b(?:_|\[[23]?)?\Z")
_NOT_IN_APC = re.compile(rb"[^\x20-\x7e]")


class KittyError(Exception):
    """A command the terminal refuses: ``code`` is the errno-style word of the reply
    (``EINVAL``, ``ENOENT``, ``ENOSPC``, ...) and the message follows it."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}:{message}")
        self.code = code
        self.message = message


# -- scanning output ----------------------------------------------------------------------

PieceKind = Literal["text", "command", "too_large", "clear"]


@dataclass(frozen=True, slots=True)
class Piece:
    """One piece of output in order: ``text`` for the emulator, a graphics ``command``
    (``data`` is what follows ``ESC _ G``), ``too_large`` for a command that was dropped,
    ``clear`` after an erasing sequence (itself in the text before it)."""

    kind: PieceKind
    data: bytes = b""


class OutputScanner:
    """Finds kitty graphics commands and screen erasures in one pane's output."""

    def __init__(self, max_command: int = APC_MAX_BYTES) -> None:
        self.max_command = max_command
        self._carry = b""
        self._command: bytearray | None = None
        """The command being read (None: in text)."""
        self._dropping = False

    def scan(self, data: bytes) -> list[Piece]:
        """The pieces ``data`` completes, in order; bytes that may begin a sequence are
        kept for the next call."""
        if self._carry:
            data, self._carry = self._carry + data, b""
        pieces: list[Piece] = []
        pos, end = 0, len(data)
        while pos < end:
            if self._command is not None:
                pos = self._in_command(data, pos, pieces)
                continue
            found = _TEXT_EVENT.search(data, pos)
            if found is None:
                tail = _TEXT_TAIL.search(data, max(pos, end - 4))
                stop = tail.start() if tail else end
                if stop > pos:
                    pieces.append(Piece("text", data[pos:stop]))
                self._carry = data[stop:]
                break
            start = found.start()
            if found.group() == b"\x1b_G":
                if start > pos:
                    pieces.append(Piece("text", data[pos:start]))
                self._command = bytearray()
                self._dropping = False
                pos = found.end()
            else:
                pieces.append(Piece("text", data[pos:found.end()]))
                pieces.append(Piece("clear"))
                pos = found.end()
        return pieces

    def _in_command(self, data: bytes, pos: int, pieces: list[Piece]) -> int:
        assert self._command is not None
        stop = _NOT_IN_APC.search(data, pos)
        body_end = stop.start() if stop else len(data)
        self._take(data[pos:body_end])
        if stop is None:
            return len(data)
        if data[body_end] == 0x1B:
            if body_end + 1 == len(data):
                self._carry = b"\x1b"
                return len(data)
            if data[body_end + 1] == 0x5C:  # ESC \ ends the command
                pieces.append(Piece("too_large") if self._dropping
                              else Piece("command", bytes(self._command)))
                self._command = None
                return body_end + 2
        # Anything else cannot be in a command: it was cut short; the rest is text again.
        self._command = None
        return body_end

    def _take(self, chunk: bytes) -> None:
        assert self._command is not None
        if self._dropping:
            return
        if len(self._command) + len(chunk) > self.max_command:
            self._dropping = True
            self._command.clear()
            return
        self._command += chunk


# -- commands -----------------------------------------------------------------------------


@dataclass(slots=True)
class Command:
    """One graphics command: its control keys (one-letter keys; ``a t o d U`` hold a
    letter, the rest integers) and its payload, still base64."""

    keys: dict[str, str | int]
    payload: bytes

    def char(self, key: str, default: str) -> str:
        value = self.keys.get(key, default)
        return value if isinstance(value, str) else default

    def int(self, key: str, default: int = 0) -> int:
        value = self.keys.get(key, default)
        return value if isinstance(value, int) else default

    @property
    def action(self) -> str:
        return self.char("a", "t")


def parse_command(data: bytes) -> Command:
    """The command in ``data`` (what followed ``ESC _ G``); ``EINVAL`` for an unknown key,
    a key without a value or a value of the wrong kind."""
    control, _, payload = data.partition(b";")
    keys: dict[str, str | int] = {}
    for part in control.decode("ascii").split(","):
        if not part:
            continue
        key, eq, value = part.partition("=")
        if len(key) != 1 or not eq or not value:
            raise KittyError("EINVAL", f"malformed control key {part!r}")
        if key in _CHAR_KEYS:
            if len(value) != 1:
                raise KittyError("EINVAL", f"the value of {key} must be one character")
            keys[key] = value
        elif key in _INT_KEYS:
            number = value[1:] if value.startswith("-") and key in _SIGNED_KEYS else value
            if not number.isdigit() or int(value) >= 2**32:
                raise KittyError("EINVAL", f"the value of {key} must be a number")
            keys[key] = int(value)
        else:
            raise KittyError("EINVAL", f"unknown control key {key!r}")
    return Command(keys, payload)


def reply(image_id: int, number: int, placement_id: int, message: str) -> bytes:
    """The reply a terminal writes back for a command that named an image."""
    keys = [f"i={image_id}"] if image_id else []
    if number:
        keys.append(f"I={number}")
    if placement_id:
        keys.append(f"p={placement_id}")
    return f"\x1b_G{','.join(keys)};{message}\x1b\\".encode()


# -- image data ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pixels:
    format: str
    width: int
    height: int
    data: bytes


def decode_base64(payload: bytes) -> bytes:
    """The payload's bytes; ``EINVAL`` when it is not standard base64."""
    payload = payload.rstrip(b"=") + b"=" * (-len(payload.rstrip(b"=")) % 4)
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise KittyError("EINVAL", "the payload is not valid base64") from None


def read_medium(command: Command, payload: bytes) -> bytes:
    """The image bytes a command transmits: its payload (``t=d``) or the file (``t=f``),
    temporary file (``t=t``, removed after reading) or shared memory object (``t=s``,
    unlinked after reading) its payload names, read from ``O`` for ``S`` bytes."""
    medium = command.char("t", "d")
    if medium == "d":
        return payload
    if medium not in "fts":
        raise KittyError("EINVAL", f"unknown transmission medium {medium!r}")
    name = payload.decode("utf-8", "replace")
    if medium == "s":
        if "/" in name.lstrip("/") or name.strip("/") in ("", ".", ".."):
            raise KittyError("EINVAL", f"{name!r} is not a shared memory object name")
        path = Path("/dev/shm", name.lstrip("/"))
    else:
        path = Path(name)
    if not path.is_absolute():
        raise KittyError("EINVAL", "the file path must be absolute")
    offset, size = command.int("O"), command.int("S")
    # What is removed after reading must be the file named, never a link's target.
    flags = os.O_RDONLY | os.O_NONBLOCK | (os.O_NOFOLLOW if medium != "f" else 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise KittyError("EBADF", f"cannot open {name}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise KittyError("EINVAL", f"{name} is not a regular file")
        length = size or max(0, info.st_size - offset)
        if length > IMAGE_MAX_BYTES:
            raise KittyError("EFBIG", f"{name} holds more than {IMAGE_MAX_BYTES} bytes")
        data = os.pread(fd, length, offset)
    finally:
        os.close(fd)
    if medium == "s" or (medium == "t" and _removable_temp(path)):
        with contextlib.suppress(OSError):
            path.unlink()
    return data


def _removable_temp(path: Path) -> bool:
    """A temporary file a terminal may delete: in a temporary directory and named for the
    graphics protocol, so a command cannot remove any other file."""
    temp_dirs = {Path(tempfile.gettempdir()), Path("/tmp"), Path("/dev/shm")}
    return "tty-graphics-protocol" in path.name and path.parent in temp_dirs


def load_pixels(command: Command, data: bytes) -> Pixels:
    """The image of a transmission: ``data`` decompressed (``o=z``) and checked against
    the format (``f``) and size (``s``, ``v``); the kitty error otherwise."""
    fmt = FORMATS.get(command.int("f", 32))
    if fmt is None:
        raise KittyError("EINVAL", f"unknown format f={command.int('f', 32)}")
    compression = command.char("o", "")
    if compression == "z":
        inflater = zlib.decompressobj()
        try:
            data = inflater.decompress(data, IMAGE_MAX_BYTES + 1)
        except zlib.error:
            raise KittyError("EINVAL", "the zlib data is corrupt") from None
        if not inflater.eof:
            raise KittyError("EFBIG" if len(data) > IMAGE_MAX_BYTES else "EINVAL",
                             "the zlib data is too large or incomplete")
    elif compression:
        raise KittyError("EINVAL", f"unknown compression o={compression}")
    if len(data) > IMAGE_MAX_BYTES:
        raise KittyError("EFBIG", f"the image holds more than {IMAGE_MAX_BYTES} bytes")
    if fmt == "png":
        width, height = png_size(data)
        return Pixels(fmt, width, height, data)
    width, height = command.int("s"), command.int("v")
    if not width or not height:
        raise KittyError("EINVAL", "s and v (the image's width and height) are required")
    expected = width * height * (3 if fmt == "rgb" else 4)
    if len(data) != expected:
        raise KittyError("ENODATA", f"{fmt} data of {width}x{height} must be {expected} "
                         f"bytes, not {len(data)}")
    return Pixels(fmt, width, height, data)


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's header chunk; ``EBADPNG`` when it has none."""
    if len(data) < 24 or not data.startswith(b"\x89PNG\r\n\x1a\n") or data[12:16] != b"IHDR":
        raise KittyError("EBADPNG", "not a PNG image")
    width, height = struct.unpack(">II", data[16:24])
    if not width or not height:
        raise KittyError("EBADPNG", "the PNG image has no pixels")
    return width, height
