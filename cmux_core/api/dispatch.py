"""The method table: dotted method name → params model + async handler.

Handlers receive a validated pydantic params object and a
:class:`~cmux_core.api.context.Call` (their module's context, the connection, the request
id) and return the ``result`` object, whose ``type`` names its kind. Each method carries
the context it was bound to when its table was merged (:meth:`MethodTable.merge`); a table
merged without one (the schema) has methods that describe but cannot serve. Handlers
raise :class:`~cmux_core.errors.CmuxError` to answer with an error;
:class:`~cmux_core.errors.Disconnected` (the client left mid-wait) passes through with a
debug line only; anything else becomes
``internal_error`` and is logged, and the server keeps serving.

Plugins add methods through the same table under ``plugin.<plugin_id>.<name>``
with ``owner`` set, so they can be withdrawn together.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, dataclass_transform

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from cmux_core.api.context import Call, Peer
from cmux_core.errors import CmuxError, Disconnected, InternalError, InvalidParams, MethodNotFound
from cmux_core.hookspecs import Params

log = logging.getLogger(__name__)

Result = dict[str, Any]


P = TypeVar("P", bound=Params)
C = TypeVar("C")
Handler = Callable[[Call[Any], Any], Awaitable[Result]]


@dataclass(slots=True)
class Method:
    name: str
    params: type[Params]
    handler: Handler
    owner: str = "core"
    doc: str = ""
    context: object = None
    """What the handler gets as ``call.ctx``."""
    validate: Callable[[dict[str, Any]], Params] | None = None
    """``params``' validation, made once on the first call (:func:`params_validator`)."""


def params_validator(model: type[Params]) -> Callable[[dict[str, Any]], Params] | None:
    """The fastest validation that gives what ``model.model_validate`` gives: for a model
    without fields, validators or post-init (``ping``'s), which ignores unknown keys, one
    shared instance; otherwise its compiled validator called directly. None while the
    model is not complete yet (a forward reference not yet resolved)."""
    if not model.__pydantic_complete__:
        return None
    decorators = model.__pydantic_decorators__
    if (not model.model_fields and model.model_config.get("extra") == "ignore"
            and not (decorators.model_validators or decorators.field_validators
                     or decorators.root_validators or decorators.validators)
            and model.__pydantic_post_init__ is None):
        shared = model.model_validate({})
        return lambda raw: shared
    validate: Callable[[dict[str, Any]], Params] = model.__pydantic_validator__.validate_python
    return validate


def _field_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


_SCALAR_TAGS = frozenset({"str", "int", "float", "bool", "none", "bytes"})


def _is_tag(part: int | str) -> bool:
    """Whether a ``loc`` part is pydantic's name for a union member or a validator
    (``str``, ``list[str]``, ``function-after[...]``) rather than a field or key."""
    return isinstance(part, str) and (part in _SCALAR_TAGS or "[" in part
                                      or part.startswith("function-"))


