"""``python -m bench.ui_redraw``: what ``cmux ui`` pays to redraw with 50 agents changing.

A real server runs 50 panes, each reported as an agent. The ui application runs in this
process on a 160x50 terminal whose output goes to ``/dev/null``; a second process reports
a state change for a random agent every 20 ms (50 changes a second) while one pane
prints a line every 20 ms, so both the sidebar and the pane area keep changing. Measured
over the window: how many screens the ui rendered, the time of each render (p50, p99,
max), the ui process's CPU share, and the time from a report to the end of the first
render after it (p50, p99).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import time
from typing import Any

from prompt_toolkit.application import create_app_session
from prompt_toolkit.data_structures import Size
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output.vt100 import Vt100_Output

from cmux_core.cli.ui import Ui
from cmux_core.client import Client
from cmux_core.testing import start_server

from .context import ms, percentile

AGENTS = 50
STATES = ("working", "idle", "blocked")

REPORTER = """
import random, sys, time
from cmux_core.client import Client
path, seconds, panes = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
states = ("working", "idle", "blocked")
with Client(path) as c:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pane = random.choice(panes)
        print(time.monotonic(), flush=True)
        c.call("pane.report_agent", {"pane_id": pane, "source": "bench:claude",
                                     "agent": "claude", "state": random.choice(states)})
        time.sleep(0.02)
"""


def setup(path: str) -> list[str]:
    panes: list[str] = []
    with Client(path) as c:
        panes.append(str(c.call("pane.current")["pane"]["pane_id"]))
        for _ in range(AGENTS - 1):
            panes.append(str(c.call("workspace.create", {})["root_pane"]["pane_id"]))
        for pane in panes:
            c.call("pane.report_agent", {"pane_id": pane, "source": "bench:claude",
                                         "agent": "claude",
                                         "state": random.choice(STATES)})
        c.call("pane.send_text", {"pane_id": panes[0], "text":
                                  "while :; do date +%s.%N; sleep 0.02; done\n"})
    return panes


async def measure(path: str, panes: list[str], seconds: float) -> dict[str, Any]:
    renders: list[tuple[float, float]] = []  # (end, duration)
    with create_pipe_input() as pipe, open(os.devnull, "w") as null:
        output = Vt100_Output(null, lambda: Size(rows=50, columns=160), term="xterm-256color",
                              enable_cpr=False)
        with create_app_session(input=pipe, output=output):
            ui = Ui(path, "sidebar", None)
            render = ui.app.renderer.render

            def timed(*args: Any, **kwargs: Any) -> None:
                began = time.perf_counter()
                render(*args, **kwargs)
                renders.append((time.monotonic(), time.perf_counter() - began))

            ui.app.renderer.render = timed  # type: ignore[method-assign]
            task = asyncio.create_task(ui.run())
            await asyncio.sleep(2.0)  # first board, first frames
            renders.clear()
            cpu_before = time.process_time()
            reporter = await asyncio.create_subprocess_exec(
                sys.executable, "-c", REPORTER, path, str(seconds), *panes,
                stdout=subprocess.PIPE)
            out, _ = await reporter.communicate()
            cpu = time.process_time() - cpu_before
            ui.app.exit(result=0)
            await task
    sent = [float(line) for line in out.split()]
    ends = [end for end, _ in renders]
    latencies = []
    for at in sent:
        after = next((end for end in ends if end >= at), None)
        if after is not None:
            latencies.append(after - at)
    durations = [d for _, d in renders]
    return {"renders": len(renders), "seconds": seconds, "reports": len(sent),
            "render_p50_ms": ms(percentile(durations, 50)),
            "render_p99_ms": ms(percentile(durations, 99)),
            "render_max_ms": ms(max(durations)),
            "cpu_share": cpu / seconds,
            "report_to_render_p50_ms": ms(percentile(latencies, 50)),
            "report_to_render_p99_ms": ms(percentile(latencies, 99))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ui_redraw")
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args(argv)
    server = start_server(size="120x40")
    try:
        panes = setup(str(server.socket_path))
        result = asyncio.run(measure(str(server.socket_path), panes, args.seconds))
    finally:
        server.stop()
    print(f"{AGENTS} agents, {result['reports']} reports in {result['seconds']:.0f} s: "
          f"{result['renders']} renders, render p50 {result['render_p50_ms']:.1f} ms, "
          f"p99 {result['render_p99_ms']:.1f} ms, max {result['render_max_ms']:.1f} ms; "
          f"ui CPU {100 * result['cpu_share']:.0f} %; report to screen p50 "
          f"{result['report_to_render_p50_ms']:.1f} ms, p99 "
          f"{result['report_to_render_p99_ms']:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
