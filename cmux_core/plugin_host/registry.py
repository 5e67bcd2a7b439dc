"""What plugins register: the registration records and the ``register`` callback.

Contribution hooks (:data:`CONTRIBUTION_HOOKS`) each receive a ``register`` callback; a
:class:`Registrar` is that callback for one hookimpl call. It is the one place where names,
types and duplicates are checked, both within the plugin and against every other loaded
plugin, and it raises :class:`~cmux_core.hookspecs.RegistrationError` for anything it
refuses. What a call registered lands in its own bucket, which the host merges into the
plugin's staged :class:`Registrations` only when the hookimpl returned normally.
"""

from __future__ import annotations

import inspect
import re
import tomllib
import types
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cmux_core.detect.registry import ManifestContribution
from cmux_core.hookspecs import GraphicsFrame, MethodHandler, Params, RegistrationError

CONTRIBUTION_HOOKS = (
    "cmux_register_manifests", "cmux_register_integrations", "cmux_register_view_sorts",
    "cmux_register_view_filters", "cmux_register_graphics_sources", "cmux_register_methods",
)

AUTHORITIES = ("lifecycle", "session", "shared")
"""What an integration's hook reports may decide; see ``cmux_register_integrations``."""
MAX_STATE_TTL_MS = 3_600_000

_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
_METHOD_RE = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")

class MethodSink(Protocol):
    """The server's method table, as the plugin host adds and withdraws plugin methods."""

    def owner_of(self, name: str) -> str | None:
        """Who provides method ``name`` (``core`` or a plugin id); None when nobody does."""
        ...

    def add(self, name: str, params: type[Params],
            handler: Callable[[Any, Any], Awaitable[dict[str, Any]]], *, owner: str,
            doc: str) -> None:
        """Register ``name``; ValueError when it is taken."""

    def remove_owner(self, owner: str) -> list[str]:
        """Withdraw every method ``owner`` registered; returns their names."""
        ...


Holder = Callable[[str, str], str | None]
"""``holder(kind, name)``: the id of another loaded plugin holding ``name`` in table ``kind``."""


@dataclass(frozen=True, slots=True)
class Contribution:
    """What plugin ``plugin_id`` registered under ``name``, unique within its kind."""

    plugin_id: str
    name: str


@dataclass(frozen=True, slots=True)
class Integration(Contribution):
    """An installable agent integration; call its callables through
    :meth:`cmux_core.plugin_host.host.PluginHost.invoke`."""

    install: Callable[..., Any]
    uninstall: Callable[..., Any]
    status: Callable[[], Any]
    description: str = ""
    source: str | None = None
    agent: str | None = None
    authority: str | None = None
    state_ttl_ms: int | None = None
    """``shared`` authority: how long a hook-reported state without screen evidence lasts."""


@dataclass(frozen=True, slots=True)
class ViewSort(Contribution):
    """A sort key for agent views: ``key(row)`` of one read-only agent row."""

    key: Callable[[Mapping[str, Any]], Any]
    description: str = ""


@dataclass(frozen=True, slots=True)
class ViewFilter(Contribution):
    """A predicate for agent view filters: ``predicate(row)`` says whether the agent row
    belongs in the view."""

    predicate: Callable[[Mapping[str, Any]], bool]
    description: str = ""


@dataclass(frozen=True, slots=True)
class GraphicsSource(Contribution):
    """A graphics stream source: ``open(pane_id, options)`` returns the async iterator of
    its frames, pulled one at a time on the plugin's loop."""

    open: Callable[[str, Mapping[str, Any]], AsyncIterator[GraphicsFrame]]
    description: str = ""


@dataclass(frozen=True, slots=True)
class PluginMethod(Contribution):
    """A socket method a plugin added; ``name`` is the full ``plugin.<id>.<name>``."""

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


@dataclass(eq=False)
class Registrar:
    """The ``register`` callback for one contribution hookimpl call of ``plugin_id``.

    Writes into its own bucket, merged into ``staged`` (the version being loaded) by the
    caller only when the hookimpl returns normally; raises :class:`RegistrationError` for bad
    input or a name held elsewhere: in ``staged``, by another loaded plugin (``holder``), or
    for methods, in the server's method table under another owner.
    """

    plugin_id: str
    hook: str
    staged: Registrations
    holder: Holder
    methods: MethodSink
    bucket: Registrations = field(init=False, default_factory=Registrations)
    closed: bool = field(init=False, default=False)
    register: Callable[..., None] = field(init=False)

    def __post_init__(self) -> None:
        by_hook: dict[str, Callable[..., None]] = {
            "cmux_register_manifests": self.manifest,
            "cmux_register_integrations": self.integration,
            "cmux_register_view_sorts": self.view_sort,
            "cmux_register_view_filters": self.view_filter,
            "cmux_register_graphics_sources": self.graphics_source,
            "cmux_register_methods": self.method,
        }
        self.register = by_hook[self.hook]

    def _claim(self, kind: str, name: str) -> None:
        if self.closed:
            raise RegistrationError(f"register called after {self.hook} returned")
        what = f"{kind[:-1].replace('_', ' ')} {name!r}"
        if name in self.bucket.table(kind) or name in self.staged.table(kind):
            raise RegistrationError(f"{what} is registered twice")
        other = self.holder(kind, name)
        if other is not None:
            raise RegistrationError(f"{what} is already registered by plugin {other}")

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

    def integration(self, name: str, *, install: Callable[..., Any],
                    uninstall: Callable[..., Any], status: Callable[[], Any],
                    description: str = "", source: str | None = None,
                    agent: str | None = None, authority: str | None = None,
                    state_ttl_ms: int | None = None) -> None:
        _require_callables(install=install, uninstall=uninstall, status=status)
        name = self._named("integrations", name)
        if authority not in (None, *AUTHORITIES):
            raise RegistrationError(f"integration {name}: authority must be one of "
                                    f"{', '.join(map(repr, AUTHORITIES))}, not {authority!r}")
        if authority is not None and not (source and agent):
            raise RegistrationError(f"integration {name}: an authority needs a source and "
                                    "an agent")
        if state_ttl_ms is not None and (
                isinstance(state_ttl_ms, bool) or not isinstance(state_ttl_ms, int)
                or not 0 < state_ttl_ms <= MAX_STATE_TTL_MS):
            raise RegistrationError(f"integration {name}: state_ttl_ms must be an integer "
                                    f"from 1 to {MAX_STATE_TTL_MS}, not {state_ttl_ms!r}")
        if state_ttl_ms is not None and authority != "shared":
            raise RegistrationError(f"integration {name}: state_ttl_ms applies to the "
                                    "'shared' authority only")
        self.bucket.integrations[name] = Integration(
            self.plugin_id, name, install, uninstall, status, _text(description),
            source, agent, authority, state_ttl_ms)

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
            raise RegistrationError("params must be a cmux_core.hookspecs.Params subclass")
        full = f"plugin.{self.plugin_id}.{name}"
        owner = self.methods.owner_of(full)
        if owner is not None and owner != self.plugin_id:
            raise RegistrationError(f"method {full} is already provided by {owner}")
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

