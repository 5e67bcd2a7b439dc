"""``hooks/cmux-hook`` against a real server: recorded agent payloads replayed through the
commands the first-party integrations install, and the hook's silent failures.

Each replay runs the command exactly as the agent would (``sh -c COMMAND`` with the payload
on stdin) with the environment of a real pane's shell, read from ``/proc``; the server's
answers to ``pane.get`` and ``agent.list`` are what is checked. Payloads come from
``tests/data/hook_payloads/`` (recorded from the real CLIs, see its README).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cmux_core.testing import ServerProcess, start_server, wait_until

ROOT = Path(__file__).resolve().parents[1]
PAYLOADS = ROOT / "tests" / "data" / "hook_payloads"
HOOK = ROOT / "hooks" / "cmux-hook"
SILENT_LIMIT_S = 0.5


def entry(agent: str, name: str) -> dict[str, Any]:
    found = sorted((PAYLOADS / agent).glob(f"{name}*.json"))
    assert len(found) == 1, (agent, name, found)
    data: dict[str, Any] = json.loads(found[0].read_text())
    return data


def payload_files(agent: str) -> list[Path]:
    return sorted((PAYLOADS / agent).glob("*.json"))


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with start_server() as srv:
        yield srv


def new_pane(server: ServerProcess) -> tuple[str, dict[str, str]]:
    """A fresh shell pane and the environment its processes (an agent, its hooks) get."""
    with server.client() as client:
        pane = client.call("tab.create")["root_pane"]
    environ = Path(f"/proc/{pane['pid']}/environ")

    def shell_env() -> dict[str, str] | None:  # the environment once the shell was exec'd
        items = environ.read_bytes().decode(errors="replace").split("\0")
        env = dict(item.split("=", 1) for item in items if "=" in item)
        return env if env.get("CMUX_PANE_ID") == pane["pane_id"] else None

    return str(pane["pane_id"]), wait_until(shell_env, timeout=10)


def shown(status: str) -> str:
    """``done`` is ``idle`` in a pane nobody looked at (the test panes are not focused)."""
    return "idle" if status == "done" else status


def pane_row(server: ServerProcess, pane_id: str) -> dict[str, Any]:
    with server.client() as client:
        rows = client.call("agent.list")["agents"]
        pane = client.call("pane.get", {"pane_id": pane_id})["pane"]
    row = next((r for r in rows if r["pane_id"] == pane_id), {})
    return {**pane, **row}


# -- installing the integrations into a throwaway home ----------------------------------------


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary HOME (and XDG config dir) for the plugins' install()."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "OPENCODE_CONFIG_DIR",
                 "QWEN_HOME", "COPILOT_HOME"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def installed_commands(agent: str, home: Path) -> dict[str, str]:
    """Install the agent's integration into ``home``; the command each event then runs."""
    if agent == "claude":
        import cmux_claude

        cmux_claude.install()
        groups = json.loads((home / ".claude" / "settings.json").read_text())["hooks"]
    elif agent == "qwen":
        import cmux_qwen

        cmux_qwen.install()
        groups = json.loads((home / ".qwen" / "settings.json").read_text())["hooks"]
    elif agent == "copilot":
        import cmux_copilot

        cmux_copilot.install()
        groups = json.loads((home / ".copilot" / "settings.json").read_text())["hooks"]
    elif agent == "gemini":
        import cmux_gemini

        cmux_gemini.install()
        groups = json.loads((home / ".gemini" / "settings.json").read_text())["hooks"]
    else:
        import cmux_codex

        cmux_codex.install()
        groups = tomllib.loads((home / ".codex" / "config.toml").read_text())["hooks"]
    return {event: group[0]["hooks"][0]["command"] for event, group in groups.items()}


def replay(command: str, item: dict[str, Any], env: dict[str, str]) -> float:
    """Run one installed hook command as the agent does; returns its wall time."""
    started = time.monotonic()
    done = subprocess.run(["sh", "-c", command], input=item["stdin"].encode(), env=env,
                          capture_output=True, timeout=10)
    elapsed = time.monotonic() - started
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    return elapsed


