"""Agent views: a client's filter and sort over the agent list (``agent.view.*``).

A view is parsed once, when it is set (:func:`parse_view`, raising ``invalid_agent_view``
with the path of the offending part), and evaluated on every read (:func:`project`), which is
pure: rows in, rows out. Plugin sort keys and predicates (``{"plugin": "<plugin_id>/<name>"}``)
are the only impure part; :func:`evaluate` calls them through the plugin host, once per
reference and evaluation over all rows, then hands their values to :func:`project`.

Evaluation rules (herdr digest §i.2): a missing field never equals anything and an
unresolvable context value is missing; sorting is lexicographic over the sort keys, stable,
and rows missing a key always come after rows that have it, in either direction. A plugin
callable that fails or times out counts as missing for every row of that evaluation (the
failure is recorded against the plugin by the host).

Views belong to clients. :class:`ViewBook` keeps one view per client of a server: a client is
either its connection (the view ends when the connection closes) or a named ``client_id``
(the view lasts until cleared). A view whose ``source`` is ``plugin:<id>`` also ends when that
plugin is disabled, unlinked or blocked.
"""

from __future__ import annotations

import functools
import re
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from cmux_core.agents.record import ATTENTION
from cmux_core.errors import CmuxError, InvalidNode
from cmux_core.events import Event, EventHub, event
from cmux_core.model.mux import Mux

MAX_DEPTH = 8
MAX_NODES = 64
MAX_IN_VALUES = 32
MAX_SORT_KEYS = 8
MAX_SOURCE_CHARS = 120
MAX_LABEL_CHARS = 32

STATUSES = ("idle", "working", "blocked", "done", "unknown")
FILTER_FIELDS = ("status", "workspace_id", "tab_id", "pane_id", "agent", "seen",
                 "state_change_seq")
SORT_FIELDS = ("workspace_order", "tab_order", "pane_order", "attention", "status", "agent",
               "seen", "state_change_seq")
CONTEXTS = {"current_workspace_id": "workspace_id", "current_tab_id": "tab_id"}
"""Each context value and the only field it may be compared with."""

_SOURCE_RE = re.compile(r"^[A-Za-z0-9:._-]{1,120}$")
_TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_PLUGIN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_PLUGIN_REF_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_-]{0,63})/([a-z][a-z0-9_-]{0,63})$")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()
"""The value of a field a row does not have."""


class InvalidAgentView(InvalidNode):
    """A view that cannot be set; ``data.path`` names the offending part (``filter.filters[1]``)."""

    code = "invalid_agent_view"


# -- the parsed form --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TokenField:
    """A pane metadata token (``{"token": name}``)."""

    name: str


@dataclass(frozen=True, slots=True)
class PluginRef:
    """A plugin's registered sort key or predicate (``{"plugin": "<plugin_id>/<name>"}``)."""

    plugin_id: str
    name: str

    def __str__(self) -> str:
        return f"{self.plugin_id}/{self.name}"


@dataclass(frozen=True, slots=True)
class Context:
    """A value taken from where the client is looking (``current_workspace_id``, ...)."""

    name: str


Field = str | TokenField
SortField = str | TokenField | PluginRef
Value = str | bool | int | Context


@dataclass(frozen=True, slots=True)
class AllOf:
    filters: tuple[Filter, ...]


@dataclass(frozen=True, slots=True)
class AnyOf:
    filters: tuple[Filter, ...]


@dataclass(frozen=True, slots=True)
class Not:
    filter: Filter


@dataclass(frozen=True, slots=True)
class Eq:
    field: Field
    value: Value


@dataclass(frozen=True, slots=True)
class In:
    field: Field
    values: tuple[Value, ...]


@dataclass(frozen=True, slots=True)
class Exists:
    field: Field


@dataclass(frozen=True, slots=True)
class PluginFilter:
    ref: PluginRef


Filter = AllOf | AnyOf | Not | Eq | In | Exists | PluginFilter


@dataclass(frozen=True, slots=True)
class SortKey:
    field: SortField
    descending: bool = False


