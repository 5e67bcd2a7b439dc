"""agent.view.* methods: set, clear and read a client's agent view.

A view belongs to the client that sets it and never changes another client's list. Clients
are told apart by the ``client_id`` param (an extension; any 1-120 of ``A-Za-z0-9:._-``),
and without it by their connection, whose view ends when it disconnects. Results are herdr's
``agent_view {active, source?, label?}``. Evaluation lives in :mod:`cmux_core.agents.views`;
``agent.list {view}`` projects its rows through :func:`cmux_core.agents.views.project_for`.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import field_validator

from cmux_core.agents.views import check_plugins, inactive, parse_source, parse_view
from cmux_core.api.context import Call
from cmux_core.api.dispatch import MethodTable, Result
from cmux_core.hookspecs import Params

methods = MethodTable()

_CLIENT_ID_RE = re.compile(r"^[A-Za-z0-9:._-]{1,120}$")


class _ClientParams(Params):
    client_id: str | None = None

    @field_validator("client_id")
    @classmethod
    def _client_id(cls, value: str | None) -> str | None:
        if value is not None and not _CLIENT_ID_RE.match(value):
            raise ValueError("must be 1-120 ASCII letters, digits or : . _ -")
        return value


class AgentViewSetParams(_ClientParams):
    source: str
    label: str | None = None
    filter: Any = None
    sort: Any = None


class AgentViewClearParams(_ClientParams):
    source: str | None = None


class AgentViewGetParams(_ClientParams):
    pass


@methods.method("agent.view.set", AgentViewSetParams)
async def agent_view_set(call: Call, p: AgentViewSetParams) -> Result:
    """Replace the calling client's agent view (filter and sort of the agent list).

    Invalid input leaves the previous view in place. A ``plugin:<id>`` source needs that
    plugin installed and enabled, and so does every ``{"plugin": ...}`` reference.
    """
    view = parse_view(p.source, p.label, p.filter, p.sort)
    check_plugins(view, call.ctx.plugins)
    book = call.ctx.views
    book.set(book.client(call.connection, p.client_id), view)
    return view.to_wire()


@methods.method("agent.view.clear", AgentViewClearParams)
async def agent_view_clear(call: Call, p: AgentViewClearParams) -> Result:
    """Clear the calling client's view; with ``source``, only a view with that source.

    Returns the view active afterwards (a non-matching source leaves it active).
    """
    source = parse_source(p.source) if p.source is not None else None
    book = call.ctx.views
    remaining = book.clear(book.client(call.connection, p.client_id), source)
    return remaining.to_wire() if remaining is not None else inactive()


@methods.method("agent.view.get", AgentViewGetParams)
async def agent_view_get(call: Call, p: AgentViewGetParams) -> Result:
    """The calling client's view: ``agent_view`` plus its ``filter`` and ``sort`` as set."""
    book = call.ctx.views
    view = book.get(book.client(call.connection, p.client_id))
    if view is None:
        return inactive()
    return {**view.to_wire(), **view.spec}
