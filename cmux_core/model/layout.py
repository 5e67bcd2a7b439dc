"""Pure functions over a tab's immutable binary split tree.

A tab's layout is a :data:`Node`: a :class:`Leaf` holding an opaque pane key, or a
:class:`Split` whose ``first`` child sits left of (``right``) or above (``down``) its
``second`` child and takes ``ratio`` of the space. Nothing here performs I/O or holds
state: every mutation returns a new tree, and returns the *same object* when nothing
changed, so callers can report ``changed`` with ``new is not old``. Pane keys must be
unique within one tree.

Geometry follows the herdr Local API (digest §k):

* ratios are stored as the shortest decimal that round-trips through ``f32`` (``0.333``
  stays ``0.333``), clamped to [0.1, 0.9];
* a split of ``size`` cells gives its first child ``size * ratio`` computed in ``f32`` and
  rounded half away from zero;
* one deliberate addition: when that rounding would leave some pane with zero columns or
  rows although the area has room for every pane, the divider moves just far enough that
  each pane keeps at least one cell. At ordinary sizes the reference result is unchanged.

Zoom is per-tab state kept by the caller: a zoomed tab shows its focused pane over the
whole ``area``, while :func:`rects` and :func:`split_rects` keep describing the hidden tiled
geometry that snapshots report.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from cmux_core.errors import CmuxError, InternalError, InvalidEnv, InvalidNode, NotFound
from cmux_core.terminal.process import validate_env

Direction: TypeAlias = Literal["right", "down"]
PaneDirection: TypeAlias = Literal["left", "right", "up", "down"]

MIN_RATIO = 0.1
MAX_RATIO = 0.9
DEFAULT_RATIO = 0.5
DEFAULT_RESIZE_AMOUNT = 0.05
MAX_RESIZE_AMOUNT = 0.5
MAX_PORTABLE_PANES = 24
MAX_PORTABLE_DEPTH = 16

_F32 = struct.Struct("f")


@dataclass(frozen=True, slots=True)
class Leaf:
    pane: str


@dataclass(frozen=True, slots=True)
class Split:
    """Two children side by side (``right``) or stacked (``down``).

    ``ratio`` is the first child's share; trees built by this module always hold a value
    already passed through :func:`clamp_ratio`.
    """

    direction: Direction
    ratio: float
    first: Node
    second: Node


Node: TypeAlias = Leaf | Split


@dataclass(frozen=True, slots=True)
class Rect:
    """A cell rectangle; ``x``/``y`` are columns/rows from the terminal's top-left."""

    x: int
    y: int
    width: int
    height: int


@dataclass(frozen=True, slots=True)
class SplitInfo:
    """One split node of a snapshot: ``rect`` is the whole area the split divides."""

    id: str
    direction: Direction
    ratio: float
    rect: Rect
    path: tuple[bool, ...]


@dataclass(frozen=True, slots=True)
class BuildStep:
    """One pane creation of ``layout.apply``, in the order the panes must be created.

    ``leaf`` is the pre-order index (left to right) of the portable leaf this step creates
    and ``spec`` is that leaf's LayoutNode dict. The first step has ``split_of=None``: it is
    the new tab's root pane. Every later step splits the pane created for leaf ``split_of``
    in ``direction`` with ``ratio`` (already clamped), the new pane becoming the second child.
    """

    leaf: int
    spec: Mapping[str, Any]
    split_of: int | None = None
    direction: Direction | None = None
    ratio: float | None = None


class SplitNotFound(CmuxError):
    """A split path ends on a pane or runs off the tree."""

    code = "split_not_found"


class InvalidRatio(CmuxError):
    code = "invalid_ratio"


class InvalidLayout(InvalidNode, ValueError):
    """A portable layout tree is malformed; ``path`` names the offending node.

    Paths read ``root``, ``root.first``, ``root.second.first``, ...
    """

    code = "invalid_layout"


