"""Publishing what changed in a terminal's agent record, as the events of
:mod:`cmux_core.agents.events`.

:class:`AgentPublisher` is the tracker's: the tracker takes a :class:`Snapshot` of a
terminal before a change and hands it back after; the publisher compares and publishes
``surface_agent_detected`` (effective agent changed, or a release) and
``surface_agent_status_changed`` (status or presentation changed) for every terminal,
``pane_agent_detected`` and ``pane_agent_status_changed`` (the same) only for the terminal
its pane shows, and ``pane_updated`` (tokens, name, revision or launch readiness changed).
It also follows which terminal each pane shows: a pane that starts showing another
terminal publishes that terminal's status as ``pane_agent_status_changed``, after its
agent as ``pane_agent_detected`` when that differs from the previous one's, and after a
release (``pane_agent_detected`` with ``released``) of the previous one's agent when that
terminal was closed. Runs on the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from cmux_core.agents.events import (
    PaneAgentDetected,
    PaneAgentStatusChanged,
    StatusShown,
    SurfaceAgentDetected,
    SurfaceAgentStatusChanged,
)
from cmux_core.agents.record import AgentRecord, AgentStatus
from cmux_core.events import EventHub
from cmux_core.model.events import PaneUpdated
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Pane, Surface

__all__ = ["AgentPublisher", "AgentReader", "Snapshot"]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the events compare of one terminal's record, before and after a change."""

    agent: str | None
    status: AgentStatus
    presentation: tuple[tuple[str, Any], ...]
    revision: int
    name: str | None
    launch: tuple[bool, bool]


class AgentReader(Protocol):
    """The derived values the publisher reads (the tracker's)."""

    def effective_agent(self, target: Surface) -> str | None: ...

    def status(self, target: Surface) -> AgentStatus: ...

    def presentation(self, target: Surface, now: float | None = None) -> dict[str, Any]: ...

    def live(self, s: Surface) -> bool: ...


class AgentPublisher:
    """Publishes one terminal's changes on ``events``, reading values from ``reader``."""

    def __init__(self, mux: Mux, events: EventHub, reader: AgentReader,
                 surfaces: dict[str, Surface]) -> None:
        self.mux = mux
        self.events = events
        self.reader = reader
        self.surfaces = surfaces
        """The tracker's surfaces by uuid (to find the terminal a pane showed before)."""
        self._shown: dict[str, str] = {}
        """The terminal surface each pane showed at its last update, by pane key."""

    def snapshot(self, s: Surface, rec: AgentRecord, now: float | None = None) -> Snapshot:
        pres = self.reader.presentation(s, now)
        launch = rec.launch
        return Snapshot(self.reader.effective_agent(s), rec.status,
                        tuple(sorted((k, str(v)) for k, v in pres.items())),
                        rec.metadata.revision, rec.name,
                        (launch is not None and launch.pending,
                         launch is not None and launch.ready))

    def status_shown(self, s: Surface) -> StatusShown:
        """The terminal's status and presentation as they are now."""
        pres = self.reader.presentation(s)
        return StatusShown(self.reader.status(s), self.reader.effective_agent(s),
                           pres.get("title"), pres.get("display_agent"), pres.get("state_labels"))

    def status_event(self, s: Surface) -> PaneAgentStatusChanged:
        """``pane_agent_status_changed`` for the terminal as it is now."""
        return PaneAgentStatusChanged(s.pane, self.status_shown(s), surface=s)

    def publish(self, s: Surface, rec: AgentRecord, before: Snapshot, *,
                released: str | None = None, final_status: AgentStatus | None = None,
                force_update: bool = False) -> None:
        """Publish what changed since ``before``: detection, status, pane updates. The
        surface events go out for every terminal, the pane events (the herdr family's
        view of the pane) only for the terminal its pane shows."""
        after = self.snapshot(s, rec)
        shown = s.pane.terminal_surface is s
        if released is not None:
            self.events.publish(SurfaceAgentDetected(s, released or None, released=True,
                                                     final_status=final_status))
            if shown:
                self.events.publish(PaneAgentDetected(s.pane, released or None, released=True,
                                                      final_status=final_status, surface=s))
        elif after.agent != before.agent:
            self.events.publish(SurfaceAgentDetected(s, after.agent))
            if shown:
                self.events.publish(PaneAgentDetected(s.pane, after.agent, surface=s))
        if (after.status, after.presentation, after.agent) != (
                before.status, before.presentation, before.agent):
            status = self.status_shown(s)
            self.events.publish(SurfaceAgentStatusChanged(s, status))
            if shown:
                self.events.publish(PaneAgentStatusChanged(s.pane, status, surface=s))
        if force_update or (after.revision, after.name, after.launch) != (
                before.revision, before.name, before.launch):
            self.events.publish(PaneUpdated(s.pane))

    def shown_changed(self, pane: Pane) -> None:
        """The pane shows another terminal: its herdr-family agent (when it differs from
        the one shown before) and status are now that one's. When the terminal shown
        before was closed with an agent, that agent is first released (its
        ``final_status`` the status it had), as an agent that exits is; ``pane_updated``
        handlers call this before the tracker forgets the closed terminal's record."""
        if pane.key not in self.mux.panes or pane.selected is None:
            return
        shown = pane.terminal_surface
        before = self._shown.get(pane.key)
        self._shown[pane.key] = shown.uuid
        if before is None or before == shown.uuid:
            return
        agent = self.reader.effective_agent(shown)
        previous = self.surfaces.get(before)
        was = self.reader.effective_agent(previous) if previous is not None else None
        if previous is not None and was is not None and not self.reader.live(previous):
            # The shown terminal closed with its agent: released, as when the agent exits.
            self.events.publish(PaneAgentDetected(pane, was, released=True, surface=previous,
                                                  final_status=self.reader.status(previous)))
            was = None
        if agent != was:
            self.events.publish(PaneAgentDetected(pane, agent, surface=shown))
        self.events.publish(self.status_event(shown))

    def pane_closed(self, pane: Pane) -> None:
        self._shown.pop(pane.key, None)
