"""The documentation keeps up with the server: every method is documented somewhere."""

from __future__ import annotations

from pathlib import Path

from cmux_core.api.dispatch import MethodTable
from cmux_core.api.methods import register_core_methods

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_every_method_is_documented() -> None:
    table = MethodTable()
    register_core_methods(table)
    text = "".join(p.read_text() for p in DOCS.glob("*.md"))
    missing = [name for name in table.names() if f"`{name}`" not in text]
    assert not missing, f"methods missing from docs/*.md: {missing}"


def test_readme_links_resolve() -> None:
    readme = (DOCS.parent / "README.md").read_text()
    for part in readme.split("](")[1:]:
        target = part.split(")", 1)[0]
        if not target.startswith(("http", "#")):
            assert (DOCS.parent / target).exists(), target
