"""Wire framing: one JSON object per ``\\n``-terminated UTF-8 line, each way.

This module knows nothing of methods or state. :class:`LineSplitter` cuts the byte
stream into lines and enforces the line cap; :func:`parse_line` turns a raw line into a
:class:`Request` (or raises a :class:`~cmux_core.errors.CmuxError` carrying the id
when it could be read) and renders success, error and event lines. Output is
compact JSON, so a line never contains a raw newline.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import orjson

from cmux_core.errors import CmuxError, ProtocolError, RequestTooLarge

MAX_LINE_BYTES = 1 << 20
"""Largest accepted request line, newline excluded (1 MiB)."""

_NO_ID: Any = None
_PLAIN_IDS = frozenset({int, str, type(None)})
"""Id types that hold no float: no second look at the line for them."""


class LineSplitter:
    """Cuts incoming bytes into request lines, at most ``limit`` bytes each.

    :meth:`feed` returns, in order, each complete non-blank line and a
    :class:`~cmux_core.errors.RequestTooLarge` for each line over the limit. An over-long line
    is skipped up to its newline and never buffered whole: at most ``limit`` bytes plus one
    chunk are held at any time.
    """

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self.limit = limit
        self._buf = bytearray()
        self._skipping = False

    def feed(self, chunk: bytes) -> list[bytes | CmuxError]:
        out: list[bytes | CmuxError] = []
        buf = self._buf
        buf += chunk
        while True:
            nl = buf.find(b"\n")
            if nl < 0:
                if len(buf) > self.limit:
                    if not self._skipping:
                        self._skipping = True
                        out.append(self._too_large())
                    buf.clear()
                return out
            line = bytes(buf[:nl])
            del buf[:nl + 1]
            if self._skipping:
                self._skipping = False
                continue
            if len(line) > self.limit:
                out.append(self._too_large())
                continue
            if line.strip():
                out.append(line)

    def _too_large(self) -> CmuxError:
        return RequestTooLarge(message=f"request line exceeds {self.limit} bytes")


@dataclass(slots=True)
class Request:
    """A parsed request. ``id`` is echoed verbatim; ``None`` when the client sent none."""

    method: str
    params: dict[str, Any] = field(default_factory=dict)
    id: Any = None


class RequestError(CmuxError):
    """A request that failed before dispatch; ``request_id`` is echoed when it was read."""

    def __init__(self, error: CmuxError, request_id: Any = None) -> None:
        super().__init__(error.code, error.message, error.data)
        self.request_id = request_id


def parse_line(line: bytes) -> Request:
    """Parse one request line (without its ``\\n``; a trailing ``\\r`` is ignored).

    Raises :class:`RequestError` for every envelope defect: invalid UTF-8, bad
    JSON, a batch, a non-object, a wrong ``jsonrpc``, a missing method or a
    ``params`` that is not an object.
    """
    if line.endswith(b"\r"):
        line = line[:-1]
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        # orjson refuses invalid UTF-8 too; that gets its own error.
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise RequestError(CmuxError(
                "invalid_utf8", f"request is not valid UTF-8 ({bad.reason})")) from None
        raise RequestError(CmuxError("parse_error", f"invalid JSON: {exc}")) from None
    if type(obj) is not dict:
        if isinstance(obj, list):
            raise RequestError(ProtocolError(message="batch requests are not supported; "
                                             "send one JSON object per line"))
        raise RequestError(ProtocolError(message="expected a JSON object"))
    request_id = obj.get("id", _NO_ID)
    if type(request_id) not in _PLAIN_IDS and _holds_float(request_id):
        request_id = _exact_id(line, request_id)
    if "jsonrpc" in obj and obj["jsonrpc"] != "2.0":
        raise RequestError(ProtocolError(message='jsonrpc must be "2.0" when present'),
                           request_id)
    method = obj.get("method")
    if not isinstance(method, str) or not method.strip():
        raise RequestError(ProtocolError(message="missing method"), request_id)
    params = obj.get("params")
    if params is None:
        params = {}
    elif not isinstance(params, dict):
        raise RequestError(CmuxError("invalid_params", "params: must be an object",
                                     {"field": "params"}), request_id)
    return Request(method=method.strip(), params=params, id=request_id)


def _holds_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, list):
        return any(_holds_float(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_float(v) for v in value.values())
    return False


def _exact_id(line: bytes, parsed: Any) -> Any:
    """The id as the standard library reads it: orjson turns integers beyond 64 bits into
    floats, ``json`` keeps them exact. ``parsed`` when ``json`` cannot read the line
    (nesting past its recursion limit)."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return parsed
    return obj.get("id", _NO_ID)


def _dumps(obj: object) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)


def _reply(request_id: Any, body: dict[str, Any]) -> bytes:
    """``{"id": request_id, **body}`` as one line; the id is written exactly as it was read,
    even an integer beyond 64 bits (which orjson refuses). TypeError when ``body`` cannot
    be encoded."""
    try:
        return _dumps({"id": request_id, **body})
    except TypeError:
        try:
            orjson.dumps(request_id)
        except TypeError:
            pass
        else:
            raise
    line = _dumps({"id": None, **body})
    exact = json.dumps(request_id, separators=(",", ":")).encode()
    return b'{"id":' + exact + line[len(b'{"id":null'):]


def encode_success(request_id: Any, result: dict[str, Any]) -> bytes:
    return _reply(request_id, {"ok": True, "result": result})


def encode_error(request_id: Any, error: CmuxError) -> bytes:
    return _reply(request_id, {"ok": False, "error": error.to_wire()})


def encode_event(name: str, data: dict[str, Any]) -> bytes:
    return _dumps({"event": name, "data": data})
