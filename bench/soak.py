"""``python -m bench.soak``: a real ``cmux serve`` under mixed load, watched from ``/proc``.

The load, all at once for ``--minutes`` (default 10):

* ``--panes`` (50) panes printing like agents (``agent_stream.py``: coloured lines and
  spinner redraws) at rates from 2 to 50 KB/s, every other one identified as Claude Code;
  each starts with a full scrollback's worth of lines, so scrollback stops growing early
  and what grows later is not history;
  two more panes (``agent_screens.py``) switch between a working and a blocked Claude Code
  screen every second, so agent states really change;
* ``--subscribers`` (20) event subscribers (pane, tab, layout, agent, plugin and manifest
  events plus an output match on one stream each); a quarter of them read 1 KiB every
  half second and are cut off by the server when their queue overflows, then come back;
* clients that send ``pane.wait_for_output``, ``agent.wait`` or ``events.wait`` and hang
  up after 0.05-2 s, answered or not, from 4 threads;
* pane churn: a split every half second, closing the oldest once 6 exist, and now and
  then a tab created and closed;
* a manifest rewritten in ``--manifests-dir`` every 3 s (every fifth time invalid) and a
  plugin rewritten in ``--plugins-dir`` every 5 s (every fourth time broken), so both
  hot-reload all along, and the plugin's method is called; the plugin is disabled and
  enabled again in turn every 7 s, and a second plugin file appears or goes every 11 s.

Watched: a dedicated connection pings every 10 ms (p50/p99); every 5 s the server's RSS,
open fds, threads and zombie children (those still unreaped 5 s later) from ``/proc``.
The run fails (exit 1, reasons printed) when the RSS grows more than 10 % between the end
of the warm-up and the end, when ping p99 after the warm-up passes 20 ms, when a ping
fails, or when the server dies. The figures go to stdout and ``bench/results/soak.json``.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import os
import random
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from cmux_core.config import Settings
from cmux_core.errors import CmuxError
from cmux_core.testing import ServerProcess, start_server

from .cmux import Connection, python_argv
from .lines import LineReader
from .proc import cpu_seconds, rss_bytes, run_queue_seconds
from .scale import AGENT_ENV, AGENT_SCREENS, STATES, Pinger, p, stream_argv

RESULTS = Path(__file__).with_name("results") / "soak.json"
RATES = (2_000, 5_000, 10_000, 20_000, 50_000)
"""Bytes per second of the streaming panes, in turn."""
RSS_GROWTH_LIMIT = 0.10
PING_P99_LIMIT_MS = 20.0
SAMPLE_EVERY_S = 5.0
CHURN_PANES = 6
SUBSCRIBED = ["pane.created", "pane.closed", "pane.exited", "pane.updated", "pane.focused",
              "pane.agent_detected", "pane.title_changed", "tab.created", "tab.closed",
              "layout.updated", "plugin.loaded", "plugin.unloaded", "plugin.error",
              "server.manifests_reloaded"]
MANIFEST = """id = "soakbot"
version = "{version}"

