"""The benchmark cases. Each case has a cmux half and a tmux half measured the same way.

The halves take an already started side so the smoke test can run the cmux
halves alone with tiny sizes; the case functions at the bottom start a fresh
server for each half, one after the other, so the two never share the CPU
(ingest and round trip alternate turns between two servers instead, one idle while
the other works).
"""

from __future__ import annotations

import functools
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cmux_core.errors import CmuxError

from .cmux import CmuxSide, Connection, python_argv, wait_request
from .context import Context, ms, percentile
from .detect_latency import case_detect_latency
from .fleet import case_fleet
from .graphics import case_graphics
from .hooks import case_hooks
from .mcp import case_mcp
from .memory import case_memory
from .paired import Runs, paired_row, with_cpu
from .proc import CLOCK_TICKS, cpu_seconds, rss_bytes, steady_rss
from .report import Row
from .scale import case_idle, case_lists, case_scale
from .startup import case_startup
from .storm import STORM_NOTIFICATIONS, STORM_SUBSCRIBERS, storm_cmux
from .tmux import ControlClient, Tmux

COLOUR_LINES = Path(__file__).with_name("colour_lines.py")
CAT_ARGV = ["sh", "-c", "stty -echo; echo ready-cat; exec cat"]
IDLE_ARGV = ["cat"]
INGEST_BUDGET_S = 60.0
"""No further ingest repeat starts once the cmux runs have taken this long."""
PIPELINE_DEPTH = 100
"""Requests in flight per write when pipelining; keeps both socket buffers far from full."""


# -- (a) ingest --------------------------------------------------------------------


def ingest_argv(lines: int) -> list[str]:
    """Print ``ready-ingest``, wait for a newline, then ``seq 1 lines`` and stay alive."""
    return ["sh", "-c", f"echo ready-ingest; read _; seq 1 {lines}; exec sleep 3600"]


def seq_bytes(lines: int) -> int:
    """Bytes ``seq 1 lines`` puts through the PTY (each ``\\n`` becomes ``\\r\\n``)."""
    return sum(len(str(i)) + 2 for i in range(1, lines + 1))


def ingest_cmux(side: CmuxSide, lines: int, timeout: float = 300.0) -> float:
    """Seconds from the newline that starts ``seq`` until its last line is in the pane."""
    pane = side.new_pane(ingest_argv(lines))
    side.wait_for(pane, "ready-ingest")
    start = time.perf_counter()
    side.send_text(pane, "\n")
    side.wait_for(pane, str(lines), timeout)
    elapsed = time.perf_counter() - start
    side.close_pane(pane)
    return elapsed


def ingest_tmux(tmux: Tmux, session: str, lines: int, timeout: float = 300.0) -> float:
    """The same for a tmux pane, polling ``capture-pane`` every 10 ms."""
    pane = tmux.new_window(session, ingest_argv(lines))
    tmux.wait_visible(pane, "ready-ingest", interval=0.01)
    start = time.perf_counter()
    tmux.run("send-keys", "-t", pane, "Enter")
    tmux.wait_visible(pane, str(lines), timeout, interval=0.01)
    elapsed = time.perf_counter() - start
    tmux.kill_pane(pane)
    return elapsed


# -- (b) round trip ----------------------------------------------------------------


def token(prefix: str, i: int) -> str:
    return f"{prefix}{i:06d}z"