def replay_all(agent: str, home: Path, server: ServerProcess,
               checks: dict[str, tuple[str | None, dict[str, Any]]]) -> dict[str, Any]:
    """Replay every recorded payload whose event the integration hooks, in order, and at
    each name in ``checks`` wait for its ``(status, tokens)``; returns the final row."""
    commands = installed_commands(agent, home)
    pane_id, env = new_pane(server)
    env = dict(env, CMUX_HOOK_LOG=str(home / "hook.log"))
    seen = set()
    for path in payload_files(agent):
        item = json.loads(path.read_text())
        event = item["argv"][1]
        if event not in commands:
            continue
        replay(commands[event], item, env)
        prefix = path.stem.split("-", 1)[0]
        if prefix in checks:
            seen.add(prefix)
            status, tokens = checks[prefix]

            def matches(status: str | None = status, tokens: dict[str, Any] = tokens) -> bool:
                row = pane_row(server, pane_id)
                got = row.get("tokens") or {}
                return ((status is None or shown(row["agent_status"]) == status)
                        and all(got.get(k) == v for k, v in tokens.items()))

            try:
                wait_until(matches, timeout=10)
            except AssertionError:
                raise AssertionError(f"after {path.name}: wanted {status} {tokens}, pane shows "
                                     f"{pane_row(server, pane_id)}") from None
    assert seen == set(checks), "a checked payload was not replayed"
    assert not (home / "hook.log").exists(), (home / "hook.log").read_text()
    return pane_row(server, pane_id)


def session_id(agent: str, name: str) -> str:
    return str(json.loads(entry(agent, name)["stdin"])["session_id"])


def test_claude_recorded_session(home: Path, server: ServerProcess) -> None:
    row = replay_all("claude", home, server, {
        "01": (None, {"model": "claude-opus-4-8[1m]"}),
        "02": ("working", {"prompt": "hi there"}),
        "03": ("idle", {}),
        "06": ("working", {"prompt": "please run the setup command"}),
        "07": ("working", {"tool": "Bash", "tool_input": "touch approved.txt"}),
        "09": ("blocked", {}),
        "11": ("working", {"tool": None, "tool_input": None}),
        "13": ("idle", {}),
        "18": ("blocked", {}),
        "19": ("working", {"tool": None}),  # /compact
        "20": ("working", {"tool": None}),  # the compacting subagent's tool: ignored
        "23": ("idle", {}),
        "24": ("idle", {}),  # Notification idle_prompt
        "25": (None, {"prompt": None}),
    })
    assert row["agent"] == "claude"
    assert row["status_source_detail"] == "cmux:claude"
    # /clear started a new session: the pane now refers to it
    assert row["agent_session"] == {"source": "cmux:claude", "agent": "claude", "kind": "id",
                                    "value": session_id("claude", "26-SessionStart")}
    assert session_id("claude", "26-SessionStart") != session_id("claude", "01-SessionStart")


def test_codex_recorded_session(home: Path, server: ServerProcess) -> None:
    row = replay_all("codex", home, server, {
        "01": (None, {"model": "gpt-5.1-codex"}),
        "02": ("working", {"prompt": "hi there"}),
        "03": ("idle", {}),
        "08": ("working", {"tool": "Bash", "tool_input": "touch approved.txt"}),
        "09": ("blocked", {}),
        "10": ("working", {"tool": None}),
        "11": ("idle", {}),
        "15": ("blocked", {}),
        "16": ("working", {}),  # /compact
        "17": ("idle", {}),
    })
    assert row["agent_session"]["value"] == session_id("codex", "01-SessionStart")
    assert row["status_source_detail"] == "cmux:codex"


def test_qwen_recorded_session(home: Path, server: ServerProcess) -> None:
    row = replay_all("qwen", home, server, {
        "01": (None, {"model": "qwen3-coder-plus"}),
        "02": ("working", {"prompt": "hi there"}),
        "03": ("idle", {}),
        "05": ("working", {"prompt": "respond slowly please"}),
        "06": ("idle", {}),  # Qwen Code announces its idle prompt after an interrupt
        "08": ("blocked", {}),
        "10": ("working", {"tool": "run_shell_command", "tool_input": "touch approved.txt"}),
        "12": ("working", {"prompt": "please run the setup command"}),  # no prompt: kept
        "13": ("idle", {}),
        "16": ("blocked", {}),
        "18": ("idle", {}),  # ... and after a denial
        "20": (None, {"prompt": None}),
    })
    assert row["agent_session"]["value"] == session_id("qwen", "21-SessionStart")
    assert row["status_source_detail"] == "cmux:qwen"


def test_gemini_recorded_session(home: Path, server: ServerProcess) -> None:
    row = replay_all("gemini", home, server, {
        "02": ("working", {"prompt": "hi there"}),
        "13": ("idle", {}),
        "14": ("working", {"prompt": "respond slowly please"}),
        "21": ("idle", {}),  # Gemini CLI runs AfterAgent after an interrupt
        "27": ("working", {"tool": "run_shell_command", "tool_input": "touch approved.txt"}),
        "28": ("blocked", {}),
        "29": ("working", {"tool": None}),
        "39": ("idle", {}),
        "46": ("blocked", {}),
        "47": ("working", {}),  # /compress
        "48": (None, {"prompt": None}),
    })
    assert row["agent_session"]["value"] == session_id("gemini", "49-SessionStart")
    assert row["status_source_detail"] == "cmux:gemini"


