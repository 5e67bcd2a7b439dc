"""Manifest format: every key, every validation limit, error positions, Rust regexes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cmux_core.detect.manifest import (
    MAX_DEPTH,
    MAX_GATES,
    MAX_MATCHER_CHARS,
    MAX_MATCHERS,
    MAX_MATCHERS_PER_GATE,
    MAX_RULES,
    Manifest,
    ManifestError,
    compare_versions,
    load_manifest,
    manifest_from_data,
    parse_manifest,
)
from cmux_core.detect.pattern import compile_pattern, translate

# A manifest in the herdr format as herdr itself ships them: metadata keys, comments,
# literal strings with Rust escapes, inline-table gates, a top_non_empty_lines region.
HERDR_FORMAT = r"""
id = "cursor"
version = "2026.08.04.1"
min_engine_version = 3
updated_at = "2026-08-04T00:00:00Z"
aliases = ["cursor-agent"]

[[rules]]
# a viewer
id = "history_view"
state = "unknown"
priority = 1000
region = " bottom_non_empty_lines(2) "
skip_state_update = true
contains = ["history"]

[[rules]]
id = "approval"
state = "blocked"
priority = 900
region = "after_last_horizontal_rule"
visible_blocker = true
contains = ["run this command?"]
any = [
  { contains = ["(y)"] },
  { line_regex = ['^\s*→\s*Run'] },
]
not = [{ regex = ['(?m)^\s*$\n\z'] }]

[[rules]]
id = "spinner_title"
state = "working"
priority = 800
region = "osc_title"
visible_working = true
regex = ['^[\x{2800}-\x{28FF}]\u{fe0f}?']

[[rules]]
id = "header"
state = "idle"
region = "top_non_empty_lines(3)"
visible_idle = true
line_regex = ['^\s*Cursor Agent$']
all = [{ any = [{ contains = ["~/"] }, { regex = ['\p{Alphabetic}+'] }] }]