def round_trip_cmux(side: CmuxSide, pane: str, tokens: range,
                    poll: bool = False) -> list[float]:
    """Seconds per send→visible round trip through ``cat`` (echo off) in ``pane``.

    By default ``pane.send_text`` and ``pane.wait_for_output`` go out in one write
    on the persistent connection and the clock stops at the wait's reply; with
    ``poll`` the client instead calls ``pane.read`` back to back until the line shows.
    """
    read = {"pane_id": pane, "source": "visible"}
    times = []
    for i in tokens:
        tok = token("rp" if poll else "rt", i)
        start = time.perf_counter()
        if poll:
            side.send_text(pane, tok + "\n")
            deadline = start + 10.0
            while tok not in side.conn.call("pane.read", read)["read"]["text"]:
                if time.perf_counter() > deadline:
                    raise TimeoutError(f"{tok} not visible in {pane}")
        else:
            side.conn.send([("pane.send_text", {"pane_id": pane, "text": tok + "\n"}),
                            wait_request(pane, tok, 10.0)])
            side.conn.reply()
            side.conn.reply(15.0)
        times.append(time.perf_counter() - start)
    return times


def cat_pane(side: CmuxSide) -> str:
    """A new pane running ``cat`` with echo off, ready for round trips."""
    pane = side.new_pane(CAT_ARGV)
    side.wait_for(pane, "ready-cat")
    return pane


def round_trip_tmux_control(client: ControlClient, pane: str, tokens: range) -> list[float]:
    """The same through a ``tmux -C`` client: ``send-keys``, then wait for ``%output``."""
    times = []
    for i in tokens:
        tok = token("cc", i)
        start = time.perf_counter()
        client.send([f"send-keys -t {pane} {tok} Enter"])
        client.wait_output(pane, tok.encode(), 10.0)
        times.append(time.perf_counter() - start)
    return times


def round_trip_tmux_poll(tmux: Tmux, pane: str, tokens: range) -> list[float]:
    """The same with one ``tmux send-keys`` process, then ``capture-pane`` polled back to back."""
    times = []
    for i in tokens:
        tok = token("cp", i)
        start = time.perf_counter()
        tmux.run("send-keys", "-t", pane, tok, "Enter")
        tmux.wait_visible(pane, tok, 10.0)
        times.append(time.perf_counter() - start)
    return times


# -- (c) pings ---------------------------------------------------------------------


def pings_cmux(conn: Connection, count: int, pipelined: bool) -> float:
    """``ping`` requests per second on one connection, one at a time or pipelined."""
    start = time.perf_counter()
    if pipelined:
        for done in range(0, count, PIPELINE_DEPTH):
            batch = min(PIPELINE_DEPTH, count - done)
            conn.send([("ping", {})] * batch)
            for _ in range(batch):
                conn.reply()
    else:
        for _ in range(count):
            conn.call("ping")
    return count / (time.perf_counter() - start)


def pings_tmux(client: ControlClient, count: int, pipelined: bool) -> float:
    """The nearest tmux equivalent: ``display-message -p`` commands per second on ``tmux -C``."""
    command = "display-message -p ping"
    start = time.perf_counter()
    if pipelined:
        for done in range(0, count, PIPELINE_DEPTH):
            batch = min(PIPELINE_DEPTH, count - done)
            client.send([command] * batch)
            client.replies(batch)
    else:
        for _ in range(count):
            client.command(command)
    return count / (time.perf_counter() - start)


# -- (d) idle CPU ------------------------------------------------------------------


def cpu_percent(pid: int, seconds: float) -> float:
    """CPU the process uses over ``seconds`` of wall time, in percent of one core."""
    before = cpu_seconds(pid)
    time.sleep(seconds)
    return (cpu_seconds(pid) - before) / seconds * 100


def idle_cpu_cmux(side: CmuxSide, panes: int, seconds: float, settle: float = 1.0) -> float:
    """Server CPU % with ``panes`` idle panes (the default shell plus ``cat`` tabs)."""
    for _ in range(panes - 1):
        side.new_pane(IDLE_ARGV)
    time.sleep(settle)
    return cpu_percent(side.pid, seconds)


def idle_cpu_tmux(tmux: Tmux, session: str, panes: int, seconds: float,
                  settle: float = 1.0) -> float:
    for _ in range(panes - 1):
        tmux.new_window(session, IDLE_ARGV)
    time.sleep(settle)
    return cpu_percent(tmux.server_pid(), seconds)


