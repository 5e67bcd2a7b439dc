"""What the host knows about one plugin, and the thread its synchronous code runs on.

A :class:`Plugin` is created by :class:`~cmux_core.plugin_host.host.PluginHost` when a source is
admitted and is mutated only by the host (with its :mod:`~cmux_core.plugin_host.calls` and
:mod:`~cmux_core.plugin_host.observers`), on the server loop: which version is serving,
its status and registrations, recent faults and warnings, and the queue of observer calls
waiting for it. ``to_wire`` is its ``plugin.list`` entry. :class:`PluginWorker` is the
daemon thread the host runs the plugin's synchronous callables on, one at a time; each
loaded version of a plugin gets a worker of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from cmux_core.plugin_host.loader import PluginSource
from cmux_core.plugin_host.registry import Registrations

FAULT_HISTORY = 20
"""Errors and warnings kept per plugin for ``plugin.list``."""

Status = Literal["loaded", "disabled", "blocked"]


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
    still stuck in a call the host had stopped waiting for.
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
    abandoned_threads: int = 0

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
        }


class PluginWorker:
    """A daemon thread running one plugin's synchronous callables in order.

    A callable that never returns keeps only this worker waiting; Python cannot stop the
    thread, so the host abandons such a worker (:attr:`stuck`) and starts another. The thread
    is a daemon so it cannot hold the process open at exit.
    """

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[
            tuple[Callable[[], Any], asyncio.Future[Any], asyncio.AbstractEventLoop] | None
        ] = queue.SimpleQueue()
        self._current: asyncio.Future[Any] | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[], Any]) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._jobs.put((fn, future, loop))
        return future

    @property
    def stuck(self) -> bool:
        """Whether the thread is still running a call whose caller stopped waiting (its
        future was cancelled, as ``asyncio.wait_for`` does past the budget). Read on the loop.
        """
        current = self._current
        return current is not None and current.cancelled()

    def close(self) -> None:
        """Let the thread end once the call it is running (if any) returns; idempotent."""
        self._jobs.put(None)

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


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if future.done():
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
