"""Agent detection at run time: identification, scheduling, publishing, manifest sources.

The server tests run a small fake agent (``fakebot_agent.py``) in a real pane. It shows
one of a few screens per line it reads; a test manifest in ``--manifests-dir`` knows
it by its script name (``process_names``) and classifies those screens, so the pane's
``agent_status`` can be driven through every state.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Api
from fake_agent import (
    manifest,
    manifest_server,
    pane_agent,
    rule,
    screens_program,
    start_in_shell,
    wait_agent,
    write_agent,
    write_manifests,
)

from cmux_core.detect.identify import (
    base_name,
    identify_group,
    is_interactive_shell,
    normalize_label,
    package_names,
    process_names,
    script_names,
)
from cmux_core.terminal.procfs import ProcessInfo, ProcessReader
from cmux_core.testing import ServerProcess, wait_until

AGENT_SCRIPT = screens_program({
    "i": "FAKEBOT ready\n> type here",
    "w": "FAKEBOT thinking... (esc to interrupt)",
    "b": "FAKEBOT wants to run ls\nAllow this command? [y/n]",
    "m": "FAKEBOT history viewer (q to close)",
    "x": "FAKEBOT output with no rule",
    "n": "FAKEBOT pondering quietly",
})

MANIFEST = manifest(
    "fakebot",
    rule("menu_viewer", "unknown", 40, skip_state_update=True, contains=["history viewer"]),
    rule("blocked_prompt", "blocked", 30, visible_blocker=True,
         contains=["Allow this command?"]),
    rule("working_spinner", "working", 20, contains=["esc to interrupt"]),
    rule("idle_prompt", "idle", 10, visible_idle=True, contains=["type here"]),
    aliases=["fake-bot"],
)


# -- name normalisation ----------------------------------------------------------------------


def proc(*argv: str, comm: str = "", exe: str = "") -> ProcessInfo:
    return ProcessInfo(1, comm or base_name(argv[0]), tuple(argv), exe)


@pytest.mark.parametrize(("argv", "expected"), [
    (("node", "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js"),
     ["@anthropic-ai/claude-code", "claude-code"]),
    (("node", "--max-old-space-size=4096", "/opt/x/node_modules/@openai/codex/bin/codex.js"),
     ["codex", "@openai/codex"]),
    (("node", "-r", "ts-node/register", "/srv/node_modules/gemini-agent/dist/index.js"),
     ["gemini-agent"]),
    (("/usr/bin/nodejs", "--", "/home/u/.bun/bin/amp"), ["amp"]),
    (("bun", "x", "opencode"), ["opencode"]),
    (("deno", "run", "-A", "/tools/goose.ts"), ["goose"]),
    (("python3.12", "-u", "/home/u/.local/bin/aider", "--model", "x"), ["aider"]),
    (("python3", "-m", "aider.main"), ["aider.main", "aider"]),
    (("python", "-X", "dev", "/srv/agent/qwen/__main__.py"), ["qwen"]),
    (("/bin/bash", "/usr/local/bin/cursor-agent"), ["cursor-agent"]),
    (("/nix/store/abc-codex/bin/.codex-wrapped", "--yolo"), ["codex"]),
    (("/usr/lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe",),
     ["claude", "@anthropic-ai/claude-code", "claude-code"]),
    (("claude --resume",), ["claude"]),
])
def test_process_names_normalise_runtimes_scripts_packages_and_wrappers(
        argv: tuple[str, ...], expected: list[str]) -> None:
    names = process_names(proc(*argv), resolve=False)
    assert names[:len(expected)] == expected


@pytest.mark.parametrize("argv", [
    ("bash",), ("-bash",), ("/bin/sh", "-i"), ("sh", "-c", "claude"), ("node",),
    ("node", "-e", "require('x')"), ("python3", "-c", "print(1)"), ("tmux", "new", "-s", "x"),
    ("node", "--print", "1"),
])
def test_process_names_give_nothing_for_bare_runtimes_inline_code_and_tmux(
        argv: tuple[str, ...]) -> None:
    assert process_names(proc(*argv), resolve=False) == []


def test_interactive_shells_are_told_from_scripts() -> None:
    assert is_interactive_shell(proc("-bash"))
    assert is_interactive_shell(proc("/bin/sh", "-i"))
    assert not is_interactive_shell(proc("sh", "-c", "claude"))
    assert not is_interactive_shell(proc("bash", "/usr/bin/agent.sh"))
    assert not is_interactive_shell(proc("claude"))


def test_symlinked_launchers_resolve_to_their_package(tmp_path: Path) -> None:
    target = tmp_path / "lib" / "node_modules" / "@google" / "gemini-cli" / "bundle"
    target.mkdir(parents=True)
    (target / "gemini.js").write_text("")
    link = tmp_path / "bin" / "gem"
    link.parent.mkdir()
    link.symlink_to(target / "gemini.js")
    assert script_names(str(link)) == ["gem", "gemini", "@google/gemini-cli", "gemini-cli"]
    assert process_names(proc("node", str(link)))[1:] == [
        "gemini", "@google/gemini-cli", "gemini-cli"]


def test_label_normalisation_and_package_names() -> None:
    assert normalize_label("  Claude.EXE ") == "claude"
    assert normalize_label("codex.js") == "codex"
    assert normalize_label("gemini.js.js") == "gemini.js"
    assert package_names("/a/node_modules/.pnpm/x@1/node_modules/@scope/tool/cli.js") == [
        "@scope/tool", "tool"]
    assert package_names("/usr/bin/claude") == []


# -- identification of real process groups ---------------------------------------------------


@pytest.fixture
def agent_script(tmp_path: Path) -> Path:
    return write_agent(tmp_path, "fakebot_agent", AGENT_SCRIPT)


PROC = ProcessReader()


def _lookup(table: dict[str, str]) -> Any:
    return lambda name: table.get(name)


def _spawn_group(argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            start_new_session=True, env=full)


def _stop(p: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, 9)
    p.wait()
    if p.stdin is not None:
        p.stdin.close()


def test_identify_group_by_leader_name(agent_script: Path) -> None:
    p = _spawn_group([sys.executable, str(agent_script)])
    try:
        found = wait_until(
            lambda: identify_group(p.pid, _lookup({"fakebot_agent": "fakebot"}), PROC),
            message="leader identified")
        assert (found.label, found.pid) == ("fakebot", p.pid)
        assert "fakebot_agent" in found.evidence
        assert identify_group(p.pid, _lookup({}), PROC) is None
    finally:
        _stop(p)


def test_identify_group_by_environment_hint_beats_names(agent_script: Path) -> None:
    p = _spawn_group([sys.executable, str(agent_script)], {"CMUX_AGENT": "Fake-Bot"})
    try:
        table = {"fake-bot": "fakebot", "fakebot_agent": "other"}
        found = wait_until(lambda: identify_group(p.pid, _lookup(table), PROC),
                           message="hint identified")
        assert found.label == "fakebot"
        assert "environment hint" in found.evidence
        # A hint no manifest knows is ignored; the name still counts.
        found = identify_group(p.pid, _lookup({"fakebot_agent": "other"}), PROC)
        assert found is not None and found.label == "other"
    finally:
        _stop(p)


def test_identify_group_finds_a_member_behind_a_non_agent_leader(agent_script: Path) -> None:
    # ``sh -c "...; true"`` keeps sh as the group leader with the agent as its child.
    p = _spawn_group(["/bin/sh", "-c", f"{sys.executable} {agent_script}; true"])
    try:
        found = wait_until(
            lambda: identify_group(p.pid, _lookup({"fakebot_agent": "fakebot"}), PROC),
            message="member identified")
        assert found.label == "fakebot" and found.pid != p.pid
    finally:
        _stop(p)


# -- through a real server --------------------------------------------------------------------


@pytest.fixture
def manifests_dir(tmp_path: Path) -> Path:
    return write_manifests(tmp_path, {"fakebot": MANIFEST})


@pytest.fixture
def server(manifests_dir: Path) -> Iterator[ServerProcess]:
    with manifest_server(manifests_dir) as proc:
        yield proc


@pytest.fixture
def dapi(server: ServerProcess) -> Iterator[Api]:
    with Api(server) as conn:
        yield conn


def send(api: Api, pane_id: str, text: str) -> None:
    api("pane.send_text", {"pane_id": pane_id, "text": text})


def collect_events(server: ServerProcess, kinds: list[str]) -> Api:
    listener = Api(server)
    listener("events.subscribe", {"subscriptions": [{"type": k} for k in kinds]})
    return listener


def drain(listener: Api, until: Any, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Events until ``until(events)`` holds (the listener's replies were already consumed)."""
    events: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while not until(events):
        left = deadline - time.monotonic()
        assert left > 0, f"timed out; events so far: {events}"
        events.append(listener.event(timeout=left))
    return events