# -- (e) RSS per pane --------------------------------------------------------------


def rss_cmux(side: CmuxSide, panes: int, lines: int) -> tuple[int, int, int]:
    """Server RSS in bytes: steady with the default pane only, right after ``panes``
    more panes each printed ``lines`` coloured lines (all scrolled into history), and
    steady after that."""
    baseline = steady_rss(side.pid)
    ids = [side.new_pane(python_argv(COLOUR_LINES, str(lines))) for _ in range(panes)]
    for pane in ids:
        side.wait_for(pane, "colour-done", 120.0)
    return baseline, rss_bytes(side.pid), steady_rss(side.pid)


def rss_tmux(tmux: Tmux, session: str, panes: int, lines: int) -> tuple[int, int, int]:
    """The same for tmux; the caller sets ``history-limit`` before the panes exist."""
    pid = tmux.server_pid()
    baseline = steady_rss(pid)
    ids = [tmux.new_window(session, python_argv(COLOUR_LINES, str(lines)))
           for _ in range(panes)]
    for pane in ids:
        tmux.wait_visible(pane, "colour-done", 120.0, interval=0.05)
    return baseline, rss_bytes(pid), steady_rss(pid)


# -- (f) flood ---------------------------------------------------------------------


def flood_argv(size: int) -> list[str]:
    """Wait for a newline, write ``size`` bytes of ``yes`` lines, then ``flood-done``."""
    return ["sh", "-c", "echo ready-flood; read _; "
            f"yes 'flood 0123456789 abcdefghijklmnopqrstuvwxyz' | head -c {size}; "
            "echo; echo flood-done; exec sleep 3600"]


@dataclass
class Flood:
    """What happened while one pane flooded: seconds to absorb it (None when it did
    not finish in time), and latencies in seconds of probes on other connections."""

    seconds: float | None
    pings: list[float] = field(default_factory=list)
    round_trips: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


class Prober(threading.Thread):
    """Calls ``probe(i)`` every ``interval`` seconds until stopped, timing each call."""

    def __init__(self, probe: Callable[[int], None], interval: float, times: list[float],
                 failures: list[str]) -> None:
        super().__init__(daemon=True)
        self.probe, self.interval = probe, interval
        self.times, self.failures = times, failures
        self.stopped = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stopped.is_set():
            start = time.perf_counter()
            try:
                self.probe(i)
            except (TimeoutError, CmuxError, RuntimeError) as exc:
                self.failures.append(f"{type(exc).__name__}: {exc}")
            else:
                self.times.append(time.perf_counter() - start)
            i += 1
            self.stopped.wait(self.interval)


def run_flood(start: Callable[[], None], finished: Callable[[], None],
              ping: Callable[[int], None], round_trip: Callable[[int], None]) -> Flood:
    """Start the flood, probe ping (every 10 ms) and round trips (every 50 ms) until
    ``finished`` returns or raises a timeout."""
    result = Flood(None)
    probers = [Prober(ping, 0.01, result.pings, result.failures),
               Prober(round_trip, 0.05, result.round_trips, result.failures)]
    for prober in probers:
        prober.start()
    began = time.perf_counter()
    start()
    try:
        finished()
        result.seconds = time.perf_counter() - began
    except (TimeoutError, CmuxError):
        result.failures.append("the flood did not finish in time")
    for prober in probers:
        prober.stopped.set()
        prober.join()
    return result


def flood_cmux(side: CmuxSide, size: int, timeout: float) -> Flood:
    flood = side.new_pane(flood_argv(size))
    cat = side.new_pane(CAT_ARGV)
    side.wait_for(flood, "ready-flood")
    side.wait_for(cat, "ready-cat")
    ping_conn, rt_conn = side.connect(), side.connect()

    def ping(i: int) -> None:
        ping_conn.call("ping", timeout=10.0)

    def round_trip(i: int) -> None:
        tok = token("fl", i)
        rt_conn.send([("pane.send_text", {"pane_id": cat, "text": tok + "\n"}),
                      wait_request(cat, tok, 5.0)])
        rt_conn.reply(10.0)
        rt_conn.reply(10.0)

    try:
        return run_flood(lambda: side.send_text(flood, "\n"),
                         lambda: side.wait_for(flood, "flood-done", timeout),
                         ping, round_trip)
    finally:
        ping_conn.close()
        rt_conn.close()


