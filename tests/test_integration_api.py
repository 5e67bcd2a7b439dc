"""integration.* and ``cmux integration``: a loose-file plugin's integrations inside a real server.

The test plugin edits a JSON settings file under ``$ACME_HOME`` through
``cmux_core.plugin_host.settings_files``, as a third-party integration would. Its names are
herdr integration targets so that every reply is also checked against the herdr schema.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Api

from cmux_core.testing import ServerProcess, start_server

PLUGIN = textwrap.dedent('''
    import os
    from pathlib import Path

    from cmux_core import hookimpl
    from cmux_core.plugin_host.settings_files import edit_json, remove_file, write_text

    HOME = Path(os.environ["ACME_HOME"])
    SETTINGS = HOME / "settings.json"
    SCRIPT = HOME / "hooks" / "acme-hook.sh"

    def install(*, dry_run=False, options={}):
        command = options.get("command", f"sh {SCRIPT} session")

        def add(data):
            entries = data.setdefault("hooks", {}).setdefault("SessionStart", [])
            if {"command": command} not in entries:
                entries.append({"command": command})

        return [write_text(SCRIPT, "#!/bin/sh\\nexit 0\\n", mode=0o755, dry_run=dry_run),
                edit_json(SETTINGS, add, dry_run=dry_run), "restart the agent to load it"]

    def uninstall(*, dry_run=False):
        def drop(data):
            entries = data.get("hooks", {}).get("SessionStart", [])
            entries[:] = [e for e in entries if "acme-hook" not in e.get("command", "")]

        return [edit_json(SETTINGS, drop, dry_run=dry_run), remove_file(SCRIPT, dry_run=dry_run)]

    def status():
        installed = SETTINGS.exists() and "acme-hook" in SETTINGS.read_text()
        return {"installed": installed, "path": str(SETTINGS)}

    def plain_install():
        return ["did it"]

    def bad_install():
        return {"not": "a list"}

    def broken_status():
        raise RuntimeError("status exploded")

    def crashing_install(*, dry_run=False):
        if not dry_run:
            raise RuntimeError("install exploded")
        return ["would do it"]

    @hookimpl
    def cmux_register_integrations(register):
        register("grok", install=install, uninstall=uninstall, status=status,
                 description="acme hooks", source="acme:grok", agent="grok",
                 authority="shared", state_ttl_ms=5000)
        register("devin", install=plain_install, uninstall=plain_install,
                 status=broken_status)
        register("droid", install=bad_install, uninstall=bad_install,
                 status=lambda: {"installed": "yes"})
        register("kimi", install=crashing_install, uninstall=plain_install,
                 status=lambda: {"installed": False})
''')

USER_SETTINGS = '{"theme": "dark", "hooks": {"SessionStart": [{"command": "mine"}]}}\n'


@pytest.fixture
def acme(tmp_path: Path) -> Iterator[tuple[ServerProcess, Path]]:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "acme.py").write_text(PLUGIN)
    home = tmp_path / "acme"
    home.mkdir()
    server = start_server(["--plugins-dir", str(plugins)], env={"ACME_HOME": str(home)})
    try:
        yield server, home
    finally:
        server.stop()
        shutil.rmtree(server.home, ignore_errors=True)


@pytest.fixture
def api(acme: tuple[ServerProcess, Path]) -> Iterator[Api]:
    with Api(acme[0]) as conn:
        yield conn


def cli(server: ServerProcess, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``cmux integration ARGS`` in the server's environment, loading the acme plugin from
    its directory (the command runs the integrations itself, not the server)."""
    return subprocess.run([sys.executable, "-m", "cmux_core", "integration", *args,
                           "--plugins-dir", str(home.parent / "plugins")],
                          capture_output=True, text=True, timeout=60, env=server.env)


def test_list_shows_declarations_and_status(api: Api, acme: tuple[ServerProcess, Path]) -> None:
    listed = api("integration.list")
    assert listed["type"] == "integration_list"
    rows = {row["name"]: row for row in listed["integrations"]}
    assert set(rows) >= {"grok", "devin", "droid"}
    grok = rows["grok"]
    assert grok["plugin_id"] == "acme" and grok["target"] == "grok"
    assert (grok["source"], grok["agent"], grok["authority"], grok["state_ttl_ms"]) == (
        "acme:grok", "grok", "shared", 5000)
    assert grok["status"] == {"installed": False, "path": str(acme[1] / "settings.json")}
    assert rows["devin"]["status"]["error"]["code"] == "integration_status_failed"
    assert "status exploded" in rows["devin"]["status"]["error"]["message"]
    assert rows["droid"]["status"]["error"]["code"] == "integration_status_failed"
    assert api("integration.status", {"target": "grok"})["installed"] is False


def test_install_round_trip(api: Api, acme: tuple[ServerProcess, Path]) -> None:
    home = acme[1]
    settings = home / "settings.json"
    settings.write_text(USER_SETTINGS)

    dry = api("integration.install", {"target": "grok", "dry_run": True})
    assert dry["type"] == "integration_install" and dry["dry_run"] is True
    assert settings.read_text() == USER_SETTINGS and not (home / "hooks").exists()
    assert any("would be updated" in m and "+++ " in m and "acme-hook.sh session" in m
               for m in dry["messages"])
    assert dry["details"]["messages"] == dry["messages"]
    assert [f["created"] for f in dry["files"]] == [True, False]

    done = api("integration.install", {"target": "grok"})
    assert "restart the agent to load it" in done["messages"]
    data = json.loads(settings.read_text())
    assert data["theme"] == "dark"
    assert [e["command"] for e in data["hooks"]["SessionStart"]] == [
        "mine", f"sh {home / 'hooks' / 'acme-hook.sh'} session"]
    assert (home / "settings.json.cmux-backup").read_text() == USER_SETTINGS
    assert api("integration.status", {"target": "grok"})["installed"] is True

    first = settings.read_bytes()
    again = api("integration.install", {"target": "grok"})
    assert not any(f["changed"] for f in again["files"])
    assert settings.read_bytes() == first

    gone = api("integration.uninstall", {"target": "grok"})
    assert gone["type"] == "integration_uninstall"
    assert settings.read_text() == USER_SETTINGS  # the user's own bytes again
    assert not (home / "hooks" / "acme-hook.sh").exists()
    assert api("integration.status", {"target": "grok"})["installed"] is False


