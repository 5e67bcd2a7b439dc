"""Pane graphics: how fast a plugin source's frames reach an attached client, and what the
server holds with the 64 MiB image budget full.

``python -m bench --only graphics`` (or ``python -m bench.graphics``). A real server with
pane graphics on loads a loose-file plugin whose source yields 256x256 rgba frames (256 KiB
each) as fast as it is asked. A connection attached to the pane (``pane.attach`` then
``attach.graphics``) reads every frame for the measured seconds. Reported: frames per
second stored in the layer, frames per second (and MB/s) the client received, and the
server's resident memory with four 16 MiB frames held (64 MiB, the budget) over the same
server empty. Then file frames: a producer submits 1024x1024 rgba frames (4 MiB) with
``pane.graphics.stream.direct`` as fast as they are acknowledged, to a client attached with
``file_frames`` (so direct delivery is available), once on the ``primary`` layer (each frame
leased: the client is sent its path) and once on another layer (each frame copied into the
server and sent as bytes). Reported: frames per second acknowledged and received, each way.
Nothing is compared with tmux, which has no image layers.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from cmux_core.cli.attach import FrameReader
from cmux_core.errors import CmuxError
from cmux_core.testing import ServerProcess, start_server

from .context import Context
from .proc import steady_rss
from .report import Row

SIDE = 256
FRAME_BYTES = SIDE * SIDE * 4
BIG_SIDE = 2048
"""A 2048x2048 rgba frame is 16 MiB, the most one streamed frame may be."""
FILE_SIDE = 1024
"""File frames are 1024x1024 rgba: 4 MiB each."""

SOURCE = '''
from cmux_core.hookspecs import hookimpl

SIDE = {side}


async def frames(pane_id, options):
    images = [bytes([n]) * (SIDE * SIDE * 4) for n in (40, 200)]
    n = 0
    while True:
        n += 1
        yield {{"format": "rgba", "image_width": SIDE, "image_height": SIDE,
               "data": images[n % 2]}}


@hookimpl
def cmux_register_graphics_sources(register):
    register("bench-frames", frames)
'''


def graphics_server(workdir: Path) -> ServerProcess:
    plugins = workdir / "graphics-plugins"
    plugins.mkdir(exist_ok=True)
    (plugins / "bench_frames.py").write_text(SOURCE.format(side=SIDE))
    return start_server(["--plugins-dir", str(plugins)], size="120x40",
                        env={"CMUX_EXPERIMENTAL_KITTY_GRAPHICS": "1"})


def source_to_client(server: ServerProcess, seconds: float) -> dict[str, float]:
    """Attach a client that draws, attach the source, read frames for ``seconds``."""
    pane = str(server.call("pane.current")["pane"]["pane_id"])
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(str(server.socket_path))
    for n, (method, params) in enumerate([
            ("pane.attach", {"pane_id": pane, "columns": 120, "lines": 40}),
            ("attach.graphics", {"cell_width_px": 10, "cell_height_px": 20})]):
        conn.sendall(json.dumps({"id": n, "method": method, "params": params}).encode() + b"\n")
    reader = FrameReader()
    received = frames = 0
    conn.settimeout(1.0)
    server.call("pane.graphics.attach_source", {"pane_id": pane, "source": "bench-frames"})
    started = time.perf_counter()
    first = _stored(server, pane)
    while time.perf_counter() - started < seconds:
        try:
            data = conn.recv(1 << 20)
        except TimeoutError:
            continue
        if not data:
            raise RuntimeError("the server closed the attached connection")
        for header, payload in reader.feed(data):
            if header.get("frame") == "graphics":
                frames += 1
                received += len(payload)
    elapsed = time.perf_counter() - started
    stored = _stored(server, pane) - first
    server.call("pane.graphics.detach_source", {"pane_id": pane})
    conn.close()
    return {"stored_fps": stored / elapsed, "client_fps": frames / elapsed,
            "client_mb_s": received / elapsed / 1e6, "seconds": elapsed}


def _stored(server: ServerProcess, pane: str) -> int:
    layers = server.call("pane.graphics.layers", {"pane_id": pane})["layers"]
    return int(layers[0]["frames"]) if layers else 0


def budget_memory(server: ServerProcess, workdir: Path) -> dict[str, Any]:
    """Resident memory before and after filling the 64 MiB budget with four 16 MiB frames,
    and whether one more image is refused."""
    pid = server.process.pid
    pane = str(server.call("pane.current")["pane"]["pane_id"])
    frame = workdir / "graphics-frame.rgba"
    frame.write_bytes(b"\x80" * (BIG_SIDE * BIG_SIDE * 4))
    before = steady_rss(pid)
    # A stream lives as long as the connection that opened it: one connection for all.
    with server.client() as c:
        for i in range(4):
            layer = f"big{i}"
            c.call("pane.graphics.stream.open", {"pane_id": pane, "layer_id": layer})
            c.call("pane.graphics.stream.direct", {
                "pane_id": pane, "layer_id": layer, "path": str(frame),
                "image_width": BIG_SIDE, "image_height": BIG_SIDE})
        after = steady_rss(pid)
        try:
            c.call("pane.graphics.set", {"pane_id": pane, "layer_id": "over", "format": "rgb",
                                         "image_width": 1, "image_height": 1,
                                         "data_base64": "AAAA"})
            refused = False
        except CmuxError as exc:
            refused = exc.code == "graphics_budget_exceeded"
        for i in range(4):
            c.call("pane.graphics.stream.close", {"pane_id": pane, "layer_id": f"big{i}"})
    frame.unlink()
    return {"rss_before": before, "rss_full": after, "refused_over_budget": refused}


class FrameCounter:
    """Reads an attached connection's frames on a thread, counting ``graphics`` frames and
    the payload bytes they carried."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.frames = 0
        self.payload = 0
        self.stopping = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        reader = FrameReader()
        self.conn.settimeout(0.5)
        while not self.stopping:
            try:
                data = self.conn.recv(1 << 20)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            for header, payload in reader.feed(data):
                if header.get("frame") == "graphics":
                    self.frames += 1
                    self.payload += len(payload)

    def stop(self) -> None:
        self.stopping = True
        self.thread.join(5)


