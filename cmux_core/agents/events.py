"""The events the agent parts publish: detection, status, workspace metadata, manifests.

Agent detection and status come in two families. The ``surface_agent_*`` events report
every terminal surface's agent, a pane's background tabs included: they are the events
to follow one terminal by. The ``pane_agent_*`` events report a pane as the herdr family
sees it, by the terminal the pane shows: published only for that terminal's changes, and
(status) when the pane starts showing another terminal. A change of the shown terminal's
agent publishes both.

Values that describe the change (the status, the agent, the presentation) are taken when
the event is made; ids and snapshots are read from the objects when it is published
(``cmux_core.api.wire`` projects it then). ``agent_view_changed`` is
:class:`cmux_core.agents.views.AgentViewChanged`, beside the views it reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cmux_core.detect.registry import ManifestRegistry, ReloadReport
from cmux_core.events import Event, event
from cmux_core.model.tree import Pane, Surface, Workspace

__all__ = ["PaneAgentDetected", "PaneAgentStatusChanged", "ServerManifestsReloaded",
           "StatusShown", "SurfaceAgentDetected", "SurfaceAgentStatusChanged",
           "WorkspaceMetadataUpdated"]


@event("pane_agent_detected")
class PaneAgentDetected(Event):
    """The effective agent of the terminal ``pane`` shows changed to ``agent`` (None:
    none), or, with ``released``, its agent (``agent``, when known) let go of it in
    ``final_status``. ``surface`` is that terminal."""

    pane: Pane
    agent: str | None
    released: bool = False
    final_status: str | None = None
    surface: Surface | None = None


@dataclass(frozen=True, slots=True)
class StatusShown:
    """A terminal's public status and the presentation in effect with it (absent values
    None), as both status events carry them."""

    agent_status: str
    agent: str | None = None
    title: str | None = None
    display_agent: str | None = None
    state_labels: Mapping[str, str] | None = None


@event("pane_agent_status_changed")
class PaneAgentStatusChanged(Event):
    """The public status or presentation of the terminal ``pane`` shows changed, or the
    pane started showing another terminal; ``surface`` is that terminal."""

    pane: Pane
    status: StatusShown
    surface: Surface | None = None


@event("surface_agent_detected")
class SurfaceAgentDetected(Event):
    """A terminal's effective agent changed to ``agent`` (None: none), or, with
    ``released``, its agent (``agent``, when known) let go of it in ``final_status``;
    ``surface`` is the terminal, shown by its pane or in one of its background tabs."""

    surface: Surface
    agent: str | None
    released: bool = False
    final_status: str | None = None


@event("surface_agent_status_changed")
class SurfaceAgentStatusChanged(Event):
    """A terminal's public status or presentation changed; ``surface`` is the terminal,
    shown by its pane or in one of its background tabs."""

    surface: Surface
    status: StatusShown


@event("workspace_metadata_updated")
class WorkspaceMetadataUpdated(Event):
    workspace: Workspace


@event("server_manifests_reloaded")
class ServerManifestsReloaded(Event):
    """The manifests changed (``report``); the data lists ``registry``'s manifests."""

    report: ReloadReport
    registry: ManifestRegistry
