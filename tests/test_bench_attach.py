"""The attach and ui bench scripts run end to end against a real server, in a tiny form.

Only that they complete and return well-formed figures is checked; nothing here asserts
on timing.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

# bench/ sits next to tests/ and is not an installed package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import attach_flood, ui_redraw
from cmux_core.testing import start_server


def test_attach_flood_small() -> None:
    server = start_server(size="120x40")
    try:
        result = attach_flood.flood(server, 2000, attached=True)
    finally:
        server.stop()
    assert result["seconds"] > 0
    assert result["frames"] >= 1 and result["bytes"] > 0
    assert result["ping_p99_ms"] >= result["ping_p50_ms"] > 0


def test_ui_redraw_small() -> None:
    server = start_server(size="120x40")
    try:
        panes = ui_redraw.setup(str(server.socket_path))
        result = asyncio.run(ui_redraw.measure(str(server.socket_path), panes, 1.0))
    finally:
        server.stop()
    assert len(panes) == ui_redraw.AGENTS
    assert result["renders"] > 0 and result["reports"] > 0
    assert result["render_p99_ms"] >= result["render_p50_ms"] > 0