@dataclass(frozen=True, slots=True)
class AgentView:
    """One validated view. ``spec`` is the filter and sort as the client sent them."""

    source: str
    label: str | None = None
    filter: Filter | None = None
    sort: tuple[SortKey, ...] = ()
    spec: Mapping[str, Any] = field(default_factory=dict)
    plugin_refs: tuple[tuple[str, str, PluginRef], ...] = ()
    """``(kind, path, ref)`` for every plugin reference, ``kind`` being filter or sort."""

    @property
    def plugin_id(self) -> str | None:
        """The plugin owning this view (``source`` is ``plugin:<id>``), else None."""
        return self.source[len("plugin:"):] if self.source.startswith("plugin:") else None

    def plugin_filters(self) -> list[PluginRef]:
        return [ref for kind, _, ref in self.plugin_refs if kind == "filter"]

    def plugin_sorts(self) -> list[PluginRef]:
        return [ref for kind, _, ref in self.plugin_refs if kind == "sort"]

    def to_wire(self) -> dict[str, Any]:
        """The ``agent_view`` result describing this view as active."""
        out: dict[str, Any] = {"type": "agent_view", "active": True, "source": self.source}
        if self.label is not None:
            out["label"] = self.label
        return out


def inactive() -> dict[str, Any]:
    """The ``agent_view`` result when a client has no view."""
    return {"type": "agent_view", "active": False}


# -- parsing ----------------------------------------------------------------------------------


def parse_source(raw: str, path: str = "source") -> str:
    """Trim and check a view source; a ``plugin:`` source must carry a well-formed id."""
    source = raw.strip()
    if not _SOURCE_RE.match(source):
        raise InvalidAgentView(path, f"must be 1-{MAX_SOURCE_CHARS} ASCII letters, digits "
                               "or : . _ -")
    if source.startswith("plugin:") and not _PLUGIN_ID_RE.match(source[len("plugin:"):]):
        raise InvalidAgentView(path, f"malformed plugin id in {source!r}")
    return source


def parse_label(raw: str | None) -> str | None:
    """Trim a label and drop control characters; None stays None."""
    if raw is None:
        return None
    label = _CONTROL_RE.sub("", raw).strip()
    if not label or len(label) > MAX_LABEL_CHARS:
        raise InvalidAgentView("label", f"must be 1-{MAX_LABEL_CHARS} characters")
    return label


def parse_view(source: str, label: str | None = None, filter: Any = None,
               sort: Any = None) -> AgentView:
    """Validate a whole ``agent.view.set`` request; raises :class:`InvalidAgentView`.

    Plugin references are only checked for form here; whether the plugin and the name exist
    is :func:`check_plugins`' business.
    """
    parsing = _Parsing()
    parsed_filter = None
    if filter is not None:
        parsed_filter = _parse_filter(filter, "filter", 1, parsing)
    keys: tuple[SortKey, ...] = ()
    if sort is not None:
        keys = _parse_sort(sort, parsing)
    spec: dict[str, Any] = {}
    if filter is not None:
        spec["filter"] = filter
    if sort is not None:
        spec["sort"] = sort
    return AgentView(parse_source(source), parse_label(label), parsed_filter, keys, spec,
                     tuple(parsing.refs))


@dataclass(slots=True)
class _Parsing:
    nodes: int = 0
    refs: list[tuple[str, str, PluginRef]] = field(default_factory=list)


