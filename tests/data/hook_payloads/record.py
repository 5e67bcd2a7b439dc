#!/usr/bin/env python3
"""Record the hook payloads real agent CLIs send, as test data for ``tests/test_hooks.py``.

Usage: ``record.py AGENT`` with AGENT one of claude, codex, copilot, gemini, opencode, qwen.

The agent runs in a private tmux server against ``tests/captured/fake_api.py`` (which
scripts the model: ``please run`` asks for a tool that needs permission, ``slowly``
streams for minutes), with a throwaway HOME in ``/tmp/cmux-hookrec/<agent>`` whose
settings send every hook event the CLI offers to ``recorder.py`` (for OpenCode: a JS
plugin that logs every event). A fixed scenario is played through the agent's screen:
start, a plain prompt, a tool approved, a tool denied, an interrupted slow answer, and
the agent's own clear/exit commands where it has them. Each hook call is then written to
``<agent>/NN-<event>.json`` beside this file, with the home and work paths replaced by
``/home/user`` and ``/home/user/work`` and the throwaway keys removed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FAKE_API = HERE.parents[1] / "captured" / "fake_api.py"
RECORDER = HERE / "recorder.py"
ROOT = Path("/tmp/cmux-hookrec")
TMUX = ["tmux", "-L", "cmux-hookrec", "-f", "/dev/null"]

CLAUDE_EVENTS = (
    "PreToolUse", "PostToolUse", "PostToolUseFailure", "PostToolBatch", "Notification",
    "UserPromptSubmit", "UserPromptExpansion", "SessionStart", "SessionEnd", "Stop",
    "StopFailure", "SubagentStart", "SubagentStop", "PreCompact", "PostCompact",
    "PermissionRequest", "PermissionDenied", "Setup", "TeammateIdle", "TaskCreated",
    "TaskCompleted", "Elicitation", "ElicitationResult", "ConfigChange", "WorktreeCreate",
    "WorktreeRemove", "InstructionsLoaded", "CwdChanged", "FileChanged", "MessageDisplay")
CODEX_EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest",
                "PostToolUse", "PreCompact", "PostCompact", "SubagentStart", "SubagentStop",
                "Stop", "SessionEnd")
QWEN_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "Notification",
               "UserPromptSubmit", "SessionStart", "SessionEnd", "Stop", "StopFailure",
               "SubagentStart", "SubagentStop", "PreCompact", "PostCompact", "PermissionRequest",
               "PermissionDenied")
COPILOT_EVENTS = ("SessionStart", "SessionEnd", "UserPromptSubmit", "PreToolUse", "PostToolUse",
                  "PostToolUseFailure", "PermissionRequest", "Notification", "Stop",
                  "SubagentStart", "SubagentStop", "PreCompact", "ErrorOccurred")
COPILOT_NATIVE_EVENTS = ("sessionStart", "sessionEnd", "userPromptSubmitted", "preToolUse",
                         "postToolUse", "postToolUseFailure", "permissionRequest", "notification",
                         "agentStop", "subagentStart", "subagentStop", "preCompact",
                         "errorOccurred")
GEMINI_EVENTS = ("SessionStart", "SessionEnd", "BeforeAgent", "AfterAgent", "BeforeModel",
                 "AfterModel", "BeforeToolSelection", "BeforeTool", "AfterTool",
                 "PreCompress", "Notification")

OPENCODE_RECORDER = """\
// Logs every OpenCode plugin event and hook call as one JSON line to $HOOK_LOG.
import { appendFileSync } from "node:fs";
const log = (kind, name, data) => appendFileSync(process.env.HOOK_LOG,
  JSON.stringify({ time: Date.now() / 1000, argv: [kind, name], payload: data }) + "\\n");
