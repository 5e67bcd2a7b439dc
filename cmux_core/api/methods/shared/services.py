"""The services most families that make and show things use, as one base for their
contexts; each module still declares its own context type, which the composition root
builds and binds."""

from __future__ import annotations

from dataclasses import dataclass

from cmux_core.agents.tracker import AgentTracker
from cmux_core.config import Settings
from cmux_core.model.mux import Mux


@dataclass(frozen=True, slots=True)
class ModelServices:
    """The model, the agents' state (rows show it), and the settings (creation focus)."""

    mux: Mux
    agents: AgentTracker
    settings: Settings
