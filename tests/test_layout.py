"""Split-tree geometry and mutations of cmux_core.model.layout."""

from __future__ import annotations

import gc
import math
from typing import Any, get_args

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cmux_core.errors import CmuxError, InternalError, InvalidEnv, NotFound
from cmux_core.model.layout import (
    BuildStep,
    Direction,
    InvalidLayout,
    InvalidLayoutEnv,
    InvalidRatio,
    Leaf,
    Node,
    PaneDirection,
    Rect,
    Split,
    SplitNotFound,
    clamp_ratio,
    contains,
    depth,
    edges,
    neighbor,
    next_focus_after_remove,
    panes,
    plan_apply,
    rects,
    remove,
    resize,
    set_split_ratio,
    split,
    split_at_path,
    split_rects,
    swap,
    to_portable,
    validate_portable,
)

AREA = Rect(0, 0, 80, 24)
DIRECTIONS: tuple[PaneDirection, ...] = get_args(PaneDirection)
OPPOSITE: dict[PaneDirection, PaneDirection] = {
    "left": "right", "right": "left", "up": "down", "down": "up"
}


def two(direction: Direction = "right", ratio: float = 0.5) -> Node:
    return split(Leaf("a"), "a", "b", direction, ratio)


def column_tree() -> Node:
    """[a | (b / c)] at 0.5 / 0.5."""
    return split(two(), "b", "c", "down")


# --- structure ------------------------------------------------------------------------


def test_split_puts_new_pane_second_or_first() -> None:
    assert split(Leaf("a"), "a", "b", "right") == Split("right", 0.5, Leaf("a"), Leaf("b"))
    assert split(Leaf("a"), "a", "b", "down", before=True) == Split(
        "down", 0.5, Leaf("b"), Leaf("a")
    )


@pytest.mark.parametrize(
    ("given_ratio", "stored"),
    [(0.0, 0.1), (-3.0, 0.1), (0.95, 0.9), (math.nan, 0.5), (math.inf, 0.5), (0.333, 0.333)],
)
def test_split_ratio_is_clamped(given_ratio: float, stored: float) -> None:
    tree = split(Leaf("a"), "a", "b", "right", given_ratio)
    assert isinstance(tree, Split)
    assert tree.ratio == stored


def test_split_errors() -> None:
    with pytest.raises(NotFound) as missing:
        split(Leaf("a"), "x", "b", "right")
    assert missing.value.code == "pane_not_found"
    with pytest.raises(InternalError):
        split(two(), "a", "b", "right")


def test_remove_promotes_sibling() -> None:
    tree = column_tree()
    assert remove(tree, "a") == Split("down", 0.5, Leaf("b"), Leaf("c"))
    assert remove(tree, "b") == Split("right", 0.5, Leaf("a"), Leaf("c"))
    assert remove(Leaf("a"), "a") is None
    with pytest.raises(NotFound):
        remove(tree, "zz")


def test_swap_keeps_shape() -> None:
    tree = split(column_tree(), "a", "d", "down", 0.3)
    swapped = swap(tree, "a", "c")
    assert panes(swapped) == ["c", "d", "b", "a"]
    assert split_rects(swapped, AREA) == split_rects(tree, AREA)
    assert swap(tree, "a", "a") is tree
    with pytest.raises(NotFound):
        swap(tree, "a", "nope")


def test_panes_contains_depth() -> None:
    tree = column_tree()
    assert panes(tree) == ["a", "b", "c"]
    assert contains(tree, "c")
    assert not contains(tree, "d")
    assert depth(Leaf("a")) == 0
    assert depth(tree) == 2


def test_unchanged_mutations_return_same_object() -> None:
    tree = column_tree()
    assert set_split_ratio(tree, [True], 0.5) is tree
    single = Leaf("a")
    assert resize(single, AREA, "a", "right") is single


# --- geometry -------------------------------------------------------------------------


def test_even_split_of_80_columns() -> None:
    assert rects(two(), AREA) == {"a": Rect(0, 0, 40, 24), "b": Rect(40, 0, 40, 24)}


