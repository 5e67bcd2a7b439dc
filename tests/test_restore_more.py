"""What else a restart brings back: the old ids of moved panes, metadata tokens,
notifications and unread flags, the env of surfaces built from cmux layout trees and the
titles programs set. Real servers are stopped and started again on one socket and state
directory, as in ``test_persistence.py``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cmux_core.config import session_file
from cmux_core.testing import ServerProcess, start_server, wait_until


@dataclass
class Place:
    """One socket and state directory that successive servers share."""

    socket: Path
    state: Path

    @property
    def file(self) -> Path:
        return session_file(self.socket, self.state / "cmux")

    def start(self) -> ServerProcess:
        return start_server(["--socket", str(self.socket)],
                            env={"XDG_STATE_HOME": str(self.state)})


@pytest.fixture
def place(tmp_path: Path) -> Iterator[Place]:
    socket_dir = Path(tempfile.mkdtemp(prefix="cmux-r-", dir=tempfile.gettempdir()))
    try:
        yield Place(socket_dir / "s.sock", tmp_path / "state")
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)


def text(server: ServerProcess, pane_id: str) -> str:
    return str(server.call("pane.read", {"pane_id": pane_id, "source": "recent",
                                         "lines": 100})["read"]["text"])


def surfaces(server: ServerProcess, pane_id: str) -> list[dict[str, Any]]:
    return list(server.call("pane.surfaces", {"pane_id": pane_id})["surfaces"])


def shows(server: ServerProcess, surface_id: str, line: str) -> bool:
    read = server.call("surface.read_text", {"surface_id": surface_id})
    return line in str(read["text"])


def test_layout_surfaces_keep_their_env(place: Place) -> None:
    first = place.start()
    layout = {"pane": {"surfaces": [
        {"type": "terminal", "name": "one", "env": {"RESTORE_MARK": "first"}},
        {"type": "terminal", "name": "two", "env": {"RESTORE_MARK": "second"}}]}}
    created = first.call("workspace.create", {"layout": layout, "title": "laid out"})
    pane_id = created["pane_id"]
    before = [s["id"] for s in surfaces(first, pane_id)]
    # Every surface's shell is told its own surface id.
    first.call("surface.send_text", {"surface_id": before[1],
                                     "text": "echo id-$CMUX_SURFACE_ID-end\r"})
    wait_until(lambda: shows(first, before[1], f"id-{before[1]}-end"), 15,
               message="CMUX_SURFACE_ID")
    assert first.stop() == 0

    second = place.start()
    after = [s["id"] for s in surfaces(second, pane_id)]
    assert after == before
    for surface_id, mark in zip(after, ("first", "second"), strict=True):
        # The typed line shows the variable's name; only the shell's output holds its value.
        second.call("surface.send_text", {"surface_id": surface_id,
                                          "text": "echo got-$RESTORE_MARK-end\r"})
        wait_until(lambda s=surface_id, m=mark: shows(second, s, f"got-{m}-end"), 15,
                   message=f"{mark} surface's env")
