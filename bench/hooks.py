"""What ``hooks/cmux-hook`` adds to an agent's turn: its wall time against ``true``.

An agent runs each hook as ``sh -c COMMAND`` with the payload on stdin and waits for it,
so that is what is timed, one run after another: the recorded Claude Code
``UserPromptSubmit`` payload through ``cmux-hook claude`` (a state report and a token
update on one connection), and ``sh -c true`` with the same stdin as the baseline. Three
settings: inside a pane of a real server (the reports land), with the pane's variables but
no server behind the socket, and outside any pane (no ``CMUX_*`` variables). The bare
start-up of the interpreter the hook uses (``python3 -I -S -c pass``) is timed too: it is
most of the hook's cost.

The budget is 30 ms added at p99 (``hook p99 - true p99``); whatever happens, the hook
ends 300 ms after its interpreter started.

Run alone: ``python -m bench.hooks [--runs 200]``; in the bench as the ``hooks`` case.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import tempfile
import time
from pathlib import Path

from .cmux import CmuxSide
from .context import QUICK, Context, ms, percentile
from .report import Row

ROOT = Path(__file__).resolve().parents[1]
HOOK = ROOT / "hooks" / "cmux-hook"
PAYLOAD = ROOT / "tests" / "data" / "hook_payloads" / "claude" / "02-UserPromptSubmit.json"
BUDGET_MS = 30.0
PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else "python3"
"""The interpreter the hook's wrapper picks first; its bare start-up is shown beside."""


def timed(command: str, stdin: bytes, env: dict[str, str], runs: int) -> list[float]:
    """Wall seconds of ``runs`` runs of ``sh -c command``, one after another."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(["sh", "-c", command], input=stdin, env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return times


def measure(runs: int, emulator: str = "auto") -> dict[str, list[float]]:
    """Seconds per run for ``true`` and for the hook in each setting."""
    stdin = json.loads(PAYLOAD.read_text())["stdin"].encode()
    command = f"{shlex.quote(str(HOOK))} claude"
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/")}
    out: dict[str, list[float]] = {"true": timed("true", stdin, base, runs),
                                   "python": timed(f"{PYTHON} -I -S -c pass", stdin, base, runs),
                                   "outside": timed(command, stdin, base, runs)}
    with tempfile.TemporaryDirectory(prefix="cmux-bench-") as tmp:
        gone = base | {"CMUX_SOCKET_PATH": str(Path(tmp) / "none.sock"), "CMUX_PANE_ID": "w1:p1"}
        out["no_server"] = timed(command, stdin, gone, runs)
    with CmuxSide(emulator) as side:
        pane = side.new_pane(["sh"])
        served = base | {"CMUX_SOCKET_PATH": str(side.server.socket_path), "CMUX_PANE_ID": pane}
        out["server"] = timed(command, stdin, served, runs)
        agents = side.conn.call("agent.list")["agents"]
        if not any(a["pane_id"] == pane and a.get("agent_status") == "working" for a in agents):
            raise RuntimeError("the hook's reports did not reach the server")
    return out


def case_hooks(ctx: Context) -> list[Row]:
    runs = 100 if ctx.sizes == QUICK else 300
    t = measure(runs, ctx.emulator)

    def p(name: str, q: float) -> float:
        return ms(percentile(t[name], q))

    detail = {name: {"p50_ms": p(name, 50), "p99_ms": p(name, 99)} for name in t}
    detail["runs"] = runs  # type: ignore[assignment]
    baseline = (f"`sh -c true` p50 {p('true', 50):.1f} ms, p99 {p('true', 99):.1f} ms; "
                f"bare `python3 -I -S` p50 {p('python', 50):.1f} ms, p99 {p('python', 99):.1f} ms")
    return [
        Row("hooks_server_p50_ms", "hook: wall time in a pane, reports sent, p50 (ms)",
            p("server", 50), None, "lower",
            f"cmux-hook claude with the recorded UserPromptSubmit payload, as an agent runs "
            f"it; {baseline}; tmux has no hooks", detail),
        Row("hooks_server_p99_ms", "hook: wall time in a pane, reports sent, p99 (ms)",
            p("server", 99), None, "lower"),
        Row("hooks_added_p99_ms", "hook: p99 added to the agent's turn over `true` (ms)",
            p("server", 99) - p("true", 99), None, "lower", f"budget {BUDGET_MS:g} ms"),
        Row("hooks_no_server_p99_ms", "hook: pane variables but no server, p99 (ms)",
            p("no_server", 99), None, "lower"),
        Row("hooks_outside_p99_ms", "hook: outside a pane, p99 (ms)", p("outside", 99), None,
            "lower", "the shell wrapper exits before starting Python"),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--emulator", default="auto")
    args = parser.parse_args(argv)
    t = measure(args.runs, args.emulator)
    for name, values in t.items():
        print(f"{name:10} p50 {ms(percentile(values, 50)):6.1f} ms   "
              f"p99 {ms(percentile(values, 99)):6.1f} ms")
    added = ms(percentile(t["server"], 99) - percentile(t["true"], 99))
    print(f"added at p99 in a pane: {added:.1f} ms (budget {BUDGET_MS:g} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