def test_fake_agent_moves_through_every_state_and_exits(
        server: ServerProcess, dapi: Api, agent_script: Path) -> None:
    listener = collect_events(server, ["pane.agent_detected", "pane.agent_status_changed"])
    try:
        pane_id = start_in_shell(dapi, agent_script)
        wait_agent(dapi, pane_id, "fakebot", "idle")
        detected = drain(listener, lambda ev: any(
            e["event"] == "pane_agent_detected" and e["data"].get("agent") == "fakebot"
            for e in ev))
        assert detected[-1]["data"]["pane_id"] == pane_id

        send(dapi, pane_id, "w\n")
        wait_agent(dapi, pane_id, "fakebot", "working")
        send(dapi, pane_id, "b\n")
        wait_agent(dapi, pane_id, "fakebot", "blocked")

        # A menu rule with skip_state_update leaves the state alone.
        send(dapi, pane_id, "m\n")
        dapi.wait_text(pane_id, "history viewer", source="visible")
        explained = wait_until(lambda: (lambda x: x if x["matched_rule"] else None)(
            dapi("agent.explain", {"target": pane_id})["explain"]))
        assert explained["matched_rule"]["id"] == "menu_viewer"
        assert explained["skip_state_update"] is True
        assert explained["skipped_update_reason"] == "matched_rule:menu_viewer"
        assert pane_agent(dapi, pane_id) == ("fakebot", "blocked")

        send(dapi, pane_id, "i\n")
        wait_agent(dapi, pane_id, "fakebot", "idle")

        # working -> plain idle (no rule matches: fallback) is held, then published.
        send(dapi, pane_id, "w\n")
        wait_agent(dapi, pane_id, "fakebot", "working")
        send(dapi, pane_id, "x\n")
        wait_agent(dapi, pane_id, "fakebot", "idle")
        explained = dapi("agent.explain", {"target": pane_id})["explain"]
        assert explained["fallback_reason"] == "default_known_agent_idle_fallback"

        send(dapi, pane_id, "q\n")
        wait_agent(dapi, pane_id, None, "unknown")
        events = drain(listener, lambda ev: any(
            e["event"] == "pane_agent_detected" and e["data"].get("released") for e in ev))
        released = [e for e in events if e["data"].get("released")][-1]["data"]
        assert released["agent"] == "fakebot"
        assert released["final_status"] in ("idle", "done")
        err = dapi.error("agent.explain", {"target": pane_id})
        assert err["code"] in ("agent_not_found", "agent_explain_unavailable")
    finally:
        listener.close()


