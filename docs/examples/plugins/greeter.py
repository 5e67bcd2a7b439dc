"""Adds the socket method plugin.greeter.hello."""

from __future__ import annotations

from typing import Any

from cmux_core.hookspecs import Params, PluginCall, RegisterMethod, hookimpl


class HelloParams(Params):
    name: str = "world"


async def hello(call: PluginCall, params: HelloParams) -> dict[str, Any]:
    # A handler reaches the server only through the socket API, in-process.
    panes = await call.request("pane.list")
    return {"type": "greeting", "greeting": f"hello, {params.name}",
            "panes": len(panes["panes"]), "client_id": call.client_id}


@hookimpl
def cmux_register_methods(register: RegisterMethod) -> None:
    register("hello", hello, params=HelloParams, doc="Greet params.name.")
