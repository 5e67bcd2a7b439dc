"""The first-party integration plugins (cmux-claude, cmux-codex, cmux-copilot, cmux-gemini,
cmux-opencode, cmux-qwen): install/uninstall round trips on temporary homes, settings that
cannot be parsed, two installs at once, the same through ``integration.*`` of a real server,
the hook files they install (the core's bundled ``hooks/``, no copies of their own), a
plain (non-editable) ``pip install`` of each, the ``mcp`` option registering ``cmux mcp``;
``hook_kit``'s JSON hook-group edits on their own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import cmux_claude
import cmux_codex
import cmux_copilot
import cmux_gemini
import cmux_opencode
import cmux_qwen
import pytest

from cmux_core.plugin_host import hook_kit
from cmux_core.plugin_host.settings_files import FileChange, SettingsError
from cmux_core.testing import ServerProcess, start_server

ROOT = Path(__file__).resolve().parents[1]
HOOKS = ROOT / "hooks"
PLUGINS: dict[str, ModuleType] = {"claude": cmux_claude, "codex": cmux_codex,
                                  "copilot": cmux_copilot, "gemini": cmux_gemini,
                                  "opencode": cmux_opencode, "qwen": cmux_qwen}
ENV_OVERRIDES = ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "OPENCODE_CONFIG_DIR",
                 "QWEN_HOME", "COPILOT_HOME")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    for name in ENV_OVERRIDES:
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def settings_file(agent: str, home: Path) -> Path:
    return {"claude": home / ".claude" / "settings.json",
            "codex": home / ".codex" / "config.toml",
            "gemini": home / ".gemini" / "settings.json",
            "qwen": home / ".qwen" / "settings.json",
            "copilot": home / ".copilot" / "settings.json",
            "opencode": home / ".config" / "opencode" / "plugins" / "cmux.js"}[agent]


USER_FILES = {
    "copilot": json.dumps({"banner": "never", "trustedFolders": ["/src"], "hooks": {
        "sessionEnd": [{"type": "command", "bash": "notify-send done"}]}}, indent=2) + "\n",
    "qwen": json.dumps({"model": {"name": "qwen3-coder-plus"}, "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]}},
        indent=2) + "\n",
    "claude": json.dumps({"model": "opus", "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
                                                      "command": "audit-bash"}]}]},
        "permissions": {"allow": ["Bash(ls:*)"]}}, indent=2) + "\n",
    "codex": ('# my codex settings\nmodel = "gpt-5.1-codex"  # keep this comment\n\n'
              '[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntype = "command"\n'
              'command = "notify-send done"\n\n[projects."/src"]\ntrust_level = "trusted"\n'),
    "gemini": json.dumps({"ui": {"theme": "Default"}, "hooks": {
        "AfterAgent": [{"matcher": "", "hooks": [{"type": "command", "name": "mine",
                                                  "command": "notify-send done"}]}]}},
        indent=2) + "\n",
}


def messages(changes: list[FileChange | str]) -> list[str]:
    return [c.summary() if isinstance(c, FileChange) else c for c in changes]


def our_commands(agent: str, home: Path) -> dict[str, list[str]]:
    """Per event, the hook commands of ours in the agent's settings."""
    path = settings_file(agent, home)
    data: Any = (tomllib.loads(path.read_text()) if agent == "codex"
                 else json.loads(path.read_text()))
    marker = f"/cmux/hooks/{agent}/cmux-hook"
    return {event: [h["command"] for g in groups for h in g.get("hooks", [])
                    if marker in h["command"]]
            for event, groups in data.get("hooks", {}).items()}