def flood_tmux(tmux: Tmux, size: int, timeout: float) -> Flood:
    """The same in tmux: the probes are ``tmux -C`` clients attached to other sessions,
    so they receive no ``%output`` of the flooding pane."""
    flood = tmux.new_session("flood", flood_argv(size))
    cat = tmux.new_session("cat", CAT_ARGV)
    tmux.new_session("idle", IDLE_ARGV)
    tmux.wait_visible(flood, "ready-flood", interval=0.01)
    tmux.wait_visible(cat, "ready-cat", interval=0.01)
    ping_client, rt_client = ControlClient(tmux, "idle"), ControlClient(tmux, "cat")

    def ping(i: int) -> None:
        ping_client.command("display-message -p ping", timeout=10.0)

    def round_trip(i: int) -> None:
        tok = token("fl", i)
        rt_client.send([f"send-keys -t {cat} {tok} Enter"])
        rt_client.wait_output(cat, tok.encode(), 5.0)

    try:
        return run_flood(lambda: tmux.run("send-keys", "-t", flood, "Enter"),
                         lambda: tmux.wait_visible(flood, "flood-done", timeout, 0.05),
                         ping, round_trip)
    finally:
        ping_client.close()
        rt_client.close()


# -- the cases: fresh servers, cmux half then tmux half ---------------------------------


def case_ingest(ctx: Context) -> list[Row]:
    n = ctx.sizes.ingest_lines
    wall, cpu_per_mb = {"cmux": Runs(), "tmux": Runs()}, {"cmux": Runs(), "tmux": Runs()}
    megabytes = seq_bytes(n) / 1e6
    # Runs alternate between the two so a change in machine load hits both alike; both
    # servers sit idle while the other one works.
    with ctx.cmux() as side, ctx.tmux() as tmux:
        tmux.new_session("main", ["sh"])
        tmux_pid = tmux.server_pid()
        runs: dict[str, tuple[int, Callable[[], float]]] = {
            "cmux": (side.pid, lambda: ingest_cmux(side, n)),
            "tmux": (tmux_pid, lambda: ingest_tmux(tmux, "main", n))}
        # A slow backend gets fewer repeats so the whole bench stays within minutes.
        while (len(wall["cmux"].values) < ctx.repeat
               and sum(wall["cmux"].values) < INGEST_BUDGET_S):
            for name, (pid, run) in runs.items():
                seconds, cpu = with_cpu(pid, run)
                wall[name].add(seconds, cpu)
                cpu_per_mb[name].add(cpu / megabytes, cpu)
        ctx.backends.add(side.backend)
    detail = {"lines": n, "bytes": seq_bytes(n)}
    rate = {name: Runs([megabytes / s for s in r.values], r.cpu) for name, r in wall.items()}
    return [
        paired_row("ingest_s", f"ingest: seq 1..{n} visible (s)", wall["cmux"], wall["tmux"],
                   "lower", "cmux wakes on pane.wait_for_output, tmux polls capture-pane "
                   "every 10 ms (its polling is in tmux's CPU-seconds too)", detail=detail),
        paired_row("ingest_mb_s", "ingest rate (MB/s through the PTY)", rate["cmux"],
                   rate["tmux"], "higher"),
        paired_row("ingest_cpu_s_per_mb", "ingest: server CPU-seconds per MB",
                   cpu_per_mb["cmux"], cpu_per_mb["tmux"], "lower",
                   "utime+stime of the server over the run / MB through the PTY; goal "
                   "<= 0.5x tmux"),
    ]


