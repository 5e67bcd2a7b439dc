"""Public ids, UUIDs and short refs: minting them and telling their input forms apart.

Every object has up to three handles: a public id (``w1``, ``w1:t2``, ``w1:p3``,
``term_...``), an uppercase UUID, and a short ref (``window:1``, ``workspace:2``,
``pane:3``, ``surface:4``). Public numbers are written in a bijective, one-based
base-32 over the alphabet ``123456789ABCDEFGHJKMNPQRSTVWXYZ0`` (no ``I L O U``;
``0`` is the last digit), so 1 → ``1``, 32 → ``0``, 33 → ``11``.

This module only reads the shape of a string; it never knows which objects exist.
:func:`parse_handle` says which form an input is and returns its components, and
the resolver in ``mux.py`` looks them up. Inputs are matched case-sensitively
unless said otherwise, and the first matching form below wins.

``window``
    1. short ref ``window:<n>``
    2. UUID (any case, 8-4-4-4-12 hex digits) → :class:`UuidRef`, uppercased

``workspace``
    1. short ref ``workspace:<n>``
    2. UUID
    3. public id ``w<enc>`` (e.g. ``w1``, ``wA``) → :class:`WorkspaceId`
    4. ``w_<n>`` → :class:`WorkspacePosition`, the n-th workspace in display order
    5. ``<n>`` → :class:`WorkspacePosition`, likewise

``tab``
    1. short ref ``tab:<n>`` or ``surface:<n>`` → ``ShortRef("surface", n)``: a tab
       in the cmux family is a surface (``tab:`` alone is trimmed and lowercased)
    2. UUID
    3. ``<ws>:t<enc>`` → :class:`TabNumber` (the stable tab number)
    4. ``<ws>:<n>`` → :class:`TabPosition`, the n-th tab of the workspace
    5. legacy ``t_<ws>_<n>`` → :class:`TabPosition` with ``legacy=True``

    ``<ws>`` is any workspace form above; forms 3 and 4 split on the last ``:``, form 5
    on the last ``_``.

``pane``
    1. short ref ``pane:<n>``
    2. UUID
    3. legacy raw ids ``p_<ws>_<raw>`` and ``p_<raw>`` → :class:`PaneRawId`
    4. ``<ws>:p<enc>`` → :class:`PaneNumber` (split on the last ``:p``)
    5. legacy ``<ws>-<n>`` → :class:`PaneNumber` with ``legacy=True``, n decimal
       (split on the last ``-``)

    A pane moved to another workspace keeps answering to its old public id; that
    alias table is the resolver's, so it looks the raw input up there first.

``surface``
    1. short ref ``surface:<n>``, or ``tab:<n>`` (trimmed and lowercased)
    2. UUID
    3. terminal id ``term_<lowercase hex>`` → :class:`TerminalId`

    A resolver that lets a pane handle stand for the pane's selected surface tries
    ``parse_handle("pane", s)`` when this kind gives ``None``.

``<n>`` is always ASCII decimal, at least 1, at most 18 digits, without sign; leading
zeros are allowed except in short refs, which must be written exactly as minted
(``pane:3``, not ``pane:03`` or ``Pane:3``). ``<enc>`` has 1 to 12 symbols.
"""

from __future__ import annotations

import functools
import itertools
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

ALPHABET = "123456789ABCDEFGHJKMNPQRSTVWXYZ0"
_DIGIT_VALUE = {ch: i + 1 for i, ch in enumerate(ALPHABET)}

RefKind = Literal["window", "workspace", "pane", "surface", "workspace_group"]
HandleKind = Literal["window", "workspace", "tab", "pane", "surface"]

# Decimal numbers are capped at 18 digits: no real position, ref or raw id is longer.
_DECIMAL = re.compile(r"0*[1-9][0-9]{0,17}")
_SHORT_REF = re.compile(r"([a-z_]+):([1-9][0-9]{0,17})")
_MAX_PUBLIC_DIGITS = 12
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_TERMINAL_ID = re.compile(r"term_[0-9a-f]+")

_terminal_counter = itertools.count(1)


@functools.lru_cache(maxsize=4096)
def encode_number(n: int) -> str:
    """Write ``n`` (≥ 1) in the one-based 32-symbol alphabet; ``ValueError`` below 1."""
    if n < 1:
        raise ValueError(f"public numbers start at 1, got {n}")
    out: list[str] = []
    while n > 0:
        n, digit = divmod(n - 1, 32)
        out.append(ALPHABET[digit])
    return "".join(reversed(out))


def decode_number(s: str) -> int:
    """Read a number written by :func:`encode_number`.

    Raises ``ValueError`` for an empty string or any character outside the
    alphabet (lowercase letters included: decoding is case-sensitive).
    """
    if not s:
        raise ValueError("empty public number")
    value = 0
    for ch in s:
        digit = _DIGIT_VALUE.get(ch)
        if digit is None:
            raise ValueError(f"invalid public number {s!r}")
        value = value * 32 + digit
    return value