@pytest.mark.parametrize("agent", ["claude", "codex", "copilot", "gemini", "qwen"])
def test_round_trip_keeps_the_users_settings(agent: str, home: Path) -> None:
    plugin = PLUGINS[agent]
    path = settings_file(agent, home)
    path.parent.mkdir(parents=True)
    path.write_text(USER_FILES[agent])
    assert plugin.status()["installed"] is False

    plugin.install()
    after_first = path.read_bytes()
    hooked = our_commands(agent, home)
    assert set(hooked) >= set(plugin.EVENTS)
    assert all(len(hooked[event]) == 1 for event in plugin.EVENTS)
    status = plugin.status()
    assert status["installed"] is True and status["missing_events"] == []
    hook = home / ".config" / "cmux" / "hooks" / agent / "cmux-hook"
    assert os.access(hook, os.X_OK)
    assert hook.read_bytes() == (HOOKS / "cmux-hook").read_bytes()
    assert Path(str(path) + ".cmux-backup").read_text() == USER_FILES[agent]
    # the user's own hooks are still there
    assert "notify-send done" in after_first.decode()

    second = plugin.install()
    assert path.read_bytes() == after_first
    assert all(not c.changed for c in second if isinstance(c, FileChange))

    # a run of the installed hook leaves its compiled form beside it; uninstall takes it too
    subprocess.run([str(hook), agent], input=b"{}", timeout=10, check=True, env={
        "PATH": os.environ["PATH"], "CMUX_SOCKET_PATH": str(home / "none.sock"),
        "CMUX_PANE_ID": "w1:p1"})
    assert (hook.parent / "__pycache__").is_dir()

    plugin.uninstall()
    if agent == "codex":
        assert path.read_text() == USER_FILES[agent]  # comments and layout as they were
    else:
        assert json.loads(path.read_text()) == json.loads(USER_FILES[agent])
    assert not hook.exists() and not hook.parent.exists()
    assert plugin.status()["installed"] is False


@pytest.mark.parametrize("agent", ["claude", "codex", "copilot", "gemini", "qwen"])
def test_install_into_a_home_with_nothing(agent: str, home: Path) -> None:
    plugin = PLUGINS[agent]
    dry = plugin.install(dry_run=True)
    assert not (home / ".config").exists() and not settings_file(agent, home).exists()
    assert any(isinstance(c, FileChange) and "cmux-hook" in c.diff() for c in dry)
    plugin.install()
    assert plugin.status()["installed"] is True
    plugin.uninstall()
    assert our_commands(agent, home) == {}


@pytest.mark.parametrize("agent", ["claude", "codex", "copilot", "gemini", "qwen"])
def test_unparsable_settings_are_left_alone(agent: str, home: Path) -> None:
    path = settings_file(agent, home)
    path.parent.mkdir(parents=True)
    broken = '{"hooks": {' if agent != "codex" else 'model = "unterminated\n'
    path.write_text(broken)
    with pytest.raises(SettingsError, match=str(path)):
        PLUGINS[agent].install()
    assert path.read_text() == broken
    assert not Path(str(path) + ".cmux-backup").exists()
    with pytest.raises(SettingsError, match=str(path)):
        PLUGINS[agent].uninstall()
    assert path.read_text() == broken
    assert "error" in PLUGINS[agent].status()


def test_env_overrides_pick_the_agents_dirs(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / "claude-cfg"))
    monkeypatch.setenv("CODEX_HOME", str(home / "codex-home"))
    monkeypatch.setenv("GEMINI_CLI_HOME", str(home / "gemini-home"))
    monkeypatch.setenv("OPENCODE_CONFIG_DIR", str(home / "oc"))
    monkeypatch.setenv("QWEN_HOME", str(home / "qwen-home"))
    monkeypatch.setenv("COPILOT_HOME", str(home / "copilot-home"))
    for plugin in PLUGINS.values():
        plugin.install()
    assert (home / "copilot-home" / "settings.json").is_file()
    assert (home / "qwen-home" / "settings.json").is_file()
    assert (home / "claude-cfg" / "settings.json").is_file()
    assert (home / "codex-home" / "config.toml").is_file()
    assert (home / "gemini-home" / ".gemini" / "settings.json").is_file()
    assert (home / "oc" / "plugins" / "cmux.js").is_file()
    assert not (home / ".claude").exists() and not (home / ".codex").exists()
    assert not (home / ".copilot").exists()