def _parse_filter(raw: Any, path: str, depth: int, parsing: _Parsing) -> Filter:
    if depth > MAX_DEPTH:
        raise InvalidAgentView(path, f"filters nest at most {MAX_DEPTH} levels deep")
    parsing.nodes += 1
    if parsing.nodes > MAX_NODES:
        raise InvalidAgentView(path, f"a filter has at most {MAX_NODES} nodes")
    if not isinstance(raw, Mapping):
        raise InvalidAgentView(path, "must be an object")
    if "plugin" in raw and "op" not in raw:
        ref = _parse_plugin_ref(raw["plugin"], f"{path}.plugin")
        parsing.refs.append(("filter", f"{path}.plugin", ref))
        return PluginFilter(ref)
    op = raw.get("op")
    if op in ("all", "any"):
        children = raw.get("filters")
        if not isinstance(children, list) or not children:
            raise InvalidAgentView(f"{path}.filters", "must be a non-empty list")
        parsed = tuple(_parse_filter(child, f"{path}.filters[{i}]", depth + 1, parsing)
                       for i, child in enumerate(children))
        return AllOf(parsed) if op == "all" else AnyOf(parsed)
    if op == "not":
        if "filter" not in raw:
            raise InvalidAgentView(f"{path}.filter", "is required")
        return Not(_parse_filter(raw["filter"], f"{path}.filter", depth + 1, parsing))
    if op in ("eq", "in", "exists"):
        if "field" not in raw:
            raise InvalidAgentView(f"{path}.field", "is required")
        fld = _parse_field(raw["field"], f"{path}.field")
        if op == "exists":
            return Exists(fld)
        if op == "eq":
            if "value" not in raw:
                raise InvalidAgentView(f"{path}.value", "is required")
            return Eq(fld, _parse_value(raw["value"], fld, f"{path}.value"))
        values = raw.get("values")
        if not isinstance(values, list) or not 1 <= len(values) <= MAX_IN_VALUES:
            raise InvalidAgentView(f"{path}.values", f"must be a list of 1-{MAX_IN_VALUES} "
                                   "values")
        return In(fld, tuple(_parse_value(v, fld, f"{path}.values[{i}]")
                             for i, v in enumerate(values)))
    if op is None:
        raise InvalidAgentView(f"{path}.op", "is required (all, any, not, eq, in, exists) "
                               "unless the node is {\"plugin\": \"<plugin_id>/<name>\"}")
    raise InvalidAgentView(f"{path}.op", f"unknown operator {op!r}")


def _parse_token(raw: Any, path: str) -> TokenField:
    if not isinstance(raw, str) or not _TOKEN_RE.match(raw):
        raise InvalidAgentView(path, "token names are 1-32 of A-Z a-z 0-9 _ -")
    return TokenField(raw)


def _parse_plugin_ref(raw: Any, path: str) -> PluginRef:
    match = _PLUGIN_REF_RE.match(raw) if isinstance(raw, str) else None
    if match is None:
        raise InvalidAgentView(path, "must be \"<plugin_id>/<name>\"")
    return PluginRef(match[1], match[2])


def _parse_field(raw: Any, path: str) -> Field:
    if isinstance(raw, str):
        if raw not in FILTER_FIELDS:
            raise InvalidAgentView(path, f"unknown field {raw!r} (fields: "
                                   f"{', '.join(FILTER_FIELDS)} or {{\"token\": name}})")
        return raw
    if isinstance(raw, Mapping) and set(raw) == {"token"}:
        return _parse_token(raw["token"], f"{path}.token")
    raise InvalidAgentView(path, "must be a field name or {\"token\": name}")


def _parse_value(raw: Any, fld: Field, path: str) -> Value:
    name = "token" if isinstance(fld, TokenField) else fld
    if isinstance(raw, Mapping):
        context = raw.get("context") if set(raw) == {"context"} else None
        if context not in CONTEXTS:
            raise InvalidAgentView(path, "must be a string, a boolean, an unsigned integer or "
                                   f"{{\"context\": {' | '.join(CONTEXTS)}}}")
        if CONTEXTS[context] != name:
            raise InvalidAgentView(path, f"{context} compares only with "
                                   f"{CONTEXTS[context]}, not {name}")
        return Context(context)
    if name == "seen":
        if not isinstance(raw, bool):
            raise InvalidAgentView(path, "seen compares with a boolean")
        return raw
    if name == "state_change_seq":
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
            raise InvalidAgentView(path, "state_change_seq compares with an unsigned integer")
        return raw
    if not isinstance(raw, str):
        raise InvalidAgentView(path, f"{name} compares with a string")
    if name == "status" and raw not in STATUSES:
        raise InvalidAgentView(path, f"unknown status {raw!r} (one of {', '.join(STATUSES)})")
    return raw


