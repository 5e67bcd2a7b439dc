"""Per-pane agent state: who the agent is, its effective status, seen/done, events.

Detection (``cmux_core.detect``) feeds two kinds of observation in:
:meth:`AgentTracker.set_detected` when process identification finds (or loses)
an agent, and :meth:`AgentTracker.publish_screen` with each published screen
classification. The tracker turns them into the effective state
(``idle``/``working``/``blocked``/``unknown``), the public status (adding ``done``
= idle and not yet seen), a global ``state_change_seq``, and the events
``pane_agent_detected`` and ``pane_agent_status_changed``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .events import EventHub
    from .mux import Mux, Pane, Tab

AgentState = Literal["idle", "working", "blocked", "unknown"]
AgentStatus = Literal["idle", "working", "blocked", "done", "unknown"]

ATTENTION: dict[str, int] = {"blocked": 4, "done": 3, "working": 2, "idle": 1, "unknown": 0}
"""Rollup priority: the pane needing the most attention speaks for its tab and workspace."""


@dataclass(slots=True)
class ScreenReport:
    """One published screen classification (detection's fallback state) and its evidence."""

    state: AgentState
    visible_idle: bool = False
    visible_blocker: bool = False
    visible_working: bool = False
    process_exited: bool = False
    matched_rule: str | None = None
    at: float = field(default_factory=time.monotonic)


@dataclass(eq=False)
class AgentRecord:
    """Agent state of one pane's terminal."""

    detected: str | None = None
    screen: ScreenReport | None = None
    name: str | None = None
    state: AgentState = "unknown"
    seen: bool = True
    state_change_seq: int = 0
    status_source: str = "none"
    status_changed_at: float = 0.0

    @property
    def status(self) -> AgentStatus:
        if self.state == "idle" and not self.seen:
            return "done"
        return self.state


class AgentTracker:
    """Owns every pane's :class:`AgentRecord`; all calls run on the event loop."""

    def __init__(self, mux: Mux, events: EventHub) -> None:
        self.mux = mux
        self.events = events
        self.records: dict[str, AgentRecord] = {}
        self.next_state_change_seq = 0

    def record(self, pane: Pane) -> AgentRecord:
        rec = self.records.get(pane.key)
        if rec is None:
            rec = self.records[pane.key] = AgentRecord()
        return rec

    def forget(self, pane: Pane) -> None:
        self.records.pop(pane.key, None)

    # -- observations from detection ----------------------------------------------------

    def set_detected(self, pane: Pane, label: str | None) -> None:
        """Process identification found ``label`` (canonical manifest id) or nothing."""
        rec = self.record(pane)
        if rec.detected == label:
            return
        previous = self.effective_agent(pane)
        rec.detected = label
        if label is None:
            rec.screen = None
            self._set_state(pane, rec, "unknown", "process")
        current = self.effective_agent(pane)
        if current != previous:
            data: dict[str, Any] = {"pane_id": pane.id, "workspace_id": pane.tab.workspace.id}
            if current is not None:
                data["agent"] = current
            self.events.publish("pane_agent_detected", data)
            self._status_changed(pane, rec)

    def publish_screen(self, pane: Pane, report: ScreenReport) -> None:
        """A screen classification for the pane's agent (the fallback state)."""
        rec = self.record(pane)
        rec.screen = report
        if not self.screen_detection_skipped(pane):
            source = "process_exit" if report.process_exited else "screen"
            self._set_state(pane, rec, report.state, source)

    def screen_detection_skipped(self, pane: Pane) -> bool:
        """True while something with more authority than the screen owns the state."""
        return False

    # -- derived values -------------------------------------------------------------------

    def effective_agent(self, pane: Pane) -> str | None:
        return self.record(pane).detected

    def is_agent(self, pane: Pane) -> bool:
        rec = self.record(pane)
        return rec.name is not None or self.effective_agent(pane) is not None

    def status(self, pane: Pane) -> AgentStatus:
        return self.record(pane).status

    def rollup(self, panes: list[Pane]) -> AgentStatus:
        best: AgentStatus = "unknown"
        for pane in panes:
            status = self.status(pane)
            if ATTENTION[status] > ATTENTION[best]:
                best = status
        return best

    def pane_fields(self, pane: Pane) -> dict[str, Any]:
        """Agent fields of PaneInfo (omitted when empty)."""
        out: dict[str, Any] = {"agent_status": self.status(pane)}
        agent = self.effective_agent(pane)
        if agent is not None:
            out["agent"] = agent
        return out

    # -- seen / done ----------------------------------------------------------------------

    def mark_tab_seen(self, tab: Tab) -> None:
        """The user looked at ``tab``: every ``done`` pane in it becomes ``idle``."""
        for pane in self.mux.tab_panes(tab):
            rec = self.record(pane)
            if not rec.seen:
                rec.seen = True
                self._status_changed(pane, rec)

    # -- internals ----------------------------------------------------------------------

    def _set_state(self, pane: Pane, rec: AgentRecord, state: AgentState, source: str) -> None:
        if state == rec.state:
            return
        previous = rec.state
        if state != "idle":
            rec.seen = True
        elif previous in ("working", "blocked"):
            rec.seen = self._in_view(pane)
        rec.state = state
        rec.status_source = source
        rec.status_changed_at = time.time()
        self.next_state_change_seq += 1
        rec.state_change_seq = self.next_state_change_seq
        self._status_changed(pane, rec)

    def _in_view(self, pane: Pane) -> bool:
        ws = pane.tab.workspace
        return self.mux.active_workspace() is ws and ws.active_tab is pane.tab

    def _status_changed(self, pane: Pane, rec: AgentRecord) -> None:
        data: dict[str, Any] = {"pane_id": pane.id, "workspace_id": pane.tab.workspace.id,
                                "agent_status": rec.status}
        agent = self.effective_agent(pane)
        if agent is not None:
            data["agent"] = agent
        self.events.publish("pane_agent_status_changed", data)