def test_copilot_status_says_when_copilot_runs_no_hooks(home: Path) -> None:
    path = settings_file("copilot", home)
    cmux_copilot.install()
    assert "hooks_disabled" not in cmux_copilot.status()
    data = json.loads(path.read_text())
    path.write_text(json.dumps(data | {"disableAllHooks": True}))
    status = cmux_copilot.status()
    assert status["installed"] is True and status["hooks_disabled"] is True
    assert "disableAllHooks" in status["note"]
    cmux_copilot.uninstall()
    assert json.loads(path.read_text()) == {"disableAllHooks": True}


def test_claude_skill_option(home: Path) -> None:
    changes = cmux_claude.install(options={"skill": True})
    skill = home / ".claude" / "skills" / "cmux" / "SKILL.md"
    assert skill.read_bytes() == (HOOKS / "skills" / "cmux" / "SKILL.md").read_bytes()
    assert f"{skill}: created" in messages(changes)
    assert cmux_claude.status()["skill"] is True
    with pytest.raises(SettingsError, match="unknown option or value: colour"):
        cmux_claude.install(options={"colour": "red"})
    with pytest.raises(SettingsError, match="unknown option or value: skill"):
        cmux_claude.install(options={"skill": "maybe"})
    cmux_claude.uninstall()
    assert not skill.exists()
    cmux_claude.install(options={"skill": "true"})  # what `--option skill=true` sends
    assert skill.exists()
    cmux_claude.uninstall()
    assert not skill.exists()
    # a skill the user edited is kept
    cmux_claude.install(options={"skill": True})
    skill.write_text(skill.read_text() + "\nmy notes\n")
    assert f"{skill}: kept (changed since it was installed)" in messages(cmux_claude.uninstall())
    assert skill.exists()


def test_opencode_plugin_file(home: Path) -> None:
    path = settings_file("opencode", home)
    cmux_opencode.install()
    text = path.read_text()
    hook = home / ".config" / "cmux" / "hooks" / "opencode" / "cmux-hook"
    assert json.dumps(str(hook)) in text and "@CMUX_HOOK@" not in text
    assert text == (HOOKS / "opencode" / "cmux.js").read_text().replace(
        '"@CMUX_HOOK@"', json.dumps(str(hook)))
    assert cmux_opencode.status()["installed"] is True
    before = path.stat().st_mtime_ns
    cmux_opencode.install()
    assert path.stat().st_mtime_ns == before
    path.write_text(text + "// mine\n")
    assert cmux_opencode.status() | {"installed": False, "plugin_changed": True} == \
        cmux_opencode.status()
    assert f"{path}: kept (changed since it was installed)" in messages(
        cmux_opencode.uninstall())
    path.write_text(text)
    cmux_opencode.uninstall()
    assert not path.exists() and not hook.exists()


CONCURRENT = "import cmux_{agent} as plugin; plugin.install()"