def test_copilot_recorded_session(home: Path, server: ServerProcess) -> None:
    """Copilot CLI starts its session at the first prompt and runs no hook after an interrupt
    (07-08 then 09-10 follow each other) or a denial (28 is the last hooked call of its
    turn); its PermissionRequest payload has Copilot's own shape."""
    row = replay_all("copilot", home, server, {
        "03": (None, {"tool": None}),
        "04": ("working", {"prompt": "hi there"}),
        "06": ("idle", {}),
        "08": ("working", {"prompt": "respond slowly please"}),
        "12": ("working", {"tool": "Bash", "tool_input": "touch approved.txt"}),
        "14": ("blocked", {}),
        "16": ("blocked", {}),  # Notification permission_prompt
        "18": ("working", {"tool": None, "tool_input": None}),
        "20": ("idle", {}),
        "26": ("blocked", {}),
        "28": ("blocked", {}),
        "32": (None, {"prompt": None}),
    })
    assert row["agent_session"] == {"source": "cmux:copilot", "agent": "copilot", "kind": "id",
                                    "value": session_id("copilot", "03-SessionStart")}
    assert row["status_source_detail"] == "cmux:copilot"


NODE = shutil.which("node")
OPENCODE_DRIVER = """\
// Replays recorded OpenCode plugin calls (JSON files given as arguments) through a plugin.
import { readFileSync } from "node:fs";
const [plugin, ...files] = process.argv.slice(2);
const mod = await import(plugin);
const hooks = await Object.values(mod)[0]({});
for (const file of files) {
  const { argv: [kind, name], payload } = JSON.parse(readFileSync(file, "utf8"));
  if (kind === "event") await hooks.event?.({ event: payload });
  else await hooks[name]?.(payload.input, payload.output);
}
// node exits once the plugin's queued cmux-hook runs have all ended
"""


