"""Agent targets: what ``agent.get``, ``agent.wait``, ``agent.prompt`` and the other
``agent.*`` methods name, resolved to one agent terminal (a terminal surface).

Every agent terminal is a target, those in a pane's background tabs included. Runs on the
event loop; reads the tracker, changes nothing.
"""

from __future__ import annotations

from typing import Any

from cmux_core.agents.tracker import AgentTracker
from cmux_core.errors import CmuxError
from cmux_core.model.tree import Surface

__all__ = ["resolve_agent_target"]


def resolve_agent_target(tracker: AgentTracker, text: str) -> Surface:
    """Resolve an agent target to its terminal surface: a terminal id, a surface handle
    (uuid or ``surface:N``), a pane id (the terminal it shows), then an agent name or
    label.

    Raises ``agent_not_found`` or ``agent_target_ambiguous`` (``data.candidates``: one
    summary per terminal).
    """
    mux = tracker.mux
    target = text.strip()
    agents = tracker.agent_surfaces()
    found = [s for s in agents if s.terminal.id == target]
    if not found and target:
        surface = mux.find_surface(target)
        # Named by its own uuid or ref (a pane's handle finds the pane's selected one).
        if surface is not None and target.upper() in (surface.uuid, surface.ref.upper()):
            found = [s for s in agents if s is surface]
        if not found:
            pane = mux.find_pane(target)
            if pane is not None and tracker.is_agent(pane):
                return pane.terminal_surface
    if not found:
        found = [s for s in agents if tracker.record(s).name == target]
        if not found:
            found = [s for s in agents if tracker.effective_agent(s) == target]
    if len(found) == 1:
        return found[0]
    if not found:
        raise CmuxError("agent_not_found", f"agent target {text} not found")
    candidates = [_candidate(tracker, s) for s in found]
    listed = "; ".join(" ".join(f"{k}={v}" for k, v in c.items()) for c in candidates)
    raise CmuxError("agent_target_ambiguous", f"agent target {text} is ambiguous: {listed}",
                    {"candidates": candidates})


def _candidate(tracker: AgentTracker, s: Surface) -> dict[str, Any]:
    pane = s.pane
    return {"terminal_id": s.terminal.id, "surface_id": s.uuid, "pane_id": pane.id,
            "workspace_id": pane.tab.workspace.id, "tab_id": pane.tab.id,
            "cwd": tracker.mux.pane_cwd(pane) or "", "status": tracker.status(s)}