def case_roundtrip(ctx: Context) -> list[Row]:
    count = ctx.sizes.round_trips
    runs = {kind: Runs() for kind in ("wait", "read", "control", "poll")}
    with ctx.cmux() as side, ctx.tmux() as tmux:
        cmux_pane = cat_pane(side)
        ctx.backends.add(side.backend)
        tmux_pane = tmux.new_session("main", CAT_ARGV)
        tmux.wait_visible(tmux_pane, "ready-cat", interval=0.01)
        tmux_pid = tmux.server_pid()
        client = ControlClient(tmux, "main")
        kinds: list[tuple[str, int, Callable[[range], list[float]]]] = [
            ("wait", side.pid, lambda r: round_trip_cmux(side, cmux_pane, r)),
            ("control", tmux_pid, lambda r: round_trip_tmux_control(client, tmux_pane, r)),
            ("read", side.pid, lambda r: round_trip_cmux(side, cmux_pane, r, poll=True)),
            ("poll", tmux_pid, lambda r: round_trip_tmux_poll(tmux, tmux_pane, r))]
        try:
            for turn in range(ctx.repeat):
                batch = range(turn * count, (turn + 1) * count)
                for kind, pid, run in kinds:
                    times, cpu = with_cpu(pid, functools.partial(run, batch))
                    runs[kind].add(statistics.median(times), cpu / count)
        finally:
            client.close()
    note = (f"median of {ctx.repeat} runs of {count} (each run's median): a line to cat "
            "(echo off) until its output is seen; cpu-s: server CPU-seconds per round trip")
    return [
        paired_row("roundtrip_wait_control_ms",
                   "round trip (wait_for_output) vs tmux -C, median (ms)", runs["wait"],
                   runs["control"], "lower", note + "; send_text + wait_for_output "
                   "pipelined on one connection; tmux -C: send-keys, then its %output",
                   scale=1000, detail={"count_per_run": count}),
        paired_row("roundtrip_read_control_ms",
                   "round trip (pane.read polled) vs tmux -C, median (ms)", runs["read"],
                   runs["control"], "lower",
                   "send_text, then pane.read back to back until the line shows", scale=1000),
        paired_row("roundtrip_wait_poll_ms",
                   "round trip (wait_for_output) vs send-keys+capture-pane, median (ms)",
                   runs["wait"], runs["poll"], "lower",
                   "tmux: one send-keys process, then capture-pane processes back to back; "
                   "tmux's cpu-s leave out the tmux client processes", scale=1000),
    ]


def case_pings(ctx: Context) -> list[Row]:
    count, deep = ctx.sizes.pings, ctx.sizes.pipelined_pings
    runs = {kind: Runs() for kind in ("cmux_seq", "cmux_pipe", "tmux_seq", "tmux_pipe")}
    with ctx.cmux() as side, ctx.tmux() as tmux:
        tmux.new_session("main", IDLE_ARGV)
        tmux_pid = tmux.server_pid()
        conn, client = side.connect(), ControlClient(tmux, "main")
        kinds: list[tuple[str, int, Callable[[], float]]] = [
            ("cmux_seq", side.pid, lambda: pings_cmux(conn, count, pipelined=False)),
            ("tmux_seq", tmux_pid, lambda: pings_tmux(client, count, pipelined=False)),
            ("cmux_pipe", side.pid, lambda: pings_cmux(conn, deep, pipelined=True)),
            ("tmux_pipe", tmux_pid, lambda: pings_tmux(client, deep, pipelined=True))]
        try:
            for _ in range(ctx.repeat):
                for kind, pid, run in kinds:
                    rate, cpu = with_cpu(pid, run)
                    runs[kind].add(rate, cpu)
        finally:
            conn.close()
            client.close()
    return [
        paired_row("pings_sequential", "pings/s, one at a time", runs["cmux_seq"],
                   runs["tmux_seq"], "higher",
                   f"{count} requests a run on one connection; tmux: display-message -p on "
                   f"tmux -C; cpu-s: server CPU-seconds per run of {count}"),
        paired_row("pings_pipelined", f"pings/s, pipelined {PIPELINE_DEPTH} deep",
                   runs["cmux_pipe"], runs["tmux_pipe"], "higher",
                   f"{deep} requests a run; cpu-s per run of {deep}"),
    ]