def _clean_loc(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """``loc`` without the validator and container tags, which are never keys."""
    return tuple(p for p in loc if not (isinstance(p, str) and (
        p.startswith("function-") or "[" in p)))


def _message(err: ErrorDetails) -> str:
    raised = err.get("ctx", {}).get("error") if err["type"] == "value_error" else None
    return str(raised) if isinstance(raised, ValueError) else err["msg"].lower()


def _alternatives(first: ErrorDetails, errors: list[ErrorDetails]) -> list[ErrorDetails]:
    """``first`` and the errors of the other members of the union ``first`` failed in."""
    loc = first["loc"]
    group = [first]
    for err in errors[1:]:
        other = err["loc"]
        i = next((i for i, (a, b) in enumerate(zip(loc, other, strict=False)) if a != b), None)
        if i is not None and loc[:i] == other[:i] and _is_tag(loc[i]) and _is_tag(other[i]):
            group.append(err)
    return group


def validation_error(exc: ValidationError) -> InvalidParams:
    """The first pydantic error as ``invalid_params`` naming the field path; a validator's
    own ``ValueError`` keeps its message as written.

    A value no member of a union (``list[str] | str``) accepts gives one error per member:
    the one that got past the type check, or else reached deepest, names the problem; when
    all failed on type alike, the message lists what each member would have taken.
    """
    errors = exc.errors()
    group = _alternatives(errors[0], errors)
    if len(group) == 1:
        return InvalidParams(_field_path(_clean_loc(group[0]["loc"])), _message(group[0]))
    past_type = [e for e in group if not e["type"].endswith("_type")]
    locs = [tuple(p for p in e["loc"] if not _is_tag(p)) for e in group]
    deepest = max(len(loc) for loc in locs)
    if past_type or sum(len(loc) == deepest for loc in locs) == 1:
        err = past_type[0] if past_type else group[[len(x) for x in locs].index(deepest)]
        return InvalidParams(_field_path(locs[group.index(err)]), _message(err))
    common: tuple[int | str, ...] = ()
    for parts in zip(*locs, strict=False):
        if len(set(parts)) > 1:
            break
        common += (parts[0],)
    wanted = list(dict.fromkeys(_message(e).removeprefix("input should be ") for e in group))
    return InvalidParams(_field_path(common), "input should be " + " or ".join(wanted))


class Router(Protocol):
    """Sends calls elsewhere before this server resolves them (the fleet: calls naming a
    remote machine's ids, or taking ``machines``)."""

    def route(self, method: str, params: dict[str, Any], connection: Peer | None
              ) -> Awaitable[Result] | None:
        """The answer to a call served elsewhere, or None when it is this server's."""
        ...


_Services = TypeVar("_Services")


@dataclass_transform(frozen_default=True)
def services(cls: type[_Services]) -> type[_Services]:
    """Class decorator declaring the services a methods module's handlers use: a frozen,
    slotted dataclass of them, which the composition root builds."""
    return dataclass(frozen=True, slots=True)(cls)


class MethodTable:
    """All methods the server answers, core and plugin-provided."""

    def __init__(self) -> None:
        self._methods: dict[str, Method] = {}
        self._families: dict[str, Method] = {}
        self.router: Router | None = None
        """Asked first by :meth:`call`; set by the composition root."""

    def add_family(self, prefix: str, params: type[Params], handler: Handler, *,
                   owner: str = "core", doc: str = "", context: object = None) -> None:
        """Answer every method under ``prefix`` (e.g. ``"browser."``) that has no handler of
        its own with ``handler``; such names are not listed by :meth:`names`."""
        if prefix in self._families:
            raise ValueError(f"method family {prefix}* is already registered")
        self._families[prefix] = Method(prefix, params, handler, owner, doc, context)

    def add(self, name: str, params: type[Params], handler: Handler, *, owner: str = "core",
            doc: str = "", context: object = None) -> None:
        """Register ``name``; raises ValueError when it is already taken."""
        if name in self._methods:
            raise ValueError(f"method {name} is already registered")
        self._methods[name] = Method(name, params, handler, owner, doc, context)

    def method(self, name: str, params: type[P]) -> Callable[
            [Callable[[Call[C], P], Awaitable[Result]]], Callable[[Call[C], P], Awaitable[Result]]]:
        """Decorator form of :meth:`add` for core handlers (bound by :meth:`merge`)."""
        def register(fn: Callable[[Call[C], P], Awaitable[Result]]
                     ) -> Callable[[Call[C], P], Awaitable[Result]]:
            self.add(name, params, fn, doc=(fn.__doc__ or "").strip())
            return fn
        return register

    def remove_owner(self, owner: str) -> list[str]:
        """Withdraw every method ``owner`` registered; returns their names."""
        gone = [name for name, m in self._methods.items() if m.owner == owner]
        for name in gone:
            del self._methods[name]
        return gone

    def get(self, name: str) -> Method | None:
        return self._methods.get(name)

    def owner_of(self, name: str) -> str | None:
        method = self._methods.get(name)
        return method.owner if method is not None else None

    def names(self) -> list[str]:
        return sorted(self._methods)

    def __contains__(self, name: str) -> bool:
        return name in self._methods

    def schema(self) -> dict[str, Any]:
        """JSON Schema of every method's params, with its one-line description."""
        methods: dict[str, Any] = {}
        for name in self.names():
            m = self._methods[name]
            methods[name] = {"summary": m.doc.split("\n", 1)[0] if m.doc else "",
                             "owner": m.owner, "params": m.params.model_json_schema()}
        return {"methods": methods}

    def merge(self, other: MethodTable, *, context: object = None) -> None:
        """Add ``other``'s methods, each answering with ``context`` as its ``call.ctx``."""
        for m in other._methods.values():
            self.add(m.name, m.params, m.handler, owner=m.owner, doc=m.doc, context=context)
        for m in other._families.values():
            self.add_family(m.name, m.params, m.handler, owner=m.owner, doc=m.doc,
                            context=context)

    async def call(self, name: str, raw_params: dict[str, Any], *,
                   connection: Peer | None = None, request_id: Any = None) -> Result:
        """Validate ``raw_params`` and run the handler of ``name`` for ``connection`` (None:
        the server itself), unless the router serves it elsewhere; every failure is a
        CmuxError."""
        # A call without params names no machine: only this server can serve it.
        routed = (self.router.route(name, raw_params, connection)
                  if self.router is not None and raw_params else None)
        if routed is not None:
            try:
                return await routed
            except (CmuxError, Disconnected):
                raise
            except Exception as exc:
                log.exception("routed %s failed", name, extra={"cmux_method": name})
                raise InternalError(message=f"{type(exc).__name__}: {exc}") from exc
        return await self.call_here(name, raw_params, connection=connection,
                                    request_id=request_id)

    async def call_here(self, name: str, raw_params: dict[str, Any], *,
                        connection: Peer | None = None, request_id: Any = None) -> Result:
        """:meth:`call` on this server, never routed."""
        method = self._methods.get(name) or next(
            (m for prefix, m in self._families.items() if name.startswith(prefix)), None)
        if method is None:
            raise MethodNotFound(name)
        call = Call(method.context, connection, request_id, name)
        validate = method.validate
        if validate is None:
            validate = method.validate = params_validator(method.params)
        try:
            params = (validate(raw_params) if validate is not None
                      else method.params.model_validate(raw_params))
        except ValidationError as exc:
            raise validation_error(exc) from None
        try:
            return await method.handler(call, params)
        except CmuxError:
            raise
        except ValidationError as exc:
            raise validation_error(exc) from None
        except Disconnected:
            log.debug("client left during %s", call.method, extra={"cmux_method": call.method})
            raise
        except Exception as exc:
            log.exception("method %s failed", call.method, extra={"cmux_method": call.method})
            raise InternalError(message=f"{type(exc).__name__}: {exc}") from exc