class InvalidLayoutEnv(InvalidLayout, InvalidEnv):
    """A portable leaf's ``env`` breaks the rules every pane environment follows."""

    code = "invalid_env"


# --- ratios ---------------------------------------------------------------------------


def _f32(value: float) -> float:
    result: float = _F32.unpack(_F32.pack(value))[0]
    return result


def _shortest_f32(value: float) -> float:
    """The shortest decimal that rounds to the same ``f32`` as ``value``."""
    target = _f32(value)
    for digits in range(1, 10):
        candidate = float(f"{target:.{digits}g}")
        if _f32(candidate) == target:
            return candidate
    return target


def _is_finite(value: float) -> bool:
    # JSON integers may be too large for math.isfinite, but they are all finite.
    return isinstance(value, int) or math.isfinite(value)


def clamp_ratio(ratio: float) -> float:
    """Clamp to [0.1, 0.9] (non-finite → 0.5), stored as the shortest ``f32`` decimal."""
    if not _is_finite(ratio):
        return DEFAULT_RATIO
    return _shortest_f32(min(max(ratio, MIN_RATIO), MAX_RATIO))


# --- structure ------------------------------------------------------------------------


def panes(tree: Node) -> list[str]:
    """Pane keys in pre-order (first child before second)."""
    if isinstance(tree, Leaf):
        return [tree.pane]
    return panes(tree.first) + panes(tree.second)


def contains(tree: Node, pane: str) -> bool:
    if isinstance(tree, Leaf):
        return tree.pane == pane
    return contains(tree.first, pane) or contains(tree.second, pane)


def depth(tree: Node) -> int:
    """Split levels on the longest root-to-leaf path: a single pane has depth 0."""
    if isinstance(tree, Leaf):
        return 0
    return 1 + max(depth(tree.first), depth(tree.second))


def _require(tree: Node, pane: str) -> None:
    if not contains(tree, pane):
        raise NotFound("pane", pane)


def split(
    tree: Node,
    target: str,
    new_pane: str,
    direction: Direction,
    ratio: float = DEFAULT_RATIO,
    *,
    before: bool = False,
) -> Node:
    """Replace leaf ``target`` by a split holding it and ``new_pane``.

    The new pane is the second child (right of / below the target) unless ``before``;
    ``ratio`` is the first child's share and goes through :func:`clamp_ratio`.
    Raises ``NotFound`` (pane_not_found) for a missing target and ``InternalError`` when
    ``new_pane`` is already in the tree.
    """
    _require(tree, target)
    if contains(tree, new_pane):
        raise InternalError(message=f"pane {new_pane} is already in the layout")
    clamped = clamp_ratio(ratio)

    def grow(node: Node) -> Node:
        if isinstance(node, Leaf):
            if node.pane != target:
                return node
            pair = (Leaf(new_pane), node) if before else (node, Leaf(new_pane))
            return Split(direction, clamped, *pair)
        return _rebuild(node, grow(node.first), grow(node.second))

    return grow(tree)


def remove(tree: Node, pane: str) -> Node | None:
    """Drop leaf ``pane``; its sibling takes the parent split's place.

    Returns None when ``pane`` was the only pane. Raises ``NotFound`` when it is absent.
    """
    _require(tree, pane)

    def prune(node: Node) -> Node | None:
        if isinstance(node, Leaf):
            return None if node.pane == pane else node
        first, second = prune(node.first), prune(node.second)
        if first is None:
            return second
        if second is None:
            return first
        return _rebuild(node, first, second)

    return prune(tree)


def swap(tree: Node, a: str, b: str) -> Node:
    """Exchange the positions of panes ``a`` and ``b``; split shapes and ratios stay.

    Swapping a pane with itself returns ``tree``. Raises ``NotFound`` for a missing pane.
    """
    _require(tree, a)
    _require(tree, b)
    if a == b:
        return tree

    def exchange(node: Node) -> Node:
        if isinstance(node, Leaf):
            if node.pane == a:
                return Leaf(b)
            return Leaf(a) if node.pane == b else node
        return _rebuild(node, exchange(node.first), exchange(node.second))

    return exchange(tree)


