"""An idle server sleeps: no timer pending on its loop, no thread polling for it.

The directory watcher (``cmux_core.watch``) is checked on its own: changes arrive in
batches, reads raise nothing, and it runs without threads. The whole server is then
started in-process with its quiet windows shortened, and once its panes are quiet the
loop must hold no live timer; output arms detection's slow timer again.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from cmux_core.agents import scheduler
from cmux_core.app import App
from cmux_core.config import Settings
from cmux_core.testing import async_wait_until
from cmux_core.watch import Change, watch


async def _next(batches: object, timeout: float = 30.0) -> set[tuple[Change, str]]:
    return await asyncio.wait_for(batches.__anext__(), timeout)  # type: ignore[attr-defined]


def test_watch_reports_writes_creates_and_deletes_but_not_reads(tmp_path: Path) -> None:
    (tmp_path / "old.toml").write_text("a = 1\n")

    async def main() -> None:
        stop = asyncio.Event()
        threads = threading.active_count()
        batches = watch([tmp_path], recursive=False, stop=stop, quiet_ms=30,
                        keep=lambda _c, p: p.endswith(".toml"))
        assert await _next(batches) == set()
        assert threading.active_count() == threads
        (tmp_path / "old.toml").read_text()
        (tmp_path / "ignored.txt").write_text("x")
        (tmp_path / "new.toml").write_text("b = 2\n")
        got = await _next(batches)
        assert got == {(Change.added, str(tmp_path / "new.toml")),
                       (Change.modified, str(tmp_path / "new.toml"))}
        (tmp_path / "old.toml").unlink()
        assert await _next(batches) == {(Change.deleted, str(tmp_path / "old.toml"))}
        stop.set()
        with pytest.raises(StopAsyncIteration):
            await _next(batches)

    asyncio.run(main())


def test_watch_follows_new_subdirectories_when_recursive(tmp_path: Path) -> None:
    async def main() -> None:
        stop = asyncio.Event()
        batches = watch([tmp_path], recursive=True, stop=stop, quiet_ms=30,
                        keep=lambda _c, p: p.endswith(".py"))
        assert await _next(batches) == set()
        sub = tmp_path / "pkg" / "deep"
        sub.mkdir(parents=True)
        (sub / "mod.py").write_text("x = 1\n")
        seen: set[str] = set()
        while str(sub / "mod.py") not in seen:
            seen |= {p for _c, p in await _next(batches)}
        (sub / "mod.py").write_text("x = 2\n")
        assert (Change.modified, str(sub / "mod.py")) in await _next(batches)
        stop.set()

    asyncio.run(main())


def test_an_idle_server_has_no_timer_pending_until_output(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME",
                 "XDG_RUNTIME_DIR"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    monkeypatch.setenv("CMUX_LOAD_PLUGINS", "")
    monkeypatch.setattr(scheduler, "SAFETY_QUIET_S", 0.5)
    monkeypatch.setattr(scheduler, "SAFETY_INTERVAL_S", 0.2)

    def live_timers(loop: asyncio.AbstractEventLoop) -> list[asyncio.TimerHandle]:
        return [h for h in loop._scheduled if not h.cancelled()]  # type: ignore[attr-defined]

    async def main() -> None:
        loop = asyncio.get_running_loop()
        app = App(Settings(shell="/bin/sh"), tmp_path / "s.sock")
        app.loop_monitor.linger = 0.5
        await app.start()
        try:
            for _ in range(3):
                await app.request("tab.create", {"command": ["cat"]})
            await async_wait_until(lambda: not live_timers(loop), timeout=30,
                                   message="no live timer on the loop")
            pane = app.mux.focused_pane()
            assert pane is not None
            await app.request("pane.send_text", {"pane_id": pane.id, "text": "echo hi\n"})
            await async_wait_until(lambda: app.detection._safety is not None, timeout=30)
            await async_wait_until(lambda: not live_timers(loop), timeout=30,
                                   message="no live timer on the loop")
        finally:
            await app.stop()

    asyncio.run(main())
