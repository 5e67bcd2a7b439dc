"""The events the fleet publishes about its machines (``machine.state_changed``,
``machine.removed``), so clients and plugins see a machine come and go without polling.

Each carries its wire data as plain values (:meth:`to_wire`), read when the change happened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from cmux_core.events import Event

__all__ = ["MachineRemoved", "MachineStateChanged"]


@dataclass(frozen=True, slots=True)
class MachineStateChanged(Event):
    """Machine ``machine``'s link went from ``previous`` (None: the machine is new) to
    ``state``, for ``reason``; ``ssh_error`` is the last line ssh wrote on stderr."""

    kind: ClassVar[str] = "machine_state_changed"
    machine: str
    state: str
    previous: str | None
    reason: str
    ssh_error: str
    connects: int
    since: float

    def to_wire(self) -> dict[str, Any]:
        return {"machine": self.machine, "state": self.state, "previous": self.previous,
                "reason": self.reason, "ssh_error": self.ssh_error,
                "connects": self.connects, "since": self.since}


@dataclass(frozen=True, slots=True)
class MachineRemoved(Event):
    """Machine ``machine`` is no longer saved: removed, or renamed to ``new_name``."""

    kind: ClassVar[str] = "machine_removed"
    machine: str
    new_name: str | None = None

    def to_wire(self) -> dict[str, Any]:
        return {"machine": self.machine, "new_name": self.new_name}