def _rebuild(node: Split, first: Node, second: Node) -> Split:
    if first is node.first and second is node.second:
        return node
    return Split(node.direction, node.ratio, first, second)


def split_at_path(tree: Node, path: Sequence[bool]) -> Split:
    """The split reached by following ``path`` (False = first, True = second) from the root.

    Raises ``SplitNotFound`` when the path ends on a pane or runs off the tree.
    """
    node = tree
    for step in path:
        if isinstance(node, Leaf):
            raise SplitNotFound(message=f"no split at path {_path_bits(path)}")
        node = node.second if step else node.first
    if isinstance(node, Leaf):
        raise SplitNotFound(message=f"no split at path {_path_bits(path)}")
    return node


def _replace_at_path(tree: Node, path: Sequence[bool], replacement: Node) -> Node:
    if not path:
        return replacement
    assert isinstance(tree, Split), "path was checked by split_at_path"
    if path[0]:
        return _rebuild(tree, tree.first, _replace_at_path(tree.second, path[1:], replacement))
    return _rebuild(tree, _replace_at_path(tree.first, path[1:], replacement), tree.second)


def _with_ratio(tree: Node, path: Sequence[bool], ratio: float) -> Node:
    node = split_at_path(tree, path)
    if node.ratio == ratio:
        return tree
    return _replace_at_path(tree, path, Split(node.direction, ratio, node.first, node.second))


def set_split_ratio(tree: Node, path: Sequence[bool], ratio: float) -> Node:
    """Set the ratio of the split at ``path`` (clamped to [0.1, 0.9]).

    Raises ``InvalidRatio`` for a non-finite ratio (checked first) and ``SplitNotFound``
    for a path that does not end on a split. Returns ``tree`` itself when the clamped
    ratio equals the current one.
    """
    if not _is_finite(ratio):
        raise InvalidRatio(message="ratio must be a finite number")
    return _with_ratio(tree, path, clamp_ratio(ratio))


def next_focus_after_remove(
    tree_before: Node, removed: str, previous_focus: str | None
) -> str | None:
    """Which pane takes focus when the focused pane ``removed`` closes.

    The previously focused pane if it is still in the tree, else the pane after
    ``removed`` in pre-order, else the one before it; None when no pane remains.
    """
    order = panes(tree_before)
    if previous_focus is not None and previous_focus != removed and previous_focus in order:
        return previous_focus
    index = order.index(removed)
    if index + 1 < len(order):
        return order[index + 1]
    return order[index - 1] if index > 0 else None


# --- geometry -------------------------------------------------------------------------


