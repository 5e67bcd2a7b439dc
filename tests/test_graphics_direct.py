"""Direct file-frame delivery on a real server: the frame directory, leased frames (held as
a path, outside the image budget), their checks, and clients drawing them from the file
(``cmux attach`` with ``t=f``)."""

from __future__ import annotations

import base64
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Api, Raw
from pty_terminal import Terminal

from cmux_core.testing import ServerProcess, start_server, wait_until

MIB = 1024 * 1024
BIG = 2048
"""A 2048x2048 rgba frame is 16 MiB, the most one frame may be."""


@pytest.fixture
def runtime(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    return folder


@pytest.fixture
def server(runtime: Path) -> Iterator[ServerProcess]:
    with start_server(env={"CMUX_EXPERIMENTAL_KITTY_GRAPHICS": "1",
                           "XDG_RUNTIME_DIR": str(runtime)}) as srv:
        yield srv


@pytest.fixture
def api(server: ServerProcess) -> Iterator[Api]:
    with Api(server) as conn:
        yield conn


class Attached(Raw):
    """A raw connection attached to a pane that draws graphics, reading frames."""

    def __init__(self, server: ServerProcess, pane: str, *, files: bool) -> None:
        super().__init__(server.socket_path, timeout=20)
        self.send_request("pane.attach", "pane.attach",
                          {"pane_id": pane, "columns": 80, "lines": 24})
        self.send_request("attach.graphics", "attach.graphics",
                          {"cell_width_px": 10, "cell_height_px": 20, "file_frames": files})
        self.next_of("attach.graphics")

    def item(self) -> tuple[dict[str, Any], bytes]:
        head = self.line()
        return head, self.take(int(head.get("length", 0)) if "frame" in head else 0)

    def next_of(self, kind: str) -> tuple[dict[str, Any], bytes]:
        """The next ``kind`` frame, or the reply to the request with id ``kind``."""
        while True:
            head, body = self.item()
            if head.get("frame") == kind or head.get("id") == kind:
                assert head.get("ok", True), head
                return head, body


def pane_of(api: Api) -> str:
    return api.focused_pane()


def direct_available(api: Api, pane: str) -> bool:
    """Whether ``pane.graphics.info`` names a frame directory (an error: no)."""
    reply = api.request("pane.graphics.info", {"pane_id": pane})
    return bool(reply["ok"] and reply["result"]["file_frame_directory"])


def frame_dir(api: Api, pane: str) -> Path:
    folder = api("pane.graphics.info", {"pane_id": pane})["file_frame_directory"]
    assert folder
    return Path(folder)


def write_rgba(path: Path, width: int, height: int, pixel: bytes = b"\x10\x20\x30\xff"
               ) -> Path:
    path.write_bytes(pixel * (width * height))
    return path


def direct(api: Api, pane: str, path: Path | str, width: int, height: int,
           **extra: Any) -> dict[str, Any]:
    return api.request("pane.graphics.stream.direct", {
        "pane_id": pane, "owner": "painter", "path": str(path), "image_width": width,
        "image_height": height, **extra})


def layer(api: Api, pane: str, layer_id: str = "primary") -> dict[str, Any]:
    rows = api("pane.graphics.layers", {"pane_id": pane})["layers"]
    return dict(next(row for row in rows if row["layer_id"] == layer_id))


def test_info_names_the_frame_directory_while_a_client_reads_files(
        server: ServerProcess, api: Api, runtime: Path) -> None:
    pane = pane_of(api)
    plain = Attached(server, pane, files=False)
    info = api("pane.graphics.info", {"pane_id": pane})
    assert (info["file_frame_directory"], info["file_frame_formats"],
            info["file_frame_max_bytes"], info["file_frame_damage"],
            info["file_frame_transport"]) == (None, [], None, False, None)
    reader = Attached(server, pane, files=True)
    info = api("pane.graphics.info", {"pane_id": pane})
    folder = Path(info["file_frame_directory"])
    assert folder.parent == runtime and folder.name.startswith("cmux-frames-")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and folder.is_dir()
    assert (info["file_frame_formats"], info["file_frame_max_bytes"],
            info["file_frame_damage"], info["file_frame_transport"]) == \
        (["rgba", "bgra"], 16 * MIB, False, "direct-kitty")
    # Another pane has no client that reads files.
    other = str(api("pane.split", {"pane_id": pane, "direction": "right"})["pane"]["pane_id"])
    assert api("pane.graphics.info", {"pane_id": other})["file_frame_directory"] is None
    reader.close()
    wait_until(lambda: not direct_available(api, pane), timeout=30)
    plain.close()
    (folder / "left-over.rgba").write_bytes(b"\0" * 4)
    server.stop()
    assert not folder.exists()


def test_a_leased_frame_holds_no_bytes_and_fits_a_full_budget(
        server: ServerProcess, api: Api, tmp_path: Path) -> None:
    pane = pane_of(api)
    outside = write_rgba(tmp_path / "big.rgba", BIG, BIG)
    for i in range(4):  # 4 x 16 MiB copied: the 64 MiB budget is full
        api("pane.graphics.stream.open", {"pane_id": pane, "layer_id": f"b{i}",
                                          "owner": "painter"})
        assert direct(api, pane, outside, BIG, BIG, layer_id=f"b{i}")["ok"]
    api("pane.graphics.stream.open", {"pane_id": pane, "owner": "painter"})
    reader = Attached(server, pane, files=True)
    try:
        folder = frame_dir(api, pane)
        leased = write_rgba(folder / "frame-1.rgba", BIG, BIG)
        reply = direct(api, pane, leased, BIG, BIG, sequence=7, revision=3)
        assert reply["result"] == {"type": "pane_graphics_frame_ack", "sequence": 7,
                                   "revision": 3}
        row = layer(api, pane)
        assert row["bytes"] == 0 and row["lease"] == {"path": str(leased), "bytes": 16 * MIB}
        rows = api("pane.graphics.layers", {"pane_id": pane})["layers"]
        assert sum(r["bytes"] for r in rows) == 64 * MIB
        head, body = reader.next_of("graphics")
        while head["layer_id"] != "primary":
            head, body = reader.next_of("graphics")
        assert (head["path"], head["bytes"], head["format"], body) == \
            (str(leased), 16 * MIB, "rgba", b"")
        assert "length" not in head
        # The same frame on another layer is copied, and the budget refuses it.
        api("pane.graphics.stream.open", {"pane_id": pane, "layer_id": "more",
                                          "owner": "painter"})
        assert direct(api, pane, leased, BIG, BIG, layer_id="more")["error"]["code"] == \
            "graphics_budget_exceeded"
    finally:
        reader.close()
    # With no client reading files, the primary frame is copied too: over the budget.
    wait_until(lambda: not direct_available(api, pane), timeout=30)
    assert direct(api, pane, leased, BIG, BIG)["error"]["code"] == "graphics_budget_exceeded"
    assert layer(api, pane)["lease"] == {"path": str(leased), "bytes": 16 * MIB}


def test_frames_that_cannot_be_leased_are_refused_and_change_nothing(
        server: ServerProcess, api: Api, tmp_path: Path) -> None:
    pane = pane_of(api)
    reader = Attached(server, pane, files=True)
    try:
        folder = frame_dir(api, pane)
        api("pane.graphics.stream.open", {"pane_id": pane, "owner": "painter"})
        good = write_rgba(folder / "good.rgba", 2, 2)
        assert direct(api, pane, good, 2, 2)["ok"]
        before = layer(api, pane)
        outside = write_rgba(tmp_path / "outside.rgba", 2, 2)
        (folder / "link-out.rgba").symlink_to(outside)
        (folder / "link-in.rgba").symlink_to(good)
        (folder / "away").symlink_to(tmp_path, target_is_directory=True)
        (folder / "sub").mkdir()
        (folder / "sub.rgba").mkdir()
        write_rgba(folder / "short.rgba", 2, 1)
        bad = {
            "relative": "good.rgba",
            "symlink out": str(folder / "link-out.rgba"),
            "symlink in": str(folder / "link-in.rgba"),
            "through a symlinked folder": str(folder / "away" / "outside.rgba"),
            "wrong size": str(folder / "short.rgba"),
            "a directory": str(folder / "sub.rgba"),
            "missing": str(folder / "missing.rgba"),
        }
        for why, path in bad.items():
            error = direct(api, pane, path, 2, 2)["error"]
            assert error["code"] == "invalid_frame_file", (why, error)
            assert layer(api, pane) == before, why
        assert direct(api, pane, folder / "short.rgba", 2, 1)["ok"]  # the right size
        # A frame from outside the directory, however written, is copied, not leased.
        for path in (outside, f"{folder}/sub/../{os.path.relpath(outside, folder)}"):
            assert direct(api, pane, path, 2, 2)["ok"]
            assert layer(api, pane)["lease"] is None and layer(api, pane)["bytes"] == 16
        # Other layers copy from anywhere, counted in bytes.
        api("pane.graphics.stream.open", {"pane_id": pane, "layer_id": "copy",
                                          "owner": "painter"})
        assert direct(api, pane, outside, 2, 2, layer_id="copy")["ok"]
        assert layer(api, pane, "copy")["bytes"] == 16 and layer(api, pane, "copy")[
            "lease"] is None
        too_big = direct(api, pane, good, BIG, BIG + 1)["error"]
        assert too_big["code"] == "invalid_image"
    finally:
        reader.close()


def test_a_lease_ends_with_the_next_frame_and_the_stream(
        server: ServerProcess, api: Api) -> None:
    pane = pane_of(api)
    reader = Attached(server, pane, files=True)
    plain = Attached(server, pane, files=False)
    try:
        folder = frame_dir(api, pane)
        api("pane.graphics.stream.open", {"pane_id": pane, "owner": "painter"})
        first = write_rgba(folder / "a.rgba", 2, 1, b"\x01\x02\x03\xff")
        assert direct(api, pane, first, 2, 1)["ok"]
        head, body = plain.next_of("graphics")  # a client that cannot read files: bytes
        assert "path" not in head and body == b"\x01\x02\x03\xff" * 2
        second = write_rgba(folder / "b.rgba", 2, 1, b"\x04\x05\x06\xff")
        assert direct(api, pane, second, 2, 1, format="bgra")["ok"]
        assert layer(api, pane)["lease"]["path"] == str(second)
        head, body = plain.next_of("graphics")
        assert head["format"] == "bgra" and body == b"\x04\x05\x06\xff" * 2
        head, _ = reader.next_of("graphics")
        while head["revision"] != layer(api, pane)["revision"]:
            head, _ = reader.next_of("graphics")
        assert "path" not in head  # bgra goes as bytes; the terminal takes no bgra file
        api("pane.graphics.stream.close", {"pane_id": pane, "owner": "painter"})
        assert api("pane.graphics.layers", {"pane_id": pane})["layers"] == []
        assert reader.next_of("graphics_clear")[0]["layer_id"] == "primary"
        assert first.exists() and second.exists()  # the producer's files stay its own
    finally:
        reader.close()
        plain.close()


def shown(term: Terminal) -> list[dict[str, str]]:
    """The keys of every image the client transmitted and showed (``a=T``)."""
    return [keys for keys, _ in term.apcs() if keys.get("a") == "T"]


def test_cmux_attach_has_the_terminal_load_leased_frames_from_their_files(
        server: ServerProcess, api: Api) -> None:
    pane = pane_of(api)
    # A kitty terminal that loads files, of 24 by 80 cells of 10 by 20 pixels.
    term = Terminal(server, "attach", files=True, size=(24, 80), cell=(10, 20))
    try:
        term.until(lambda: direct_available(api, pane))
        folder = frame_dir(api, pane)
        api("pane.graphics.stream.open", {"pane_id": pane, "owner": "painter"})
        leased = write_rgba(folder / "f.rgba", 3, 2)
        assert direct(api, pane, leased, 3, 2, placement={"viewport_col": 1,
                                                         "viewport_row": 2})["ok"]
        term.until(lambda: any(k.get("t") == "f" for k in shown(term)))
        keys, payload = next((k, p) for k, p in term.apcs()
                             if k.get("a") == "T" and k.get("t") == "f")
        assert (keys["f"], keys["s"], keys["v"], keys["S"], keys["m"]) == \
            ("32", "3", "2", "24", "0")
        assert base64.b64decode(payload).decode() == str(leased)
        assert b"\x1b7\x1b[3;2H\x1b_G" + b"a=T" in term.out
        image_id = keys["i"]
        # bgra has no file format in kitty: sent inline, converted to rgba.
        swapped = write_rgba(folder / "g.rgba", 1, 1, b"\x01\x02\x03\xff")
        assert direct(api, pane, swapped, 1, 1, format="bgra")["ok"]
        term.until(lambda: len(shown(term)) >= 2)
        keys, payload = [(k, p) for k, p in term.apcs() if k.get("a") == "T"][-1]
        assert "t" not in keys and base64.b64decode(payload) == b"\x03\x02\x01\xff"
        api("pane.graphics.stream.close", {"pane_id": pane, "owner": "painter"})
        term.until(lambda: any(k.get("a") == "d" and k.get("i") == image_id
                               for k, _ in term.apcs()))
    finally:
        term.close()


def test_the_bench_measures_leased_and_copied_file_frames(server: ServerProcess) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/ is not installed
    from bench.graphics import direct_vs_inline

    got = direct_vs_inline(server, 0.5)
    assert got["direct"]["leased"] == 1.0 and got["inline"]["leased"] == 0.0
    assert got["direct"]["acked_fps"] > 0 and got["inline"]["acked_fps"] > 0
    assert got["direct"]["client_mb_s"] == 0 and got["inline"]["client_mb_s"] > 0
