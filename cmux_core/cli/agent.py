"""``cmux agent`` commands: list, inspect, start, prompt and wait for agents.

::

    cmux agent start builder --cwd ~/repo -- claude
    cmux agent prompt builder "run the tests and fix what fails" --wait --timeout 900
    cmux agent wait builder --until blocked done
    cmux agent list

Targets are a terminal id, a pane id, an agent name or an agent label. ``start`` prints
the new pane's id; ``prompt`` prints the status once the agent took the prompt (with
``--wait``, the status reached) and ``wait`` the status reached; ``--json``
prints the raw result everywhere. ``agent explain`` is added to the group by
:mod:`cmux_core.cli.manifests`, beside the other detection tools.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from cmux_core.cli.common import (
    ENV,
    LINES,
    TIMEOUT,
    AddCommon,
    Command,
    Result,
    add_group,
    arg,
    fields,
    seconds_to_ms,
    show_key,
    show_text,
    source_arg,
    table,
    text_arg,
)

STATUSES = ("idle", "working", "blocked", "done", "unknown")
TARGET = arg("target", help="terminal id, pane id, agent name or agent label")
UNTIL = arg("--until", nargs="+", choices=STATUSES, metavar="STATUS",
            help="statuses to wait for (default: idle done blocked)")


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
    merged = [("MACHINE", lambda a: a.get("machine"))] if "unreachable" in r else []
    table(r["agents"], [
        *merged,
        ("NAME", lambda a: a.get("name")),
        ("AGENT", lambda a: a.get("display_agent") or a.get("agent")),
        ("STATUS", lambda a: a["agent_status"]),
        ("FOR", lambda a: since(a.get("status_changed_at"))),
        ("BY", provenance),
        ("PANE", lambda a: a["pane_id"] + (" (tab)" if a.get("shown") is False else "")),
        ("TITLE", lambda a: a.get("title") or a.get("terminal_title_stripped")),
    ])
    for down in r.get("unreachable", []):
        print(f"{down['machine']}: {down['code']}: {down['message']}")


def list_params(ns: argparse.Namespace) -> Result:
    if ns.machines is None:
        return {}
    names = ns.machines.split(",")
    return {"machines": names[0] if ns.machines == "all" else names}


def show_agent(r: Result) -> None:
    fields(r["agent"])


def show_status(r: Result) -> None:
    print(r["agent"]["agent_status"])


def start_params(ns: argparse.Namespace) -> Result:
    return {"name": ns.name, "argv": ns.argv, "workspace_id": ns.workspace_id,
            "tab_id": ns.tab_id, "cwd": ns.cwd, "location": ns.location, "split": ns.split,
            "focus": ns.focus, "env": ns.env}


def prompt_params(ns: argparse.Namespace) -> Result:
    params: Result = {"target": ns.target, "text": text_arg(ns.text)}
    if ns.wait or ns.until or ns.timeout is not None:
        params["wait"] = {"until": ns.until or [], "timeout_ms": seconds_to_ms(ns.timeout)}
    return params


def wait_params(ns: argparse.Namespace) -> Result:
    return {"target": ns.target, "until": ns.until or [], "timeout_ms": seconds_to_ms(ns.timeout)}


COMMANDS = [
    Command("list", "agent.list", "list agents with status, provenance and time in state",
            (arg("--machines", metavar="all|NAME,...", help="also the agents of these saved "
                 "machines (local for this one), or all: every enabled machine and this"),),
            show_agents, params=list_params),
    Command("get", "agent.get", "show one agent", (TARGET,), show_agent),
    Command("read", "agent.read", "print an agent's screen or recent output",
            (TARGET, source_arg("visible"), LINES,
             arg("--ansi", dest="format", action="store_const", const="ansi",
                 help="keep colours and attributes as escape sequences")),
            show_text, params=lambda ns: {"target": ns.target, "source": ns.source or "visible",
                                          "lines": ns.lines, "format": ns.format}),
    Command("start", "agent.start", "start a named agent in a new split (prints its pane id)",
            (arg("name", metavar="NAME", help="unique name: a-z, then a-z 0-9 _ - (at most 32)"),
             arg("--workspace", dest="workspace_id", metavar="WORKSPACE",
                 help="split the focused pane of this workspace's active tab (default: "
                      "the active workspace)"),
             arg("--tab", dest="tab_id", metavar="TAB",
                 help="split the focused pane of this tab"),
             arg("--cwd", metavar="DIR", help="working directory, an existing absolute path "
                 "or ~/... (default: the split pane's)"),
             arg("--location", metavar="DIR", help="the same as --cwd; give one of them"),
             arg("--split", choices=["right", "down"], default="right",
                 help="where the agent's pane goes beside the split one (default right)"),
             arg("--focus", action="store_true", help="focus the agent's pane"), ENV,
             arg("argv", nargs="+", metavar="-- ARGV", help="the agent's command line")),
            show_key("agent", "pane_id"), params=start_params),
    Command("focus", "agent.focus", "focus an agent's pane and mark it seen", (TARGET,),
            show_key("agent", "pane_id")),
    Command("rename", "agent.rename", "set or (without NAME) clear an agent's name",
            (TARGET, arg("name", nargs="?", help="the new name (a-z, then a-z 0-9 _ -)")),
            show_key("agent", "pane_id")),
    Command("send-keys", "agent.send_keys", "send key combos to an agent",
            (TARGET, arg("keys", nargs="+", metavar="KEY",
                         help="a key or combo: enter, tab, esc, up, ctrl+c, alt+x, ..."))),
    Command("prompt", "agent.prompt", "submit a prompt and print the status it led to; with "
            "--wait, the status reached",
            (TARGET, arg("text", help="prompt text, or - for standard input"),
             arg("--wait", action="store_true", help="wait until the agent is done with it"),
             UNTIL, TIMEOUT),
            show_status, params=prompt_params),
    Command("wait", "agent.wait", "wait for an agent's status and print it",
            (TARGET, UNTIL, TIMEOUT), show_status, params=wait_params),
]


def add_agent_commands(sub: Any, add_common: AddCommon) -> Any:
    """Add the ``agent`` group to ``sub``; returns its subparsers."""
    return add_group(sub, "agent", "start, prompt, wait for and inspect agents", COMMANDS,
                     add_common)
