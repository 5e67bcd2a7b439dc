"""The manifests in force: every source loaded, the winner per agent, hot reload.

Sources, lowest precedence first: manifests supplied by plugins, the bundled
``manifests/`` directory, the user's ``~/.config/cmux/manifests/`` and each
``--manifests-dir`` (a later one above an earlier one). For each agent the
highest-precedence source with a valid manifest wins; a manifest names its agent
with ``id`` (or an ``id`` that is an alias of an agent a lower source already
defines, so ``id = "claude-code"`` overrides ``claude``).

Every ``*.toml`` file directly in a directory is one manifest (``*.cases.toml``
fixture files and hidden files are not). The directories are watched: a changed
file is re-read, re-validated and swapped in atomically; a file that no longer
validates keeps its last good version and is reported (a warning in
:meth:`ManifestRegistry.infos`, the ``server_manifests_reloaded`` event, a log
line); a deleted file lets the next source take over. Watcher batches are
grouped until writes pause (:data:`WATCH_STEP_MS`) so an editor's half-written
save and its completion usually arrive as one reload.

All state changes happen on the event loop; files are read and parsed in a
worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from cmux_core.config import Settings, config_dir
from cmux_core.detect.identify import normalize_label
from cmux_core.detect.manifest import (
    Manifest,
    ManifestError,
    bundled_manifests_dir,
    manifest_from_data,
    parse_manifest,
)
from cmux_core.watch import watch

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ManifestContribution:
    """A detection manifest from a plugin; ``data`` is the parsed TOML table."""

    plugin_id: str
    agent_id: str
    data: Mapping[str, Any]
    text: str | None = None
    path: Path | None = None


class ContributedManifests(Protocol):
    """Where plugin-supplied manifests come from (the plugin host)."""

    def manifests(self) -> list[ManifestContribution]:
        """Every manifest the loaded plugins registered, in load order."""
        ...


ReloadPort = Callable[["ReloadReport"], None]
"""Called on the loop with the report of each reload after the first that changed something
(or was forced)."""

SourceKind = Literal["plugin", "bundled", "user", "manifests_dir"]
FileStatus = Literal["loaded", "unchanged", "invalid", "removed"]

WATCH_STEP_MS = 200
"""A watcher batch is handed over once no write arrived for this long..."""
WATCH_DEBOUNCE_MS = 1000
"""...or once it has been collecting for this long (sustained writes)."""

_WIRE_KIND: dict[str, str] = {"plugin": "plugin", "bundled": "bundled", "user": "local override",
                              "manifests_dir": "local override"}


@dataclass(frozen=True, slots=True)
class Source:
    """One place manifests come from; higher ``rank`` wins."""

    kind: SourceKind
    rank: int
    directory: Path | None = None


@dataclass(eq=False)
class ManifestFile:
    """One manifest file (or plugin contribution) and its last good version.

    ``error`` is set while the current contents do not validate; ``manifest``
    then still holds the last version that did (None when there never was one).
    """

    key: str
    source: Source
    path: Path | None
    manifest: Manifest | None = None
    error: ManifestError | None = None
    fingerprint: tuple[int, int] | None = None
    text: str | None = None

    @property
    def where(self) -> str:
        """The wire ``source``: ``bundled``, ``plugin:<id>`` or the file path."""
        if self.source.kind == "bundled":
            return "bundled"
        if self.source.kind == "plugin":
            return self.key.rsplit(":", 1)[0]
        return str(self.path)


@dataclass(frozen=True, slots=True)
class FileResult:
    """What one reload did to one file."""

    key: str
    source_kind: SourceKind
    status: FileStatus
    agent: str | None = None
    error: ManifestError | None = None
    kept_last_good: bool = False

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"file": self.key, "source_kind": self.source_kind,
                               "status": self.status, "agent": self.agent}
        if self.error is not None:
            out["error"] = self.error.describe()
            out["error_detail"] = self.error.to_dict()
            out["kept_last_good"] = self.kept_last_good
        return out


@dataclass(frozen=True, slots=True)
class ReloadReport:
    trigger: str
    files: tuple[FileResult, ...]
    at: float = field(default_factory=time.time)

    @property
    def changed(self) -> bool:
        return any(r.status != "unchanged" for r in self.files)

    @property
    def errors(self) -> tuple[FileResult, ...]:
        return tuple(r for r in self.files if r.error is not None)


@dataclass(frozen=True, slots=True)
class _Parsed:
    """Worker-thread output for one file: new contents parsed, or None when unchanged."""

    key: str
    source: Source
    path: Path | None
    fingerprint: tuple[int, int] | None
    text: str | None
    manifest: Manifest | None
    error: ManifestError | None


class ManifestRegistry:
    """Loads, watches and serves the manifests; one per server, used on the loop.

    ``lookup(name)`` answers process identification (a normalised name → the
    canonical agent label); ``get(label)`` gives the manifest in force.
    ``on_reload`` hears every reload after :meth:`start`'s first load that changed
    something; the plugins' manifests are read again when :meth:`plugins_changed` says so.
    """

    def __init__(self, settings: Settings, plugins: ContributedManifests | None = None, *,
                 bundled_dir: Path | None = None, user_dir: Path | None = None,
                 watch: bool = True, on_reload: ReloadPort | None = None) -> None:
        self.plugins = plugins
        self._on_reload = on_reload
        self.watch = watch
        self.sources: list[Source] = [Source("plugin", 0)]
        self.sources.append(Source("bundled", 1, bundled_dir or bundled_manifests_dir()))
        self.sources.append(Source("user", 2, user_dir or config_dir() / "manifests"))
        for i, directory in enumerate(settings.manifests_dirs):
            self.sources.append(Source("manifests_dir", 3 + i, Path(directory).expanduser()))
        self.files: dict[str, ManifestFile] = {}
        self._active: dict[str, ManifestFile] = {}
        self._index: dict[str, str] = {}
        self._labels: dict[str, str] = {}
        self._shadowed: dict[str, list[str]] = {}
        self.last_report: ReloadReport | None = None
        self._lock = asyncio.Lock()
        self._watch_task: asyncio.Task[None] | None = None
        self._watch_stop: asyncio.Event | None = None
        self._watch_roots: tuple[Path, ...] = ()
        self.watching = asyncio.Event()
        self.loaded = asyncio.Event()
        """Set once the first load finished (every source read at least once)."""

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> ReloadReport:
        """Load every source and start watching the directories."""
        report = await self.reload("startup")
        bundled = next(s for s in self.sources if s.kind == "bundled")
        if not any(f.source == bundled for f in self.files.values()):
            log.error("no bundled agent manifests in %s: agents are detected only from plugin "
                      "and user manifests (is cmux_core installed with its package data?)",
                      bundled.directory, extra={"cmux_manifests_dir": str(bundled.directory)})
        self.loaded.set()
        self._restart_watcher()
        return report

    async def stop(self) -> None:
        task, self._watch_task = self._watch_task, None
        if self._watch_stop is not None:
            self._watch_stop.set()
        if task is not None:
            try:
                await asyncio.wait_for(task, 5)
            except (TimeoutError, asyncio.CancelledError):
                task.cancel()

    # -- queries --------------------------------------------------------------------------

    def lookup(self, name: str) -> str | None:
        """The canonical label of the agent ``name`` refers to (id, alias or process name)."""
        return self._index.get(normalize_label(name))

    def canonical(self, label: str) -> str | None:
        """The canonical label when ``label`` is an agent's id or alias (not a process name)."""
        return self._labels.get(normalize_label(label))

    def get(self, name: str) -> Manifest | None:
        """The manifest in force for the agent ``name`` refers to."""
        label = self.lookup(name)
        entry = self._active.get(label) if label is not None else None
        return entry.manifest if entry is not None else None

    def entry(self, label: str) -> ManifestFile | None:
        """Where the manifest in force for canonical ``label`` came from."""
        return self._active.get(label)

    def labels(self) -> list[str]:
        return sorted(self._active)

    def warning(self, label: str) -> str | None:
        """What is wrong with the sources of ``label`` (an invalid edit kept back, a file
        that never loaded), or None."""
        notes: list[str] = []
        entry = self._active.get(label)
        if entry is not None and entry.error is not None:
            notes.append(f"{entry.error.describe()} (keeping the last good version)")
        for other in self.files.values():
            if other is entry or other.error is None:
                continue
            if self._file_agent(other) == label and (
                    entry is None or other.source.rank >= entry.source.rank):
                notes.append(f"ignored {other.where}: {other.error.describe()}")
        notes.extend(self._shadowed.get(label, ()))
        return "; ".join(notes) or None

    def infos(self) -> list[dict[str, Any]]:
        """``AgentManifestInfo`` for every agent, then entries for files that never loaded."""
        out: list[dict[str, Any]] = []
        for label in sorted(self._active):
            entry = self._active[label]
            assert entry.manifest is not None
            out.append(self._info(label, entry, entry.manifest.version))
        for entry in sorted(self.files.values(), key=lambda e: e.key):
            if entry.manifest is None and entry.error is not None \
                    and self._file_agent(entry) not in self._active:
                out.append(self._info(self._file_agent(entry), entry, None))
        return out

    def status(self) -> dict[str, Any]:
        """The ``agent_manifest_status`` result (plus per-file state under ``files``)."""
        report = self.last_report
        out: dict[str, Any] = {"type": "agent_manifest_status", "manifests": self.infos(),
                               "files": [self._file_wire(e) for e in
                                         sorted(self.files.values(), key=lambda e: e.key)]}
        if report is not None:
            out["last_check_unix"] = int(report.at)
            out["last_result"] = _summary(report, len(self._active))
        return out

    # -- loading --------------------------------------------------------------------------

    async def reload(self, trigger: str = "request", *, force: bool = False) -> ReloadReport:
        """Re-scan every source; ``force`` re-parses files that look unchanged.

        Returns the per-file results; ``on_reload`` hears about it when anything changed
        (after the first load).
        """
        async with self._lock:
            contributions = self.plugins.manifests() if self.plugins is not None else []
            known = {key: (f.fingerprint, f.text) for key, f in self.files.items()}
            parsed = await asyncio.to_thread(
                _scan, self.sources, contributions, known, force)
            report = self._apply(trigger, parsed)
        if (report.changed or force) and self.loaded.is_set() and self._on_reload is not None:
            try:
                self._on_reload(report)
            except Exception:
                log.exception("manifest reload report failed")
        return report

    def _apply(self, trigger: str, parsed: list[_Parsed]) -> ReloadReport:
        results: list[FileResult] = []
        seen: set[str] = set()
        files = dict(self.files)
        for item in parsed:
            seen.add(item.key)
            old = files.get(item.key)
            if item.manifest is None and item.error is None:
                assert old is not None
                old.fingerprint = item.fingerprint or old.fingerprint
                results.append(FileResult(item.key, item.source.kind, "unchanged",
                                          self._file_agent(old), old.error,
                                          old.error is not None and old.manifest is not None))
                continue
            entry = ManifestFile(item.key, item.source, item.path,
                                 old.manifest if old is not None else None,
                                 fingerprint=item.fingerprint, text=item.text)
            if item.error is not None:
                entry.error = item.error
                kept = entry.manifest is not None
                results.append(FileResult(item.key, item.source.kind, "invalid",
                                          self._file_agent(entry), item.error, kept))
                log.warning("agent manifest %s is invalid%s: %s", item.key,
                            ", keeping its last good version" if kept else "",
                            item.error.describe(), extra={"cmux_manifest": item.key})
            else:
                entry.manifest = item.manifest
                results.append(FileResult(item.key, item.source.kind, "loaded",
                                          self._file_agent(entry)))
            files[item.key] = entry
        for key in list(files):
            if key not in seen:
                gone = files.pop(key)
                results.append(FileResult(key, gone.source.kind, "removed",
                                          self._file_agent(gone)))
        active, labels, index, shadowed = _resolve(files.values())
        # Swapped together: lookups on the loop never see a half-built table.
        self.files, self._active, self._shadowed = files, active, shadowed
        self._labels, self._index = labels, index
        report = ReloadReport(trigger, tuple(sorted(results, key=lambda r: r.key)))
        self.last_report = report
        return report

    def _file_agent(self, entry: ManifestFile) -> str:
        if entry.manifest is not None:
            return self._index.get(normalize_label(entry.manifest.id),
                                   normalize_label(entry.manifest.id))
        stem = entry.path.name.removesuffix(".toml") if entry.path else entry.key.rsplit(":")[-1]
        return self._index.get(normalize_label(stem), normalize_label(stem))

    def _info(self, label: str, entry: ManifestFile, version: str | None) -> dict[str, Any]:
        return {"agent": label, "source": entry.where,
                "source_kind": _WIRE_KIND[entry.source.kind], "active_version": version,
                "cached_remote_version": None, "local_override_shadowing_remote": False,
                "remote_update_result": None, "remote_update_error": None,
                "remote_last_checked_unix": None, "warning": self.warning(label)}

    def _file_wire(self, entry: ManifestFile) -> dict[str, Any]:
        label = self._file_agent(entry)
        active = self._active.get(label)
        out: dict[str, Any] = {"file": entry.key, "source_kind": entry.source.kind,
                               "agent": label, "active": active is entry,
                               "valid": entry.error is None}
        if entry.error is not None:
            out["error"] = entry.error.describe()
            out["kept_last_good"] = entry.manifest is not None
        return out

    # -- watching -------------------------------------------------------------------------

    def _directories(self) -> list[Path]:
        return [s.directory for s in self.sources if s.directory is not None]

    def _roots(self) -> tuple[Path, ...]:
        """Each manifest directory, or its nearest existing ancestor while it is missing."""
        roots: list[Path] = []
        for directory in self._directories():
            path = directory
            while not path.is_dir() and path.parent != path:
                path = path.parent
            if path.is_dir() and path not in roots:
                roots.append(path)
        return tuple(roots)

    def _restart_watcher(self) -> None:
        if not self.watch:
            return
        roots = self._roots()
        if roots == self._watch_roots and self._watch_task is not None:
            return
        if self._watch_stop is not None:
            self._watch_stop.set()
        self._watch_roots = roots
        self.watching.clear()
        if not roots:
            self._watch_task = self._watch_stop = None
            return
        self._watch_stop = asyncio.Event()
        self._watch_task = asyncio.get_running_loop().create_task(
            self._watch_loop(roots, self._watch_stop, self._watch_task))

    def _relevant(self, path: str) -> bool:
        p = Path(path)
        for directory in self._directories():
            if p.parent == directory and p.suffix == ".toml":
                return True
            if directory.is_relative_to(p):
                return True
        return False

    async def _watch_loop(self, roots: tuple[Path, ...], stop: asyncio.Event,
                          previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            with contextlib.suppress(BaseException):
                await previous
        first = True
        try:
            async with contextlib.aclosing(watch(
                    roots, recursive=False, stop=stop, debounce_ms=WATCH_DEBOUNCE_MS,
                    quiet_ms=WATCH_STEP_MS,
                    keep=lambda _change, path: self._relevant(path))) as batches:
                async for changes in batches:
                    if first or changes:
                        # The first pass also catches edits made while the watcher started.
                        first = False
                        await self.reload("watch")
                        self.watching.set()
                        if self._roots() != roots:
                            self._restart_watcher()
                            return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("manifest directory watcher stopped")

    def plugins_changed(self, kinds: Collection[str]) -> None:
        """A plugin's registrations of ``kinds`` changed: after the first load, a change of
        ``manifests`` reloads."""
        if "manifests" in kinds and self.loaded.is_set():
            task = asyncio.get_running_loop().create_task(self.reload("plugin"))
            task.add_done_callback(_log_failure)


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("manifest reload failed", exc_info=task.exception())


def _summary(report: ReloadReport, agents: int) -> str:
    errors = report.errors
    if not errors:
        return f"ok: {agents} agents"
    return f"{len(errors)} invalid: " + "; ".join(r.key for r in errors)


# -- worker-thread part ------------------------------------------------------------------------


def _manifest_files(directory: Path) -> list[Path]:
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return []
    paths = [Path(e.path) for e in entries
             if e.name.endswith(".toml") and not e.name.endswith(".cases.toml")
             and not e.name.startswith(".") and e.is_file()]
    return sorted(paths)


def _scan(sources: list[Source], contributions: Iterable[ManifestContribution],
          known: dict[str, tuple[tuple[int, int] | None, str | None]], force: bool
          ) -> list[_Parsed]:
    """Read and parse every source; a file whose fingerprint and text are unchanged comes
    back with neither manifest nor error (unless ``force``). Runs in a worker thread."""
    out: list[_Parsed] = []
    plugin_source = next(s for s in sources if s.kind == "plugin")
    for contribution in contributions:
        key = f"plugin:{contribution.plugin_id}:{contribution.agent_id}"
        source_name = f"plugin:{contribution.plugin_id}"
        text = contribution.text
        old = known.get(key)
        if not force and old is not None and text is not None and old[1] == text:
            out.append(_Parsed(key, plugin_source, contribution.path, None, text, None, None))
            continue
        try:
            if text is not None:
                where = str(contribution.path) if contribution.path else source_name
                manifest = parse_manifest(text, source=source_name, path=where)
            else:
                manifest = manifest_from_data(contribution.data, source=source_name)
            out.append(_Parsed(key, plugin_source, contribution.path, None, text, manifest,
                               None))
        except ManifestError as exc:
            out.append(_Parsed(key, plugin_source, contribution.path, None, text, None, exc))
    for source in sources:
        if source.directory is None:
            continue
        for path in _manifest_files(source.directory):
            key = str(path)
            try:
                st = path.stat()
                fingerprint: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
            except OSError:
                continue
            old = known.get(key)
            if not force and old is not None and old[0] == fingerprint:
                out.append(_Parsed(key, source, path, fingerprint, old[1], None, None))
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                continue
            except (OSError, UnicodeDecodeError) as exc:
                out.append(_Parsed(key, source, path, fingerprint, None, None,
                                   ManifestError(f"cannot read manifest: {exc}", path=key)))
                continue
            if not force and old is not None and old[1] == text:
                out.append(_Parsed(key, source, path, fingerprint, text, None, None))
                continue
            label = "bundled:" + path.name if source.kind == "bundled" else key
            try:
                manifest = parse_manifest(text, source=label, path=key)
                out.append(_Parsed(key, source, path, fingerprint, text, manifest, None))
            except ManifestError as exc:
                out.append(_Parsed(key, source, path, fingerprint, text, None, exc))
    return out


def _resolve(files: Iterable[ManifestFile]) -> tuple[
        dict[str, ManifestFile], dict[str, str], dict[str, str], dict[str, list[str]]]:
    """Pick the winner per agent and index every name.

    Returns ``(active, labels, index, shadowed)``: canonical label → winning file;
    normalised id/alias → label; the same plus process names → label (ids beat
    aliases beat process names, higher precedence first); label → notes about
    same-precedence duplicates that lost.
    """
    ordered = sorted((f for f in files if f.manifest is not None),
                     key=lambda f: (f.source.rank, f.key))
    active: dict[str, ManifestFile] = {}
    names: dict[str, str] = {}
    shadowed: dict[str, list[str]] = {}
    for entry in ordered:
        manifest = entry.manifest
        assert manifest is not None
        own = normalize_label(manifest.id)
        label = names.get(own, own)
        current = active.get(label)
        if current is not None and current.source.rank == entry.source.rank:
            shadowed.setdefault(label, []).append(
                f"ignored {entry.where}: {current.where} already defines {label!r}")
            continue
        active[label] = entry
        for name in (manifest.id, *manifest.aliases):
            names.setdefault(normalize_label(name), label)
    index: dict[str, str] = {}
    by_rank = sorted(active.items(), key=lambda kv: -kv[1].source.rank)
    for label, _entry in by_rank:
        index.setdefault(label, label)
    for label, entry in by_rank:
        assert entry.manifest is not None
        for name in entry.manifest.labels:
            index.setdefault(normalize_label(name), label)
    labels = dict(index)
    for label, entry in by_rank:
        assert entry.manifest is not None
        for name in entry.manifest.process_names:
            index.setdefault(normalize_label(name), label)
    return active, labels, index, shadowed