export const Recorder = async () => ({
  event: async ({ event }) => log("event", event.type, event),
  "chat.message": async (input, output) => log("hook", "chat.message", { input, output }),
  "tool.execute.before": async (input, output) =>
    log("hook", "tool.execute.before", { input, output }),
  "tool.execute.after": async (input, output) =>
    log("hook", "tool.execute.after", { input, output }),
  "permission.ask": async (input, output) => log("hook", "permission.ask", { input, output }),
});
"""


def tmux(*args: str) -> str:
    return subprocess.run([*TMUX, *args], check=True, capture_output=True, text=True).stdout


def screen() -> str:
    return tmux("capture-pane", "-p", "-t", "rec")


def wait(text: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in screen():
            return
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {text!r}; screen:\n{screen()}")


def send(keys: str, *, enter: bool = True) -> None:
    tmux("send-keys", "-t", "rec", "-l", keys)
    if enter:
        time.sleep(0.5)
        tmux("send-keys", "-t", "rec", "Enter")


def key(name: str) -> None:
    tmux("send-keys", "-t", "rec", name)


def hook_command(agent: str, event: str) -> str:
    return f"python3 {RECORDER} {agent} {event}"


def setup(agent: str, home: Path, work: Path, port: int) -> tuple[list[str], dict[str, str]]:
    """Write the agent's settings; return its argv and env."""
    env = {"HOME": str(home), "PATH": os.environ["PATH"], "LANG": "C.UTF-8",
           "TERM": "xterm-256color", "COLORTERM": "truecolor",
           "HOOK_LOG": str(home.parent / "hooks.jsonl")}
    if agent == "claude":
        (home / ".claude").mkdir(parents=True)
        (home / ".claude.json").write_text(json.dumps({
            "hasCompletedOnboarding": True, "theme": "dark", "numStartups": 3,
            "autoUpdates": False,
            "customApiKeyResponses": {"approved": ["0123456789abcdefghij"], "rejected": []},
            "projects": {str(work): {"hasTrustDialogAccepted": True, "allowedTools": [],
                                     "hasCompletedProjectOnboarding": True}}}))
        hooks = {event: [{"matcher": "*", "hooks": [
            {"type": "command", "command": hook_command(agent, event)}]}]
            for event in CLAUDE_EVENTS}
        (home / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}, indent=2))
        env |= {"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
                "ANTHROPIC_API_KEY": "sk-ant-api03-capture-0123456789abcdefghij",
                "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
        return ["claude"], env
    if agent == "codex":
        codex_home = home / ".codex"
        codex_home.mkdir(parents=True)
        hooks = "\n".join(
            f'[[hooks.{event}]]\n[[hooks.{event}.hooks]]\ntype = "command"\n'
            f'command = "{hook_command(agent, event)}"\n' for event in CODEX_EVENTS)
        (codex_home / "config.toml").write_text(f"""\
model = "gpt-5.1-codex"
model_provider = "fake"
approval_policy = "on-request"
sandbox_mode = "workspace-write"
check_for_update_on_startup = false
notify = ["python3", "{RECORDER}", "codex", "notify"]

[model_providers.fake]
name = "Fake"
base_url = "http://127.0.0.1:{port}/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"

[projects."{work}"]
trust_level = "trusted"

{hooks}""")
        env |= {"CODEX_HOME": str(codex_home), "OPENAI_API_KEY": "sk-capture-0000"}
        return ["codex", "--no-daemon", "--dangerously-bypass-hook-trust"], env
    if agent == "gemini":
        (home / ".gemini").mkdir(parents=True)
        hooks = {event: [{"matcher": "*" if "Tool" in event else "", "hooks": [
            {"type": "command", "name": f"record-{event}",
             "command": hook_command(agent, event)}]}] for event in GEMINI_EVENTS}
        (home / ".gemini" / "settings.json").write_text(json.dumps({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
            "privacy": {"usageStatisticsEnabled": False}, "ui": {"theme": "Default"},
            "hooksConfig": {"enabled": True}, "hooks": hooks}, indent=2))
        (home / ".gemini" / "trustedFolders.json").write_text(
            json.dumps({str(work): "TRUST_FOLDER"}))
        env |= {"GEMINI_API_KEY": "capture-key",
                "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{port}"}
        return ["gemini"], env
    if agent == "qwen":
        (home / ".qwen").mkdir(parents=True)
        hooks = {event: [{"matcher": "*", "hooks": [
            {"type": "command", "command": hook_command(agent, event)}]}]
            for event in QWEN_EVENTS}
        (home / ".qwen" / "settings.json").write_text(json.dumps({"hooks": hooks}, indent=2))
        env |= {"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1",
                "OPENAI_API_KEY": "sk-capture-0000", "OPENAI_MODEL": "qwen3-coder-plus"}
        return ["qwen"], env
    if agent == "copilot":
        copilot_home = home / ".copilot"
        copilot_home.mkdir(parents=True)
        # Claude-style groups under PascalCase names (what the integration installs) in the
        # user settings, and Copilot's own camelCase events in a user hook file. A "*"
        # matcher only on tool events: on Notification and PreCompact it matches nothing.
        hooks = {event: [{**({"matcher": "*"} if "Tool" in event or "Permission" in event
                             else {}), "hooks": [
            {"type": "command", "command": hook_command(agent, event)}]}]
            for event in COPILOT_EVENTS}
        (copilot_home / "settings.json").write_text(json.dumps({
            "banner": "never", "autoUpdate": False, "hooks": hooks}, indent=2))
        (copilot_home / "config.json").write_text(json.dumps({
            "appTipShown": True, "trustedFolders": [str(work)]}))
        native = {event: [{"type": "command", "bash": hook_command(agent, event)}]
                  for event in COPILOT_NATIVE_EVENTS}
        (copilot_home / "hooks").mkdir()
        (copilot_home / "hooks" / "record.json").write_text(json.dumps(
            {"version": 1, "hooks": native}, indent=2))
        env |= {"COPILOT_HOME": str(copilot_home), "COPILOT_OFFLINE": "true",
                "COPILOT_PROVIDER_BASE_URL": f"http://127.0.0.1:{port}/v1",
                "COPILOT_PROVIDER_API_KEY": "sk-capture-0000", "COPILOT_MODEL": "gpt-4.1",
                "COPILOT_AUTO_UPDATE": "false"}
        return ["copilot"], env
    if agent == "opencode":
        config = home / ".config" / "opencode"
        (config / "plugins").mkdir(parents=True)
        (config / "opencode.json").write_text(json.dumps({
            "$schema": "https://opencode.ai/config.json", "autoupdate": False,
            "share": "disabled", "model": "fake/fake-coder", "permission": {"bash": "ask"},
            "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
                                  "options": {"baseURL": f"http://127.0.0.1:{port}/v1",
                                              "apiKey": "sk-capture-0000"},
                                  "models": {"fake-coder": {"name": "Fake Coder"}}}}}))
        (config / "plugins" / "recorder.js").write_text(OPENCODE_RECORDER)
        env |= {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
                "OPENCODE_DISABLE_LSP_DOWNLOAD": "1"}
        return ["opencode"], env
    raise SystemExit(f"unknown agent {agent}")


