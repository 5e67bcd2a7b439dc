"""Calling plugin code, contained: the time budget, the worker thread, faults and failures.

The host makes every call into a plugin through its :class:`PluginCaller`. Plugin code never
runs on the server loop: a coroutine runs on the plugin's own event loop, anything else on its
worker thread (both :class:`~cmux_core.plugin_host.record.PluginWorker`'s), within ``budget``
seconds; a call longer than ``slow_after`` is warned about. A call that raises or outlasts the
budget is a fault: kept in the plugin's history, logged with its name and published as
``plugin_error``. A failed hook call also counts towards ``max_failures`` consecutive
failures, after which the caller hands the plugin to its ``failing`` callback (the host blocks
it); any successful hook call resets the count. Every call that outlasts the budget is also
handed, with its worker, to the ``hanging`` callback: the host watches whether the worker is
still stuck in it a budget later (a spinning coroutine, a call that never returns) and then
blocks the plugin.

``CMUX_TRACE_PLUGINS=1`` logs every call on the ``cmux_core.plugin_host.host.trace`` logger (to
stderr when nothing else handles it), the name ``docs/plugins.md`` gives.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import pluggy

from cmux_core.errors import CmuxError, Disconnected
from cmux_core.plugin_host.events import PluginError, PluginEvent
from cmux_core.plugin_host.record import Plugin, PluginFault, PluginWorker

__all__ = ["HookOutcome", "PluginCaller", "Publish", "describe"]

log = logging.getLogger(__name__)
trace_log = logging.getLogger("cmux_core.plugin_host.host.trace")

Publish = Callable[[PluginEvent], None]


@dataclass(frozen=True, slots=True)
class HookOutcome:
    """One plugin's answer to a hook call: ``value`` when ``ok``, else ``error``."""

    plugin_id: str
    ok: bool
    value: Any = None
    error: str | None = None


