"""The graphics bench case runs end to end against a real server, in a tiny form.

Only that it completes with well-formed figures is checked; nothing asserts on speed.
"""

from __future__ import annotations

import sys
from pathlib import Path

# bench/ sits next to tests/ and is not an installed package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import graphics


def test_graphics_bench_small(tmp_path: Path) -> None:
    server = graphics.graphics_server(tmp_path)
    try:
        flow = graphics.source_to_client(server, 1.0)
        memory = graphics.budget_memory(server, tmp_path)
    finally:
        server.stop()
    assert flow["stored_fps"] > 0 and flow["client_fps"] > 0
    assert flow["client_fps"] <= flow["stored_fps"] * 1.5
    assert memory["refused_over_budget"] is True
    assert memory["rss_full"] > memory["rss_before"]
