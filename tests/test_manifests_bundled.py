# ruff: noqa: RUF001  (agent screens are made of these look-alike glyphs)
"""The bundled manifests: each is valid, passes its cases, has a case for every rule, and
classifies the real agent screens recorded under ``tests/captured/agents/``."""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path

import pytest

from cmux_core.cli.main import add_common
from cmux_core.cli.manifests import (
    add_explain_command,
    add_manifest_commands,
    cases_for,
    manifest_paths,
    run_case,
)
from cmux_core.detect.engine import ScreenInput, classify
from cmux_core.detect.manifest import Manifest, bundled_manifests_dir, load_manifest
from cmux_core.terminal.backends import make_emulator
from cmux_core.terminal.emulator import read_text

BUNDLED = manifest_paths([bundled_manifests_dir()])
REQUIRED = {"claude", "codex", "gemini", "opencode", "cursor", "copilot", "amp", "aider",
            "goose", "qwen"}
CAPTURED = Path(__file__).parent / "captured" / "agents"


def bundled(agent: str) -> Manifest:
    for path in BUNDLED:
        manifest = load_manifest(path)
        if agent.lower() in manifest.labels or agent in manifest.process_names:
            return manifest
    raise LookupError(agent)


def test_every_required_agent_is_bundled() -> None:
    ids = {load_manifest(path).id for path in BUNDLED}
    assert ids >= REQUIRED


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_bundled_manifest_cases_pass_and_cover_every_rule(path: Path) -> None:
    manifest = load_manifest(path, source=f"bundled:{path.name}")
    cases = cases_for(path)
    assert cases, f"{path.name} has no cases file"
    failures = {case.name: problems for case in cases
                if (problems := run_case(manifest, case))}
    assert not failures
    selected = {classify(manifest, ScreenInput(c.screen, c.title, c.progress)).matched_rule
                for c in cases}
    uncovered = [rule.id for rule in manifest.rules if rule.id not in selected]
    assert not uncovered, f"rules without a case: {uncovered}"
    states = {rule.state for rule in manifest.rules}
    assert {"idle", "working", "blocked"} <= states


def recorded_agent_screens() -> list[Path]:
    found = []
    for meta in sorted(CAPTURED.glob("**/*.meta.toml")):
        data = tomllib.loads(meta.read_text(encoding="utf-8"))
        if isinstance(data.get("agent"), dict) and data["agent"].get("state"):
            found.append(meta)
    return found


@pytest.mark.parametrize("meta_path", recorded_agent_screens(),
                         ids=lambda p: p.name.removesuffix(".meta.toml"))
def test_recorded_agent_screen_is_classified(meta_path: Path) -> None:
    """Replay the recorded bytes into an emulator, read the detection text and OSC
    strings as the server would, and classify with the bundled manifest."""
    meta = tomllib.loads(meta_path.read_text(encoding="utf-8"))
    agent = meta["agent"]
    emulator = make_emulator("pyte", meta.get("cols", 80), meta.get("rows", 24))
    emulator.feed(meta_path.with_name(meta_path.name.replace(".meta.toml", ".input"))
                  .read_bytes())
    screen, _ = read_text(emulator, "detection", None, "text")
    inp = ScreenInput(screen, emulator.title or "", emulator.progress or "")
    result = classify(bundled(agent["name"]), inp)
    expected = agent["state"]
    if expected == "menu":
        assert result.skip_state_update, f"{result} on\n{screen}"
    else:
        assert result.state == expected, f"{result} on\n{screen}"
        assert not result.skip_state_update


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="cmux")
    add_common(parser, top=True)
    sub = parser.add_subparsers()
    add_manifest_commands(sub, add_common)
    agent = sub.add_parser("agent")
    add_explain_command(agent.add_subparsers(), add_common)
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


def test_manifests_check_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["manifests", "check", str(bundled_manifests_dir())]) == 0
    bad = tmp_path / "bad.toml"
    bad.write_text('id = "bad"\n\n[[rules]]\nid = "r"\nregion = "middle"\ncontains = ["x"]\n')
    assert run_cli(["manifests", "check", str(bad)]) == 1
    assert f"{bad}:5:1: rule 'r': unknown region 'middle'" in capsys.readouterr().err


def test_manifests_test_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["manifests", "test"]) == 0
    (tmp_path / "bot.toml").write_text(
        'id = "bot"\n[[rules]]\nid = "busy"\nstate = "working"\ncontains = ["busy"]\n'
        '[[rules]]\nid = "ask"\nstate = "blocked"\ncontains = ["allow?"]\n')
    (tmp_path / "bot.cases.toml").write_text(
        '[[cases]]\nname = "busy screen"\nstate = "working"\nrule = "busy"\n'
        'screen = "busy  \\n\\n"\n'
        '[[cases]]\nname = "wrong"\nstate = "idle"\nscreen = "allow?"\n')
    (tmp_path / "bot.cases").mkdir()
    (tmp_path / "bot.cases" / "idle-empty.txt").write_text("hello\n")
    capsys.readouterr()
    assert run_cli(["manifests", "test", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "2/3 cases pass" in out
    assert "FAIL wrong: state blocked, expected idle" in out
    assert "rules no case selects" not in out


def test_offline_explain_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    screen = tmp_path / "screen.txt"
    screen.write_text("────\n❯ \n────\n  ? for shortcuts\n")
    assert run_cli(["agent", "explain", "--file", str(screen), "--agent", "claude-code",
                    "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "agent: claude  state: idle" in out and "matched rule: prompt_box" in out
    assert run_cli(["--json", "agent", "explain", "--file", str(screen), "--agent", "claude",
                    "--title", "⠋ task"]) == 0
    assert '"state": "working"' in capsys.readouterr().out
    assert run_cli(["agent", "explain", "--file", str(screen), "--agent", "nobody"]) == 0
    assert "fallback reason: unknown_agent" in capsys.readouterr().out
    screen.write_text("nothing any rule knows\n")
    assert run_cli(["agent", "explain", "--file", str(screen), "--agent", "claude"]) == 0
    out = capsys.readouterr().out
    assert "state: unknown (idle only once" in out and "state: idle" not in out