def direct_vs_inline(server: ServerProcess, seconds: float) -> dict[str, dict[str, float]]:
    """File frames to a client that reads files: leased on ``primary``, copied on another
    layer, ``seconds`` each; frames/s acknowledged and received, and MB/s sent as bytes."""
    pane = str(server.call("pane.current")["pane"]["pane_id"])
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(str(server.socket_path))
    for n, (method, params) in enumerate([
            ("pane.attach", {"pane_id": pane, "columns": 120, "lines": 40}),
            ("attach.graphics", {"cell_width_px": 10, "cell_height_px": 20,
                                 "file_frames": True})]):
        conn.sendall(json.dumps({"id": n, "method": method, "params": params}).encode() + b"\n")
    counter = FrameCounter(conn)
    results: dict[str, dict[str, float]] = {}
    try:
        with server.client() as c:
            deadline = time.monotonic() + 20
            info: dict[str, Any] = {}
            while not info.get("file_frame_directory"):
                if time.monotonic() > deadline:
                    raise RuntimeError("direct delivery did not become available")
                try:
                    info = c.call("pane.graphics.info", {"pane_id": pane})
                except CmuxError:
                    time.sleep(0.05)
            folder = Path(info["file_frame_directory"])
            files = []
            for n in (40, 200):
                path = folder / f"bench-{n}.rgba"
                path.write_bytes(bytes([n]) * (FILE_SIDE * FILE_SIDE * 4))
                files.append(path)
            for mode, layer in (("direct", "primary"), ("inline", "copied")):
                c.call("pane.graphics.stream.open", {"pane_id": pane, "layer_id": layer})
                before, payload = counter.frames, counter.payload
                acked = 0
                started = time.perf_counter()
                while time.perf_counter() - started < seconds:
                    c.call("pane.graphics.stream.direct", {
                        "pane_id": pane, "layer_id": layer, "path": str(files[acked % 2]),
                        "image_width": FILE_SIDE, "image_height": FILE_SIDE,
                        "sequence": acked})
                    acked += 1
                elapsed = time.perf_counter() - started
                time.sleep(0.2)  # the last frames reach the client
                rows = c.call("pane.graphics.layers", {"pane_id": pane})["layers"]
                leased = any(r["layer_id"] == layer and r["lease"] for r in rows)
                c.call("pane.graphics.stream.close", {"pane_id": pane, "layer_id": layer})
                results[mode] = {"acked_fps": acked / elapsed,
                                 "client_fps": (counter.frames - before) / elapsed,
                                 "client_mb_s": (counter.payload - payload) / elapsed / 1e6,
                                 "leased": float(leased), "seconds": elapsed}
    finally:
        counter.stop()
        conn.close()
    return results