def test_half_rounds_away_from_zero() -> None:
    # 81 * 0.5 = 40.5: Python's round() would give 40.
    got = rects(two(), Rect(0, 0, 81, 24))
    assert got == {"a": Rect(0, 0, 41, 24), "b": Rect(41, 0, 40, 24)}
    got = rects(two("down"), Rect(0, 0, 80, 25))
    assert got == {"a": Rect(0, 0, 80, 13), "b": Rect(0, 13, 80, 12)}


@pytest.mark.parametrize(
    ("width", "ratio", "first"),
    # In f64 these products fall just off .5 (14.4999..., 26.5); in f32 they do not.
    [(25, 0.58, 15), (50, 0.53, 26), (45, 0.7, 32), (60, 0.525, 31)],
)
def test_extent_is_computed_in_f32(width: int, ratio: float, first: int) -> None:
    got = rects(two("right", ratio), Rect(0, 0, width, 10))
    assert got["a"].width == first
    assert got["b"] == Rect(first, 0, width - first, 10)


def test_area_offset_is_respected() -> None:
    got = rects(column_tree(), Rect(5, 2, 80, 24))
    assert got == {
        "a": Rect(5, 2, 40, 24),
        "b": Rect(45, 2, 40, 12),
        "c": Rect(45, 14, 40, 12),
    }


def test_tiny_areas_still_give_every_pane_a_cell() -> None:
    # Reference rounding would give the first pane round(2 * 0.1) = 0 columns.
    got = rects(two("right", 0.1), Rect(0, 0, 2, 1))
    assert got == {"a": Rect(0, 0, 1, 1), "b": Rect(1, 0, 1, 1)}
    # Three panes in the first half need three columns, even at ratio 0.5 of 4.
    tree = split(split(two(), "a", "x", "right"), "x", "y", "right")
    got = rects(tree, Rect(0, 0, 4, 1))
    assert [r.width for r in got.values()] == [1, 1, 1, 1]


def test_split_ids_and_rects() -> None:
    # root right: [a | (down: (right: b | c) / d)]
    tree = split(split(two(), "b", "d", "down"), "b", "c", "right", 0.25)
    infos = split_rects(tree, AREA)
    assert [i.id for i in infos] == ["split_0_root", "split_1_1", "split_2_10"]
    assert [i.path for i in infos] == [(), (True,), (True, False)]
    assert [i.direction for i in infos] == ["right", "down", "right"]
    assert [i.rect for i in infos] == [AREA, Rect(40, 0, 40, 24), Rect(40, 0, 40, 12)]
    assert infos[2].ratio == 0.25
    assert split_rects(Leaf("a"), AREA) == []


def test_split_index_counts_splits_only() -> None:
    tree = split(split(two(), "a", "c", "down"), "b", "d", "down")
    assert [i.id for i in split_rects(tree, AREA)] == ["split_0_root", "split_1_0", "split_2_1"]


# --- neighbour and edges --------------------------------------------------------------


def test_neighbor_basic() -> None:
    tree = column_tree()
    assert neighbor(tree, AREA, "b", "left") == "a"
    assert neighbor(tree, AREA, "c", "left") == "a"
    assert neighbor(tree, AREA, "b", "down") == "c"
    assert neighbor(tree, AREA, "c", "up") == "b"
    assert neighbor(tree, AREA, "a", "left") is None
    assert neighbor(tree, AREA, "b", "up") is None
    with pytest.raises(NotFound):
        neighbor(tree, AREA, "q", "up")


def test_neighbor_full_tie_goes_to_preorder() -> None:
    # b and c overlap a equally with equal centre distance.
    assert neighbor(column_tree(), AREA, "a", "right") == "b"


def test_neighbor_prefers_larger_overlap_over_centre() -> None:
    left = Split("down", 0.333, Leaf("top"), Split("down", 0.25, Leaf("s"), Leaf("low")))
    right = Split("down", 0.4583, Leaf("p1"), Split("down", 0.2308, Leaf("p2"), Leaf("p3")))
    tree = Split("right", 0.5, left, right)
    got = rects(tree, AREA)
    assert got["s"] == Rect(0, 8, 40, 4)
    assert (got["p1"].y, got["p2"].y, got["p3"].y) == (0, 11, 14)
    # p1 overlaps s by 3 rows with centre distance 9; p2 by 1 row with distance 5.
    assert neighbor(tree, AREA, "s", "right") == "p1"