def _min_sizes(tree: Node, into: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """Columns and rows ``tree`` needs so that every pane gets at least one cell."""
    if isinstance(tree, Leaf):
        size = (1, 1)
    else:
        fw, fh = _min_sizes(tree.first, into)
        sw, sh = _min_sizes(tree.second, into)
        size = (fw + sw, max(fh, sh)) if tree.direction == "right" else (max(fw, sw), fh + sh)
    into[id(tree)] = size
    return size


def _first_extent(size: int, ratio: float, min_first: int, min_second: int) -> int:
    # Reference arithmetic: f32 product, rounded half away from zero (floor(v + .5) for v >= 0).
    extent = min(max(math.floor(_f32(_f32(size) * _f32(ratio)) + 0.5), 0), size)
    if size >= min_first + min_second:
        extent = min(max(extent, min_first), size - min_second)
    return extent


@dataclass(frozen=True, slots=True)
class _Placed:
    node: Node
    rect: Rect
    path: tuple[bool, ...]
    first: Rect | None  # the first child's rect, for splits


def _place(tree: Node, area: Rect) -> Iterator[_Placed]:
    """Every node with its rect, in pre-order."""
    mins: dict[int, tuple[int, int]] = {}
    _min_sizes(tree, mins)
    return _walk(tree, area, (), mins)


def _walk(node: Node, rect: Rect, path: tuple[bool, ...], mins: dict[int, tuple[int, int]]
          ) -> Iterator[_Placed]:
    # A module function, not a closure calling itself: such a closure is a reference cycle
    # that only the cycle collector frees, and rects are placed on every list call.
    if isinstance(node, Leaf):
        yield _Placed(node, rect, path, None)
        return
    first_min, second_min = mins[id(node.first)], mins[id(node.second)]
    if node.direction == "right":
        w1 = _first_extent(rect.width, node.ratio, first_min[0], second_min[0])
        first = Rect(rect.x, rect.y, w1, rect.height)
        second = Rect(rect.x + w1, rect.y, rect.width - w1, rect.height)
    else:
        h1 = _first_extent(rect.height, node.ratio, first_min[1], second_min[1])
        first = Rect(rect.x, rect.y, rect.width, h1)
        second = Rect(rect.x, rect.y + h1, rect.width, rect.height - h1)
    yield _Placed(node, rect, path, first)
    yield from _walk(node.first, first, (*path, False), mins)
    yield from _walk(node.second, second, (*path, True), mins)


def rects(tree: Node, area: Rect) -> dict[str, Rect]:
    """Each pane's rect inside ``area``, in pre-order; together they tile ``area`` exactly."""
    return {p.node.pane: p.rect for p in _place(tree, area) if isinstance(p.node, Leaf)}


def _path_bits(path: Sequence[bool]) -> str:
    return "".join("1" if step else "0" for step in path)


def split_rects(tree: Node, area: Rect) -> list[SplitInfo]:
    """The splits in pre-order with ids ``split_<i>_root`` / ``split_<i>_<path bits>``.

    ``i`` is the split's index in this list; path bits are 0 (first) / 1 (second) from the
    root, e.g. ``split_2_10``.
    """
    infos: list[SplitInfo] = []
    for placed in _place(tree, area):
        if isinstance(placed.node, Split):
            bits = _path_bits(placed.path) or "root"
            infos.append(
                SplitInfo(
                    f"split_{len(infos)}_{bits}",
                    placed.node.direction,
                    placed.node.ratio,
                    placed.rect,
                    placed.path,
                )
            )
    return infos


def _overlap(a: int, a_len: int, b: int, b_len: int) -> int:
    """Length of the intersection of [a, a+a_len) and [b, b+b_len); 0 when disjoint."""
    return max(min(a + a_len, b + b_len) - max(a, b), 0)


def _pane_rect(tree: Node, area: Rect, pane: str) -> tuple[dict[str, Rect], Rect]:
    all_rects = rects(tree, area)
    if pane not in all_rects:
        raise NotFound("pane", pane)
    return all_rects, all_rects[pane]


def neighbor(tree: Node, area: Rect, pane: str, direction: PaneDirection) -> str | None:
    """The nearest pane in ``direction`` from ``pane``, or None.

    Candidates lie wholly beyond the facing edge and overlap ``pane`` on the other axis;
    the winner minimises (edge gap, -overlap, centre distance, pre-order index).
    Raises ``NotFound`` when ``pane`` is absent.
    """
    all_rects, s = _pane_rect(tree, area, pane)
    best: tuple[int, int, int, int] | None = None
    chosen: str | None = None
    for index, (other, p) in enumerate(all_rects.items()):
        if other == pane:
            continue
        if direction == "left":
            gap, a, a_len, b, b_len = s.x - (p.x + p.width), s.y, s.height, p.y, p.height
        elif direction == "right":
            gap, a, a_len, b, b_len = p.x - (s.x + s.width), s.y, s.height, p.y, p.height
        elif direction == "up":
            gap, a, a_len, b, b_len = s.y - (p.y + p.height), s.x, s.width, p.x, p.width
        else:
            gap, a, a_len, b, b_len = p.y - (s.y + s.height), s.x, s.width, p.x, p.width
        if gap < 0 or not (a < b + b_len and a + a_len > b):
            continue
        centre = abs((2 * a + a_len) - (2 * b + b_len))
        key = (gap, -_overlap(a, a_len, b, b_len), centre, index)
        if best is None or key < best:
            best, chosen = key, other
    return chosen


def edges(tree: Node, area: Rect, pane: str) -> dict[str, bool]:
    """Whether ``pane`` touches each side of ``area``: keys left, right, up, down."""
    _, r = _pane_rect(tree, area, pane)
    return {
        "left": r.x <= area.x,
        "right": r.x + r.width >= area.x + area.width,
        "up": r.y <= area.y,
        "down": r.y + r.height >= area.y + area.height,
    }


def resize(
    tree: Node,
    area: Rect,
    pane: str,
    direction: PaneDirection,
    amount: float = DEFAULT_RESIZE_AMOUNT,
) -> Node:
    """Move the divider next to ``pane`` by ``amount`` of its split, toward ``direction``.

    ``amount`` is taken as ``abs(amount)`` (non-finite → 0.05) and capped at 0.5. The split
    is the one whose divider lies within one cell of the pane's edge on the ``direction``
    side (so the pane grows), else on the opposite side (so it shrinks); among several the
    nearest divider wins, then the first in pre-order. Only splits whose area overlaps the
    pane on the other axis count. Returns ``tree`` itself when no split qualifies or the
    clamped ratio does not change. Raises ``NotFound`` when ``pane`` is absent.
    """
    step = abs(amount) if _is_finite(amount) else DEFAULT_RESIZE_AMOUNT
    step = min(step, MAX_RESIZE_AMOUNT)
    _, r = _pane_rect(tree, area, pane)
    horizontal = direction in ("left", "right")
    wanted: Direction = "right" if horizontal else "down"
    low, high = (r.x, r.x + r.width) if horizontal else (r.y, r.y + r.height)
    near, far = (low, high) if direction in ("left", "up") else (high, low)

    candidates: list[tuple[int, int, _Placed]] = []
    for index, placed in enumerate(_place(tree, area)):
        node, rect, first = placed.node, placed.rect, placed.first
        if not isinstance(node, Split) or node.direction != wanted or first is None:
            continue
        if horizontal:
            divider = first.x + first.width
            crosses = _overlap(rect.y, rect.height, r.y, r.height) > 0
        else:
            divider = first.y + first.height
            crosses = _overlap(rect.x, rect.width, r.x, r.width) > 0
        if crosses:
            candidates.append((divider, index, placed))

    for edge in (near, far):
        hits = [(abs(d - edge), i, p) for d, i, p in candidates if abs(d - edge) <= 1]
        if hits:
            _, _, target = min(hits, key=lambda hit: hit[:2])
            assert isinstance(target.node, Split)
            current = _f32(target.node.ratio)
            moved = current + _f32(step) if direction in ("right", "down") else current - _f32(step)
            return _with_ratio(tree, target.path, clamp_ratio(_f32(moved)))
    return tree


# --- portable layouts (layout.export / layout.apply) ----------------------------------


def to_portable(tree: Node, describe: Callable[[str], Mapping[str, Any]]) -> dict[str, Any]:
    """The tree as a LayoutNode dict; ``describe(pane)`` supplies each leaf's fields.

    ``describe`` returns e.g. ``pane_id``, ``label``, ``cwd``, ``command``; its keys are
    copied after ``"type": "pane"``.
    """
    if isinstance(tree, Leaf):
        return {"type": "pane", **describe(tree.pane)}
    return {
        "type": "split",
        "direction": tree.direction,
        "ratio": tree.ratio,
        "first": to_portable(tree.first, describe),
        "second": to_portable(tree.second, describe),
    }


def _check_env(path: str, env: object) -> None:
    if env is None:
        return
    if not isinstance(env, dict):
        raise InvalidLayout(path, "env must be an object of strings")
    for key, value in env.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidLayout(path, "env must be an object of strings")
    try:
        validate_env(env)
    except InvalidEnv as exc:
        raise InvalidLayoutEnv(path, exc.message) from None


def _check_pane(path: str, node: Mapping[str, Any]) -> None:
    for field in ("pane_id", "label", "cwd"):
        if node.get(field) is not None and not isinstance(node[field], str):
            raise InvalidLayout(path, f"{field} must be a string")
    command = node.get("command")
    if command is not None and (
        not isinstance(command, list)
        or not command
        or not all(isinstance(arg, str) for arg in command)
    ):
        raise InvalidLayout(path, "command must be a non-empty array of strings")
    _check_env(path, node.get("env"))


def validate_portable(node: object) -> None:
    """Check a LayoutNode tree from a request before anything is created.

    Limits: at most 24 panes and at most 16 split levels (a single pane is level 0);
    ratios finite numbers; ``command`` (when given) a non-empty array of strings; ``env``
    keys non-empty without ``=`` or NUL, values without NUL. Raises ``InvalidLayout``
    (invalid_layout) naming the first offending node in pre-order, or its subclass
    ``InvalidLayoutEnv`` (invalid_env) for env rule violations.
    """
    count = 0

    def check(item: object, path: str, level: int) -> None:
        nonlocal count
        if not isinstance(item, dict):
            raise InvalidLayout(path, "layout node must be an object")
        kind = item.get("type")
        if kind == "pane":
            count += 1
            if count > MAX_PORTABLE_PANES:
                raise InvalidLayout(path, f"layout has more than {MAX_PORTABLE_PANES} panes")
            _check_pane(path, item)
            return
        if kind != "split":
            raise InvalidLayout(path, f"unknown layout node type {kind!r}")
        if level >= MAX_PORTABLE_DEPTH:
            raise InvalidLayout(path, f"layout is deeper than {MAX_PORTABLE_DEPTH} levels")
        if item.get("direction") not in ("right", "down"):
            raise InvalidLayout(path, "direction must be 'right' or 'down'")
        ratio = item.get("ratio")
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not _is_finite(ratio):
            raise InvalidLayout(path, "ratio must be a finite number")
        for side in ("first", "second"):
            if side not in item:
                raise InvalidLayout(path, f"split is missing {side}")
            check(item[side], f"{path}.{side}", level + 1)

    check(node, "root", 0)


def plan_apply(node: object) -> list[BuildStep]:
    """Validate a LayoutNode tree and list the pane creations that build it.

    The root pane comes from the left-most leaf. Each split then splits the pane that
    currently holds its area, creating the left-most leaf of ``second`` as the new pane;
    the plan recurses into ``first`` on the current pane, then into ``second`` on the new
    one. Executing the steps with :func:`split` reproduces the tree's shape and ratios.
    Raises what :func:`validate_portable` raises.
    """
    validate_portable(node)
    steps: list[BuildStep] = []
    leaves = 0

    def leftmost(item: Mapping[str, Any]) -> Mapping[str, Any]:
        while item["type"] == "split":
            item = item["first"]
        return item

    def build(item: Mapping[str, Any], holder: int) -> None:
        # ``holder`` is the leaf index of the pane occupying this subtree's area.
        nonlocal leaves
        if item["type"] == "pane":
            leaves += 1
            return
        first_leaves = _leaf_count(item["first"])
        created = leaves + first_leaves
        steps.append(
            BuildStep(
                created,
                leftmost(item["second"]),
                holder,
                item["direction"],
                clamp_ratio(item["ratio"]),
            )
        )
        build(item["first"], holder)
        build(item["second"], created)

    root: Mapping[str, Any] = node  # type: ignore[assignment]  # validated above
    steps.append(BuildStep(0, leftmost(root)))
    build(root, 0)
    return steps


def _leaf_count(item: Mapping[str, Any]) -> int:
    if item["type"] == "pane":
        return 1
    return _leaf_count(item["first"]) + _leaf_count(item["second"])