[[rules]]
id = "stateless"
contains = ["never"]
"""


def rule_text(body: str, *, header: str = 'id = "agent"\n') -> str:
    return f'{header}\n[[rules]]\nid = "r"\n{body}\n'


def error_of(text: str) -> ManifestError:
    with pytest.raises(ManifestError) as info:
        parse_manifest(text, source="test.toml")
    return info.value


def test_herdr_format_manifest_loads_unchanged() -> None:
    manifest = parse_manifest(HERDR_FORMAT, source="cursor.toml")
    assert manifest.id == "cursor"
    assert manifest.aliases == ("cursor-agent",)
    assert manifest.labels == ("cursor", "cursor-agent")
    assert manifest.version == "2026.08.04.1"
    assert manifest.min_engine_version == 3
    assert manifest.updated_at == "2026-08-04T00:00:00Z"
    assert manifest.process_names == ()
    assert [r.id for r in manifest.rules] == ["history_view", "approval", "spinner_title",
                                              "header", "stateless"]
    viewer, approval, title, header, stateless = manifest.rules
    assert viewer.region.kind == "bottom_non_empty_lines" and viewer.region.count == 2
    assert viewer.region.name == "bottom_non_empty_lines(2)"
    assert viewer.skip_state_update and viewer.state == "unknown"
    assert approval.visible_blocker and approval.priority == 900
    assert len(approval.gate.any) == 2 and len(approval.gate.not_) == 1
    assert title.gate.regex[0].search("\u2801\ufe0f Cursor")
    assert header.region.kind == "top_non_empty_lines" and header.priority == 0
    assert header.gate.all[0].any[1].regex[0].search("abc")
    assert stateless.state is None and stateless.region.kind == "whole_recent"
    assert [r.id for r in manifest.by_priority] == ["history_view", "approval",
                                                    "spinner_title", "header", "stateless"]


def test_process_names_extension_and_source(tmp_path: Path) -> None:
    path = tmp_path / "mybot.toml"
    path.write_text('id = "mybot"\nprocess_names = ["my-bot", "mybot.py"]\n'
                    '[[rules]]\nid = "r"\nstate = "idle"\ncontains = ["ready"]\n')
    manifest = load_manifest(path)
    assert isinstance(manifest, Manifest)
    assert manifest.process_names == ("my-bot", "mybot.py")
    assert manifest.source == str(path)
    assert load_manifest(path, source="bundled:mybot.toml").source == "bundled:mybot.toml"


def test_manifest_from_data_validates_a_mapping() -> None:
    manifest = manifest_from_data({"id": "x", "rules": [{"id": "r", "contains": ["a"]}]},
                                  source="plugin:demo")
    assert manifest.source == "plugin:demo"
    with pytest.raises(ManifestError) as info:
        manifest_from_data({"id": "x", "rules": [{"id": "r"}]}, source="plugin:demo")
    assert info.value.line is None and info.value.rule_id == "r"


@pytest.mark.parametrize(("text", "fragment", "line"), [
    ('id = "a"\ncolour = 1\n[[rules]]\nid = "r"\ncontains = ["x"]\n', "'colour'", 2),
    ('id = "a"\n[[rules]]\nid = "r"\ncontains = ["x"]\nregions = "x"\n', "'regions'", 5),
    ('id = "a"\n[[rules]]\nid = "r"\ncontains = ["x"]\nall = [{ contains = ["y"], '
     'state = "idle" }]\n', "unknown key in gate 'state'", 2),
])
def test_unknown_keys_are_rejected(text: str, fragment: str, line: int) -> None:
    err = error_of(text)
    assert fragment in err.message
    assert err.line == line
    assert err.path == "test.toml"


def test_toml_syntax_error_has_line_and_column() -> None:
    err = error_of('id = "a"\n[[rules]]\nid = "r"\ncontains = ["x" "y"]\n')
    assert (err.line, err.column) == (4, 17)
    assert "invalid TOML" in err.message and "(at line" not in err.message
    assert str(err).startswith("test.toml:4:17: invalid TOML")
    err = error_of('id = "a"\n[[rules]]\nid = "r"\ncontains = ["x"\n')
    assert (err.line, err.column) == (5, 1)


def test_semantic_error_points_at_the_key_of_the_rule() -> None:
    text = ('id = "a"\n\n[[rules]]\nid = "first"\ncontains = ["x"]\n\n[[rules]]\n'
            'id = "second"\nstate = "busy"\ncontains = ["y"]\n')
    err = error_of(text)
    assert (err.line, err.column, err.rule_id) == (9, 1, "second")
    assert "'state'" in err.message and "busy" in err.message
    assert str(err) == f"test.toml:9:1: rule 'second': {err.message}"


def test_rules_written_inline_are_located_by_id() -> None:
    text = 'id = "a"\nrules = [\n  { id = "ok", contains = ["x"] },\n  { id = "bad" },\n]\n'
    err = error_of(text)
    assert err.rule_id == "bad" and err.line == 4


def test_load_manifest_reports_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as info:
        load_manifest(tmp_path / "missing.toml")
    assert info.value.path == str(tmp_path / "missing.toml")


@pytest.mark.parametrize(("body", "fragment"), [
    ('state = "idle"', "positive matcher"),
    ('not = [{ contains = ["x"] }]', "positive matcher"),
    ('contains = ["x"]\nnot = [{}]', "'not' gate needs at least one matcher"),
    ('contains = ["x"]\nall = [{ not = [{ contains = ["y"] }] }]', "positive matcher"),
    ('contains = ["x"]\nany = [{}]', "positive matcher"),
    ('contains = ["x"]\nstate = "done"', "'state'"),
    ('contains = ["x"]\npriority = 2147483648', "32-bit"),
    ('contains = ["x"]\npriority = true', "32-bit"),
    ('contains = ["x"]\npriority = "1"', "32-bit"),
    ('contains = ["x"]\nvisible_idle = 1', "'visible_idle'"),
    ('contains = ["x"]\nskip_state_update = true', 'requires state = "unknown"'),
    ('contains = ["x"]\nskip_state_update = true\nstate = "idle"', "requires state"),
    ('contains = ["x"]\nskip_state_update = true\nstate = "unknown"\nvisible_idle = true',
     "visible_*"),
    ('contains = ["x"]\nregion = "bottom"', "unknown region"),
    ('contains = ["x"]\nregion = "bottom_lines(-1)"', "non-negative"),
    ('contains = ["x"]\nregion = "bottom_lines(x)"', "non-negative"),
    ('contains = ["x"]\nregion = "top_non_empty_lines(0)"', "from 1 to 65535"),
    ('contains = ["x"]\nregion = "top_non_empty_lines(01)"', "leading zeros"),
    ('contains = ["x"]\nregion = "top_non_empty_lines(65536)"', "65535"),
    ('contains = ["x"]\nregion = 3', "'region' must be a string"),
    ('contains = "x"', "array of strings"),
    ('regex = ["(unclosed"]', "invalid regex"),
    ('line_regex = ["\\\\x{110000}"]', "invalid regex"),
    ("regex = ['(?<=a)b']", "look-around is not supported"),
    ("line_regex = ['(?!a)b']", "look-around is not supported"),
    ("regex = ['(a)\\1']", "backreferences are not supported"),
    ("regex = ['a++']", "bad repetition operator"),
    ("regex = ['(?>a)']", "atomic groups are not supported"),
    ('contains = ["x"]\nall = ["y"]', "inline tables"),
])
def test_rule_validation(body: str, fragment: str) -> None:
    err = error_of(rule_text(body))
    assert fragment in err.message
    assert err.rule_id == "r"
    assert err.line is not None


@pytest.mark.parametrize(("text", "fragment"), [
    ('[[rules]]\nid = "r"\ncontains = ["x"]\n', "'id' is required"),
    ('id = " "\n[[rules]]\nid = "r"\ncontains = ["x"]\n', "'id' is required"),
    ('id = "a"\n', "'rules'"),
    ('id = "a"\nrules = []\n', "1 to 128 rules"),
    ('id = "a"\nversion = "1.x"\n[[rules]]\nid = "r"\ncontains = ["x"]\n', "'version'"),
    ('id = "a"\nversion = "1..2"\n[[rules]]\nid = "r"\ncontains = ["x"]\n', "'version'"),
    ('id = "a"\nversion = "18446744073709551616"\n[[rules]]\nid = "r"\ncontains = ["x"]\n',
     "'version'"),
    ('id = "a"\nmin_engine_version = 4\n[[rules]]\nid = "r"\ncontains = ["x"]\n',
     "newer than this engine"),
    ('id = "a"\nmin_engine_version = -1\n[[rules]]\nid = "r"\ncontains = ["x"]\n',
     "non-negative"),
    ('id = "a"\nupdated_at = 2026-01-01\n[[rules]]\nid = "r"\ncontains = ["x"]\n',
     "'updated_at'"),
    ('id = "a"\naliases = "b"\n[[rules]]\nid = "r"\ncontains = ["x"]\n', "'aliases'"),
    ('id = "a"\nprocess_names = [""]\n[[rules]]\nid = "r"\ncontains = ["x"]\n',
     "'process_names'"),
    ('id = "a"\n[[rules]]\nid = ""\ncontains = ["x"]\n', "'id' is required"),
    ('id = "a"\nmin_engine_version = 2\n[[rules]]\nid = "r"\ncontains = ["x"]\n'
     'region = "top_non_empty_lines(2)"\n', "min_engine_version >= 3"),
])
def test_top_level_validation(text: str, fragment: str) -> None:
    assert fragment in error_of(text).message


def test_min_engine_version_two_still_allows_other_regions() -> None:
    manifest = parse_manifest('id = "a"\nmin_engine_version = 2\n[[rules]]\nid = "r"\n'
                              'contains = ["x"]\nregion = "bottom_lines(3)"\n')
    assert manifest.rules[0].region.count == 3


def test_rule_count_limit() -> None:
    rules = "".join(f'[[rules]]\nid = "r{i}"\ncontains = ["x"]\n' for i in range(MAX_RULES))
    assert len(parse_manifest(f'id = "a"\n{rules}').rules) == MAX_RULES
    err = error_of(f'id = "a"\n{rules}[[rules]]\nid = "extra"\ncontains = ["x"]\n')
    assert "1 to 128 rules" in err.message


def nested(depth: int) -> str:
    gate = '{ contains = ["x"] }'
    for _ in range(depth - 1):
        gate = f"{{ all = [{gate}] }}"
    return f"all = [{gate}]"


def test_nesting_depth_limit() -> None:
    parse_manifest(rule_text(nested(MAX_DEPTH)))
    assert "deeper than 8" in error_of(rule_text(nested(MAX_DEPTH + 1))).message


def test_direct_matchers_per_gate_limit() -> None:
    ok = ", ".join(f'"n{i}"' for i in range(MAX_MATCHERS_PER_GATE))
    parse_manifest(rule_text(f"contains = [{ok}]"))
    err = error_of(rule_text(f'contains = [{ok}, "extra"]'))
    assert "33 matchers in one gate" in err.message
    err = error_of(rule_text(f'contains = ["x"]\nany = [{{ contains = [{ok}, "extra"] }}]'))
    assert "any[0]" in err.message


def test_total_gate_limit() -> None:
    gates = ", ".join('{ contains = ["x"] }' for _ in range(32))
    rules = "".join(f'[[rules]]\nid = "r{i}"\ncontains = ["x"]\nany = [{gates}]\n'
                    for i in range(MAX_GATES // 32))
    parse_manifest(f'id = "a"\n{rules}')
    err = error_of(f'id = "a"\n{rules}[[rules]]\nid = "extra"\ncontains = ["x"]\n'
                   'any = [{ contains = ["y"] }]\n')
    assert "too many nested gates: 513" in err.message


def test_total_matcher_limit() -> None:
    needles = ", ".join(f'"n{i}"' for i in range(32))
    rules = "".join(f'[[rules]]\nid = "r{i}"\ncontains = [{needles}]\n'
                    for i in range(MAX_MATCHERS // 32))
    parse_manifest(f'id = "a"\n{rules}')
    err = error_of(f'id = "a"\n{rules}[[rules]]\nid = "extra"\ncontains = ["x"]\n')
    assert "too many matchers: 1025" in err.message


def test_matcher_length_limit() -> None:
    parse_manifest(rule_text(f'contains = ["{"a" * MAX_MATCHER_CHARS}"]'))
    err = error_of(rule_text(f'regex = ["{"a" * (MAX_MATCHER_CHARS + 1)}"]'))
    assert "longer than 512" in err.message


@pytest.mark.parametrize(("rust", "re2"), [
    (r"a$", r"a$"),
    (r"(?m)^a$", r"(?m)^a$"),
    (r"a(?i)b|c", r"a(?i)b|c"),
    (r"[$]\$", r"[$]\$"),
    (r"\x{2800}\u{FE0F}\u00e9\U0001F600", r"\x{2800}\x{FE0F}\x{E9}\x{1F600}"),
    (r"[\x{2800}-\x{28FF}]", r"[\x{2800}-\x{28FF}]"),
    (r"a\z", r"a\z"),
    (r"[[:alpha:]]$", r"[[:alpha:]]$"),
    (r"\d\D", r"[\p{Nd}][\P{Nd}]"),
    (r"\p{Uppercase_Letter}\pL\p{gc=nd}\P{lu}", r"[\p{Lu}][\p{L}][\p{Nd}][\P{Lu}]"),
    (r"\p{sc=Greek}\p{greek}", r"[\p{Greek}][\p{Greek}]"),
    (r"(?x) a b # comment", r"ab"),
    (r"(?ix: a b ) c", r"(?i:ab) c"),
    (r"(?u)a(?iu:b)", r"a(?i:b)"),
    (r"[[a-c][x]]", r"[a-cx]"),
    (r"[]a-]", r"[\]a\-]"),
    (r"(?P<n>a)(?<m>b)", r"(?P<n>a)(?<m>b)"),
])
def test_rust_regex_translation(rust: str, re2: str) -> None:
    assert translate(rust) == re2


def test_translated_regexes_keep_rust_meaning() -> None:
    def matches(pattern: str, text: str) -> bool:
        return compile_pattern(pattern).search(text)

    assert not matches(r"done$", "done\n")
    assert matches(r"(?m)done$", "done\nmore")
    assert matches(r"a(?i)b|c", "C")
    assert matches(r"a(?i)b|c", "aB")
    assert not matches(r"a(?i)b|c", "AB")
    assert matches(r"^[\x{2800}-\x{28FF}] ", "\u280b Claude")
    assert matches(r"\p{Alphabetic}+\d", "é3")
    assert matches(r"^\p{Alphabetic}$", "\u0345")  # Other_Alphabetic, a mark
    assert not matches(r"\p{Alphabetic}", "\u0300")
    assert matches(r"\bWörk\b", "x Wörk y")
    # \d \s \w are Unicode-aware, as in Rust (RE2's own are ASCII)
    assert matches(r"^\d$", "\u0663")
    assert matches(r"^\s$", "\u00a0") and matches(r"^\s$", "\x0b")
    assert matches(r"^\w+$", "éa_\u0301\u24b6")
    assert not matches(r"\w", "-│")
    assert matches(r"^[^\s\w]$", "│") and not matches(r"^[^\s\w]$", "é")
    assert matches(r"^\S$", "é") and not matches(r"\S", " \u3000")
    assert matches(r"^[\Wx]+$", "x-│") and not matches(r"[\Wx]", "é")
    assert matches(r"^[^\W]$", "é")
    assert matches(r"(?i)^É$", "é")
    assert matches(r"(?x) a \  b ", "a b")
    assert matches(r"\p{White_Space}", "\u3000") and matches(r"^\P{ascii}$", "é")
    assert matches("a", "\ud800a")  # a lone surrogate in the text never raises


@pytest.mark.parametrize(("pattern", "reason"), [
    (r"\x{zz}", "invalid code point"),
    (r"\x{110000}", "invalid code point"),
    (r"(?<=a)b", "look-around is not supported"),
    (r"(?<!a)b", "look-around is not supported"),
    (r"(?=a)", "look-around is not supported"),
    (r"(a)\1", "backreferences are not supported"),
    (r"a++", "bad repetition operator"),
    (r"a*+", "bad repetition operator"),
    (r"(?>a)", "atomic groups are not supported"),
    (r"\Z", "unrecognized escape"),
    (r"\C", "unrecognized escape"),
    (r"\Qa\E", "unrecognized escape"),
    (r"\<a", "not supported"),
    (r"\b{start}a", "not supported"),
    (r"[a-z&&[^c]]", "class set operation"),
    (r"[a[^b]]", "negated class inside a class"),
    (r"[^\Wx]", "negated class"),
    (r"(?-u)a", "(?-u)"),
    (r"(?R)a", "(?R)"),
    (r"\p{Emoji}", "unsupported Unicode property"),
    (r"\p{scx=Greek}", "Script_Extensions"),
    ("(unclosed", "missing )"),
    ("\ud800", "lone surrogate"),
])
def test_regexes_outside_the_dialect_are_refused(pattern: str, reason: str) -> None:
    with pytest.raises(ValueError, match=re.escape(reason)):
        compile_pattern(pattern)


def test_compare_versions() -> None:
    assert compare_versions("2026.8.4", "2026.08.04.0") == 0
    assert compare_versions("2026.8.10", "2026.8.9") == 1
    assert compare_versions("1", "1.0.1") == -1
