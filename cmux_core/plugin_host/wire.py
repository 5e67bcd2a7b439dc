"""The pipe between the server and a plugin's own process: frames and what crosses in them.

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON (an object), at most
:data:`MAX_FRAME` bytes; both ends use these functions, so the framing lives here only.
Values are plain JSON; :func:`to_json` turns the read-only mappings, paths, tuples and sets
hooks receive into JSON and a :class:`~cmux_core.plugin_host.settings_files.FileChange` into a
tagged object that :func:`file_change` turns back. Anything else is refused with the type
named, so a plugin learns what cannot cross a process.
"""

from __future__ import annotations

import json
import socket
import struct
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["MAX_FRAME", "FrameError", "RemoteError", "decode", "encode", "error_of", "exception_of",
           "file_change", "read_frame", "to_json"]

MAX_FRAME = 4 << 20
"""Bytes one frame may hold; decoding one runs on the server loop, so it is kept small."""

_HEADER = struct.Struct(">I")
FILE_CHANGE_TAG = "__cmux_file_change__"


class FrameError(ValueError):
    """A frame that is too big, not JSON, or not an object; the pipe cannot be trusted after."""


def to_json(value: Any) -> Any:
    """``json.dumps``'s ``default``: what hooks pass and plugins return, as JSON."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    from cmux_core.plugin_host.settings_files import FileChange

    if isinstance(value, FileChange):
        return {FILE_CHANGE_TAG: True, "path": str(value.path), "before": value.before,
                "after": value.after,
                "backup": str(value.backup) if value.backup is not None else None}
    raise TypeError(f"a {type(value).__name__} cannot be sent to or from a plugin process "
                    "(only JSON values, mappings, paths and FileChange records can)")


def encode(message: Mapping[str, Any]) -> bytes:
    """One frame holding ``message``; raises TypeError for a value that cannot cross and
    :class:`FrameError` for one over :data:`MAX_FRAME`."""
    body = json.dumps(message, default=to_json, ensure_ascii=False,
                      separators=(",", ":")).encode()
    if len(body) > MAX_FRAME:
        raise FrameError(f"a message of {len(body)} bytes is over the {MAX_FRAME} byte limit "
                         "between the server and a plugin process")
    return _HEADER.pack(len(body)) + body


def frame_length(header: bytes) -> int:
    """The body length a header announces; raises :class:`FrameError` past the limit."""
    (length,) = _HEADER.unpack(header)
    if length > MAX_FRAME:
        raise FrameError(f"a frame of {length} bytes is over the {MAX_FRAME} byte limit")
    return int(length)


HEADER_SIZE = _HEADER.size


def decode(body: bytes) -> dict[str, Any]:
    try:
        message = json.loads(body)
    except ValueError as exc:
        raise FrameError(f"a frame that is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise FrameError("a frame that is not a JSON object")
    return message


def read_frame(sock: socket.socket) -> dict[str, Any] | None:
    """The next frame from a blocking socket; None at end of file."""
    header = _read_exactly(sock, HEADER_SIZE)
    if header is None:
        return None
    body = _read_exactly(sock, frame_length(header))
    if body is None:
        return None
    return decode(body)


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks: list[bytes] = []
    left = size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def file_change(value: Any) -> Any:
    """A decoded value with tagged file changes (in it or in a list) made records again."""
    from cmux_core.plugin_host.settings_files import FileChange

    def one(item: Any) -> Any:
        if isinstance(item, dict) and item.get(FILE_CHANGE_TAG):
            backup = item.get("backup")
            return FileChange(Path(item["path"]), item.get("before"), item.get("after"),
                              Path(backup) if backup else None)
        return item

    if isinstance(value, list):
        return [one(item) for item in value]
    return one(value)


class RemoteError(Exception):
    """An exception raised on the other side of the pipe; its class is named after the
    original's, so a fault message reads the same as in a thread (``ValueError: boom``)."""


_REMOTE_TYPES: dict[str, type[RemoteError]] = {}


def error_of(exc: BaseException) -> dict[str, Any]:
    """``exc`` as the ``error`` of a failed answer."""
    from cmux_core.errors import CmuxError
    from cmux_core.plugin_host.calls import describe
    from cmux_core.plugin_host.settings_files import SettingsError

    if isinstance(exc, CmuxError):
        return {"kind": "CmuxError", "code": exc.code, "message": exc.message,
                "data": json.loads(json.dumps(exc.data, default=str))}
    kind = type(exc).__name__
    return {"kind": kind, "message": describe(exc).removeprefix(f"{kind}: "),
            "settings": isinstance(exc, SettingsError),
            "traceback": "".join(traceback.format_exception(exc))}


def exception_of(error: Mapping[str, Any]) -> Exception:
    """The exception to raise for a failed answer's ``error`` (see :func:`error_of`)."""
    from cmux_core.errors import CmuxError
    from cmux_core.plugin_host.settings_files import SettingsError

    kind = str(error.get("kind") or "Error")
    message = str(error.get("message") or "")
    if kind == "CmuxError":
        return CmuxError(str(error.get("code") or "plugin_failed"), message, error.get("data"))
    if error.get("settings"):
        return SettingsError(message)
    if not kind.isidentifier():
        kind = "Error"
    cls = _REMOTE_TYPES.get(kind)
    if cls is None:
        cls = _REMOTE_TYPES[kind] = type(kind, (RemoteError,), {})
    exc = cls(message)
    if error.get("traceback"):
        exc.add_note(f"in the plugin's process:\n{error['traceback']}".rstrip())
    return exc
