"""Regions, rule selection and explain output of the detection engine."""
# ruff: noqa: RUF001  (agent screens are made of these look-alike glyphs)

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cmux_core.detect.engine import (
    FALLBACK_IDLE,
    Classification,
    ScreenInput,
    classify,
    explain,
    explain_unknown_agent,
)
from cmux_core.detect.manifest import Manifest, parse_manifest, parse_region
from cmux_core.detect.regions import ScreenView, is_horizontal_rule, split_lines


def region(name: str, screen: str, title: str = "", progress: str = "") -> str:
    return ScreenView(screen, title, progress).region(parse_region(name))


def test_split_lines_is_rust_lines() -> None:
    assert split_lines("") == []
    assert split_lines("a\n") == ["a"]
    assert split_lines("a\r\nb") == ["a", "b"]
    assert split_lines("a\n\n") == ["a", ""]


def test_whole_and_osc_regions() -> None:
    assert region("whole_recent", "a\nb\n") == "a\nb\n"
    assert region("osc_title", "a\n", title="T") == "T"
    assert region("osc_progress", "a\n", progress="4;3;") == "4;3;"


def test_bottom_lines() -> None:
    assert region("bottom_lines(2)", "a\nb\nc\n") == "b\nc\n"
    assert region("bottom_lines(9)", "a\nb\n") == "a\nb\n"
    assert region("bottom_lines(0)", "a\nb\n") == ""


def test_bottom_non_empty_lines() -> None:
    screen = "marker\nold\n\nmiddle\nmarker\nnew\n"
    assert region("bottom_non_empty_lines(2)", screen) == "marker\nnew\n"
    assert region("bottom_non_empty_lines(3)", "a\nb\n\n  \nc\n") == "a\nb\n\n  \nc\n"
    assert region("bottom_non_empty_lines(2)", "a\nb\n\n  \nc\n") == "b\n\n  \nc\n"
    assert region("bottom_non_empty_lines(0)", screen) == ""
    assert region("bottom_non_empty_lines(2)", "\n \n") == ""


def test_top_non_empty_lines() -> None:
    screen = "\nmarker\nold\n\nmiddle\nmarker\n"
    assert region("top_non_empty_lines(2)", screen) == "\nmarker\nold\n"
    assert region("top_non_empty_lines(9)", screen) == screen


CODEX = (
    "• Ran ls\n"
    "  └ a\n"
    "› first prompt\n"
    "• Edited x.py\n"
    "✓ Tests pass\n"
    "› \n"
    "  footer\n"
)


def test_codex_prompt_regions() -> None:
    assert region("after_last_prompt_marker", CODEX) == "  footer\n"
    assert region("before_current_prompt_marker", CODEX) == CODEX[:CODEX.index("› \n")]
    assert region("whole_recent_without_current_prompt_marker", CODEX) == ""
    assert region("current_prompt_block_marker", CODEX) == "✓ Tests pass"
    assert region("after_current_prompt_block_marker", CODEX) == "✓ Tests pass\n› \n  footer\n"


def test_codex_prompt_followed_by_a_block_marker_is_not_current() -> None:
    screen = "› question\n• Working\n"
    assert region("after_last_prompt_marker", screen) == "• Working\n"
    assert region("before_current_prompt_marker", screen) == screen
    assert region("whole_recent_without_current_prompt_marker", screen) == screen
    assert region("current_prompt_block_marker", screen) == ""
    assert region("after_current_prompt_block_marker", screen) == ""


def test_codex_regions_without_any_prompt() -> None:
    screen = "• one\n›not a prompt\n"
    assert region("after_last_prompt_marker", screen) == screen
    assert region("before_current_prompt_marker", screen) == screen
    assert region("whole_recent_without_current_prompt_marker", screen) == screen
    assert region("current_prompt_block_marker", screen) == ""
    assert region("after_current_prompt_block_marker", "›\n") == ""


@pytest.mark.parametrize(("line", "expected"), [
    ("─", True), ("   ────────   ", True), ("───── (bypass permissions on) ─", True),
    ("─ x", False), ("── x", False), ("─── x", True), ("x ───", False), ("", False),
    ("═══", False),
])
def test_horizontal_rule_lines(line: str, expected: bool) -> None:
    assert is_horizontal_rule(line) is expected


PROMPT_BOX = (
    "history\n"
    "──────── old rule\n"
    "✻ Thinking…\n"
    "\n"
    "────────\n"
    "❯ hello\n"
    "  more\n"
    "────────\n"
    "  ? for shortcuts\n"
)