@dataclass(eq=False)
class PluginCaller:
    """Runs plugin callables for the host and records what goes wrong.

    ``publish`` sends ``plugin_error`` (may be None); ``serving(module)`` is the plugin whose
    current or incoming version ``module`` is, so a failure of a version already withdrawn
    does not count; ``failing(plugin)`` is called on the loop when a loaded plugin reaches
    ``max_failures`` consecutive failures; ``hanging(plugin, worker, label)`` when a call
    ``label`` on ``worker`` outlasts the budget. All methods run on the server loop.
    """

    _: KW_ONLY
    slow_after: float
    budget: float
    max_failures: int
    publish: Publish | None
    serving: Callable[[object], Plugin | None]
    failing: Callable[[Plugin], None]
    hanging: Callable[[Plugin, PluginWorker, str], None]
    trace: bool = field(init=False)

    def __post_init__(self) -> None:
        self.trace = os.environ.get("CMUX_TRACE_PLUGINS", "") not in ("", "0")
        if self.trace and not trace_log.handlers and not logging.getLogger().handlers:
            trace_log.addHandler(logging.StreamHandler(sys.stderr))
        if self.trace:
            trace_log.setLevel(logging.INFO)

    async def run(self, plugin: Plugin, label: str, fn: Callable[..., Any],
                  args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        """Run a callable ``plugin`` registered; see :meth:`PluginHost.invoke
        <cmux_core.plugin_host.host.PluginHost.invoke>` for what is raised."""
        if plugin.status != "loaded":
            raise CmuxError("plugin_disabled", f"plugin {plugin.plugin_id} is {plugin.status}")
        try:
            return await self.execute(plugin, label, fn, args, kwargs)
        except (CmuxError, Disconnected):
            raise
        except TimeoutError:
            self.fault(plugin, label, f"timed out after {self.budget:g}s", count=False)
            raise CmuxError("plugin_timeout", f"plugin {plugin.plugin_id}: {label} timed out",
                            {"plugin_id": plugin.plugin_id}) from None
        except Exception as exc:
            self.fault(plugin, label, describe(exc), exc=exc, count=False)
            raise CmuxError("plugin_failed",
                            f"plugin {plugin.plugin_id}: {label}: {describe(exc)}",
                            {"plugin_id": plugin.plugin_id}) from exc

    async def call_impl(self, plugin: Plugin, hook: str, impl: pluggy.HookImpl,
                        kwargs: Mapping[str, Any], *, worker: PluginWorker | None = None
                        ) -> tuple[bool, Any]:
        """Call one hookimpl contained: ``(True, result)`` or ``(False, error message)``."""
        call_kwargs = {name: kwargs[name] for name in impl.argnames if name in kwargs}
        try:
            result = await self.execute(plugin, hook, impl.function, (), call_kwargs,
                                        worker=worker)
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            message = f"timed out after {self.budget:g}s"
            if self.serving(impl.plugin) is plugin:
                self.fault(plugin, hook, message)
            return False, message
        except Exception as exc:
            message = describe(exc)
            # a version withdrawn while this call ran no longer counts against the plugin
            if self.serving(impl.plugin) is plugin:
                self.fault(plugin, hook, message, exc=exc)
            return False, message
        plugin.failures = 0
        return True, result

    async def execute(self, plugin: Plugin, label: str, fn: Callable[..., Any],
                      args: tuple[Any, ...], kwargs: Mapping[str, Any], *,
                      worker: PluginWorker | None = None) -> Any:
        """Run ``fn`` on ``worker`` (default: the serving version's) under the budget: a
        coroutine function on the plugin's loop, anything else on its thread, and an
        awaitable that returns on the plugin's loop too."""
        started = time.monotonic()
        if self.trace:
            trace_log.info("plugin %s: %s(%s)", plugin.plugin_id, label, ", ".join(kwargs),
                           extra={"cmux_plugin": plugin.plugin_id, "cmux_hook": label})
        if worker is None:
            worker = plugin.worker
        if worker is None:
            worker = plugin.worker = PluginWorker(f"cmux-plugin-{plugin.plugin_id}")
        outcome = "raised"
        call = functools.partial(fn, *args, **kwargs)
        try:
            if inspect.iscoroutinefunction(fn):
                result = await asyncio.wait_for(worker.submit_async(call), self.budget)
            else:
                result = await asyncio.wait_for(worker.submit(call), self.budget)
                if inspect.isawaitable(result):
                    left = max(0.001, self.budget - (time.monotonic() - started))
                    awaitable = result
                    result = await asyncio.wait_for(
                        worker.submit_async(lambda: awaitable), left)
            outcome = "ok"
            return result
        except TimeoutError:
            self.hanging(plugin, worker, label)
            raise
        finally:
            elapsed = time.monotonic() - started
            if self.trace:
                trace_log.info("plugin %s: %s %s in %.1f ms", plugin.plugin_id, label, outcome,
                               elapsed * 1000, extra={"cmux_plugin": plugin.plugin_id})
            if elapsed > self.slow_after:
                self.warn(plugin, f"{label} took {elapsed:.2f}s "
                                  f"(warning at {self.slow_after:g}s, limit {self.budget:g}s)")

    def fault(self, plugin: Plugin, hook: str, message: str, *,
              exc: BaseException | None = None, count: bool = True,
              blocked: bool = False) -> None:
        """Record, log and publish a fault of ``plugin``; ``count`` it as a failure."""
        tb = "".join(traceback.format_exception(exc)) if exc is not None else ""
        plugin.errors.append(PluginFault(hook, message, int(time.time() * 1000), tb))
        log.warning("plugin %s: %s: %s", plugin.plugin_id, hook, message,
                    exc_info=exc if exc is not None and not isinstance(exc, CmuxError) else None,
                    extra={"cmux_plugin": plugin.plugin_id, "cmux_hook": hook})
        self.emit(PluginError(plugin, hook, message, blocked))
        if count:
            plugin.failures += 1
            if plugin.failures >= self.max_failures and plugin.status == "loaded":
                self.failing(plugin)

    def warn(self, plugin: Plugin, message: str) -> None:
        plugin.warnings.append(message)
        log.warning("plugin %s: %s", plugin.plugin_id, message,
                    extra={"cmux_plugin": plugin.plugin_id})

    def emit(self, event: PluginEvent) -> None:
        """Publish ``event``; a failing publisher is logged, never raised."""
        if self.publish is None:
            return
        try:
            self.publish(event)
        except Exception:
            log.exception("publishing %s failed", event.kind)


def describe(exc: BaseException) -> str:
    """``exc`` as one line for a fault message."""
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg} ({exc.filename}, line {exc.lineno})"
    return f"{type(exc).__name__}: {exc}"
