"""Errors that reach a socket client.

Every error a request can end with is a :class:`CmuxError`: it carries the wire
``code`` (snake_case), a human ``message`` and optional ``data``. Handlers raise
them; the dispatcher turns them into ``{"ok": false, "error": {...}}`` lines and
nothing else about the server changes.

::

    CmuxError                      code given per instance
    ├── ProtocolError              envelope problems (parse_error, invalid_request, ...)
    │   └── RequestTooLarge        request_too_large
    ├── MethodNotFound             method_not_found
    ├── InvalidPart                a named part is wrong (the message starts with its name)
    │   ├── InvalidParams          invalid_params (``data.field``)
    │   └── InvalidNode            a tree's node (``data.path``): invalid_layout, ...
    ├── NotFound                   <kind>_not_found (workspace, tab, pane, window, ...)
    ├── InvalidKey                 invalid_key
    ├── InvalidEnv                 invalid_env
    ├── WaitTimeout                timeout
    └── InternalError              internal_error

:class:`Disconnected` is not a CmuxError: it never reaches a client, since it means the
client is gone.

Codes are not a closed set: method-specific codes (``invalid_regex``,
``pane_send_failed``, ...) are raised as plain ``CmuxError(code, message)``.
"""

from __future__ import annotations

from typing import Any


class CmuxError(Exception):
    """An error with a wire code, a message and optional structured data."""

    code = "internal_error"

    def __init__(self, code: str | None = None, message: str = "", data: Any = None) -> None:
        if code is not None:
            self.code = code
        self.message = message or self.code.replace("_", " ")
        self.data = data
        super().__init__(f"{self.code}: {self.message}")

    def to_wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            body["data"] = self.data
        return body


class ProtocolError(CmuxError):
    code = "invalid_request"


class RequestTooLarge(ProtocolError):
    code = "request_too_large"


class MethodNotFound(CmuxError):
    code = "method_not_found"

    def __init__(self, method: str) -> None:
        super().__init__(message=f"unknown method {method!r}", data={"method": method})


class InvalidPart(CmuxError):
    """A named part of a request is wrong: the message starts with the name, and ``data``
    carries it under :attr:`part_key` (both left out when the name is empty)."""

    part_key = "field"

    def __init__(self, part: str, message: str) -> None:
        super().__init__(message=f"{part}: {message}" if part else message,
                         data={self.part_key: part} if part else None)
        self.part = part


class InvalidParams(InvalidPart):
    """A parameter is missing, of the wrong type or out of range; ``field`` names it."""

    code = "invalid_params"

    @property
    def field(self) -> str:
        return self.part


class InvalidNode(InvalidPart):
    """A node of a tree the request carries (a layout, a view's filter) is wrong; ``path``
    names it (``root.first``, ``filter.filters[1]``)."""

    part_key = "path"

    @property
    def path(self) -> str:
        return self.part


class NotFound(CmuxError):
    """An id that names nothing: code ``<kind>_not_found``."""

    def __init__(self, kind: str, ident: object = None, message: str | None = None) -> None:
        if message is None:
            message = f"{kind} {ident} not found" if ident is not None else f"{kind} not found"
        super().__init__(f"{kind}_not_found", message)
        self.kind = kind


class InvalidKey(CmuxError):
    code = "invalid_key"

    def __init__(self, key: str) -> None:
        super().__init__(message=f"unsupported key {key}", data={"key": key})


class InvalidEnv(CmuxError):
    code = "invalid_env"


class WaitTimeout(CmuxError):
    code = "timeout"


class InternalError(CmuxError):
    code = "internal_error"


class Disconnected(Exception):
    """The peer went away while its request was being served.

    Raised by the connection's ``until_gone``; it passes through handlers and plugin code
    untouched, the dispatcher lets it through with a debug line only, and the connection
    sends nothing, since nobody is left to read a reply.
    """
