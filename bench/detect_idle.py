"""What agent detection costs on an idle server: server CPU with many quiet panes.

Starts a ``cmux serve``, opens ``--panes`` tabs running ``cat`` (quiet, never
printing), lets them settle, then measures the server process's own CPU time
over ``--seconds``. With ``--agents`` every pane is an identified agent (``cat``
started under ``CMUX_AGENT=benchbot`` with a one-rule manifest), so the periodic
re-probe of identified agents is included too.

Run: ``python bench/detect_idle.py [--panes 100] [--seconds 10] [--agents] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cmux_core.testing import start_server

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
MANIFEST = """id = "benchbot"

[[rules]]
id = "prompt"
state = "idle"
visible_idle = true
contains = ["ready"]
"""


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of the process itself, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def measure(panes: int, seconds: float, agents: bool, settle: float) -> dict[str, Any]:
    manifests = Path(tempfile.mkdtemp(prefix="cmux-bench-m-"))
    (manifests / "benchbot.toml").write_text(MANIFEST)
    server = start_server(["--manifests-dir", str(manifests)])
    try:
        with server.client() as client:
            argv = ["env", "CMUX_AGENT=benchbot", "cat"] if agents else ["cat"]
            ids = [client.call("tab.create", {"command": argv})["root_pane"]["pane_id"]
                   for _ in range(panes)]
            if agents:
                deadline = time.monotonic() + 60
                while True:
                    found = sum(1 for p in client.call("pane.list")["panes"]
                                if p.get("agent") == "benchbot")
                    if found >= panes:
                        break
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"only {found} of {panes} panes were identified")
                    time.sleep(0.2)
            # Past the startup grace and the first re-probes, so the steady state is measured.
            time.sleep(settle)
            pid = server.process.pid
            start_cpu, start = cpu_seconds(pid), time.monotonic()
            time.sleep(seconds)
            used, wall = cpu_seconds(pid) - start_cpu, time.monotonic() - start
            assert len(ids) == panes
        return {"panes": panes, "agents": agents, "seconds": round(wall, 2),
                "cpu_seconds": round(used, 3),
                "cpu_percent_of_one_core": round(100 * used / wall, 3)}
    finally:
        server.stop()
        shutil.rmtree(server.home, ignore_errors=True)
        shutil.rmtree(manifests, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--panes", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--settle", type=float, default=6.0)
    parser.add_argument("--agents", action="store_true",
                        help="make every pane an identified agent")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = measure(args.panes, args.seconds, args.agents, args.settle)
    if args.json:
        print(json.dumps(result))
    else:
        kind = "agent" if args.agents else "idle"
        print(f"{result['panes']} {kind} panes: {result['cpu_seconds']} s CPU in "
              f"{result['seconds']} s = {result['cpu_percent_of_one_core']}% of one core")
    return 0


if __name__ == "__main__":
    sys.exit(main())
