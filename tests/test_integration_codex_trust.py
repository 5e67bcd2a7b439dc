"""Codex hook trust as cmux-codex reports it, against what Codex 0.171.0 recorded.

``tests/data/codex_trust/`` holds ``config.toml`` files a real Codex left (after
``cmux integration install codex``; after trusting every hook under ``/hooks``; after
switching PreToolUse off there; with our command changed; with a user hook put before ours
in Stop) and Codex's own ``hooks/list`` answer for each (``codex app-server``). Paths read
``@CODEX_HOME@``, ``@HOOK@`` (our installed ``cmux-hook``) and ``@WORK@``. None of these
tests needs Codex: the app-server exchange runs against a stand-in that replays a recorded
answer.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cmux_codex
import pytest
import tomlkit
from cmux_codex import trust

from cmux_core.plugin_host import hook_kit
from cmux_core.testing import ServerProcess, start_server

DATA = Path(__file__).parent / "data" / "codex_trust"
CASES = ("untrusted", "trusted", "disabled", "modified", "shifted")
EVENTS = cmux_codex.EVENTS


def recorded(name: str, codex_home: Path, hook: Path) -> str:
    """A recorded file with its placeholders filled in for this home."""
    return ((DATA / name).read_text().replace("@CODEX_HOME@", str(codex_home))
            .replace("@HOOK@", str(hook)).replace("@WORK@", str(codex_home.parent / "work")))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / ".codex"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no codex to ask unless a test adds one
    (tmp_path / ".codex").mkdir()
    return tmp_path


def use_config(case: str, home: Path) -> tuple[Any, Path]:
    path = home / ".codex" / "config.toml"
    path.write_text(recorded(f"{case}.config.toml", path.parent,
                             hook_kit.hook_dir("codex") / "cmux-hook"))
    return tomlkit.parse(path.read_text()), path


def hooks_list(case: str, home: Path) -> dict[str, Any]:
    reply: dict[str, Any] = json.loads(recorded(f"{case}.hooks-list.json", home / ".codex",
                                                hook_kit.hook_dir("codex") / "cmux-hook"))
    return reply


def test_event_labels_are_codex_keys() -> None:
    reply = json.loads((DATA / "trusted.hooks-list.json").read_text())
    labels = {h["eventName"]: h["key"].split(":")[1] for h in reply["result"]["data"][0]["hooks"]}
    assert {e[:1].lower() + e[1:]: trust.event_label(e) for e in EVENTS} == labels


@pytest.mark.parametrize("case", CASES)
def test_our_keys_are_the_ones_codex_lists(case: str, home: Path) -> None:
    doc, path = use_config(case, home)
    reply = hooks_list(case, home)
    theirs = sorted(h["key"] for h in reply["result"]["data"][0]["hooks"]
                    if hook_kit.is_our_hook(h, "codex"))
    ours = sorted(k for keys in trust.our_hook_keys(doc, path, EVENTS).values() for k in keys)
    assert ours == theirs
    if case == "shifted":  # the user's hook now holds Stop's first place
        assert trust.our_hook_keys(doc, path, EVENTS)["Stop"] == [f"{path}:stop:1:0"]


EXPECTED_RECORDED = {
    "untrusted": {e: "untrusted" for e in EVENTS},
    "trusted": {e: "recorded" for e in EVENTS},
    "disabled": {**{e: "recorded" for e in EVENTS}, "PreToolUse": "disabled"},
    "modified": {e: "recorded" for e in EVENTS},  # the file alone cannot tell
    "shifted": {**{e: "recorded" for e in EVENTS}, "Stop": "untrusted"},
}
EXPECTED_CODEX = {
    "untrusted": {e: "untrusted" for e in EVENTS},
    "trusted": {e: "trusted" for e in EVENTS},
    "disabled": {**{e: "trusted" for e in EVENTS}, "PreToolUse": "disabled"},
    "modified": {e: "modified" for e in EVENTS},
    "shifted": {**{e: "trusted" for e in EVENTS}, "Stop": "untrusted"},
}


@pytest.mark.parametrize("case", CASES)
def test_recorded_trust_reads_hooks_state(case: str, home: Path) -> None:
    doc, path = use_config(case, home)
    assert trust.recorded_trust(doc, path, EVENTS) == EXPECTED_RECORDED[case]


@pytest.mark.parametrize("case", CASES)
def test_codex_verdict_from_hooks_list(case: str, home: Path) -> None:
    path = home / ".codex" / "config.toml"
    reply = hooks_list(case, home)
    assert trust.trust_from_hooks_list(reply["result"], path, EVENTS) == EXPECTED_CODEX[case]
    # hooks of another file (a project's) are not ours to report
    assert trust.trust_from_hooks_list(reply["result"], home / "other.toml", EVENTS) == {}


def test_no_hooks_installed(home: Path) -> None:
    path = home / ".codex" / "config.toml"
    assert trust.trust_status({}, path, EVENTS) == {
        "trusted": False, "trust": {}, "trust_checked_by": "config"}


# -- asking Codex: a stand-in app server replaying a recorded answer ---------------------------

FAKE_CODEX = """\
#!{python}
# A stand-in for `codex app-server`: logs each request line, answers initialize and
# hooks/list (with the recorded result in {answer}), never answers when {answer} is absent.
import json, os, sys, time
log = open({log!r}, "a")
log.write(json.dumps(sys.argv[1:]) + "\\n"); log.flush()
for line in sys.stdin:
    message = json.loads(line)
    log.write(line); log.flush()
    if not os.path.exists({answer!r}):
        time.sleep(60)
    if message.get("method") == "initialize":
        print(json.dumps({{"method": "configWarning", "params": {{}}}}), flush=True)
        print(json.dumps({{"id": message["id"], "result": {{"codexHome": "x"}}}}), flush=True)
    elif message.get("method") == "hooks/list":
        result = json.load(open({answer!r}))["result"]
        print(json.dumps({{"id": message["id"], "result": result}}), flush=True)
