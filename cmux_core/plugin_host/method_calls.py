"""How a request for a socket method a plugin registered reaches the plugin's handler.

The host adds each registered method to the server's method table with a handler made by
:func:`method_handler`: it gives the plugin's handler a :class:`PluginMethodCall` (the
:class:`~cmux_core.hookspecs.PluginCall` of ``hookspecs``) and the params (the registered
model, or a dict of every key when the plugin declared none), runs it contained like any
other plugin call, and answers with the mapping it returns (``type`` defaults to
``plugin_result``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import ConfigDict

from cmux_core import hookspecs
from cmux_core.errors import CmuxError, InternalError
from cmux_core.plugin_host.calls import PluginCaller
from cmux_core.plugin_host.record import Plugin
from cmux_core.plugin_host.registry import PluginMethod

__all__ = ["InProcessApi", "IncomingCall", "PluginMethodCall", "RawParams", "method_handler"]

InProcessApi = Callable[[str, Mapping[str, Any], Any], Awaitable[dict[str, Any]]]
"""``api(method, params, connection)``: answer one socket API call in-process, as the client
of ``connection`` (None for the server itself); raises CmuxError when the call fails."""

Invoke = Callable[..., Awaitable[Any]]
"""``invoke(plugin_id, label, fn, *args)``: :meth:`PluginHost.invoke
<cmux_core.plugin_host.host.PluginHost.invoke>`."""


class _Client(Protocol):
    @property
    def client_id(self) -> str: ...


class IncomingCall(Protocol):
    """The request a plugin method answers, as the host needs to see it."""

    @property
    def connection(self) -> _Client | None: ...

    @property
    def request_id(self) -> Any: ...

    @property
    def method(self) -> str: ...


@dataclass(frozen=True, slots=True)
class PluginMethodCall:
    """The :class:`~cmux_core.hookspecs.PluginCall` a plugin method handler receives."""

    plugin_id: str
    client_id: str | None
    request_id: Any
    method: str
    _connection: Any
    _api: InProcessApi | None
    _loop: asyncio.AbstractEventLoop

    async def request(self, method: str, params: Mapping[str, Any] | None = None
                      ) -> dict[str, Any]:
        api = self._api
        if api is None:
            raise CmuxError("not_supported", "this plugin host is not serving a socket API")

        async def answer() -> dict[str, Any]:
            assert api is not None
            return await api(method, dict(params or {}), self._connection)

        if asyncio.get_running_loop() is self._loop:
            return await answer()
        # From the plugin's own loop: the call is answered on the server loop.
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(answer(), self._loop))

    def request_blocking(self, method: str, params: Mapping[str, Any] | None = None, *,
                         timeout: float = 30.0) -> dict[str, Any]:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            raise RuntimeError("request_blocking called on the server loop; await request()")
        future = asyncio.run_coroutine_threadsafe(self.request(method, params), self._loop)
        return future.result(timeout)


class RawParams(hookspecs.Params):
    """Params of a plugin method that declared no model: every key is kept."""

    model_config = ConfigDict(extra="allow")


def method_handler(plugin: Plugin, method: PluginMethod, *, invoke: Invoke,
                   caller: PluginCaller, api: InProcessApi | None
                   ) -> Callable[[IncomingCall, Any], Awaitable[dict[str, Any]]]:
    """The method-table handler answering ``method`` of ``plugin`` through ``invoke``.

    A handler that returns something other than a mapping is a fault of the plugin and the
    request gets ``internal_error``.
    """

    async def handle(call: IncomingCall, params: Any) -> dict[str, Any]:
        arg = params if method.params is not None else dict(params.model_extra or {})
        conn = call.connection
        context = PluginMethodCall(
            plugin.plugin_id, conn.client_id if conn is not None else None,
            call.request_id, call.method, conn, api, asyncio.get_running_loop())
        result = await invoke(plugin.plugin_id, method.name, method.handler, context, arg)
        if not isinstance(result, Mapping):
            caller.fault(plugin, method.name,
                         f"returned {type(result).__name__}, not a dict", count=False)
            raise InternalError(message=f"{method.name} returned no result object")
        out = dict(result)
        out.setdefault("type", "plugin_result")
        return out

    return handle