def test_horizontal_rule_and_prompt_box_regions() -> None:
    assert region("after_last_horizontal_rule", PROMPT_BOX) == "  ? for shortcuts\n"
    assert region("prompt_box_body", PROMPT_BOX) == "❯ hello\n  more\n"
    assert region("above_prompt_box", PROMPT_BOX) == ("history\n──────── old rule\n"
                                                      "✻ Thinking…\n\n")
    assert region("last_non_empty_above_prompt_box", PROMPT_BOX) == "✻ Thinking…"


def test_prompt_box_regions_with_fewer_than_two_rules() -> None:
    screen = "a\n────\nb\n\n"
    assert region("after_last_horizontal_rule", screen) == "b\n\n"
    assert region("prompt_box_body", screen) == ""
    assert region("above_prompt_box", screen) == screen
    assert region("last_non_empty_above_prompt_box", screen) == "b"
    assert region("after_last_horizontal_rule", "plain\n") == "plain\n"


def manifest(rules: str) -> Manifest:
    return parse_manifest(f'id = "codex"\n{rules}', source="test")


WORKED_EXAMPLE = manifest("""
[[rules]]
id = "low_contains"
state = "idle"
priority = 1
contains = ["match"]

[[rules]]
id = "high_nested_gates"
state = "working"
priority = 10
contains = ["match"]
all = [{ any = [{ regex = ["w[io]n"] }, { contains = ["fallback"] }] }]
not = [{ contains = ["blocked"] }]

[[rules]]
id = "line_regex"
state = "blocked"
priority = 20
line_regex = ["^exact line$"]
""")


@pytest.mark.parametrize(("screen", "state", "rule"), [
    ("match win", "working", "high_nested_gates"),
    ("match fallback", "working", "high_nested_gates"),
    ("match win blocked", "idle", "low_contains"),
    ("before\nexact line\nafter", "blocked", "line_regex"),
    ("MATCH", "idle", "low_contains"),
])
def test_rule_semantics_gates_priority_and_line_regex(screen: str, state: str,
                                                      rule: str) -> None:
    result = classify(WORKED_EXAMPLE, ScreenInput(screen))
    assert (result.state, result.matched_rule) == (state, rule)


def test_regex_is_case_sensitive_and_contains_is_not() -> None:
    m = manifest('[[rules]]\nid = "r"\nstate = "working"\nregex = ["Esc"]\n'
                 '[[rules]]\nid = "c"\nstate = "blocked"\ncontains = ["ALLOW ÖNCE"]\n')
    assert classify(m, ScreenInput("esc")).state == "idle"
    assert classify(m, ScreenInput("Esc")).matched_rule == "r"
    assert classify(m, ScreenInput("allow önce")).matched_rule == "c"


def test_line_regex_sees_lines_and_dollar_is_end_of_text() -> None:
    m = manifest('[[rules]]\nid = "line"\nstate = "working"\nline_regex = ["^b$"]\n'
                 '[[rules]]\nid = "end"\nstate = "blocked"\npriority = 5\n'
                 'regex = ["done$"]\n')
    assert classify(m, ScreenInput("a\nb\nc\n")).matched_rule == "line"
    # The screen ends in "\n": Rust's "$" does not match before it.
    assert classify(m, ScreenInput("done\n")).matched_rule is None
    assert classify(m, ScreenInput("", osc_title="done")).matched_rule is None
    m2 = manifest('[[rules]]\nid = "end"\nstate = "blocked"\nregion = "osc_title"\n'
                  'regex = ["done$"]\n')
    assert classify(m2, ScreenInput("", osc_title="all done")).matched_rule == "end"


def test_ties_go_to_the_earlier_rule() -> None:
    m = manifest('[[rules]]\nid = "first"\nstate = "idle"\npriority = 5\ncontains = ["x"]\n'
                 '[[rules]]\nid = "second"\nstate = "working"\npriority = 5\n'
                 'contains = ["x"]\n'
                 '[[rules]]\nid = "lower"\nstate = "blocked"\npriority = -1\ncontains = ["x"]\n')
    assert classify(m, ScreenInput("x")).matched_rule == "first"
    assert explain(m, ScreenInput("x"))["matched_rule"]["id"] == "first"


def test_missing_state_means_unknown() -> None:
    m = manifest('[[rules]]\nid = "r"\ncontains = ["x"]\nvisible_idle = true\n')
    result = classify(m, ScreenInput("x"))
    assert result.state == "unknown" and not result.visible_idle
    assert not result.skip_state_update and result.fallback_reason is None


