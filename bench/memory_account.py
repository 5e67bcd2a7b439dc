"""``python -m bench.memory_account``: where a server's memory goes at start-up, by module.

Builds and starts a server in this process (its own socket and home under a temporary
directory) with ``tracemalloc`` tracing from before the first import of cmux_core, opens
10 ``cat`` tabs beside the default shell, and prints the Python memory still allocated,
grouped two ways: by the package whose code made each allocation (the innermost frame
outside the import machinery), and by the cmux_core module whose import or call led to it
(the innermost cmux_core frame). Allocations of native libraries (libghostty, uvloop,
pydantic-core's own heap) are not traced; the process's RSS is printed beside for scale.
"""

from __future__ import annotations

import tracemalloc

tracemalloc.start(16)

import asyncio  # noqa: E402
import collections  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

MIB = 1 << 20


def rss() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def package(filename: str) -> str:
    if "site-packages/" in filename:
        return filename.split("site-packages/")[1].split("/")[0].removesuffix(".py")
    if "/cmux_core/" in filename:
        return "cmux_core." + filename.split("/cmux_core/")[1].split("/")[0].removesuffix(".py")
    if "/lib/python3" in filename:
        return "stdlib " + filename.split("/lib/python3")[1].split("/")[1].removesuffix(".py")
    return filename


def report(snapshot: tracemalloc.Snapshot, top: int) -> str:
    by_code: collections.Counter[str] = collections.Counter()
    by_cmux: collections.Counter[str] = collections.Counter()
    for stat in snapshot.statistics("traceback"):
        frames = [f.filename for f in stat.traceback]  # innermost first
        code = next((f for f in frames if not f.startswith("<frozen")), frames[0])
        by_code[package(code)] += stat.size
        cmux = next((f for f in frames if "/cmux_core/" in f), None)
        by_cmux[cmux.split("/cmux_core/")[1] if cmux else "(no cmux_core frame)"] += stat.size
    total = sum(by_code.values())
    out = [f"traced Python allocations: {total / MIB:.1f} MiB", "", "by the code that allocated:"]
    out += [f"{n / MIB:7.2f} MiB  {name}" for name, n in by_code.most_common(top)]
    out += ["", "by the innermost cmux_core module on the way:"]
    out += [f"{n / MIB:7.2f} MiB  {name}" for name, n in by_cmux.most_common(top)]
    return "\n".join(out)


async def run(home: Path, panes: int) -> None:
    from cmux_core.app import App
    from cmux_core.config import Settings

    settings = Settings(columns=80, rows=24, state_dir=home / "state")
    app = App(settings, home / "cmux.sock")
    await app.start()
    try:
        for _ in range(panes - 1):
            await app.request("tab.create", {"command": ["cat"]})
        await asyncio.sleep(1.0)
        snapshot = tracemalloc.take_snapshot()
        print(f"RSS {rss() / MIB:.1f} MiB (tracemalloc's own bookkeeping included), "
              f"{len(sys.modules)} modules loaded")
        print(report(snapshot, 30))
    finally:
        await app.stop()


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="cmux-mem-") as home:
        os.environ["HOME"] = home
        asyncio.run(run(Path(home), 11))
    return 0


if __name__ == "__main__":
    sys.exit(main())
