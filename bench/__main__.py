"""``python -m bench``: run the cases, print the table, write ``bench/results/latest.json``."""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import orjson

from cmux_core.errors import CmuxError

from .cases import CASES
from .context import FULL, FULL_REPEAT, QUICK, QUICK_REPEAT, Context
from .report import Row, table
from .tmux import version as tmux_version

RESULTS = Path(__file__).with_name("results") / "latest.json"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench",
                                     description="cmux against tmux on this machine, one run")
    parser.add_argument("--quick", action="store_true",
                        help="smaller sizes: about a minute instead of a few")
    parser.add_argument("--emulator", choices=["auto", "pyte", "ghostty"], default="auto",
                        help="the cmux screen backend (default: auto)")
    parser.add_argument("--only", action="append", choices=sorted(CASES), metavar="NAME",
                        help=f"run only this case (repeatable): {', '.join(CASES)}")
    parser.add_argument("--repeat", type=int, metavar="N",
                        help=f"alternating cmux/tmux runs per compared figure, the median "
                        f"reported (default {FULL_REPEAT}, --quick {QUICK_REPEAT})")
    parser.add_argument("--json", type=Path, default=RESULTS, metavar="PATH",
                        help=f"where to write the results (default: {RESULTS})")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if shutil.which("tmux") is None:
        print("tmux is not installed; the bench compares against it", file=sys.stderr)
        return 2
    names = args.only or list(CASES)
    sizes = QUICK if args.quick else FULL
    repeat = args.repeat if args.repeat is not None else (
        QUICK_REPEAT if args.quick else FULL_REPEAT)
    if repeat < 1:
        print("--repeat must be at least 1", file=sys.stderr)
        return 2
    started = datetime.datetime.now(datetime.UTC)
    load_before = os.getloadavg()
    rows: list[Row] = []
    timings: dict[str, float] = {}
    failures: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="cmux-bench-") as workdir:
        ctx = Context(sizes, args.emulator, Path(workdir), repeat)
        for name in names:
            print(f"running {name} ...", file=sys.stderr, flush=True)
            began = time.perf_counter()
            try:
                rows += CASES[name](ctx)
            except (OSError, RuntimeError, TimeoutError, CmuxError) as exc:
                # One broken case should not cost the figures of the others.
                failures[name] = f"{type(exc).__name__}: {exc}"
                print(f"{name} failed: {failures[name]}", file=sys.stderr, flush=True)
            timings[name] = round(time.perf_counter() - began, 1)
    load_after = os.getloadavg()
    backend = ", ".join(sorted(b for b in ctx.backends if b)) or args.emulator
    heading = (f"cmux (emulator {backend}) vs {tmux_version()} - {started:%Y-%m-%d %H:%M} UTC, "
               f"{os.cpu_count()} CPUs, {'quick' if args.quick else 'full'} run, medians of "
               f"{repeat} alternating runs, load average "
               f"{load_before[0]:.1f} before, {load_after[0]:.1f} after")
    print(heading)
    print(table(rows), flush=True)
    report = {
        "date": started.isoformat(timespec="seconds"),
        "emulator_requested": args.emulator,
        "emulator": backend,
        "tmux": tmux_version(),
        "quick": args.quick,
        "repeat": repeat,
        "cases": names,
        "case_seconds": timings,
        "failures": failures,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(),
                    "loadavg_before": load_before, "loadavg_after": load_after},
        "sizes": sizes.__dict__,
        "rows": [row.as_json() for row in rows],
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    print(f"\nwritten to {args.json}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
