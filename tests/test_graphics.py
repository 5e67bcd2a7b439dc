"""Pane graphics on a real server: layers, limits, every error code, streams, and the
``graphics`` frames an attached client that draws receives."""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path
from typing import Any

import pytest
from conftest import Api, Raw

from cmux_core.testing import ServerProcess, wait_until

ON = pytest.mark.cmux_server(env={"CMUX_EXPERIMENTAL_KITTY_GRAPHICS": "1"})


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def png(width: int = 2, height: int = 1) -> bytes:
    """A real PNG of ``width`` x ``height`` red pixels."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return (len(body).to_bytes(4, "big") + kind + body
                + zlib.crc32(kind + body).to_bytes(4, "big"))
    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 2, 0, 0, 0])
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))


def rgba(width: int, height: int) -> dict[str, Any]:
    return {"format": "rgba", "image_width": width, "image_height": height,
            "data_base64": b64(b"\x10\x20\x30\xff" * (width * height))}


def test_every_method_answers_feature_disabled_when_off(api: Api) -> None:
    pane = api.focused_pane()
    calls: list[tuple[str, dict[str, Any]]] = [
        ("pane.graphics.set", {"pane_id": pane, **rgba(1, 1)}),
        ("pane.graphics.clear", {"pane_id": pane}),
        ("pane.graphics.info", {"pane_id": pane}),
        ("pane.graphics.layers", {"pane_id": pane}),
        ("pane.graphics.stream.open", {"pane_id": pane}),
        ("pane.graphics.stream.set", {"pane_id": pane, **rgba(1, 1)}),
        ("pane.graphics.stream.direct", {"pane_id": pane, "path": "/nonexistent",
                                         "image_width": 1, "image_height": 1}),
        ("pane.graphics.stream.close", {"pane_id": pane}),
    ]
    for method, params in calls:
        assert api.error(method, params)["code"] == "feature_disabled", method


def test_config_file_switch_turns_graphics_on(tmp_path: Path) -> None:
    from cmux_core.config import ConfigError
    from cmux_core.config_file import load_settings
    path = tmp_path / "config.toml"
    path.write_text("[experimental]\nkitty_graphics = true\n")
    assert load_settings(path).kitty_graphics
    path.write_text("[experimental]\nkitty_graphics = \"yes\"\n")
    with pytest.raises(ConfigError, match="kitty_graphics"):
        load_settings(path)


@ON
def test_set_each_format_and_list_layers(api: Api) -> None:
    pane = api.focused_pane()
    assert api("pane.graphics.set", {"pane_id": pane, **rgba(2, 2)}) == {"type": "ok"}
    api("pane.graphics.set", {"pane_id": pane, "layer_id": "a.b_c:d-1", "format": "rgb",
                              "image_width": 3, "image_height": 1,
                              "data_base64": b64(b"\x01\x02\x03" * 3)})
    api("pane.graphics.set", {"pane_id": pane, "layer_id": "bgra", "format": "bgra",
                              "image_width": 1, "image_height": 2,
                              "data_base64": b64(b"\x00" * 8),
                              "placement": {"viewport_col": -1, "viewport_row": 2,
                                            "grid_cols": 4, "grid_rows": 2}})
    api("pane.graphics.set", {"pane_id": pane, "layer_id": "card", "format": "png",
                              "image_width": 2, "image_height": 1, "data_base64": b64(png())})
    api("pane.graphics.set", {"pane_id": pane, **rgba(1, 1)})
    layers = {row["layer_id"]: row for row in
              api("pane.graphics.layers", {"pane_id": pane})["layers"]}
    assert sorted(layers) == ["a.b_c:d-1", "bgra", "card", "primary"]
    primary = layers["primary"]
    assert (primary["format"], primary["image_width"], primary["image_height"],
            primary["bytes"], primary["frames"], primary["revision"]) == ("rgba", 1, 1, 4, 2, 2)
    assert primary["owner"] is None and primary["source"] is None
    assert layers["bgra"]["placement"] == {"viewport_col": -1, "viewport_row": 2,
                                           "grid_cols": 4, "grid_rows": 2}
    assert api("pane.graphics.clear", {"pane_id": pane, "layer_id": "card"}) == {"type": "ok"}
    api("pane.graphics.clear", {"pane_id": pane})
    api("pane.graphics.clear", {"pane_id": pane, "layer_id": "never-was"})
    rows = api("pane.graphics.layers", {"pane_id": pane})["layers"]
    assert [r["layer_id"] for r in rows] == ["a.b_c:d-1", "bgra"]


@ON
def test_bad_input_answers_the_seed_codes_and_changes_nothing(api: Api) -> None:
    pane = api.focused_pane()
    api("pane.graphics.set", {"pane_id": pane, **rgba(1, 1)})

    def code(method: str, **params: Any) -> str:
        return str(api.error(method, {"pane_id": pane, **params})["code"])

    assert api.error("pane.graphics.set", {"pane_id": "w9:p9", **rgba(1, 1)})["code"] \
        == "pane_not_found"
    for method in ("pane.graphics.clear", "pane.graphics.info", "pane.graphics.layers"):
        assert api.error(method, {"pane_id": "w9:p9"})["code"] == "pane_not_found"
    for bad in ("", "has space", "x" * 65, "slash/no", "é"):
        assert code("pane.graphics.set", layer_id=bad, **rgba(1, 1)) == "invalid_layer_id"
        assert code("pane.graphics.clear", layer_id=bad) == "invalid_layer_id"
    api("pane.graphics.set", {"pane_id": pane, "layer_id": "x" * 64, **rgba(1, 1)})
    api("pane.graphics.clear", {"pane_id": pane, "layer_id": "x" * 64})
    assert code("pane.graphics.set", **{**rgba(1, 1), "data_base64": "!!notbase64"}) \
        == "invalid_image"
    assert code("pane.graphics.set", **{**rgba(2, 2), "image_width": 3}) == "invalid_image"
    assert code("pane.graphics.set", **{**rgba(1, 1), "image_width": 0}) == "invalid_image"
    assert code("pane.graphics.set", **{**rgba(1, 1), "data_base64": ""}) == "invalid_image"
    assert code("pane.graphics.set", format="png", image_width=1, image_height=1,
                data_base64=b64(b"GIF89a....")) == "invalid_image"
    assert code("pane.graphics.set", format="rgb", image_width=60000, image_height=60000,
                data_base64=b64(b"\x00" * 3)) == "invalid_image"
    big = 512 * 1024 + 4
    assert code("pane.graphics.set", format="rgba", image_width=big // 4, image_height=1,
                data_base64=b64(b"\x00" * big)) == "image_too_large"
    err = api.error("pane.graphics.set", {"pane_id": pane, **{**rgba(1, 1), "format": "gif"}})
    assert err["code"] == "invalid_params" and "format" in err["message"]
    rows = api("pane.graphics.layers", {"pane_id": pane})["layers"]
    assert [(r["layer_id"], r["revision"]) for r in rows] == [("primary", 1)]


@ON
def test_sixteen_layers_per_pane_and_sixty_four_per_server(api: Api) -> None:
    panes = [api.focused_pane()]
    for _ in range(4):
        panes.append(api.run(["sh"]))
    for i in range(16):
        api("pane.graphics.set", {"pane_id": panes[0], "layer_id": f"l{i}", **rgba(1, 1)})
    err = api.error("pane.graphics.set", {"pane_id": panes[0], "layer_id": "l16", **rgba(1, 1)})
    assert err["code"] == "layer_limit"
    # Replacing an existing layer's image is no new layer.
    api("pane.graphics.set", {"pane_id": panes[0], "layer_id": "l3", **rgba(1, 1)})
    for pane in panes[1:4]:
        for i in range(16):
            api("pane.graphics.set", {"pane_id": pane, "layer_id": f"l{i}", **rgba(1, 1)})
    err = api.error("pane.graphics.set", {"pane_id": panes[4], **rgba(1, 1)})
    assert err["code"] == "layer_limit"
    assert api.error("pane.graphics.stream.open", {"pane_id": panes[4]})["code"] == "layer_limit"
    # A closed pane's layers are freed.
    api("pane.close", {"pane_id": panes[1]})
    api("pane.graphics.set", {"pane_id": panes[4], **rgba(1, 1)})


@ON
def test_sixty_four_mib_across_layers(api: Api, tmp_path: Path) -> None:
    pane = api.focused_pane()
    frame = tmp_path / "frame.rgba"
    frame.write_bytes(b"\x7f" * (2048 * 2048 * 4))  # 16 MiB, the most one frame may be
    for i in range(4):
        layer = f"big{i}"
        api("pane.graphics.stream.open", {"pane_id": pane, "layer_id": layer})
        ack = api("pane.graphics.stream.direct", {
            "pane_id": pane, "layer_id": layer, "path": str(frame), "image_width": 2048,
            "image_height": 2048, "sequence": i, "revision": 10 + i})
        assert ack == {"type": "pane_graphics_frame_ack", "sequence": i, "revision": 10 + i}
    err = api.error("pane.graphics.set", {"pane_id": pane, "layer_id": "one-more", **rgba(1, 1)})
    assert err["code"] == "graphics_budget_exceeded"
    api("pane.graphics.stream.close", {"pane_id": pane, "layer_id": "big0"})
    api("pane.graphics.set", {"pane_id": pane, "layer_id": "one-more", **rgba(1, 1)})


@ON
def test_streams_own_their_layer(api: Api, cmux_server: ServerProcess, tmp_path: Path) -> None:
    pane = api.focused_pane()
    other = Api(cmux_server)
    try:
        assert api.error("pane.graphics.stream.open", {"pane_id": pane, "owner": ""})["code"] \
            == "invalid_stream"
        assert api.error("pane.graphics.stream.set", {"pane_id": pane, **rgba(1, 1)})["code"] \
            == "stream_closed"
        api("pane.graphics.stream.open", {"pane_id": pane, "owner": "painter"})
        assert other.error("pane.graphics.stream.open", {"pane_id": pane})["code"] \
            == "stream_conflict"
        assert other.error("pane.graphics.set", {"pane_id": pane, **rgba(1, 1)})["code"] \
            == "stream_conflict"
        assert other.error("pane.graphics.clear", {"pane_id": pane})["code"] == "stream_conflict"
        assert other.error("pane.graphics.stream.set", {"pane_id": pane, "owner": "someone",
                                                        **rgba(1, 1)})["code"] == "stream_conflict"
        api("pane.graphics.stream.set", {"pane_id": pane, "owner": "painter", **rgba(2, 1)})
        big = 600 * 1024
        assert api("pane.graphics.stream.set", {
            "pane_id": pane, "owner": "painter", "format": "rgba", "image_width": big // 4,
            "image_height": 1, "data_base64": b64(b"\x01" * big)}) == {"type": "ok"}
        row = api("pane.graphics.layers", {"pane_id": pane})["layers"][0]
        assert (row["owner"], row["live"], row["frames"], row["bytes"]) == \
            ("painter", True, 2, big)
        wrong = tmp_path / "short.rgba"
        wrong.write_bytes(b"\x00" * 7)
        direct = {"pane_id": pane, "owner": "painter", "image_width": 1, "image_height": 2}
        assert api.error("pane.graphics.stream.direct", {**direct, "path": str(wrong)})["code"] \
            == "invalid_frame_file"
        assert api.error("pane.graphics.stream.direct", {
            **direct, "path": str(tmp_path / "missing")})["code"] == "invalid_frame_file"
        assert api.error("pane.graphics.stream.direct", {
            **direct, "path": str(wrong), "image_width": 0})["code"] == "invalid_image"
        assert api.error("pane.graphics.stream.direct", {
            **direct, "layer_id": "nope", "path": str(wrong)})["code"] == "stream_closed"
        # Closing from another owner is a silent no-op.
        assert other("pane.graphics.stream.close", {"pane_id": pane, "owner": "x"}) == \
            {"type": "ok"}
        assert len(api("pane.graphics.layers", {"pane_id": pane})["layers"]) == 1
        api("pane.graphics.stream.close", {"pane_id": pane, "owner": "painter"})
        assert api("pane.graphics.layers", {"pane_id": pane})["layers"] == []
        assert api.error("pane.graphics.stream.close", {"pane_id": pane, "layer_id": "a b"}
                         )["code"] == "invalid_layer_id"
        assert api.error("pane.graphics.stream.close", {"pane_id": "w9:p9"})["code"] \
            == "pane_not_found"
    finally:
        other.close()


@ON
def test_a_stream_whose_connection_left_is_reclaimed(api: Api,
                                                     cmux_server: ServerProcess) -> None:
    pane = api.focused_pane()
    streamer = Api(cmux_server)
    streamer("pane.graphics.stream.open", {"pane_id": pane})
    streamer("pane.graphics.stream.set", {"pane_id": pane, **rgba(1, 1)})
    assert api.error("pane.graphics.set", {"pane_id": pane, **rgba(1, 1)})["code"] \
        == "stream_conflict"
    streamer.close()

    def reclaimed() -> bool:
        reply = api.request("pane.graphics.set", {"pane_id": pane, **rgba(3, 1)})
        return bool(reply["ok"])
    wait_until(reclaimed, timeout=30)
    row = api("pane.graphics.layers", {"pane_id": pane})["layers"][0]
    assert (row["owner"], row["image_width"], row["frames"]) == (None, 3, 1)


class Attached(Raw):
    """A raw connection attached to a pane, reading frames."""

    def __init__(self, server: ServerProcess, pane: str) -> None:
        super().__init__(server.socket_path)
        self.request("pane.attach", {"pane_id": pane, "columns": 80, "lines": 24})

    def request(self, method: str, params: dict[str, Any]) -> None:
        """Send ``method``; its reply carries the method's name as its id."""
        self.send_request(method, method, params)

    def item(self) -> tuple[dict[str, Any], bytes]:
        head = self.line()
        return head, self.take(int(head.get("length", 0)))

    def next_of(self, kinds: set[str]) -> tuple[dict[str, Any], bytes]:
        while True:
            head, body = self.item()
            if head.get("frame") in kinds or ("id" in head and "frame" not in head
                                              and "reply" in kinds):
                return head, body


