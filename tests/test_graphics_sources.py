"""Plugin graphics sources on a real server: a loose-file plugin's sources feed layers,
and each way a source can end (detached, finished, raised, stalled, bad frame, pane
closed, plugin disabled) leaves the layer as documented and closes the iterator."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_graphics import Attached

from cmux_core.errors import CmuxError
from cmux_core.testing import ServerProcess, start_server, wait_until

SOURCES = '''
import asyncio
from pathlib import Path

from cmux_core.hookspecs import hookimpl


def pixel(n):
    return {"format": "rgb", "image_width": 1, "image_height": 1,
            "data": bytes([n % 256, 0, 0])}


async def counter(pane_id, options):
    n = 0
    try:
        while True:
            n += 1
            yield pixel(n)
            await asyncio.sleep(options.get("gap", 0.01))
    finally:
        if "closed_file" in options:
            Path(options["closed_file"]).write_text(pane_id)


async def few(pane_id, options):
    for n in range(3):
        yield pixel(n)
        yield None


async def raiser(pane_id, options):
    yield pixel(1)
    raise RuntimeError("the source broke")


async def stall(pane_id, options):
    yield pixel(1)
    await asyncio.sleep(3600)


async def bad(pane_id, options):
    yield pixel(1)
    yield {"format": "gif", "image_width": 1, "image_height": 1, "data": b"x"}


@hookimpl
def cmux_register_graphics_sources(register):
    register("counter", counter, description="a red pixel, brighter each frame")
    register("few", few)
    register("raiser", raiser)
    register("stall", stall)
    register("bad", bad)
'''


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "gfx.py").write_text(SOURCES)
    with start_server(["--plugins-dir", str(plugins)],
                      env={"CMUX_EXPERIMENTAL_KITTY_GRAPHICS": "1"}) as proc:
        yield proc


def pane_of(server: ServerProcess) -> str:
    return str(server.call("pane.current")["pane"]["pane_id"])


def layers(server: ServerProcess, pane: str) -> dict[str, dict[str, Any]]:
    rows = server.call("pane.graphics.layers", {"pane_id": pane})["layers"]
    return {row["layer_id"]: row for row in rows}


def code_of(server: ServerProcess, method: str, params: dict[str, Any]) -> str:
    with pytest.raises(CmuxError) as info:
        server.call(method, params)
    return info.value.code


def test_a_source_feeds_its_layer_until_detached(server: ServerProcess,
                                                 tmp_path: Path) -> None:
    pane = pane_of(server)
    closed = tmp_path / "closed"
    result = server.call("pane.graphics.attach_source", {
        "pane_id": pane, "source": "counter", "layer_id": "meter",
        "options": {"closed_file": str(closed)},
        "placement": {"viewport_col": 2, "grid_cols": 1, "grid_rows": 1}})
    assert result == {"type": "pane_graphics_source", "pane_id": pane, "layer_id": "meter",
                      "source": "counter", "plugin_id": "gfx"}
    wait_until(lambda: layers(server, pane).get("meter", {}).get("frames", 0) >= 10,
               timeout=30)
    row = layers(server, pane)["meter"]
    assert (row["owner"], row["source"], row["format"]) == ("source:gfx/counter", "gfx/counter",
                                                            "rgb")
    assert row["placement"]["viewport_col"] == 2
    rgb = {"format": "rgb", "image_width": 1, "image_height": 1, "data_base64": "AAAA"}
    assert code_of(server, "pane.graphics.set",
                   {"pane_id": pane, "layer_id": "meter", **rgb}) == "stream_conflict"
    assert code_of(server, "pane.graphics.attach_source",
                   {"pane_id": pane, "layer_id": "meter", "source": "few"}) == "stream_conflict"
    server.call("pane.graphics.detach_source", {"pane_id": pane, "layer_id": "meter"})
    assert "meter" not in layers(server, pane)
    wait_until(closed.exists, timeout=30)
    assert closed.read_text() == pane
    assert code_of(server, "pane.graphics.detach_source",
                   {"pane_id": pane, "layer_id": "meter"}) == "graphics_source_not_attached"
    assert code_of(server, "pane.graphics.attach_source",
                   {"pane_id": pane, "source": "nope"}) == "graphics_source_not_found"
    assert code_of(server, "pane.graphics.attach_source",
                   {"pane_id": pane, "source": "few", "layer_id": "no way"}) \
        == "invalid_layer_id"


def test_an_attached_client_sees_the_source_update(server: ServerProcess) -> None:
    pane = pane_of(server)
    client = Attached(server, pane)
    try:
        client.request("attach.graphics", {"cell_width_px": 10, "cell_height_px": 20})
        server.call("pane.graphics.attach_source", {"pane_id": pane, "source": "counter",
                                                    "options": {"gap": 0.05}})
        revisions = []
        while len(revisions) < 5:
            head, body = client.next_of({"graphics"})
            assert head["format"] == "rgb" and len(body) == 3
            revisions.append(head["revision"])
        assert revisions == sorted(set(revisions))
    finally:
        client.close()


def test_a_finished_source_leaves_its_last_image(server: ServerProcess) -> None:
    pane = pane_of(server)
    server.call("pane.graphics.attach_source", {"pane_id": pane, "source": "few"})
    wait_until(lambda: layers(server, pane).get("primary", {}).get("owner", "x") is None,
               timeout=30)
    row = layers(server, pane)["primary"]
    assert (row["frames"], row["source"]) == (3, None)
    server.call("pane.graphics.clear", {"pane_id": pane})


@pytest.mark.parametrize("source", ["raiser", "bad", "stall"])
def test_a_failing_source_is_contained_and_its_layer_cleared(server: ServerProcess,
                                                             source: str) -> None:
    pane = pane_of(server)
    server.call("pane.graphics.attach_source", {"pane_id": pane, "source": source})
    # A stalled source is stopped after the plugin call budget (10 s).
    wait_until(lambda: "primary" not in layers(server, pane), timeout=40)
    plugin = next(p for p in server.call("plugin.list")["plugins"] if p["plugin_id"] == "gfx")
    assert plugin["errors"], plugin
    assert server.call("ping")["type"] == "pong"
    server.call("pane.graphics.attach_source", {"pane_id": pane, "source": "few"})


def test_a_closed_pane_or_disabled_plugin_closes_the_source(server: ServerProcess,
                                                            tmp_path: Path) -> None:
    pane = pane_of(server)
    other = str(server.call("pane.split", {})["pane"]["pane_id"])
    closed_a, closed_b = tmp_path / "a", tmp_path / "b"
    server.call("pane.graphics.attach_source", {"pane_id": other, "source": "counter",
                                                "options": {"closed_file": str(closed_a)}})
    # Only a generator that has started has a finally block to run: let each one start.
    wait_until(lambda: layers(server, other).get("primary", {}).get("frames", 0) >= 1,
               timeout=30)
    server.call("pane.close", {"pane_id": other})
    wait_until(closed_a.exists, timeout=30)
    server.call("pane.graphics.attach_source", {"pane_id": pane, "source": "counter",
                                                "options": {"closed_file": str(closed_b)}})
    wait_until(lambda: layers(server, pane).get("primary", {}).get("frames", 0) >= 1,
               timeout=30)
    server.call("plugin.disable", {"plugin_id": "gfx"})
    wait_until(closed_b.exists, timeout=30)
    assert layers(server, pane) == {}
