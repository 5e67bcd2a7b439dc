"""The ``[resume]`` manifest table: parsed, validated and filled in with a session."""

from __future__ import annotations

from pathlib import Path

import pytest

from cmux_core.detect.manifest import ManifestError, load_manifest, parse_manifest

BASE = 'id = "fake"\n\n[[rules]]\nid = "any"\nstate = "idle"\ncontains = ["x"]\n'
BUNDLED = Path(__file__).resolve().parents[1] / "manifests"


def test_a_resume_template_is_filled_with_its_kind_of_reference() -> None:
    manifest = parse_manifest(BASE + '\n[resume]\nargv = ["fake", "--resume={session_id}"]\n')
    assert manifest.resume == ("fake", "--resume={session_id}")
    assert manifest.resume_argv("id", "abc") == ["fake", "--resume=abc"]
    assert manifest.resume_argv("path", "/tmp/s.jsonl") is None
    by_path = parse_manifest(BASE + '\n[resume]\nargv = ["fake", "--session", "{session_path}"]\n')
    assert by_path.resume_argv("path", "/tmp/s.jsonl") == ["fake", "--session", "/tmp/s.jsonl"]
    assert parse_manifest(BASE).resume_argv("id", "abc") is None


@pytest.mark.parametrize(("table", "message"), [
    ('resume = "fake --resume"', "'resume' must be a table"),
    ('[resume]\nargv = []', "1 to 32 non-blank strings"),
    ('[resume]\nargv = ["fake", "  "]', "1 to 32 non-blank strings"),
    ('[resume]\nargv = ["fake", "--resume"]', "needs a placeholder"),
    ('[resume]\nargv = ["fake", "{session_id}", "{session_path}"]', "only one kind"),
    ('[resume]\nargv = ["{session_id}"]', "argv[0] is the program"),
    ('[resume]\nargv = ["fake", "{sessionid}"]', "unknown placeholder '{sessionid}'"),
    ('[resume]\nargv = ["fake", "{session_id}}"]', "a brace outside a placeholder"),
    ('[resume]\nargv = ["fake", "{session_id}"]\nenv = {}', "unknown key 'env' in [resume]"),
])
def test_a_bad_resume_table_is_refused_naming_the_problem(table: str, message: str) -> None:
    text = (table + "\n" + BASE) if table.startswith("resume =") else (BASE + "\n" + table + "\n")
    with pytest.raises(ManifestError) as caught:
        parse_manifest(text)
    assert message in str(caught.value)


def test_a_resume_error_points_at_the_table() -> None:
    with pytest.raises(ManifestError) as caught:
        parse_manifest(BASE + '\n[resume]\nargv = ["fake"]\n')
    assert caught.value.line == 8


@pytest.mark.parametrize(("agent", "argv"), [
    ("claude", ["claude", "--resume", "S1"]),
    ("codex", ["codex", "resume", "S1"]),
    ("copilot", ["copilot", "--resume", "S1"]),
    ("gemini", ["gemini", "--resume", "S1"]),
    ("opencode", ["opencode", "--session", "S1"]),
])
def test_bundled_agents_resume_with_their_own_cli(agent: str, argv: list[str]) -> None:
    assert load_manifest(BUNDLED / f"{agent}.toml").resume_argv("id", "S1") == argv
