"""Machine-qualified ids and the ``machines`` param: which calls leave this machine, and how
their answers come back.

A qualified id is ``NAME/<any local handle>`` (``box/w1:p2``, ``box/pane:3``,
``box/<UUID>``), where ``NAME`` is a saved machine: a call naming one is sent whole to that
machine with the prefix taken off, and every ``*_id`` in its answer gets the prefix put on,
so the ids a client gets back can be used again. A call whose ids carry no saved machine's
prefix is this machine's own and is not touched. A few methods also take ``machines``
(``"local"``, a name, a list of them, or ``"all"``): lists (``agent.list``, ``pane.list``)
are merged with each item's
``machine``; waits race on every machine named; the rest act on one machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

from cmux_core.errors import CmuxError, InvalidParams
from cmux_core.fleet.fleet import Fleet
from cmux_core.fleet.link import CALL_TIMEOUT_S, CONNECT_TIMEOUT_S, Channel
from cmux_core.fleet.machines import LOCAL

Result = dict[str, Any]
LocalCall = Callable[[str, dict[str, Any], Any], Awaitable[Result]]
"""Serves a call on this machine: method, params, the connection it came on."""
ViewProjection = Callable[[list[dict[str, Any]], "bool | str", Any], Awaitable[list[Any]]]
"""Projects agent rows through this machine's view (``agent.list``'s ``view``: true for the
calling connection's client, a string for that client id), as ``agent.list`` does."""

MACHINES_METHODS = frozenset({
    "agent.list", "pane.list", "agent.wait", "agent.prompt", "pane.read", "pane.send_text",
    "pane.send_keys", "pane.wait_for_output", "events.subscribe"})
MERGED_LISTS = {"agent.list": ("agent_list", "agents"), "pane.list": ("pane_list", "panes")}
"""Lists merged from every machine named: the answer's type and its list's key."""
RACED = frozenset({"agent.wait", "pane.wait_for_output"})
HOLDING = frozenset({"agent.wait", "pane.wait_for_output", "agent.prompt", "events.wait",
                     "agent.start"})
"""Methods that may hold their request: each gets a channel of its own, so it never delays
the calls behind it on the machine's shared session."""
CONNECTION_BOUND = frozenset({"pane.attach", "attach.graphics", "pane.graphics.stream.open"})
"""Methods that take their connection over: they reach a machine only through a relay."""
NOT_IDS = frozenset({"client_id", "plugin_id", "session_id", "request_id"})
WAIT_MARGIN_S = 10.0
RESUBSCRIBE_S = (0.25, 5.0)
"""First and longest pause between tries to subscribe again on a connected machine whose
stream could not be opened."""


def _id_key(key: str) -> bool:
    return key == "target" or (key.endswith("_id") and key not in NOT_IDS)


def split_qualified(value: str) -> tuple[str, str] | None:
    name, sep, rest = value.partition("/")
    return (name, rest) if sep and name and rest else None


def qualify(value: Any, machine: str) -> Any:
    """``value`` with every ``*_id`` string under it prefixed ``machine/``, and ``machine``
    set on each object that holds a ``pane_id``."""
    if isinstance(value, list):
        return [qualify(v, machine) for v in value]
    if not isinstance(value, dict):
        return value
    out = {k: (f"{machine}/{v}" if isinstance(v, str) and _id_key(k) and v
               else qualify(v, machine)) for k, v in value.items()}
    if "pane_id" in value:
        out["machine"] = machine
    return out


def _hold_timeout(params: dict[str, Any]) -> float | None:
    """How long a holding call may take: its own ``timeout_ms`` and a margin, or no bound
    (it then ends with its client or its link)."""
    ms = params.get("timeout_ms")
    wait = params.get("wait")
    if isinstance(wait, dict) and isinstance(wait.get("timeout_ms"), int):
        ms = max(ms or 0, wait["timeout_ms"])
    return ms / 1000 + WAIT_MARGIN_S if isinstance(ms, int) else None


def _result(reply: dict[str, Any]) -> Result:
    if reply.get("ok") is False or "error" in reply:
        err = reply.get("error") or {}
        raise CmuxError(str(err.get("code", "internal_error")), str(err.get("message", "")),
                        err.get("data"))
    result = reply.get("result")
    return result if isinstance(result, dict) else {}