def test_environment_hint_names_the_agent(dapi: Api, tmp_path: Path) -> None:
    script = tmp_path / "unremarkable.py"
    script.write_text(AGENT_SCRIPT)
    pane_id = start_in_shell(dapi, script, prefix="env CMUX_AGENT=fake-bot ")
    wait_agent(dapi, pane_id, "fakebot", "idle")
    send(dapi, pane_id, "b\n")
    wait_agent(dapi, pane_id, "fakebot", "blocked")
    explained = dapi("agent.explain", {"target": pane_id})["explain"]
    assert "environment hint" in explained["identified_by"]


def test_explain_shows_every_rule_and_its_evidence(
        dapi: Api, agent_script: Path, manifests_dir: Path) -> None:
    shell_pane = dapi.run(["/bin/sh"])
    err = dapi.error("agent.explain", {"target": shell_pane})
    assert err["code"] in ("agent_not_found", "agent_explain_unavailable")

    pane_id = start_in_shell(dapi, agent_script)
    wait_agent(dapi, pane_id, "fakebot", "idle")
    send(dapi, pane_id, "w\n")
    wait_agent(dapi, pane_id, "fakebot", "working")
    explained = dapi("agent.explain", {"target": pane_id})["explain"]
    assert explained["agent"] == "fakebot"
    assert explained["state"] == "working"
    assert explained["manifest_source"] == str(manifests_dir / "fakebot.toml")
    assert explained["manifest_version"] == "1.0"
    assert explained["matched_rule"] == {"id": "working_spinner", "priority": 20,
                                         "region": "whole_recent", "state": "working"}
    rules = {r["id"]: r for r in explained["evaluated_rules"]}
    assert list(rules) == ["menu_viewer", "blocked_prompt", "working_spinner", "idle_prompt"]
    assert rules["working_spinner"]["matched"] is True
    assert rules["working_spinner"]["evidence"]["contains"] == [
        {"value": "esc to interrupt", "matched": True}]
    assert rules["blocked_prompt"]["matched"] is False
    assert "thinking" in rules["working_spinner"]["evidence"]["region_preview"]


