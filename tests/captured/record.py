#!/usr/bin/env python3
"""Record golden screen sessions of real programs for ``tests/test_captured.py``.

Usage::

    record.py [--spec FILE] [--no-tmux] [NAME ...]    run and record sessions (all if no NAME)
    record.py --rerender [--spec FILE] [NAME ...]     re-render existing .input files only

Sessions are declared in ``sessions.toml`` next to this file (``[[session]]``
tables, keys below). Recording a session writes, relative to this directory:

``<name>.input``
    every byte the program wrote to its PTY, in order, unchanged;
``<name>.expected``
    the ``visible`` read (``cmux_core.terminal.emulator.read_text``) after replaying the
    bytes into the backend named by ``expected_from`` (default ``pyte``), or
    tmux's ``capture-pane -p`` rendering when ``expected_from = "tmux"``;
``<name>.meta.toml``
    how it was recorded, what the test checks, the final OSC title and
    progress (``[osc]``), the agent state the screen shows (agent screens
    only), how both backends and tmux rendered the same bytes, and the
    differences that were accepted and why.

Session keys: ``name`` (may contain ``/``), ``argv``, ``cols``/``rows``
(80x24), ``env`` (added to a minimal environment: PATH, HOME, LANG=C.UTF-8,
TERM=xterm-256color), ``setup`` (a ``sh -c`` script run first in the work
directory), ``fake_api`` (a ``fake_api.py`` scenario started first on a free
port), ``steps``, ``settle`` (seconds of silence that end the session,
default 0.7), ``like`` (the name of an earlier session whose keys are the
defaults, except ``agent`` and ``known_bugs``), ``expected_from``,
``check``, ``tmux_note``, ``known_bugs`` (``{backend = "what differs"}``:
the test expects that backend to fail) and ``agent`` (``{name, state,
note}``, state one of idle, working, blocked, unknown, menu). Every string
in ``argv``, ``env``, ``setup`` and ``send`` may use ``{home}``, ``{work}``
and ``{port}``.

Steps, run in order while output keeps being read and answered:
``{wait = "text", timeout = 20}`` waits until the live screen shows text;
``{sleep = 0.5}`` pauses; ``{send = "..."}`` writes keys to the program;
``{settle = 0.5}`` waits until the program has been silent that long.

The program runs in ``/tmp/cmux-capture/work`` with ``HOME=/tmp/cmux-capture/home``,
both emptied first, so recorded paths do not depend on the machine. Each session holds
an exclusive lock (``/tmp/cmux-capture.lock``) while it runs, so several recorders on one
machine take turns instead of emptying each other's home. Terminal
queries (DSR, DA, colour and size queries) are answered by a live emulator, as
a pane does.
"""

from __future__ import annotations

import argparse
import datetime
import difflib
import errno
import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from cmux_core.terminal.backends import make_emulator  # noqa: E402
from cmux_core.terminal.emulator import Emulator, read_text  # noqa: E402

ROOT = Path("/tmp/cmux-capture")
LOCK = Path("/tmp/cmux-capture.lock")
HOME = ROOT / "home"
WORK = ROOT / "work"
STATES = ("idle", "working", "blocked", "unknown", "menu")
SIZE_WARN = 200_000
SETTLE_MAX = 15.0
_UNPRINTABLE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")


class RecordingError(Exception):
    """A session could not be recorded as declared (a wait timed out, a program is missing)."""


def load_sessions(spec: Path) -> dict[str, dict[str, Any]]:
    with spec.open("rb") as f:
        sessions = tomllib.load(f)["session"]
    by_name: dict[str, dict[str, Any]] = {}
    for declared in sessions:
        if declared["name"] in by_name:
            raise RecordingError(f"duplicate session {declared['name']!r}")
        base = by_name[declared["like"]] if "like" in declared else {}
        session = {k: v for k, v in base.items() if k not in ("agent", "known_bugs")}
        session.update({k: v for k, v in declared.items() if k != "like"})
        agent = session.get("agent")
        if agent and agent.get("state") not in STATES:
            raise RecordingError(f"{session['name']}: agent.state must be one of {STATES}")
        by_name[session["name"]] = session
    return by_name


