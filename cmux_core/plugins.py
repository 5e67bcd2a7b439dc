"""The plugin host: finds, loads, isolates, hot-reloads and withdraws plugins.

Sources, in load order (the first to claim a plugin id wins; later claimants get a warning):

1. linked paths (``plugin.link``; persisted in ``<state dir>/plugins.json``): a distribution
   directory with ``[project.entry-points.cmux]`` in its ``pyproject.toml``, a single ``.py``
   file, or a directory of loose ``.py`` files;
2. installed entry points in group ``cmux``, loaded one at a time so a broken one is blocked
   and the others still load;
3. loose ``*.py`` files in ``~/.config/cmux/plugins/`` and every ``--plugins-dir``
   (files whose names start with ``.`` or ``_`` are skipped).

``CMUX_LOAD_PLUGINS`` (comma-separated ids or distribution names) limits loading to those
plugins; set but empty it loads none. ``CMUX_TRACE_PLUGINS=1`` logs every hook call on the
``cmux_core.plugins.trace`` logger (to stderr when nothing else handles it).

Every hookimpl is called by the host itself, one at a time, so one plugin's failure never
loses another's result (see :mod:`cmux_core.hookspecs` for the calling rules). All loading,
unloading and reloading runs under one lock on the server loop; a reload builds the new
version's registrations completely before the old version is withdrawn, so readers see
either the old set or the new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import importlib
import importlib.metadata
import inspect
import json
import logging
import os
import queue
import re
import sys
import threading
import time
import tomllib
import traceback
import types
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pluggy
from pydantic import ConfigDict

from . import hookspecs
from .config import config_dir
from .dispatch import Call, MethodTable, Params
from .errors import CmuxError, InternalError, InvalidParams, NotFound
from .hookspecs import GraphicsFrame, MethodHandler, RegistrationError

if TYPE_CHECKING:
    from .config import Settings

log = logging.getLogger(__name__)
trace_log = logging.getLogger(__name__ + ".trace")

ENTRY_POINT_GROUP = "cmux"
STATE_FILE = "plugins.json"
CONTRIBUTION_HOOKS = (
    "cmux_register_manifests", "cmux_register_integrations", "cmux_register_view_sorts",
    "cmux_register_view_filters", "cmux_register_graphics_sources", "cmux_register_methods",
)
OBSERVER_HOOKS = ("cmux_on_report_agent", "cmux_on_report_metadata", "cmux_on_event")
FAULT_HISTORY = 20
"""Errors and warnings kept per plugin for ``plugin.list``."""
OBSERVER_QUEUE_LIMIT = 1000
"""Observer calls one plugin may have waiting before new ones are dropped."""

_PLUGIN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
_METHOD_RE = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")

Publish = Callable[[str, dict[str, Any]], None]
SourceKind = Literal["entry_point", "file", "package"]
Status = Literal["loaded", "disabled", "blocked"]


# -- what plugins register ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ManifestContribution:
    """A detection manifest from a plugin; ``data`` is the parsed TOML table."""

    plugin_id: str
    agent_id: str
    data: Mapping[str, Any]
    text: str | None = None
    path: Path | None = None


@dataclass(frozen=True, slots=True)
class Integration:
    """An installable agent integration; call its callables through :meth:`PluginHost.invoke`."""

    plugin_id: str
    name: str
    install: Callable[[], Any]
    uninstall: Callable[[], Any]
    status: Callable[[], Any]
    description: str = ""
    source: str | None = None
    agent: str | None = None
    authority: str | None = None


@dataclass(frozen=True, slots=True)
class ViewSort:
    plugin_id: str
    name: str
    key: Callable[[Mapping[str, Any]], Any]
    description: str = ""


@dataclass(frozen=True, slots=True)
class ViewFilter:
    plugin_id: str
    name: str
    predicate: Callable[[Mapping[str, Any]], bool]
    description: str = ""


@dataclass(frozen=True, slots=True)
class GraphicsSource:
    plugin_id: str
    name: str
    open: Callable[[str, Mapping[str, Any]], AsyncIterator[GraphicsFrame]]
    description: str = ""


@dataclass(frozen=True, slots=True)
class PluginMethod:
    """A socket method a plugin added; ``name`` is the full ``plugin.<id>.<name>``."""

    plugin_id: str
    name: str
    handler: MethodHandler
    params: type[Params] | None
    doc: str = ""


@dataclass(slots=True)
class Registrations:
    """Everything one plugin version registered, by kind and name."""

    manifests: dict[str, ManifestContribution] = field(default_factory=dict)
    integrations: dict[str, Integration] = field(default_factory=dict)
    view_sorts: dict[str, ViewSort] = field(default_factory=dict)
    view_filters: dict[str, ViewFilter] = field(default_factory=dict)
    graphics_sources: dict[str, GraphicsSource] = field(default_factory=dict)
    methods: dict[str, PluginMethod] = field(default_factory=dict)

    KINDS = ("manifests", "integrations", "view_sorts", "view_filters", "graphics_sources",
             "methods")

    def table(self, kind: str) -> dict[str, Any]:
        table: dict[str, Any] = getattr(self, kind)
        return table

    def update(self, other: Registrations) -> None:
        for kind in self.KINDS:
            self.table(kind).update(other.table(kind))

    def summary(self) -> dict[str, list[str]]:
        return {kind: sorted(self.table(kind)) for kind in self.KINDS}

    def changed_kinds(self, other: Registrations) -> set[str]:
        return {k for k in self.KINDS if self.table(k) or other.table(k)}


class _RawParams(Params):
    """Params of a plugin method that declared no model: every key is kept."""

    model_config = ConfigDict(extra="allow")


# -- plugin records -------------------------------------------------------------------------


@dataclass(slots=True)
class PluginSource:
    """Where a plugin comes from. ``root`` is the directory put on ``sys.path`` for packages;
    ``link`` is the linked path that provided it (None for entry points and plugin dirs)."""

    plugin_id: str
    kind: SourceKind
    origin: str
    path: Path | None = None
    entry: str | None = None
    root: Path | None = None
    dist_name: str | None = None
    version: str = ""
    link: Path | None = None
    entry_point: importlib.metadata.EntryPoint | None = None

    def to_wire(self) -> dict[str, Any]:
        """herdr's ``PluginSourceInfo`` (``kind`` is always ``local``) plus how it loads."""
        return {"kind": "local", "loader": self.kind, "origin": self.origin,
                "path": str(self.path) if self.path else None,
                "link": str(self.link) if self.link else None}


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
    recent history, newest last.
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
    worker: _Worker | None = None
    inbox: deque[tuple[str, dict[str, Any]]] = field(default_factory=deque)
    drain: asyncio.Task[None] | None = None
    overflowing: bool = False

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
        }


