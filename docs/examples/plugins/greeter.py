"""Adds the socket method plugin.greeter.hello."""

from __future__ import annotations

from typing import Any

from cmux_core.api.dispatch import Call, Params
from cmux_core.hookspecs import RegisterMethod, hookimpl


class HelloParams(Params):
    name: str = "world"


async def hello(call: Call, params: HelloParams) -> dict[str, Any]:
    return {"type": "greeting", "greeting": f"hello, {params.name}"}


@hookimpl
def cmux_register_methods(register: RegisterMethod) -> None:
    register("hello", hello, params=HelloParams, doc="Greet params.name.")