def test_known_agent_without_matching_rule_is_idle() -> None:
    m = manifest('[[rules]]\nid = "r"\nstate = "working"\ncontains = ["x"]\n')
    assert classify(m, ScreenInput("nothing")) == Classification(
        state="idle", matched_rule=None, visible_idle=False, visible_blocker=False,
        visible_working=False, skip_state_update=False, fallback_reason=FALLBACK_IDLE)


def test_visible_flags_only_for_their_own_state() -> None:
    m = manifest("""
[[rules]]
id = "i"
state = "idle"
contains = ["<idle>"]
visible_idle = true
visible_blocker = true
visible_working = true
[[rules]]
id = "b"
state = "blocked"
contains = ["<blocked>"]
visible_idle = true
visible_blocker = true
[[rules]]
id = "w"
state = "working"
contains = ["<working>"]
visible_working = true
[[rules]]
id = "w2"
state = "working"
contains = ["plain"]
""")
    flags = lambda r: (r.visible_idle, r.visible_blocker, r.visible_working)  # noqa: E731
    assert flags(classify(m, ScreenInput("<idle>"))) == (True, False, False)
    assert flags(classify(m, ScreenInput("<blocked>"))) == (False, True, False)
    assert flags(classify(m, ScreenInput("<working>"))) == (False, False, True)
    assert flags(classify(m, ScreenInput("plain"))) == (False, False, False)


def test_skip_state_update_rule() -> None:
    m = manifest('[[rules]]\nid = "viewer"\nstate = "unknown"\nskip_state_update = true\n'
                 'priority = 9\ncontains = ["transcript"]\n'
                 '[[rules]]\nid = "busy"\nstate = "working"\ncontains = ["esc"]\n')
    result = classify(m, ScreenInput("transcript esc"))
    assert result.skip_state_update and result.state == "unknown"
    assert result.matched_rule == "viewer"
    info = explain(m, ScreenInput("transcript esc"))
    assert info["skip_state_update"] is True
    assert info["skipped_update_reason"] == "matched_rule:viewer"
    assert explain(m, ScreenInput("esc"))["skipped_update_reason"] is None


def test_empty_region_does_not_satisfy_contains() -> None:
    m = manifest('[[rules]]\nid = "r"\nstate = "working"\nregion = "osc_title"\n'
                 'contains = ["x"]\n')
    assert classify(m, ScreenInput("x\n")).matched_rule is None


def test_nested_gates_see_the_rule_region() -> None:
    m = manifest('[[rules]]\nid = "r"\nstate = "working"\nregion = "bottom_lines(1)"\n'
                 'contains = ["b"]\nnot = [{ contains = ["a"] }]\n')
    assert classify(m, ScreenInput("a\nb\n")).matched_rule == "r"


EXPLAIN_KEYS = {
    "agent", "state", "manifest_source", "manifest_version", "cached_remote_version",
    "local_override_shadowing_remote", "remote_update_status", "remote_update_error",
    "matched_rule", "visible_idle", "visible_blocker", "visible_working",
    "screen_detection_skipped", "skip_state_update", "skipped_update_reason",
    "fallback_reason", "warning", "evaluated_rules",
}


def test_explain_shape_and_evidence() -> None:
    info = explain(WORKED_EXAMPLE, ScreenInput("match win blocked", osc_title="t"))
    assert set(info) == EXPLAIN_KEYS
    assert info["agent"] == "codex" and info["state"] == "idle"
    assert info["manifest_source"] == "test"
    assert info["matched_rule"] == {"id": "low_contains", "priority": 1,
                                    "region": "whole_recent", "state": "idle"}
    assert [r["id"] for r in info["evaluated_rules"]] == ["low_contains", "high_nested_gates",
                                                         "line_regex"]
    assert [r["matched"] for r in info["evaluated_rules"]] == [True, False, False]
    nested = info["evaluated_rules"][1]
    assert set(nested) == {"id", "priority", "region", "state", "matched", "evidence"}
    assert nested["evidence"] == {
        "contains": [{"value": "match", "matched": True}], "regex": [], "line_regex": [],
        "all_count": 1, "any_count": 0, "not_count": 1, "region_bytes": 17,
        "region_preview": "match win blocked",
    }
    assert info["evaluated_rules"][2]["evidence"]["line_regex"] == [
        {"value": "^exact line$", "matched": False}]


def test_explain_fallback_and_preview_limit() -> None:
    screen = "é" * 300
    info = explain(WORKED_EXAMPLE, ScreenInput(screen))
    assert info["state"] == "idle" and info["matched_rule"] is None
    assert info["fallback_reason"] == FALLBACK_IDLE
    evidence = info["evaluated_rules"][0]["evidence"]
    assert evidence["region_bytes"] == 600
    assert evidence["region_preview"] == "é" * 240 + "..."