@pytest.mark.parametrize("agent", ["claude", "codex", "copilot", "gemini", "qwen"])
def test_two_installs_at_once(agent: str, home: Path) -> None:
    path = settings_file(agent, home)
    path.parent.mkdir(parents=True)
    path.write_text(USER_FILES[agent])
    env = dict(os.environ)
    procs = [subprocess.Popen([sys.executable, "-c", CONCURRENT.format(agent=agent)], env=env,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    hooked = our_commands(agent, home)
    assert all(len(hooked[event]) == 1 for event in PLUGINS[agent].EVENTS)
    assert "notify-send done" in path.read_text()
    PLUGINS[agent].uninstall()
    user: Any = (tomllib.loads(USER_FILES[agent]) if agent == "codex"
                 else json.loads(USER_FILES[agent]))
    assert our_commands(agent, home) == {event: [] for event in user["hooks"]}


# -- the hook files: the core's, installed ------------------------------------------------------


def test_the_bundled_hook_files_are_the_top_level_hooks() -> None:
    for name in ("cmux-hook", "cmux_hook.py", "opencode/cmux.js", "skills/cmux/SKILL.md"):
        assert hook_kit.bundled_text(name) == (HOOKS / name).read_text(), name


@pytest.mark.parametrize("agent", sorted(PLUGINS))
def test_plugins_carry_no_copies_and_install_the_bundled_files(agent: str, home: Path) -> None:
    package = Path(PLUGINS[agent].__file__ or "").parent
    own = ["trust.py"] if agent == "codex" else []  # cmux-codex's reader of Codex's hook trust
    assert sorted(p.name for p in package.iterdir() if p.name != "__pycache__") == sorted([
        "__init__.py", "py.typed", *own])
    PLUGINS[agent].install(**({"options": {"skill": True}} if agent == "claude" else {}))
    hook_dir = home / ".config" / "cmux" / "hooks" / agent
    assert (hook_dir / "cmux-hook").read_bytes() == (HOOKS / "cmux-hook").read_bytes()
    assert (hook_dir / "cmux_hook.py").read_bytes() == (HOOKS / "cmux_hook.py").read_bytes()
    assert (hook_dir / "cmux-hook").stat().st_mode & 0o777 == 0o755
    if agent == "claude":
        assert (home / ".claude" / "skills" / "cmux" / "SKILL.md").read_bytes() == (
            HOOKS / "skills" / "cmux" / "SKILL.md").read_bytes()


def test_json_hook_groups_add_and_remove_only_ours(home: Path) -> None:
    groups = hook_kit.JsonHookGroups("acme", ("Stop", "PreToolUse"), matchers={"PreToolUse": "*"},
                                     name="cmux")
    mine = {"type": "command", "command": "notify-send done"}
    path = home / ".acme" / "settings.json"
    path.parent.mkdir()
    user = {"model": "x", "hooks": {"Stop": [{"hooks": [mine]}]}}
    path.write_text(json.dumps(user, indent=4))
    original = path.read_bytes()
    groups.install(path)
    data = json.loads(path.read_text())
    command = hook_kit.hook_command("acme")
    assert command == f"{home}/.config/cmux/hooks/acme/cmux-hook acme"
    ours = {"type": "command", "name": "cmux", "command": command}
    assert data["hooks"] == {"Stop": [{"hooks": [mine]}, {"hooks": [ours]}],
                             "PreToolUse": [{"matcher": "*", "hooks": [ours]}]}
    assert list(data["hooks"]["PreToolUse"][0]) == ["matcher", "hooks"]
    assert groups.status(path)["events"] == ["Stop", "PreToolUse"]
    assert groups.status(path)["installed"] is False  # no hook files yet
    # a command of ours from another config dir is updated where it is, not added twice
    data["hooks"]["Stop"][0]["hooks"].append({"type": "command",
                                               "command": "/old/cmux/hooks/acme/cmux-hook acme"})
    del data["hooks"]["Stop"][1]
    path.write_text(json.dumps(data))
    groups.install(path)
    assert json.loads(path.read_text())["hooks"]["Stop"] == [
        {"hooks": [mine, {"type": "command", "command": command}]}]
    # removal keeps the user's handler in the group it shares with ours, drops the rest, and
    # gives back the user's bytes (indent 4) from the backup
    groups.uninstall(path)
    assert path.read_bytes() == original
    assert groups.uninstall(home / "none.json") == []
    # a file without hooks of its own: no empty "hooks" (or event) is left behind
    fresh = home / "fresh.json"
    fresh.write_text('{"model": "x"}')
    groups.install(fresh)
    (fresh.parent / "fresh.json.cmux-backup").unlink()
    groups.uninstall(fresh)
    assert json.loads(fresh.read_text()) == {"model": "x"}


def test_json_hook_groups_refuse_what_is_not_a_hooks_table(home: Path) -> None:
    groups = hook_kit.JsonHookGroups("acme", ("Stop",))
    path = home / "settings.json"
    for content in ("[1, 2]\n", '{"hooks": ["Stop"]}\n'):
        path.write_text(content)
        with pytest.raises(SettingsError, match=f"^{path}: "):
            groups.install(path)
        assert path.read_text() == content
        groups.uninstall(path)
        assert path.read_text() == content
    with pytest.raises(ValueError, match="agent name"):
        hook_kit.hook_dir("../acme")
    with pytest.raises(ValueError, match="agent name"):
        hook_kit.install_hook("Acme")


# -- through a real server ----------------------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServerProcess, Path]]:
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "CMUX_LOAD_PLUGINS": "cmux-claude,cmux-codex,cmux-gemini,"
                                                    "cmux-opencode,cmux-qwen,cmux-copilot"}
    server = start_server(env=env)
    try:
        yield server, home
    finally:
        server.stop()


def test_integrations_through_the_server(served: tuple[ServerProcess, Path]) -> None:
    server, home = served
    config = Path(server.env["XDG_CONFIG_HOME"])
    with server.client() as client:
        rows = {r["name"]: r for r in client.call("integration.list")["integrations"]}
        for agent in PLUGINS:
            row = rows[agent]
            assert (row["plugin_id"], row["source"], row["agent"], row["authority"]) == (
                f"cmux-{agent}", f"cmux:{agent}", agent, "shared")
            assert row["status"]["installed"] is False

        dry = client.call("integration.install", {"target": "claude", "dry_run": True,
                                                  "options": {"skill": True}})
        diffs = "".join(f.get("diff") or "" for f in dry["files"])
        assert "+++ " + str(home / ".claude" / "settings.json") in diffs
        assert "SKILL.md" in diffs and not (home / ".claude").exists()

        done = client.call("integration.install", {"target": "claude",
                                                   "options": {"skill": True}})
        assert any(str(home / ".claude" / "settings.json") in m for m in done["messages"])
        assert client.call("integration.status", {"target": "claude"})["installed"] is True
        assert (config / "cmux" / "hooks" / "claude" / "cmux-hook").is_file()
        assert (home / ".claude" / "skills" / "cmux" / "SKILL.md").is_file()

        codex = client.call("integration.install", {"target": "codex"})
        assert any("/hooks" in m for m in codex["messages"])  # the trust note

        gemini_settings = home / ".gemini" / "settings.json"
        gemini_settings.parent.mkdir()
        gemini_settings.write_text("{not json")
    # an unparsable file: a clear error naming it, nothing written
    with server.client(timeout=60) as client:
        reply = client.request("integration.install", {"target": "gemini"})
    assert reply["ok"] is False
    assert reply["error"]["code"] == "integration_install_failed"
    assert str(gemini_settings) in reply["error"]["message"]
    assert gemini_settings.read_text() == "{not json"
    assert not (config / "cmux" / "hooks" / "gemini").exists()

    cli = subprocess.run([sys.executable, "-m", "cmux_core", "--socket",
                          str(server.socket_path), "integration", "uninstall", "claude",
                          "--dry-run"], capture_output=True, text=True, timeout=60,
                         env=server.env)
    assert cli.returncode == 0, cli.stderr
    assert "cmux-hook claude" in cli.stdout  # the diff shows our entries going
    assert (home / ".claude" / "skills" / "cmux" / "SKILL.md").is_file()


# -- docs/integrate-your-agent.md, run as written ----------------------------------------------


def doc_files(doc: Path) -> dict[str, str]:
    """Every fenced block of ``doc`` whose first line is ``# file: PATH``, by path."""
    files: dict[str, str] = {}
    block: list[str] | None = None
    for line in doc.read_text().splitlines(keepends=True):
        if line.startswith("```"):
            if block is None:
                block = []
                continue
            if block and block[0].startswith("# file: "):
                files[block[0].removeprefix("# file: ").strip()] = "".join(block[1:])
            block = None
        elif block is not None:
            block.append(line)
    return files


def test_the_integrate_your_agent_walkthrough_runs(tmp_path: Path) -> None:
    files = doc_files(ROOT / "docs" / "integrate-your-agent.md")
    assert {"cmux-tally/pyproject.toml", "cmux-tally/src/cmux_tally/__init__.py",
            "cmux-tally/src/cmux_tally/tally.toml", "cmux-tally/src/cmux_tally/tally-hook",
            "cmux-tally/tests/tally.py", "cmux-tally/tests/test_cmux_tally.py"} <= set(files)
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "cmux-tally" / "src" / "cmux_tally" / "tally-hook").chmod(0o755)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests"], cwd=tmp_path / "cmux-tally", capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