[[rules]]
id = "prompt"
state = "idle"
visible_idle = true
contains = ["soak-ready-{version}"]
"""
PLUGIN = '''"""A plugin the soak rewrites: one method answering its version."""

from cmux_core.hookspecs import hookimpl


def hello(call, params):
    return {{"version": {version}}}


@hookimpl
def cmux_register_methods(register):
    register("hello", hello)
'''
BROKEN_PLUGIN = "def broken(:\n"


RETRIED = (OSError, EOFError, TimeoutError, CmuxError, ValueError)
"""What a load thread counts and carries on after: the server may cut a client off."""


@dataclass
class Load:
    """Counters the load threads share; each thread only adds to its own keys."""

    stop: threading.Event = field(default_factory=threading.Event)
    counts: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, key: str, n: int = 1) -> None:
        with self.lock:
            self.counts[key] += n

    def error(self, where: str, exc: BaseException) -> None:
        with self.lock:
            self.errors[f"{where}: {type(exc).__name__}"] += 1


def forever(load: Load, where: str, body: Callable[[], None], pause: float = 0.2) -> None:
    """Run ``body`` until the soak ends, counting what it raises and starting it again."""
    while not load.stop.is_set():
        try:
            body()
        except RETRIED as exc:
            load.error(where, exc)
            load.stop.wait(pause)


def subscriber(server: ServerProcess, load: Load, pane: str, slow: bool) -> Callable[[], None]:
    subscriptions = [{"type": kind} for kind in SUBSCRIBED] + [
        {"type": "pane.output_matched", "pane_id": pane, "source": "visible",
         "match": {"type": "regex", "value": r"module_[12]\.py"}}]

    def body() -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(server.socket_path))
            sock.sendall(orjson.dumps({"id": 1, "method": "events.subscribe",
                                       "params": {"subscriptions": subscriptions}}) + b"\n")
            reader = LineReader(sock.fileno())
            if not orjson.loads(reader.readline(time.monotonic() + 10)).get("ok"):
                raise ValueError("events.subscribe was refused")
            load.count("subscriptions")
            if slow:
                sock.settimeout(1.0)
                while not load.stop.is_set():
                    try:
                        chunk = sock.recv(1024)
                    except TimeoutError:
                        continue
                    if not chunk:
                        load.count("slow subscribers cut off")
                        return
                    load.stop.wait(0.5)
                return
            while not load.stop.is_set():
                try:
                    line = reader.readline(time.monotonic() + 1.0)
                except TimeoutError:
                    continue
                load.count("events read")
                if b"subscription_overflow" in line:
                    load.count("fast subscribers overflowed")

    return body


def waiter(server: ServerProcess, load: Load, streams: list[str],
           probes: list[str]) -> Callable[[], None]:
    """Connect, start a long wait, hang up after 0.05-2 s whether it answered or not."""
    rng = random.Random()

    def body() -> None:
        pane, probe = rng.choice(streams), rng.choice(probes)
        kind = rng.randrange(4)
        if kind == 0:
            method, params = "pane.wait_for_output", {
                "pane_id": pane, "source": "recent", "timeout_ms": 30_000,
                "match": {"type": "substring", "value": "never-printed"}}
        elif kind == 1:
            method, params = "agent.wait", {"target": probe, "until": ["blocked"],
                                            "timeout_ms": 30_000}
        elif kind == 2:
            method, params = "events.wait", {"match_event": {
                "event": "pane_agent_status_changed", "pane_id": probe,
                "agent_status": "working"}, "timeout_ms": 30_000}
        else:
            method, params = "pane.wait_for_output", {
                "pane_id": pane, "source": "recent", "timeout_ms": 30_000,
                "match": {"type": "substring", "value": "Working"}}
        conn = Connection(server.socket_path)
        try:
            conn.send([(method, params)])
            load.count(f"{method} sent")
            try:
                conn.reply(rng.uniform(0.05, 2.0))
                load.count(f"{method} answered")
            except TimeoutError:
                load.count(f"{method} abandoned")
        finally:
            conn.close()

    return body


def churner(server: ServerProcess, load: Load, root: str) -> Callable[[], None]:
    """Split a pane every half second; close the oldest split once there are enough."""
    rng = random.Random()
    conn = Connection(server.socket_path)
    panes: list[str] = []

    def body() -> None:
        if len(panes) >= CHURN_PANES:
            conn.call("pane.close", {"pane_id": panes.pop(0)})
            load.count("panes closed")
        else:
            target = rng.choice([root, *panes])
            argv = rng.choice([["cat"], ["sh", "-c", "echo churn; exec cat"],
                               ["sh", "-c", "echo short-lived; sleep 1"]])
            made = conn.call("pane.split", {"target_pane_id": target, "command": argv,
                                            "direction": rng.choice(["right", "down"])})
            panes.append(str(made["pane"]["pane_id"]))
            load.count("panes split")
        if rng.random() < 0.1:
            tab = conn.call("tab.create", {"command": ["cat"]})["tab"]["tab_id"]
            conn.call("tab.close", {"tab_id": tab})
            load.count("tabs created and closed")
        load.stop.wait(0.5)

    return body


def toggler(server: ServerProcess, load: Load, probes: list[str]) -> Callable[[], None]:
    conn = Connection(server.socket_path)
    turns = itertools.count()

    def body() -> None:
        state = STATES[next(turns) % 2]
        for probe in probes:
            conn.call("pane.send_text", {"pane_id": probe, "text": state + "\n"})
        load.count("agent screens drawn", len(probes))
        load.stop.wait(1.0)

    return body


def editor(server: ServerProcess, load: Load, manifests: Path,
           plugins: Path) -> Callable[[], None]:
    """Rewrite the manifest every 3 s and the plugin every 5 s (some broken), call it; every
    7 s disable the plugin or enable it again, and every 11 s drop a second plugin in or
    delete it, so plugins load and unload all along."""
    conn = Connection(server.socket_path)
    ticks = itertools.count()

    def body() -> None:
        tick = next(ticks)
        if tick % 3 == 0:
            version = tick // 3
            text = "id = [broken" if version % 5 == 4 else MANIFEST.format(version=version)
            (manifests / "soakbot.toml").write_text(text)
            load.count("manifest edits")
        if tick % 5 == 0:
            version = tick // 5
            text = BROKEN_PLUGIN if version % 4 == 3 else PLUGIN.format(version=version)
            (plugins / "soakplug.py").write_text(text)
            load.count("plugin edits")
        if tick % 7 == 0:
            method = "plugin.disable" if tick // 7 % 2 == 0 else "plugin.enable"
            try:
                conn.call(method, {"plugin_id": "soakplug"}, timeout=10.0)
                load.count(f"{method} answered")
            except CmuxError:
                load.count(f"{method} refused (not known yet)")
        if tick % 11 == 0:
            extra = plugins / "soakextra.py"
            if extra.exists():
                extra.unlink()
                load.count("second plugin removed")
            else:
                extra.write_text(PLUGIN.format(version=tick).replace("hello", "extra"))
                load.count("second plugin added")
        try:
            conn.call("plugin.soakplug.hello", timeout=10.0)
            load.count("plugin calls answered")
        except CmuxError:
            load.count("plugin calls refused (not loaded yet)")
        load.stop.wait(1.0)

    return body


def zombies(pid: int) -> set[int]:
    """Children of ``pid`` that have exited and not been reaped."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] == "Z" and int(fields[1]) == pid:
            found.add(int(entry))
    return found