@pytest.mark.skipif(NODE is None, reason="OpenCode plugins are JS: needs node")
def test_opencode_recorded_session(home: Path, server: ServerProcess, tmp_path: Path) -> None:
    import cmux_opencode

    cmux_opencode.install()
    installed = home / ".config" / "opencode" / "plugins" / "cmux.js"
    # node needs .mjs to read ES modules outside a package; the text is the installed file's
    module = tmp_path / "cmux-plugin.mjs"
    module.write_text(installed.read_text())
    driver = tmp_path / "driver.mjs"
    driver.write_text(OPENCODE_DRIVER)
    pane_id, env = new_pane(server)
    env = dict(env, CMUX_HOOK_LOG=str(home / "hook.log"))
    files = payload_files("opencode")
    session = entry("opencode", "001-session.created")["payload"]["properties"]["info"]["id"]

    def run_until(last: int, status: str, tokens: dict[str, Any]) -> None:
        chunk = [f for f in files if int(f.stem.split("-")[0]) <= last]
        files[:] = [f for f in files if f not in chunk]
        assert NODE is not None
        done = subprocess.run([NODE, str(driver), str(module), *map(str, chunk)], env=env,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr

        def matches() -> bool:
            row = pane_row(server, pane_id)
            got = row.get("tokens") or {}
            return shown(row["agent_status"]) == status and all(
                got.get(k) == v for k, v in tokens.items())

        wait_until(matches, timeout=10)

    run_until(12, "working", {"prompt": "hi there", "model": "fake/fake-coder"})
    run_until(21, "idle", {})
    run_until(56, "working", {"tool": "bash", "tool_input": "touch approved.txt"})
    run_until(58, "blocked", {})
    run_until(105, "idle", {"tool": None})
    row = pane_row(server, pane_id)
    assert row["agent_session"]["value"] == session
    assert row["status_source_detail"] == "cmux:opencode"
    assert not (home / "hook.log").exists(), (home / "hook.log").read_text()


def test_a_subagent_payload_leaves_the_main_state(home: Path, server: ServerProcess) -> None:
    """Claude Code marks a subagent's hook payloads with ``agent_id`` (recorded: the tool
    call of the subagent that ran ``/compact``)."""
    commands = installed_commands("claude", home)
    pane_id, env = new_pane(server)
    replay(commands["Stop"], entry("claude", "03-Stop"), env)
    wait_until(lambda: shown(pane_row(server, pane_id)["agent_status"]) == "idle", timeout=10)
    item = entry("claude", "20-PreToolUse")
    assert json.loads(item["stdin"])["agent_id"]
    replay(commands["PreToolUse"], item, env)
    # a main-agent report sent afterwards lands, so the subagent's had its chance to
    replay(commands["Notification"], entry("claude", "10-Notification"), env)
    wait_until(lambda: pane_row(server, pane_id)["agent_status"] == "blocked", timeout=10)
    assert "tool" not in (pane_row(server, pane_id).get("tokens") or {})


# -- never failing the agent --------------------------------------------------------------------


def run_hook(env: dict[str, str], stdin: bytes | None, *args: str) -> tuple[float, Any]:
    started = time.monotonic()
    done = subprocess.run([str(HOOK), "claude", *args], input=stdin, env=env,
                          capture_output=True, timeout=10)
    return time.monotonic() - started, done


def base_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


PROMPT = entry("claude", "02-UserPromptSubmit")["stdin"].encode()


def assert_silent(elapsed: float, done: Any) -> None:
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert elapsed < SILENT_LIMIT_S + 0.3, elapsed  # the hook's limit, plus process start


def test_outside_a_pane_it_exits_at_once() -> None:
    elapsed, done = run_hook(base_env(), PROMPT)
    assert_silent(elapsed, done)


def test_no_server_behind_the_socket(tmp_path: Path) -> None:
    env = base_env() | {"CMUX_SOCKET_PATH": str(tmp_path / "none.sock"), "CMUX_PANE_ID": "w1:p1"}
    assert_silent(*run_hook(env, PROMPT))


@pytest.mark.parametrize("stdin", [b"{not json", b"[1, 2]", b"", b"\xff\xfe", b'{"a": 1} x'])
def test_bad_payloads_change_nothing(stdin: bytes, server: ServerProcess) -> None:
    pane_id, env = new_pane(server)
    before = pane_row(server, pane_id)
    assert_silent(*run_hook(env, stdin))
    after = pane_row(server, pane_id)
    assert (after["agent_status"], after.get("tokens"), after["revision"]) == (
        before["agent_status"], before.get("tokens"), before["revision"])


def test_a_server_that_never_answers(tmp_path: Path) -> None:
    path = tmp_path / "mute.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as mute:
        mute.bind(str(path))
        mute.listen(8)  # accepts connections into its backlog, never reads or answers
        env = base_env() | {"CMUX_SOCKET_PATH": str(path), "CMUX_PANE_ID": "w1:p1"}
        assert_silent(*run_hook(env, PROMPT))


def test_an_agent_that_never_closes_stdin(tmp_path: Path) -> None:
    env = base_env() | {"CMUX_SOCKET_PATH": str(tmp_path / "s.sock"), "CMUX_PANE_ID": "w1:p1"}
    started = time.monotonic()
    proc = subprocess.Popen([str(HOOK), "claude"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert proc.stdin is not None
        proc.stdin.write(PROMPT[:20])
        proc.stdin.flush()
        assert proc.wait(timeout=5) == 0
        assert time.monotonic() - started < SILENT_LIMIT_S + 0.3
        assert proc.stdout is not None and proc.stdout.read() == b""
    finally:
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_unknown_agent_and_missing_interpreter(tmp_path: Path) -> None:
    env = base_env() | {"CMUX_SOCKET_PATH": str(tmp_path / "s.sock"), "CMUX_PANE_ID": "w1:p1"}
    started = time.monotonic()
    done = subprocess.run([str(HOOK), "no-such-agent"], input=PROMPT, env=env,
                          capture_output=True, timeout=10)
    assert_silent(time.monotonic() - started, done)
    env["CMUX_HOOK_PYTHON"] = str(tmp_path / "no-python")
    assert_silent(*run_hook(env, PROMPT))


def test_a_report_the_server_refuses_is_logged_for_the_author(server: ServerProcess,
                                                              tmp_path: Path) -> None:
    """``CMUX_HOOK_LOG`` is where a hook author sees what went wrong; nothing else shows it."""
    _, env = new_pane(server)
    log = tmp_path / "hook.log"
    # Without $CMUX_SURFACE_ID, which would name the terminal whatever the pane id says.
    env = {k: v for k, v in env.items() if k != "CMUX_SURFACE_ID"}
    env = env | {"CMUX_PANE_ID": "w1:p999", "CMUX_HOOK_LOG": str(log)}
    assert_silent(*run_hook(env, PROMPT))
    assert "pane_not_found" in log.read_text()


def test_the_bench_case_runs() -> None:
    """``make bench``'s hooks case, tiny: every setting measured, the reports land (it
    raises otherwise)."""
    import sys

    sys.path.insert(0, str(ROOT))  # bench/ sits next to tests/ and is not installed
    from bench.hooks import measure

    times = measure(3)
    assert set(times) == {"true", "python", "outside", "no_server", "server"}
    assert all(len(v) == 3 and min(v) > 0 for v in times.values())