def _parse_sort(raw: Any, parsing: _Parsing) -> tuple[SortKey, ...]:
    if not isinstance(raw, list):
        raise InvalidAgentView("sort", "must be a list")
    if len(raw) > MAX_SORT_KEYS:
        raise InvalidAgentView("sort", f"at most {MAX_SORT_KEYS} sort keys")
    keys: list[SortKey] = []
    for i, item in enumerate(raw):
        path = f"sort[{i}]"
        if not isinstance(item, Mapping) or "field" not in item:
            raise InvalidAgentView(path, "must be {\"field\": ..., \"order\": \"asc\"|\"desc\"}")
        order = item.get("order", "asc")
        if order not in ("asc", "desc"):
            raise InvalidAgentView(f"{path}.order", "must be \"asc\" or \"desc\"")
        fld = _parse_sort_field(item["field"], f"{path}.field")
        if isinstance(fld, PluginRef):
            parsing.refs.append(("sort", f"{path}.field.plugin", fld))
        keys.append(SortKey(fld, order == "desc"))
    return tuple(keys)


def _parse_sort_field(raw: Any, path: str) -> SortField:
    if isinstance(raw, str):
        if raw not in SORT_FIELDS:
            raise InvalidAgentView(path, f"unknown sort field {raw!r} (fields: "
                                   f"{', '.join(SORT_FIELDS)}, {{\"token\": name}} or "
                                   "{\"plugin\": \"<plugin_id>/<name>\"})")
        return raw
    if isinstance(raw, Mapping) and set(raw) == {"token"}:
        return _parse_token(raw["token"], f"{path}.token")
    if isinstance(raw, Mapping) and set(raw) == {"plugin"}:
        return _parse_plugin_ref(raw["plugin"], f"{path}.plugin")
    raise InvalidAgentView(path, "must be a sort field name, {\"token\": name} or "
                           "{\"plugin\": \"<plugin_id>/<name>\"}")


class _PluginEntry(Protocol):
    @property
    def plugin_id(self) -> str: ...


class _SortEntry(_PluginEntry, Protocol):
    @property
    def key(self) -> Callable[[Mapping[str, Any]], Any]: ...


class _FilterEntry(_PluginEntry, Protocol):
    @property
    def predicate(self) -> Callable[[Mapping[str, Any]], bool]: ...


class _PluginStatus(Protocol):
    @property
    def status(self) -> str: ...


class ViewPlugins(Protocol):
    """The plugin host, as views see it: registered sorts and filters, and a contained call."""

    def view_sorts(self) -> Mapping[str, _SortEntry]: ...

    def view_filters(self) -> Mapping[str, _FilterEntry]: ...

    def get(self, plugin_id: str) -> _PluginStatus:
        """The plugin's record; raises ``plugin_not_found``."""
        ...

    async def invoke(self, plugin_id: str, label: str, fn: Callable[..., Any],
                     *args: Any, **kwargs: Any) -> Any:
        """Run ``fn`` as that plugin's code (its thread, its time budget)."""
        ...


def check_plugins(view: AgentView, host: ViewPlugins) -> None:
    """Check that the plugins a view names are there and serving.

    Raises ``plugin_not_found`` / ``plugin_disabled`` for the owning plugin of a
    ``plugin:<id>`` source and for the plugin of each reference, and ``invalid_agent_view``
    naming the reference when that plugin registered no such sort key or predicate.
    """
    owner = view.plugin_id
    if owner is not None:
        _require_loaded(host, owner)
    tables: dict[str, Mapping[str, _PluginEntry]] = {
        "filter": host.view_filters(), "sort": host.view_sorts()}
    for kind, path, ref in view.plugin_refs:
        _require_loaded(host, ref.plugin_id)
        entry = tables[kind].get(ref.name)
        if entry is None or entry.plugin_id != ref.plugin_id:
            raise InvalidAgentView(path, f"plugin {ref.plugin_id} registered no view {kind} "
                                   f"named {ref.name!r}")


