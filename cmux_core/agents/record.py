"""What the tracker keeps for one terminal surface: its :class:`AgentRecord`, and the status words
(the state itself is :data:`cmux_core.detect.manifest.AgentState`).

The record is plain data, created and changed only by
:class:`~cmux_core.agents.tracker.AgentTracker` on the event loop; the rules that move it are
the tracker's and :mod:`cmux_core.agents.authority`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from cmux_core.agents.authority import HookAuthority, ScreenReport, SessionRef
from cmux_core.agents.launch import Launch
from cmux_core.agents.metadata import MetadataStore, PresentationEntry
from cmux_core.detect.manifest import AgentState

__all__ = ["ATTENTION", "AgentRecord", "AgentStatus", "IgnoredReport", "StatusSource"]

AgentStatus = Literal[AgentState, "done"]
StatusSource = Literal["none", "hook", "screen", "process_exit", "release"]

ATTENTION: dict[str, int] = {"blocked": 4, "done": 3, "working": 2, "idle": 1, "unknown": 0}
"""Rollup priority: the terminal needing the most attention speaks for its tab and workspace."""


@dataclass(frozen=True, slots=True)
class IgnoredReport:
    """A hook report the tracker answered ``ok`` to but did not apply, and why."""

    method: str
    source: str
    agent: str | None
    reason: str
    at: float
    """Wall-clock time of the report (seconds since the epoch)."""


@dataclass(eq=False)
class AgentRecord:
    """Agent state of one terminal surface."""

    detected: str | None = None
    screen: ScreenReport | None = None
    name: str | None = None
    state: AgentState = "unknown"
    seen: bool = True
    state_change_seq: int = 0
    state_agent: str | None = None
    status_source: StatusSource = "none"
    status_source_detail: str | None = None
    status_changed_at: float = 0.0
    authority: HookAuthority | None = None
    session: SessionRef | None = None
    hook_seqs: dict[str, int] = field(default_factory=dict)
    unsequenced_sources: set[str] = field(default_factory=set)
    cleared_lifecycle: dict[str, SessionRef | None] = field(default_factory=dict)
    exited_agent: str | None = None
    suppressed: dict[str, float] = field(default_factory=dict)
    metadata: MetadataStore = field(default_factory=MetadataStore)
    presentation: dict[str, PresentationEntry] = field(default_factory=dict)
    launch: Launch | None = None
    authority_recheck: float | None = None
    """When the authority's state may next change on its own (a TTL, a confirmation)."""
    last_ignored: IgnoredReport | None = None
    """The latest hook report about this terminal that was not applied."""

    @property
    def status(self) -> AgentStatus:
        if self.state == "idle" and not self.seen:
            return "done"
        return self.state

    def hook_seq_refusal(self, source: str, seq: int | None) -> str | None:
        """Hook ordering per source: sequenced reports must increase; once a source has
        sent one, its unsequenced reports are ignored. None when accepted (the seq is
        recorded), else why the report is out of order."""
        last = self.hook_seqs.get(source)
        if seq is None:
            return None if last is None else (
                f"unsequenced report after source {source!r} sent seq {last}")
        if last is not None and seq <= last:
            return f"stale seq {seq}: source {source!r} is at seq {last}"
        self.hook_seqs[source] = seq
        return None
