"""Authority declared by a plugin's integration decides what a hook report may change."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
from conftest import Api

from cmux_core.testing import ServerProcess, start_server

PLUGIN = textwrap.dedent('''
    from cmux_core import hookimpl

    @hookimpl
    def cmux_register_integrations(register):
        register("acme", install=lambda: None, uninstall=lambda: None,
                 status=lambda: {"installed": True}, source="acme:widget", agent="widget",
                 authority="session")
''')


@pytest.fixture
def declared_server(tmp_path: Path) -> ServerProcess:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "acme.py").write_text(PLUGIN)
    server = start_server(["--plugins-dir", str(plugins)])
    yield server
    server.stop()
    shutil.rmtree(server.home, ignore_errors=True)


def report(api: Api, source: str, state: str) -> None:
    assert api("pane.report_agent", {"pane_id": "w1:p1", "source": source, "agent": "widget",
                                     "state": state})["type"] == "ok"


def test_session_authority_ignores_reported_state(declared_server: ServerProcess) -> None:
    api = Api(declared_server)
    try:
        report(api, "acme:widget", "working")
        pane = api("pane.get", {"pane_id": "w1:p1"})["pane"]
        assert pane["agent_status"] != "working"
        # An undeclared source owns the state at once.
        report(api, "custom:widget", "working")
        assert api("pane.get", {"pane_id": "w1:p1"})["pane"]["agent_status"] == "working"
    finally:
        api.close()


def test_bad_authority_declaration_is_reported(tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "bad.py").write_text(PLUGIN.replace('authority="session"', 'authority="owner"'))
    server = start_server(["--plugins-dir", str(plugins)])
    try:
        listed = server.call("plugin.list")
        text = repr(listed)
        assert "authority must be" in text
    finally:
        server.stop()
        shutil.rmtree(server.home, ignore_errors=True)