def case_graphics(ctx: Context) -> list[Row]:
    server = graphics_server(ctx.workdir)
    try:
        flow = source_to_client(server, ctx.sizes.idle_seconds)
        memory = budget_memory(server, ctx.workdir)
        files = direct_vs_inline(server, ctx.sizes.idle_seconds / 2)
    finally:
        server.stop()
    mib = 1024 * 1024
    side = f"{FILE_SIDE}x{FILE_SIDE}"
    return [
        Row("graphics_direct_fps", f"graphics: {side} file frames/s leased (stream.direct)",
            files["direct"]["acked_fps"], None, "higher",
            f"client got {files['direct']['client_fps']:.0f}/s as paths",
            detail=files["direct"]),
        Row("graphics_inline_fps", f"graphics: {side} file frames/s copied (stream.direct)",
            files["inline"]["acked_fps"], None, "higher",
            f"client got {files['inline']['client_fps']:.0f}/s, "
            f"{files['inline']['client_mb_s']:.0f} MB/s", detail=files["inline"]),
        Row("graphics_source_fps", f"graphics: {SIDE}x{SIDE} rgba frames/s into a layer",
            flow["stored_fps"], None, "higher", "a plugin source yielding as fast as asked",
            detail=flow),
        Row("graphics_client_fps", "graphics: frames/s an attached client received",
            flow["client_fps"], None, "higher",
            f"{flow['client_mb_s']:.0f} MB/s; later frames replace ones not yet taken"),
        Row("graphics_budget_rss_mib", "graphics: server RSS growth, 64 MiB of layers (MiB)",
            (memory["rss_full"] - memory["rss_before"]) / mib, None, "lower",
            "the one more image was refused" if memory["refused_over_budget"]
            else "one more image was NOT refused", detail=memory),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.graphics")
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cmux-bench-graphics-") as workdir:
        server = graphics_server(Path(workdir))
        try:
            flow = source_to_client(server, args.seconds)
            memory = budget_memory(server, Path(workdir))
            files = direct_vs_inline(server, args.seconds / 2)
        finally:
            server.stop()
    mib = 1024 * 1024
    print(f"{SIDE}x{SIDE} rgba: {flow['stored_fps']:.0f} frames/s stored, "
          f"{flow['client_fps']:.0f} frames/s ({flow['client_mb_s']:.0f} MB/s) to the client; "
          f"RSS {memory['rss_before'] / mib:.0f} MiB empty, {memory['rss_full'] / mib:.0f} MiB "
          f"with 64 MiB of layers; one more image "
          f"{'refused' if memory['refused_over_budget'] else 'NOT refused'}")
    for mode, how in (("direct", "leased, sent as paths"), ("inline", "copied, sent as bytes")):
        got = files[mode]
        print(f"{FILE_SIDE}x{FILE_SIDE} rgba file frames {how}: {got['acked_fps']:.0f} "
              f"frames/s acknowledged, {got['client_fps']:.0f} frames/s to the client "
              f"({got['client_mb_s']:.0f} MB/s of image bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