@ON
def test_an_attached_client_that_draws_gets_graphics_frames(api: Api,
                                                            cmux_server: ServerProcess) -> None:
    pane = api.focused_pane()
    assert api.error("pane.graphics.info", {"pane_id": pane})["code"] == "cell_size_unavailable"
    api("pane.graphics.set", {"pane_id": pane, "layer_id": "early", **rgba(1, 1)})
    client = Attached(cmux_server, pane)
    try:
        client.request("attach.graphics", {"cell_width_px": 9, "cell_height_px": 18})
        head, body = client.next_of({"graphics"})
        assert (head["layer_id"], head["format"], head["image_width"], body) == \
            ("early", "rgba", 1, b"\x10\x20\x30\xff")
        info = api("pane.graphics.info", {"pane_id": pane})
        assert (info["cell_width_px"], info["cell_height_px"], info["pane_visible"],
                info["max_layers_per_pane"]) == (9, 18, True, 16)
        assert info["file_frame_directory"] is None and info["file_frame_formats"] == []
        api("pane.graphics.set", {"pane_id": pane, "format": "png", "image_width": 2,
                                  "image_height": 1, "data_base64": b64(png()),
                                  "placement": {"viewport_col": 3, "viewport_row": 1,
                                                "grid_cols": 2, "grid_rows": 1}})
        head, body = client.next_of({"graphics"})
        assert head["layer_id"] == "primary" and body == png()
        assert head["placement"] == {"viewport_col": 3, "viewport_row": 1, "grid_cols": 2,
                                     "grid_rows": 1}
        api("pane.graphics.clear", {"pane_id": pane, "layer_id": "early"})
        head, _ = client.next_of({"graphics_clear"})
        assert head["layer_id"] == "early"
    finally:
        client.close()
    wait_until(lambda: api.request("pane.graphics.info", {"pane_id": pane}).get(
        "error", {}).get("code") == "cell_size_unavailable", timeout=30)


