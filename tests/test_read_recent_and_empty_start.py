"""herdr's read semantics for ``recent`` sources on a real pane, and ``cmux serve --empty``."""

from __future__ import annotations

import pytest
from conftest import Api

from cmux_core.testing import ServerProcess


@pytest.mark.parametrize("source", ["recent", "recent_unwrapped"])
def test_recent_counts_the_blank_rows_below_the_cursor(api: Api, source: str) -> None:
    """The last N rows of the buffer are taken before the blank tail is dropped, so on a
    24-row screen whose text is at the top the last 20 rows are empty."""
    pane = api.focused_pane()
    api("pane.send_text", {"pane_id": pane, "text": "echo top-$((6*7))\n"})
    api.wait_text(pane, "top-42")
    read = api("pane.read", {"pane_id": pane, "source": source, "lines": 20})["read"]
    assert (read["text"], read["truncated"]) == ("", True)
    whole = api("pane.read", {"pane_id": pane, "source": source, "lines": 24})["read"]
    assert "top-42\n" in whole["text"] and whole["truncated"] is False
    visible = api("pane.read", {"pane_id": pane, "source": "visible", "lines": 20})["read"]
    assert "top-42\n" in visible["text"] and visible["truncated"] is False


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