def scenario(agent: str) -> None:
    """Drive the agent through the fixed scenario."""
    ready = {"claude": "? for shortcuts", "codex": "? for shortcuts", "qwen": "Type your message",
             "gemini": "Type your message", "opencode": "ctrl+p commands",
             "copilot": "/ commands"}[agent]
    wait(ready, 60)
    time.sleep(1.5)
    send("hi there")
    wait("scripted answer.")
    time.sleep(2)
    # a slow answer, interrupted (before any tool call, whose result would decide the answer)
    send("respond slowly please")
    time.sleep(7)
    key("Escape")
    if agent in ("opencode", "copilot"):  # their interrupt is Esc twice
        time.sleep(0.3)
        key("Escape")
    time.sleep(3)
    # a tool call, approved
    send("please run the setup command")
    if agent == "claude":
        wait("Do you want to proceed")
        time.sleep(7)  # Notification(permission_prompt) comes a few seconds after the dialog
        key("Enter")
    elif agent == "codex":
        wait("Press enter to confirm")
        time.sleep(2)
        key("y")
    elif agent in ("gemini", "qwen"):
        wait("Allow", 30)
        time.sleep(2)
        key("Enter")
    elif agent == "copilot":
        wait("Do you want to run this command?", 30)
        time.sleep(2)
        key("Enter")
    else:
        wait("Allow", 30)
        time.sleep(2)
        key("Enter")
    wait("Done.", 30)
    time.sleep(2)
    # a tool call, denied
    send("please run the setup command again")
    if agent == "claude":
        wait("Do you want to proceed")
    elif agent == "codex":
        wait("Press enter to confirm")
    elif agent == "copilot":
        wait("Do you want to run this command?", 30)
    else:
        wait("Allow", 30)
    time.sleep(1.5)
    key("Escape")
    time.sleep(3)
    # the agent's own context compaction, then (Claude Code) its idle notification
    if agent in ("claude", "codex", "copilot", "gemini", "qwen"):
        send("/compress" if agent in ("gemini", "qwen") else "/compact")
        time.sleep(8)
    if agent == "claude":
        time.sleep(65)
    # the agent's own way out
    if agent in ("claude", "codex", "copilot", "gemini", "qwen"):
        if agent != "codex":
            send("/clear")
            time.sleep(3)
        send("/quit" if agent in ("gemini", "qwen") else "/exit")
        time.sleep(4)
    else:
        key("C-c")
        time.sleep(3)


