from __future__ import annotations

import re
import threading
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cmux_core.ids import (
    ALPHABET,
    HandleKind,
    PaneNumber,
    PaneRawId,
    RefCounter,
    ShortRef,
    TabNumber,
    TabPosition,
    TerminalId,
    UuidRef,
    WorkspaceId,
    WorkspacePosition,
    decode_number,
    encode_number,
    new_terminal_id,
    new_uuid,
    pane_id,
    parse_handle,
    parse_pane_ref,
    parse_surface_ref,
    parse_tab_ref,
    parse_window_ref,
    parse_workspace_ref,
    tab_id,
    workspace_id,
)

DIGEST_EXAMPLES = [
    (1, "1"),
    (9, "9"),
    (10, "A"),
    (31, "Z"),
    (32, "0"),
    (33, "11"),
    (64, "10"),
    (65, "21"),
    (1024, "Z0"),
    (1056, "00"),
    (1057, "111"),
]

UUID_LOWER = "6f9619ff-8b86-d011-b42d-00c04fc964ff"
UUID_UPPER = UUID_LOWER.upper()


@pytest.mark.parametrize(("n", "text"), DIGEST_EXAMPLES)
def test_encode_matches_digest(n: int, text: str) -> None:
    assert encode_number(n) == text


@pytest.mark.parametrize(("n", "text"), DIGEST_EXAMPLES)
def test_decode_matches_digest(n: int, text: str) -> None:
    assert decode_number(text) == n


def test_alphabet_has_32_distinct_symbols_without_confusables() -> None:
    assert len(set(ALPHABET)) == 32
    assert not set("ILOU") & set(ALPHABET)


@pytest.mark.parametrize("bad", ["", "a", "1a", "z", "I", "L", "O", "U", "1I", "w1", " 1", "-1"])
def test_decode_rejects_invalid(bad: str) -> None:
    with pytest.raises(ValueError):
        decode_number(bad)


@pytest.mark.parametrize("bad", [0, -1])
def test_encode_rejects_numbers_below_one(bad: int) -> None:
    with pytest.raises(ValueError):
        encode_number(bad)


@settings(max_examples=300)
@given(st.integers(min_value=1, max_value=10**12))
def test_encode_decode_round_trip(n: int) -> None:
    text = encode_number(n)
    assert set(text) <= set(ALPHABET)
    assert decode_number(text) == n


@settings(max_examples=300)
@given(st.text(alphabet=ALPHABET, min_size=1, max_size=12))
def test_decode_encode_round_trip(text: str) -> None:
    assert encode_number(decode_number(text)) == text


def test_public_id_builders() -> None:
    assert workspace_id(1) == "w1"
    assert workspace_id(10) == "wA"
    assert tab_id("w3", 2) == "w3:t2"
    assert tab_id("wA", 33) == "wA:t11"
    assert pane_id("w1", 32) == "w1:p0"


def test_terminal_ids_are_unique_and_well_formed() -> None:
    ids: list[str] = []
    lock = threading.Lock()

    def mint() -> None:
        batch = [new_terminal_id() for _ in range(500)]
        with lock:
            ids.extend(batch)

    threads = [threading.Thread(target=mint) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ids) == 2000
    assert len(set(ids)) == 2000
    for ident in ids:
        assert re.fullmatch(r"term_[0-9a-f]+", ident)
        # the clock part alone is 13+ hex digits of microseconds since the epoch
        assert len(ident) >= len("term_") + 14
        assert parse_surface_ref(ident) == TerminalId(ident)


def test_new_uuid_is_uppercase_canonical_v4() -> None:
    values = {new_uuid() for _ in range(100)}
    assert len(values) == 100
    for value in values:
        assert value == value.upper()
        assert str(uuid.UUID(value)).upper() == value
        assert uuid.UUID(value).version == 4


