"""The fleet over real OpenSSH: ``agent.list`` merged from 10 machines, the latency a warm
master adds to a call, and how fast a cut link is seen and comes back.

The machines are one local ``sshd`` (the tests' harness, ``tests/fleet_sshd.py``) with a home
and a remote server each, all on this machine, so the figures are the cost of ssh and the
bridge, not of a network. cmux only: tmux has no fleet.

Run as the ``fleet`` case: ``make bench BENCH_ARGS="--only fleet"``.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

from cmux_core.client import Client
from cmux_core.testing import ServerProcess, start_server, wait_until

from .context import QUICK, Context, ms, percentile
from .report import Row

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fleet_sshd import Sshd, start_sshd

MACHINES = 10


def _timed(c: Client, method: str, params: dict[str, Any], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        c.call(method, params)
        times.append(time.perf_counter() - began)
    return times


def _state(c: Client, name: str) -> str:
    return str(c.call("machine.status", {"machine": name})["machine"]["state"])


def _setup(ssh: Sshd, local: ServerProcess, panes: int) -> list[str]:
    names = [f"b{i}" for i in range(1, MACHINES + 1)]
    with Client(local.socket_path, timeout=120) as c:
        for name in names:
            c.call("machine.add", {"machine": name, "destination": "127.0.0.1",
                                   "ssh_options": ssh.options(ssh.home(name))})
        for name in names:
            wait_until(lambda n=name: _state(c, n) == "connected", 120, 0.05)
            for i in range(panes):
                pane = f"{name}/w1:p1" if i == 0 else c.call(
                    "pane.split", {"pane_id": f"{name}/w1:p1", "command": ["cat"]}
                )["pane"]["pane_id"]
                c.call("pane.report_agent", {"pane_id": pane, "source": "bench",
                                             "agent": "claude", "state": "idle"})
    return names


def measure(panes: int, runs: int) -> dict[str, Any]:
    ssh = start_sshd()
    local = start_server(size="200x100")
    try:
        names = _setup(ssh, local, panes)
        with Client(local.socket_path, timeout=60) as c:
            merged = _timed(c, "agent.list", {"machines": "all"}, runs)
            agents = len(c.call("agent.list", {"machines": "all"})["agents"])
            here = _timed(c, "pane.get", {"pane_id": "w1:p1"}, runs * 5)
            there = _timed(c, "pane.get", {"pane_id": f"{names[0]}/w1:p1"}, runs * 5)
            pid = c.call("machine.status", {"machine": names[1]})["machine"]["master_pid"]
            cut = time.perf_counter()
            os.kill(pid, signal.SIGKILL)
            wait_until(lambda: _state(c, names[1]) != "connected", 30, 0.001)
            seen = time.perf_counter()
            wait_until(lambda: _state(c, names[1]) == "connected", 60, 0.001)
            back = time.perf_counter()
        return {"merged": merged, "agents": agents, "here": here, "there": there,
                "to_offline": seen - cut, "to_connected": back - seen}
    finally:
        local.stop()
        ssh.stop()  # the remote servers, then sshd
        shutil.rmtree(ssh.root, ignore_errors=True)


def case_fleet(ctx: Context) -> list[Row]:
    panes, runs = (5, 50) if ctx.sizes == QUICK else (20, 200)
    t = measure(panes, runs)
    added = ms(percentile(t["there"], 50) - percentile(t["here"], 50))
    setting = (f"{MACHINES} machines x {panes} agent panes ({t['agents']} agents) behind one "
               "local sshd; tmux has no fleet")
    return [
        Row("fleet_agent_list_p50_ms", "fleet: agent.list of all machines, p50 (ms)",
            ms(percentile(t["merged"], 50)), None, "lower", setting),
        Row("fleet_agent_list_p99_ms", "fleet: agent.list of all machines, p99 (ms)",
            ms(percentile(t["merged"], 99)), None, "lower"),
        Row("fleet_added_p50_ms", "fleet: a call through a warm master, added p50 (ms)",
            added, None, "lower", "pane.get of box/w1:p1 against w1:p1"),
        Row("fleet_cut_to_offline_ms", "fleet: master killed until not connected (ms)",
            ms(t["to_offline"]), None, "lower"),
        Row("fleet_back_to_connected_ms", "fleet: then until connected again (ms)",
            ms(t["to_connected"]), None, "lower"),
    ]
