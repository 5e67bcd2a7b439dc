"""What ``cmux mcp`` adds to a call: a tool call against the socket call it makes.

One MCP client session (the SDK's stdio client) with ``cmux mcp`` on a fresh server; the
same read, ``read_pane`` of the default pane's screen, is timed one call after another as
an MCP tool call and as a direct ``pane.read`` on one socket connection. The difference is
what the MCP layer costs: the JSON-RPC hop over stdio, argument validation, the
connection ``cmux mcp`` opens per call (so a cancelled wait closes its own) and the
projection of the result. tmux has no MCP server of its own; tmux-mcp and its ports run
``tmux capture-pane`` per call, which the ``roundtrip`` case measures.

Run alone: ``python -m bench.mcp [--runs 200]``; in the bench as the ``mcp`` case.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from mcp import Client, StdioServerParameters

from .cmux import CmuxSide
from .context import QUICK, Context, ms, percentile
from .report import Row


async def _tool_calls(side: CmuxSide, pane: str, runs: int) -> list[float]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "cmux_core", "mcp", "--socket", str(side.server.socket_path)],
        env=side.server.env)
    times = []
    async with Client(params, mode="legacy") as client:
        for _ in range(runs + 1):
            start = time.perf_counter()
            result = await client.call_tool("read_pane", {"pane_id": pane})
            times.append(time.perf_counter() - start)
            if result.is_error:
                raise RuntimeError(f"read_pane failed: {result.content}")
    return times[1:]  # the first call also warms up the server's imports


def measure(side: CmuxSide, runs: int) -> dict[str, list[float]]:
    """Seconds per call on ``side``'s server, direct socket call and MCP tool call."""
    pane = str(side.conn.call("pane.current")["pane"]["pane_id"])
    direct = []
    for _ in range(runs):
        start = time.perf_counter()
        side.conn.call("pane.read", {"pane_id": pane, "source": "visible"})
        direct.append(time.perf_counter() - start)
    return {"direct": direct, "mcp": asyncio.run(_tool_calls(side, pane, runs))}


def case_mcp(ctx: Context) -> list[Row]:
    runs = 100 if ctx.sizes == QUICK else 300
    with CmuxSide(ctx.emulator) as side:
        t = measure(side, runs)

    def p(name: str, q: float) -> float:
        return ms(percentile(t[name], q))

    detail = {name: {"p50_ms": p(name, 50), "p99_ms": p(name, 99)} for name in t}
    note = (f"read_pane through cmux mcp against pane.read on one connection (p50 "
            f"{p('direct', 50):.2f} ms, p99 {p('direct', 99):.2f} ms); tmux has no MCP server")
    return [
        Row("mcp_tool_call_p50_ms", "mcp: read_pane tool call, p50 (ms)", p("mcp", 50), None,
            "lower", note, detail),
        Row("mcp_added_p50_ms", "mcp: added over a direct socket call, p50 (ms)",
            p("mcp", 50) - p("direct", 50), None, "lower"),
        Row("mcp_added_p99_ms", "mcp: added over a direct socket call, p99 (ms)",
            p("mcp", 99) - p("direct", 99), None, "lower"),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--emulator", default="auto")
    args = parser.parse_args(argv)
    with CmuxSide(args.emulator) as side:
        t = measure(side, args.runs)
    for name, values in t.items():
        print(f"{name:7} p50 {ms(percentile(values, 50)):6.2f} ms   "
              f"p99 {ms(percentile(values, 99)):6.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