class _Worker:
    """A daemon thread running one plugin's synchronous callables in order.

    A callable that never returns keeps only this plugin waiting; the thread is a daemon so
    it cannot hold the process open at exit.
    """

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[
            tuple[Callable[[], Any], asyncio.Future[Any], asyncio.AbstractEventLoop] | None
        ] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[], Any]) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._jobs.put((fn, future, loop))
        return future

    def close(self) -> None:
        self._jobs.put(None)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, future, loop = job
            if future.cancelled():
                continue
            try:
                outcome: tuple[bool, Any] = (True, fn())
            except BaseException as exc:
                outcome = (False, exc)
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


@dataclass(frozen=True, slots=True)
class HookOutcome:
    """One plugin's answer to a hook call: ``value`` when ``ok``, else ``error``."""

    plugin_id: str
    ok: bool
    value: Any = None
    error: str | None = None


# -- the host -------------------------------------------------------------------------------


class PluginHost:
    """Owns every plugin of one server: the pluggy manager, records, workers and watchers.

    ``methods`` is the server's method table (plugin methods are added to it with
    ``owner=<plugin_id>``); ``publish(kind, data)`` sends ``plugin_loaded``,
    ``plugin_unloaded`` and ``plugin_error`` events. Time limits are in seconds: a hook call
    longer than ``slow_after`` is warned about, one longer than ``budget`` is abandoned and
    counts as a failure; ``max_failures`` consecutive failures block the plugin.
    ``entry_points=False`` skips installed distributions (tests); ``watch=False`` disables hot
    reload. Must be started and stopped on the loop that serves requests.
    """

    def __init__(self, settings: Settings, *, methods: MethodTable | None = None,
                 publish: Publish | None = None, socket_path: str | Path | None = None,
                 slow_after: float = 1.0, budget: float = 10.0, max_failures: int = 5,
                 entry_points: bool = True, watch: bool = True,
                 watch_debounce_ms: int = 300) -> None:
        self.settings = settings
        self.methods = methods if methods is not None else MethodTable()
        self._publish = publish
        self.socket_path = str(socket_path) if socket_path is not None else None
        self.slow_after = slow_after
        self.budget = budget
        self.max_failures = max_failures
        self.load_entry_points = entry_points
        self.watch = watch
        self.watch_debounce_ms = watch_debounce_ms
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.allowlist = _allowlist_from_env()
        self.trace = os.environ.get("CMUX_TRACE_PLUGINS", "") not in ("", "0")
        if self.trace and not trace_log.handlers and not logging.getLogger().handlers:
            trace_log.addHandler(logging.StreamHandler(sys.stderr))
        if self.trace:
            trace_log.setLevel(logging.INFO)
        self._plugins: dict[str, Plugin] = {}
        self._by_module: dict[int, Plugin] = {}
        self._disabled: set[str] = set()
        self._links: list[Path] = []
        self._lock = asyncio.Lock()
        self._loaded = False
        self._started = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._watch_task: asyncio.Task[None] | None = None
        self._watch_stop: asyncio.Event | None = None
        self._watch_ready = asyncio.Event()
        self._listeners: list[Callable[[str, set[str]], None]] = []

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def state_path(self) -> Path:
        return self.settings.state_dir / STATE_FILE

    def plugin_dirs(self) -> list[Path]:
        """Directories whose loose ``*.py`` files are plugins (user dir first)."""
        dirs = [config_dir() / "plugins", *self.settings.plugins_dirs]
        seen: list[Path] = []
        for d in dirs:
            d = d.expanduser().resolve()
            if d not in seen:
                seen.append(d)
        return seen

    async def load(self) -> None:
        """Discover and load every plugin (registrations, methods) without starting them.

        Call before the socket accepts connections so the first request sees every plugin
        method; idempotent. Never raises for a plugin's fault: broken plugins end up
        blocked with their error.
        """
        if self._loaded:
            return
        self._loaded = True
        self._read_state()
        async with self._lock:
            for source in self._discover():
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
        await self._stop_watcher()
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
        await asyncio.wait_for(self._watch_ready.wait(), timeout)

    def add_change_listener(self, listener: Callable[[str, set[str]], None]) -> None:
        """Call ``listener(plugin_id, kinds)`` after a plugin's registrations changed.

        ``kinds`` names the registration tables touched (``manifests``, ``view_sorts``, ...),
        so detection or views can rebuild. Called on the loop; must not raise or block.
        """
        self._listeners.append(listener)

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

        Sync callables run on the plugin's worker thread, coroutines on the loop, both under
        the time budget. A :class:`CmuxError` passes through; any other failure is recorded
        against the plugin and raised as ``plugin_failed`` (``plugin_timeout`` past the
        budget); ``plugin_disabled`` when the plugin is no longer loaded.
        """
        plugin = self.get(plugin_id)
        if plugin.status != "loaded":
            raise CmuxError("plugin_disabled", f"plugin {plugin_id} is {plugin.status}")
        try:
            return await self._execute(plugin, label, fn, args, kwargs)
        except CmuxError:
            raise
        except TimeoutError:
            self._fault(plugin, label, f"timed out after {self.budget:g}s", count=False)
            raise CmuxError("plugin_timeout", f"plugin {plugin_id}: {label} timed out",
                            {"plugin_id": plugin_id}) from None
        except Exception as exc:
            self._fault(plugin, label, _describe(exc), exc=exc, count=False)
            raise CmuxError("plugin_failed", f"plugin {plugin_id}: {label}: {_describe(exc)}",
                            {"plugin_id": plugin_id}) from exc

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
            ok, value = await self._invoke(plugin, hook, impl, kwargs)
            outcomes.append(HookOutcome(plugin.plugin_id, ok, value if ok else None,
                                        None if ok else value))
        return outcomes

    def on_event(self, kind: str, data: Mapping[str, Any]) -> None:
        """Queue ``cmux_on_event`` for every observer; returns at once and never raises."""
        if kind == "plugin_error":
            return
        self._fan_out("cmux_on_event", {"kind": kind, "data": types.MappingProxyType(data)})

    def notify_report_agent(self, pane_id: str, report: Mapping[str, Any]) -> None:
        """Queue ``cmux_on_report_agent`` with the accepted ``pane.report_agent`` params."""
        self._fan_out("cmux_on_report_agent", {
            "pane_id": pane_id, "source": str(report.get("source", "")),
            "agent": str(report.get("agent", "")), "state": str(report.get("state", "")),
            "message": report.get("message"), "report": types.MappingProxyType(dict(report)),
        })

    def notify_report_metadata(self, pane_id: str, report: Mapping[str, Any]) -> None:
        """Queue ``cmux_on_report_metadata`` with the accepted ``pane.report_metadata`` params."""
        self._fan_out("cmux_on_report_metadata", {
            "pane_id": pane_id, "source": str(report.get("source", "")),
            "tokens": types.MappingProxyType(dict(report.get("tokens") or {})),
            "report": types.MappingProxyType(dict(report)),
        })

    # -- control (plugin.* methods) ---------------------------------------------------------

    async def enable(self, plugin_id: str) -> Plugin:
        """Enable and load ``plugin_id`` (a blocked plugin is retried); persisted."""
        async with self._lock:
            plugin = self.get(plugin_id)
            plugin.enabled = True
            self._disabled.discard(plugin_id)
            self._write_state()
            if plugin.status != "loaded":
                plugin.error = None
                plugin.failures = 0
                await self._load(plugin)
            return plugin

    async def disable(self, plugin_id: str) -> Plugin:
        """Unload ``plugin_id`` and keep it unloaded across restarts; idempotent."""
        async with self._lock:
            plugin = self.get(plugin_id)
            plugin.enabled = False
            self._disabled.add(plugin_id)
            self._write_state()
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
        sources = _sources_at(target)
        if not any(self._allowed(s) for s in sources):
            raise CmuxError("plugin_not_allowed", f"CMUX_LOAD_PLUGINS excludes every plugin "
                            f"at {target}", {"plugin_ids": [s.plugin_id for s in sources]})
        async with self._lock:
            if target not in self._links:
                self._links.append(target)
            for source in sources:
                plugin_id = source.plugin_id
                if not enabled:
                    self._disabled.add(plugin_id)
                existing = self._plugins.get(plugin_id)
                if existing is not None and existing.source.link == target:
                    continue
                if existing is not None:
                    if existing.status == "loaded":
                        await self._unload(existing, "disabled", reason="replaced")
                    self._forget(existing)
                await self._admit(source)
            self._write_state()
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
            for plugin in removed:
                if plugin.status == "loaded":
                    await self._unload(plugin, "disabled", reason="unlinked")
                self._forget(plugin)
            self._links.remove(link)
            self._write_state()
        self._restart_watcher()
        return [p.plugin_id for p in removed]

    async def reload(self, plugin_id: str) -> bool:
        """Re-read a file or linked plugin from disk; False when the new version was rejected.

        The last good version keeps serving when the new one fails to import or a
        contribution hook raises; the failure is recorded and published.
        """
        async with self._lock:
            plugin = self.get(plugin_id)
            if not plugin.enabled:
                return False
            return await self._load(plugin)

    # -- discovery --------------------------------------------------------------------------

    def _allowed(self, source: PluginSource) -> bool:
        if self.allowlist is None:
            return True
        return source.plugin_id in self.allowlist or source.dist_name in self.allowlist

    def _discover(self) -> list[PluginSource]:
        sources: list[PluginSource] = []
        for link in list(self._links):
            try:
                sources += _sources_at(link)
            except CmuxError as exc:
                log.warning("linked plugin path %s: %s", link, exc.message)
        if self.load_entry_points:
            for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
                dist = ep.dist
                sources.append(PluginSource(
                    ep.name, "entry_point", f"entry point {ep.name} = {ep.value}",
                    entry=ep.value,
                    dist_name=dist.name if dist else None,
                    version=dist.version if dist else "", entry_point=ep))
        for directory in self.plugin_dirs():
            sources += _loose_files(directory)
        return sources

    def _loose_dirs(self) -> list[tuple[Path, Path | None]]:
        """Configured plugin dirs and linked plain dirs, each with the link that added it."""
        dirs: list[tuple[Path, Path | None]] = [(d, None) for d in self.plugin_dirs()]
        dirs += [(p, p) for p in self._links if p.is_dir() and not (p / "pyproject.toml").exists()]
        return dirs

    async def _admit(self, source: PluginSource) -> None:
        """Create the record for a discovered source and load it unless disabled."""
        if not self._allowed(source):
            return
        plugin_id = source.plugin_id
        existing = self._plugins.get(plugin_id)
        if existing is not None:
            if existing.source.path != source.path or existing.source.kind != source.kind:
                existing.warnings.append(f"{source.origin} also provides {plugin_id}; ignored")
            return
        plugin = Plugin(plugin_id, source, enabled=plugin_id not in self._disabled)
        self._plugins[plugin_id] = plugin
        if not _PLUGIN_ID_RE.match(plugin_id):
            self._block(plugin, "load", f"invalid plugin id {plugin_id!r}: use 1-64 of "
                        "A-Z a-z 0-9 _ - starting with a letter or digit")
            return
        if plugin.enabled:
            await self._load(plugin)

    def _forget(self, plugin: Plugin) -> None:
        self._plugins.pop(plugin.plugin_id, None)

    # -- load / unload ----------------------------------------------------------------------

    async def _load(self, plugin: Plugin) -> bool:
        """Import (or re-import) ``plugin`` and swap it in atomically; caller holds the lock.

        Returns False when the new version was rejected: a first load leaves the plugin
        blocked; a reload keeps the previous version serving.
        """
        reloading = plugin.status == "loaded"
        label = "reload" if reloading else "load"
        try:
            module, digest = _import(plugin)
        except Exception as exc:
            self._reject(plugin, label, f"import failed: {_describe(exc)}", exc)
            return False
        if module is plugin.module:
            return True
        plugin.generation += 1
        name = f"{plugin.plugin_id}#{plugin.generation}"
        try:
            self.pm.register(module, name=name)
        except Exception as exc:
            self._reject(plugin, label, _describe(exc), exc)
            return False
        problem = self._check_impls(module)
        if problem:
            self.pm.unregister(module)
            self._reject(plugin, label, problem, None)
            return False
        staged = _Staged(plugin, module)
        self._by_module[id(module)] = plugin
        failed = await self._contribute(plugin, module, staged)
        if reloading and failed:
            self.pm.unregister(module)
            self._by_module.pop(id(module), None)
            _release_new(plugin, module)
            self._reject(plugin, label, f"{failed} raised; keeping the previous version", None)
            return False
        old = plugin.registrations
        if reloading:
            await self._withdraw(plugin, reason="reloaded")
        plugin.module = module
        plugin.source_digest = digest
        plugin.registrations = staged.registrations
        plugin.hooks = sorted(h.name for h in self.pm.get_hookcallers(module) or ())
        plugin.description = _first_line(getattr(module, "__doc__", None))
        plugin.version = str(getattr(module, "__version__", "") or "")
        plugin.status = "loaded"
        plugin.error = None
        plugin.failures = 0
        for method in staged.registrations.methods.values():
            self.methods.add(method.name, method.params or _RawParams,
                             self._method_handler(plugin, method), owner=plugin.plugin_id,
                             doc=method.doc)
        self._changed(plugin, old.changed_kinds(staged.registrations))
        log.info("plugin %s loaded from %s", plugin.plugin_id, plugin.source.origin,
                 extra={"cmux_plugin": plugin.plugin_id})
        if self._started:
            await self._startup(plugin)
        self._emit("plugin_loaded", {"plugin_id": plugin.plugin_id, "reloaded": reloading,
                                     "plugin": plugin.to_wire()})
        return True

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

    async def _contribute(self, plugin: Plugin, module: object, staged: _Staged) -> str | None:
        """Run the plugin's contribution hooks into ``staged``; the first failed hook's name."""
        failed: str | None = None
        for hook in CONTRIBUTION_HOOKS:
            for impl in self._impls(module, hook):
                registrar = _Registrar(self, staged, hook)
                ok, _ = await self._invoke(plugin, hook, impl, {"register": registrar.register})
                registrar.closed = True
                if ok:
                    staged.registrations.update(registrar.bucket)
                elif failed is None:
                    failed = hook
        return failed

    def _impls(self, module: object, hook: str) -> list[pluggy.HookImpl]:
        caller: pluggy.HookCaller = getattr(self.pm.hook, hook)
        return [impl for impl in caller.get_hookimpls() if impl.plugin is module]

    async def _startup(self, plugin: Plugin) -> None:
        if plugin.module is None or plugin.started:
            return
        plugin.started = True
        state = self.settings.state_dir / "plugins" / plugin.plugin_id
        for impl in self._impls(plugin.module, "cmux_startup"):
            await self._invoke(plugin, "cmux_startup", impl, {
                "plugin_id": plugin.plugin_id, "state_dir": state,
                "socket_path": self.socket_path})

    async def _withdraw(self, plugin: Plugin, *, reason: str) -> None:
        """Shut the serving version down and take back everything it registered."""
        module = plugin.module
        if module is None:
            return
        if plugin.started:
            for impl in self._impls(module, "cmux_shutdown"):
                await self._invoke(plugin, "cmux_shutdown", impl,
                                   {"plugin_id": plugin.plugin_id})
        plugin.started = False
        if plugin.drain is not None and plugin.drain is not asyncio.current_task():
            plugin.drain.cancel()
        plugin.drain = None
        plugin.inbox.clear()
        if plugin.worker is not None and reason != "reloaded":
            plugin.worker.close()
            plugin.worker = None
        with contextlib.suppress(ValueError):
            self.pm.unregister(module)
        self._by_module.pop(id(module), None)
        self.methods.remove_owner(plugin.plugin_id)
        old, plugin.registrations = plugin.registrations, Registrations()
        plugin.module = None
        if reason != "reloaded":
            _release_modules(plugin)
            self._changed(plugin, old.changed_kinds(plugin.registrations))

    async def _unload(self, plugin: Plugin, status: Status, *, reason: str,
                      publish: bool = True) -> None:
        await self._withdraw(plugin, reason=reason)
        plugin.status = status
        plugin.source_digest = ""
        log.info("plugin %s unloaded (%s)", plugin.plugin_id, reason,
                 extra={"cmux_plugin": plugin.plugin_id})
        if publish:
            self._emit("plugin_unloaded", {"plugin_id": plugin.plugin_id, "reason": reason,
                                           "plugin": plugin.to_wire()})

    def _reject(self, plugin: Plugin, label: str, message: str,
                exc: BaseException | None) -> None:
        """A load or reload failed: block a first load, keep a serving version."""
        if plugin.status == "loaded":
            self._fault(plugin, label, message, exc=exc, count=False)
        else:
            self._block(plugin, label, message, exc=exc)

    def _block(self, plugin: Plugin, label: str, message: str,
               exc: BaseException | None = None) -> None:
        plugin.status = "blocked"
        plugin.error = message
        self._fault(plugin, label, message, exc=exc, count=False, blocked=True)

    async def _block_failing(self, plugin: Plugin) -> None:
        async with self._lock:
            if plugin.status != "loaded" or plugin.failures < self.max_failures:
                return
            message = f"blocked after {plugin.failures} consecutive failures"
            await self._unload(plugin, "blocked", reason="blocked")
            plugin.error = message
            self._fault(plugin, "block", message, count=False, blocked=True)

    # -- invocation -------------------------------------------------------------------------

    async def _invoke(self, plugin: Plugin, hook: str, impl: pluggy.HookImpl,
                      kwargs: Mapping[str, Any]) -> tuple[bool, Any]:
        """Call one hookimpl contained: ``(True, result)`` or ``(False, error message)``."""
        call_kwargs = {name: kwargs[name] for name in impl.argnames if name in kwargs}
        try:
            result = await self._execute(plugin, hook, impl.function, (), call_kwargs)
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            message = f"timed out after {self.budget:g}s"
            if self._by_module.get(id(impl.plugin)) is plugin:
                self._fault(plugin, hook, message)
            return False, message
        except Exception as exc:
            message = _describe(exc)
            # a version withdrawn while this call ran no longer counts against the plugin
            if self._by_module.get(id(impl.plugin)) is plugin:
                self._fault(plugin, hook, message, exc=exc)
            return False, message
        plugin.failures = 0
        return True, result

    async def _execute(self, plugin: Plugin, label: str, fn: Callable[..., Any],
                       args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        started = time.monotonic()
        if self.trace:
            trace_log.info("plugin %s: %s(%s)", plugin.plugin_id, label, ", ".join(kwargs),
                           extra={"cmux_plugin": plugin.plugin_id, "cmux_hook": label})
        outcome = "raised"
        try:
            if inspect.iscoroutinefunction(fn):
                result = await asyncio.wait_for(fn(*args, **kwargs), self.budget)
            else:
                worker = plugin.worker
                if worker is None:
                    worker = plugin.worker = _Worker(f"cmux-plugin-{plugin.plugin_id}")
                result = await asyncio.wait_for(
                    worker.submit(functools.partial(fn, *args, **kwargs)), self.budget)
                if inspect.isawaitable(result):
                    left = max(0.001, self.budget - (time.monotonic() - started))
                    result = await asyncio.wait_for(result, left)
            outcome = "ok"
            return result
        finally:
            elapsed = time.monotonic() - started
            if self.trace:
                trace_log.info("plugin %s: %s %s in %.1f ms", plugin.plugin_id, label, outcome,
                               elapsed * 1000, extra={"cmux_plugin": plugin.plugin_id})
            if elapsed > self.slow_after:
                self._warn(plugin, f"{label} took {elapsed:.2f}s "
                                   f"(warning at {self.slow_after:g}s, limit {self.budget:g}s)")

    def _fan_out(self, hook: str, kwargs: dict[str, Any]) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        for plugin in self._plugins.values():
            if plugin.status != "loaded" or hook not in plugin.hooks:
                continue
            if len(plugin.inbox) >= OBSERVER_QUEUE_LIMIT:
                if not plugin.overflowing:
                    plugin.overflowing = True
                    self._warn(plugin, f"observer queue full ({OBSERVER_QUEUE_LIMIT}); "
                                       "dropping calls until it drains")
                continue
            plugin.overflowing = False
            plugin.inbox.append((hook, kwargs))
            if plugin.drain is None or plugin.drain.done():
                plugin.drain = loop.create_task(self._drain(plugin))

    async def _drain(self, plugin: Plugin) -> None:
        module = plugin.module
        while plugin.inbox and plugin.module is module and module is not None:
            hook, kwargs = plugin.inbox.popleft()
            for impl in self._impls(module, hook):
                await self._invoke(plugin, hook, impl, kwargs)

    def _method_handler(self, plugin: Plugin, method: PluginMethod
                        ) -> Callable[[Call, Any], Any]:
        async def handle(call: Call, params: Any) -> dict[str, Any]:
            arg = params if method.params is not None else dict(params.model_extra or {})
            result = await self.invoke(plugin.plugin_id, method.name, method.handler, call, arg)
            if not isinstance(result, Mapping):
                self._fault(plugin, method.name,
                            f"returned {type(result).__name__}, not a dict", count=False)
                raise InternalError(message=f"{method.name} returned no result object")
            out = dict(result)
            out.setdefault("type", "plugin_result")
            return out

        return handle

    # -- faults, events, state --------------------------------------------------------------

    def _fault(self, plugin: Plugin, hook: str, message: str, *, exc: BaseException | None = None,
               count: bool = True, blocked: bool = False) -> None:
        tb = "".join(traceback.format_exception(exc)) if exc is not None else ""
        plugin.errors.append(PluginFault(hook, message, int(time.time() * 1000), tb))
        log.warning("plugin %s: %s: %s", plugin.plugin_id, hook, message,
                    exc_info=exc if exc is not None and not isinstance(exc, CmuxError) else None,
                    extra={"cmux_plugin": plugin.plugin_id, "cmux_hook": hook})
        self._emit("plugin_error", {"plugin_id": plugin.plugin_id, "hook": hook,
                                    "message": message, "blocked": blocked})
        if count:
            plugin.failures += 1
            if plugin.failures >= self.max_failures and plugin.status == "loaded":
                task = asyncio.get_running_loop().create_task(self._block_failing(plugin))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    def _warn(self, plugin: Plugin, message: str) -> None:
        plugin.warnings.append(message)
        log.warning("plugin %s: %s", plugin.plugin_id, message,
                    extra={"cmux_plugin": plugin.plugin_id})

    def _emit(self, kind: str, data: dict[str, Any]) -> None:
        if self._publish is None:
            return
        try:
            self._publish(kind, data)
        except Exception:
            log.exception("publishing %s failed", kind)

    def _changed(self, plugin: Plugin, kinds: set[str]) -> None:
        if not kinds:
            return
        for listener in list(self._listeners):
            try:
                listener(plugin.plugin_id, kinds)
            except Exception:
                log.exception("plugin change listener failed")

    def _read_state(self) -> None:
        try:
            data = json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable %s: %s", self.state_path, exc)
            return
        if isinstance(data, dict):
            self._disabled = {str(x) for x in data.get("disabled", []) if isinstance(x, str)}
            self._links = [Path(x) for x in data.get("links", []) if isinstance(x, str)]

    def _write_state(self) -> None:
        """Persist enable/disable and links; raises ``plugin_state_save_failed``."""
        body = json.dumps({"version": 1, "disabled": sorted(self._disabled),
                           "links": [str(p) for p in self._links]}, indent=2)
        path = self.state_path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(body + "\n")
            tmp.replace(path)
        except OSError as exc:
            raise CmuxError("plugin_state_save_failed", f"cannot write {path}: {exc}") from exc

    # -- hot reload -------------------------------------------------------------------------

    def _watch_roots(self) -> list[Path]:
        roots = [d for d, _ in self._loose_dirs() if d.is_dir()]
        for plugin in self._plugins.values():
            root = plugin.source.root if plugin.source.kind == "package" else None
            if plugin.source.kind == "file" and plugin.source.path is not None:
                root = plugin.source.path.parent
            if root is not None and root.is_dir() and root not in roots:
                roots.append(root)
        return roots

    def _restart_watcher(self) -> None:
        if not self.watch:
            return
        old, old_stop = self._watch_task, self._watch_stop
        if old_stop is not None:
            old_stop.set()
        roots = self._watch_roots()
        self._watch_ready.clear()
        if not roots:
            self._watch_task = self._watch_stop = None
            return
        self._watch_stop = asyncio.Event()
        self._watch_task = asyncio.get_running_loop().create_task(
            self._watch_loop(roots, self._watch_stop, old))

    async def _stop_watcher(self) -> None:
        if self._watch_stop is not None:
            self._watch_stop.set()
        task, self._watch_task = self._watch_task, None
        if task is not None:
            try:
                await asyncio.wait_for(task, 5)
            except (TimeoutError, asyncio.CancelledError):
                task.cancel()

    async def _watch_loop(self, roots: list[Path], stop: asyncio.Event,
                          previous: asyncio.Task[None] | None) -> None:
        import watchfiles

        if previous is not None:
            with contextlib.suppress(BaseException):
                await previous
        try:
            async for changes in watchfiles.awatch(
                    *roots, stop_event=stop, debounce=self.watch_debounce_ms,
                    rust_timeout=1000, yield_on_timeout=True,
                    watch_filter=lambda _change, path: path.endswith(".py")):
                self._watch_ready.set()
                if changes:
                    await self._apply_changes({Path(p) for _, p in changes})
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("plugin directory watcher stopped")

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
                    if plugin.status == "loaded":
                        await self._unload(plugin, "disabled", reason="removed")
                    self._forget(plugin)
                elif plugin.enabled:
                    if plugin.status == "blocked":
                        plugin.error = None
                    await self._load(plugin)
            known = {p.source.path for p in self._plugins.values()}
            for directory, link in self._loose_dirs():
                for source in _loose_files(directory, link):
                    if source.path in paths and source.path not in known:
                        await self._admit(source)


# -- registration -----------------------------------------------------------------------------


@dataclass(slots=True)
class _Staged:
    plugin: Plugin
    module: object
    registrations: Registrations = field(default_factory=Registrations)


class _Registrar:
    """The ``register`` callback for one contribution hookimpl call.

    Writes into its own bucket, merged into the staged version only when the hookimpl returns
    normally; raises :class:`RegistrationError` for bad input or a name held elsewhere.
    """

    def __init__(self, host: PluginHost, staged: _Staged, hook: str) -> None:
        self.host = host
        self.staged = staged
        self.hook = hook
        self.bucket = Registrations()
        self.closed = False
        by_hook: dict[str, Callable[..., None]] = {
            "cmux_register_manifests": self.manifest,
            "cmux_register_integrations": self.integration,
            "cmux_register_view_sorts": self.view_sort,
            "cmux_register_view_filters": self.view_filter,
            "cmux_register_graphics_sources": self.graphics_source,
            "cmux_register_methods": self.method,
        }
        self.register = by_hook[hook]

    @property
    def plugin_id(self) -> str:
        return self.staged.plugin.plugin_id

    def _claim(self, kind: str, name: str) -> None:
        if self.closed:
            raise RegistrationError(f"register called after {self.hook} returned")
        if name in self.bucket.table(kind) or name in self.staged.registrations.table(kind):
            raise RegistrationError(f"{kind[:-1].replace('_', ' ')} {name!r} is registered twice")
        for other in self.host.plugins():
            if other.plugin_id != self.plugin_id and other.status == "loaded" \
                    and name in other.registrations.table(kind):
                raise RegistrationError(f"{kind[:-1].replace('_', ' ')} {name!r} is already "
                                        f"registered by plugin {other.plugin_id}")

    def _named(self, kind: str, name: object) -> str:
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise RegistrationError(f"invalid name {name!r}: use 1-64 of a-z 0-9 _ - "
                                    "starting with a letter")
        self._claim(kind, name)
        return name

    def manifest(self, manifest: str | Path | Mapping[str, Any], /) -> None:
        text: str | None = None
        path: Path | None = None
        if isinstance(manifest, Path):
            path = manifest
            try:
                text = manifest.read_text()
            except OSError as exc:
                raise RegistrationError(f"cannot read manifest {manifest}: {exc}") from exc
        elif isinstance(manifest, str):
            text = manifest
        elif not isinstance(manifest, Mapping):
            raise RegistrationError("a manifest is TOML text, a Path or a mapping, "
                                    f"not {type(manifest).__name__}")
        if text is not None:
            try:
                data: Mapping[str, Any] = tomllib.loads(text)
            except tomllib.TOMLDecodeError as exc:
                raise RegistrationError(f"manifest {path or ''} is not valid TOML: {exc}"
                                        ) from exc
        else:
            assert isinstance(manifest, Mapping)
            data = dict(manifest)
        agent_id = data.get("id")
        if not isinstance(agent_id, str) or not agent_id.strip():
            raise RegistrationError("a manifest needs a string id")
        self._claim("manifests", agent_id)
        self.bucket.manifests[agent_id] = ManifestContribution(
            self.plugin_id, agent_id, types.MappingProxyType(dict(data)), text, path)

    def integration(self, name: str, *, install: Callable[[], Any],
                    uninstall: Callable[[], Any], status: Callable[[], Any],
                    description: str = "", source: str | None = None,
                    agent: str | None = None, authority: str | None = None) -> None:
        _require_callables(install=install, uninstall=uninstall, status=status)
        name = self._named("integrations", name)
        if authority not in (None, "lifecycle", "session"):
            raise RegistrationError(f"integration {name}: authority must be 'lifecycle' or "
                                    f"'session', not {authority!r}")
        if authority is not None and not (source and agent):
            raise RegistrationError(f"integration {name}: an authority needs a source and "
                                    "an agent")
        self.bucket.integrations[name] = Integration(
            self.plugin_id, name, install, uninstall, status, _text(description),
            source, agent, authority)

    def view_sort(self, name: str, key: Callable[[Mapping[str, Any]], Any], *,
                  description: str = "") -> None:
        _require_callables(key=key)
        name = self._named("view_sorts", name)
        self.bucket.view_sorts[name] = ViewSort(self.plugin_id, name, key, _text(description))

    def view_filter(self, name: str, predicate: Callable[[Mapping[str, Any]], bool], *,
                    description: str = "") -> None:
        _require_callables(predicate=predicate)
        name = self._named("view_filters", name)
        self.bucket.view_filters[name] = ViewFilter(
            self.plugin_id, name, predicate, _text(description))

    def graphics_source(self, name: str,
                        open: Callable[[str, Mapping[str, Any]], AsyncIterator[GraphicsFrame]],
                        *, description: str = "") -> None:
        _require_callables(open=open)
        name = self._named("graphics_sources", name)
        self.bucket.graphics_sources[name] = GraphicsSource(
            self.plugin_id, name, open, _text(description))

    def method(self, name: str, handler: MethodHandler, *, params: type[Params] | None = None,
               doc: str = "") -> None:
        _require_callables(handler=handler)
        if not isinstance(name, str) or len(name) > 128 or not _METHOD_RE.match(name):
            raise RegistrationError(f"invalid method name {name!r}: dot-separated words of "
                                    "a-z 0-9 _ each starting with a letter")
        if params is not None and not (isinstance(params, type) and issubclass(params, Params)):
            raise RegistrationError("params must be a cmux_core.dispatch.Params subclass")
        full = f"plugin.{self.plugin_id}.{name}"
        existing = self.host.methods.get(full)
        if existing is not None and existing.owner != self.plugin_id:
            raise RegistrationError(f"method {full} is already provided by {existing.owner}")
        self._claim("methods", full)
        self.bucket.methods[full] = PluginMethod(
            self.plugin_id, full, handler, params,
            _text(doc) or (inspect.getdoc(handler) or "").strip())


def _require_callables(**fns: object) -> None:
    for name, fn in fns.items():
        if not callable(fn):
            raise RegistrationError(f"{name} must be callable, not {type(fn).__name__}")


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise RegistrationError(f"description must be a string, not {type(value).__name__}")
    return value


# -- sources and imports ----------------------------------------------------------------------


def _allowlist_from_env() -> set[str] | None:
    raw = os.environ.get("CMUX_LOAD_PLUGINS")
    if raw is None:
        return None
    return {part.strip() for part in raw.split(",") if part.strip()}


def _loose_files(directory: Path, link: Path | None = None) -> list[PluginSource]:
    try:
        files = sorted(directory.glob("*.py"))
    except OSError:
        return []
    return [PluginSource(f.stem, "file", str(f), path=f, link=link) for f in files
            if f.is_file() and not f.name.startswith((".", "_"))]


def _sources_at(target: Path) -> list[PluginSource]:
    """The plugins a linked path holds; raises ``invalid_params`` naming ``path``."""
    if target.is_file():
        if target.suffix != ".py":
            raise InvalidParams("path", f"{target} is not a .py file or a plugin directory")
        return [PluginSource(target.stem, "file", str(target), path=target, link=target)]
    if not target.is_dir():
        raise InvalidParams("path", f"{target} does not exist")
    pyproject = target / "pyproject.toml"
    if not pyproject.exists():
        sources = _loose_files(target, link=target)
        if not sources:
            raise InvalidParams("path", f"{target} holds no pyproject.toml and no .py files")
        return sources
    try:
        project = tomllib.loads(pyproject.read_text()).get("project", {})
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise InvalidParams("path", f"cannot read {pyproject}: {exc}") from exc
    entries = project.get("entry-points", {}).get(ENTRY_POINT_GROUP, {})
    if not isinstance(entries, dict) or not entries:
        raise InvalidParams("path", f"{pyproject} declares no [project.entry-points.cmux]")
    root = target / "src" if (target / "src").is_dir() else target
    version = project.get("version")
    return [PluginSource(str(name), "package", f"{pyproject} entry point {name} = {value}",
                         path=pyproject, entry=str(value),
                         root=root, dist_name=str(project.get("name") or name),
                         version=version if isinstance(version, str) else "", link=target)
            for name, value in entries.items()]


def _import(plugin: Plugin) -> tuple[object, str]:
    """A fresh module object for ``plugin`` and a digest of its source ('' when unknown)."""
    source = plugin.source
    if source.kind == "entry_point":
        assert source.entry_point is not None
        if plugin.module is not None:
            return plugin.module, ""
        return source.entry_point.load(), ""
    if source.kind == "file":
        assert source.path is not None
        data = source.path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if plugin.module is not None and digest == plugin.source_digest:
            return plugin.module, digest
        return _exec_file(plugin.plugin_id, source.path, data), digest
    digest = _tree_digest(source.root)
    if plugin.module is not None and digest == plugin.source_digest:
        return plugin.module, digest
    return _import_package(source), digest


def _module_name(plugin_id: str) -> str:
    return "_cmux_plugin_" + plugin_id.replace("-", "_")


def _exec_file(plugin_id: str, path: Path, data: bytes) -> types.ModuleType:
    name = _module_name(plugin_id)
    module = types.ModuleType(name)
    module.__file__ = str(path)
    previous = sys.modules.get(name)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    try:
        exec(compile(data, str(path), "exec", dont_inherit=True), module.__dict__)
    except BaseException:
        if previous is not None:
            sys.modules[name] = previous
        else:
            sys.modules.pop(name, None)
        raise
    return module


def _import_package(source: PluginSource) -> object:
    assert source.root is not None and source.entry is not None
    module_name, _, attr = source.entry.partition(":")
    module_name = module_name.strip()
    top = module_name.split(".")[0]
    root = str(source.root)
    if root not in sys.path:
        sys.path.insert(0, root)
    saved = _pop_modules(top, source.root)
    importlib.invalidate_caches()
    try:
        obj: object = importlib.import_module(module_name)
        for part in filter(None, attr.strip().split(".")):
            obj = getattr(obj, part)
    except BaseException:
        _pop_modules(top, source.root)
        sys.modules.update(saved)
        raise
    return obj


def _pop_modules(top: str, root: Path) -> dict[str, types.ModuleType]:
    """Remove ``top`` and its submodules loaded from under ``root``; returns them."""
    gone: dict[str, types.ModuleType] = {}
    for name, module in list(sys.modules.items()):
        if name != top and not name.startswith(top + "."):
            continue
        file = getattr(module, "__file__", None)
        paths = list(getattr(module, "__path__", []) or [])
        where = [Path(p) for p in ([file] if file else []) + paths]
        if any(p.is_relative_to(root) for p in where):
            gone[name] = sys.modules.pop(name)
    return gone


def _release_new(plugin: Plugin, rejected: object) -> None:
    """Undo ``sys.modules`` changes of a rejected reload; the serving version stays."""
    source = plugin.source
    name = _module_name(plugin.plugin_id)
    if source.kind == "file" and sys.modules.get(name) is rejected:
        if isinstance(plugin.module, types.ModuleType):
            sys.modules[name] = plugin.module
    elif source.kind == "package":
        _release_modules(plugin)


def _release_modules(plugin: Plugin) -> None:
    source = plugin.source
    if source.kind == "file":
        sys.modules.pop(_module_name(plugin.plugin_id), None)
    elif source.kind == "package" and source.root is not None and source.entry:
        _pop_modules(source.entry.partition(":")[0].strip().split(".")[0], source.root)


def _tree_digest(root: Path | None) -> str:
    if root is None:
        return ""
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        with contextlib.suppress(OSError):
            h.update(str(f).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg} ({exc.filename}, line {exc.lineno})"
    return f"{type(exc).__name__}: {exc}"


def _first_line(doc: object) -> str:
    if not isinstance(doc, str):
        return ""
    return next((line.strip() for line in doc.strip().splitlines() if line.strip()), "")