def test_neighbor_prefers_centre_when_overlap_ties() -> None:
    # Right column at 0.25: c rows 0..6, d rows 6..24. a (rows 0..12) overlaps each by 6.
    tree = Split("right", 0.5, Split("down", 0.5, Leaf("a"), Leaf("b")),
                 Split("down", 0.25, Leaf("c"), Leaf("d")))
    got = rects(tree, AREA)
    assert (got["c"].height, got["d"].height) == (6, 18)
    # centre distance: c |12 - 6| = 6, d |12 - 30| = 18.
    assert neighbor(tree, AREA, "a", "right") == "c"


def test_neighbor_edge_gap_beats_overlap() -> None:
    # [a | (b / e) | d]: d overlaps a fully but is further away than b and e.
    tree = Split("right", 0.4, Leaf("a"),
                 Split("right", 0.5, Split("down", 0.5, Leaf("b"), Leaf("e")), Leaf("d")))
    assert neighbor(tree, AREA, "a", "right") == "b"
    assert neighbor(tree, AREA, "d", "left") == "b"


def test_edges() -> None:
    tree = split(split(two(), "a", "c", "down"), "b", "d", "down")  # 2x2 grid
    assert edges(tree, AREA, "a") == {"left": True, "right": False, "up": True, "down": False}
    assert edges(tree, AREA, "d") == {"left": False, "right": True, "up": False, "down": True}
    assert edges(Leaf("a"), AREA, "a") == {"left": True, "right": True, "up": True, "down": True}
    with pytest.raises(NotFound):
        edges(tree, AREA, "zz")


# --- resize ---------------------------------------------------------------------------


def root_ratio(tree: Node) -> float:
    assert isinstance(tree, Split)
    return tree.ratio


@pytest.mark.parametrize(
    ("pane", "direction", "ratio"),
    [
        ("a", "right", 0.6),  # a grows: its right edge has the divider
        ("a", "left", 0.4),  # a has no divider on the left: the right one moves left
        ("b", "left", 0.4),  # b grows
        ("b", "right", 0.6),  # b shrinks
    ],
)
def test_resize_moves_the_divider(pane: str, direction: PaneDirection, ratio: float) -> None:
    assert root_ratio(resize(two(), AREA, pane, direction, 0.1)) == ratio


def test_resize_nested_and_vertical() -> None:
    tree = column_tree()
    grown = resize(tree, AREA, "c", "up", 0.05)
    assert split_at_path(grown, [True]).ratio == 0.45
    assert root_ratio(grown) == 0.5
    wider = resize(tree, AREA, "b", "left", 0.05)
    assert root_ratio(wider) == 0.45
    assert split_at_path(wider, [True]).ratio == 0.5
    # No down split touches a: nothing to resize vertically.
    assert resize(tree, AREA, "a", "down") is tree


def test_resize_amount_rules() -> None:
    tree = two()
    assert root_ratio(resize(tree, AREA, "a", "right", -0.1)) == 0.6
    assert root_ratio(resize(tree, AREA, "a", "right", math.nan)) == 0.55
    assert root_ratio(resize(tree, AREA, "a", "right", math.inf)) == 0.55
    assert root_ratio(resize(tree, AREA, "a", "right")) == 0.55
    assert root_ratio(resize(tree, AREA, "a", "left", 7.0)) == 0.1  # capped at 0.5, clamped


def test_resize_clamps_then_reports_unchanged() -> None:
    tree = two("right", 0.85)
    at_max = resize(tree, AREA, "a", "right", 0.1)
    assert root_ratio(at_max) == 0.9
    assert resize(at_max, AREA, "a", "right", 0.1) is at_max


def test_resize_adds_in_f32_and_keeps_shortest_repr() -> None:
    # 0.333f32 + 0.05f32 is the f32 printed shortest as 0.38300002, not 0.383.
    tree = resize(two("right", 0.333), AREA, "a", "right", 0.05)
    assert str(root_ratio(tree)) == "0.38300002"
    assert str(root_ratio(resize(two(), AREA, "a", "right", 0.05))) == "0.55"


