"""The read semantics of ``recent`` sources on a real pane, and ``cmux serve --empty``."""

from __future__ import annotations

import pytest
from conftest import Api

from cmux_core.testing import ServerProcess


def test_recent_reads_the_seeds_example(api: Api) -> None:
    """seed 004's ``pane.read`` example: ``recent`` with ``lines: 2`` is the last two
    lines of output, not the blank rows below them, and the buffer holds more rows."""
    pane = api.run(["sh", "-c", "printf '$ cargo test\\nTests: 0 failed in 3.4s\\n'; sleep 30"])
    api.wait_text(pane, "Tests: 0 failed")
    read = api("pane.read", {"pane_id": pane, "source": "recent", "lines": 2,
                             "format": "text"})["read"]
    assert read["text"] == "$ cargo test\nTests: 0 failed in 3.4s\n"
    assert read["truncated"] is True and read["source"] == "recent"


@pytest.mark.parametrize("source", ["recent", "recent_unwrapped"])
def test_recent_skips_the_blank_rows_below_the_cursor(api: Api, source: str) -> None:
    """On a 24-row screen whose text is at the top the last lines of output are that
    text; ``truncated`` says the buffer holds more rows than were asked for."""
    pane = api.focused_pane()
    api("pane.send_text", {"pane_id": pane, "text": "echo top-$((6*7))\n"})
    api.wait_text(pane, "top-42")
    for fmt in ("text", "ansi"):
        read = api("pane.read", {"pane_id": pane, "source": source, "lines": 2,
                                 "format": fmt})["read"]
        assert "top-42" in read["text"] and read["truncated"] is True
        assert len(read["text"].splitlines()) == 2
    whole = api("pane.read", {"pane_id": pane, "source": source, "lines": 24})["read"]
    assert "top-42\n" in whole["text"] and whole["truncated"] is False
    assert api.read(pane, source, lines=0) == ""


@pytest.mark.cmux_server(args=["--empty"])
def test_empty_server_starts_without_workspaces(api: Api, cmux_server: ServerProcess) -> None:
    assert api("workspace.list")["workspaces"] == []
    assert api("window.list")["windows"] == []
    assert api("pane.list")["panes"] == []
    assert api.error("workspace.current")["code"] == "not_found"
    assert api.error("pane.current")["code"] == "pane_not_found"
    created = api("workspace.create", {"label": "first"})
    assert created["workspace"]["focused"] is True
    assert [w["ref"] for w in api("window.list")["windows"]] == ["window:1"]
    assert api("workspace.current")["workspace_id"] == created["workspace_id"]


@pytest.mark.cmux_server(args=["--empty", "--shell", "/nonexistent/sh"])
def test_a_workspace_that_cannot_start_leaves_no_window(api: Api,
                                                        cmux_server: ServerProcess) -> None:
    for params in ({}, {"layout": {"direction": "vertical", "children": [
            {"pane": {"surfaces": [{"type": "terminal"}]}},
            {"pane": {"surfaces": [{"type": "terminal"}, {"type": "terminal"}]}}]}}):
        err = api.error("workspace.create", params)
        assert err["code"] == "workspace_create_failed" and "/nonexistent/sh" in err["message"]
        assert api("window.list")["windows"] == []
        assert api("workspace.list")["workspaces"] == []
        assert api("pane.list")["panes"] == []
    err = api.error("window.create")
    assert err["code"] == "window_create_failed" and api("window.list")["windows"] == []
