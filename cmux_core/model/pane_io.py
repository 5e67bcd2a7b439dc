"""What callers outside the model do with a surface's terminal: send it input in the key
modes its program set, read its text, check the environment a launch adds, and look at
its processes as ``/proc`` shows them.

The socket API reaches terminals through these and the model's objects, never through
:mod:`cmux_core.terminal` itself. Nothing here blocks for long except
:func:`sample_processes`, which scans ``/proc`` off the event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any, Literal

from cmux_core.model.tree import Surface
from cmux_core.terminal import procfs
from cmux_core.terminal.emulator import READ_LINES_MAX, read_text
from cmux_core.terminal.keys import encode_keys, parse_key
from cmux_core.terminal.process import validate_env
from cmux_core.terminal.procfs import ProcessStat

__all__ = [
    "ProcessStat", "ancestry", "check_keys", "foreground_processes", "keys_for",
    "launch_env", "paste_bytes", "process_command", "sample_processes", "server_rss_bytes",
    "surface_text", "terminal_processes",
]


def check_keys(keys: list[str]) -> None:
    """Raise ``InvalidKey`` for the first combo in ``keys`` that does not parse."""
    for key in keys:
        parse_key(key)


def keys_for(surface: Surface, keys: list[str]) -> list[bytes]:
    """Each of ``keys`` encoded in the modes the surface's program set now; ``InvalidKey``
    for the first combo that does not parse, before any is encoded."""
    return encode_keys(keys, surface.terminal.emulator.modes)


def paste_bytes(surface: Surface, text: str) -> bytes:
    """``text`` wrapped in bracketed paste when the surface's program enabled it."""
    data = text.encode()
    if data and surface.terminal.emulator.modes.bracketed_paste:
        return b"\x1b[200~" + data + b"\x1b[201~"
    return data


def surface_text(surface: Surface, *, recent: bool = False,
                 fmt: Literal["text", "ansi"] = "text") -> str:
    """The visible screen of the surface's terminal, or with ``recent`` its last rows of
    screen and scrollback (as many as any read may return)."""
    emulator = surface.terminal.emulator
    if recent:
        return read_text(emulator, "recent", READ_LINES_MAX, fmt)[0]
    return read_text(emulator, "visible", None, fmt)[0]


def launch_env(env: Mapping[str, object] | None, field: str = "env") -> dict[str, str]:
    """A caller's env map checked for a launch (seed 004 "Env behavior"), sorted by key;
    ``invalid_params`` naming ``field`` when a key or value is unusable."""
    return validate_env(env, field)


def _process_entry(pid: int) -> dict[str, Any] | None:
    process = procfs.read_process(pid)
    if process is None:
        return None
    entry: dict[str, Any] = {"pid": pid, "name": process.comm.strip()}
    # Empty arguments (the padding left by a program that rewrote its title) are not shown.
    argv = [a for a in process.argv if a]
    if argv:
        entry.update({"argv0": argv[0], "argv": argv, "cmdline": " ".join(argv)})
    cwd = procfs.cwd(pid)
    if cwd is not None:
        entry["cwd"] = cwd
    return entry


def foreground_processes(pgid: int) -> list[dict[str, Any]]:
    """The live processes of process group ``pgid``: pid, name, argv and cwd of each."""
    return [e for pid in procfs.group_members(pgid) if (e := _process_entry(pid))]


def ancestry(pid: int, limit: int) -> list[int]:
    """The parents of ``pid``, nearest first, at most ``limit`` of them."""
    return procfs.ancestry(pid, limit)


async def sample_processes(interval_ms: int) -> tuple[list[ProcessStat], dict[int, float]]:
    """Every process now, and each one's CPU use over ``interval_ms`` in percent of one
    core (0 when the interval is 0). The scans run off the event loop."""
    first = await asyncio.to_thread(procfs.process_table)
    if interval_ms <= 0:
        return first, {}
    started = time.monotonic()
    await asyncio.sleep(interval_ms / 1000)
    second = await asyncio.to_thread(procfs.process_table)
    elapsed = max(time.monotonic() - started, 1e-6)
    before = {p.pid: p.cpu_seconds for p in first}
    return second, {p.pid: round(100 * (p.cpu_seconds - before[p.pid]) / elapsed, 1)
                    for p in second if p.pid in before}


def terminal_processes(table: list[ProcessStat], surface: Surface) -> list[ProcessStat]:
    """The processes of the surface's terminal: its session (the shell is its leader)."""
    term = surface.term
    if term is None or term.exited or not term.pid:
        return []
    return [p for p in table if p.session == term.pid]


def process_command(pid: int) -> list[str]:
    """The arguments of ``pid`` without empty ones; empty when it is gone."""
    info = procfs.read_process(pid)
    return [a for a in info.argv if a] if info else []


def server_rss_bytes() -> int:
    """This process's resident memory in bytes."""
    return procfs.rss_bytes()