# --- set_split_ratio ------------------------------------------------------------------


def test_set_split_ratio_paths() -> None:
    tree = column_tree()
    assert root_ratio(set_split_ratio(tree, [], 0.7)) == 0.7
    assert split_at_path(set_split_ratio(tree, [True], 0.2), [True]).ratio == 0.2
    assert split_at_path(set_split_ratio(tree, [True], 2.0), [True]).ratio == 0.9
    assert root_ratio(set_split_ratio(tree, [], 0.01)) == 0.1
    for bad in ([False], [True, True], [True, False, True], [False, False]):
        with pytest.raises(SplitNotFound) as err:
            set_split_ratio(tree, bad, 0.5)
        assert err.value.code == "split_not_found"
    with pytest.raises(SplitNotFound):
        set_split_ratio(Leaf("a"), [], 0.5)
    for bad_ratio in (math.nan, math.inf, -math.inf):
        with pytest.raises(InvalidRatio) as ratio_err:
            set_split_ratio(tree, [False], bad_ratio)  # checked before the path
        assert ratio_err.value.code == "invalid_ratio"


# --- focus ----------------------------------------------------------------------------


def test_next_focus_after_remove() -> None:
    tree = split(column_tree(), "c", "d", "right")  # a b c d
    assert next_focus_after_remove(tree, "b", "d") == "d"
    assert next_focus_after_remove(tree, "b", None) == "c"
    assert next_focus_after_remove(tree, "b", "b") == "c"
    assert next_focus_after_remove(tree, "b", "gone") == "c"
    assert next_focus_after_remove(tree, "d", None) == "c"
    assert next_focus_after_remove(Leaf("a"), "a", None) is None


# --- portable layouts -----------------------------------------------------------------


def pane_node(**fields: Any) -> dict[str, Any]:
    return {"type": "pane", **fields}


def split_node(
    first: Any, second: Any, direction: str = "right", ratio: Any = 0.5
) -> dict[str, Any]:
    return {
        "type": "split", "direction": direction, "ratio": ratio, "first": first, "second": second
    }


def test_to_portable() -> None:
    tree = split(two("right", 0.333), "b", "c", "down")
    got = to_portable(tree, lambda p: {"pane_id": f"w1:{p}", "cwd": "/tmp"})
    assert got == split_node(
        pane_node(pane_id="w1:a", cwd="/tmp"),
        split_node(pane_node(pane_id="w1:b", cwd="/tmp"), pane_node(pane_id="w1:c", cwd="/tmp"),
                   "down"),
        "right",
        0.333,
    )
    assert list(got["first"]) == ["type", "pane_id", "cwd"]