def test_manifest_status_lists_sources(dapi: Api, manifests_dir: Path) -> None:
    status = dapi("server.agent_manifests")
    mine = {m["agent"]: m for m in status["manifests"]}["fakebot"]
    assert mine["source"] == str(manifests_dir / "fakebot.toml")
    assert mine["source_kind"] == "local override"
    assert mine["active_version"] == "1.0"
    assert mine["warning"] is None
    reload = dapi("server.reload_agent_manifests")
    assert reload["type"] == "agent_manifest_reload"
    assert "fakebot" in {m["agent"] for m in reload["manifests"]}


def _explain_rules(api: Api, pane_id: str) -> list[str]:
    return [r["id"] for r in api("agent.explain", {"target": pane_id})["explain"]
            ["evaluated_rules"]]


def _status_of(api: Api, agent: str) -> dict[str, Any] | None:
    for m in api("server.agent_manifests")["manifests"]:
        if m["agent"] == agent:
            return dict(m)
    return None


def test_hot_reload_edit_break_fix_and_delete(
        server: ServerProcess, dapi: Api, agent_script: Path, manifests_dir: Path) -> None:
    user_dir = server.home / "config" / "cmux" / "manifests"
    user_dir.mkdir(parents=True)
    (user_dir / "fakebot.toml").write_text(MANIFEST.replace('version = "1.0"',
                                                            'version = "0.5"'))
    path = manifests_dir / "fakebot.toml"
    listener = collect_events(server, ["server.manifests_reloaded"])
    try:
        pane_id = start_in_shell(dapi, agent_script)
        wait_agent(dapi, pane_id, "fakebot", "idle")
        wait_until(lambda: (_status_of(dapi, "fakebot") or {}).get("source") == str(path))

        # A new rule: "pondering" now means working.
        path.write_text(MANIFEST + textwrap.dedent("""
            [[rules]]
            id = "pondering"
            state = "working"
            priority = 25
            contains = ["pondering"]
        """))
        wait_until(lambda: "pondering" in _explain_rules(dapi, pane_id),
                   message="edited manifest in force")
        send(dapi, pane_id, "n\n")
        wait_agent(dapi, pane_id, "fakebot", "working")

        # Broken: the last good version stays in force and the problem is reported.
        path.write_text(MANIFEST.replace('state = "working"', 'state = "busy"'))
        status = wait_until(lambda: (lambda m: m if m and m["warning"] else None)(
            _status_of(dapi, "fakebot")), message="warning reported")
        assert "keeping the last good version" in status["warning"]
        assert "busy" in status["warning"] or "state" in status["warning"]
        assert status["source"] == str(path)
        assert "pondering" in _explain_rules(dapi, pane_id)
        events = drain(listener, lambda ev: any(
            f.get("status") == "invalid" for e in ev for f in e["data"]["files"]))
        invalid = [f for e in events for f in e["data"]["files"] if f["status"] == "invalid"][-1]
        assert invalid["file"] == str(path)
        assert invalid["kept_last_good"] is True
        assert invalid["error_detail"]["rule_id"] == "working_spinner"
        assert invalid["error_detail"]["line"] is not None
        assert "is invalid" in server.log()

        # Fixed: the new rules are used and the warning is gone.
        path.write_text(MANIFEST.replace("esc to interrupt", "pondering"))
        wait_until(lambda: (_status_of(dapi, "fakebot") or {"warning": 1})["warning"] is None,
                   message="warning cleared")
        assert "pondering" not in _explain_rules(dapi, pane_id)
        send(dapi, pane_id, "w\n")
        send(dapi, pane_id, "n\n")
        explained = wait_until(lambda: (lambda x: x if x["matched_rule"] else None)(
            dapi("agent.explain", {"target": pane_id})["explain"]))
        assert explained["matched_rule"]["id"] == "working_spinner"

        # Deleted: the user directory's version takes over.
        path.unlink()
        status = wait_until(lambda: (lambda m: m if m and m["active_version"] == "0.5"
                                     else None)(_status_of(dapi, "fakebot")),
                            message="fallback to the user manifest")
        assert status["source"] == str(user_dir / "fakebot.toml")
        assert pane_agent(dapi, pane_id)[0] == "fakebot"
    finally:
        listener.close()


