"""Detect a made-up agent, "toy", from its screen."""

from __future__ import annotations

from cmux_core.hookspecs import RegisterManifest, hookimpl

TOY_MANIFEST = """
id = "toy"
aliases = ["toy-agent"]
process_names = ["toy"]

[[rules]]
id = "approval"
state = "blocked"
priority = 900
region = "bottom_non_empty_lines(4)"
visible_blocker = true
contains = ["run this command?", "[y/n]"]

[[rules]]
id = "thinking"
state = "working"
priority = 700
region = "bottom_non_empty_lines(4)"
visible_working = true
contains = ["thinking..."]

[[rules]]
id = "prompt"
state = "idle"
priority = 500
region = "bottom_non_empty_lines(1)"
visible_idle = true
line_regex = ['^toy> ']
"""


@hookimpl
def cmux_register_manifests(register: RegisterManifest) -> None:
    register(TOY_MANIFEST)
