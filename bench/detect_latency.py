"""Detection latency and cost with many agents streaming at once.

20 panes, each identified as a real agent (``CMUX_AGENT``): Claude Code, Codex, Gemini
CLI, OpenCode, Copilot, Qwen Code, Aider in turn. Each pane runs a small ``python3 -c``
program that replays screens recorded from that agent (``tests/captured/agents/``,
rendered once here), one frame every 50 ms: a turn streaming (the recording of a
streamed answer cut at successive points), then its permission prompt, then its idle
prompt (redrawn unchanged, as an agent redraws its prompt), over and over, with the
phases of the panes out of step. The program notes when
it wrote the first screen of each phase; a subscriber notes when
``pane.agent_status_changed`` arrives with that state. Detection latency is the time
between the two (the scheduler classifies a pane's screen at most once per 75 ms, so a
change may wait for that).

The CPU detection costs is measured by running the same 20 programs twice on fresh
servers: once as identified agents, once without ``CMUX_AGENT`` (a ``python3`` nobody
recognises, so no screen is classified). The difference of the server's CPU over the
same window, divided by the panes, is what detection costs per streaming pane.

Run alone: ``python -m bench.detect_latency [--panes 20] [--seconds 20]``; in the bench
as the ``detect_latency`` case.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cmux_core.agents.scheduler import STARTUP_GRACE_S
from cmux_core.detect.engine import ScreenInput, classify
from cmux_core.detect.manifest import Manifest, bundled_manifests_dir, load_manifest
from cmux_core.terminal.backends import make_emulator
from cmux_core.terminal.emulator import read_text

from .cmux import CmuxSide
from .context import QUICK, Context, ms, percentile
from .proc import cpu_seconds
from .report import Row
from .scale import EventStream

RECORDINGS = Path(__file__).resolve().parents[1] / "tests" / "captured" / "agents"
AGENTS = ("claude", "codex", "gemini", "opencode", "copilot", "qwen", "aider")
SIZE = (100, 30)
"""The size the chosen recordings were made at, and so the panes'."""
WORKING_FRAMES = 12
PHASES = (("working", 2.0), ("blocked", 1.0), ("idle", 1.0))
"""Each phase's state and how long a pane stays in it, in seconds."""
FRAME_S = 0.05

PROGRAM = r"""
import json, os, sys, time
screens = json.load(open(sys.argv[1]))
stamps = open(sys.argv[2], "a")
phases = json.loads(sys.argv[3])
time.sleep(float(sys.argv[4]))
def draw(frame):
    title, text = frame
    os.write(1, ("\x1b]2;" + title + "\x07\x1b[H\x1b[2J\x1b[3J" + text).encode())
while True:
    for state, seconds in phases:
        frames = screens[state]
        stamps.write(f"{state} {time.monotonic()}\n")
        stamps.flush()
        end = time.monotonic() + seconds
        i = 0
        while True:
            draw(frames[i % len(frames)])
            i += 1
            left = end - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(%(frame)s, left))
""".replace("%(frame)s", repr(FRAME_S))
"""The pane program: ``python3 -c PROGRAM SCREENS STAMPS PHASES DELAY``."""


@dataclass
class Run:
    """One server's window: its CPU % of one core and, with agents, the latencies (s)."""

    cpu_pct: float
    latencies: dict[str, list[float]] = field(default_factory=dict)
    unmatched: int = 0
    backend: str = ""


def render(path: Path, upto: int | None = None) -> tuple[str, str]:
    """The OSC title and detection text after replaying a recording's bytes (or a prefix)."""
    meta = tomllib.loads(path.with_suffix("").with_suffix(".meta.toml").read_text())
    emulator = make_emulator("pyte", meta.get("cols", 80), meta.get("rows", 24))
    data = path.read_bytes()
    emulator.feed(data if upto is None else data[:upto])
    text, _ = read_text(emulator, "detection", None, "text")
    return emulator.title or "", text


def agent_screens(agent: str, manifest: Manifest) -> dict[str, list[tuple[str, str]]] | None:
    """``{state: [(title, screen text with CRLF), ...]}`` for one agent, every frame checked
    against its bundled manifest; None when its recordings are missing or read otherwise."""
    files = {"working": "working-1", "blocked": "blocked-1", "idle": "idle-2"}
    found: dict[str, list[tuple[str, str]]] = {}
    for state, stem in files.items():
        path = RECORDINGS / f"{agent}-{stem}.input"
        if not path.exists():
            return None
        size = path.stat().st_size
        cuts = ([size * (WORKING_FRAMES + k) // (2 * WORKING_FRAMES)
                 for k in range(1, WORKING_FRAMES + 1)] if state == "working" else [size])
        frames = []
        for cut in cuts:
            title, text = render(path, cut)
            result = classify(manifest, ScreenInput(text, title, ""))
            if result.state == state and not result.skip_state_update:
                frame = (title, text.rstrip("\n").replace("\n", "\r\n"))
                if frame not in frames:
                    frames.append(frame)
        if not frames:
            return None
        found[state] = frames
    return found


def all_screens() -> dict[str, dict[str, list[tuple[str, str]]]]:
    manifests = {}
    for path in sorted(bundled_manifests_dir().glob("*.toml")):
        if not path.name.endswith(".cases.toml"):
            manifest = load_manifest(path)
            manifests[manifest.id] = manifest
    screens = {}
    for agent in AGENTS:
        if agent in manifests and (found := agent_screens(agent, manifests[agent])):
            screens[agent] = found
    if not screens:
        raise RuntimeError("no recorded agent screens classify as recorded")
    return screens