# --- handle parsing ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("w1", WorkspaceId("w1", 1)),
        ("wA", WorkspaceId("wA", 10)),
        ("w11", WorkspaceId("w11", 33)),
        ("w_3", WorkspacePosition(3, prefixed=True)),
        ("3", WorkspacePosition(3, prefixed=False)),
        ("03", WorkspacePosition(3, prefixed=False)),
        ("workspace:7", ShortRef("workspace", 7)),
        (UUID_LOWER, UuidRef(UUID_UPPER)),
        (UUID_UPPER, UuidRef(UUID_UPPER)),
    ],
)
def test_workspace_forms(text: str, expected: object) -> None:
    assert parse_workspace_ref(text) == expected
    assert parse_handle("workspace", text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "w",
        "wa",
        "wI",
        "w_",
        "w_0",
        "w_x",
        "0",
        "-1",
        "+1",
        "1.0",
        "workspace:0",
        "workspace:01",
        "Workspace:1",
        "pane:1",
        "workspace",
        "w1 ",
        "1" * 19,
        "w" + "1" * 13,
        UUID_UPPER[:-1],
        "{" + UUID_UPPER + "}",
        "\u0663",  # ARABIC-INDIC DIGIT THREE is a digit, but not an ASCII one
    ],
)
def test_workspace_rejects(text: str) -> None:
    assert parse_workspace_ref(text) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("w1:t1", TabNumber(WorkspaceId("w1", 1), 1)),
        ("w2:tA", TabNumber(WorkspaceId("w2", 2), 10)),
        ("w_2:t11", TabNumber(WorkspacePosition(2, prefixed=True), 33)),
        ("w1:2", TabPosition(WorkspaceId("w1", 1), 2, legacy=False)),
        ("4:2", TabPosition(WorkspacePosition(4, prefixed=False), 2, legacy=False)),
        ("workspace:3:t2", TabNumber(ShortRef("workspace", 3), 2)),
        ("t_w1_2", TabPosition(WorkspaceId("w1", 1), 2, legacy=True)),
        ("t_w_3_2", TabPosition(WorkspacePosition(3, prefixed=True), 2, legacy=True)),
        ("t_1_5", TabPosition(WorkspacePosition(1, prefixed=False), 5, legacy=True)),
        ("tab:4", ShortRef("surface", 4)),
        (" TAB:4 ", ShortRef("surface", 4)),
        ("surface:4", ShortRef("surface", 4)),
        (UUID_LOWER, UuidRef(UUID_UPPER)),
    ],
)
def test_tab_forms(text: str, expected: object) -> None:
    assert parse_tab_ref(text) == expected
    assert parse_handle("tab", text) == expected


@pytest.mark.parametrize(
    "text",
    ["w1", "w1:", "w1:t", "w1:tI", "w1:p1", "w1:0", "x1:t1", "t_w1", "t_w1_", "t_x_1", "tab:0"],
)
def test_tab_rejects(text: str) -> None:
    assert parse_tab_ref(text) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("w1:p1", PaneNumber(WorkspaceId("w1", 1), 1, legacy=False)),
        ("wA:p0", PaneNumber(WorkspaceId("wA", 10), 32, legacy=False)),
        ("w_2:p3", PaneNumber(WorkspacePosition(2, prefixed=True), 3, legacy=False)),
        ("workspace:2:p3", PaneNumber(ShortRef("workspace", 2), 3, legacy=False)),
        ("w1-2", PaneNumber(WorkspaceId("w1", 1), 2, legacy=True)),
        ("w1-33", PaneNumber(WorkspaceId("w1", 1), 33, legacy=True)),
        ("2-1", PaneNumber(WorkspacePosition(2, prefixed=False), 1, legacy=True)),
        (UUID_LOWER + "-2", PaneNumber(UuidRef(UUID_UPPER), 2, legacy=True)),
        ("p_w1_7", PaneRawId(WorkspaceId("w1", 1), 7)),
        ("p_w_2_7", PaneRawId(WorkspacePosition(2, prefixed=True), 7)),
        ("p_7", PaneRawId(None, 7)),
        ("pane:5", ShortRef("pane", 5)),
        (UUID_LOWER, UuidRef(UUID_UPPER)),
    ],
)
def test_pane_forms(text: str, expected: object) -> None:
    assert parse_pane_ref(text) == expected
    assert parse_handle("pane", text) == expected


