"""The context most families that make and show things need, as one base: each of those
modules subclasses it as its own context type, so the composition root still binds one
context per module."""

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
