"""``python -m bench.attach_flood``: a pane printing fast with a client attached.

A real server's pane runs ``seq 1 N`` (``--lines``, default 3,000,000: about 23 MB) while
an attached connection (``pane.attach``, screen frames, 120x40) reads every frame and
another connection sends a ``ping`` every 10 ms. Reported: the time until the last number
is on the pane, the same without anyone attached, the frames and bytes the attached client
received, and ping p50/p99 while attached.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time

from cmux_core.cli.attach import FrameReader
from cmux_core.client import Client
from cmux_core.testing import ServerProcess, start_server

from .context import ms, percentile


def flood(server: ServerProcess, lines: int, attached: bool) -> dict[str, float]:
    pane = str(server.call("pane.split", {"command": ["/bin/sh"]})["pane"]["pane_id"])
    done = f"flood-{lines}-done"
    conn: socket.socket | None = None
    frames = received = 0
    reader = FrameReader()
    if attached:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(str(server.socket_path))
        conn.sendall(json.dumps({"id": 1, "method": "pane.attach", "params": {
            "pane_id": pane, "columns": 120, "lines": 40}}).encode() + b"\n")
        conn.setblocking(False)
    pings: list[float] = []
    with Client(server.socket_path) as c:
        # The marker is assembled by printf, so the echoed command line never shows it.
        c.call("pane.send_text", {"pane_id": pane, "text":
                                  f"seq 1 {lines}; printf 'flood-%s-done\\n' {lines}\n"})
        started = time.perf_counter()
        while True:
            began = time.perf_counter()
            c.call("ping")
            pings.append(time.perf_counter() - began)
            if conn is not None:
                try:
                    while data := conn.recv(1 << 20):
                        for header, payload in reader.feed(data):
                            if header.get("frame") == "screen":
                                frames += 1
                                received += len(payload)
                except BlockingIOError:
                    pass
            text = c.call("pane.read", {"pane_id": pane, "source": "visible"})["read"]["text"]
            if text.rstrip().endswith(done) or f"\n{done}\n" in text:
                break
            if time.perf_counter() - started > 300:
                raise TimeoutError("the flood did not finish in 300 s")
            time.sleep(0.01)
        elapsed = time.perf_counter() - started
        c.call("pane.close", {"pane_id": pane})
    if conn is not None:
        conn.close()
    return {"seconds": elapsed, "frames": frames, "bytes": received,
            "ping_p50_ms": ms(percentile(pings, 50)), "ping_p99_ms": ms(percentile(pings, 99))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.attach_flood")
    parser.add_argument("--lines", type=int, default=3_000_000)
    args = parser.parse_args(argv)
    server = start_server(size="120x40")
    try:
        alone = flood(server, args.lines, attached=False)
        watched = flood(server, args.lines, attached=True)
    finally:
        server.stop()
    print(f"seq 1 {args.lines}: {alone['seconds']:.1f} s alone, {watched['seconds']:.1f} s "
          f"attached; the client got {watched['frames']} frames, "
          f"{watched['bytes'] / 1e6:.1f} MB; ping p50 {watched['ping_p50_ms']:.1f} ms, "
          f"p99 {watched['ping_p99_ms']:.1f} ms (alone: {alone['ping_p50_ms']:.1f} / "
          f"{alone['ping_p99_ms']:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