@ON
def test_pane_visible_follows_the_active_workspace(api: Api,
                                                   cmux_server: ServerProcess) -> None:
    pane = api.focused_pane()
    client = Attached(cmux_server, pane)
    try:
        client.request("attach.graphics", {"cell_width_px": 8, "cell_height_px": 16})
        wait_until(lambda: api.request("pane.graphics.info", {"pane_id": pane})["ok"],
                   timeout=30)
        api("workspace.create", {"focus": True})
        assert api("pane.graphics.info", {"pane_id": pane})["pane_visible"] is False
    finally:
        client.close()


class FrameStream(Raw):
    """A dedicated connection speaking the graphics frame protocol."""

    def __init__(self, server: ServerProcess, pane: str, **params: Any) -> None:
        super().__init__(server.socket_path)
        self.send_request("s1", "pane.graphics.stream", {"pane_id": pane, **params})
        self.reply = self.line()

    def frame(self, data: bytes, fmt: str = "rgba", width: int = 1, height: int = 1,
              **extra: Any) -> None:
        header = {"format": fmt, "image_width": width, "image_height": height,
                  "data_length": len(data), **extra}
        self.sock.sendall(b"\n" + json.dumps(header).encode() + b"\n" + data)

    def closed(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except TimeoutError:
            return False


@ON
def test_the_frame_protocol_streams_into_a_layer(api: Api, cmux_server: ServerProcess) -> None:
    pane = api.focused_pane()
    api("pane.graphics.set", {"pane_id": pane, **rgba(1, 1)})
    stream = FrameStream(cmux_server, pane)
    try:
        assert stream.reply == {"id": "s1", "ok": True, "result": {"type": "ok"}}
        # The layer's earlier image is gone; the stream owns the layer.
        row = api("pane.graphics.layers", {"pane_id": pane})["layers"][0]
        assert (row["frames"], row["live"], row["format"]) == (0, True, None)
        assert row["owner"].startswith("conn-")
        assert api.error("pane.graphics.set", {"pane_id": pane, **rgba(1, 1)})["code"] \
            == "stream_conflict"
        assert api.error("pane.graphics.stream", {"pane_id": pane})["code"] \
            == "stream_conflict"
        pixels = bytes(range(256)) * 4 + b"\n" * 1024  # newlines inside the body are data
        stream.frame(pixels, width=16, height=32)
        stream.frame(png(), fmt="png", width=2, height=1,
                     placement={"viewport_col": 1, "viewport_row": 1})
        wait_until(lambda: api("pane.graphics.layers", {"pane_id": pane})["layers"][0]
                   ["frames"] == 2, timeout=30)
        row = api("pane.graphics.layers", {"pane_id": pane})["layers"][0]
        assert (row["format"], row["bytes"], row["placement"]["viewport_col"]) == \
            ("png", len(png()), 1)
    finally:
        stream.close()
    wait_until(lambda: api("pane.graphics.layers", {"pane_id": pane})["layers"] == [],
               timeout=30)


@ON
def test_a_bad_frame_ends_the_stream_with_one_error(api: Api,
                                                    cmux_server: ServerProcess) -> None:
    pane = api.focused_pane()
    cases: list[tuple[bytes, str]] = [
        (b"{not json\n", "invalid_frame"),
        (json.dumps({"format": "rgba", "image_width": 1, "image_height": 1,
                     "data_length": 0}).encode() + b"\n", "invalid_frame"),
        (json.dumps({"format": "rgba", "image_width": 1, "image_height": 1,
                     "data_length": 16 * 1024 * 1024 + 1}).encode() + b"\n", "image_too_large"),
        (json.dumps({"format": "rgba", "image_width": 2, "image_height": 1,
                     "data_length": 4}).encode() + b"\n\x00\x00\x00\x00", "invalid_image"),
    ]
    for raw, code in cases:
        stream = FrameStream(cmux_server, pane, layer_id="s")
        try:
            assert stream.reply["ok"] is True
            stream.sock.sendall(raw)
            error = stream.line()
            assert (error["id"], error["ok"], error["error"]["code"]) == ("s1", False, code)
            wait_until(stream.closed, timeout=30)
        finally:
            stream.close()
        wait_until(lambda: api("pane.graphics.layers", {"pane_id": pane})["layers"] == [],
                   timeout=30)
    off = FrameStream(cmux_server, "w9:p9")
    assert off.reply["error"]["code"] == "pane_not_found"
    off.close()
