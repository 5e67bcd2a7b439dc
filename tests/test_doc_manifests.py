"""Every detection manifest the documentation shows is one detection accepts, and it reads
the screens it is written for.

Manifests are found in the fenced ``toml`` blocks of ``docs/**/*.md`` that hold a
``[[rules]]`` table, in ``docs/examples/**/*.toml``, and in what the example plugins under
``docs/examples/`` register through ``cmux_register_manifests``. Each one's ``id`` needs
screens in :data:`SCREENS`, so a new example cannot land untested.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from cmux_core.detect.engine import ScreenInput, classify
from cmux_core.detect.manifest import Manifest, manifest_from_data, parse_manifest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
TOML_BLOCK = re.compile(r"^```toml\n(.*?)^```", re.S | re.M)

SCREENS: dict[str, list[tuple[str, str, str, str]]] = {
    # id: (screen, OSC title, expected state, expected rule)
    "mybot": [
        ("mybot> \n", "", "idle", "prompt"),
        ("mybot> list the files\n", "\u280b mybot", "working", "spinner"),
        ("$ rm -rf build\nAllow this command? (y)es / (n)o\n", "", "blocked",
         "permission_prompt"),
        ("Allow this command? (y)es / (n)o\ncancelled\nmybot> \n", "", "idle", "prompt"),
    ],
    "tally": [
        ("tally> \n", "", "idle", "prompt"),
        ("tally> count the files\n\u280b working...\n", "", "working", "spinner"),
    ],
    "toy": [
        ("toy> \n", "", "idle", "prompt"),
        ("toy> fix it\nthinking...\n", "", "working", "thinking"),
        ("$ make clean\nrun this command? [y/n]\n", "", "blocked", "approval"),
    ],
}


def _doc_blocks() -> list[tuple[str, Manifest]]:
    found = []
    for path in sorted(DOCS.glob("**/*.md")):
        for number, match in enumerate(TOML_BLOCK.finditer(path.read_text(encoding="utf-8"))):
            if "[[rules]]" in match.group(1):
                where = f"{path.relative_to(ROOT)}#{number}"
                found.append((where, parse_manifest(match.group(1), source=where)))
    for path in sorted((DOCS / "examples").glob("**/*.toml")):
        where = str(path.relative_to(ROOT))
        found.append((where, parse_manifest(path.read_text(encoding="utf-8"), source=where)))
    return found


def _plugin_manifests() -> list[tuple[str, Manifest]]:
    found = []
    for path in sorted((DOCS / "examples").glob("**/*.py")):
        spec = importlib.util.spec_from_file_location(f"doc_example_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        try:
            spec.loader.exec_module(module)
        finally:
            del sys.modules[spec.name]
        hook = getattr(module, "cmux_register_manifests", None)
        if hook is None:
            continue
        registered: list[str | Path | Mapping[str, Any]] = []
        hook(registered.append)
        for index, item in enumerate(registered):
            where = f"{path.relative_to(ROOT)}[{index}]"
            if isinstance(item, Path):
                found.append((where, parse_manifest(item.read_text(encoding="utf-8"),
                                                    source=where)))
            elif isinstance(item, str):
                found.append((where, parse_manifest(item, source=where)))
            else:
                found.append((where, manifest_from_data(item, source=where)))
    return found


def test_the_docs_show_manifests_of_both_kinds() -> None:
    """The collectors find the manifest page's example and the plugin example, so the
    tests below cannot pass on an empty list."""
    assert any(m.id == "mybot" for _, m in _doc_blocks())
    assert any(m.id == "toy" for _, m in _plugin_manifests())


@pytest.mark.parametrize("source", ["docs", "plugins"])
def test_every_doc_manifest_is_accepted_and_classifies_its_screens(source: str) -> None:
    manifests = _doc_blocks() if source == "docs" else _plugin_manifests()
    for where, manifest in manifests:
        screens = SCREENS.get(manifest.id)
        assert screens, f"{where}: add screens for manifest {manifest.id!r} to SCREENS"
        for screen, title, state, rule in screens:
            result = classify(manifest, ScreenInput(screen, title, ""))
            assert (result.state, result.matched_rule) == (state, rule), (where, screen)