def case_cpu(ctx: Context) -> list[Row]:
    panes, seconds = ctx.sizes.idle_panes, ctx.sizes.idle_seconds
    with ctx.cmux() as side:
        c = idle_cpu_cmux(side, panes, seconds)
        ctx.backends.add(side.backend)
    with ctx.tmux() as tmux:
        tmux.new_session("main", ["sh"])
        t = idle_cpu_tmux(tmux, "main", panes, seconds)
    return [Row("idle_cpu_pct", f"server CPU, {panes} idle panes (% of a core)", c, t, "lower",
                f"utime+stime of the server process over {seconds:g} s; 0 means under one "
                f"{1000 / CLOCK_TICKS:g} ms clock tick in that time")]


def case_rss(ctx: Context) -> list[Row]:
    panes, lines = ctx.sizes.rss_panes, ctx.sizes.rss_lines
    with ctx.cmux() as side:
        c_base, c_done, c_steady = rss_cmux(side, panes, lines)
        ctx.backends.add(side.backend)
    with ctx.tmux() as tmux:
        tmux.new_session("main", ["sh"])
        tmux.run("set-option", "-g", "history-limit", str(lines))
        t_base, t_done, t_steady = rss_tmux(tmux, "main", panes, lines)
    mib = 1 << 20

    def per_pane(base: int, after: int) -> float:
        return (after - base) / panes / mib

    return [
        Row("rss_per_pane_mib", f"RSS per pane, {lines} coloured lines (MiB)",
            per_pane(c_base, c_steady), per_pane(t_base, t_steady), "lower",
            f"(steady server RSS with {panes} more panes - steady RSS with one pane) / "
            f"{panes}; tmux history-limit {lines}; baselines cmux {c_base / mib:.0f} MiB, "
            f"tmux {t_base / mib:.0f} MiB",
            {"cmux_baseline": c_base, "cmux_done": c_done, "cmux_steady": c_steady,
             "tmux_baseline": t_base, "tmux_done": t_done, "tmux_steady": t_steady,
             "panes": panes}),
        Row("rss_per_pane_done_mib", "RSS per pane, as the last line shows (MiB)",
            per_pane(c_base, c_done), per_pane(t_base, t_done), "lower",
            "the same, measured at once, before any deferred compaction"),
    ]


def case_flood(ctx: Context) -> list[Row]:
    size, timeout = ctx.sizes.flood_bytes, ctx.sizes.flood_timeout
    with ctx.cmux() as side:
        c = flood_cmux(side, size, timeout)
        ctx.backends.add(side.backend)
    with ctx.tmux() as tmux:
        t = flood_tmux(tmux, size, timeout)

    def p(values: list[float], q: float) -> float | None:
        return ms(percentile(values, q)) if values else None

    mb = size / 1e6
    detail = {"bytes": size, "cmux_failures": c.failures[:20],
              "tmux_failures": t.failures[:20], "cmux_probes": [len(c.pings), len(c.round_trips)],
              "tmux_probes": [len(t.pings), len(t.round_trips)],
              "cmux_ping_max_ms": p(c.pings, 100), "tmux_ping_max_ms": p(t.pings, 100)}
    failures = (f"; failed probes: cmux {len(c.failures)}, tmux {len(t.failures)}"
                if c.failures or t.failures else "")
    return [
        Row("flood_s", f"flood: {mb:g} MB printed in one pane (s)", c.seconds, t.seconds,
            "lower", f"time until its last line is visible (- = not within {timeout:g} s)"
            + failures, detail),
        Row("flood_ping_p50_ms", "flood: ping p50 on another connection (ms)",
            p(c.pings, 50), p(t.pings, 50), "lower",
            "a ping every 10 ms during the flood; tmux: display-message -p on tmux -C"),
        Row("flood_ping_p99_ms", "flood: ping p99 on another connection (ms)",
            p(c.pings, 99), p(t.pings, 99), "lower", "target: under 20 ms"),
        Row("flood_rt_p50_ms", "flood: other pane's round trip p50 (ms)",
            p(c.round_trips, 50), p(t.round_trips, 50), "lower",
            "a line to cat in another pane every 50 ms, until its output is seen"),
        Row("flood_rt_p99_ms", "flood: other pane's round trip p99 (ms)",
            p(c.round_trips, 99), p(t.round_trips, 99), "lower"),
    ]