def _require_loaded(host: ViewPlugins, plugin_id: str) -> None:
    plugin = host.get(plugin_id)
    if plugin.status != "loaded":
        raise CmuxError("plugin_disabled", f"plugin {plugin_id} is {plugin.status}",
                        {"plugin_id": plugin_id})


# -- evaluation -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ViewContext:
    """What a view is evaluated against: where the client is looking and the order numbers.

    ``workspace_order`` maps workspace ids to their 0-based position, ``tab_order`` and
    ``pane_order`` map tab and pane ids to their public numbers; an id not in a map makes
    that sort key missing for the row.
    """

    current_workspace_id: str | None = None
    current_tab_id: str | None = None
    workspace_order: Mapping[str, int] = field(default_factory=dict)
    tab_order: Mapping[str, int] = field(default_factory=dict)
    pane_order: Mapping[str, int] = field(default_factory=dict)


PluginValues = Mapping[tuple[str, PluginRef], Sequence[Any]]
"""``("filter" | "sort", ref)`` → one value per row (MISSING where the plugin gave none)."""

Row = Mapping[str, Any]


def field_value(row: Row, fld: Field, ctx: ViewContext) -> Any:
    """A filter field of one AgentInfo row, or :data:`MISSING`."""
    if isinstance(fld, TokenField):
        tokens = row.get("tokens")
        value = tokens.get(fld.name) if isinstance(tokens, Mapping) else None
        return MISSING if value is None else value
    if fld == "status":
        return row.get("agent_status", MISSING)
    if fld == "state_change_seq":
        seq = row.get("state_change_seq")
        # 0 means the terminal never changed state: the field is absent then
        return seq if isinstance(seq, int) and seq > 0 else MISSING
    value = row.get(fld)
    return MISSING if value is None else value


def sort_value(row: Row, fld: str | TokenField, ctx: ViewContext) -> Any:
    """A built-in or token sort key of one row, or :data:`MISSING`."""
    if isinstance(fld, TokenField):
        return field_value(row, fld, ctx)
    if fld == "workspace_order":
        return ctx.workspace_order.get(str(row.get("workspace_id")), MISSING)
    if fld == "tab_order":
        return ctx.tab_order.get(str(row.get("tab_id")), MISSING)
    if fld == "pane_order":
        return ctx.pane_order.get(str(row.get("pane_id")), MISSING)
    if fld == "attention":
        return ATTENTION.get(str(row.get("agent_status")), 0)
    return field_value(row, fld, ctx)


def _resolve(value: Value, ctx: ViewContext) -> Any:
    if isinstance(value, Context):
        resolved = getattr(ctx, value.name)
        return MISSING if resolved is None else resolved
    return value


def _equal(a: Any, b: Any) -> bool:
    return a is not MISSING and b is not MISSING and type(a) is type(b) and a == b


def matches(node: Filter, row: Row, ctx: ViewContext,
            plugin_value: Callable[[PluginRef], Any] = lambda ref: MISSING) -> bool:
    """Whether ``row`` passes ``node``; ``plugin_value(ref)`` is the row's predicate result."""
    if isinstance(node, AllOf):
        return all(matches(child, row, ctx, plugin_value) for child in node.filters)
    if isinstance(node, AnyOf):
        return any(matches(child, row, ctx, plugin_value) for child in node.filters)
    if isinstance(node, Not):
        return not matches(node.filter, row, ctx, plugin_value)
    if isinstance(node, PluginFilter):
        return plugin_value(node.ref) is True
    value = field_value(row, node.field, ctx)
    if isinstance(node, Exists):
        return value is not MISSING
    if isinstance(node, Eq):
        return _equal(value, _resolve(node.value, ctx))
    return any(_equal(value, _resolve(v, ctx)) for v in node.values)


