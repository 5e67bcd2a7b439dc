"""Cases at scale: many panes with some streaming, and many idle panes.

``scale``: 200 panes of which 50 print like busy agents (``agent_stream.py``, about
100 KB/s each, every one identified as Claude Code so its screen is classified as
it changes). Over the measuring window: the server's CPU, ping latency on a
dedicated connection every 10 ms, and detection latency: one more agent pane
(``agent_screens.py``) draws a screen the bundled Claude Code manifest recognises,
alternating ``working`` and ``blocked``, and the clock runs from the moment the
program wrote it until the ``pane.agent_status_changed`` event reaches a subscriber.
tmux gets the same 200 panes and 50 streams; its CPU and a ``display-message -p``
round trip on a ``tmux -C`` client stand against cmux's; it has no detection.

``idle``: 100 idle panes and nothing else; the server's wake-ups per second
(voluntary context switches of all its threads, from ``/proc``) and CPU.

``lists``: 1,000 idle panes; the round trip of ``pane.list``, ``workspace.list``,
``agent.list`` and ``system.tree`` (p50 and p99 of 50 calls each) beside tmux's
``list-panes -a`` over a ``tmux -C`` client with the same panes, and the longest a ping on
another connection waited meanwhile (how long the server kept everyone else waiting).
"""

from __future__ import annotations

import os
import shlex
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from cmux_core.agents.scheduler import SAFETY_QUIET_S, STARTUP_GRACE_S
from cmux_core.api.loop_monitor import LoopMonitor
from cmux_core.errors import CmuxError

from .cmux import CmuxSide, python_argv
from .context import QUICK, Context, ms, percentile
from .lines import LineReader
from .proc import cpu_seconds, run_queue_seconds, wakeups_per_second
from .report import Row
from .tmux import ControlClient, Tmux

AGENT_STREAM = Path(__file__).with_name("agent_stream.py")
AGENT_SCREENS = Path(__file__).with_name("agent_screens.py")
IDLE_ARGV = ["cat"]
AGENT_ENV = {"CMUX_AGENT": "claude"}
STATES = ("working", "blocked")
DETECT_EVERY_S = 0.25
"""Pause between two detection probes, after the previous one was seen."""


@dataclass(frozen=True)
class ScaleSizes:
    """Panes in all, how many of them stream and at how many bytes a second each, the
    idle case's panes, and seconds tmux is given after its panes start (cmux gets the
    probe's startup grace and one unmeasured change)."""

    panes: int = 200
    streaming: int = 50
    rate: int = 100_000
    idle_panes: int = 100
    settle: float = 3.0


QUICK_SCALE = ScaleSizes(panes=100, streaming=25, settle=2.0)


def scale_sizes(ctx: Context) -> ScaleSizes:
    """The full sizes, or smaller ones for ``--quick``."""
    return QUICK_SCALE if ctx.sizes == QUICK else ScaleSizes()


def p(values: list[float], q: float) -> float | None:
    """The ``q``-th percentile in milliseconds, or None for no values."""
    return ms(percentile(values, q)) if values else None


