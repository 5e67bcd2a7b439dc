"""Every bundled manifest against screens that are not its agent's.

The rule checked: a manifest may report ``blocked`` or ``working`` for a recorded screen
only when that state is really visible on it.

* A non-agent recording (a shell prompt, ``less``, ``vim``, ``top``, a progress bar, a
  REPL...) shows no agent, so no manifest may read it as ``blocked`` or ``working``.
* Another agent's recording shows that agent's recorded state. A manifest may read a
  recorded permission prompt as ``blocked`` and a recorded running turn as ``working``
  (the evidence is on screen, whoever drew it), but never ``blocked`` or ``working`` on a
  recorded idle prompt or start-up error. A menu the user opened is drawn as a dialog is
  (a cursor on options, a confirm/cancel hint): only its own agent's manifest knows who
  opened it, so another manifest may read it ``blocked``, never ``working``.

``idle``, ``unknown`` and ``skip_state_update`` verdicts are not checked here: a known
agent falls back to ``idle`` on any screen it does not recognise. A manifest's own
agent's recordings are checked exactly by ``test_manifests_bundled.py``.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from cmux_core.cli.manifests import manifest_paths
from cmux_core.detect.engine import ScreenInput, classify
from cmux_core.detect.manifest import Manifest, bundled_manifests_dir, load_manifest, parse_manifest
from cmux_core.terminal.backends import make_emulator
from cmux_core.terminal.emulator import read_text

CAPTURED = Path(__file__).parent / "captured"
VISIBLE_ONLY = ("blocked", "working")


@dataclass(frozen=True)
class Recording:
    name: str
    agent: str | None
    """The recorded agent's label, None for a non-agent program."""
    state: str | None
    """The recorded agent state (idle, working, blocked, menu, unknown)."""
    screen: ScreenInput


@cache
def bundled() -> tuple[Manifest, ...]:
    return tuple(load_manifest(path) for path in manifest_paths([bundled_manifests_dir()]))


def recording_metas() -> list[Path]:
    return sorted(CAPTURED.glob("**/*.meta.toml"))


@cache
def replay(meta_path: Path) -> Recording:
    """The recorded bytes fed to an emulator and read back as the server's detection
    input (screen text, OSC title, OSC 9 progress)."""
    meta = tomllib.loads(meta_path.read_text(encoding="utf-8"))
    emulator = make_emulator("pyte", meta.get("cols", 80), meta.get("rows", 24))
    emulator.feed(meta_path.with_name(meta_path.name.replace(".meta.toml", ".input"))
                  .read_bytes())
    screen, _ = read_text(emulator, "detection", None, "text")
    agent = meta.get("agent")
    name = meta_path.name.removesuffix(".meta.toml")
    inp = ScreenInput(screen, emulator.title or "", emulator.progress or "")
    if isinstance(agent, dict):
        return Recording(name, str(agent["name"]).lower(), str(agent["state"]), inp)
    return Recording(name, None, None, inp)


def unseen_verdicts(manifest: Manifest, recording: Recording) -> list[str]:
    """The manifest's verdict on a screen that is not its agent's, when it claims a
    ``blocked`` or ``working`` state the recording does not show; [] otherwise."""
    if recording.agent is not None and recording.agent in manifest.labels:
        return []
    result = classify(manifest, recording.screen)
    if recording.state == "menu" and result.state == "blocked":
        return []
    if result.state in VISIBLE_ONLY and result.state != recording.state:
        return [f"{manifest.id}: {result.state} by rule {result.matched_rule!r} on "
                f"{recording.name} (recorded: {recording.state or 'no agent'})"]
    return []


def test_recordings_of_both_kinds_are_present() -> None:
    recordings = [replay(path) for path in recording_metas()]
    assert sum(r.agent is None for r in recordings) >= 20
    assert {r.agent for r in recordings} >= {"claude", "codex", "gemini"}
    assert {r.state for r in recordings} >= {"idle", "working", "blocked", "menu"}


@pytest.mark.parametrize("meta_path", recording_metas(),
                         ids=lambda p: p.name.removesuffix(".meta.toml"))
def test_no_manifest_claims_a_state_the_screen_does_not_show(meta_path: Path) -> None:
    recording = replay(meta_path)
    problems = [p for manifest in bundled() for p in unseen_verdicts(manifest, recording)]
    assert not problems, "\n".join(problems) + "\n" + recording.screen.screen


def test_a_loose_rule_is_caught() -> None:
    """A rule keyed on a bare key hint or a shell prompt is what the check exists for."""
    loose = parse_manifest(
        'id = "loose"\n'
        '[[rules]]\nid = "any_cancel"\nstate = "working"\ncontains = ["esc to cancel"]\n'
        '[[rules]]\nid = "any_prompt"\nstate = "blocked"\nline_regex = [\'\\$ \']\n')
    found = [p for path in recording_metas() for p in unseen_verdicts(loose, replay(path))]
    assert any("any_cancel" in p and "claude-menu-1" in p for p in found)
    assert any("any_prompt" in p and "bash-prompt" in p for p in found)
    assert any("any_prompt" in p and "less-quit" in p for p in found)