def sample(pid: int, began: float, seen: set[int]) -> dict[str, float]:
    """One reading; ``seen`` holds the zombies of the previous one and is updated, so
    ``zombies`` counts only those still there a sample later (one just exiting is not)."""
    with open(f"/proc/{pid}/status") as f:
        threads = next(int(line.split()[1]) for line in f if line.startswith("Threads:"))
    now = zombies(pid)
    lingering = len(now & seen)
    seen.clear()
    seen.update(now)
    return {"t": round(time.monotonic() - began, 1), "rss_mib": rss_bytes(pid) / (1 << 20),
            "fds": len(os.listdir(f"/proc/{pid}/fd")), "threads": threads,
            "zombies": lingering, "cpu_s": cpu_seconds(pid), "wait_s": run_queue_seconds(pid)}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.soak",
                                     description="a cmux server under mixed load for minutes")
    parser.add_argument("--minutes", type=float, default=10.0,
                        help="how long the load runs (default 10)")
    parser.add_argument("--warmup", type=float, default=None, metavar="SECONDS",
                        help="not judged (default: a quarter of the run, at most 60 s)")
    parser.add_argument("--panes", type=int, default=50, help="streaming panes (default 50)")
    parser.add_argument("--subscribers", type=int, default=20,
                        help="event subscribers, every fourth a slow reader (default 20)")
    parser.add_argument("--emulator", choices=["auto", "pyte", "ghostty"], default="auto",
                        help="the cmux screen backend (default: auto)")
    parser.add_argument("--json", type=Path, default=RESULTS, metavar="PATH",
                        help=f"where to write the results (default: {RESULTS})")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    duration = args.minutes * 60
    load_before = os.getloadavg()[0]
    warmup = min(60.0, duration / 4) if args.warmup is None else args.warmup
    work = Path(tempfile.mkdtemp(prefix="cmux-soak-"))
    manifests, plugins = work / "manifests", work / "plugins"
    manifests.mkdir()
    plugins.mkdir()
    (manifests / "soakbot.toml").write_text(MANIFEST.format(version=0))
    (plugins / "soakplug.py").write_text(PLUGIN.format(version=0))
    server = start_server(["--emulator", args.emulator, "--manifests-dir", str(manifests),
                           "--plugins-dir", str(plugins)])
    pid = server.process.pid
    load = Load()
    threads: list[threading.Thread] = []
    samples: list[dict[str, float]] = []
    seen: set[int] = set()
    print(f"soak: {args.minutes:g} min against cmux serve (pid {pid}), warm-up {warmup:g} s",
          file=sys.stderr, flush=True)
    conn = Connection(server.socket_path)
    ping_conn = Connection(server.socket_path)
    pinger = Pinger(lambda: ping_conn.call("ping", timeout=10.0))
    try:
        root = str(conn.call("pane.list")["panes"][0]["pane_id"])
        streams = [str(conn.call("tab.create", {
            "command": stream_argv(RATES[i % len(RATES)], Settings().scrollback_lines),
            "env": AGENT_ENV if i % 2 else {}})["root_pane"]["pane_id"])
            for i in range(args.panes)]
        probes = [str(conn.call("tab.create", {
            "command": python_argv(AGENT_SCREENS, str(work / f"stamps-{i}")),
            "env": AGENT_ENV})["root_pane"]["pane_id"]) for i in range(2)]
        bodies = [(f"subscriber {i}", subscriber(server, load, streams[i % len(streams)],
                                                 slow=i % 4 == 3))
                  for i in range(args.subscribers)]
        bodies += [(f"waiter {i}", waiter(server, load, streams, probes)) for i in range(4)]
        bodies += [("churn", churner(server, load, root)),
                   ("toggle", toggler(server, load, probes)),
                   ("edits", editor(server, load, manifests, plugins))]
        for name, body in bodies:
            thread = threading.Thread(target=forever, args=(load, name, body), daemon=True,
                                      name=name)
            thread.start()
            threads.append(thread)
        began = time.monotonic()
        pinger.start()
        next_print = began + 60
        while time.monotonic() - began < duration:
            if server.process.poll() is not None:
                break
            samples.append(sample(pid, began, seen))
            if time.monotonic() >= next_print:
                last = samples[-1]
                print(f"  {last['t']:6.0f} s  RSS {last['rss_mib']:.1f} MiB  fds {last['fds']}"
                      f"  threads {last['threads']}  zombies {last['zombies']}",
                      file=sys.stderr, flush=True)
                next_print += 60
            time.sleep(min(SAMPLE_EVERY_S, max(0.0, duration - (time.monotonic() - began))))
        ended = time.monotonic() - began
        died = server.process.poll()
        if died is None:
            samples.append(sample(pid, began, seen))
            stats = conn.call("server.stats")
        else:
            stats = {}
    finally:
        load.stop.set()
        pings = pinger.stop() if pinger.is_alive() else []
        for thread in threads:
            thread.join(5.0)
        ping_conn.close()
        conn.close()
        log = server.log()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return judge(args, samples, pinger, pings, load, died, ended, warmup, stats, log,
                 load_before)