class EventStream:
    """A connection subscribed to events; ``next`` returns the next event line's dict."""

    def __init__(self, path: Path, subscriptions: list[dict[str, Any]]) -> None:
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect(str(path))
        self._reader = LineReader(self._sock.fileno())
        self._sock.sendall(orjson.dumps({"id": 1, "method": "events.subscribe",
                                         "params": {"subscriptions": subscriptions}}) + b"\n")
        reply = orjson.loads(self._reader.readline(time.monotonic() + 10))
        if not reply.get("ok"):
            raise RuntimeError(f"events.subscribe failed: {reply.get('error')}")

    def next(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            message = orjson.loads(self._reader.readline(deadline))
            if "event" in message:
                return dict(message)

    def close(self) -> None:
        self._sock.close()


class Pinger(threading.Thread):
    """Calls ``ping()`` every ``interval`` seconds until stopped; keeps each latency."""

    def __init__(self, ping: Any, interval: float = 0.01) -> None:
        super().__init__(daemon=True)
        self.ping, self.interval = ping, interval
        self.times: list[float] = []
        self.at: list[float] = []
        """When each ping in ``times`` started, in seconds since the thread did."""
        self.failures: list[str] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        began = time.perf_counter()
        while not self.stopped.is_set():
            start = time.perf_counter()
            try:
                self.ping()
            except (OSError, TimeoutError, RuntimeError, EOFError, CmuxError) as exc:
                self.failures.append(f"{type(exc).__name__}: {exc}")
            else:
                self.times.append(time.perf_counter() - start)
                self.at.append(start - began)
            self.stopped.wait(self.interval)

    def stop(self) -> list[float]:
        self.stopped.set()
        self.join()
        return self.times


@dataclass
class Scale:
    """What one side did under load: CPU % of one core, ping and detection latencies (s),
    and the % of the time its main thread was runnable but waited for a CPU."""

    cpu_pct: float
    pings: list[float]
    waiting_pct: float = 0.0
    detections: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


BATCH = 50
"""Panes asked for in one go: requests pipelined on one write, tmux commands in one process."""


def new_tabs(side: CmuxSide, params: dict[str, Any], count: int) -> None:
    """``count`` more tabs, each one pane made by ``tab.create`` with ``params``."""
    for first in range(0, count, BATCH):
        batch = min(BATCH, count - first)
        side.conn.send([("tab.create", params)] * batch)
        for _ in range(batch):
            side.backend = str(side.conn.reply()["root_pane"].get("emulator", ""))


def new_windows(tmux: Tmux, session: str, argv: list[str], count: int) -> None:
    """``count`` more windows of ``session`` running ``argv``."""
    command = ["new-window", "-d", "-t", f"{session}:", shlex.join(argv)]
    for first in range(0, count, BATCH):
        batch = min(BATCH, count - first)
        tmux.run(*[arg for i in range(batch) for arg in ([";"] if i else []) + command])


def stream_argv(rate: int, prefill: int = 0) -> list[str]:
    return python_argv(AGENT_STREAM, str(rate), *([str(prefill)] if prefill else []))


def scale_cmux(side: CmuxSide, sizes: ScaleSizes, seconds: float, workdir: Path) -> Scale:
    """Fill ``side`` to ``sizes.panes`` panes (its default shell, the probe, the streams,
    ``cat`` for the rest), then measure for ``seconds``."""
    stamps = workdir / f"stamps-{os.getpid()}-{side.pid}"
    stamps.touch()
    conn = side.conn
    probe = str(conn.call("tab.create", {"command": python_argv(AGENT_SCREENS, str(stamps)),
                                         "env": AGENT_ENV})["root_pane"]["pane_id"])
    new_tabs(side, {"command": stream_argv(sizes.rate), "env": AGENT_ENV}, sizes.streaming)
    new_tabs(side, {"command": IDLE_ARGV}, sizes.panes - sizes.streaming - 2)
    side.wait_for(probe, "ready-agent")
    deadline = time.monotonic() + 30
    while conn.call("pane.get", {"pane_id": probe})["pane"].get("agent") != "claude":
        if time.monotonic() > deadline:
            raise TimeoutError("the probe pane was not identified as claude")
        time.sleep(0.05)
    events = EventStream(side.server.socket_path,
                         [{"type": "pane.agent_status_changed", "pane_id": probe}])
    # Screens are not classified during an agent's startup grace; one unmeasured change
    # after it, then the clock runs.
    time.sleep(STARTUP_GRACE_S + 0.2)
    result = Scale(0.0, [])
    ping_conn = side.connect()
    pinger = Pinger(lambda: ping_conn.call("ping", timeout=10.0))
    try:
        detect_change(side, probe, events, stamps, "blocked", 15.0)
        pinger.start()
        began, cpu, wait = time.monotonic(), cpu_seconds(side.pid), run_queue_seconds(side.pid)
        turn = 0
        while time.monotonic() - began < seconds:
            try:
                result.detections.append(
                    detect_change(side, probe, events, stamps, STATES[turn % 2], 10.0))
            except TimeoutError as exc:
                result.failures.append(f"detection: {exc}")
            turn += 1
            time.sleep(DETECT_EVERY_S)
        wall = time.monotonic() - began
        result.cpu_pct = (cpu_seconds(side.pid) - cpu) / wall * 100
        result.waiting_pct = (run_queue_seconds(side.pid) - wait) / wall * 100
    finally:
        result.pings = pinger.stop() if pinger.is_alive() else []
        result.failures += pinger.failures
        ping_conn.close()
        events.close()
    return result


def detect_change(side: CmuxSide, pane: str, events: EventStream, stamps: Path, state: str,
                  timeout: float) -> float:
    """Have the probe draw ``state``'s screen; seconds from its write to the event."""
    side.send_text(pane, state + "\n")
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no agent_status_changed to {state} within {timeout:g} s")
        event = events.next(left)
        if event.get("data", {}).get("agent_status") == state:
            seen = time.monotonic()
            break
    written = [line.split() for line in stamps.read_text().splitlines()]
    return seen - next(float(t) for s, t in reversed(written) if s == state)


def scale_tmux(tmux: Tmux, sizes: ScaleSizes, seconds: float) -> Scale:
    """The same panes and streams in one tmux session; a ``tmux -C`` client attached to
    a second, quiet session sends ``display-message -p`` every 10 ms."""
    tmux.new_session("main", ["sh"])
    new_windows(tmux, "main", stream_argv(sizes.rate), sizes.streaming)
    new_windows(tmux, "main", IDLE_ARGV, sizes.panes - sizes.streaming - 1)
    tmux.new_session("probe", IDLE_ARGV)
    client = ControlClient(tmux, "probe")
    pinger = Pinger(lambda: client.command("display-message -p ping", timeout=10.0))
    pid = tmux.server_pid()
    try:
        time.sleep(sizes.settle)
        pinger.start()
        began, cpu, wait = time.monotonic(), cpu_seconds(pid), run_queue_seconds(pid)
        time.sleep(seconds)
        wall = time.monotonic() - began
        cpu_pct = (cpu_seconds(pid) - cpu) / wall * 100
        waiting_pct = (run_queue_seconds(pid) - wait) / wall * 100
    finally:
        pings = pinger.stop() if pinger.is_alive() else []
        client.close()
    return Scale(cpu_pct, pings, waiting_pct, failures=pinger.failures)


def case_scale(ctx: Context) -> list[Row]:
    sizes, seconds = scale_sizes(ctx), ctx.sizes.idle_seconds
    with ctx.cmux() as side:
        c = scale_cmux(side, sizes, seconds, ctx.workdir)
        ctx.backends.add(side.backend)
    with ctx.tmux() as tmux:
        t = scale_tmux(tmux, sizes, seconds)
    where = (f"{sizes.panes} panes, {sizes.streaming} streaming "
             f"{sizes.rate / 1000:g} KB/s")
    detail = {"seconds": seconds, "panes": sizes.panes, "streaming": sizes.streaming,
              "rate_bytes_per_s": sizes.rate, "cmux_pings": len(c.pings),
              "tmux_pings": len(t.pings), "cmux_ping_max_ms": p(c.pings, 100),
              "tmux_ping_max_ms": p(t.pings, 100), "detections": len(c.detections),
              "detect_p50_ms": p(c.detections, 50), "detect_max_ms": p(c.detections, 100),
              "cmux_failures": c.failures[:20], "tmux_failures": t.failures[:20],
              "cmux_waiting_for_cpu_pct": c.waiting_pct, "tmux_waiting_for_cpu_pct": t.waiting_pct}
    failures = (f"; failed probes: cmux {len(c.failures)}, tmux {len(t.failures)}"
                if c.failures or t.failures else "")
    return [
        Row("scale_cpu_pct", f"scale: server CPU, {where} (% of a core)", c.cpu_pct,
            t.cpu_pct, "lower",
            f"utime+stime of the server over {seconds:g} s; every cmux stream is an identified "
            "Claude Code pane, so its screen is classified as it changes" + failures, detail),
        Row("scale_ping_p50_ms", "scale: ping p50 (ms)", p(c.pings, 50), p(t.pings, 50),
            "lower", "a ping every 10 ms on its own connection; tmux: display-message -p "
            "on a tmux -C client attached to a quiet session"),
        Row("scale_ping_p99_ms", "scale: ping p99 (ms)", p(c.pings, 99), p(t.pings, 99),
            "lower", f"target: under 20 ms; the server's main thread was runnable but waiting "
            f"for a CPU {c.waiting_pct:.1f} % of the time (tmux {t.waiting_pct:.1f} %)"),
        Row("scale_detect_p99_ms", "scale: detection latency p99 (ms)",
            p(c.detections, 99), None, "lower",
            f"{len(c.detections)} changes between a working and a blocked Claude Code screen "
            "(from the manifest's fixture cases): from the program's write to the "
            "pane.agent_status_changed event; includes the 75 ms screen debounce; "
            "tmux does not detect agents"),
    ]


def idle_cmux(side: CmuxSide, panes: int, seconds: float,
              settle: float) -> tuple[float, dict[str, float], float]:
    """Wake-ups/s of the server (total, per thread) and its CPU % with ``panes`` idle
    panes (the default shell plus ``cat`` tabs), after ``settle`` seconds."""
    new_tabs(side, {"command": IDLE_ARGV}, panes - 1)
    time.sleep(settle)
    cpu = cpu_seconds(side.pid)
    began = time.monotonic()
    total, threads = wakeups_per_second(side.pid, seconds)
    return total, threads, (cpu_seconds(side.pid) - cpu) / (time.monotonic() - began) * 100


def idle_tmux(tmux: Tmux, panes: int, seconds: float,
              settle: float) -> tuple[float, dict[str, float], float]:
    tmux.new_session("main", ["sh"])
    new_windows(tmux, "main", IDLE_ARGV, panes - 1)
    pid = tmux.server_pid()
    time.sleep(settle)
    cpu = cpu_seconds(pid)
    began = time.monotonic()
    total, threads = wakeups_per_second(pid, seconds)
    return total, threads, (cpu_seconds(pid) - cpu) / (time.monotonic() - began) * 100


IDLE_SETTLE_S = max(SAFETY_QUIET_S, LoopMonitor().linger) + 2.0
"""The idle case measures once the server's quiet windows after the last output and the
last request have run out (its timers then stop)."""


def case_idle(ctx: Context) -> list[Row]:
    sizes = scale_sizes(ctx)
    panes, seconds = sizes.idle_panes, ctx.sizes.idle_seconds
    with ctx.cmux() as side:
        c_wake, c_threads, c_cpu = idle_cmux(side, panes, seconds, IDLE_SETTLE_S)
        ctx.backends.add(side.backend)
    with ctx.tmux() as tmux:
        t_wake, t_threads, t_cpu = idle_tmux(tmux, panes, seconds, IDLE_SETTLE_S)
    woken = ", ".join(f"{name} {rate:.1f}/s" for name, rate in c_threads.items())
    return [
        Row("idle_wakeups_per_s", f"idle: server wake-ups/s, {panes} idle panes", c_wake,
            t_wake, "lower",
            f"voluntary context switches of all server threads over {seconds:g} s, "
            f"{IDLE_SETTLE_S:g} s after the panes started (the server's timers stop once "
            f"nothing printed for {SAFETY_QUIET_S:g} s and no request came for "
            f"{LoopMonitor().linger:g} s); cmux by thread: {woken or 'none'}",
            {"cmux_threads": c_threads, "tmux_threads": t_threads, "seconds": seconds}),
        Row("idle_cpu_100_pct", f"idle: server CPU, {panes} idle panes (% of a core)", c_cpu,
            t_cpu, "lower", "over the same window"),
    ]


LIST_METHODS = ("pane.list", "workspace.list", "agent.list", "system.tree")
LIST_CALLS = 50


@dataclass
class Lists:
    """One side's list calls: seconds of each call by method, and the pings another
    connection sent every 10 ms meanwhile (how long any other client waited)."""

    times: dict[str, list[float]]
    pings: list[float]
    waiting_pct: float
    """% of the calls' wall time the server's main thread was runnable but waited for a
    CPU (a loaded machine's share of the latencies)."""
    failures: list[str] = field(default_factory=list)


def lists_cmux(side: CmuxSide, panes: int) -> Lists:
    """Each call of every list method with ``panes`` idle panes, while another
    connection pings."""
    new_tabs(side, {"command": IDLE_ARGV}, panes - 1)
    times: dict[str, list[float]] = {}
    ping_conn = side.connect()
    pinger = Pinger(lambda: ping_conn.call("ping", timeout=10.0))
    pinger.start()
    began, wait = time.monotonic(), run_queue_seconds(side.pid)
    try:
        for method in LIST_METHODS:
            times[method] = []
            for _ in range(LIST_CALLS):
                start = time.perf_counter()
                side.conn.call(method)
                times[method].append(time.perf_counter() - start)
        waiting = (run_queue_seconds(side.pid) - wait) / (time.monotonic() - began) * 100
    finally:
        pings = pinger.stop()
        ping_conn.close()
    return Lists(times, pings, waiting, pinger.failures)


def lists_tmux(tmux: Tmux, panes: int) -> Lists:
    """Each ``list-panes -a`` with ``panes`` idle panes, while a second ``tmux -C``
    client (on a quiet session) sends ``display-message -p`` every 10 ms."""
    tmux.new_session("main", ["sh"])
    new_windows(tmux, "main", IDLE_ARGV, panes - 1)
    tmux.new_session("probe", IDLE_ARGV)
    client = ControlClient(tmux, "main")
    probe = ControlClient(tmux, "probe")
    pinger = Pinger(lambda: probe.command("display-message -p ping", timeout=10.0))
    pinger.start()
    times: list[float] = []
    pid = tmux.server_pid()
    began, wait = time.monotonic(), run_queue_seconds(pid)
    try:
        for _ in range(LIST_CALLS):
            start = time.perf_counter()
            client.command("list-panes -a")
            times.append(time.perf_counter() - start)
        waiting = (run_queue_seconds(pid) - wait) / (time.monotonic() - began) * 100
    finally:
        pings = pinger.stop()
        probe.close()
        client.close()
    return Lists({"list-panes": times}, pings, waiting, pinger.failures)


def case_lists(ctx: Context) -> list[Row]:
    panes = 100 if ctx.sizes == QUICK else 1000
    with ctx.cmux() as side:
        c = lists_cmux(side, panes)
        ctx.backends.add(side.backend)
    with ctx.tmux() as tmux:
        t = lists_tmux(tmux, panes)
    tmux_times = t.times["list-panes"]
    rows = []
    for method in LIST_METHODS:
        rows.append(Row(
            f"lists_{method.replace('.', '_')}_p99_ms", f"lists: {method} p99 (ms), "
            f"{panes} panes", p(c.times[method], 99), p(tmux_times, 99), "lower",
            f"{LIST_CALLS} calls; p50 cmux {ms(percentile(c.times[method], 50)):.1f} ms, tmux "
            f"list-panes -a {ms(percentile(tmux_times, 50)):.1f} ms; cmux's first call "
            f"{ms(c.times[method][0]):.1f} ms, p99 of the others "
            f"{p(c.times[method][1:], 99) or 0:.1f} ms",
            {"cmux_ms": [ms(x) for x in c.times[method]]}))
    failures = (f"; failed pings: cmux {len(c.failures)}, tmux {len(t.failures)}"
                if c.failures or t.failures else "")
    rows.append(Row(
        "lists_ping_max_ms", "lists: longest ping wait meanwhile (ms)", p(c.pings, 100),
        p(t.pings, 100), "lower",
        f"a ping every 10 ms on another connection during all the list calls (tmux: "
        f"display-message -p on a second tmux -C client); goal: under 50 ms; p99 cmux "
        f"{p(c.pings, 99) or 0:.1f} ms, tmux {p(t.pings, 99) or 0:.1f} ms; {len(c.pings)} "
        f"and {len(t.pings)} pings; the server's main thread was runnable but waiting for a "
        f"CPU {c.waiting_pct:.1f} % of the time (tmux {t.waiting_pct:.1f} %)" + failures,
        {"cmux_failures": c.failures[:20], "tmux_failures": t.failures[:20],
         "cmux_ping_ms": [ms(x) for x in c.pings], "tmux_ping_ms": [ms(x) for x in t.pings],
         "cmux_waiting_for_cpu_pct": c.waiting_pct,
         "tmux_waiting_for_cpu_pct": t.waiting_pct}))
    return rows
