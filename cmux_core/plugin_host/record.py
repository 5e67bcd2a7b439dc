"""What the host knows about one plugin, and the thread its synchronous code runs on.

A :class:`Plugin` is created by :class:`~cmux_core.plugin_host.host.PluginHost` when a source is
admitted and is mutated only by the host (with its :mod:`~cmux_core.plugin_host.calls` and
:mod:`~cmux_core.plugin_host.observers`), on the server loop: which version is serving,
its status and registrations, recent faults and warnings, and the queue of observer calls
waiting for it. ``to_wire`` is its ``plugin.list`` entry. :class:`PluginWorker` is where
the host runs the plugin's code: a daemon thread for its synchronous callables, one at a
time, and a second one with an event loop of the plugin's own for its coroutines; each
loaded version of a plugin gets a worker of its own. No plugin code runs on the server loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from cmux_core.plugin_host.loader import PluginSource
from cmux_core.plugin_host.registry import Registrations

FAULT_HISTORY = 20
"""Errors and warnings kept per plugin for ``plugin.list``."""

Status = Literal["loaded", "disabled", "blocked"]
Isolation = Literal["thread", "process"]


@dataclass(slots=True)
class PluginFault:
    hook: str
    message: str
    time_unix_ms: int
    traceback: str = ""

    def to_wire(self) -> dict[str, Any]:
        return {"hook": self.hook, "message": self.message, "time_unix_ms": self.time_unix_ms}


@dataclass(eq=False)
class Plugin:
    """One plugin id and its current state; the host owns and mutates it.

    ``module`` is the version currently serving (None when disabled, blocked, or never
    loaded). ``error`` says why a plugin is blocked; ``errors`` and ``warnings`` are the
    recent history, newest last. ``abandoned_threads`` counts the workers left behind while
    still stuck in a call the host had stopped waiting for; ``dropped_calls`` the observer
    calls dropped because the plugin's queue was full (``overflow_dropped`` those of the
    overflow still going on).
    """

    plugin_id: str
    source: PluginSource
    enabled: bool = True
    status: Status = "disabled"
    module: object | None = None
    description: str = ""
    version: str = ""
    hooks: list[str] = field(default_factory=list)
    registrations: Registrations = field(default_factory=Registrations)
    error: str | None = None
    errors: deque[PluginFault] = field(default_factory=lambda: deque(maxlen=FAULT_HISTORY))
    warnings: deque[str] = field(default_factory=lambda: deque(maxlen=FAULT_HISTORY))
    failures: int = 0
    generation: int = 0
    source_digest: str = ""
    started: bool = False
    worker: PluginWorker | None = None
    inbox: deque[tuple[str, dict[str, Any]]] = field(default_factory=deque)
    drain: asyncio.Task[None] | None = None
    overflowing: bool = False
    overflow_dropped: int = 0
    dropped_calls: int = 0
    abandoned_threads: int = 0
    isolation: Isolation = "thread"
    """Where its code runs: ``thread`` (in the server) or ``process`` (a process of its own)."""

    def to_wire(self) -> dict[str, Any]:
        """The ``plugin.list`` entry."""
        path = self.source.path
        return {
            "plugin_id": self.plugin_id,
            "name": self.source.dist_name or self.plugin_id,
            "version": self.version or self.source.version,
            "description": self.description or None,
            "enabled": self.enabled,
            "status": self.status,
            "source": self.source.to_wire(),
            "plugin_root": str(self.source.root or (path.parent if path else "")),
            "manifest_path": str(path) if path else "",
            "hooks": list(self.hooks),
            "registrations": self.registrations.summary(),
            "error": self.error,
            "errors": [f.to_wire() for f in self.errors],
            "warnings": list(self.warnings),
            "abandoned_threads": self.abandoned_threads,
            "dropped_calls": self.dropped_calls,
            "isolation": self.isolation,
            "pid": self.worker.pid if self.worker is not None else None,
        }


class PluginWorker:
    """Daemon threads running one plugin's code: its synchronous callables in order on one,
    its coroutines on an event loop of its own on another (started by the first coroutine).

    A callable that never returns, or a coroutine that never yields, keeps only this worker
    waiting; Python cannot stop a thread, so the host abandons such a worker (:attr:`stuck`)
    and starts another. The threads are daemons so they cannot hold the process open at exit.
    """

    ABANDONED = "its thread was abandoned"
    RETIRED = "abandoned a worker thread stuck in a call past its budget"
    STUCK = "its thread is stuck in an earlier call"

    @property
    def pid(self) -> int | None:
        """The process the plugin's code runs in when it is not the server's own."""
        return None

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[
            tuple[Callable[[], Any], asyncio.Future[Any], asyncio.AbstractEventLoop] | None
        ] = queue.SimpleQueue()
        self._current: asyncio.Future[Any] | None = None
        self._name = name
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.loop_hung = False
        """Whether the plugin's loop stopped running callbacks (a coroutine that never
        yields); set by :meth:`hung`."""

    def submit_async(self, make: Callable[[], Any]) -> asyncio.Future[Any]:
        """Run ``make()`` on the plugin's loop, awaiting what it returns if awaitable (a
        coroutine function's call, an iterator's ``__anext__``); a future of the calling
        loop. Cancelling it cancels the call on the plugin's loop."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            threading.Thread(target=_run_loop, args=(self._loop,), name=f"{self._name}-async",
                             daemon=True).start()
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_settled(make), self._loop))

    async def hung(self, grace: float) -> bool:
        """Wait ``grace`` seconds and say whether the worker is :attr:`stuck`; the plugin's
        loop counts as hung when it does not run a callback within that time."""
        deadline = time.monotonic() + grace
        if self._loop is not None and not self.loop_hung:
            here = asyncio.get_running_loop()
            answered: asyncio.Future[None] = here.create_future()

            def pong() -> None:
                with contextlib.suppress(RuntimeError):
                    here.call_soon_threadsafe(
                        lambda: None if answered.done() else answered.set_result(None))
            try:
                self._loop.call_soon_threadsafe(pong)
                await asyncio.wait_for(answered, grace)
            except (TimeoutError, RuntimeError):
                self.loop_hung = True
        await asyncio.sleep(max(0.0, deadline - time.monotonic()))
        return self.stuck

    def submit(self, fn: Callable[[], Any]) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._jobs.put((fn, future, loop))
        return future

    @property
    def stuck(self) -> bool:
        """Whether the synchronous thread is still running a call whose caller stopped
        waiting (its future was cancelled, as ``asyncio.wait_for`` does past the budget), or
        the plugin's loop is :attr:`loop_hung`. Read on the server loop.
        """
        current = self._current
        return self.loop_hung or (current is not None and current.cancelled())

    def close(self) -> None:
        """Let the threads end: the synchronous one once the call it is running (if any)
        returns, the loop once its tasks are cancelled and its async generators closed;
        idempotent."""
        self._jobs.put(None)
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # already closed
                self._loop.call_soon_threadsafe(_wind_down, self._loop)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, future, loop = job
            if future.cancelled():
                continue
            self._current = future
            try:
                outcome: tuple[bool, Any] = (True, fn())
            except BaseException as exc:
                outcome = (False, exc)
            finally:
                self._current = None
            with contextlib.suppress(RuntimeError):  # the loop closed while we ran
                loop.call_soon_threadsafe(_settle, future, outcome)


async def _settled(make: Callable[[], Any]) -> Any:
    result = make()
    return await result if inspect.isawaitable(result) else result


def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        loop.close()


def _wind_down(loop: asyncio.AbstractEventLoop) -> None:
    async def finish() -> None:
        tasks = [t for t in asyncio.all_tasks(loop) if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(loop.shutdown_asyncgens(), 1.0)
        loop.stop()
    loop.create_task(finish())


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if future.done():
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