def workspace_id(n: int) -> str:
    """Public id of the workspace with counter value ``n``: ``w<enc>``."""
    return "w" + encode_number(n)


def tab_id(ws_id: str, n: int) -> str:
    """Public id of tab number ``n`` of workspace ``ws_id``: ``<ws>:t<enc>``."""
    return f"{ws_id}:t{encode_number(n)}"


def pane_id(ws_id: str, n: int) -> str:
    """Public id of pane number ``n`` of workspace ``ws_id``: ``<ws>:p<enc>``."""
    return f"{ws_id}:p{encode_number(n)}"


def new_terminal_id() -> str:
    """A fresh opaque terminal id: ``term_`` + hex microseconds + hex process-wide counter.

    Unique within the process (the counter never repeats) and, thanks to the
    clock part, across restarts.
    """
    micros = time.time_ns() // 1000
    return f"term_{micros:x}{next(_terminal_counter):x}"


def new_uuid() -> str:
    """A random UUID in canonical uppercase form."""
    return str(uuid.uuid4()).upper()


@dataclass(frozen=True)
class ShortRef:
    """A short ref ``<kind>:<number>``; ``tab:<n>`` arrives here as kind ``surface``."""

    kind: RefKind
    number: int

    def __str__(self) -> str:
        return f"{self.kind}:{self.number}"


@dataclass(frozen=True)
class UuidRef:
    """A UUID handle, normalised to canonical uppercase."""

    uuid: str


@dataclass(frozen=True)
class WorkspaceId:
    """An exact public workspace id such as ``w3``; ``number`` is its decoded counter."""

    id: str
    number: int


@dataclass(frozen=True)
class WorkspacePosition:
    """The workspace at 1-based ``position`` in display order (``w_<n>`` or ``<n>``)."""

    position: int
    prefixed: bool


@dataclass(frozen=True)
class TabNumber:
    """``<ws>:t<enc>``: the tab whose stable public number is ``number``."""

    workspace: WorkspaceHandle
    number: int


@dataclass(frozen=True)
class TabPosition:
    """The tab at 1-based ``position`` in its workspace (``<ws>:<n>``, legacy ``t_<ws>_<n>``)."""

    workspace: WorkspaceHandle
    position: int
    legacy: bool


@dataclass(frozen=True)
class PaneNumber:
    """The pane whose public number in its workspace is ``number``.

    ``legacy`` is false for ``<ws>:p<enc>`` and true for ``<ws>-<decimal>``.
    """

    workspace: WorkspaceHandle
    number: int
    legacy: bool


@dataclass(frozen=True)
class PaneRawId:
    """Legacy raw internal id ``p_<ws>_<raw>`` (``workspace`` given) or ``p_<raw>``."""

    workspace: WorkspaceHandle | None
    raw: int


@dataclass(frozen=True)
class TerminalId:
    """A terminal id ``term_<hex>`` naming a surface's terminal."""

    id: str


WindowHandle: TypeAlias = ShortRef | UuidRef
WorkspaceHandle: TypeAlias = ShortRef | UuidRef | WorkspaceId | WorkspacePosition
TabHandle: TypeAlias = ShortRef | UuidRef | TabNumber | TabPosition
PaneHandle: TypeAlias = ShortRef | UuidRef | PaneNumber | PaneRawId
SurfaceHandle: TypeAlias = ShortRef | UuidRef | TerminalId
Handle: TypeAlias = (
    ShortRef
    | UuidRef
    | WorkspaceId
    | WorkspacePosition
    | TabNumber
    | TabPosition
    | PaneNumber
    | PaneRawId
    | TerminalId
)


def _positive_decimal(s: str) -> int | None:
    return int(s) if _DECIMAL.fullmatch(s) else None


def _public_number(s: str) -> int | None:
    # Real public numbers are short; refusing long ones keeps decoding cheap.
    if len(s) > _MAX_PUBLIC_DIGITS:
        return None
    try:
        return decode_number(s)
    except ValueError:
        return None


def _short_ref(s: str, kind: RefKind) -> ShortRef | None:
    m = _SHORT_REF.fullmatch(s)
    return ShortRef(kind, int(m[2])) if m is not None and m[1] == kind else None


def _surface_short_ref(s: str) -> ShortRef | None:
    # Only the tab: alias is forgiving about case and surrounding blanks.
    alias = s.strip().lower()
    if alias.startswith("tab:"):
        return _short_ref("surface:" + alias[4:], "surface")
    return _short_ref(s, "surface")


def _uuid(s: str) -> UuidRef | None:
    return UuidRef(s.upper()) if _UUID.fullmatch(s) else None


def parse_window_ref(s: str) -> WindowHandle | None:
    """Split a window handle into its form, or ``None`` when it has none."""
    return _short_ref(s, "window") or _uuid(s)