MCP_CONFIGS = {
    "claude": (".claude.json", "mcpServers", json.dumps(
        {"numStartups": 3, "mcpServers": {"docs": {"type": "stdio", "command": "docs-mcp"}}},
        indent=2) + "\n"),
    "codex": (".codex/config.toml", "mcp_servers",
              '# my codex settings\nmodel = "gpt-5.1-codex"\n\n[mcp_servers.docs]\n'
              'command = "docs-mcp"  # keep this comment\n'),
    "gemini": (".gemini/settings.json", "mcpServers", json.dumps(
        {"ui": {"theme": "Default"}, "mcpServers": {"docs": {"command": "docs-mcp"}}},
        indent=2) + "\n"),
    "opencode": (".config/opencode/opencode.json", "mcp", json.dumps(
        {"$schema": "https://opencode.ai/config.json",
         "mcp": {"docs": {"type": "local", "command": ["docs-mcp"]}}}, indent=2) + "\n"),
}


@pytest.mark.parametrize("agent", sorted(MCP_CONFIGS))
def test_the_mcp_option_registers_cmux_mcp(agent: str, home: Path) -> None:
    plugin = PLUGINS[agent]
    name, key, text = MCP_CONFIGS[agent]
    path = home / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)

    def servers() -> dict[str, Any]:
        data = tomllib.loads(path.read_text()) if agent == "codex" else json.loads(
            path.read_text())
        return dict(data.get(key, {}))

    preview = [c for c in plugin.install(dry_run=True, options={"mcp": "true"})
               if isinstance(c, FileChange) and c.path == path]
    assert path.read_text() == text, "a dry run wrote"
    assert preview and '"cmux"' in preview[-1].diff().replace("[mcp_servers.cmux]", '"cmux"')
    assert plugin.status()["mcp"] is False
    plugin.install(options={"mcp": "true"})
    entry = servers()["cmux"]
    argv = entry["command"] if agent == "opencode" else [entry["command"], *entry["args"]]
    assert argv[-1] == "mcp" and Path(argv[0]).name == "cmux"
    assert servers()["docs"], "another server was dropped"
    assert path.with_name(path.name + ".cmux-backup").read_text() == text
    assert plugin.status()["mcp"] is True
    installed = path.read_bytes()
    plugin.install(options={"mcp": True})
    assert path.read_bytes() == installed, "a second install changed the file"
    with pytest.raises(SettingsError, match="unknown option or value: mcp"):
        plugin.install(options={"mcp": "maybe"})
    plugin.uninstall()
    if agent == "codex":  # tomlkit may keep the blank line it put before [mcp_servers.cmux]
        assert path.read_text().rstrip("\n") == text.rstrip("\n")
    else:
        assert path.read_text() == text, "uninstall did not give the user's file back"
    assert plugin.status()["mcp"] is False
