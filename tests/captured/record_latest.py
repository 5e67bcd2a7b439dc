#!/usr/bin/env python3
"""Check detection against the newest release of each recorded agent CLI (``make
record-latest``; not part of the test suite: it installs from the npm registry).

Usage: ``record_latest.py [--agents claude,codex,gemini] [--keep DIR] [NAME ...]``

For each agent: ``npm view PACKAGE version`` names the registry's newest release, which
is installed into a temporary prefix (``npm install --prefix DIR PACKAGE@VERSION``). The
agent's sessions of its newest recorded version (``sessions.toml``; the recording's
``agent.version``, or :data:`UNTAGGED` for sessions recorded before versions were noted)
are then played again by ``record.py`` against ``fake_api.py``, with the new release first
on PATH. Each new screen is read as the server reads it and classified with the bundled
manifest; one line per session says whether its state is the recorded one, ``CHANGED``
(the state a new release's screen reads as), or ``FAILED`` (the flow itself changed: a
step waited in vain). Exits 1 when any case changed or failed. ``--keep DIR`` keeps the
new bytes as ``DIR/<name>.input`` for a look, or for recording them as cases.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

import record  # noqa: E402

from cmux_core.detect.engine import ScreenInput, classify  # noqa: E402
from cmux_core.detect.manifest import Manifest, bundled_manifests_dir, load_manifest  # noqa: E402
from cmux_core.terminal.backends import make_emulator  # noqa: E402
from cmux_core.terminal.emulator import read_text  # noqa: E402

PACKAGES = {"claude": "@anthropic-ai/claude-code", "codex": "@openai/codex",
            "gemini": "@google/gemini-cli"}
UNTAGGED = {"claude": "2.1.197", "codex": "0.171.0", "gemini": "0.61.0"}
"""The version of an agent's sessions that name none (recorded before versions were noted)."""


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def newest_sessions(sessions: dict[str, dict[str, Any]], agent: str) -> list[dict[str, Any]]:
    """The sessions of ``agent`` recorded with its newest recorded version."""
    mine = [s for s in sessions.values() if s.get("agent", {}).get("name") == agent]
    versions = {s["agent"].get("version", UNTAGGED[agent]) for s in mine}
    if not versions:
        return []
    newest = max(versions, key=version_key)
    return [s for s in mine if s["agent"].get("version", UNTAGGED[agent]) == newest]


def install(agent: str, prefix: Path) -> str:
    """Install the registry's newest release of ``agent`` under ``prefix``; its version."""
    package = PACKAGES[agent]
    version = subprocess.run(["npm", "view", package, "version"], check=True,
                             capture_output=True, text=True).stdout.strip()
    subprocess.run(["npm", "install", "--silent", "--prefix", str(prefix),
                    f"{package}@{version}"], check=True)
    return version


def classified(manifest: Manifest, session: dict[str, Any], data: bytes) -> str:
    """The state the server would read on the last screen of ``data``."""
    emulator = make_emulator("pyte", session.get("cols", 80), session.get("rows", 24))
    emulator.feed(data)
    screen = read_text(emulator, "detection", None, "text")[0]
    result = classify(manifest, ScreenInput(screen, emulator.title or "",
                                            emulator.progress or ""))
    return "menu" if result.skip_state_update else f"{result.state} ({result.matched_rule})"


def check(agent: str, sessions: list[dict[str, Any]], keep: Path | None) -> int:
    """Play ``sessions`` with the newest ``agent``; print one line each; the problems."""
    manifest = load_manifest(bundled_manifests_dir() / f"{agent}.toml")
    with tempfile.TemporaryDirectory(prefix=f"cmux-latest-{agent}-") as tmp:
        version = install(agent, Path(tmp))
        recorded = sessions[0]["agent"].get("version", UNTAGGED[agent])
        print(f"{agent}: latest {version}, recorded {recorded}, {len(sessions)} sessions")
        os.environ["PATH"] = f"{tmp}/node_modules/.bin{os.pathsep}{os.environ['PATH']}"
        problems = 0
        for session in sessions:
            name, wanted = session["name"], session["agent"]["state"]
            try:
                data = record.record(session)
            except record.RecordingError as exc:
                problems += 1
                print(f"  FAILED  {name}: {str(exc).splitlines()[0]}")
                continue
            if keep is not None:
                (keep / f"{Path(name).name}.input").write_bytes(data)
            got = classified(manifest, session, data)
            if got.split(" ")[0] == wanted:
                print(f"  same    {name}: {wanted}")
            else:
                problems += 1
                print(f"  CHANGED {name}: recorded {wanted}, now {got}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="only these sessions")
    parser.add_argument("--agents", default=",".join(PACKAGES))
    parser.add_argument("--keep", type=Path, help="keep each new recording's bytes here")
    args = parser.parse_args(argv)
    sessions = record.load_sessions(HERE / "sessions.toml")
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    problems = 0
    for agent in args.agents.split(","):
        chosen = [s for s in newest_sessions(sessions, agent)
                  if not args.names or s["name"] in args.names]
        if chosen:
            problems += check(agent, chosen, args.keep)
    print(f"{problems} case(s) changed or failed" if problems else "no case changed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