def chain(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = pane_node()
    for _ in range(levels):
        node = split_node(node, pane_node())
    return node


def test_validate_accepts_limits() -> None:
    validate_portable(chain(16))
    balanced = split_node(split_node(chain(10), chain(0)), chain(11))  # 11 + 1 + 12 = 24 panes
    validate_portable(balanced)
    validate_portable(pane_node(command=["sh", "-c", "true"], env={"A": "1"}, label=None,
                                cwd="/", pane_id="w1:p1"))
    validate_portable(split_node(pane_node(), pane_node(), "down", 1))


@pytest.mark.parametrize(
    ("node", "path", "fragment"),
    [
        (chain(17), "root" + ".first" * 16, "deeper than 16"),
        # 13 + 13 panes: the 25th in pre-order is the second chain's 12th leaf.
        (split_node(chain(12), chain(12)), "root.second.first.second", "more than 24 panes"),
        ([], "root", "must be an object"),
        ({"type": "box"}, "root", "unknown layout node type 'box'"),
        ({}, "root", "unknown layout node type None"),
        (split_node(pane_node(), pane_node(), "left"), "root", "direction"),
        (split_node(pane_node(), pane_node(), "right", math.nan), "root", "finite"),
        (split_node(pane_node(), pane_node(), "right", math.inf), "root", "finite"),
        (split_node(pane_node(), pane_node(), "right", "0.5"), "root", "finite"),
        (split_node(pane_node(), pane_node(), "right", True), "root", "finite"),
        ({"type": "split", "direction": "down", "ratio": 0.5, "first": pane_node()}, "root",
         "missing second"),
        (split_node(pane_node(), split_node(pane_node(), pane_node(command=[]))),
         "root.second.second", "command"),
        (split_node(pane_node(command=["a", 1]), pane_node()), "root.first", "command"),
        (split_node(pane_node(command="ls"), pane_node()), "root.first", "command"),
        (pane_node(env=["A=1"]), "root", "env must be an object"),
        (pane_node(env={"A": 1}), "root", "env must be an object"),
        (pane_node(cwd=3), "root", "cwd must be a string"),
        (pane_node(label=["x"]), "root", "label must be a string"),
    ],
)
def test_validate_rejects(node: object, path: str, fragment: str) -> None:
    with pytest.raises(InvalidLayout) as err:
        validate_portable(node)
    assert err.value.code == "invalid_layout"
    assert err.value.path == path
    assert fragment in err.value.message
    assert err.value.message.startswith(path + ":")
    assert isinstance(err.value, ValueError)


@pytest.mark.parametrize(
    "env",
    [{"": "x"}, {"A=B": "x"}, {"A\0": "x"}, {"A": "x\0y"}],
)
def test_validate_rejects_bad_env(env: dict[str, str]) -> None:
    with pytest.raises(InvalidLayoutEnv) as err:
        validate_portable(split_node(pane_node(), pane_node(env=env)))
    assert err.value.code == "invalid_env"
    assert err.value.path == "root.second"
    assert isinstance(err.value, InvalidEnv)
    assert isinstance(err.value, CmuxError)


def execute(steps: list[BuildStep]) -> tuple[Node, dict[int, str]]:
    """Run a plan the way a server would, naming each created pane after its spec label."""
    keys = {steps[0].leaf: steps[0].spec["label"]}
    tree: Node = Leaf(keys[steps[0].leaf])
    for step in steps[1:]:
        assert step.split_of is not None
        assert step.direction is not None
        assert step.ratio is not None
        keys[step.leaf] = step.spec["label"]
        tree = split(tree, keys[step.split_of], keys[step.leaf], step.direction, step.ratio)
    return tree, keys


def test_plan_apply_order() -> None:
    node = split_node(
        split_node(pane_node(label="a"), pane_node(label="b"), "down", 0.3),
        split_node(pane_node(label="c"), pane_node(label="d"), "down", 0.95),
        "right",
        0.65,
    )
    steps = plan_apply(node)
    assert [(s.leaf, s.spec["label"], s.split_of, s.direction, s.ratio) for s in steps] == [
        (0, "a", None, None, None),
        (2, "c", 0, "right", 0.65),
        (1, "b", 0, "down", 0.3),
        (3, "d", 2, "down", 0.9),
    ]
    tree, keys = execute(steps)
    assert keys == {0: "a", 1: "b", 2: "c", 3: "d"}
    assert to_portable(tree, lambda p: {"label": p}) == {**node, "second": {
        **node["second"], "ratio": 0.9}}


def test_plan_apply_validates() -> None:
    with pytest.raises(InvalidLayout):
        plan_apply(split_node(pane_node(), pane_node(), "right", math.nan))


# --- properties -----------------------------------------------------------------------

Op = tuple[str, int, int, Any, float]

ops = st.lists(
    st.tuples(
        st.sampled_from(["split", "split", "remove", "swap", "resize"]),
        st.integers(0, 1000),
        st.integers(0, 1000),
        st.sampled_from(["right", "down", "left", "up"]),
        st.floats(allow_nan=True, allow_infinity=True, width=32),
    ),
    max_size=30,
)
areas = st.builds(Rect, st.integers(0, 10), st.integers(0, 10), st.integers(1, 200),
                  st.integers(1, 70))


def check_tiling(tree: Node, area: Rect) -> dict[str, Rect]:
    got = rects(tree, area)
    assert list(got) == panes(tree)
    assert sum(r.width * r.height for r in got.values()) == area.width * area.height
    cells = list(got.values())
    for r in cells:
        assert area.x <= r.x and r.x + r.width <= area.x + area.width
        assert area.y <= r.y and r.y + r.height <= area.y + area.height
    for i, r in enumerate(cells):
        for q in cells[i + 1:]:
            disjoint_x = r.x + r.width <= q.x or q.x + q.width <= r.x
            disjoint_y = r.y + r.height <= q.y or q.y + q.height <= r.y
            assert disjoint_x or disjoint_y, (r, q)
    count = len(cells)
    if area.width >= count and area.height >= count:
        assert all(r.width > 0 and r.height > 0 for r in cells)
    return got


def run(ops_list: list[Op], area: Rect) -> Node:
    tree: Node = Leaf("p0")
    made = 1
    for kind, i, j, direction, number in ops_list:
        names = panes(tree)
        target, other = names[i % len(names)], names[j % len(names)]
        if kind == "split" and len(names) < 16:
            new = f"p{made}"
            made += 1
            split_dir: Direction = "right" if direction in ("right", "left") else "down"
            after = split(tree, target, new, split_dir, number, before=direction in ("left", "up"))
            assert remove(after, new) == tree
            tree = after
        elif kind == "remove" and len(names) > 1:
            after_remove = remove(tree, target)
            assert after_remove is not None
            assert panes(after_remove) == [p for p in names if p != target]
            tree = after_remove
        elif kind == "swap":
            swapped = swap(tree, target, other)
            assert swap(swapped, target, other) == tree
            tree = swapped
        elif kind == "resize":
            resized = resize(tree, area, target, direction, number)
            assert panes(resized) == names
            tree = resized
        check_tiling(tree, area)
    return tree


@settings(max_examples=150, deadline=None)
@given(ops, areas)
def test_random_sequences_keep_an_exact_tiling(ops_list: list[Op], area: Rect) -> None:
    tree = run(ops_list, area)
    for info in split_rects(tree, area):
        assert 0.1 <= info.ratio <= 0.9
        assert clamp_ratio(info.ratio) == info.ratio


@settings(max_examples=150, deadline=None)
@given(ops, areas)
def test_neighbor_agrees_with_edges(ops_list: list[Op], area: Rect) -> None:
    tree = run(ops_list, area)
    count = len(panes(tree))
    assume(area.width >= count and area.height >= count)
    for pane in panes(tree):
        touching = edges(tree, area, pane)
        for direction in DIRECTIONS:
            found = neighbor(tree, area, pane, direction)
            assert (found is None) == touching[direction], (pane, direction)
            if found is not None:
                assert neighbor(tree, area, found, OPPOSITE[direction]) is not None


@settings(max_examples=100, deadline=None)
@given(ops, st.sampled_from(["left", "right", "up", "down"]), st.floats(0.01, 0.5))
def test_resize_moves_one_divider_in_the_asked_direction(
    ops_list: list[Op], direction: PaneDirection, amount: float
) -> None:
    tree = run(ops_list, AREA)
    for pane in panes(tree):
        before = {i.id: i.ratio for i in split_rects(tree, AREA)}
        after_tree = resize(tree, AREA, pane, direction, amount)
        after = {i.id: i.ratio for i in split_rects(after_tree, AREA)}
        assert before.keys() == after.keys()
        moved = [k for k in before if before[k] != after[k]]
        assert len(moved) == (0 if after_tree is tree else 1)
        for key in moved:
            grew = after[key] > before[key]
            assert grew == (direction in ("right", "down"))


def test_placing_a_tree_leaves_no_garbage_for_the_cycle_collector() -> None:
    """Rects are placed on every list call: the walk must be freed by reference
    counting (a closure that calls itself is a cycle only the collector frees)."""
    tree: Node = Leaf("a")
    for i, name in enumerate("bcdef"):
        tree = split(tree, "a", name, "right" if i % 2 else "down")
    gc.collect()
    gc.disable()
    try:
        for _ in range(10):
            rects(tree, Rect(0, 0, 200, 60))
            split_rects(tree, Rect(0, 0, 200, 60))
        assert gc.collect() == 0
    finally:
        gc.enable()