# --------------------------------------------------------------------------------------------
# Running a program


class Live:
    """One program on a PTY, its output kept and mirrored into an emulator that answers queries."""

    def __init__(self, argv: list[str], env: dict[str, str], cols: int, rows: int) -> None:
        self.output = bytearray()
        self.screen: Emulator = make_emulator("auto", cols, rows)
        self.exited = False
        self.last_output = time.monotonic()
        pid, fd = pty.fork()
        if pid == 0:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            os.chdir(WORK)
            try:
                os.execvpe(argv[0], argv, env)
            except OSError as exc:
                os.write(2, f"exec {argv[0]}: {exc}\r\n".encode())
                os._exit(127)
        self.pid, self.fd = pid, fd

    def text(self) -> str:
        return read_text(self.screen, "visible", None, "text")[0]

    def pump(self, seconds: float, until: Callable[[], bool] | None = None) -> bool:
        """Read and answer output for up to ``seconds``; True as soon as ``until`` holds."""
        deadline = time.monotonic() + seconds
        while True:
            if until is not None and until():
                return True
            left = deadline - time.monotonic()
            if left <= 0 or self.exited:
                return False
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.05))
            if ready:
                self._read()

    def _read(self) -> None:
        try:
            data = os.read(self.fd, 65536)
        except OSError as exc:
            if exc.errno != errno.EIO:
                raise
            data = b""
        if not data:
            self.exited = True
            return
        self.output += data
        self.last_output = time.monotonic()
        self.screen.feed(data)
        replies = self.screen.take_replies()
        if replies:
            os.write(self.fd, replies)

    def settle(self, quiet: float) -> None:
        """Return once no output arrived for ``quiet`` seconds (or after ``SETTLE_MAX``)."""
        self.pump(SETTLE_MAX, lambda: time.monotonic() - self.last_output >= quiet)

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def stop(self) -> None:
        for sig in (signal.SIGHUP, signal.SIGKILL):
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                if os.waitpid(self.pid, os.WNOHANG)[0]:
                    os.close(self.fd)
                    return
                time.sleep(0.02)
        os.waitpid(self.pid, 0)
        os.close(self.fd)


def _expand(value: str, port: int | None) -> str:
    return (value.replace("{home}", str(HOME)).replace("{work}", str(WORK))
            .replace("{port}", str(port or 0)))


def _start_fake_api(scenario: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, str(HERE / "fake_api.py"), scenario],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        proc.kill()
        raise RecordingError(f"fake_api.py {scenario} did not start: {line!r}")
    return proc, int(line.split()[1])


def record(session: dict[str, Any]) -> bytes:
    """Run ``session`` and return everything its program wrote; waits first for any other
    recorder's session to end (:data:`LOCK`)."""
    with LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _record(session)


def _record(session: dict[str, Any]) -> bytes:
    for path in (HOME, WORK):
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
    api: subprocess.Popen[str] | None = None
    port: int | None = None
    if "fake_api" in session:
        api, port = _start_fake_api(session["fake_api"])
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(HOME),
           "LANG": "C.UTF-8", "TERM": "xterm-256color", "USER": "user", "SHELL": "/bin/bash"}
    env.update({k: _expand(v, port) for k, v in session.get("env", {}).items()})
    try:
        if "setup" in session:
            subprocess.run(["sh", "-c", _expand(session["setup"], port)], cwd=WORK, env=env,
                           check=True)
        live = Live([_expand(a, port) for a in session["argv"]], env,
                    session.get("cols", 80), session.get("rows", 24))
        try:
            for step in session.get("steps", []):
                _run_step(live, step, port)
            live.settle(session.get("settle", 0.7))
        finally:
            live.stop()
    finally:
        if api is not None:
            api.terminate()
            api.wait(5)
    return bytes(live.output)


