"""The fleet in the agent lists of ``cmux agents`` and ``cmux ui`` (``--machines``): which
machines are shown, with their state, and the agents grouped under each."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cmux_core.client import Client
from cmux_core.errors import CmuxError

Row = Mapping[str, Any]
Machines = str | list[str] | None
"""The ``machines`` of ``agent.list``: None for this machine alone."""

MACHINE_EVENTS = ("machine.state_changed", "machine.removed")
"""Followed with ``--machines``, so a machine going offline or coming back redraws."""


def machines_param(machines: Machines) -> dict[str, Any]:
    """The ``machines`` param of ``agent.list``: left out for this machine alone."""
    return {} if machines is None else {"machines": machines}


def machine_list(path: str) -> Mapping[str, Any]:
    """``machine.list`` of the server at ``path``, asked on a connection of its own."""
    with Client(path) as client:
        return client.call("machine.list")


def machine_up(machine: Mapping[str, Any]) -> bool:
    """Whether the agents of ``machine`` are shown live: it is this one or connected."""
    return machine.get("state") in ("connected", "local")


def shown_machines(machines: str | list[str], listed: Mapping[str, Any]
                   ) -> list[Mapping[str, Any]]:
    """The machines a ``machines`` param shows, in order, each with its state: this one
    first when named (``all`` names it and every enabled machine)."""
    saved = [m for m in listed.get("machines", []) if isinstance(m, Mapping)]
    names = machines if isinstance(machines, list) else (
        ["local", *[str(m["name"]) for m in saved if m.get("enabled", True)]]
        if machines == "all" else [machines])
    by_name = {str(m["name"]): m for m in saved}
    shown: list[Mapping[str, Any]] = []
    for name in names:
        if name == "local":
            shown.append({"name": "local", "state": "local", "reason": "this machine"})
        elif name in by_name:
            shown.append(by_name[name])
    return shown


def machine_groups(rows: Sequence[Row], machines: Sequence[Mapping[str, Any]]
                   ) -> list[tuple[Mapping[str, Any], list[Row]]]:
    """``rows`` grouped under each of ``machines`` (in their order; a machine with no row
    still has its group), then any row whose machine is not among them."""
    groups: dict[str, tuple[Mapping[str, Any], list[Row]]] = {
        str(m["name"]): (m, []) for m in machines}
    for row in rows:
        name = str(row.get("machine", "local"))
        if name not in groups:
            groups[name] = ({"name": name, "state": "unknown", "reason": ""}, [])
        groups[name][1].append(row)
    return list(groups.values())


def machine_heading(machine: Mapping[str, Any], count: int) -> str:
    """``box · connected · 2 agents``; a machine that is not connected says why."""
    text = f"{machine.get('name')} · {machine.get('state', '')}"
    if not machine_up(machine) and machine.get("reason"):
        text += f" ({machine['reason']})"
    return text + f" · {count} agent{'s' if count != 1 else ''}"


def machines_option(text: str | None, listed: Callable[[], Mapping[str, Any]]) -> Machines:
    """What ``--machines`` asks for: ``all`` or the names given; ``local`` for this machine
    alone (None); not given: ``all`` when a saved machine is enabled (``listed`` returns
    ``machine.list``; a server that cannot answer it has no fleet), else None."""
    if text == "local":
        return None
    if text:
        return "all" if text == "all" else text.split(",")
    try:
        saved = listed().get("machines", [])
    except (CmuxError, OSError, TimeoutError):  # an older server, or none: no fleet to show
        return None
    return "all" if any(isinstance(m, Mapping) and m.get("enabled", True)
                        for m in saved) else None
