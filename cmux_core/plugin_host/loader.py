"""Where plugins come from and how their code gets in: sources, imports, watching.

Sources, in load order (the first to claim a plugin id wins; later claimants get a warning):

1. linked paths (``plugin.link``; persisted in ``<state dir>/plugins.json``): a distribution
   directory with ``[project.entry-points.cmux]`` in its ``pyproject.toml``, a single ``.py``
   file, or a directory of loose ``.py`` files;
2. installed entry points in group ``cmux``, loaded one at a time so a broken one is blocked
   and the others still load;
3. loose ``*.py`` files in ``~/.config/cmux/plugins/`` and every ``--plugins-dir``
   (files whose names start with ``.`` or ``_`` are skipped).

``CMUX_LOAD_PLUGINS`` (comma-separated ids or distribution names) limits loading to those
plugins; set but empty it loads none.

Loose files are executed as fresh module objects; linked distributions are imported from
their source root with their earlier modules taken out of ``sys.modules`` first, so a
reload sees the code on disk. A digest of the source tells an unchanged plugin from an
edited one. :class:`SourceWatcher` reports ``.py`` changes under the watched roots (a whole
tree for a linked distribution, one level for a plugin dir, one file for a linked file);
what a change means is the host's decision.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import importlib
import importlib.metadata
import json
import logging
import os
import stat
import sys
import tomllib
import types
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple

from cmux_core.config import config_dir
from cmux_core.errors import CmuxError, InvalidParams
from cmux_core.watch import Change, Keep, watch

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "cmux"
STATE_FILE = "plugins.json"

SourceKind = Literal["entry_point", "file", "package"]


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

    def allowed(self, allowlist: set[str] | None) -> bool:
        """Whether ``CMUX_LOAD_PLUGINS`` (None: unset) lets this source load."""
        if allowlist is None:
            return True
        return self.plugin_id in allowlist or self.dist_name in allowlist



@dataclass(slots=True)
class PluginState:
    """What the user chose, persisted in ``path`` (``<state dir>/plugins.json``): the linked
    paths, in link order, and the ids of disabled plugins."""

    path: Path
    disabled: set[str] = field(default_factory=set)
    links: list[Path] = field(default_factory=list)

    def read(self) -> None:
        """Replace the choices with those on disk; a missing or unreadable file changes
        nothing (unreadable is logged)."""
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable %s: %s", self.path, exc)
            return
        if isinstance(data, dict):
            self.disabled = {str(x) for x in data.get("disabled", []) if isinstance(x, str)}
            self.links = [Path(x) for x in data.get("links", []) if isinstance(x, str)]

    def write(self) -> None:
        """Persist the choices atomically: a temporary file, flushed to disk, then renamed.

        Raises ``plugin_state_save_failed`` (``data``: ``path``, ``errno`` such as
        ``ENOSPC``) when the file cannot be written (disk full, read-only, no permission);
        the previous file is left as it was and the temporary file is removed.
        """
        body = json.dumps({"version": 1, "disabled": sorted(self.disabled),
                           "links": [str(p) for p in self.links]}, indent=2)
        path = self.path
        tmp = path.with_name(path.name + ".tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(body + "\n")
                f.flush()
                os.fsync(f.fileno())
            tmp.replace(path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            code = errno.errorcode.get(exc.errno or 0, str(exc.errno))
            raise CmuxError("plugin_state_save_failed",
                            f"cannot write {path}: {exc.strerror or exc}",
                            {"path": str(path), "errno": code}) from None


def allowlist_from_env() -> set[str] | None:
    raw = os.environ.get("CMUX_LOAD_PLUGINS")
    if raw is None:
        return None
    return {part.strip() for part in raw.split(",") if part.strip()}


def loose_files(directory: Path, link: Path | None = None) -> list[PluginSource]:
    try:
        files = sorted(directory.glob("*.py"))
    except OSError:
        return []
    return [PluginSource(f.stem, "file", str(f), path=f, link=link) for f in files
            if f.is_file() and not f.name.startswith((".", "_"))]


def _link_mode(path: Path) -> int | None:
    """``path``'s file mode, None when it does not exist; a path that cannot be looked at
    (a name over the filesystem's limits, no permission, a NUL) is ``invalid_params``."""
    try:
        return path.stat().st_mode
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InvalidParams("path", f"cannot use {path}: {reason}") from None


def sources_at(target: Path) -> list[PluginSource]:
    """The plugins a linked path holds; raises ``invalid_params`` naming ``path``."""
    mode = _link_mode(target)
    if mode is None:
        raise InvalidParams("path", f"{target} does not exist")
    if not stat.S_ISDIR(mode):
        if not stat.S_ISREG(mode) or target.suffix != ".py":
            raise InvalidParams("path", f"{target} is not a .py file or a plugin directory")
        return [PluginSource(target.stem, "file", str(target), path=target, link=target)]
    pyproject = target / "pyproject.toml"
    if _link_mode(pyproject) is None:
        sources = loose_files(target, link=target)
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


def plugin_dirs(configured: Iterable[Path]) -> list[Path]:
    """Directories whose loose ``*.py`` files are plugins: the user's
    ``~/.config/cmux/plugins/`` first, then ``configured``; resolved, without repeats."""
    dirs = [config_dir() / "plugins", *configured]
    seen: list[Path] = []
    for d in dirs:
        d = d.expanduser().resolve()
        if d not in seen:
            seen.append(d)
    return seen


def discover(links: Iterable[Path], plugin_dirs: Iterable[Path], *,
             entry_points: bool) -> list[PluginSource]:
    """Every source in load order: linked paths, entry points (unless ``entry_points`` is
    False), then plugin dirs. A linked path that no longer holds a plugin is logged, skipped."""
    sources: list[PluginSource] = []
    for link in links:
        try:
            sources += sources_at(link)
        except CmuxError as exc:
            log.warning("linked plugin path %s: %s", link, exc.message)
    if entry_points:
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            dist = ep.dist
            sources.append(PluginSource(
                ep.name, "entry_point", f"entry point {ep.name} = {ep.value}",
                entry=ep.value,
                dist_name=dist.name if dist else None,
                version=dist.version if dist else "", entry_point=ep))
    for directory in plugin_dirs:
        sources += loose_files(directory)
    return sources


class EntryPointChanges(NamedTuple):
    """How the installed entry points differ from the plugins a host knows."""

    new: list[PluginSource]
    """Entry points of distributions installed since (no plugin of that id yet)."""
    gone: list[str]
    """Ids of entry-point plugins whose entry point is no longer installed."""
    changed: list[PluginSource]
    """Entry points whose distribution version or object changed (an upgrade)."""


def entry_point_changes(known: Mapping[str, PluginSource]) -> EntryPointChanges:
    """Compare the installed entry points (read afresh) with ``known`` (plugin id to the
    source it was loaded from); plugins of another kind are left out."""
    importlib.invalidate_caches()
    installed = {s.plugin_id: s for s in discover((), (), entry_points=True)}
    ours = {pid: s for pid, s in known.items() if s.kind == "entry_point"}
    return EntryPointChanges(
        new=[s for pid, s in installed.items() if pid not in known],
        gone=[pid for pid in ours if pid not in installed],
        changed=[s for pid, s in installed.items() if pid in ours
                 and (s.version, s.entry) != (ours[pid].version, ours[pid].entry)])


def forget_package(source: PluginSource) -> None:
    """Take an entry point's top-level package and its submodules out of ``sys.modules``,
    so loading it again imports the code now installed (an upgraded distribution)."""
    if source.kind != "entry_point" or not source.entry:
        return
    top = source.entry.partition(":")[0].strip().split(".")[0]
    for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
        del sys.modules[name]


def loose_dirs(plugin_dirs: Iterable[Path], links: Iterable[Path]
               ) -> list[tuple[Path, Path | None]]:
    """Plugin dirs and linked plain dirs (no ``pyproject.toml``), each with the link that
    added it."""
    dirs: list[tuple[Path, Path | None]] = [(d, None) for d in plugin_dirs]
    dirs += [(p, p) for p in links if p.is_dir() and not (p / "pyproject.toml").exists()]
    return dirs


def import_source(source: PluginSource, serving: object | None, serving_digest: str
                  ) -> tuple[object, str]:
    """A fresh module object for ``source`` and a digest of its code ('' when unknown).

    ``serving`` (the version now in use, with ``serving_digest``) is returned instead when the
    code is unchanged; an entry point is never re-imported. Raises whatever the import raises.
    """
    if source.kind == "entry_point":
        assert source.entry_point is not None
        if serving is not None:
            return serving, ""
        return source.entry_point.load(), ""
    if source.kind == "file":
        assert source.path is not None
        data = source.path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if serving is not None and digest == serving_digest:
            return serving, digest
        return _exec_file(source.plugin_id, source.path, data), digest
    digest = source_digest(source)
    if serving is not None and digest == serving_digest:
        return serving, digest
    return _import_package(source), digest


def source_digest(source: PluginSource) -> str:
    """A digest of ``source``'s code on disk ('' for an entry point or an unreadable file)."""
    if source.kind == "file" and source.path is not None:
        try:
            return hashlib.sha256(source.path.read_bytes()).hexdigest()
        except OSError:
            return ""
    return _tree_digest(source.root) if source.kind == "package" else ""


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
        # an import the host gave up on may fail long after a newer version took the name
        if sys.modules.get(name) is module:
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


def release_rejected(source: PluginSource, serving: object | None, rejected: object) -> None:
    """Undo ``sys.modules`` changes of a rejected reload; ``serving`` stays in place."""
    name = _module_name(source.plugin_id)
    if source.kind == "file" and sys.modules.get(name) is rejected:
        if isinstance(serving, types.ModuleType):
            sys.modules[name] = serving
    elif source.kind == "package":
        release_modules(source)


def release_abandoned(source: PluginSource, serving: object | None) -> None:
    """Put ``serving`` (or nothing) back under a loose file's module name after its import
    was abandoned still running. A package's import keeps the modules it has made so far
    until it returns; the next import of that package takes them out first."""
    if source.kind != "file":
        return
    name = _module_name(source.plugin_id)
    if isinstance(serving, types.ModuleType):
        sys.modules[name] = serving
    else:
        sys.modules.pop(name, None)


def release_modules(source: PluginSource) -> None:
    """Take the modules ``source`` put in ``sys.modules`` out again."""
    if source.kind == "file":
        sys.modules.pop(_module_name(source.plugin_id), None)
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



async def end_watch(stop: asyncio.Event | None, task: asyncio.Task[Any] | None) -> None:
    """Ask a watch task to finish through ``stop``; cancel it if it has not within 5 s."""
    if stop is not None:
        stop.set()
    if task is not None:
        try:
            await asyncio.wait_for(task, 5)
        except (TimeoutError, asyncio.CancelledError):
            task.cancel()


@dataclass(frozen=True, slots=True)
class WatchRoot:
    """A directory :class:`SourceWatcher` observes: its whole tree when ``recursive``, else
    only the ``.py`` files directly in it, and of those only ``names`` when given."""

    path: Path
    recursive: bool = False
    names: frozenset[str] | None = None


def merge_roots(roots: Iterable[WatchRoot]) -> list[WatchRoot]:
    """One root per directory, first-seen order: a recursive root covers a flat one, and a
    flat root without ``names`` covers one with them."""
    merged: dict[Path, WatchRoot] = {}
    for root in roots:
        have = merged.get(root.path)
        if have is None:
            merged[root.path] = root
        elif have.recursive or root.recursive:
            merged[root.path] = WatchRoot(root.path, recursive=True)
        elif have.names is None or root.names is None:
            merged[root.path] = WatchRoot(root.path)
        else:
            merged[root.path] = WatchRoot(root.path, names=have.names | root.names)
    return list(merged.values())


class SourceWatcher:
    """Watches :class:`WatchRoot` s for ``.py`` changes; ``on_change(paths)`` gets each
    debounced batch.

    One watch runs at a time, as a task on the running loop: :meth:`restart` replaces it
    (the old one finishes before the new one starts watching), :meth:`stop` ends it.
    ``ready`` is set once the running watch is observing its roots; ``roots`` is what it
    observes (empty when none runs). ``on_change`` runs inside the watch task; if it raises,
    the failure is logged and watching stops.
    """

    def __init__(self, on_change: Callable[[set[Path]], Awaitable[None]], *,
                 debounce_ms: int) -> None:
        self.on_change = on_change
        self.debounce_ms = debounce_ms
        self.ready = asyncio.Event()
        self.roots: list[WatchRoot] = []
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None

    def restart(self, roots: list[WatchRoot]) -> None:
        """Watch ``roots`` (merged) instead of whatever was watched; none stops watching."""
        old, old_stop = self._task, self._stop
        if old_stop is not None:
            old_stop.set()
        self.ready.clear()
        self.roots = merge_roots(roots)
        if not self.roots:
            self._task = self._stop = None
            return
        self._stop = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(
            self._watch(self.roots, self._stop, old))

    async def stop(self) -> None:
        """End the running watch (cancelled if it does not finish within 5 s)."""
        task, self._task = self._task, None
        self.roots = []
        await end_watch(self._stop, task)

    async def _watch(self, roots: list[WatchRoot], stop: asyncio.Event,
                     previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            with contextlib.suppress(BaseException):
                await previous
        flat = {r.path: r.names for r in roots if not r.recursive}

        def in_tree(_change: Change, path: str) -> bool:
            return path.endswith(".py")

        def in_dir(_change: Change, path: str) -> bool:
            where = Path(path)
            if not path.endswith(".py") or where.parent not in flat:
                return False
            names = flat[where.parent]
            return names is None or where.name in names

        streams = [(paths, recursive, keep) for paths, recursive, keep in (
            ([r.path for r in roots if r.recursive], True, in_tree),
            (list(flat), False, in_dir)) if paths]
        waiting = set(range(len(streams)))

        async def follow(index: int, paths: list[Path], recursive: bool, keep: Keep) -> None:
            async with contextlib.aclosing(watch(
                    paths, recursive=recursive, keep=keep, stop=stop,
                    debounce_ms=self.debounce_ms)) as batches:
                async for changes in batches:
                    waiting.discard(index)
                    if not waiting:
                        self.ready.set()
                    if changes:
                        await self.on_change({Path(p) for _, p in changes})

        try:
            async with asyncio.TaskGroup() as group:
                for index, (paths, recursive, keep) in enumerate(streams):
                    group.create_task(follow(index, paths, recursive, keep))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("plugin directory watcher stopped")
