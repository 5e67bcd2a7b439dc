"""``python -m bench.profile``: sample a server under one request-path load with py-spy.

Starts a private server, attaches ``py-spy record`` to it (``--py-spy PATH``; py-spy is
no dependency of the project: install it anywhere, e.g. into a venv of its own), drives
one load from this process, and writes a flame graph (SVG) and a text profile (the
``--top N`` hottest stacks, leaf last, in samples) to ``bench/profiles/``.

Loads: ``roundtrip`` (pane.send_text + pane.wait_for_output through ``cat``), ``ping``
(sequential pings), ``pipelined`` (pings 100 a write), ``ingest`` (``seq`` in a pane),
``lists`` (``pane.list`` and ``system.tree`` in turn with 1,000 idle panes, made before the
sampling starts).
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import time
from pathlib import Path

from .cases import cat_pane, ingest_cmux, pings_cmux, round_trip_cmux
from .cmux import CmuxSide
from .scale import IDLE_ARGV, new_tabs

PROFILES = Path(__file__).with_name("profiles")


def drive(side: CmuxSide, load: str, seconds: float) -> int:
    """Run ``load`` against ``side`` for about ``seconds``; returns the operations done."""
    deadline = time.monotonic() + seconds
    done = 0
    pane = cat_pane(side) if load == "roundtrip" else ""
    conn = side.connect()
    try:
        while time.monotonic() < deadline:
            if load == "roundtrip":
                round_trip_cmux(side, pane, range(done, done + 100))
                done += 100
            elif load == "ping":
                pings_cmux(conn, 1000, pipelined=False)
                done += 1000
            elif load == "lists":
                conn.call("pane.list")
                conn.call("system.tree")
                done += 2
            elif load == "pipelined":
                pings_cmux(conn, 10_000, pipelined=True)
                done += 10_000
            else:
                ingest_cmux(side, 500_000)
                done += 1
    finally:
        conn.close()
    return done


def top_stacks(raw: Path, count: int) -> str:
    """The ``count`` heaviest collapsed stacks of a py-spy ``raw`` file, and the heaviest
    leaf functions (self time), as text."""
    stacks: collections.Counter[str] = collections.Counter()
    leaves: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        stacks[stack] += int(n)
        leaves[stack.rsplit(";", 1)[-1]] += int(n)
        total += int(n)
    out = [f"{total} samples", "", "self time by function:"]
    out += [f"{n * 100 / total:5.1f}%  {leaf}" for leaf, n in leaves.most_common(count)]
    out += ["", "heaviest stacks (outermost first):"]
    for stack, n in stacks.most_common(count // 2):
        frames = stack.split(";")
        out.append(f"{n * 100 / total:5.1f}%  " + " ; ".join(frames[-8:]))
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile")
    parser.add_argument("load", choices=["roundtrip", "ping", "pipelined", "ingest", "lists"])
    parser.add_argument("--py-spy", default="py-spy", metavar="PATH")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--emulator", default="auto")
    parser.add_argument("--name", default="", help="file name stem (default: the load)")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args(argv)
    PROFILES.mkdir(exist_ok=True)
    stem = PROFILES / (args.name or args.load)
    with CmuxSide(args.emulator) as side:
        if args.load == "lists":
            new_tabs(side, {"command": IDLE_ARGV}, 999)
        common = [args.py_spy, "record", "--pid", str(side.pid), "--rate", "500",
                  "--duration", str(int(args.seconds)), "--nonblocking"]
        svg = subprocess.Popen([*common, "--output", f"{stem}.svg"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        raw = subprocess.Popen([*common, "--format", "raw", "--output", f"{stem}.raw"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        done = drive(side, args.load, args.seconds - 1.5)
        svg.wait(30)
        raw.wait(30)
    text = top_stacks(Path(f"{stem}.raw"), args.top)
    Path(f"{stem}.raw").unlink()
    Path(f"{stem}.txt").write_text(f"{args.load}: {done} operations in "
                                   f"{args.seconds - 1.5:g} s\n{text}")
    print(f"{stem}.svg, {stem}.txt ({done} operations)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