def test_a_broken_new_file_is_reported_without_an_agent(
        dapi: Api, manifests_dir: Path) -> None:
    (manifests_dir / "newbot.toml").write_text('id = "newbot"\n[[rules]]\nid = ""\n')
    entry = wait_until(lambda: _status_of(dapi, "newbot"), message="broken file reported")
    assert entry["active_version"] is None
    assert entry["warning"] and "ignored" in entry["warning"]
    (manifests_dir / "newbot.toml").unlink()
    wait_until(lambda: _status_of(dapi, "newbot") is None, message="report withdrawn")


PLUGIN = textwrap.dedent('''\
    from cmux_core.hookspecs import hookimpl

    MANIFEST = """
    id = "fakebot"
    version = "0.1"
    process_names = ["fakebot_agent", "plugbot"]

    [[rules]]
    id = "plugin_idle"
    state = "idle"
    contains = ["type here"]
    """

    @hookimpl
    def cmux_register_manifests(register):
        register(MANIFEST)
        register(MANIFEST.replace('"fakebot"', '"plugbot"', 1)
                 .replace('"fakebot_agent", "plugbot"', '"plugbot_agent"'))
''')


def test_plugin_manifests_have_the_lowest_precedence(
        tmp_path: Path, manifests_dir: Path, agent_script: Path) -> None:
    plugin_dir = tmp_path / "plugins"
    plugin_dir.mkdir()
    (plugin_dir / "botplug.py").write_text(PLUGIN)
    with manifest_server(manifests_dir, "--plugins-dir", str(plugin_dir)) as proc, \
            contextlib.closing(Api(proc)) as api:
        manifests = {m["agent"]: m for m in api("server.agent_manifests")["manifests"]}
        assert manifests["plugbot"]["source"] == "plugin:botplug"
        assert manifests["plugbot"]["source_kind"] == "plugin"
        assert manifests["fakebot"]["source"] == str(manifests_dir / "fakebot.toml")

        # Without the directory manifest the plugin's version is used.
        (manifests_dir / "fakebot.toml").unlink()
        wait_until(lambda: (_status_of(api, "fakebot") or {}).get("source")
                   == "plugin:botplug", message="plugin manifest in force")
        pane_id = start_in_shell(api, agent_script)
        wait_agent(api, pane_id, "fakebot", "idle")
        rules = wait_until(lambda: _explain_rules(api, pane_id))
        assert rules == ["plugin_idle"]


def test_rapid_and_half_written_saves_settle_on_the_final_version(
        dapi: Api, manifests_dir: Path) -> None:
    path = manifests_dir / "fakebot.toml"
    wait_until(lambda: _status_of(dapi, "fakebot"), message="manifest loaded")
    # An editor saving in pieces, about ten times a second, ending with a good file.
    for i in range(12):
        good = MANIFEST.replace('version = "1.0"', f'version = "2.{i}"')
        path.write_text(good[: len(good) // 2] if i % 2 else good)
        time.sleep(0.1)  # pacing the writes, not waiting for anything
    final = MANIFEST.replace('version = "1.0"', 'version = "3.0"')
    path.write_text(final[: len(final) // 3])
    path.write_text(final)
    status = wait_until(lambda: (lambda m: m if m and m["active_version"] == "3.0"
                                 else None)(_status_of(dapi, "fakebot")),
                        message="final version in force")
    assert status["warning"] is None
    files = dapi("server.agent_manifests")["files"]
    assert next(f for f in files if f["file"] == str(path))["valid"] is True
