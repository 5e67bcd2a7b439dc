"""Fake agents: a small Python program posing as an agent in a real pane, a server that
knows it from a test manifest, and waits for what the pane's agent shows.

A test keeps its own specifics in view (the screens its agent draws, its manifest's rules,
how it reacts to input) and takes from here what every such test does the same way.
"""

from __future__ import annotations

import contextlib
import json
import sys
import textwrap
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from conftest import Api

from cmux_core.testing import ServerProcess, start_server, wait_until


def screens_program(screens: Mapping[str, str]) -> str:
    """Source of an agent that shows the first of ``screens`` on a cleared screen, then for
    each line it reads the screen that line names; a line ``q`` ends it, other lines are
    ignored."""
    return textwrap.dedent(f"""\
        import sys
        SCREENS = {dict(screens)!r}
        def show(key):
            sys.stdout.write("\\x1b[2J\\x1b[H" + SCREENS[key] + "\\n")
            sys.stdout.flush()
        show({next(iter(screens))!r})
        for line in sys.stdin:
            key = line.strip()
            if key == "q":
                break
            if key in SCREENS:
                show(key)
    """)


DRAWN_SCREEN = textwrap.dedent("""\
    import sys, termios, time
    # Like a TUI, it draws its screen itself: the terminal echoes nothing typed, so every
    # change after Enter is the agent's (an echo would count as the prompt taken before the
    # agent, slowed by a loaded machine, had answered).
    attrs = termios.tcgetattr(0)
    attrs[3] &= ~termios.ECHO
    termios.tcsetattr(0, termios.TCSANOW, attrs)
    def show(text):
        sys.stdout.write("\\x1b[2J\\x1b[H" + text + "\\n")
        sys.stdout.flush()
""")
"""The start of an agent program that draws its screens with ``show(text)`` (the screen
cleared first) and leaves echo off."""


def write_agent(directory: Path, name: str, source: str) -> Path:
    """``source`` saved as ``<directory>/<name>.py``. Identification sees the script's name,
    so a manifest lists ``name`` in its ``process_names`` to know the agent."""
    path = directory / f"{name}.py"
    path.write_text(source)
    return path


def agent_argv(script: Path, *args: str) -> list[str]:
    """The command running ``script`` unbuffered with this interpreter."""
    return [sys.executable, "-u", str(script), *args]


TomlValue = str | int | bool | list[str]


def _toml(value: TomlValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(json.dumps(v) for v in value) + "]"
    return json.dumps(value)


def rule(rule_id: str, state: str, priority: int, **keys: TomlValue) -> str:
    """One ``[[rules]]`` table of a manifest: ``id``, ``state`` and ``priority``, then
    ``keys`` in their order (``visible_idle=True``, ``contains=["type here"]``, ...)."""
    lines = [f"id = {_toml(rule_id)}", f"state = {_toml(state)}", f"priority = {priority}"]
    lines += [f"{key} = {_toml(value)}" for key, value in keys.items()]
    return "[[rules]]\n" + "".join(line + "\n" for line in lines)


def manifest(agent: str, *rules: str, process_names: list[str] | None = None,
             **keys: TomlValue) -> str:
    """A detection manifest, version 1.0, for the fake agent ``agent`` with ``keys`` (such
    as ``aliases``) and ``rules`` (each from :func:`rule`); it knows the agent by the
    process name ``<agent>_agent`` unless ``process_names`` says otherwise (``[]``: by
    none)."""
    names = [f"{agent}_agent"] if process_names is None else process_names
    head = f'id = {_toml(agent)}\nversion = "1.0"\n'
    head += "".join(f"{key} = {_toml(value)}\n" for key, value in keys.items())
    if names:
        head += f"process_names = {_toml(names)}\n"
    return "\n".join([head, *rules])


def write_manifests(directory: Path, manifests: Mapping[str, str]) -> Path:
    """``<directory>/manifests``, made, holding each of ``manifests`` as ``<key>.toml``."""
    path = directory / "manifests"
    path.mkdir()
    for name, text in manifests.items():
        (path / f"{name}.toml").write_text(text)
    return path


@contextlib.contextmanager
def manifest_server(manifests: Path, *args: str) -> Iterator[ServerProcess]:
    """A real server reading ``manifests`` as its ``--manifests-dir`` (``args`` added to its
    command line); stopped, its home removed, when the block ends."""
    with start_server(["--manifests-dir", str(manifests), *args]) as server:
        yield server


def start_in_shell(api: Api, script: Path, prefix: str = "") -> str:
    """Type ``<prefix><python> <script>`` into the focused pane's shell; returns that pane.
    The agent is then a child of the shell, as one a person starts."""
    pane_id = api.focused_pane()
    api("pane.send_text", {"pane_id": pane_id, "text": f"{prefix}{sys.executable} {script}\n"})
    return pane_id


def pane_agent(api: Api, pane_id: str) -> tuple[str | None, str]:
    """The pane's ``(agent, agent_status)``; agent is None while none is known."""
    pane = api("pane.get", {"pane_id": pane_id})["pane"]
    return pane.get("agent"), str(pane["agent_status"])


def wait_agent(api: Api, pane_id: str, agent: str | None, status: str,
               timeout: float = 30.0) -> float:
    """Wait until the pane shows ``agent`` in ``status``; returns the seconds it took. The
    failure names what the pane showed at the end."""
    started = time.monotonic()
    try:
        wait_until(lambda: pane_agent(api, pane_id) == (agent, status), timeout=timeout,
                   message=f"pane {pane_id} to be {agent}/{status}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; it is {pane_agent(api, pane_id)}") from None
    return time.monotonic() - started
