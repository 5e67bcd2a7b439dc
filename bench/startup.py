"""(m) start-up: the whole ``cmux`` process, as a script calling it in a loop sees it.

``cmux --help`` (parsing and printing, no server) and ``cmux ping`` (one request to a
running server) against ``tmux -V``, each the median wall time of alternating runs. A
script or an agent that calls the CLI once per step pays this every time.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .cmux import CmuxSide
from .context import Context, ms
from .report import Row
from .tmux import TMUX

RUNS = 9
"""Runs of each command; odd, so the median is one of them."""


def cmux_script() -> str:
    """The ``cmux`` script of this environment (what a user runs), else the module."""
    script = Path(sys.executable).with_name("cmux")
    return str(script) if script.is_file() else ""


def seconds(argv: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one run of ``argv`` to its exit; it must succeed."""
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def startup_times(socket: Path, runs: int) -> dict[str, list[float]]:
    """Wall seconds of ``runs`` alternating runs of each command."""
    cmux = [cmux_script()] if cmux_script() else [sys.executable, "-m", "cmux_core"]
    env = {**os.environ, "CMUX_SOCKET_PATH": str(socket)}
    commands = {"help": [*cmux, "--help"], "ping": [*cmux, "ping"], "tmux": [TMUX, "-V"]}
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():
            times[name].append(seconds(argv, env))
    return times


def case_startup(ctx: Context) -> list[Row]:
    with CmuxSide(ctx.emulator) as side:
        times = startup_times(side.server.socket_path, RUNS)
    tmux = statistics.median(times["tmux"])
    note = f"median of {RUNS} alternating runs; goal: help <= 100 ms, ping <= 150 ms"
    return [
        Row(f"startup_{name}", f"`cmux {label}` whole process (ms) vs `tmux -V`",
            ms(statistics.median(times[name])), ms(tmux), "lower", note,
            {"cmux_s": times[name], "tmux_s": times["tmux"]})
        for name, label in (("help", "--help"), ("ping", "ping"))
    ]