def test_explain_unknown_agent() -> None:
    info = explain_unknown_agent("mystery")
    assert set(info) == EXPLAIN_KEYS
    assert info["state"] == "unknown" and info["fallback_reason"] == "unknown_agent"
    assert info["evaluated_rules"] == []


simple_screens = st.lists(st.sampled_from(["match", "win", "blocked", "exact line", "",
                                           "fallback", "x"]), max_size=6).map("\n".join)


@settings(max_examples=200, deadline=None)
@given(simple_screens)
def test_classify_agrees_with_explain(screen: str) -> None:
    inp = ScreenInput(screen)
    result = classify(WORKED_EXAMPLE, inp)
    info = explain(WORKED_EXAMPLE, inp)
    assert result.state == info["state"]
    assert result.matched_rule == (info["matched_rule"] or {}).get("id")


def test_classify_is_fast_on_a_full_screen() -> None:
    from cmux_core.detect.manifest import bundled_manifests_dir, load_manifest

    claude = load_manifest(bundled_manifests_dir() / "claude.toml")
    screen = "".join(f"line {i} with some output text and more words here\n"
                     for i in range(40))
    screen += "─" * 80 + "\n❯ \n" + "─" * 80 + "\n  ? for shortcuts\n"
    inp = ScreenInput(screen, osc_title="✳ Claude Code")
    classify(claude, inp)
    # CPU time of this thread, not wall time: other processes on a loaded machine do not
    # count against classify.
    start = time.thread_time()
    for _ in range(200):
        assert classify(claude, inp).state == "idle"
    per_call = (time.thread_time() - start) / 200
    assert per_call < 0.002, f"classify took {per_call * 1e6:.0f} µs of CPU"


def test_pathological_patterns_classify_a_long_screen() -> None:
    """Patterns that take a backtracking engine exponential time are decided on RE2 in
    time linear in the screen, with the Rust meaning (the rows defeat every pattern)."""
    m = manifest("[[rules]]\nid = \"alternation\"\nstate = \"working\"\n"
                 "line_regex = ['(a|a)+$', '(.*a){20}']\n"
                 "[[rules]]\nid = \"nested\"\nstate = \"blocked\"\n"
                 "regex = ['(x+x+)+y', '(a+)+$']\n")
    screen = ("a" * 5000 + "!\n") * 40 + "x" * 5000 + "\n"
    assert classify(m, ScreenInput(screen)).matched_rule is None
    info = explain(m, ScreenInput(screen))
    assert [r["matched"] for r in info["evaluated_rules"]] == [False, False]
    # Both line_regex hold, on different lines.
    assert classify(m, ScreenInput(screen + "aaa\n")).matched_rule == "alternation"
    assert classify(m, ScreenInput("a" * 19 + "\n")).matched_rule is None
    assert classify(m, ScreenInput("a" * 20 + "\n")).matched_rule == "alternation"
    assert classify(m, ScreenInput("x" * 5000 + "y\naaa")).matched_rule == "nested"


def test_line_regex_and_regex_see_unicode_rust_classes() -> None:
    m = manifest("[[rules]]\nid = \"digits\"\nstate = \"working\"\n"
                 "line_regex = ['^\\s*\\d+\\s\\w+$']\n")
    assert classify(m, ScreenInput("x\n\u00a0\u0663\u0664 caf\u00e9\n")).matched_rule == "digits"
    assert classify(m, ScreenInput("x\n 34 caf-\n")).matched_rule is None


LINE_PATTERNS = [r"^a", r"a$", r"^$", r"\Aa+\z", r"(?m)^b$", r"\bab\b", r"a\s*b", r"[^a]$",
                 r"^\s*$", r"(?s)a.b", r"\Sb", r"^(?:a|\n)+$", r"\W"]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(LINE_PATTERNS), st.text(alphabet="ab \n\r-é", max_size=12))
def test_line_regex_search_agrees_with_searching_each_line(pattern: str, text: str) -> None:
    """The one-search shortcut of line_regex never changes which screens match."""
    m = manifest(f"[[rules]]\nid = \"r\"\nstate = \"working\"\nline_regex = ['{pattern}']\n")
    compiled = m.rules[0].gate.line_regex[0]
    expected = any(compiled.search(line) for line in split_lines(text))
    assert (classify(m, ScreenInput(text)).matched_rule == "r") == expected