def project(view: AgentView | None, rows: Sequence[Row], ctx: ViewContext,
            plugin_values: PluginValues | None = None) -> list[Row]:
    """The rows ``view`` shows, in its order; no view keeps every row in the given order.

    Pure: the same rows, context and plugin values always give the same result. Rows are
    returned as given (not copied).
    """
    if view is None:
        return list(rows)
    found = plugin_values or {}
    indexed = list(enumerate(rows))
    if view.filter is not None:
        kept: list[tuple[int, Row]] = []
        for i, row in indexed:
            if matches(view.filter, row, ctx, functools.partial(_plugin_at, found, "filter",
                                                                index=i)):
                kept.append((i, row))
        indexed = kept
    for key in reversed(view.sort):
        values: dict[int, Any] = {}
        for i, row in indexed:
            if isinstance(key.field, PluginRef):
                values[i] = _plugin_at(found, "sort", key.field, index=i)
            else:
                values[i] = sort_value(row, key.field, ctx)
        present = [item for item in indexed if values[item[0]] is not MISSING]
        absent = [item for item in indexed if values[item[0]] is MISSING]
        _stable_sort(present, values, key.descending)
        indexed = present + absent
    return [row for _, row in indexed]


def _plugin_at(found: PluginValues, kind: str, ref: PluginRef, *, index: int) -> Any:
    values = found.get((kind, ref))
    if values is None or index >= len(values):
        return MISSING
    return values[index]


def _stable_sort(items: list[tuple[int, Row]], values: Mapping[int, Any],
                 descending: bool) -> None:
    try:
        items.sort(key=lambda item: values[item[0]], reverse=descending)
    except TypeError:
        # a plugin key returned values that do not compare with each other
        items.sort(key=lambda item: (type(values[item[0]]).__name__, repr(values[item[0]])),
                   reverse=descending)


async def plugin_values(view: AgentView, rows: Sequence[Row], host: ViewPlugins
                        ) -> dict[tuple[str, PluginRef], list[Any]]:
    """Call every plugin sort key and predicate ``view`` names, once each over all rows.

    Each call goes through ``host.invoke`` (the plugin's worker thread, its time
    budget, failures recorded against it); a reference whose plugin or name is gone, or whose
    call fails, is left out, which makes it missing for every row. Rows reach plugins as
    read-only mappings.
    """
    frozen = [_freeze(row) for row in rows]
    wanted: list[tuple[str, PluginRef, Callable[[Row], Any]]] = []
    filters, sorts = host.view_filters(), host.view_sorts()
    for ref in dict.fromkeys(view.plugin_filters()):
        entry = filters.get(ref.name)
        if entry is not None and entry.plugin_id == ref.plugin_id:
            wanted.append(("filter", ref, entry.predicate))
    for ref in dict.fromkeys(view.plugin_sorts()):
        sort_entry = sorts.get(ref.name)
        if sort_entry is not None and sort_entry.plugin_id == ref.plugin_id:
            wanted.append(("sort", ref, sort_entry.key))
    out: dict[tuple[str, PluginRef], list[Any]] = {}
    for kind, ref, fn in wanted:
        try:
            values = await host.invoke(ref.plugin_id, f"view {kind} {ref.name}",
                                       functools.partial(_over_rows, fn, frozen))
        except CmuxError:
            continue
        out[(kind, ref)] = values
    return out


def _over_rows(fn: Callable[[Row], Any], rows: Sequence[Row]) -> list[Any]:
    return [_missing_if_none(fn(row)) for row in rows]


def _missing_if_none(value: Any) -> Any:
    return MISSING if value is None else value


def _freeze(row: Row) -> Row:
    return types.MappingProxyType({k: types.MappingProxyType(dict(v)) if isinstance(v, Mapping)
                                   else v for k, v in row.items()})


async def evaluate(view: AgentView | None, rows: Sequence[Row], ctx: ViewContext,
                   host: ViewPlugins | None) -> list[Row]:
    """:func:`project` with the plugin values ``view`` needs fetched from ``host`` first."""
    if view is None:
        return list(rows)
    found: PluginValues = {}
    if host is not None and (view.plugin_filters() or view.plugin_sorts()):
        found = await plugin_values(view, rows, host)
    return project(view, rows, ctx, found)