@pytest.mark.parametrize(
    "text",
    ["w1", "w1:t1", "w1:p", "w1:pa", "w1-", "w1-A", "p_", "p_x", "p_q_1", "pane:0", "surface:1"],
)
def test_pane_rejects(text: str) -> None:
    assert parse_pane_ref(text) is None


def test_pane_id_splits_on_last_colon_p() -> None:
    # The workspace part may itself contain ":p"-free colons; only the last ":p" separates.
    assert parse_pane_ref("workspace:1:p2") == PaneNumber(ShortRef("workspace", 1), 2, False)
    assert parse_pane_ref("w1:p2:p3") is None


@pytest.mark.parametrize(
    ("kind", "text", "expected"),
    [
        ("window", "window:1", ShortRef("window", 1)),
        ("window", UUID_LOWER, UuidRef(UUID_UPPER)),
        ("surface", "surface:12", ShortRef("surface", 12)),
        ("surface", "tab:12", ShortRef("surface", 12)),
        ("surface", "Tab:12", ShortRef("surface", 12)),
        ("surface", UUID_UPPER, UuidRef(UUID_UPPER)),
        ("surface", "term_63c1f2a9b4e021", TerminalId("term_63c1f2a9b4e021")),
    ],
)
def test_window_and_surface_forms(kind: HandleKind, text: str, expected: object) -> None:
    assert parse_handle(kind, text) == expected


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("window", "workspace:1"),
        ("window", "1"),
        ("window", "window:0"),
        ("surface", "pane:1"),
        ("surface", "w1:p1"),
        ("surface", "term_"),
        ("surface", "term_ABC"),
        ("surface", "surface:1 "),
        ("pane", "term_63c1f2a9b4e021"),
    ],
)
def test_window_and_surface_rejects(kind: HandleKind, text: str) -> None:
    assert parse_handle(kind, text) is None


def test_built_ids_parse_back() -> None:
    ws = workspace_id(40)
    assert parse_workspace_ref(ws) == WorkspaceId(ws, 40)
    assert parse_tab_ref(tab_id(ws, 70)) == TabNumber(WorkspaceId(ws, 40), 70)
    assert parse_pane_ref(pane_id(ws, 1057)) == PaneNumber(WorkspaceId(ws, 40), 1057, False)


@settings(max_examples=200)
@given(st.integers(min_value=1, max_value=10**12), st.integers(min_value=1, max_value=10**12))
def test_public_ids_round_trip_through_parsers(ws_n: int, n: int) -> None:
    ws = workspace_id(ws_n)
    assert parse_tab_ref(tab_id(ws, n)) == TabNumber(WorkspaceId(ws, ws_n), n)
    assert parse_pane_ref(pane_id(ws, n)) == PaneNumber(WorkspaceId(ws, ws_n), n, legacy=False)


def test_short_ref_str() -> None:
    assert str(ShortRef("surface", 9)) == "surface:9"


# --- short ref minting ------------------------------------------------------------------------


def test_ref_counter_counts_per_kind_from_one() -> None:
    refs = RefCounter()
    assert refs.mint("pane") == "pane:1"
    assert refs.mint("pane") == "pane:2"
    assert refs.mint("surface") == "surface:1"
    assert refs.mint("workspace_group") == "workspace_group:1"
    assert refs.mint("pane") == "pane:3"


def test_ref_counter_never_reuses_and_mints_parseable_refs() -> None:
    refs = RefCounter()
    minted = [refs.mint("window") for _ in range(50)]
    assert len(set(minted)) == 50
    assert [parse_window_ref(r) for r in minted] == [ShortRef("window", i) for i in range(1, 51)]


def test_ref_counters_are_independent_instances() -> None:
    a, b = RefCounter(), RefCounter()
    a.mint("pane")
    assert b.mint("pane") == "pane:1"
