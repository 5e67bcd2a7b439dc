"""``cmux serve``: run the server in the foreground until SIGINT, SIGTERM or server.stop."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from pathlib import Path

from cmux_core.api.server import Server, ServerAlreadyRunning
from cmux_core.config import Settings

log = logging.getLogger(__name__)


async def _run(settings: Settings, socket_path: Path, session: str | None,
               announce: bool) -> int:
    server = Server(settings, socket_path, session=session)
    try:
        await server.start()
    except ServerAlreadyRunning as exc:
        print(f"cmux: {exc}", file=sys.stderr)
        return 1
    if announce:
        pane = server.mux.focused_pane()
        backend = pane.terminal.emulator.backend if pane else settings.emulator
        bin_dir = Path(sys.executable).parent
        print(f"cmux {server.version} listening on {socket_path} "
              f"(area {settings.columns}x{settings.rows}, {backend} screens, pane "
              f"{pane.id if pane else '-'} running {settings.shell})\n"
              "In another shell:\n"
              f"  export CMUX_SOCKET_PATH={socket_path} PATH={bin_dir}:$PATH\n"
              "  cmux ping && cmux workspace list && cmux pane list\n"
              "Stop with Ctrl-C or `cmux server stop`.", flush=True)
    await server.serve_until_stopped()
    return 0


LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def loop_factory(choice: str) -> LoopFactory | None:
    """The event loop to serve on: uvloop's for ``uvloop``, and for ``auto`` when it
    imports; ``None`` (asyncio's own) for ``asyncio``. ValueError for anything else."""
    if choice not in ("auto", "asyncio", "uvloop"):
        raise ValueError(f"event_loop must be auto, asyncio or uvloop, not {choice!r}")
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError as exc:
        if choice == "uvloop":
            raise ValueError(f"event_loop uvloop cannot be loaded: {exc}") from exc
        return None
    factory: LoopFactory = uvloop.new_event_loop
    return factory


def serve(settings: Settings, socket_path: Path, *, session: str | None = None,
          announce: bool = True) -> int:
    """Serve in the foreground; returns the process exit code."""
    logging.basicConfig(level=logging.INFO, format="cmux %(levelname)s %(name)s: %(message)s")
    try:
        factory = loop_factory(settings.event_loop)
    except ValueError as exc:
        print(f"cmux: {exc}", file=sys.stderr)
        return 1
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(_run(settings, socket_path, session, announce))
