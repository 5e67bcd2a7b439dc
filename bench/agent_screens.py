"""Draw an agent's screens on request: the scale case's detection-latency probe.

Run as a pane's program: ``python agent_screens.py STAMPS``. It turns echo off, prints
``ready-agent``, then for every line read from the terminal (a state name: ``working``
or ``blocked``) clears the screen and its scrollback and prints that state's screen
from the bundled Claude Code manifest's fixture cases (``manifests/claude.cases.toml``),
appending ``<state> <time.monotonic()>`` to the file STAMPS just before the write, so
the reader can time detection from the moment the screen was printed.
"""

from __future__ import annotations

import os
import sys
import termios
import time
import tomllib
from pathlib import Path

CASES = Path(__file__).resolve().parents[1] / "manifests" / "claude.cases.toml"
CLEAR = "\x1b[H\x1b[2J\x1b[3J"


def screens(columns: int = 80, rows: int = 24) -> dict[str, str]:
    """The first fixture screen of each state that fits ``columns`` x ``rows``."""
    with CASES.open("rb") as f:
        cases = tomllib.load(f)["cases"]
    found: dict[str, str] = {}
    for case in cases:
        if "screen" not in case or case.get("title"):
            continue
        lines = case["screen"].strip("\n").split("\n")
        if (case["state"] not in found and len(lines) < rows
                and max(len(text) for text in lines) <= columns):
            found[case["state"]] = "\r\n".join(lines)
    return found


def main() -> None:
    stamps = Path(sys.argv[1])
    drawn = screens()
    attrs = termios.tcgetattr(0)
    attrs[3] &= ~termios.ECHO
    termios.tcsetattr(0, termios.TCSANOW, attrs)
    os.write(1, b"ready-agent\r\n")
    with stamps.open("a") as log:
        for request in sys.stdin:
            state = request.strip()
            if state not in drawn:
                continue
            log.write(f"{state} {time.monotonic()}\n")
            log.flush()
            os.write(1, (CLEAR + drawn[state]).encode())


if __name__ == "__main__":
    main()