def test_install_options_reach_the_callable(api: Api, acme: tuple[ServerProcess, Path]) -> None:
    api("integration.install", {"target": "grok", "options": {"command": "acme-hook --fast"}})
    data = json.loads((acme[1] / "settings.json").read_text())
    assert data["hooks"]["SessionStart"] == [{"command": "acme-hook --fast"}]


def test_unparsable_settings_change_nothing(api: Api, acme: tuple[ServerProcess, Path]) -> None:
    settings = acme[1] / "settings.json"
    settings.write_text('{"theme": "dark",')
    error = api.error("integration.install", {"target": "grok"})
    assert error["code"] == "integration_install_failed"
    assert "settings.json: cannot parse as JSON" in error["message"]
    assert error["data"]["target"] == "grok"
    assert settings.read_text() == '{"theme": "dark",'
    # The dry run made first found the bad file before the hook script was written.
    assert not (acme[1] / "hooks").exists()
    listed = api("plugin.list", {"plugin_id": "acme"})["plugins"][0]
    assert listed["errors"] == []  # a user's broken file is not a plugin fault


def test_errors(api: Api) -> None:
    missing = api.error("integration.install", {"target": "nope"})
    assert missing["code"] == "integration_not_found" and "'nope'" in missing["message"]
    assert "grok" in missing["message"]
    assert api.error("integration.status", {"target": "nope"})["code"] == "integration_not_found"
    no_dry = api.error("integration.install", {"target": "devin", "dry_run": True})
    assert no_dry["code"] == "not_supported" and "dry run" in no_dry["message"]
    no_opts = api.error("integration.install", {"target": "devin", "options": {"a": 1}})
    assert no_opts["code"] == "not_supported" and "options" in no_opts["message"]
    assert api("integration.install", {"target": "devin"})["messages"] == ["did it"]
    bad = api.error("integration.uninstall", {"target": "droid"})
    assert bad["code"] == "integration_uninstall_failed" and "dict" in bad["message"]
    assert api("integration.install", {"target": "kimi", "dry_run": True})["messages"] == [
        "would do it"]
    crash = api.error("integration.install", {"target": "kimi"})
    assert crash["code"] == "integration_install_failed"
    assert "install exploded" in crash["message"] and crash["data"]["cause"] == "plugin_failed"
    faults = api("plugin.list", {"plugin_id": "acme"})["plugins"][0]["errors"]
    assert any("install exploded" in fault["message"] for fault in faults)
    for params, field in (({}, "target"), ({"target": 5}, "target"),
                          ({"target": "grok", "options": []}, "options"),
                          ({"target": "grok", "dry_run": "yes"}, "dry_run")):
        error: dict[str, Any] = api.error("integration.install", params)
        assert error["code"] == "invalid_params" and error["data"]["field"] == field


def test_cli(acme: tuple[ServerProcess, Path]) -> None:
    server, home = acme
    listed = cli(server, home, "list")
    assert listed.returncode == 0, listed.stderr
    assert "grok" in listed.stdout and "acme" in listed.stdout
    as_json = json.loads(cli(server, home, "list", "--json").stdout)
    assert {row["name"] for row in as_json["integrations"]} >= {"grok", "devin"}

    dry = cli(server, home, "install", "grok", "--dry-run", "--option", "command=acme-hook x")
    assert dry.returncode == 0, dry.stderr
    assert "+++ " + str(home / "settings.json") in dry.stdout
    assert '"command": "acme-hook x"' in dry.stdout
    assert not (home / "settings.json").exists()

    done = cli(server, home, "install", "grok")
    assert done.returncode == 0 and "created" in done.stdout
    status = cli(server, home, "status", "grok")
    assert status.returncode == 0 and "installed" in status.stdout
    assert json.loads(cli(server, home, "status", "grok", "--json").stdout)["installed"] is True

    bad = cli(server, home, "install", "nope")
    assert bad.returncode != 0 and "integration_not_found" in bad.stderr
    bad_option = cli(server, home, "install", "grok", "--option", "novalue")
    assert bad_option.returncode != 0 and "KEY=VALUE" in bad_option.stderr
    gone = cli(server, home, "uninstall", "grok")
    assert gone.returncode == 0 and "removed" in gone.stdout


def test_cli_prints_nested_status_fields_as_text() -> None:
    from cmux_core.cli.integration import describe

    row = {"name": "codex", "plugin_id": "cmux-codex",
           "status": {"installed": True, "trusted": None, "events": ["Stop", "SessionStart"],
                      "trust": {"SessionStart": "trusted", "Stop": "untrusted"}}}
    assert describe(row) == [
        "codex  [installed]  plugin cmux-codex",
        "    trusted: -",
        "    events: Stop, SessionStart",
        "    trust:",
        "      SessionStart: trusted",
        "      Stop: untrusted",
    ]
