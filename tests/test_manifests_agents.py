"""The bundled set covers every agent label of herdr's manifest format, each with the
aliases herdr accepts for it, and docs/manifests.md's table of bundled agents says which
were written from recorded screens."""

from __future__ import annotations

import re
from pathlib import Path

from cmux_core.cli.manifests import manifest_paths
from cmux_core.detect.manifest import bundled_manifests_dir, load_manifest

ROOT = Path(__file__).resolve().parents[1]
RECORDINGS = ROOT / "tests" / "captured" / "agents"
HERDR_AGENTS = {
    "pi": [], "claude": ["claude-code"], "codex": [], "gemini": [],
    "cursor": ["cursor-agent"], "devin": ["devin-cli", "devin cli"],
    "agy": ["antigravity", "antigravity-cli"], "cline": [], "omp": [],
    "mastracode": ["mastra-code", "mastra code"], "opencode": ["opencode2", "open-code"],
    "copilot": ["github-copilot", "ghcs"], "kimi": ["kimi-code", "kimi code"],
    "kiro": ["kiro-cli"], "droid": [], "amp": ["amp-local"], "grok": ["grok-build"],
    "hermes": ["hermes-agent"], "kilo": ["kilo-code", "kilo code"],
    "qodercli": ["qoderclicn", "qoder", "qodercn"], "maki": [],
}
"""herdr's canonical agent labels and the aliases it parses for each."""


def bundled() -> dict[str, set[str]]:
    found = {}
    for path in manifest_paths([bundled_manifests_dir()]):
        manifest = load_manifest(path)
        found[manifest.id] = set(manifest.labels)
    return found


def test_every_herdr_agent_label_has_a_bundled_manifest() -> None:
    labels = bundled()
    missing = sorted(set(HERDR_AGENTS) - set(labels))
    assert not missing
    for agent, aliases in HERDR_AGENTS.items():
        assert set(aliases) <= labels[agent], agent


def test_the_docs_table_lists_every_bundled_agent_and_whether_it_was_recorded() -> None:
    text = (ROOT / "docs" / "manifests.md").read_text(encoding="utf-8")
    section = text.split("## Bundled agents", 1)[1]
    rows = re.findall(r"^\| `([\w-]+)`[^|]*\|[^|]*\| ([^|]*)\|", section, re.M)
    table = {agent: screens.strip() for agent, screens in rows}
    assert set(table) == set(bundled())
    for agent, screens in table.items():
        recorded = any(RECORDINGS.glob(f"{agent}-*.input"))
        assert screens.startswith("recorded") == recorded, (agent, screens)
