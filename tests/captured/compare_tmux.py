#!/usr/bin/env python3
"""Replay random terminal output through tmux and both backends, and show where they differ.

Usage::

    compare_tmux.py [--seeds A:B] [--size COLSxROWS] [--ops N] [--minimize]

Each seed builds a sequence of ``--ops`` random operations (text with wide and
combining characters, cursor movement, editing, scrolling and scroll regions, tab
stops, origin, insert and autowrap modes, DECSC/DECRC, DECALN, the alternate
screen). The bytes are shown by tmux (``record.render_tmux``) and read back from
each backend's ``visible`` text; a seed is reported when a backend's screen is not
tmux's. With ``--minimize`` each reported seed is cut down to the fewest
operations that still differ, which is what a test case wants.

Operations on which tmux 3.3a departs from xterm (CHT, REP, IL/DL outside the
scroll region) are left out, so what remains is worth a look.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent))

from record import render_tmux  # noqa: E402

from cmux_core.terminal.backends import make_emulator  # noqa: E402
from cmux_core.terminal.emulator import read_text  # noqa: E402

BACKENDS = ("pyte", "ghostty")
WORDS = ["abc", "hello", "日本", "x", "wide語", "   ", "0123456789", "é", "tab\tx", "中文字",
         "e\u0301", "\U0001f600"]
REGION_SET, REGION_RESET = "region", "noregion"


def operations(rng: random.Random, cols: int, rows: int) -> list[Callable[[], str]]:
    def row() -> int:
        return rng.randrange(1, rows + 2)

    def col() -> int:
        return rng.randrange(1, cols + 3)

    def count() -> int:
        return rng.randrange(0, 5)

    return [
        lambda: rng.choice(WORDS), lambda: rng.choice(WORDS) * rng.randrange(1, 6),
        lambda: f"\x1b[{row()};{col()}H", lambda: f"\x1b[{count()}A", lambda: f"\x1b[{count()}B",
        lambda: f"\x1b[{count()}C", lambda: f"\x1b[{count()}D", lambda: f"\x1b[{col()}G",
        lambda: f"\x1b[{row()}d", lambda: f"\x1b[{rng.choice([0, 1, 2])}J",
        lambda: f"\x1b[{rng.choice([0, 1, 2])}K", lambda: f"\x1b[{count()}@",
        lambda: f"\x1b[{count()}P", lambda: f"\x1b[{count()}X", lambda: f"\x1b[{count()}S",
        lambda: f"\x1b[{count()}T", lambda: f"\x1b[{count()}Z", lambda: "\x1b7", lambda: "\x1b8",
        lambda: "\r", lambda: "\n", lambda: "\r\n", lambda: "\t", lambda: "\x08",
        lambda: "\x1bM", lambda: "\x1bD", lambda: "\x1bE", lambda: "\x1bH", lambda: "\x1b#8",
        lambda: rng.choice(["\x1b[g", "\x1b[3g"]), lambda: rng.choice(["\x1b[4h", "\x1b[4l"]),
        lambda: rng.choice(["\x1b[?7l", "\x1b[?7h"]), lambda: rng.choice(["\x1b[?6h", "\x1b[?6l"]),
        lambda: rng.choice(["\x1b[?1049h", "\x1b[?1049l"]), lambda: "\x1b[3J",
        lambda: REGION_SET, lambda: REGION_RESET,
    ]


def generate(seed: int, cols: int, rows: int, count: int) -> list[str]:
    """The operations of ``seed``; IL and DL only while no scroll region is set."""
    rng = random.Random(seed)
    choices = operations(rng, cols, rows)
    region = False
    out: list[str] = []
    while len(out) < count:
        op = rng.choice(choices)()
        if op == REGION_SET:
            region = True
            op = f"\x1b[{rng.randrange(1, rows // 2 + 1)};{rng.randrange(rows // 2 + 1, rows + 1)}r"
        elif op == REGION_RESET:
            region = False
            op = "\x1b[r"
        out.append(op)
        if not region and rng.random() < 0.05:
            out.append(f"\x1b[{rng.randrange(0, 4)}{rng.choice('LM')}")
    return out


def screens(ops: list[str], cols: int, rows: int) -> dict[str, list[str]]:
    data = ("\x1b[H\x1b[2J" + "".join(ops) + "\x1b[r\x1b[?7h\x1b[4l\x1b[?6l").encode()
    shown = {"tmux": render_tmux(data, cols, rows)}
    for backend in BACKENDS:
        emulator = make_emulator(backend, cols, rows)
        emulator.feed(data)
        shown[backend] = read_text(emulator, "visible", None, "text")[0]
    return {name: _rows(text) for name, text in shown.items()}


def _rows(text: str) -> list[str]:
    rows = [row.rstrip(" ") for row in text.split("\n")]
    while rows and not rows[-1]:
        rows.pop()
    return rows


def differing(ops: list[str], cols: int, rows: int) -> list[str]:
    shown = screens(ops, cols, rows)
    return [backend for backend in BACKENDS if shown[backend] != shown["tmux"]]


def minimize(ops: list[str], backend: str, cols: int, rows: int) -> list[str]:
    """Drop operations while ``backend`` still differs from tmux (delta debugging)."""
    parts = 2
    while len(ops) >= 2:
        size = max(1, len(ops) // parts)
        for start in range(0, len(ops), size):
            trial = ops[:start] + ops[start + size:]
            if trial and backend in differing(trial, cols, rows):
                ops, parts = trial, max(parts - 1, 2)
                break
        else:
            if size == 1:
                break
            parts = min(len(ops), parts * 2)
    return ops


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0:50", help="A:B, the seeds to try (default 0:50)")
    parser.add_argument("--size", default="30x10", help="COLSxROWS (default 30x10)")
    parser.add_argument("--ops", type=int, default=60, help="operations per seed (default 60)")
    parser.add_argument("--minimize", action="store_true", help="cut each difference down")
    args = parser.parse_args()
    first, last = (int(n) for n in args.seeds.split(":"))
    cols, rows = (int(n) for n in args.size.lower().split("x"))
    found = 0
    for seed in range(first, last):
        ops = generate(seed, cols, rows, args.ops)
        for backend in differing(ops, cols, rows):
            found += 1
            print(f"seed {seed}: {backend} differs from tmux", flush=True)
            if args.minimize:
                small = minimize(ops, backend, cols, rows)
                shown = screens(small, cols, rows)
                print(f"  {''.join(small)!r}")
                for name in ("tmux", backend):
                    print(f"  {name}:")
                    print("".join(f"    |{row}\n" for row in shown[name]), end="")
    print(f"{found} difference(s) in {last - first} seed(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