def judge(args: argparse.Namespace, samples: list[dict[str, float]], pinger: Pinger,
          pings: list[float], load: Load, died: int | None, ended: float, warmup: float,
          stats: dict[str, Any], log: str, load_before: float) -> int:
    """Print the figures and the verdict, write the JSON file; 1 when the run failed."""
    warm = [latency for at, latency in zip(pinger.at, pings, strict=True) if at >= warmup]
    after = [s for s in samples if s["t"] >= warmup]
    window = max(1, len(after) // 10)
    rss_start = statistics.mean(s["rss_mib"] for s in after[:window]) if after else None
    rss_end = statistics.mean(s["rss_mib"] for s in after[-window:]) if after else None
    growth = (rss_end / rss_start - 1) if rss_start and rss_end else None
    p50, p99, worst = p(warm, 50), p(warm, 99), p(warm, 100)
    reasons = []
    if died is not None:
        reasons.append(f"the server exited with status {died} after {ended:.0f} s")
    if growth is not None and growth > RSS_GROWTH_LIMIT:
        reasons.append(f"RSS grew {growth:.1%} after the warm-up "
                       f"({rss_start:.1f} -> {rss_end:.1f} MiB), over {RSS_GROWTH_LIMIT:.0%}")
    if p99 is not None and p99 > PING_P99_LIMIT_MS:
        reasons.append(f"ping p99 {p99:.2f} ms after the warm-up, over {PING_P99_LIMIT_MS:g} ms")
    if pinger.failures:
        reasons.append(f"{len(pinger.failures)} pings failed: {pinger.failures[0]}")
    if not after:
        reasons.append("the run ended before the warm-up did")

    def column(key: str) -> list[float]:
        return [s[key] for s in samples]

    print(f"soak: {ended:.0f} s, warm-up {warmup:g} s, {args.panes} streaming panes, "
          f"{args.subscribers} subscribers, load average {load_before:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after ({os.cpu_count()} CPUs)")
    if len(after) > 1:
        wall = after[-1]["t"] - after[0]["t"]
        cpu = (after[-1]["cpu_s"] - after[0]["cpu_s"]) / wall
        waited = (after[-1]["wait_s"] - after[0]["wait_s"]) / wall
        print(f"server CPU after warm-up: {cpu:.1%} of a core; its main thread was runnable "
              f"but waiting for a CPU {waited:.1%} of the time")
    if p50 is not None:
        print(f"ping after warm-up: p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {worst:.2f} ms "
              f"({len(warm)} pings)")
    if samples:
        print(f"RSS MiB: start {samples[0]['rss_mib']:.1f}, after warm-up "
              f"{rss_start or 0:.1f}, end {rss_end or 0:.1f}, max {max(column('rss_mib')):.1f}"
              + (f" (growth {growth:+.1%})" if growth is not None else ""))
        for key in ("fds", "threads", "zombies"):
            values = column(key)
            print(f"{key}: start {values[0]:g}, end {values[-1]:g}, max {max(values):g}")
    print("load: " + ", ".join(f"{k} {v}" for k, v in sorted(load.counts.items())))
    if load.errors:
        print("client errors: " + ", ".join(f"{k} {v}" for k, v in sorted(load.errors.items())))
    if stats:
        print(f"server.stats: loop_lag {stats.get('loop_lag')}, connections "
              f"{stats.get('connections')}, subscribers {stats.get('subscribers')}")
    print("PASS" if not reasons else "FAIL: " + "; ".join(reasons))
    report = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "minutes": args.minutes, "seconds": round(ended, 1), "warmup_s": warmup,
        "emulator": args.emulator, "panes": args.panes, "subscribers": args.subscribers,
        "cpus": os.cpu_count(), "loadavg_before": load_before, "loadavg": os.getloadavg(),
        "ping_ms": {"p50": p50, "p99": p99, "max": worst, "count": len(warm),
                    "failures": pinger.failures[:20]},
        "rss_growth": growth, "samples": samples, "load": dict(load.counts),
        "client_errors": dict(load.errors), "server_stats": stats,
        "passed": not reasons, "reasons": reasons,
        "server_log_tail": log[-4000:] if reasons else "",
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    print(f"written to {args.json}", file=sys.stderr)
    return 1 if reasons else 0


if __name__ == "__main__":
    sys.exit(main())
