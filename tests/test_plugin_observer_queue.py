"""A plugin that falls behind its observer calls: dropped calls are counted and warned twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cmux_core.plugin_host.observers import OBSERVER_QUEUE_LIMIT, OBSERVER_RESUME
from cmux_core.testing import ServerProcess, start_server, wait_until

# Each observer call waits for the gate file: calls pile up in the plugin's queue meanwhile.
GATED = '''
import time
from pathlib import Path
from cmux_core.hookspecs import hookimpl

GATE = Path({gate!r})

@hookimpl
def cmux_on_report_metadata(pane_id, report):
    while not GATE.exists():
        time.sleep(0.01)
'''

REPORTS = OBSERVER_QUEUE_LIMIT + 300


def gated(server: ServerProcess) -> dict[str, Any]:
    listed = server.call("plugin.list")["plugins"]
    return next(p for p in listed if p["plugin_id"] == "gated")


def test_an_overflow_is_warned_as_it_starts_and_as_it_ends_with_the_count(
        tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    gate = tmp_path / "gate"
    (plugins / "gated.py").write_text(GATED.format(gate=str(gate)))
    with start_server(["--plugins-dir", str(plugins)]) as server:
        wait_until(lambda: gated(server)["status"] == "loaded", timeout=20)
        pane = server.call("pane.list")["panes"][0]["pane_id"]
        for i in range(REPORTS):
            server.call("pane.report_metadata", {
                "pane_id": pane, "source": "queue-test", "custom_status": f"step {i}"})
        full = gated(server)
        # One call is being delivered, a full queue waits behind it, the rest were dropped.
        # On a loaded machine the first delivery can outlive its budget while the reports
        # are still being made; the next one then starts, and one more report finds room.
        assert full["dropped_calls"] >= REPORTS - OBSERVER_QUEUE_LIMIT - 2
        assert [w for w in full["warnings"] if "observer queue" in w] == [
            f"observer queue full ({OBSERVER_QUEUE_LIMIT} calls); "
            f"dropping calls until it drains to {OBSERVER_RESUME}"]

        gate.touch()

        # Reports made once the queue has room again end the overflow and are delivered.
        def drained() -> bool:
            server.call("pane.report_metadata", {
                "pane_id": pane, "source": "queue-test", "custom_status": "after"})
            return any("drained" in w for w in gated(server)["warnings"])
        wait_until(drained, timeout=30)
        after = gated(server)
        queue_warnings = [w for w in after["warnings"] if "observer queue" in w]
        assert len(queue_warnings) == 2, queue_warnings
        dropped = after["dropped_calls"]
        assert queue_warnings[1].endswith(f"{dropped} calls were dropped")
        assert after["status"] == "loaded"