class FleetRouter:
    """What the method table asks before serving a call itself (:meth:`route`)."""

    def __init__(self, fleet: Fleet, local: LocalCall, project: ViewProjection) -> None:
        self.fleet = fleet
        self.local = local
        self.project = project

    def route(self, method: str, params: dict[str, Any], connection: Any
              ) -> Awaitable[Result] | None:
        """The remote or merged answer to this call, or None when it is this machine's."""
        target = self._qualified_target(params)
        machines = params.get("machines")
        if target is not None:
            name, local_params = target
            return self._remote(name, method, local_params, connection)
        if machines is None or machines == LOCAL or method not in MACHINES_METHODS:
            return None
        return self._merged(method, params, connection)

    def _qualified_target(self, params: dict[str, Any]
                          ) -> tuple[str, dict[str, Any]] | None:
        found: str | None = None
        stripped = dict(params)
        for key, value in params.items():
            parts = split_qualified(value) if isinstance(value, str) and _id_key(key) else None
            if parts is None or not self.fleet.known(parts[0]):
                continue
            if found is not None and parts[0] != found:
                raise InvalidParams(key, f"names machine {parts[0]}, another field names "
                                    f"{found}: a call goes to one machine")
            found, stripped[key] = parts[0], parts[1]
        if found is None:
            return None
        stripped.pop("machines", None)
        return found, stripped

    async def call_remote(self, name: str, method: str, params: dict[str, Any],
                          connection: Any = None) -> Result:
        """``method`` on machine ``name`` (ids in ``params`` already the machine's own);
        the result's ids come back qualified."""
        link = self.fleet.link(name)
        if method in HOLDING:
            channel = await link.open_channel()
            try:
                held = channel.request(method, params, _hold_timeout(params))
                reply = await (connection.until_gone(held) if connection is not None
                               else held)
            finally:
                await channel.close()
        else:
            reply = await link.request(method, params, CALL_TIMEOUT_S)
        result: Result = qualify(_result(reply), name)
        result["machine"] = name
        return result

    async def _remote(self, name: str, method: str, params: dict[str, Any],
                      connection: Any) -> Result:
        if method == "events.subscribe":
            await self._subscribe(connection, [name], params)
            return {"type": "subscription_started", "machines": [name]}
        if method in CONNECTION_BOUND or method.startswith("attach."):
            raise CmuxError("not_supported", f"{method} takes its connection over: connect "
                            f"to machine {name} with machine.relay (cmux --machine {name}, "
                            f"cmux attach {name}/...)")
        return await self.call_remote(name, method, params, connection)

    async def _merged(self, method: str, params: dict[str, Any], connection: Any) -> Result:
        names = self.fleet.select(params["machines"])
        params = {k: v for k, v in params.items() if k != "machines"}
        if method in MERGED_LISTS:
            return await self._merged_list(names, method, params, connection)
        if method == "events.subscribe":
            return await self._merged_subscribe(names, params, connection)
        if method in RACED:
            return await self._race(names, method, params, connection)
        if len(names) != 1:
            raise InvalidParams("machines", f"{method} acts on one machine: name one, or "
                                "qualify the id (NAME/w1:p2)")
        if names[0] == LOCAL:
            return await self.local(method, params, connection)
        return await self.call_remote(names[0], method, params, connection)

    async def _one(self, name: str, method: str, params: dict[str, Any],
                   connection: Any) -> Result:
        if name == LOCAL:
            result = await self.local(method, params, connection)
            return {**result, "machine": LOCAL}
        return await self.call_remote(name, method, params, connection)

    async def _merged_list(self, names: list[str], method: str, params: dict[str, Any],
                           connection: Any) -> Result:
        """Every named machine's items (agents, panes), in the order of ``names``, each with
        its ``machine``; a machine that cannot answer is listed in ``unreachable`` with why,
        and the others still answer."""
        kind, key = MERGED_LISTS[method]
        # A view is this machine's (its filter, its sort, its plugins' keys): every machine
        # gives its rows in natural order, and the merged list goes through the view here.
        view = params.get("view") if method == "agent.list" else None
        if view is not None:
            params = {k: v for k, v in params.items() if k != "view"}
        answers = await asyncio.gather(
            *(self._one(n, method, params, connection) for n in names),
            return_exceptions=True)
        items: list[Any] = []
        unreachable: list[dict[str, Any]] = []
        for name, answer in zip(names, answers, strict=True):
            if isinstance(answer, CmuxError):
                unreachable.append({"machine": name, "code": answer.code,
                                    "message": answer.message})
            elif isinstance(answer, BaseException):
                raise answer
            else:
                items += [{**row, "machine": name} for row in answer.get(key, [])]
        if view is not None and view is not False:
            items = await self.project(items, view, connection)
        return {"type": kind, key: items, "unreachable": unreachable}

    async def _race(self, names: list[str], method: str, params: dict[str, Any],
                    connection: Any) -> Result:
        """The first machine to answer; the target not existing on a machine rules that one
        out, and when every machine failed the first failure is raised."""
        tasks = [asyncio.ensure_future(self._one(n, method, params, None)) for n in names]
        failures: list[CmuxError] = []
        try:
            pending = set(tasks)
            while pending:
                waited = asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                done, pending = await (connection.until_gone(waited) if connection
                                       is not None else waited)
                for task in done:
                    exc = task.exception()
                    if exc is None:
                        return task.result()
                    if not isinstance(exc, CmuxError):
                        raise exc
                    failures.append(exc)
            raise next((f for f in failures if not f.code.endswith("_not_found")),
                       failures[0])
        finally:
            for task in tasks:
                task.cancel()

    async def _merged_subscribe(self, names: list[str], params: dict[str, Any],
                                connection: Any) -> Result:
        remote = [n for n in names if n != LOCAL]
        if LOCAL in names:
            result = await self.local("events.subscribe", params, _Tagging(connection))
        else:
            result = {"type": "subscription_started"}
        waiting = await self._subscribe(connection, remote, params, join_later=True)
        return {**result, "machines": names, "waiting": waiting}

    async def _subscribe(self, connection: Any, names: list[str], params: dict[str, Any],
                         *, join_later: bool = False) -> list[str]:
        """Open a subscription on each machine at once and forward its events to
        ``connection`` (each with ``machine`` and qualified ids) until the connection ends
        (see :meth:`_follow_stream`); when one cannot be opened, none is kept and its error
        is raised. With ``join_later``, a machine that is not connected (``machine_offline``)
        is no failure: its events join the stream when it connects (with
        ``machine.link_restored``); the names of those machines are returned."""
        if connection is None:
            raise InvalidParams("machines", "events need a client connection")
        opened = await asyncio.gather(*(self._open_stream(n, params) for n in names),
                                      return_exceptions=True)
        waiting = [n for n, o in zip(names, opened, strict=True) if join_later and isinstance(
            o, CmuxError) and o.code == "machine_offline"]
        failure = next((o for n, o in zip(names, opened, strict=True)
                        if isinstance(o, BaseException) and n not in waiting), None)
        for name, channel in zip(names, opened, strict=True):
            if isinstance(channel, Channel) and failure is not None:
                await channel.close()
            elif isinstance(channel, Channel) or name in waiting:
                connection.run_task(self._follow_stream(
                    channel if isinstance(channel, Channel) else None, name, params,
                    connection))
        if failure is not None:
            raise failure
        return waiting

    async def _follow_stream(self, channel: Channel | None, name: str,
                             params: dict[str, Any], connection: Any) -> None:
        """Forward machine ``name``'s events while its stream is open; when it ends, send
        ``machine.link_closed``, wait for the machine to be connected again, subscribe
        again with the same ``params`` and send ``machine.link_restored`` (the events in
        between are lost). Ends with the connection, or when the machine is removed or
        renamed. Waiting costs no wake-up: it sleeps until the machine's state changes."""
        pause = RESUBSCRIBE_S[0]
        while True:
            if channel is not None:
                await _forward(channel, name, connection)
                _send_event(connection, "machine.link_closed", name)
                channel, pause = None, RESUBSCRIBE_S[0]
                # The link may not have seen its master end yet: give it a moment.
                await self.fleet.changed(pause)
            if not self.fleet.known(name):
                return
            if not self.fleet.connected(name):
                await self.fleet.changed()
                continue
            try:
                channel = await self._open_stream(name, params)
            except CmuxError:
                await self.fleet.changed(pause)
                pause = min(pause * 2, RESUBSCRIBE_S[1])
                continue
            _send_event(connection, "machine.link_restored", name)

    async def _open_stream(self, name: str, params: dict[str, Any]) -> Channel:
        channel = await self.fleet.link(name).open_channel()
        try:
            # The first request of a channel waits for its bridge process to start too.
            _result(await channel.request("events.subscribe", params, CONNECT_TIMEOUT_S))
        except BaseException:
            await channel.close()
            raise
        return channel


class _Tagging:
    """A connection whose event streams add ``machine: "local"`` to each event."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)

    def start_stream(self, sub: Any) -> None:
        sub.tag = {"machine": LOCAL}
        self._connection.start_stream(sub)


def _send_event(connection: Any, event: str, name: str) -> None:
    connection.send(json.dumps({"event": event, "data": {"machine": name}}).encode() + b"\n")


async def _forward(channel: Channel, name: str, connection: Any) -> None:
    """Send the events of ``channel`` (machine ``name``'s stream) to ``connection`` until
    the stream ends; then close the channel."""
    try:
        while line := await channel.reader.readline():
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if isinstance(event, dict) and "event" in event:
                    data = qualify(event.get("data") or {}, name)
                    data["machine"] = name
                    connection.send(json.dumps({"event": event["event"], "data": data},
                                               ensure_ascii=False).encode() + b"\n")
    finally:
        await channel.close()
