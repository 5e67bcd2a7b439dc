"""The plugin host: loads, isolates, hot-reloads and withdraws plugins, and calls them.

Where plugins come from (linked paths, entry points, plugin dirs, ``CMUX_LOAD_PLUGINS``) and
how their code is imported is :mod:`cmux_core.plugin_host.loader`; what they register and how a
registration is checked is :mod:`cmux_core.plugin_host.registry`. This module owns each plugin's
record and state (enabled, linked, blocked; persisted in ``<state dir>/plugins.json``), the
pluggy manager, and loading, unloading and reloading. Every call into plugin code goes through
:mod:`cmux_core.plugin_host.calls` (time budget, worker thread, faults, ``CMUX_TRACE_PLUGINS``);
observer hooks are queued per plugin by :mod:`cmux_core.plugin_host.observers`; the socket
methods plugins register are answered by :mod:`cmux_core.plugin_host.method_calls`.

Every hookimpl is called by the host itself, one at a time, so one plugin's failure never
loses another's result (see :mod:`cmux_core.hookspecs` for the calling rules). All loading,
unloading and reloading runs under one lock on the server loop; a reload builds the new
version's registrations completely before the old version is withdrawn, so readers see
either the old set or the new one.

Plugin code never runs on the server loop: each loaded version of a plugin gets a worker of
its own, whose thread imports it (within ``import_budget``) and then runs its synchronous
callables, and whose event loop (on a second thread) runs its coroutines. A call past its
budget fails with ``plugin_timeout``; when the worker is still stuck in it a budget later (a
coroutine that never yields, a call that never returns) the plugin is blocked with that
reason. Python cannot stop a thread, so a stuck worker is abandoned (and counted in
``plugin.list``) when its version is blocked, replaced or unloaded.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import re
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy

from cmux_core import hookspecs
from cmux_core.detect.registry import ManifestContribution
from cmux_core.errors import CmuxError, InvalidParams, NotFound
from cmux_core.plugin_host.calls import HookOutcome, PluginCaller, describe
from cmux_core.plugin_host.events import (
    PluginEvent,
    PluginLoaded,
    PluginRegistrationsChanged,
    PluginUnloaded,
)
from cmux_core.plugin_host.isolation import isolation_of
from cmux_core.plugin_host.loader import (
    STATE_FILE,
    PluginSource,
    PluginState,
    SourceWatcher,
    WatchRoot,
    allowlist_from_env,
    discover,
    entry_point_changes,
    forget_package,
    import_source,
    loose_dirs,
    loose_files,
    plugin_dirs,
    release_abandoned,
    release_modules,
    release_rejected,
    sources_at,
)
from cmux_core.plugin_host.method_calls import InProcessApi, RawParams, method_handler
from cmux_core.plugin_host.observers import ObserverQueues
from cmux_core.plugin_host.process import ProcessWorker
from cmux_core.plugin_host.record import Plugin, PluginWorker, Status
from cmux_core.plugin_host.registry import (
    CONTRIBUTION_HOOKS,
    GraphicsSource,
    Integration,
    MethodSink,
    PluginMethod,
    Registrar,
    Registrations,
    ViewFilter,
    ViewSort,
)

if TYPE_CHECKING:
    from cmux_core.config import Settings

__all__ = ["PluginHost"]

log = logging.getLogger(__name__)

IMPORT_BUDGET = 10.0
"""Seconds a plugin's import may take before it is blocked, unless ``CMUX_PLUGIN_IMPORT_BUDGET``
or the host's ``import_budget`` says otherwise."""

_PLUGIN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")

Announce = Callable[[PluginEvent | PluginRegistrationsChanged], None]
"""Where the host publishes its events and notices (the server's event hub)."""


# -- the host -------------------------------------------------------------------------------