def case_storm(ctx: Context) -> list[Row]:
    """A pane's notification storm with subscribers listening (``storm.py``); cmux only."""
    count = STORM_NOTIFICATIONS
    with ctx.cmux() as side:
        storm = storm_cmux(side, count, STORM_SUBSCRIBERS)
        ctx.backends.add(side.backend)
    mib = 1 << 20

    def p(q: float) -> float | None:
        return ms(percentile(storm.pings, q)) if storm.pings else None

    per_subscriber = sum(storm.events) / len(storm.events) if storm.events else None
    detail = {"notifications": count, "subscribers": STORM_SUBSCRIBERS,
              "events_per_subscriber": storm.events, "overflowed": storm.overflowed,
              "pings": len(storm.pings), "ping_max_ms": p(100),
              "failures": storm.failures[:20], "rss_before": storm.rss_before,
              "rss_peak": storm.rss_peak, "rss_after": storm.rss_after,
              "server_cpu_s": storm.server_cpu, "server_loop_lag_before": storm.loop_lag_before,
              "server_loop_lag_after": storm.loop_lag}
    failures = f"; failed probes: {len(storm.failures)}" if storm.failures else ""
    label = f"storm: {count:,} OSC 9 notifications, {STORM_SUBSCRIBERS} subscribers"
    return [
        Row("storm_s", f"{label} (s)", storm.seconds, None, "lower",
            "time until the pane's last line is visible; tmux has no notification events, "
            "so no tmux figure" + failures, detail),
        Row("storm_ping_p50_ms", "storm: ping p50 on another connection (ms)", p(50), None,
            "lower", "during the storm, in turn: a ping, then 10 ms reading the subscribers"),
        Row("storm_ping_p99_ms", "storm: ping p99 on another connection (ms)", p(99), None,
            "lower", "target: under 20 ms"),
        Row("storm_events", "storm: notification events per subscriber", per_subscriber,
            None, "lower", f"{storm.overflowed} subscriptions overflowed"),
        Row("storm_rss_before_mib", "storm: server RSS before (MiB)", storm.rss_before / mib,
            None, "lower"),
        Row("storm_rss_peak_mib", "storm: server RSS peak (MiB)", storm.rss_peak / mib, None,
            "lower", "VmHWM: the highest since the server started"),
        Row("storm_rss_after_mib", "storm: server RSS after, subscribers gone (MiB)",
            storm.rss_after / mib, None, "lower", "steady RSS once the pane was closed"),
    ]


CASES: dict[str, Callable[[Context], list[Row]]] = {
    "ingest": case_ingest,
    "roundtrip": case_roundtrip,
    "pings": case_pings,
    "cpu": case_cpu,
    "rss": case_rss,
    "memory": case_memory,
    "flood": case_flood,
    "scale": case_scale,
    "idle": case_idle,
    "lists": case_lists,
    "storm": case_storm,
    "detect_latency": case_detect_latency,
    "hooks": case_hooks,
    "graphics": case_graphics,
    "mcp": case_mcp,
    "fleet": case_fleet,
    "startup": case_startup,
}
