"""An event storm: one pane prints 100,000 OSC 9 notifications with 50 subscribers listening.

Fifty connections subscribe to ``pane.notification``. The clock runs from the newline that
releases the storm until ``storm-done`` is visible; meanwhile one thread takes turns: a
``ping`` on another connection (timed), then 10 ms of reading every subscriber, counting
event lines. After the storm it reads the subscribers for a notification window more (the
last notification of a storm is published when its window ends). :func:`storm_cmux` returns
the ping latencies, the events each subscriber got, and the server's RSS before the
storm, its peak (``VmHWM``) and its steady RSS after the subscribers left and the pane
closed. The case itself (``case_storm`` in ``cases.py``) has no tmux half: tmux has no
notification events to subscribe to.
"""

from __future__ import annotations

import selectors
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from cmux_core.errors import CmuxError
from cmux_core.model.throttle import NOTIFICATION_WINDOW

from .cmux import CmuxSide, wait_request
from .proc import cpu_seconds, steady_rss

STORM_NOTIFICATIONS = 100_000
STORM_SUBSCRIBERS = 50
STORM_TIMEOUT = 120.0
PING_INTERVAL = 0.01
"""Seconds the subscribers are read between two pings."""

STORM_SCRIPT = """
import sys
count = int(sys.argv[1])
out = sys.stdout
out.write("ready-storm\\n")
out.flush()
sys.stdin.readline()
for i in range(count):
    out.write(f"\\x1b]9;storm notification {i}\\x07")
out.write("\\nstorm-done\\n")
out.flush()
sys.stdin.readline()
"""


def storm_argv(count: int) -> list[str]:
    """Print ``ready-storm``, wait for a newline, print ``count`` OSC 9 notifications, then
    ``storm-done``, and stay alive."""
    return [sys.executable, "-c", STORM_SCRIPT, str(count)]


def peak_rss_bytes(pid: int) -> int:
    """The highest resident set size the process has had (``VmHWM``), in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM for pid {pid}")


class Subscribers:
    """``count`` connections subscribed to ``kinds``, read by :meth:`pump` in one thread.

    ``events[i]`` counts the event lines connection ``i`` received; ``overflowed`` the
    connections the server ended with ``subscription_overflow``.
    """

    def __init__(self, path: Path, count: int, kinds: list[str]) -> None:
        request = orjson.dumps({"id": 1, "method": "events.subscribe", "params": {
            "subscriptions": [{"type": kind} for kind in kinds]}}) + b"\n"
        self.socks: list[socket.socket] = []
        self.events = [0] * count
        self.overflowed: set[int] = set()
        self._selector = selectors.DefaultSelector()
        for i in range(count):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.socks.append(sock)
            sock.connect(str(path))
            sock.sendall(request)
            reply = b""
            while not reply.endswith(b"\n"):
                chunk = sock.recv(4096)
                if not chunk:
                    raise RuntimeError("the server closed a subscriber before its reply")
                reply += chunk
            if not orjson.loads(reply).get("ok"):
                raise RuntimeError(f"events.subscribe failed: {reply!r}")
            sock.setblocking(False)
            self._selector.register(sock, selectors.EVENT_READ, i)

    def pump(self, seconds: float) -> None:
        """Read whatever arrives on every connection for ``seconds``."""
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            for key, _ in self._selector.select(remaining):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                try:
                    chunk = sock.recv(1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    self._selector.unregister(sock)
                    continue
                self.events[key.data] += chunk.count(b"\n")
                if b"subscription_overflow" in chunk:
                    self.overflowed.add(key.data)

    def close(self) -> None:
        self._selector.close()
        for sock in self.socks:
            sock.close()


@dataclass
class Storm:
    """What one storm cost: seconds until it was visible (None: not within the timeout),
    ping latencies in seconds, events per subscriber and RSS readings in bytes."""

    seconds: float | None
    pings: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    events: list[int] = field(default_factory=list)
    overflowed: int = 0
    rss_before: int = 0
    rss_peak: int = 0
    rss_after: int = 0
    server_cpu: float = 0.0
    loop_lag_before: dict[str, float] = field(default_factory=dict)
    loop_lag: dict[str, float] = field(default_factory=dict)


def storm_cmux(side: CmuxSide, count: int, subscribers: int,
               timeout: float = STORM_TIMEOUT) -> Storm:
    """Run one storm on ``side``; the pane is closed before the RSS after is read."""
    pane = side.new_pane(storm_argv(count))
    side.wait_for(pane, "ready-storm")
    listeners = Subscribers(side.server.socket_path, subscribers, ["pane.notification"])
    ping_conn = side.connect()
    result = Storm(None)

    def probe(seconds: float) -> bool:
        """Until ``seconds`` passed or the storm's end was seen (true when it was): while
        the storm runs, a ping; then read the subscribers."""
        until = time.perf_counter() + seconds
        while time.perf_counter() < until:
            if result.seconds is None:
                start = time.perf_counter()
                try:
                    ping_conn.call("ping", timeout=10.0)
                except (TimeoutError, CmuxError) as exc:
                    result.failures.append(f"{type(exc).__name__}: {exc}")
                else:
                    result.pings.append(time.perf_counter() - start)
            # Every subscriber is read while the storm runs, so none falls behind for
            # want of a reader.
            listeners.pump(PING_INTERVAL)
            if result.seconds is None:
                try:
                    side.conn.reply(0.001)
                except TimeoutError:
                    continue
                result.seconds = time.perf_counter() - began
                return True
        return False

    try:
        result.rss_before = steady_rss(side.pid)
        result.loop_lag_before = side.conn.call("server.stats").get("loop_lag", {})
        cpu_before = cpu_seconds(side.pid)
        began = time.perf_counter()
        side.send_text(pane, "\n")
        side.conn.send([wait_request(pane, "storm-done", timeout)])
        if not probe(timeout + 5):
            result.failures.append("the storm did not finish in time")
        # The last notification of a storm comes when its window ends.
        probe(NOTIFICATION_WINDOW + 0.5)
        result.server_cpu = cpu_seconds(side.pid) - cpu_before
        result.rss_peak = peak_rss_bytes(side.pid)
        result.loop_lag = side.conn.call("server.stats").get("loop_lag", {})
        result.events = list(listeners.events)
        result.overflowed = len(listeners.overflowed)
    finally:
        listeners.close()
        ping_conn.close()
    side.close_pane(pane)
    result.rss_after = steady_rss(side.pid)
    return result
