"""A pane that prints OSC announcements as fast as it can costs a bounded number of events.

A real server, a real PTY running ``python3 -c``: thousands of OSC 9 notifications, OSC 0
titles, OSC 9;4 progress reports and OSC 7 directories in a burst. A subscriber reading
every event line must see few events, every notification accounted for (published or
counted in a later one's ``dropped``), the final title, progress and directory, and the
server must keep answering other connections throughout.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from cmux_core.agents.tracker import AgentTracker
from cmux_core.api import wire
from cmux_core.app import connect_agents
from cmux_core.client import Client
from cmux_core.config import Settings
from cmux_core.events import EventHub
from cmux_core.model.mux import Mux
from cmux_core.testing import ServerProcess, async_wait_until, wait_until

# bench/ sits next to tests/ and is not an installed package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import storm
from bench.cmux import CmuxSide

NOTIFICATIONS = 5000
TITLES = 2000
PROGRESS = 2000
CWDS = 2000

STORM = f"""
import sys
sys.stdout.write("ready-storm\\n"); sys.stdout.flush()
sys.stdin.readline()
out = sys.stdout
for i in range(1, {NOTIFICATIONS} + 1):
    out.write(f"\\x1b]9;note {{i}}\\x07")
for i in range(1, {TITLES} + 1):
    out.write(f"\\x1b]0;title {{i}}\\x07")
for i in range(1, {PROGRESS} + 1):
    out.write(f"\\x1b]9;4;1;{{i % 100}}\\x07")
for i in range(1, {CWDS} + 1):
    out.write(f"\\x1b]7;file://host/tmp/dir{{i}}\\x07")
