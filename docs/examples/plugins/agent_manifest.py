"""Detect a made-up agent, "toy", from its screen."""

from __future__ import annotations

from cmux_core.hookspecs import RegisterManifest, hookimpl

TOY_MANIFEST = """
id = "toy"
aliases = ["toy-agent"]

[[rules]]
state = "working"
contains = "thinking..."
"""


@hookimpl
def cmux_register_manifests(register: RegisterManifest) -> None:
    register(TOY_MANIFEST)