"""


def fake_codex(directory: Path, answer: dict[str, Any] | None) -> tuple[Path, Path]:
    """A ``codex`` in ``directory`` answering ``answer`` (a recorded reply); returns it and
    its request log."""
    directory.mkdir(parents=True, exist_ok=True)
    log, answer_file = directory / "requests.log", directory / "answer.json"
    if answer is not None:
        answer_file.write_text(json.dumps(answer))
    codex = directory / "codex"
    codex.write_text(FAKE_CODEX.format(python=sys.executable, log=str(log),
                                       answer=str(answer_file)))
    codex.chmod(0o755)
    return codex, log


def test_codex_trust_asks_the_app_server(home: Path) -> None:
    _, path = use_config("trusted", home)
    codex, log = fake_codex(home / "bin", hooks_list("modified", home))
    assert trust.codex_trust(path, EVENTS, codex=str(codex)) == EXPECTED_CODEX["modified"]
    argv, *requests = [json.loads(line) for line in log.read_text().splitlines()]
    assert argv == ["app-server"]
    assert [r.get("method") for r in requests] == ["initialize", "initialized", "hooks/list"]
    assert requests[2]["params"] == {"cwds": [str(path.parent)]}


def test_codex_trust_gives_up(home: Path) -> None:
    _, path = use_config("trusted", home)
    silent, _ = fake_codex(home / "silent", None)
    start = time.monotonic()
    assert trust.codex_trust(path, EVENTS, codex=str(silent), timeout=1.0) is None
    assert time.monotonic() - start < 10  # the silent codex would answer never (60 s)
    assert trust.codex_trust(path, EVENTS, codex=str(home / "missing")) is None
    assert trust.codex_trust(path, EVENTS) is None  # none on PATH


def test_status_trusted_only_when_codex_confirms(home: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    use_config("trusted", home)
    hook_kit.install_hook("codex")
    # no codex: every hook has a recorded trust, but a change since cannot be ruled out
    status = cmux_codex.status()
    assert status["installed"] is True
    assert (status["trusted"], status["trust_checked_by"]) == (None, "config")
    assert "confirm" in status["note"]

    _, log = fake_codex(home / "bin", hooks_list("trusted", home))
    monkeypatch.setenv("PATH", f"{home / 'bin'}:/usr/bin:/bin")
    status = cmux_codex.status()
    assert (status["trusted"], status["trust_checked_by"]) == (True, "codex")
    assert status["trust"] == EXPECTED_CODEX["trusted"] and "note" not in status

    (home / "bin" / "answer.json").write_text(json.dumps(hooks_list("modified", home)))
    status = cmux_codex.status()
    assert (status["trusted"], status["trust"]["Stop"]) == (False, "modified")
    assert "/hooks" in status["note"]

    # a hook no trust was recorded for: Codex will not run it, and is not asked
    use_config("shifted", home)
    log.unlink()
    status = cmux_codex.status()
    assert (status["trusted"], status["trust_checked_by"]) == (False, "config")
    assert status["trust"]["Stop"] == "untrusted" and not log.exists()


# -- through a real server ----------------------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServerProcess, Path]]:
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    env = {"HOME": str(home), "CODEX_HOME": str(home / ".codex"),
           "CMUX_LOAD_PLUGINS": "cmux-codex",
           "PATH": f"{home / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    server = start_server(env=env)
    try:
        yield server, home
    finally:
        server.stop()


def test_status_through_the_server(served: tuple[ServerProcess, Path]) -> None:
    server, home = served
    config = home / ".codex" / "config.toml"
    hook = Path(server.env["XDG_CONFIG_HOME"]) / "cmux" / "hooks" / "codex" / "cmux-hook"
    with server.client() as client:
        client.call("integration.install", {"target": "codex"})
        status = client.call("integration.status", {"target": "codex"})["status"]
        assert status["trusted"] is False
        assert set(status["trust"].values()) == {"untrusted"}
        assert "/hooks" in status["note"]

        # what Codex wrote when every hook was trusted under /hooks, and its own answer
        config.write_text(recorded("trusted.config.toml", config.parent, hook))
        answer = json.loads(recorded("trusted.hooks-list.json", config.parent, hook))
        fake_codex(home / "bin", answer)
        status = client.call("integration.status", {"target": "codex"})["status"]
        assert (status["trusted"], status["trust_checked_by"]) == (True, "codex")
        assert status["installed"] is True


def test_uninstall_leaves_codex_trust_and_reinstall_finds_it(home: Path) -> None:
    """Codex wrote the trust entries, at the user's word: uninstall keeps them (only our
    hook entries go), so installing the same hooks again is trusted as before."""
    doc, path = use_config("trusted", home)
    state = tomlkit.dumps(doc["hooks"]["state"])
    cmux_codex.uninstall()
    after = tomlkit.parse(path.read_text())
    assert set(after["hooks"]) == {"state"}
    assert tomlkit.dumps(after["hooks"]["state"]) == state
    assert trust.recorded_trust(after, path, EVENTS) == {}
    cmux_codex.install()
    again = tomlkit.parse(path.read_text())
    assert trust.recorded_trust(again, path, EVENTS) == EXPECTED_RECORDED["trusted"]


def test_state_keys_match_another_spelling_of_the_path(home: Path) -> None:
    """Codex writes keys with the path it resolved; CODEX_HOME given through a symbolic
    link (or with a ``..`` in it) still finds them."""
    doc, _ = use_config("trusted", home)
    (home / "link").symlink_to(home / ".codex")
    spellings = (home / "link" / "config.toml", home / ".codex" / ".." / ".codex" / "config.toml")
    for config in spellings:
        assert trust.recorded_trust(doc, config, EVENTS) == EXPECTED_RECORDED["trusted"]
        reply = hooks_list("trusted", home)
        assert trust.trust_from_hooks_list(reply["result"], config, EVENTS) == \
            EXPECTED_CODEX["trusted"]