class PluginHost:
    """Owns every plugin of one server: the pluggy manager, records, workers and watchers.

    ``methods`` is the server's method table (plugin methods are added to it with
    ``owner=<plugin_id>``); ``publish(event)`` sends the ``plugin_loaded``,
    ``plugin_unloaded`` and ``plugin_error`` events and the
    :class:`~cmux_core.plugin_host.events.PluginRegistrationsChanged` notice.
    Time limits are in seconds: a hook call longer than ``slow_after`` is warned about, one
    longer than ``budget`` is abandoned and counts as a failure; ``max_failures``
    consecutive failures block the plugin. An import longer than ``import_budget`` (default:
    ``CMUX_PLUGIN_IMPORT_BUDGET``, else :data:`IMPORT_BUDGET`) is abandoned: a first load
    blocks the plugin, a reload keeps the serving version.
    ``entry_points=False`` skips installed distributions (tests); ``watch=False`` disables hot
    reload. Must be started and stopped on the loop that serves requests.
    """

    def __init__(self, settings: Settings, *, methods: MethodSink,
                 publish: Announce | None = None, api: InProcessApi | None = None,
                 socket_path: str | Path | None = None,
                 slow_after: float = 1.0, budget: float = 10.0, max_failures: int = 5,
                 import_budget: float | None = None,
                 entry_points: bool = True, watch: bool = True,
                 watch_debounce_ms: int = 300) -> None:
        self.settings = settings
        self.methods = methods
        self._api = api
        self.socket_path = str(socket_path) if socket_path is not None else None
        self.import_budget = import_budget if import_budget is not None \
            else _import_budget_from_env()
        self.load_entry_points = entry_points
        self.watch = watch
        self.watch_debounce_ms = watch_debounce_ms
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.allowlist = allowlist_from_env()
        self._plugins: dict[str, Plugin] = {}
        self._by_module: dict[int, Plugin] = {}
        self._state = PluginState(settings.state_dir / STATE_FILE)
        self._lock = asyncio.Lock()
        self._loaded = False
        self._started = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._watcher = SourceWatcher(self._apply_changes, debounce_ms=watch_debounce_ms)
        self._publish = publish
        self._calls = PluginCaller(slow_after=slow_after, budget=budget,
                                   max_failures=max_failures, publish=publish,
                                   serving=lambda module: self._by_module.get(id(module)),
                                   failing=self._on_failing, hanging=self._on_hanging)
        self._observers = ObserverQueues(self._plugins, impls=self._impls, caller=self._calls)

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def state_path(self) -> Path:
        return self._state.path

    def plugin_dirs(self) -> list[Path]:
        """Directories whose loose ``*.py`` files are plugins (user dir first)."""
        return plugin_dirs(self.settings.plugins_dirs)

    async def load(self) -> None:
        """Discover and load every plugin (registrations, methods) without starting them.

        Call before the socket accepts connections so the first request sees every plugin
        method; idempotent. Never raises for a plugin's fault: broken plugins end up
        blocked with their error. Plugins are imported one at a time, each on its own thread
        within ``import_budget``, so a hung import delays the return by at most that long.
        """
        if self._loaded:
            return
        self._loaded = True
        self._state.read()
        async with self._lock:
            for source in discover(list(self._state.links), self.plugin_dirs(),
                                   entry_points=self.load_entry_points):
                await self._admit(source)

    async def start(self) -> None:
        """Load (unless :meth:`load` ran), deliver ``cmux_startup``, start the watcher."""
        await self.load()
        async with self._lock:
            self._started = True
            for plugin in list(self._plugins.values()):
                if plugin.status == "loaded":
                    await self._startup(plugin)
        self._restart_watcher()

    async def stop(self) -> None:
        """Stop watching, deliver ``cmux_shutdown`` to every loaded plugin, withdraw all."""
        await self._watcher.stop()
        async with self._lock:
            for plugin in reversed(list(self._plugins.values())):
                if plugin.status == "loaded":
                    await self._unload(plugin, "disabled", reason="server_stopped", publish=False)
            self._started = self._loaded = False
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task

    async def wait_watching(self, timeout: float = 10.0) -> None:
        """Return once the directory watcher is running (raises TimeoutError otherwise)."""
        await asyncio.wait_for(self._watcher.ready.wait(), timeout)

    # -- queries ----------------------------------------------------------------------------

    def plugins(self) -> list[Plugin]:
        """Every known plugin, loaded or not, in load order."""
        return list(self._plugins.values())

    def get(self, plugin_id: str) -> Plugin:
        """The plugin ``plugin_id``; raises ``plugin_not_found``."""
        plugin = self._plugins.get(plugin_id)
        if plugin is None:
            raise NotFound("plugin", plugin_id)
        return plugin

    def _registered(self, kind: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for plugin in self._plugins.values():
            if plugin.status == "loaded":
                out.update(plugin.registrations.table(kind))
        return out

    def manifests(self) -> list[ManifestContribution]:
        """Plugin manifests in plugin load order (lowest detection precedence)."""
        return list(self._registered("manifests").values())

    def integrations(self) -> dict[str, Integration]:
        return self._registered("integrations")

    def view_sorts(self) -> dict[str, ViewSort]:
        return self._registered("view_sorts")

    def view_filters(self) -> dict[str, ViewFilter]:
        return self._registered("view_filters")

    def graphics_sources(self) -> dict[str, GraphicsSource]:
        return self._registered("graphics_sources")

    def plugin_methods(self) -> dict[str, PluginMethod]:
        return self._registered("methods")

    # -- calling plugins --------------------------------------------------------------------

    async def invoke(self, plugin_id: str, label: str, fn: Callable[..., Any],
                     *args: Any, **kwargs: Any) -> Any:
        """Run a callable a plugin registered (an integration's ``install``, ...).

        Sync callables run on the plugin's worker thread, coroutines on its loop, both under
        the time budget. A :class:`CmuxError` passes through; any other failure is recorded
        against the plugin and raised as ``plugin_failed`` (``plugin_timeout`` past the
        budget); ``plugin_disabled`` when the plugin is no longer loaded.
        """
        return await self._calls.run(self.get(plugin_id), label, fn, args, kwargs)

    async def call_hook(self, hook: str, **kwargs: Any) -> list[HookOutcome]:
        """Call ``hook`` on every loaded plugin in pluggy order, each contained.

        Returns one outcome per hookimpl; a failure is recorded against its plugin and never
        stops the others.
        """
        outcomes: list[HookOutcome] = []
        for impl in reversed(getattr(self.pm.hook, hook).get_hookimpls()):
            plugin = self._by_module.get(id(impl.plugin))
            if plugin is None or plugin.status != "loaded" or plugin.module is not impl.plugin:
                continue
            ok, value = await self._calls.call_impl(plugin, hook, impl, kwargs)
            outcomes.append(HookOutcome(plugin.plugin_id, ok, value if ok else None,
                                        None if ok else value))
        return outcomes

    def on_event(self, kind: str, data: Mapping[str, Any]) -> None:
        """Queue ``cmux_on_event`` for every observer; returns at once and never raises."""
        self._observers.on_event(kind, data)

    def notify_report_agent(self, pane_id: str, report: Mapping[str, Any]) -> None:
        """Queue ``cmux_on_report_agent`` with the accepted ``pane.report_agent`` params."""
        self._observers.notify_report_agent(pane_id, report)

    def notify_report_metadata(self, pane_id: str, report: Mapping[str, Any]) -> None:
        """Queue ``cmux_on_report_metadata`` with the accepted ``pane.report_metadata`` params."""
        self._observers.notify_report_metadata(pane_id, report)

    # -- control (plugin.* methods) ---------------------------------------------------------

    async def enable(self, plugin_id: str) -> Plugin:
        """Enable and load ``plugin_id`` (a blocked plugin is retried); persisted."""
        async with self._lock:
            plugin = self.get(plugin_id)
            was_disabled = plugin_id in self._state.disabled
            self._state.disabled.discard(plugin_id)
            self._save(lambda: self._state.disabled.add(plugin_id) if was_disabled else None)
            plugin.enabled = True
            if plugin.status != "loaded":
                plugin.error = None
                plugin.failures = 0
                await self._load(plugin)
            return plugin

    async def disable(self, plugin_id: str) -> Plugin:
        """Unload ``plugin_id`` and keep it unloaded across restarts; idempotent."""
        async with self._lock:
            plugin = self.get(plugin_id)
            was_disabled = plugin_id in self._state.disabled
            self._state.disabled.add(plugin_id)
            self._save(lambda: None if was_disabled else self._state.disabled.discard(plugin_id))
            plugin.enabled = False
            if plugin.status == "loaded":
                await self._unload(plugin, "disabled", reason="disabled")
            elif plugin.status == "blocked":
                plugin.status = "disabled"
            return plugin

    async def link(self, path: str | Path, *, enabled: bool = True) -> list[Plugin]:
        """Load the plugin(s) at ``path`` now and on every start; returns them.

        ``path`` is a distribution directory (``pyproject.toml`` with ``cmux`` entry points), a
        ``.py`` file, or a directory of ``.py`` files. A plugin id already loaded from
        elsewhere is replaced by the linked one. Raises ``invalid_params`` (field ``path``)
        when the path holds no plugin. Linking a path twice returns the plugins it holds.
        """
        target = Path(path).expanduser()
        if not target.is_absolute():
            raise InvalidParams("path", "must be an absolute path")
        target = target.resolve()
        sources = sources_at(target)
        if not any(s.allowed(self.allowlist) for s in sources):
            raise CmuxError("plugin_not_allowed", f"CMUX_LOAD_PLUGINS excludes every plugin "
                            f"at {target}", {"plugin_ids": [s.plugin_id for s in sources]})
        async with self._lock:
            links, disabled = list(self._state.links), set(self._state.disabled)
            if target not in self._state.links:
                self._state.links.append(target)
            if not enabled:
                self._state.disabled.update(s.plugin_id for s in sources)

            def undo() -> None:
                self._state.links, self._state.disabled = links, disabled

            self._save(undo)
            for source in sources:
                plugin_id = source.plugin_id
                existing = self._plugins.get(plugin_id)
                if existing is not None and existing.source.link == target:
                    continue
                if existing is not None:
                    await self._remove(existing, reason="replaced")
                await self._admit(source)
            linked = [p for p in self._plugins.values() if p.source.link == target]
        self._restart_watcher()
        return linked

    async def unlink(self, plugin_id: str) -> list[str]:
        """Unload and forget every plugin of the link that provides ``plugin_id``.

        Returns the removed ids (empty when the plugin is not linked); raises
        ``plugin_not_found`` for an unknown id.
        """
        async with self._lock:
            link = self.get(plugin_id).source.link
            if link is None:
                return []
            removed = [p for p in self._plugins.values() if p.source.link == link]
            links = list(self._state.links)
            self._state.links.remove(link)

            def undo() -> None:
                self._state.links = links

            self._save(undo)
            for plugin in removed:
                await self._remove(plugin, reason="unlinked")
        self._restart_watcher()
        return [p.plugin_id for p in removed]

    def _save(self, undo: Callable[[], object]) -> None:
        """Persist the enable/disable/link choices, or put them back with ``undo`` and raise
        ``plugin_state_save_failed``: a choice that cannot be saved is not made."""
        try:
            self._state.write()
        except CmuxError:
            undo()
            raise

    async def reload(self, plugin_id: str) -> bool:
        """Re-read a file or linked plugin from disk; False when the new version was rejected.

        The last good version keeps serving when the new one fails to import, its import
        outlasts ``import_budget`` or a contribution hook raises; the failure is recorded and
        published.
        """
        async with self._lock:
            plugin = self.get(plugin_id)
            if not plugin.enabled:
                return False
            return await self._load(plugin)

    async def rescan(self) -> dict[str, list[str]]:
        """Follow the installed distributions without a restart: load the entry points
        installed since, drop those uninstalled, and load an upgraded one afresh. Returns
        the plugin ids ``added``, ``removed`` and ``upgraded``."""
        async with self._lock:
            changes = entry_point_changes({p.plugin_id: p.source for p in self.plugins()})
            for plugin_id in changes.gone:
                await self._remove(self._plugins[plugin_id], reason="uninstalled")
            for source in changes.changed:
                await self._remove(self._plugins[source.plugin_id], reason="upgraded")
                forget_package(source)
            for source in changes.new + changes.changed:
                await self._admit(source)
        return {"added": [s.plugin_id for s in changes.new], "removed": changes.gone,
                "upgraded": [s.plugin_id for s in changes.changed]}

    # -- discovery --------------------------------------------------------------------------

    async def _admit(self, source: PluginSource) -> None:
        """Create the record for a discovered source and load it unless disabled."""
        if not source.allowed(self.allowlist):
            return
        plugin_id = source.plugin_id
        existing = self._plugins.get(plugin_id)
        if existing is not None:
            if existing.source.path != source.path or existing.source.kind != source.kind:
                existing.warnings.append(f"{source.origin} also provides {plugin_id}; ignored")
            return
        plugin = Plugin(plugin_id, source, enabled=plugin_id not in self._state.disabled)
        self._plugins[plugin_id] = plugin
        if not _PLUGIN_ID_RE.match(plugin_id):
            self._block(plugin, "load", f"invalid plugin id {plugin_id!r}: use 1-64 of "
                        "A-Z a-z 0-9 _ - starting with a letter or digit")
            return
        if plugin.enabled:
            await self._load(plugin)

    async def _remove(self, plugin: Plugin, *, reason: str) -> None:
        """Unload ``plugin`` if loaded and forget its record; caller holds the lock."""
        if plugin.status == "loaded":
            await self._unload(plugin, "disabled", reason=reason)
        self._plugins.pop(plugin.plugin_id, None)

    # -- load / unload ----------------------------------------------------------------------

    async def _load(self, plugin: Plugin) -> bool:
        """Import (or re-import) ``plugin`` and swap it in atomically; caller holds the lock.

        Returns False when the new version was rejected: a first load leaves the plugin
        blocked; a reload keeps the previous version serving. The import and the
        contribution hooks run on the new version's own worker thread, so the loop keeps
        serving; an import that outlasts ``import_budget`` is abandoned on that thread.
        """
        reloading = plugin.status == "loaded"
        label = "reload" if reloading else "load"
        worker, job = self._begin_import(plugin)
        try:
            module, digest = await asyncio.wait_for(job, self.import_budget)
        except asyncio.CancelledError:
            worker.close()
            raise
        except Exception as exc:
            if job.cancelled():  # the budget ran out, not the plugin's own TimeoutError
                if not isinstance(worker, ProcessWorker):
                    release_abandoned(plugin.source, plugin.module)
                self._retire(plugin, worker)
                self._reject(plugin, label, f"import timed out after {self.import_budget:g}s "
                             f"({worker.ABANDONED})", None)
            else:
                worker.close()
                self._reject(plugin, label, f"import failed: {describe(exc)}", exc)
            return False
        if module is plugin.module:
            worker.close()
            return True
        plugin.generation += 1
        name = f"{plugin.plugin_id}#{plugin.generation}"
        try:
            self.pm.register(module, name=name)
        except Exception as exc:
            worker.close()
            self._reject(plugin, label, describe(exc), exc)
            return False
        problem = self._check_impls(module)
        if problem:
            self.pm.unregister(module)
            worker.close()
            self._reject(plugin, label, problem, None)
            return False
        staged = Registrations()
        self._by_module[id(module)] = plugin
        failed = await self._contribute(plugin, module, staged, worker)
        if reloading and failed:
            self.pm.unregister(module)
            self._by_module.pop(id(module), None)
            release_rejected(plugin.source, plugin.module, module)
            self._retire(plugin, worker)
            self._reject(plugin, label, f"{failed} raised; keeping the previous version", None)
            return False
        old = plugin.registrations
        if reloading:
            await self._withdraw(plugin, reason="reloaded")
        elif plugin.worker is not None:
            self._retire(plugin, plugin.worker)
        self._install(plugin, module, digest, staged, worker)
        self._changed(plugin, old.changed_kinds(staged))
        log.info("plugin %s loaded from %s", plugin.plugin_id, plugin.source.origin,
                 extra={"cmux_plugin": plugin.plugin_id})
        if self._started:
            await self._startup(plugin)
        self._calls.emit(PluginLoaded(plugin, reloading))
        return True

    def _begin_import(self, plugin: Plugin) -> tuple[PluginWorker, asyncio.Future[Any]]:
        """A new worker for ``plugin`` in the isolation it loads with, and its import job."""
        name = f"cmux-plugin-{plugin.plugin_id}"
        in_process = isinstance(plugin.worker, ProcessWorker)
        if isolation_of(plugin.source, self.settings) == "process":
            worker = ProcessWorker(name, plugin.plugin_id,
                                   on_exit=lambda how: self._on_exit(plugin, worker, how))
            serving = plugin.module if in_process else None
            return worker, asyncio.ensure_future(
                worker.load(plugin.source, serving, plugin.source_digest))
        thread = PluginWorker(name)
        return thread, thread.submit(functools.partial(
            import_source, plugin.source, None if in_process else plugin.module,
            plugin.source_digest))

    def _install(self, plugin: Plugin, module: object, digest: str, staged: Registrations,
                 worker: PluginWorker) -> None:
        """Make ``module`` (its registrations ``staged``, run by ``worker``) the serving
        version of ``plugin`` and add its methods to the server's table."""
        plugin.worker = worker
        plugin.isolation = "process" if isinstance(worker, ProcessWorker) else "thread"
        plugin.module = module
        plugin.source_digest = digest
        plugin.registrations = staged
        plugin.hooks = sorted(h.name for h in self.pm.get_hookcallers(module) or ())
        plugin.description = _first_line(getattr(module, "__doc__", None))
        plugin.version = str(getattr(module, "__version__", "") or "")
        plugin.status = "loaded"
        plugin.error = None
        plugin.failures = 0
        for method in staged.methods.values():
            handler = method_handler(plugin, method, invoke=self.invoke, caller=self._calls,
                                     api=self._api)
            self.methods.add(method.name, method.params or RawParams, handler,
                             owner=plugin.plugin_id, doc=method.doc)

    def _check_impls(self, module: object) -> str | None:
        for caller in self.pm.get_hookcallers(module) or ():
            for impl in caller.get_hookimpls():
                if impl.plugin is module and (impl.hookwrapper or impl.wrapper):
                    return f"{caller.name}: hook wrappers are not supported"
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            return str(exc)
        return None

    async def _contribute(self, plugin: Plugin, module: object, staged: Registrations,
                          worker: PluginWorker) -> str | None:
        """Run the contribution hooks of ``module`` (sync ones on ``worker``) into ``staged``;
        the first failed hook's name."""
        failed: str | None = None
        holder = functools.partial(self._holder, plugin.plugin_id)
        for hook in CONTRIBUTION_HOOKS:
            for impl in self._impls(module, hook):
                registrar = Registrar(plugin.plugin_id, hook, staged, holder, self.methods)
                ok, _ = await self._calls.call_impl(
                    plugin, hook, impl, {"register": registrar.register}, worker=worker)
                registrar.closed = True
                if ok:
                    staged.update(registrar.bucket)
                elif failed is None:
                    failed = hook
        return failed

    def _holder(self, plugin_id: str, kind: str, name: str) -> str | None:
        """The first loaded plugin other than ``plugin_id`` holding ``name`` in ``kind``."""
        for other in self._plugins.values():
            if other.plugin_id != plugin_id and other.status == "loaded" \
                    and name in other.registrations.table(kind):
                return other.plugin_id
        return None

    def _impls(self, module: object, hook: str) -> list[pluggy.HookImpl]:
        caller: pluggy.HookCaller = getattr(self.pm.hook, hook)
        return [impl for impl in caller.get_hookimpls() if impl.plugin is module]

    async def _startup(self, plugin: Plugin) -> None:
        if plugin.module is None or plugin.started:
            return
        plugin.started = True
        state = self.settings.state_dir / "plugins" / plugin.plugin_id
        for impl in self._impls(plugin.module, "cmux_startup"):
            await self._calls.call_impl(plugin, "cmux_startup", impl, {
                "plugin_id": plugin.plugin_id, "state_dir": state,
                "socket_path": self.socket_path})
        # Observer calls queued while it loaded come after its cmux_startup, in order.
        self._observers.kick(plugin, asyncio.get_running_loop())

    async def _withdraw(self, plugin: Plugin, *, reason: str) -> None:
        """Shut the serving version down and take back everything it registered."""
        module = plugin.module
        if module is None:
            return
        worker = plugin.worker
        if plugin.started:
            for impl in self._impls(module, "cmux_shutdown"):
                if worker is not None and worker.stuck:
                    self._calls.warn(plugin, f"cmux_shutdown not called: {worker.STUCK}")
                    continue
                await self._calls.call_impl(plugin, "cmux_shutdown", impl,
                                            {"plugin_id": plugin.plugin_id})
        plugin.started = False
        self._observers.discard(plugin)
        if worker is not None:
            self._retire(plugin, worker)
            plugin.worker = None
        with contextlib.suppress(ValueError):
            self.pm.unregister(module)
        self._by_module.pop(id(module), None)
        self.methods.remove_owner(plugin.plugin_id)
        old, plugin.registrations = plugin.registrations, Registrations()
        plugin.module = None
        if reason != "reloaded":
            release_modules(plugin.source)
            self._changed(plugin, old.changed_kinds(plugin.registrations))

    def _retire(self, plugin: Plugin, worker: PluginWorker) -> None:
        """Let ``worker`` end after its current call; one stuck in a call the host stopped
        waiting for is abandoned (a daemon; Python cannot stop it), logged and counted."""
        if worker.stuck:
            plugin.abandoned_threads += 1
            self._calls.warn(plugin, f"{worker.RETIRED} ({plugin.abandoned_threads} so far)")
        worker.close()

    async def _unload(self, plugin: Plugin, status: Status, *, reason: str,
                      publish: bool = True) -> None:
        await self._withdraw(plugin, reason=reason)
        plugin.status = status
        plugin.source_digest = ""
        log.info("plugin %s unloaded (%s)", plugin.plugin_id, reason,
                 extra={"cmux_plugin": plugin.plugin_id})
        if publish:
            self._calls.emit(PluginUnloaded(plugin, reason))

    def _reject(self, plugin: Plugin, label: str, message: str,
                exc: BaseException | None) -> None:
        """A load or reload failed: block a first load, keep a serving version."""
        if plugin.status == "loaded":
            self._calls.fault(plugin, label, message, exc=exc, count=False)
        else:
            self._block(plugin, label, message, exc=exc)

    def _block(self, plugin: Plugin, label: str, message: str,
               exc: BaseException | None = None) -> None:
        plugin.status = "blocked"
        plugin.error = message
        self._calls.fault(plugin, label, message, exc=exc, count=False, blocked=True)

    def _on_failing(self, plugin: Plugin) -> None:
        self._later(self._block_failing(plugin))

    def _on_hanging(self, plugin: Plugin, worker: PluginWorker, label: str) -> None:
        self._later(self._block_hung(plugin, worker, label))

    def _on_exit(self, plugin: Plugin, worker: PluginWorker, how: str) -> None:
        """``worker``'s process ended unasked: block the plugin if that version serves."""
        self._later(self._block_serving(plugin, worker, f"blocked: its process {how}; enable "
                                        "it, or save its source, to start a new one"))

    def _later(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _block_hung(self, plugin: Plugin, worker: PluginWorker, label: str) -> None:
        """Block ``plugin`` when ``worker`` is still stuck a budget after ``label`` timed out
        and is still the one serving it."""
        if await worker.hung(self._calls.budget):
            await self._block_serving(plugin, worker, (
                f"blocked: {label} ran past its {self._calls.budget:g}s budget and is still "
                "running (a coroutine that never yields or a call that never returns; "
                f"{worker.ABANDONED})"))

    async def _block_serving(self, plugin: Plugin, worker: PluginWorker, message: str) -> None:
        async with self._lock:
            if plugin.status != "loaded" or plugin.worker is not worker:
                return
            await self._unload(plugin, "blocked", reason="blocked")
            plugin.error = message
            self._calls.fault(plugin, "block", message, count=False, blocked=True)

    async def _block_failing(self, plugin: Plugin) -> None:
        async with self._lock:
            if plugin.status != "loaded" or plugin.failures < self._calls.max_failures:
                return
            message = f"blocked after {plugin.failures} consecutive failures"
            await self._unload(plugin, "blocked", reason="blocked")
            plugin.error = message
            self._calls.fault(plugin, "block", message, count=False, blocked=True)

    # -- registration changes ---------------------------------------------------------------

    def _changed(self, plugin: Plugin, kinds: set[str]) -> None:
        if not kinds or self._publish is None:
            return
        try:
            self._publish(PluginRegistrationsChanged(plugin.plugin_id, frozenset(kinds)))
        except Exception:
            log.exception("publishing the registration change of %s failed", plugin.plugin_id)

    # -- hot reload -------------------------------------------------------------------------

    def watch_roots(self) -> list[WatchRoot]:
        """What hot reload watches: plugin dirs and linked plain dirs one level deep, a
        linked distribution's whole source tree, a linked file and nothing beside it."""
        roots = [WatchRoot(d) for d, _ in loose_dirs(self.plugin_dirs(), self._state.links)
                 if d.is_dir()]
        for plugin in self._plugins.values():
            src = plugin.source
            if src.kind == "package" and src.root is not None and src.root.is_dir():
                roots.append(WatchRoot(src.root, recursive=True))
            elif src.kind == "file" and src.path is not None and src.path.parent.is_dir():
                roots.append(WatchRoot(src.path.parent, names=frozenset({src.path.name})))
        return roots

    def _restart_watcher(self) -> None:
        if self.watch:
            self._watcher.restart(self.watch_roots())

    async def _apply_changes(self, paths: set[Path]) -> None:
        async with self._lock:
            touched: list[Plugin] = []
            for plugin in self._plugins.values():
                src = plugin.source
                root = src.root if src.kind == "package" else None
                if (src.kind == "file" and src.path in paths) or (
                        root is not None and any(p.is_relative_to(root) for p in paths)):
                    touched.append(plugin)
            for plugin in touched:
                path = plugin.source.path
                if plugin.source.kind == "file" and path is not None and not path.exists():
                    await self._remove(plugin, reason="removed")
                elif plugin.enabled:
                    if plugin.status == "blocked":
                        plugin.error = None
                    await self._load(plugin)
            known = {p.source.path for p in self._plugins.values()}
            for directory, link in loose_dirs(self.plugin_dirs(), self._state.links):
                for source in loose_files(directory, link):
                    if source.path in paths and source.path not in known:
                        await self._admit(source)


def _import_budget_from_env() -> float:
    raw = os.environ.get("CMUX_PLUGIN_IMPORT_BUDGET", "").strip()
    if not raw:
        return IMPORT_BUDGET
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        log.warning("ignoring CMUX_PLUGIN_IMPORT_BUDGET=%r: not a positive number of seconds; "
                    "using %gs", raw, IMPORT_BUDGET)
        return IMPORT_BUDGET
    return value


def _first_line(doc: object) -> str:
    if not isinstance(doc, str):
        return ""
    return next((line.strip() for line in doc.strip().splitlines() if line.strip()), "")