def measure(emulator: str, panes: int, seconds: float, workdir: Path, agents: bool,
            screens: dict[str, dict[str, list[tuple[str, str]]]]) -> Run:
    """Start a server with ``panes`` replaying programs, wait out the startup grace, and
    measure for ``seconds``."""
    names = sorted(screens)
    phases = json.dumps(PHASES)
    cycle = sum(s for _, s in PHASES)
    with CmuxSide(emulator, size=SIZE) as side:
        pane_ids: list[str] = []
        stamp_files: dict[str, Path] = {}
        for i in range(panes):
            agent = names[i % len(names)]
            screen_file = workdir / f"screens-{agent}.json"
            if not screen_file.exists():
                screen_file.write_text(json.dumps(screens[agent]))
            stamps = workdir / f"stamps-{os.getpid()}-{int(agents)}-{i}"
            stamps.write_text("")
            params: dict[str, Any] = {"command": [
                sys.executable, "-c", PROGRAM, str(screen_file), str(stamps), phases,
                f"{cycle * i / panes:.3f}"]}
            if agents:
                params["env"] = {"CMUX_AGENT": agent}
            root = side.conn.call("tab.create", params)["root_pane"]
            pane = str(root["pane_id"])
            side.backend = str(root.get("emulator", ""))
            pane_ids.append(pane)
            stamp_files[pane] = stamps
        events = EventStream(side.server.socket_path, [
            {"type": "pane.agent_status_changed", "pane_id": pane} for pane in pane_ids])
        try:
            # Past every pane's startup grace and its first phase change.
            time.sleep(STARTUP_GRACE_S + cycle + 0.5)
            with contextlib.suppress(TimeoutError):
                while True:  # events queued while nobody read: their arrival is unknown
                    events.next(0.05)
            began, cpu = time.monotonic(), cpu_seconds(side.pid)
            seen: list[tuple[str, str, float]] = []
            while (left := began + seconds - time.monotonic()) > 0:
                try:
                    event = events.next(left)
                except TimeoutError:
                    break
                data = event.get("data", {})
                status = str(data.get("agent_status"))
                # A finished turn nobody has looked at yet is published as done.
                seen.append((str(data.get("pane_id")), "idle" if status == "done" else status,
                             time.monotonic()))
            wall = time.monotonic() - began
            run = Run((cpu_seconds(side.pid) - cpu) / wall * 100, backend=side.backend)
        finally:
            events.close()
    for pane, state, at in seen:
        written_at = [line.split() for line in stamp_files[pane].read_text().splitlines()]
        written = [float(t) for s, t in written_at if s == state and float(t) <= at]
        if written:
            run.latencies.setdefault(state, []).append(at - written[-1])
        else:
            run.unmatched += 1
    return run


def p(values: list[float], q: float) -> float | None:
    return ms(percentile(values, q)) if values else None


def case_detect_latency(ctx: Context) -> list[Row]:
    panes = 20
    seconds = 8.0 if ctx.sizes == QUICK else 20.0
    screens = all_screens()
    with_agents = measure(ctx.emulator, panes, seconds, ctx.workdir, True, screens)
    without = measure(ctx.emulator, panes, seconds, ctx.workdir, False, screens)
    ctx.backends.add(with_agents.backend)
    every = [v for values in with_agents.latencies.values() for v in values]
    per_pane = (with_agents.cpu_pct - without.cpu_pct) / panes
    detail = {"panes": panes, "seconds": seconds, "agents": sorted(screens),
              "changes": {s: len(v) for s, v in with_agents.latencies.items()},
              "by_state_p50_ms": {s: p(v, 50) for s, v in with_agents.latencies.items()},
              "by_state_p99_ms": {s: p(v, 99) for s, v in with_agents.latencies.items()},
              "unmatched_events": with_agents.unmatched,
              "cpu_pct_with_detection": with_agents.cpu_pct,
              "cpu_pct_without_detection": without.cpu_pct}
    where = f"{panes} agents streaming recorded screens"
    return [
        Row("detect_latency_p50_ms", f"detection latency p50, {where} (ms)", p(every, 50),
            None, "lower",
            f"{len(every)} state changes (working, blocked, idle) from the program's first "
            "write of the new screen to the pane.agent_status_changed event; a pane's "
            "screen is classified at most once per 75 ms; tmux does not detect agents", detail),
        Row("detect_latency_p99_ms", f"detection latency p99, {where} (ms)", p(every, 99),
            None, "lower"),
        Row("detect_cpu_per_pane_pct", "detection CPU per streaming agent pane (% of a core)",
            per_pane, None, "lower",
            f"server CPU with the panes identified ({with_agents.cpu_pct:.1f} %) minus the "
            f"same programs unidentified ({without.cpu_pct:.1f} %), over {panes} panes; "
            "each pane redraws its screen 20 times a second while streaming"),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--panes", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--emulator", default="auto")
    args = parser.parse_args(argv)
    screens = all_screens()
    with tempfile.TemporaryDirectory(prefix="cmux-bench-") as tmp:
        run = measure(args.emulator, args.panes, args.seconds, Path(tmp), True, screens)
        bare = measure(args.emulator, args.panes, args.seconds, Path(tmp), False, screens)
    every = [v for values in run.latencies.values() for v in values]
    print(json.dumps({"agents": sorted(screens), "changes": len(every),
                      "p50_ms": p(every, 50), "p99_ms": p(every, 99),
                      "by_state_p99_ms": {s: p(v, 99) for s, v in run.latencies.items()},
                      "unmatched": run.unmatched, "cpu_pct": run.cpu_pct,
                      "cpu_pct_unidentified": bare.cpu_pct,
                      "detection_cpu_per_pane_pct": (run.cpu_pct - bare.cpu_pct) / args.panes},
                     indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
