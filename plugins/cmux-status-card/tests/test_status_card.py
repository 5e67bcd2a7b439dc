"""cmux-status-card: the card as an image, and as a source feeding a layer in a real server."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from cmux_core.testing import ServerProcess, start_server, wait_until

ROOT = Path(__file__).resolve().parents[1]
# importable whether or not the distribution is installed in this environment
sys.path.insert(0, str(ROOT / "src"))

import cmux_status_card  # noqa: E402
from cmux_status_card import COLOURS, Card, render  # noqa: E402


def test_card_facts_and_image() -> None:
    pane = {"agent": "claude", "agent_status": "blocked", "status_changed_at": 1000.0,
            "tokens": {"model": "opus", "cost": "$0.12"}}
    card = Card.of_pane(pane, 1000.0 + 125)
    assert card.lines() == ["claude", "blocked for 2m 05s", "cost: $0.12", "model: opus"]
    assert Card.of_pane({"pane_id": "w1:p1"}, 5.0).lines() == ["no agent", "unknown for 0s"]
    image = Image.open(io.BytesIO(render(card, 200)))
    assert image.format == "PNG" and image.size == (200, 8 * 2 + 16 * 4)
    assert image.convert("RGB").getpixel((199, image.size[1] - 1)) == COLOURS["blocked"]
    _red, (_low, green_max), _blue = image.convert("RGB").getextrema()
    assert green_max > 200  # white text drawn over the red


@pytest.fixture
def server() -> Iterator[ServerProcess]:
    srv = start_server(env={"CMUX_EXPERIMENTAL_KITTY_GRAPHICS": "1",
                            "CMUX_LOAD_PLUGINS": "cmux-status-card"})
    try:
        yield srv
    finally:
        srv.stop()


def primary(server: ServerProcess, pane: str) -> dict[str, Any]:
    layers = server.call("pane.graphics.layers", {"pane_id": pane})["layers"]
    return dict(layers[0]) if layers else {}


def test_the_card_follows_the_agent_state(server: ServerProcess) -> None:
    plugins = {p["plugin_id"]: p for p in server.call("plugin.list")["plugins"]}
    assert plugins["cmux-status-card"]["status"] == "loaded", plugins
    pane = str(server.call("pane.current")["pane"]["pane_id"])
    server.call("pane.graphics.attach_source", {"pane_id": pane, "source": "status-card",
                                                "options": {"width": 240, "interval": 30}})
    wait_until(lambda: primary(server, pane).get("frames", 0) >= 1, timeout=20)
    first = primary(server, pane)
    assert (first["format"], first["image_width"], first["source"]) == \
        ("png", 240, "cmux-status-card/status-card")
    server.call("pane.report_agent", {"pane_id": pane, "source": "custom:card",
                                      "agent": "bot", "state": "working"})
    # Redrawn for the new state, not for the time in state (its interval is 30 s).
    wait_until(lambda: primary(server, pane)["revision"] > first["revision"], timeout=10)
    server.call("pane.report_metadata", {"pane_id": pane, "source": "custom:card",
                                         "tokens": {"model": "m1"}})
    later = primary(server, pane)["revision"]
    wait_until(lambda: primary(server, pane)["revision"] > later, timeout=10)
    assert primary(server, pane)["image_height"] == 8 * 2 + 16 * 3


def test_bad_options_stop_the_source(server: ServerProcess) -> None:
    pane = str(server.call("pane.current")["pane"]["pane_id"])
    server.call("pane.graphics.attach_source", {"pane_id": pane, "source": "status-card",
                                                "options": {"width": 5}})
    wait_until(lambda: primary(server, pane) == {}, timeout=20)
    plugin = next(p for p in server.call("plugin.list")["plugins"]
                  if p["plugin_id"] == "cmux-status-card")
    assert any("width" in str(err) for err in plugin["errors"]), plugin
    assert cmux_status_card.__version__ == "0.1.0"