NOISE = ("plugin.", "catalog.", "integration.", "reference.", "message.part.delta")
"""OpenCode events that say nothing about the agent's turn (start-up catalogues, deltas)."""

SECRETS = ("sk-ant-api03-capture-0123456789abcdefghij", "sk-capture-0000", "capture-key")


def scrub(text: str, home: Path, work: Path) -> str:
    text = text.replace(str(work), "/home/user/work").replace(str(home), "/home/user")
    text = text.replace(str(work).replace("/", "-"), "-home-user-work")
    text = text.replace(str(work).lstrip("/"), "home/user/work")
    for secret in SECRETS:
        text = text.replace(secret, "<redacted>")
    return text


def main() -> None:
    agent = sys.argv[1]
    base = ROOT / agent
    shutil.rmtree(base, ignore_errors=True)
    home, work = base / "home", base / "work"
    home.mkdir(parents=True)
    work.mkdir()
    api = subprocess.Popen([sys.executable, str(FAKE_API), agent], stdout=subprocess.PIPE,
                           text=True)
    try:
        assert api.stdout is not None
        port = int(api.stdout.readline().split()[1])
        argv, env = setup(agent, home, work, port)
        subprocess.run([*TMUX, "kill-server"], capture_output=True)
        cmd = ["env", "-i", *(f"{k}={v}" for k, v in env.items()), *argv]
        tmux("new-session", "-d", "-s", "rec", "-x", "100", "-y", "30", "-c", str(work),
             " ".join(f"'{c}'" for c in cmd))
        scenario(agent)
        (base / "screen.txt").write_text(screen() if _alive() else "")
    finally:
        subprocess.run([*TMUX, "kill-server"], capture_output=True)
        api.terminate()
    write(agent, base, home, work)


def _alive() -> bool:
    return subprocess.run([*TMUX, "has-session", "-t", "rec"], capture_output=True).returncode == 0


def write(agent: str, base: Path, home: Path, work: Path) -> None:
    out = HERE / agent
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    log = base / "hooks.jsonl"
    entries = [json.loads(scrub(line, home, work))
               for line in (log.read_text().splitlines() if log.exists() else [])]
    entries = [e for e in entries if not str(e["argv"][1]).startswith(NOISE)]
    width = len(str(len(entries)))
    for n, entry in enumerate(entries, 1):
        name = re.sub(r"[^A-Za-z0-9.]+", "-", entry["argv"][1])
        entry.pop("time", None)
        if entry.get("stdin"):
            entry.pop("payload", None)  # the same JSON, parsed: stdin is what a hook reads
        (out / f"{n:0{max(width, 2)}d}-{name}.json").write_text(json.dumps(entry, indent=2) + "\n")
    print(f"{agent}: {len(entries)} hook calls in {out}")


if __name__ == "__main__":
    main()
