"""Golden captured sessions, and live parity with tmux.

Every ``tests/captured/**/<name>.input`` holds the raw bytes a real program wrote
to its PTY (recorded with ``tests/captured/record.py``); ``<name>.expected`` is
the ``visible`` read those bytes must produce and ``<name>.meta.toml`` says how
it was recorded, the OSC title and progress the bytes leave behind (what
detection's ``osc_title``/``osc_progress`` regions read) and what was checked
against tmux. A backend listed under
``known_bugs`` in the meta file is expected to differ (strict xfail), so a fix
shows up as a failure until the entry is removed.

The parity tests run small deterministic programs live in a cmux pane and in a
tmux pane of the same size and compare the two screens.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Api

from cmux_core.errors import CmuxError
from cmux_core.terminal.backends import make_emulator
from cmux_core.terminal.emulator import read_text
from cmux_core.testing import wait_until

CAPTURED = Path(__file__).parent / "captured"
RECORDINGS = sorted(CAPTURED.rglob("*.input"))
STATES = {"idle", "working", "blocked", "unknown", "menu"}
CHUNK_SIZES = (1, 2, 3, 5, 8, 13, 64, 700)
"""Feed sizes cycled through by the chunked replay, so sequences split at every kind of point."""


def _name(path: Path) -> str:
    return str(path.relative_to(CAPTURED).with_suffix(""))


def _meta(path: Path) -> dict[str, Any]:
    with path.with_suffix(".meta.toml").open("rb") as f:
        return tomllib.load(f)


def _ghostty_available() -> bool:
    try:
        make_emulator("ghostty", 2, 2)
    except CmuxError:
        return False
    return True


BACKENDS = ["pyte", pytest.param("ghostty", marks=pytest.mark.skipif(
    not _ghostty_available(), reason="the ghostty backend does not load here"))]


def _chunks(data: bytes) -> Iterator[bytes]:
    pos = 0
    for size in itertools.cycle(CHUNK_SIZES):
        if pos >= len(data):
            return
        yield data[pos:pos + size]
        pos += size


def test_there_are_enough_recordings() -> None:
    assert len(RECORDINGS) >= 12


@pytest.mark.parametrize("recording", RECORDINGS, ids=_name)
def test_recording_is_complete(recording: Path) -> None:
    meta = _meta(recording)
    assert meta["name"] == _name(recording)
    assert recording.with_suffix(".expected").read_text().endswith("\n")
    assert meta["bytes"] == len(recording.read_bytes()) <= 200_000
    if "agent" in meta:
        assert meta["agent"]["state"] in STATES
        assert meta["agent"]["note"]
        version = meta["agent"].get("version")
        if version is not None:
            assert re.fullmatch(r"\d+(\.\d+)+", version), "a dotted release number"
            assert f"-{version}-" in meta["name"], "the case's name says the version too"
    renderings = meta["renderings"]
    if not renderings.get("tmux_matches", True):
        assert renderings.get("tmux_note"), "a difference from tmux must say why it is accepted"


@pytest.mark.parametrize("feed", ["whole", "chunked"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("recording", RECORDINGS, ids=_name)
def test_replay_matches_expected(recording: Path, backend: str, feed: str,
                                 request: pytest.FixtureRequest) -> None:
    meta = _meta(recording)
    known = meta.get("known_bugs", {}).get(backend)
    if known:
        request.applymarker(pytest.mark.xfail(reason=known, strict=True))
    emulator = make_emulator(backend, meta["cols"], meta["rows"])
    data = recording.read_bytes()
    for chunk in (_chunks(data) if feed == "chunked" else [data]):
        emulator.feed(chunk)
    text, truncated = read_text(emulator, "visible", None, "text")
    assert not truncated
    assert text == recording.with_suffix(".expected").read_text()
    osc = meta.get("osc", {})
    assert (emulator.title, emulator.progress) == (osc.get("title"), osc.get("progress"))


# --------------------------------------------------------------------------------------------
# Live parity with tmux

PY = sys.executable
NUMBERED = "\n".join(f"line {i}: " + "=" * (i % 37) + " 日本語" * (i % 3) for i in range(1, 120))
PARITY_PROGRAMS = {
    "scrolling-wide-text": (
        ["bash", "-c", "for i in $(seq 1 60); do printf '%d \\e[31mred\\e[0m %s|\\n' $i "
         "\"$(printf '日本%.0s' $(seq 1 $((i % 45))))\"; done; echo END; exec sleep 60"],
        "END"),
    "less-alternate-screen": (["less", "-N", "-Psviewing %f", "numbered.txt"],
                              "viewing numbered.txt"),
    # Without its terminal queries: vim redraws its message line when the answers arrive,
    # and whether that blanks the ruler depends on their timing (tmux leaves some unanswered).
    "vim": (["vim", "--clean", "-n", "--cmd", "set t_RV= t_u7= t_RF= t_RB= t_RC= t_RS=",
             "numbered.txt"], "numbered.txt"),
    "python-cursor-moves": (
        [PY, "-c", "import sys,time\n"
         "w=sys.stdout.write\n"
         "w('\\x1b[2J\\x1b[5;10Hbox\\x1b[1;1Htop\\x1b[10;3H\\x1b[1;33mA\\x1b[0m')\n"
         "w('\\x1b[?1049hALT\\x1b[?1049l\\x1b[12;1H' + 'wrap-' * 30 + '\\n\\u26a0\\ufe0f Do you"
         " want to proceed?\\n' + '\\U0001f468\\u200d\\U0001f469\\u200d\\U0001f467 family\\nEND')\n"
         "sys.stdout.flush(); time.sleep(60)\n"],
        "END"),
}


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[list[str]]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    conf = tmp_path / "tmux.conf"
    conf.write_text("set -g status off\nset -g default-terminal xterm-256color\n")
    # One private tmux server per test process: parallel workers share tmp_path names.
    command = ["tmux", "-L", f"cmux-parity-{os.getpid()}-{tmp_path.name}", "-f", str(conf)]
    try:
        yield command
    finally:
        subprocess.run([*command, "kill-server"], check=False, capture_output=True)


def _normalise(text: str) -> str:
    lines = [line.rstrip(" ") for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return "".join(line + "\n" for line in lines)


def _stable(read: Any, marker: str) -> str:
    """The screen once it shows ``marker`` and five reads 100 ms apart agree (a program a
    loaded machine pauses mid-draw can leave a screen unchanged for a moment)."""
    seen: list[str] = []

    def settled() -> bool:
        seen.append(_normalise(read()))
        return marker in seen[-1] and len(seen) >= 5 and len(set(seen[-5:])) == 1

    wait_until(settled, timeout=30, interval=0.1, message=f"a stable screen showing {marker!r}")
    return seen[-1]


@pytest.mark.parametrize("program", list(PARITY_PROGRAMS))
def test_live_screen_matches_tmux(program: str, api: Api, tmux: list[str],
                                  tmp_path: Path) -> None:
    argv, marker = PARITY_PROGRAMS[program]
    if shutil.which(argv[0]) is None:
        pytest.skip(f"{argv[0]} is not installed")
    work = tmp_path / "work"
    work.mkdir()
    (work / "numbered.txt").write_text(NUMBERED + "\n")
    env = {"TERM": "xterm-256color", "LANG": "C.UTF-8", "LESSHISTFILE": "-", "LESS": ""}
    api("server.set_area", {"width": 90, "height": 50})
    pane = api("pane.split", {"command": argv, "cwd": str(work), "env": env,
                              "direction": "down"})["pane"]
    cols, rows = pane["columns"], pane["rows"]
    exports = " ".join(f"{k}='{v}'" for k, v in env.items())
    quoted = " ".join("'" + a.replace("'", "'\\''") + "'" for a in argv)
    subprocess.run([*tmux, "new-session", "-d", "-x", str(cols), "-y", str(rows), "-c",
                    str(work), f"env {exports} {quoted}"], check=True)
    ours = _stable(lambda: api.read(pane["pane_id"]), marker)
    theirs = _stable(lambda: subprocess.run([*tmux, "capture-pane", "-p"], check=True,
                                            capture_output=True, text=True).stdout, marker)
    assert ours == theirs