def _run_step(live: Live, step: dict[str, Any], port: int | None) -> None:
    if "wait" in step:
        needle = _expand(step["wait"], port)
        if not live.pump(step.get("timeout", 20), lambda: needle in live.text()):
            raise RecordingError(f"timed out waiting for {needle!r}; screen:\n{live.text()}")
    elif "sleep" in step:
        live.pump(step["sleep"])
    elif "send" in step:
        live.send(_expand(step["send"], port))
    elif "settle" in step:
        live.settle(step["settle"])
    else:
        raise RecordingError(f"unknown step {step!r}")


# --------------------------------------------------------------------------------------------
# Rendering


def render(data: bytes, backend: str, cols: int, rows: int) -> tuple[str, dict[str, str]]:
    """The visible text after replaying ``data``, and the final OSC title and progress."""
    emulator = make_emulator(backend, cols, rows)
    emulator.feed(data)
    osc = {k: v for k, v in (("title", emulator.title), ("progress", emulator.progress))
           if v is not None}
    return read_text(emulator, "visible", None, "text")[0], osc


def normalise(text: str) -> str:
    """Trailing spaces and blank rows dropped, one final newline: the shape of a visible read."""
    lines = [line.rstrip(" ") for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return "".join(line + "\n" for line in lines)


def render_tmux(data: bytes, cols: int, rows: int) -> str:
    """tmux's ``capture-pane -p`` of a ``cols`` x ``rows`` pane after ``cat``-ing ``data`` raw."""
    with tempfile.TemporaryDirectory(prefix="cmux-tmux-") as tmp:
        source = Path(tmp) / "input"
        source.write_bytes(data)
        done = Path(tmp) / "done"
        conf = Path(tmp) / "tmux.conf"
        conf.write_text("set -g status off\nset -g default-terminal xterm-256color\n")
        tmux = ["tmux", "-L", f"cmux-capture-{Path(tmp).name}", "-f", str(conf)]
        script = f"stty raw -echo -opost; cat {source}; touch {done}; exec sleep 600"
        subprocess.run([*tmux, "new-session", "-d", "-x", str(cols), "-y", str(rows), script],
                       check=True)
        try:
            size = subprocess.run([*tmux, "display", "-p", "#{pane_width}x#{pane_height}"],
                                  check=True, capture_output=True, text=True).stdout.strip()
            if size != f"{cols}x{rows}":
                raise RecordingError(f"tmux pane is {size}, wanted {cols}x{rows}")
            return _stable_capture(tmux, done)
        finally:
            subprocess.run([*tmux, "kill-server"], check=False, capture_output=True)


def _stable_capture(tmux: list[str], done: Path) -> str:
    """Capture after ``cat`` finished and three captures 50 ms apart agree."""
    deadline = time.monotonic() + 10
    while not done.exists():
        if time.monotonic() > deadline:
            raise RecordingError("tmux replay did not finish")
        time.sleep(0.02)
    captures: list[str] = []
    while len(captures) < 3 or len(set(captures[-3:])) != 1:
        time.sleep(0.05)
        captures.append(subprocess.run([*tmux, "capture-pane", "-p"], check=True,
                                       capture_output=True, text=True).stdout)
    return normalise(captures[-1])


def diff(a: str, b: str, a_name: str, b_name: str) -> str:
    return "".join(difflib.unified_diff(a.splitlines(True), b.splitlines(True), a_name, b_name,
                                        n=0))


# --------------------------------------------------------------------------------------------
# Writing


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        if "\n" in value and "'''" not in value and not _UNPRINTABLE.search(value):
            return "'''\n" + value + "'''"
        # A JSON string without ASCII escaping is a valid TOML basic string.
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def _key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def toml_document(tables: dict[str, dict[str, Any]]) -> str:
    """Top-level keys from the ``""`` table, then one ``[table]`` per other key."""
    out = ["# Written by record.py from sessions.toml; change the session there and re-record."]
    for table, values in tables.items():
        if not values:
            continue
        if table:
            out.append(f"\n[{table}]")
        out.extend(f"{_key(k)} = {toml_value(v)}" for k, v in values.items())
    return "\n".join(out) + "\n"


def write_outputs(session: dict[str, Any], data: bytes, recorded: str | None, tmux: bool) -> str:
    """Write the .expected and .meta.toml of ``session`` from ``data``; return a summary."""
    name = session["name"]
    cols, rows = session.get("cols", 80), session.get("rows", 24)
    meta_path = HERE / f"{name}.meta.toml"
    if recorded is None and meta_path.exists():
        with meta_path.open("rb") as f:
            recorded = tomllib.load(f).get("recorded")
    renders: dict[str, str] = {}
    oscs: dict[str, dict[str, str]] = {}
    renders["pyte"], oscs["pyte"] = render(data, "pyte", cols, rows)
    try:
        renders["ghostty"], oscs["ghostty"] = render(data, "ghostty", cols, rows)
    except Exception as exc:  # the native backend is optional
        print(f"  ghostty unavailable: {exc}", file=sys.stderr)
    if tmux:
        renders["tmux"] = render_tmux(data, cols, rows)
    source = session.get("expected_from", "pyte")
    expected = renders[source]
    (HERE / f"{name}.expected").write_text(expected)
    differences = {k: diff(expected, v, "expected", k) for k, v in renders.items() if k != source}
    known = session.get("known_bugs", {})
    top: dict[str, Any] = {
        "name": name, "argv": session["argv"], "cols": cols, "rows": rows,
        "recorded": recorded or "", "bytes": len(data), "expected_from": source,
        "check": session.get("check", "visible text after replaying all bytes, exact"),
    }
    if session.get("env"):
        top["env"] = session["env"]
    if session.get("fake_api"):
        top["fake_api"] = session["fake_api"]
    tables: dict[str, dict[str, Any]] = {"": top}
    tables["osc"] = oscs["pyte"]
    if oscs.get("ghostty", oscs["pyte"]) != oscs["pyte"]:
        print(f"  OSC state differs: pyte {oscs['pyte']}, ghostty {oscs['ghostty']}")
    if session.get("agent"):
        tables["agent"] = dict(session["agent"])
    tables["known_bugs"] = dict(known)
    tables["renderings"] = {
        f"{k}_matches": not d for k, d in differences.items()
    } | {f"{k}_diff": d for k, d in differences.items() if d}
    if "tmux_note" in session:
        tables["renderings"]["tmux_note"] = session["tmux_note"]
    meta_path.write_text(toml_document(tables))
    summary = [f"{name}: {len(data)} bytes, expected from {source}"]
    if len(data) > SIZE_WARN:
        summary.append(f"  WARNING: larger than {SIZE_WARN} bytes")
    for backend, d in differences.items():
        state = "matches" if not d else "DIFFERS"
        if d and backend in known:
            state += " (known bug recorded)"
        elif d and backend == "tmux" and "tmux_note" in session:
            state += " (accepted: tmux_note)"
        summary.append(f"  {backend}: {state}")
        if d:
            summary.append("    " + d.replace("\n", "\n    ").rstrip())
    return "\n".join(summary)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="sessions to record (default: all)")
    parser.add_argument("--spec", type=Path, default=HERE / "sessions.toml")
    parser.add_argument("--no-tmux", action="store_true", help="skip the tmux comparison")
    parser.add_argument("--rerender", action="store_true",
                        help="keep existing .input files; rewrite .expected and .meta.toml")
    parser.add_argument("--show", action="store_true", help="print each expected screen")
    args = parser.parse_args(argv)
    sessions = load_sessions(args.spec)
    names = args.names or list(sessions)
    failed = 0
    for name in names:
        session = sessions[name]
        input_path = HERE / f"{name}.input"
        try:
            if args.rerender:
                data, recorded = input_path.read_bytes(), None
            else:
                data = record(session)
                recorded = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                input_path.parent.mkdir(parents=True, exist_ok=True)
                input_path.write_bytes(data)
            print(write_outputs(session, data, recorded, not args.no_tmux))
            if args.show:
                print((HERE / f"{name}.expected").read_text())
        except RecordingError as exc:
            failed += 1
            print(f"{name}: FAILED: {exc}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
