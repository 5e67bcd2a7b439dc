"""The cmux app's GUI surfaces (browser, project) asked of a real server: in a
``workspace.create`` layout they are ``invalid_layout`` naming the surface's ``type``,
with nothing created, even when the rest of the tree is good; asked on their own they are
``not_supported`` naming the type. (Markdown surfaces work: test_markdown_surface.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from cmux_v2 import V2

from cmux_core.testing import ServerProcess


def counts(v2: V2) -> tuple[int, int]:
    workspaces = v2("workspace.list")["workspaces"]
    panes = sum(len(v2("pane.list", workspace_id=w["id"])["panes"]) for w in workspaces)
    return len(workspaces), panes


@pytest.mark.parametrize("kind", ["browser", "project"])
def test_gui_surface_in_a_layout_creates_nothing(shared_server: ServerProcess, tmp_path: Path,
                                                 kind: str) -> None:
    (tmp_path / "README.md").write_text("# Readme\n")
    gui = {"type": kind, "path": "README.md", "url": "https://example.com"}
    layout = {"direction": "horizontal", "children": [
        {"pane": {"surfaces": [{"type": "terminal", "command": "echo left"}]}},
        {"pane": {"surfaces": [{"type": "terminal"}, gui]}},
    ]}
    with V2(shared_server.socket_path) as v2:
        before = counts(v2)
        error = v2.error("workspace.create", cwd=str(tmp_path), layout=layout)
        assert error.code == "invalid_layout"
        assert error.data == {"path": "layout.children[1].pane.surfaces[1].type"}
        assert f"{kind} surfaces need the cmux app's window" in error.message
        assert counts(v2) == before


@pytest.mark.parametrize("method", ["surface.create", "surface.split", "pane.create"])
def test_gui_surface_on_its_own_is_not_supported(shared_server: ServerProcess,
                                                 method: str) -> None:
    with V2(shared_server.socket_path) as v2:
        before = counts(v2)
        error = v2.error(method, type="browser", direction="right")
        assert error.code == "not_supported" and error.data == {"type": "browser"}
        assert "terminal surfaces only" in error.message
        assert counts(v2) == before
