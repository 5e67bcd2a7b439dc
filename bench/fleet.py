"""The fleet over real OpenSSH: ``agent.list`` merged from 10 machines and then from 50, the
latency a warm master adds to a call (over the forwarded socket, and through the bridge as
where the sshd refuses forwarding), a new ssh connection per call for comparison, how fast a
cut link is seen and comes back, and the wake-ups of an idle fleet.

The machines are local ``sshd``s (the tests' harness, ``tests/fleet_sshd.py``) with a home
and a remote server each, all on this machine, so the figures are the cost of ssh and the
relays, not of a network. cmux only: tmux has no fleet.

Run as the ``fleet`` case: ``make bench BENCH_ARGS="--only fleet"``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
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
GROWN = 50
IDLE_S = 10.0


def _timed(c: Client, method: str, params: dict[str, Any], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        c.call(method, params)
        times.append(time.perf_counter() - began)
    return times


def _state(c: Client, name: str) -> str:
    return str(c.call("machine.status", {"machine": name})["machine"]["state"])


def _add(c: Client, ssh: Sshd, names: list[str], panes: int) -> None:
    """Add machines ``names`` behind ``ssh``, each with ``panes`` agent panes."""
    for name in names:
        c.call("machine.add", {"machine": name, "destination": "127.0.0.1",
                               "ssh_options": ssh.options(ssh.home(name))})
    for name in names:
        wait_until(lambda n=name: _state(c, n) == "connected", 300, 0.05)
        for i in range(panes):
            pane = f"{name}/w1:p1" if i == 0 else c.call(
                "pane.split", {"pane_id": f"{name}/w1:p1", "command": ["cat"]}
            )["pane"]["pane_id"]
            c.call("pane.report_agent", {"pane_id": pane, "source": "bench",
                                         "agent": "claude", "state": "idle"})


def _switches(pids: list[int]) -> int:
    """Context switches so far of every thread of ``pids`` (each one a wake-up)."""
    total = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                text = (task / "status").read_text()
            except OSError:
                continue
            for line in text.splitlines():
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    total += int(line.split()[1])
    return total


def _idle_wakeups(local: ServerProcess, c: Client, names: list[str], seconds: float
                  ) -> tuple[float, float]:
    """Wake-ups per second of the local server and of all the masters, the fleet idle."""
    masters = [int(c.call("machine.status", {"machine": n})["machine"]["master_pid"])
               for n in names] if names else []
    time.sleep(1.0)
    before = (_switches([local.process.pid]), _switches(masters))
    time.sleep(seconds)
    after = (_switches([local.process.pid]), _switches(masters))
    return (after[0] - before[0]) / seconds, (after[1] - before[1]) / seconds


def _new_connection_per_call(ssh: Sshd, runs: int) -> list[float]:
    """A new ssh connection running ``true``, per call: the least a call pays when each one
    opens its own connection (no remote command of any weight)."""
    argv = ["ssh", *ssh.ssh_args(), "-o", "ControlPath=none", "127.0.0.1", "true"]
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, capture_output=True)
        times.append(time.perf_counter() - began)
    return times


def measure(panes: int, runs: int, grown: int, idle_s: float) -> dict[str, Any]:
    ssh = start_sshd()
    strict = start_sshd(config="AllowStreamLocalForwarding no\n")
    local = start_server(size="200x100")
    try:
        names = [f"b{i}" for i in range(1, MACHINES + 1)]
        with Client(local.socket_path, timeout=120) as c:
            alone = _idle_wakeups(local, c, [], idle_s)[0]
            _add(c, ssh, names, panes)
            _add(c, strict, ["bridged"], 1)
            transports = {c.call("machine.status", {"machine": n})["machine"]["transport"]
                          for n in names}
            merged = _timed(c, "agent.list", {"machines": names}, runs)
            agents = len(c.call("agent.list", {"machines": names})["agents"])
            here = _timed(c, "pane.get", {"pane_id": "w1:p1"}, runs * 5)
            there = _timed(c, "pane.get", {"pane_id": f"{names[0]}/w1:p1"}, runs * 5)
            bridged = _timed(c, "pane.get", {"pane_id": "bridged/w1:p1"}, runs * 5)
            # A call that may hold its request gets a connection of its own.
            met = {"match": {"type": "regex", "value": "."}, "source": "recent",
                   "timeout_ms": 10000}
            held = _timed(c, "pane.wait_for_output", {"pane_id": f"{names[0]}/w1:p1", **met},
                          max(10, runs // 10))
            held_bridged = _timed(c, "pane.wait_for_output",
                                  {"pane_id": "bridged/w1:p1", **met}, max(10, runs // 10))
            fresh = _new_connection_per_call(ssh, max(5, runs // 10))
            wakeups = _idle_wakeups(local, c, names, idle_s)
            pid = c.call("machine.status", {"machine": names[1]})["machine"]["master_pid"]
            cut = time.perf_counter()
            os.kill(pid, signal.SIGKILL)
            wait_until(lambda: _state(c, names[1]) != "connected", 30, 0.001)
            seen = time.perf_counter()
            wait_until(lambda: _state(c, names[1]) == "connected", 60, 0.001)
            back = time.perf_counter()
            more = [f"b{i}" for i in range(MACHINES + 1, grown + 1)]
            _add(c, ssh, more, 1)
            merged_grown = _timed(c, "agent.list", {"machines": names + more}, runs)
        return {"merged": merged, "agents": agents, "here": here, "there": there,
                "bridged": bridged, "held": held, "held_bridged": held_bridged,
                "fresh": fresh, "wakeups": wakeups, "alone": alone,
                "transports": sorted(str(t) for t in transports),
                "merged_grown": merged_grown, "to_offline": seen - cut,
                "to_connected": back - seen}
    finally:
        local.stop()
        for server in (ssh, strict):
            server.stop()  # the remote servers, then sshd
            shutil.rmtree(server.root, ignore_errors=True)


def case_fleet(ctx: Context) -> list[Row]:
    quick = ctx.sizes == QUICK
    panes, runs, grown = (5, 50, 20) if quick else (20, 200, GROWN)
    t = measure(panes, runs, grown, IDLE_S / 2 if quick else IDLE_S)
    here = percentile(t["here"], 50)
    setting = (f"{MACHINES} machines x {panes} agent panes ({t['agents']} agents) behind one "
               f"local sshd, transport {'/'.join(t['transports'])}; tmux has no fleet")
    return [
        Row("fleet_agent_list_p50_ms", "fleet: agent.list of 10 machines, p50 (ms)",
            ms(percentile(t["merged"], 50)), None, "lower", setting),
        Row("fleet_agent_list_p99_ms", "fleet: agent.list of 10 machines, p99 (ms)",
            ms(percentile(t["merged"], 99)), None, "lower"),
        Row("fleet_agent_list_grown_p50_ms",
            f"fleet: agent.list of {grown} machines, p50 (ms)",
            ms(percentile(t["merged_grown"], 50)), None, "lower",
            f"{grown - MACHINES} more machines with 1 agent pane each"),
        Row("fleet_agent_list_grown_p99_ms",
            f"fleet: agent.list of {grown} machines, p99 (ms)",
            ms(percentile(t["merged_grown"], 99)), None, "lower"),
        Row("fleet_local_call_p50_ms", "fleet: a local call, p50 (ms)", ms(here), None,
            "lower", "pane.get of w1:p1"),
        Row("fleet_added_p50_ms", "fleet: a call through a warm master, added p50 (ms)",
            ms(percentile(t["there"], 50) - here), None, "lower",
            "pane.get of box/w1:p1 over the forwarded socket, against w1:p1"),
        Row("fleet_added_bridge_p50_ms",
            "fleet: the same through the bridge (no forwarding), added p50 (ms)",
            ms(percentile(t["bridged"], 50) - here), None, "lower",
            "an sshd with AllowStreamLocalForwarding no"),
        Row("fleet_held_p50_ms", "fleet: a waiting call on its own connection, p50 (ms)",
            ms(percentile(t["held"], 50)), None, "lower",
            "pane.wait_for_output already met, over the forwarded socket"),
        Row("fleet_held_bridge_p50_ms",
            "fleet: the same through the bridge (its own bridge process), p50 (ms)",
            ms(percentile(t["held_bridged"], 50)), None, "lower"),
        Row("fleet_new_connection_p50_ms",
            "fleet: a new ssh connection per call (ssh ... true), p50 (ms)",
            ms(percentile(t["fresh"], 50)), None, "lower", "the least such a call costs"),
        Row("fleet_idle_wakeups_alone_per_s",
            "fleet: idle wake-ups of the local server, no machine /s",
            round(t["alone"], 2), None, "lower", "the same server before any machine"),
        Row("fleet_idle_wakeups_local_per_s", "fleet: idle wake-ups of the local server /s",
            round(t["wakeups"][0], 2), None, "lower", f"{MACHINES} machines connected"),
        Row("fleet_idle_wakeups_masters_per_s", "fleet: idle wake-ups of all masters /s",
            round(t["wakeups"][1], 2), None, "lower"),
        Row("fleet_cut_to_offline_ms", "fleet: master killed until not connected (ms)",
            ms(t["to_offline"]), None, "lower"),
        Row("fleet_back_to_connected_ms", "fleet: then until connected again (ms)",
            ms(t["to_connected"]), None, "lower"),
    ]