def parse_workspace_ref(s: str) -> WorkspaceHandle | None:
    """Split a workspace handle into its form (see the module docstring), or ``None``."""
    return _short_ref(s, "workspace") or _uuid(s) or _workspace_id(s) or _workspace_position(s)


def _workspace_id(s: str) -> WorkspaceId | None:
    if not s.startswith("w"):
        return None
    n = _public_number(s[1:])
    return WorkspaceId(s, n) if n is not None else None


def _workspace_position(s: str) -> WorkspacePosition | None:
    prefixed = s.startswith("w_")
    n = _positive_decimal(s[2:] if prefixed else s)
    return WorkspacePosition(n, prefixed) if n is not None else None


def parse_tab_ref(s: str) -> TabHandle | None:
    """Split a tab handle into its form (see the module docstring), or ``None``."""
    return _surface_short_ref(s) or _uuid(s) or _tab_in_workspace(s) or _legacy_tab(s)


def _tab_in_workspace(s: str) -> TabNumber | TabPosition | None:
    ws_part, sep, rest = s.rpartition(":")
    ws = parse_workspace_ref(ws_part) if sep else None
    if ws is None:
        return None
    if rest.startswith("t"):
        number = _public_number(rest[1:])
        return TabNumber(ws, number) if number is not None else None
    position = _positive_decimal(rest)
    return TabPosition(ws, position, legacy=False) if position is not None else None


def _legacy_tab(s: str) -> TabPosition | None:
    if not s.startswith("t_"):
        return None
    ws_part, sep, rest = s[2:].rpartition("_")
    ws = parse_workspace_ref(ws_part) if sep else None
    position = _positive_decimal(rest)
    if ws is None or position is None:
        return None
    return TabPosition(ws, position, legacy=True)


def parse_pane_ref(s: str) -> PaneHandle | None:
    """Split a pane handle into its form (see the module docstring), or ``None``."""
    return (
        _short_ref(s, "pane")
        or _uuid(s)
        or _legacy_raw_pane(s)
        or _pane_in_workspace(s)
        or _legacy_pane_number(s)
    )


def _legacy_raw_pane(s: str) -> PaneRawId | None:
    if not s.startswith("p_"):
        return None
    ws_part, sep, rest = s[2:].rpartition("_")
    raw = _positive_decimal(rest)
    if raw is None:
        return None
    if not sep:
        return PaneRawId(None, raw)
    ws = parse_workspace_ref(ws_part)
    return PaneRawId(ws, raw) if ws is not None else None


def _pane_in_workspace(s: str) -> PaneNumber | None:
    ws_part, sep, rest = s.rpartition(":p")
    ws = parse_workspace_ref(ws_part) if sep else None
    number = _public_number(rest) if ws is not None else None
    if ws is None or number is None:
        return None
    return PaneNumber(ws, number, legacy=False)


def _legacy_pane_number(s: str) -> PaneNumber | None:
    ws_part, sep, rest = s.rpartition("-")
    ws = parse_workspace_ref(ws_part) if sep else None
    number = _positive_decimal(rest)
    if ws is None or number is None:
        return None
    return PaneNumber(ws, number, legacy=True)


def parse_surface_ref(s: str) -> SurfaceHandle | None:
    """Split a surface handle into its form (see the module docstring), or ``None``."""
    found: SurfaceHandle | None = _surface_short_ref(s) or _uuid(s)
    if found is not None:
        return found
    return TerminalId(s) if _TERMINAL_ID.fullmatch(s) else None


def parse_handle(kind: HandleKind, s: str) -> Handle | None:
    """Say which form ``s`` takes as a handle of ``kind`` and return its parts.

    ``None`` means ``s`` is no handle of that kind at all; a non-``None`` result
    may still name nothing that exists, which only the resolver can tell.
    """
    return _PARSERS.get(kind, parse_surface_ref)(s)


_PARSERS: dict[str, Callable[[str], Handle | None]] = {
    "window": parse_window_ref, "workspace": parse_workspace_ref, "tab": parse_tab_ref,
    "pane": parse_pane_ref, "surface": parse_surface_ref,
}


class RefCounter:
    """Mints short refs, one counter per kind.

    Numbers start at 1 and only grow, so a ref is never handed out twice by one
    counter even after its object is gone. Not thread-safe: the event loop owns it.
    """

    def __init__(self) -> None:
        self._last: dict[RefKind, int] = {}

    def mint(self, kind: RefKind) -> str:
        """Return the next unused ref of ``kind``, e.g. ``"pane:3"``."""
        n = self._last.get(kind, 0) + 1
        self._last[kind] = n
        return f"{kind}:{n}"

    def last(self) -> dict[RefKind, int]:
        """The last number handed out (or reserved) of each kind that has one."""
        return dict(self._last)

    def reserve(self, kind: RefKind, n: int) -> None:
        """Count ``<kind>:<n>`` as handed out (a ref restored from a saved session), so
        :meth:`mint` continues after it; a smaller ``n`` changes nothing."""
        self._last[kind] = max(self._last.get(kind, 0), n)
