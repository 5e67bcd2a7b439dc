"""``cmux agent`` commands: list, inspect, start, prompt and wait for agents.

::

    cmux agent start builder --cwd ~/repo -- claude --no-tips
    cmux agent prompt builder "run the tests and fix what fails" --wait --timeout 900
    cmux agent wait builder --until blocked done
    cmux agent list

Targets are a terminal id, a pane id, an agent name or an agent label. ``start`` prints
the new pane's id; ``prompt --wait`` and ``wait`` print the status reached; ``--json``
prints the raw result everywhere.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from cmux_core.cli.commands import (
    ENV,
    LINES,
    SOURCE,
    Command,
    Result,
    add_command,
    arg,
    fields,
    show_key,
    show_text,
    table,
    text_arg,
)

STATUSES = ("idle", "working", "blocked", "done", "unknown")
TARGET = arg("target", help="terminal id, pane id, agent name or agent label")
UNTIL = arg("--until", nargs="+", choices=STATUSES, metavar="STATUS",
            help="statuses to wait for (default: idle done blocked)")
TIMEOUT = arg("--timeout", type=float, help="seconds (default: forever)")


def since(changed_at: object) -> str:
    """How long ago a unix time was, as ``42s``, ``7m`` or ``3h``."""
    if not isinstance(changed_at, int | float) or not changed_at:
        return ""
    age = max(time.time() - changed_at, 0)
    if age < 60:
        return f"{age:.0f}s"
    if age < 3600:
        return f"{age / 60:.0f}m"
    return f"{age / 3600:.0f}h"


def provenance(a: Result) -> str:
    source = a.get("status_source") or ""
    detail = a.get("status_source_detail")
    return f"{source}:{detail}" if detail and source == "hook" else source


def show_agents(r: Result) -> None:
    table(r["agents"], [
        ("NAME", lambda a: a.get("name")),
        ("AGENT", lambda a: a.get("display_agent") or a.get("agent")),
        ("STATUS", lambda a: a["agent_status"]),
        ("FOR", lambda a: since(a.get("status_changed_at"))),
        ("BY", provenance),
        ("PANE", lambda a: a["pane_id"]),
        ("TITLE", lambda a: a.get("title") or a.get("terminal_title_stripped")),
    ])


def show_agent(r: Result) -> None:
    fields(r["agent"])


def show_status(r: Result) -> None:
    print(r["agent"]["agent_status"])


def timeout_ms(ns: argparse.Namespace) -> int | None:
    return None if ns.timeout is None else round(ns.timeout * 1000)


def start_params(ns: argparse.Namespace) -> Result:
    return {"name": ns.name, "argv": ns.argv, "workspace_id": ns.workspace_id,
            "tab_id": ns.tab_id, "cwd": ns.cwd, "location": ns.location, "split": ns.split,
            "focus": ns.focus, "env": ns.env}


def prompt_params(ns: argparse.Namespace) -> Result:
    params: Result = {"target": ns.target, "text": text_arg(ns.text)}
    if ns.wait or ns.until or ns.timeout is not None:
        params["wait"] = {"until": ns.until or [], "timeout_ms": timeout_ms(ns)}
    return params


def wait_params(ns: argparse.Namespace) -> Result:
    return {"target": ns.target, "until": ns.until or [], "timeout_ms": timeout_ms(ns)}


COMMANDS = [
    Command("list", "agent.list", "list agents with status, provenance and time in state",
            render=show_agents),
    Command("get", "agent.get", "show one agent", (TARGET,), show_agent),
    Command("read", "agent.read", "print an agent's screen or recent output",
            (TARGET, SOURCE, LINES,
             arg("--ansi", dest="format", action="store_const", const="ansi",
                 help="keep colours and attributes as escape sequences")),
            show_text, params=lambda ns: {"target": ns.target, "source": ns.source or "visible",
                                          "lines": ns.lines, "format": ns.format}),
    Command("start", "agent.start", "start a named agent in a new split (prints its pane id)",
            (arg("name", help="unique name: a-z, then a-z 0-9 _ - (at most 32)"),
             arg("--workspace", dest="workspace_id", metavar="WORKSPACE"),
             arg("--tab", dest="tab_id", metavar="TAB"),
             arg("--cwd"), arg("--location"),
             arg("--split", choices=["right", "down"], default="right"),
             arg("--focus", action="store_true"), ENV,
             arg("argv", nargs="+", metavar="-- ARGV", help="the agent's command line")),
            show_key("agent", "pane_id"), params=start_params),
    Command("focus", "agent.focus", "focus an agent's pane and mark it seen", (TARGET,),
            show_key("agent", "pane_id")),
    Command("rename", "agent.rename", "set or (without NAME) clear an agent's name",
            (TARGET, arg("name", nargs="?")), show_key("agent", "pane_id")),
    Command("send-keys", "agent.send_keys", "send key combos to an agent",
            (TARGET, arg("keys", nargs="+", metavar="KEY"))),
    Command("prompt", "agent.prompt", "submit a prompt; with --wait print the status reached",
            (TARGET, arg("text", help="prompt text, or - for standard input"),
             arg("--wait", action="store_true", help="wait until the agent is done with it"),
             UNTIL, TIMEOUT),
            show_status, params=prompt_params),
    Command("wait", "agent.wait", "wait for an agent's status and print it",
            (TARGET, UNTIL, TIMEOUT), show_status, params=wait_params),
]


def add_agent_commands(sub: Any, add_common: Callable[[argparse.ArgumentParser], None]
                       ) -> None:
    """Add the ``agent`` group (and ``explain`` when detection provides it) to ``sub``."""
    parser = sub.add_parser("agent", help="start, prompt, wait for and inspect agents",
                            description="Start, prompt, wait for and inspect agents.")
    inner = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    for cmd in COMMANDS:
        add_command(inner, cmd, add_common)
    try:
        from cmux_core.cli.manifests import add_explain_command
    except ImportError:
        return
    add_explain_command(inner, add_common)