out.write("\\x1b]9;4;1;100\\x07\\x1b]0;title final\\x07\\x1b]7;file://host/tmp/final\\x07")
out.write("\\x1b]9;note final\\x07storm-done\\n")
out.flush()
sys.stdin.readline()
"""

KINDS = ["pane.notification", "pane.updated", "pane.progress_changed", "pane.cwd_changed"]


class Listener(threading.Thread):
    """A connection subscribed to ``kinds``, keeping every event line it reads."""

    def __init__(self, server: ServerProcess, kinds: list[str] = KINDS) -> None:
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(server.socket_path))
        self.lines = self.sock.makefile("rb")
        request = {"id": 1, "method": "events.subscribe",
                   "params": {"subscriptions": [{"type": kind} for kind in kinds]}}
        self.sock.sendall(json.dumps(request).encode() + b"\n")
        assert json.loads(self.lines.readline())["ok"] is True
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def run(self) -> None:
        for line in self.lines:
            message = json.loads(line)
            with self.lock:
                self.events.append((message["event"], message["data"]))

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.join(5.0)
        self.lines.close()
        self.sock.close()

    def of(self, kind: str, pane_id: str) -> list[dict[str, Any]]:
        with self.lock:
            return [data for event, data in self.events if event == kind
                    and (data.get("pane_id") or data.get("pane", {}).get("pane_id")) == pane_id]


def storm_pane(client: Client) -> str:
    root = client.call("tab.create", {"command": ["python3", "-c", STORM]})["root_pane"]
    pane_id = str(root["pane_id"])
    wait_until(lambda: "ready-storm" in client.call(
        "pane.read", {"pane_id": pane_id, "source": "recent"})["read"]["text"],
        message="the storm program to start")
    return pane_id


def test_an_osc_storm_costs_few_events_and_ends_on_the_final_values(
        cmux_server: ServerProcess) -> None:
    client = cmux_server.client()
    pane_id = storm_pane(client)
    listener = Listener(cmux_server)
    listener.start()
    pinger = cmux_server.client(timeout=10.0)

    client.call("pane.send_text", {"pane_id": pane_id, "text": "\n"})
    while "storm-done" not in client.call(
            "pane.read", {"pane_id": pane_id, "source": "recent"})["read"]["text"]:
        assert pinger.call("ping")["type"] == "pong"
    assert pinger.call("ping")["type"] == "pong"

    def notes() -> list[dict[str, Any]]:
        return listener.of("pane_notification", pane_id)

    # The last notification is held back at most a second, then always published.
    wait_until(lambda: notes() and notes()[-1]["body"] == "note final", timeout=30.0,
               message="the final notification")
    delivered = notes()
    assert len(delivered) < 100, f"{len(delivered)} notification events"
    # Each one dropped is counted in the next published one's data.
    accounted = len(delivered) + sum(note.get("dropped", 0) for note in delivered)
    assert accounted == NOTIFICATIONS + 1
    assert delivered[0]["body"] == "note 1"
    assert all(isinstance(note.get("dropped", 0), int) for note in delivered)

    def last(kind: str) -> dict[str, Any] | None:
        seen = listener.of(kind, pane_id)
        return seen[-1] if seen else None

    wait_until(lambda: (last("pane_updated") or {}).get("pane", {}).get("terminal_title")
               == "title final", timeout=30.0, message="the final title")
    wait_until(lambda: (last("pane_progress_changed") or {}).get("progress") == "1;100",
               timeout=30.0, message="the final progress")
    wait_until(lambda: (last("pane_cwd_changed") or {}).get("cwd") == "/tmp/final",
               timeout=30.0, message="the final directory")
    for kind in ("pane_updated", "pane_progress_changed", "pane_cwd_changed"):
        count = len(listener.of(kind, pane_id))
        assert count < 200, f"{count} {kind} events for {TITLES} changes"

    info = client.call("pane.get", {"pane_id": pane_id})["pane"]
    assert info["terminal_title"] == "title final"
    assert info["cwd"] == "/tmp/final"
    listener.close()
    pinger.close()
    client.close()


def test_lone_announcements_are_each_an_event_with_nothing_dropped(
        cmux_server: ServerProcess) -> None:
    """Outside a storm every announcement is published: one notification (with no
    ``dropped`` count), one title and one progress report."""
    client = cmux_server.client()
    root = client.call("tab.create", {"command": [
        "python3", "-c",
        "import sys; sys.stdin.readline(); "
        "sys.stdout.write('\\x1b]9;hello\\x07\\x1b]0;lone title\\x07\\x1b]9;4;1;42\\x07');"
        "sys.stdout.flush(); sys.stdin.readline()"]})["root_pane"]
    pane_id = str(root["pane_id"])
    listener = Listener(cmux_server)
    listener.start()
    client.call("pane.send_text", {"pane_id": pane_id, "text": "\n"})
    wait_until(lambda: listener.of("pane_notification", pane_id)
               and listener.of("pane_progress_changed", pane_id)
               and any(data["pane"].get("terminal_title") == "lone title"
                       for data in listener.of("pane_updated", pane_id)),
               message="the three events")
    assert listener.of("pane_notification", pane_id) == [
        {"type": "pane_notification", "pane_id": pane_id,
         "workspace_id": root["workspace_id"], "body": "hello"}]
    assert [d["progress"] for d in listener.of("pane_progress_changed", pane_id)] == ["1;42"]
    listener.close()
    client.close()


def test_a_pane_closed_in_a_storm_publishes_nothing_after_its_close(
        cmux_server: ServerProcess) -> None:
    """Announcements held back when the pane closes are never published."""
    client = cmux_server.client()
    pane_id = storm_pane(client)
    listener = Listener(cmux_server, [*KINDS, "pane.closed"])
    listener.start()
    client.call("pane.send_text", {"pane_id": pane_id, "text": "\n"})
    wait_until(lambda: len(listener.of("pane_notification", pane_id)) >= 3, timeout=30.0,
               message="notifications from the storm")
    client.call("pane.close", {"pane_id": pane_id})
    wait_until(lambda: listener.of("pane_closed", pane_id), message="pane_closed")
    # Absence can only be waited for: held announcements would come within a second.
    time.sleep(1.2)
    with listener.lock:
        kinds = [event for event, data in listener.events
                 if (data.get("pane_id") or data.get("pane", {}).get("pane_id")) == pane_id]
    assert kinds[-1] == "pane_closed"
    assert client.call("ping")["type"] == "pong"
    listener.close()
    client.close()


def test_the_bench_storm_half_runs_and_every_subscriber_gets_few_events() -> None:
    """``bench/storm.py`` in a tiny form (the bench itself is not run by the tests): no
    failed ping, no overflowed subscription, a bounded number of events each."""
    with CmuxSide("auto") as side:
        result = storm.storm_cmux(side, 3000, 5, timeout=30.0)
    assert result.seconds is not None
    assert result.failures == []
    assert result.overflowed == 0
    assert len(result.events) == 5
    assert all(0 < count < 100 for count in result.events), result.events
    assert result.pings
    assert 0 < result.rss_before <= result.rss_peak
    assert result.rss_after > 0


def test_nothing_of_a_storm_is_kept_once_it_is_over() -> None:
    """On a real mux (no server): once the last notification is out and a window has
    passed, the mux holds no throttle state for the pane."""
    script = ("import sys\nfor i in range(3000): sys.stdout.write(f'\\x1b]9;n{i}\\x07')\n"
              "sys.stdout.write('\\x1b]0;t\\x07\\x1b]9;last\\x07'); sys.stdout.flush()\n"
              "sys.stdin.readline()\n")

    async def main() -> None:
        events = EventHub(project=lambda event: wire.project(mux, tracker, event))
        mux = Mux(Settings(shell="/bin/sh"), events, "/nonexistent.sock")
        tracker = AgentTracker(mux, events)
        connect_agents(events, tracker)
        mux.create_window()
        sub = events.subscribe({"pane_notification"})
        try:
            mux.create_workspace(command=["python3", "-c", script], focus=True)
            await async_wait_until(mux.signal_throttle.active, message="a storm")
            await async_wait_until(
                lambda: sub.queue and sub.queue[-1].data["body"] == "last"
                and mux.signal_throttle.active() == 0, timeout=30.0,
                message="the last notification, then no throttle state")
            published = [p.data for p in sub.queue]
            assert len(published) < 100
            assert len(published) + sum(d.get("dropped", 0) for d in published) == 3001
        finally:
            for term in mux.close_all():
                term.kill()

    asyncio.run(main())
