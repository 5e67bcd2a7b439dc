"""What the agent lists of ``cmux agents`` (:mod:`~cmux_core.cli.sidebar`) and ``cmux ui``
(:mod:`~cmux_core.cli.ui`) share: the view they follow, the events that change the list, how
a row's status and its time in that status are shown, and the fleet in them
(``--machines``): which machines are shown, with their state, and the agents grouped under
each."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from cmux_core.client import Client
from cmux_core.errors import CmuxError

Row = Mapping[str, Any]
Machines = str | list[str] | None
"""The ``machines`` of ``agent.list``: None for this machine alone."""

DEFAULT_CLIENT = "sidebar"
"""The client whose view a list follows when no ``--client`` names one."""
WATCH_EVENTS = (
    "surface.agent_status_changed", "surface.agent_detected", "pane.updated", "pane.created",
    "pane.closed", "pane.exited", "pane.focused", "pane.moved", "tab.created", "tab.closed",
    "tab.renamed", "tab.moved", "tab.focused", "workspace.created", "workspace.closed",
    "workspace.renamed", "workspace.moved", "workspace.focused", "plugin.loaded",
    "plugin.unloaded",
)
"""What makes a list fetch its agents again."""
VIEW_EVENT = "agent.view_changed"
"""A change of the followed view, which redraws at once (an older server lacks it)."""

STATUS_ORDER = ("blocked", "done", "working", "idle", "unknown")
"""Most urgent first, as the counts per status are given."""
GLYPH = {"blocked": "●", "done": "✔", "idle": "○", "unknown": "·"}
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
SPIN_SECONDS = 0.1
"""How long one frame of the spinner of a working agent stays."""
MACHINE_EVENTS = ("machine.state_changed", "machine.removed")
"""Followed with ``--machines``, so a machine going offline or coming back redraws."""


def followed_view(params: dict[str, Any] | None, client: str | None) -> bool | str:
    """The ``view`` of ``agent.list``: True (the connection's own view) when ``params`` set
    one, else the view of ``client`` (default :data:`DEFAULT_CLIENT`)."""
    return True if params is not None else (client or DEFAULT_CLIENT)


def status_glyph(status: str, frame: int) -> str:
    """The spinner at ``frame`` for a working agent, else the status's glyph (``·`` for a
    status it does not know)."""
    return SPINNER[frame % len(SPINNER)] if status == "working" else GLYPH.get(status, "·")


def status_counts(rows: Iterable[Row]) -> Counter[str]:
    """How many of ``rows`` are in each status (a row without one is ``unknown``)."""
    return Counter(str(row.get("agent_status", "unknown")) for row in rows)


def age(seconds: float) -> str:
    """A compact duration: ``5s``, ``2m05s``, ``1h02m``, ``3d04h``."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def next_tick(rows: Iterable[Row]) -> float:
    """Seconds until the list is drawn again for the clock alone: a spinner frame while an
    agent works, else until the next whole second (the times in status change)."""
    working = any(row.get("agent_status") == "working" for row in rows)
    return SPIN_SECONDS if working else 1.0 - time.time() % 1.0


# -- the fleet -------------------------------------------------------------------------------


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