def context_of(mux: Mux) -> ViewContext:
    """The context of a server: its active workspace and tab, and every order number."""
    ws_order: dict[str, int] = {}
    tab_order: dict[str, int] = {}
    pane_order: dict[str, int] = {}
    for index, ws in enumerate(mux.workspaces()):
        ws_order[ws.id] = index
        for tab in ws.tabs:
            tab_order[tab.id] = tab.number
    for pane in mux.all_panes():
        pane_order[pane.id] = pane.number
    active = mux.active_workspace()
    current = active.active_tab if active is not None else None
    return ViewContext(active.id if active is not None else None,
                       current.id if current is not None else None, ws_order, tab_order,
                       pane_order)


# -- views per client ---------------------------------------------------------------------------


VIEW_CHANGED = "agent_view_changed"
"""Event published when a named client's view is set, cleared or ended."""


@event(VIEW_CHANGED)
class AgentViewChanged(Event):
    """A named client's view is now ``view`` (None: the client has none)."""

    client_id: str
    view: AgentView | None

ClientKey = str | object
"""A named ``client_id`` string, or the connection object itself."""

_INTERNAL: Final = "internal:"
"""The client of calls made inside the server (no connection)."""


class ViewBook:
    """The views of one server's clients; lives on the server loop.

    A view keyed by a connection is dropped when that connection closes; a view keyed by a
    named ``client_id`` stays until cleared. Views owned by a plugin (``plugin:<id>``) are
    dropped when the server reports that plugin disabled, unlinked or blocked
    (:meth:`plugin_unloaded`). Every change to a named client's view is published as
    ``agent_view_changed``.
    """

    def __init__(self, events: EventHub) -> None:
        self._views: dict[ClientKey, AgentView] = {}
        self._events = events

    def client(self, connection: object | None, client_id: str | None) -> ClientKey:
        """The client a call speaks for: ``client_id`` when given, else its connection."""
        if client_id is not None:
            return client_id
        return connection if connection is not None else _INTERNAL

    def get(self, client: ClientKey) -> AgentView | None:
        return self._views.get(client)

    def set(self, client: ClientKey, view: AgentView) -> None:
        """Replace ``client``'s view; a connection's view lasts until
        :meth:`connection_closed` is called for it."""
        self._views[client] = view
        self._announce(client, view)

    def clear(self, client: ClientKey, source: str | None = None) -> AgentView | None:
        """Drop ``client``'s view (only when its source is ``source``, if given).

        Returns the view still active afterwards.
        """
        view = self._views.get(client)
        if view is not None and (source is None or view.source == source):
            del self._views[client]
            self._announce(client, None)
            return None
        return view

    def __len__(self) -> int:
        return len(self._views)

    def connection_closed(self, connection: object) -> None:
        """Drop the view keyed by ``connection``, which has closed."""
        self._views.pop(connection, None)

    def plugin_unloaded(self, plugin_id: str, reason: str) -> None:
        """The host unloaded ``plugin_id``: end the views it owns, unless it is only being
        replaced by its next version (``reason`` ``replaced``)."""
        if reason == "replaced":
            return
        source = f"plugin:{plugin_id}"
        for client in [c for c, v in self._views.items() if v.source == source]:
            del self._views[client]
            self._announce(client, None)

    def _announce(self, client: ClientKey, view: AgentView | None) -> None:
        """Publish ``agent_view_changed`` for a named client, so its front ends redraw."""
        if not isinstance(client, str) or client == _INTERNAL:
            return
        self._events.publish(AgentViewChanged(client, view))


async def project_for(book: ViewBook, connection: object | None, rows: Sequence[Row],
                      view_param: bool | str | None, mux: Mux, host: ViewPlugins
                      ) -> list[Row]:
    """``rows`` (AgentInfo dicts in natural order) as a client's view shows them.

    ``view_param`` is ``agent.list``'s ``view``: true for the view of ``connection``'s
    client, a string for the view of that named ``client_id``, false/None for no projection.
    A client without a view gets every row in natural order.
    """
    if view_param is None or view_param is False:
        return list(rows)
    client = book.client(connection, view_param if isinstance(view_param, str) else None)
    view = book.get(client)
    if view is None:
        return list(rows)
    return await evaluate(view, rows, context_of(mux), host)
