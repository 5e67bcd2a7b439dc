"""Per-terminal agent state: who the agent is, who owns its status, seen/done, metadata, events.

Every terminal surface has its own :class:`AgentRecord` (keyed by the surface's uuid): two
tabs of one pane running two agents are two records, each with its own detection, state,
authority, session reference and metadata. A record follows its surface when the surface
moves to another pane, workspace or window, and goes when the surface closes. Methods take
an :data:`AgentTarget`: a surface, or a pane standing for the terminal it shows
(:attr:`~cmux_core.model.tree.Pane.terminal_surface`), which is what the herdr family's
pane is.

Three kinds of signal feed a terminal's record:

* detection (``cmux_core.detect``): :meth:`AgentTracker.set_detected` when process
  identification finds or loses an agent, :meth:`AgentTracker.publish_screen` with each
  screen classification (the *fallback* state);
* hook reports (``pane.report_agent`` and friends): a :class:`HookAuthority` that owns the
  state while it is effective;
* the terminal's own process exiting (the ``pane_exited`` event).

Authority is data, not names: a report's ``(source, agent)`` pair is looked up among the
integrations plugins declared (:class:`SourceDeclaration`), and the rules by which a report
and the screen decide the state together are :mod:`cmux_core.agents.authority`'s
(:func:`~cmux_core.agents.authority.decide`). Every status carries its provenance: which
signal set it (``hook``, ``screen``, ``process_exit``, ``release``), its source and when.

Public status adds ``done`` (idle and not yet seen) to the state; a server-global
``state_change_seq`` numbers effective state changes. Metadata (tokens with TTLs, and
per-source presentation: title, display agent, custom status, state labels) is applied
here, for panes and workspaces, with the stores and rules of :mod:`cmux_core.agents.metadata`;
TTLs expire on time and each expiry is published.

A terminal ``agent.start`` named is followed until its agent is ready (``launch_pending``,
``interactive_ready``) by the rules of :mod:`cmux_core.agents.launch`. The record kept per
terminal is :mod:`cmux_core.agents.record`'s.

Events (typed, :mod:`cmux_core.agents.events`) are published by
:class:`~cmux_core.agents.publish.AgentPublisher` from a snapshot taken before each change
(agent, status, presentation, pane updates, the terminal a pane shows), and
``workspace_metadata_updated`` here. The composition root hands it the model's events (a
closed surface or pane is forgotten, an exited one released, a closed workspace's
metadata dropped) and its ``TabViewed`` notices (a tab the user looks at is seen). The wire
forms of panes and agents (PaneInfo's agent fields, AgentInfo) are built from the tracker
at the API edge (``cmux_core.api.wire``). All methods run on the event loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any, Literal

from cmux_core.agents.authority import (
    HERDR_DECLARATIONS,
    SHARED_BLOCKED_TTL_S,
    Authority,
    HookAuthority,
    ScreenReport,
    SessionRef,
    SourceDeclaration,
    decide,
    hook_speaks,
)
from cmux_core.agents.events import PaneAgentStatusChanged, WorkspaceMetadataUpdated
from cmux_core.agents.launch import LAUNCH_TIMEOUT_S, Launch
from cmux_core.agents.metadata import (
    ExpiryTimers,
    MetadataPatch,
    MetadataStore,
    PresentationEntry,
    deadline_after,
    effective_presentation,
)
from cmux_core.agents.publish import AgentPublisher, Snapshot
from cmux_core.agents.record import (
    ATTENTION,
    AgentRecord,
    AgentStatus,
    IgnoredReport,
    StatusSource,
)
from cmux_core.detect.manifest import AgentState
from cmux_core.errors import CmuxError
from cmux_core.events import EventHub
from cmux_core.model.events import (
    PaneClosed,
    PaneCreated,
    PaneExited,
    PaneFocused,
    PaneUpdated,
    WorkspaceClosed,
)
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Pane, Surface, Tab, Workspace

__all__ = ["REACQUIRE_SUPPRESS_S", "AgentTracker"]

log = logging.getLogger(__name__)

AgentTarget = Pane | Surface
"""What the tracker's methods take: a terminal surface, or a pane meaning the terminal it
shows (the herdr family's view of a pane)."""

REACQUIRE_SUPPRESS_S = 1.0
"""After a release, process detection of the released agent is ignored this long."""


class AgentTracker:
    """Owns every terminal surface's :class:`AgentRecord` and every workspace's metadata.

    ``canonical_agent`` maps a label to the canonical id of a known agent (or None for a
    custom label): the manifests' alias table. ``declarations`` returns the integrations'
    :class:`SourceDeclaration` list (the plugin host's).
    """

    def __init__(self, mux: Mux, events: EventHub, *,
                 canonical_agent: Callable[[str], str | None] = lambda label: None,
                 declarations: Callable[[], Iterable[SourceDeclaration]] = tuple) -> None:
        self.mux = mux
        self.events = events
        self.records: dict[str, AgentRecord] = {}
        """Agent records by terminal surface uuid."""
        self.surfaces: dict[str, Surface] = {}
        """The surface of each record, by the same key."""
        self.workspace_metadata: dict[str, MetadataStore] = {}
        self.next_state_change_seq = 0
        self.canonical_agent = canonical_agent
        self.declarations = declarations
        self._publisher = AgentPublisher(mux, events, self, self.surfaces)
        self._report_order = 0
        self._timers = ExpiryTimers(self._expire)
        self._launch_timers = ExpiryTimers(self._launch_due)

    def surface_of(self, target: AgentTarget) -> Surface:
        """The terminal surface ``target`` names: a surface itself, or for a pane the
        terminal it shows (:attr:`Pane.terminal_surface`). ``invalid_params`` for a
        markdown surface, which runs no agent."""
        if isinstance(target, Pane):
            return target.terminal_surface
        if target.term is None:
            raise CmuxError("invalid_params", "Surface is not a terminal",
                            {"surface_id": target.uuid, "type": target.kind})
        return target

    def record(self, target: AgentTarget) -> AgentRecord:
        s = self.surface_of(target)
        rec = self.records.get(s.uuid)
        if rec is None:
            rec = self.records[s.uuid] = AgentRecord()
            self.surfaces[s.uuid] = s
        return rec

    def find_record(self, target: AgentTarget) -> AgentRecord | None:
        """The record of ``target``'s terminal, None when it has none yet."""
        return self.records.get(self.surface_of(target).uuid)

    def forget(self, s: Surface) -> None:
        self.records.pop(s.uuid, None)
        self.surfaces.pop(s.uuid, None)
        self._timers.cancel(s.uuid)
        self._launch_timers.cancel(s.uuid)

    def live(self, s: Surface) -> bool:
        """Whether ``s`` is still a surface of a live pane (not closed)."""
        return self.mux.panes.get(s.pane.key) is s.pane and s in s.pane.surfaces

    # -- labels and declarations ------------------------------------------------------------

    def normalise_label(self, label: str) -> str:
        """Trimmed label, canonical when it names a known agent; ``invalid_agent`` if blank."""
        label = label.strip()
        if not label:
            raise CmuxError("invalid_agent", "agent label must not be empty")
        return self.canonical_agent(label) or label

    def canonical(self, label: str) -> str:
        label = label.strip()
        return self.canonical_agent(label) or label

    def all_declarations(self) -> list[SourceDeclaration]:
        """Plugins' declarations, then herdr's official sources (a plugin's comes first)."""
        return [*self.declarations(), *HERDR_DECLARATIONS]

    def declaration_of(self, source: str, agent: str) -> SourceDeclaration | None:
        """The declaration for ``(source, agent)``; None for custom sources."""
        for decl in self.all_declarations():
            if decl.source == source and self.canonical(decl.agent) == agent:
                return decl
        return None

    def authority_of(self, source: str, agent: str) -> Authority | None:
        """The authority declared for ``(source, agent)``; None for custom sources."""
        decl = self.declaration_of(source, agent)
        return decl.authority if decl is not None else None

    def is_declared_source(self, source: str) -> bool:
        return any(decl.source == source for decl in self.all_declarations())

    # -- observations from detection ----------------------------------------------------

    def set_detected(self, target: AgentTarget, label: str | None) -> None:
        """Process identification found ``label`` (canonical manifest id) or nothing."""
        s = self.surface_of(target)
        rec = self.record(s)
        if label is not None and rec.suppressed.get(label, 0.0) > time.monotonic():
            return
        if rec.detected == label:
            return
        before = self._snapshot(s, rec)
        rec.detected = label
        rec.exited_agent = None
        auth = rec.authority
        if (auth is not None and label is not None and label != auth.agent
                and self.canonical_agent(auth.agent) is not None):
            # The terminal now runs a different known agent than the hook claimed.
            rec.session = auth.session or rec.session
            rec.authority = None
        # A screen report speaks for the agent it was made for, never for the next one.
        rec.screen = None
        self._recompute(s, rec)
        self._emit(s, rec, before)

    def publish_screen(self, target: AgentTarget, report: ScreenReport) -> None:
        """A screen classification for the terminal's agent (the fallback state)."""
        s = self.surface_of(target)
        rec = self.record(s)
        rec.screen = report
        if report.process_exited:
            if rec.exited_agent is None:
                self._agent_exited(s, rec)
            return
        before = self._snapshot(s, rec)
        self._recompute(s, rec)
        self._emit(s, rec, before)

    def screen_detection_skipped(self, target: AgentTarget) -> bool:
        """True while a lifecycle authority owns the state (its agent process is present)."""
        s = self.surface_of(target)
        rec = self.records.get(s.uuid)
        if rec is None or rec.authority is None:
            return False
        return rec.authority.kind == "lifecycle" and self._effective(rec, rec.authority)

    # -- hook reports -------------------------------------------------------------------

    def report_agent(self, target: AgentTarget, *, source: str, agent: str, state: AgentState,
                     seq: int | None = None, message: str | None = None,
                     custom_status: str | None = None, session: SessionRef | None = None,
                     ttl_s: float | None = None, subagent: bool = False) -> bool:
        """Apply a ``pane.report_agent`` (``agent`` already normalised). True if accepted.

        Ignored (False): a subagent's report, a ``session`` source's state (only its session
        ref is kept), a report about an agent that just exited, a lifecycle report without
        its process or cleared for this session, a known label that conflicts with the
        detected process, and a stale ``seq``. ``ttl_s`` bounds how long the state counts;
        a ``shared`` ``blocked`` without one gets the declaration's or the default TTL.
        """
        s = self.surface_of(target)
        rec = self.record(s)
        method = "pane.report_agent"
        if subagent:
            return self._ignore(rec, method, source, agent,
                                "a subagent's report never moves the state", quiet=True)
        decl = self.declaration_of(source, agent)
        authority = decl.authority if decl is not None else None
        if not self.is_declared_source(source):
            session = None
        if authority == "session":
            if session is None:
                return self._ignore(rec, method, source, agent,
                                    "a session source's state is not used, and the report "
                                    "carries no valid session reference")
            if (refusal := rec.hook_seq_refusal(source, seq)) is not None:
                return self._ignore(rec, method, source, agent, refusal)
            self._store_session(s, rec, session)
            return True
        if rec.exited_agent is not None and agent == rec.exited_agent:
            return self._ignore(rec, method, source, agent, f"agent {agent!r} has exited")
        if authority == "lifecycle":
            if rec.detected != agent:
                return self._ignore(rec, method, source, agent,
                                    f"lifecycle source: agent {agent!r} is not the detected "
                                    f"process ({rec.detected or 'none'})")
            if source in rec.cleared_lifecycle:
                if session is None or session == rec.cleared_lifecycle[source]:
                    return self._ignore(rec, method, source, agent,
                                        "the authority was cleared for this session")
                del rec.cleared_lifecycle[source]
        elif (conflict := self._label_conflict(rec, agent)) is not None:
            return self._ignore(rec, method, source, agent, conflict)
        if (refusal := rec.hook_seq_refusal(source, seq)) is not None:
            return self._ignore(rec, method, source, agent, refusal)
        before = self._snapshot(s, rec)
        previous = rec.authority
        if session is None and previous is not None and previous.source == source:
            session = previous.session
        now = time.monotonic()
        if ttl_s is None and authority == "shared" and state == "blocked":
            assert decl is not None
            ttl_s = (decl.state_ttl_ms / 1000 if decl.state_ttl_ms is not None
                     else SHARED_BLOCKED_TTL_S)
        kind: Literal["lifecycle", "shared", "custom"] = (
            authority if authority == "lifecycle" or authority == "shared" else "custom")
        rec.authority = HookAuthority(
            source, agent, state, kind, message, custom_status, now, session,
            now + ttl_s if ttl_s is not None else None)
        rec.session = None
        self._recompute(s, rec)
        self._emit(s, rec, before)
        return True

    def report_session(self, target: AgentTarget, *, source: str, agent: str,
                       session: SessionRef | None, seq: int | None = None,
                       replaces: bool = False) -> bool:
        """Apply a ``pane.report_agent_session``; never changes state. True if stored.

        Only declared sources carry session refs. A different session from the same owner
        replaces the stored one only when ``replaces`` (a recognised start source).
        """
        s = self.surface_of(target)
        rec = self.record(s)
        method = "pane.report_agent_session"
        if not self.is_declared_source(source):
            return self._ignore(rec, method, source, agent,
                                "the source is not declared by any integration; only "
                                "declared sources carry session references")
        if session is None:
            return self._ignore(rec, method, source, agent,
                                "no valid agent_session_id or absolute agent_session_path")
        if (refusal := self._label_conflict(rec, agent)
                or rec.hook_seq_refusal(source, seq)) is not None:
            return self._ignore(rec, method, source, agent, refusal)
        current = self._session(rec)
        if (current is not None and current != session and not replaces
                and (current.source, current.agent) == (session.source, session.agent)):
            return self._ignore(rec, method, source, agent,
                                "another session of this source is stored and "
                                "session_start_source does not start a new one")
        self._store_session(s, rec, session)
        return True

    def release_agent(self, target: AgentTarget, *, source: str, agent: str, seq: int | None = None
                      ) -> bool:
        """Apply a ``pane.release_agent``; declared sources are ignored. True if released."""
        s = self.surface_of(target)
        rec = self.record(s)
        method = "pane.release_agent"
        auth = rec.authority
        if self.is_declared_source(source):
            refusal: str | None = "a declared source's agent is not released by a report"
        elif auth is not None and (auth.source, auth.agent) != (source, agent):
            refusal = f"the authority is source {auth.source!r}'s, agent {auth.agent!r}"
        elif (effective := self.effective_agent(s)) != agent:
            refusal = f"the terminal's agent is {effective or 'none'}, not {agent!r}"
        else:
            refusal = rec.hook_seq_refusal(source, seq)
        if refusal is not None:
            return self._ignore(rec, method, source, agent, refusal)
        before = self._snapshot(s, rec)
        rec.authority = None
        rec.session = None
        if rec.detected == agent:
            self._recompute(s, rec)
            self._emit(s, rec, before)
            return True
        rec.detected = None
        rec.screen = None
        rec.name = None
        rec.suppressed[agent] = time.monotonic() + REACQUIRE_SUPPRESS_S
        self._set_state(s, rec, "unknown", "release", source)
        self._emit(s, rec, before, released=agent, final_status=before.status)
        return True

    def clear_authority(self, target: AgentTarget, *, source: str | None = None,
                        seq: int | None = None) -> bool:
        """Apply a ``pane.clear_agent_authority``: the state falls back to the screen.

        Whichever hook set the authority, it is dropped (seed 004: ``source`` is for
        correlation only, it does not choose what is cleared). ``seq`` orders the clear
        among the reports of ``source`` (the cleared authority's own when omitted): it
        becomes that source's latest, so a report sent before the clear and arriving after
        it is ignored. True if there was an authority to clear.
        """
        s = self.surface_of(target)
        rec = self.record(s)
        auth = rec.authority
        owner = source if source is not None else (auth.source if auth is not None else None)
        if seq is not None and owner is not None and seq > rec.hook_seqs.get(owner, -1):
            rec.hook_seqs[owner] = seq
        if auth is None:
            return False
        before = self._snapshot(s, rec)
        if auth.kind == "lifecycle":
            rec.cleared_lifecycle[auth.source] = auth.session
        rec.authority = None
        rec.session = None
        self._recompute(s, rec)
        self._emit(s, rec, before)
        return True

    # -- metadata -----------------------------------------------------------------------

    def report_metadata(self, target: AgentTarget, patch: MetadataPatch) -> bool:
        """Apply a validated pane metadata patch. True if applied (stale ``seq``: False).

        Raises ``invalid_metadata_tokens`` (more than 32 tokens would result) or
        ``metadata_sequence_source_limit`` before changing anything.
        """
        s = self.surface_of(target)
        rec = self.record(s)
        exited = rec.exited_agent
        method = "pane.report_metadata"
        if exited is not None and exited in (patch.agent, self._owner_agent(patch.source),
                                             self._owner_agent(patch.applies_to_source)):
            return self._ignore(rec, method, patch.source, patch.agent,
                                f"agent {exited!r} has exited")
        store = rec.metadata
        if not store.accept_seq(patch.source, patch.seq):
            return self._ignore(rec, method, patch.source, patch.agent,
                                f"stale seq {patch.seq}: source {patch.source!r} is at seq "
                                f"{store.seqs.get(patch.source)}")
        store.check_tokens(patch.source, patch.seq, patch.tokens, "pane")
        before = self._snapshot(s, rec)
        if patch.seq is not None:
            store.seqs[patch.source] = patch.seq
        deadline = deadline_after(patch.ttl_s)
        store.patch_tokens(patch.source, patch.seq, patch.tokens, deadline)
        self._patch_presentation(rec, patch, deadline)
        self._schedule(s.uuid)
        self._emit(s, rec, before)
        return True

    def report_workspace_metadata(self, ws: Workspace, source: str, tokens: dict[str, str | None],
                                  *, seq: int | None = None, ttl_s: float | None = None) -> bool:
        """Apply validated workspace tokens; same limits and ordering as pane tokens."""
        store = self.workspace_metadata.setdefault(ws.id, MetadataStore())
        if not store.accept_seq(source, seq):
            return False
        store.check_tokens(source, seq, tokens, "workspace")
        if seq is not None:
            store.seqs[source] = seq
        if store.patch_tokens(source, seq, tokens, deadline_after(ttl_s)):
            self.events.publish(WorkspaceMetadataUpdated(ws))
        self._schedule(ws.id)
        return True

    def set_name(self, target: AgentTarget, name: str | None) -> None:
        """Set or clear the agent name (the caller also sets the pane's manual label)."""
        s = self.surface_of(target)
        rec = self.record(s)
        before = self._snapshot(s, rec)
        rec.name = name
        self._emit(s, rec, before)

    def begin_launch(self, target: AgentTarget, name: str,
                     timeout_s: float = LAUNCH_TIMEOUT_S) -> None:
        """``agent.start`` named the target terminal: set the name and follow the launch
        until it is ready (``launch_pending`` now; see :mod:`cmux_core.agents.launch`)."""
        s = self.surface_of(target)
        rec = self.record(s)
        before = self._snapshot(s, rec)
        rec.name = name
        rec.launch = Launch(time.monotonic() + timeout_s)
        self._emit(s, rec, before)

    def hook_reported(self, target: AgentTarget) -> AgentState | None:
        """The state the terminal's hook authority reported while it still counts (not
        overridden by the screen, before its deadline); None without one."""
        rec = self.records.get(self.surface_of(target).uuid)
        auth = rec.authority if rec is not None else None
        if auth is None or auth.spent or (auth.expires_at is not None
                                          and time.monotonic() >= auth.expires_at):
            return None
        return auth.state

    def launch_pending(self, target: AgentTarget) -> bool:
        """True while the target terminal is a managed launch that is not settled yet."""
        s = self.surface_of(target)
        rec = self.records.get(s.uuid)
        return rec is not None and rec.launch is not None and rec.launch.pending

    def name_taken(self, name: str, other_than: AgentTarget | None = None) -> bool:
        other = self.surface_of(other_than) if other_than is not None else None
        return any(s is not other and self.record(s).name == name
                   for s in self.agent_surfaces())

    # -- derived values -------------------------------------------------------------------

    def effective_agent(self, target: AgentTarget) -> str | None:
        s = self.surface_of(target)
        rec = self.records.get(s.uuid)
        if rec is None:
            return None
        auth = rec.authority
        if auth is not None and self._effective(rec, auth):
            return auth.agent
        if rec.detected is not None and rec.detected != rec.exited_agent:
            return rec.detected
        return None

    def is_agent(self, target: AgentTarget) -> bool:
        s = self.surface_of(target)
        rec = self.records.get(s.uuid)
        return rec is not None and (rec.name is not None or self.effective_agent(s) is not None)

    def status(self, target: AgentTarget) -> AgentStatus:
        s = self.surface_of(target)
        rec = self.records.get(s.uuid)
        return rec.status if rec is not None else "unknown"

    def rollup(self, panes: list[Pane]) -> AgentStatus:
        """The status needing the most attention among every terminal of ``panes``, the
        tabs they do not show included."""
        best: AgentStatus = "unknown"
        for pane in panes:
            for s in pane.surfaces:
                rec = self.records.get(s.uuid)
                if rec is not None and ATTENTION[rec.status] > ATTENTION[best]:
                    best = rec.status
        return best

    def presentation(self, target: AgentTarget, now: float | None = None) -> dict[str, Any]:
        """Effective presentation: newest value per field unexpired at ``now`` (default: the
        present) among sources whose guards pass; state labels merged, newer report winning
        per status."""
        s = self.surface_of(target)
        rec = self.records.get(s.uuid)
        if rec is None:
            return {}
        auth_source = rec.authority.source if rec.authority is not None else None
        fields, labels = effective_presentation(
            rec.presentation.values(), self.effective_agent(s), auth_source,
            time.monotonic() if now is None else now)
        out: dict[str, Any] = dict(fields)
        if "custom_status" not in out and rec.authority is not None \
                and rec.authority.custom_status and self._effective(rec, rec.authority):
            out["custom_status"] = rec.authority.custom_status
        if labels:
            out["state_labels"] = labels
        return out

    def session(self, target: AgentTarget) -> SessionRef | None:
        """The agent's native session reference: its authority's, else the stored one."""
        s = self.surface_of(target)
        rec = self.records.get(s.uuid)
        return self._session(rec) if rec is not None else None

    def workspace_tokens(self, ws: Workspace) -> dict[str, str]:
        store = self.workspace_metadata.get(ws.id)
        return store.token_values() if store is not None else {}

    def status_event(self, target: AgentTarget) -> PaneAgentStatusChanged:
        """``pane_agent_status_changed`` for the terminal as it is now."""
        return self._publisher.status_event(self.surface_of(target))

    def agent_surfaces(self) -> list[Surface]:
        """Every agent terminal, shown or in a pane's background tab, in workspace, tab and
        layout order; within a pane the terminal it shows first, then its other tabs in tab
        order."""
        out: list[Surface] = []
        for pane in self.mux.all_panes():
            shown = pane.terminal_surface
            out.extend(s for s in (shown, *(x for x in pane.surfaces if x is not shown))
                       if s.term is not None and self.is_agent(s))
        return out

    # -- seen / done ----------------------------------------------------------------------

    def mark_tab_seen(self, tab: Tab) -> None:
        """The user looked at ``tab``: every ``done`` terminal it shows becomes ``idle``
        (a pane's background tabs stay ``done``). A pane that now shows another terminal
        publishes that terminal's status (a focus call may have selected it)."""
        for pane in self.mux.tab_panes(tab):
            self._publisher.shown_changed(pane)
            s = pane.selected
            rec = self.records.get(s.uuid) if s is not None else None
            if s is not None and rec is not None and not rec.seen:
                before = self._snapshot(s, rec)
                rec.seen = True
                self._emit(s, rec, before)

    # -- internals ----------------------------------------------------------------------

    def _label_conflict(self, rec: AgentRecord, agent: str) -> str | None:
        """Why a report naming known agent ``agent`` cannot be about the detected process,
        or None when it can."""
        if (rec.detected is not None and self.canonical_agent(agent) is not None
                and agent != rec.detected):
            return f"agent {agent!r} conflicts with the detected process {rec.detected!r}"
        return None

    @staticmethod
    def _ignore(rec: AgentRecord, method: str, source: str, agent: str | None, reason: str,
                *, quiet: bool = False) -> bool:
        """Keep and log a report that is not applied; False, for the caller to return."""
        rec.last_ignored = IgnoredReport(method, source, agent, reason, time.time())
        log.log(logging.INFO if quiet else logging.WARNING,
                "ignored %s from source %r (agent %r): %s", method, source, agent, reason)
        return False

    def _effective(self, rec: AgentRecord, auth: HookAuthority) -> bool:
        return hook_speaks(auth, rec.detected, rec.exited_agent)

    def _recompute(self, s: Surface, rec: AgentRecord) -> None:
        """Set the state :func:`~cmux_core.agents.authority.decide` gives, and arm the timer
        for when it may change on its own (a TTL, a confirmation window)."""
        now = time.monotonic()
        decision = decide(rec.authority, rec.screen, rec.detected, rec.exited_agent, now)
        if decision.spends_report and rec.authority is not None:
            rec.authority.spent = True  # the screen overrode it: later screens decide alone
        self._set_state(s, rec, decision.state, decision.source, decision.detail)
        recheck = decision.recheck_at
        if recheck is not None and recheck <= now:
            recheck = None
        if recheck != rec.authority_recheck:
            rec.authority_recheck = recheck
            self._schedule(s.uuid)

    def _set_state(self, s: Surface, rec: AgentRecord, state: AgentState, source: StatusSource,
                   detail: str | None) -> None:
        rec.status_source = source
        rec.status_source_detail = detail
        if state == rec.state:
            return
        previous = rec.state
        agent = self.effective_agent(s)
        if state != "idle":
            rec.seen = True
        elif previous in ("working", "blocked") or (
                previous == "unknown" and agent is not None and agent == rec.state_agent):
            rec.seen = self._in_view(s)
        rec.state = state
        rec.state_agent = agent
        rec.status_changed_at = time.time()
        self.next_state_change_seq += 1
        rec.state_change_seq = self.next_state_change_seq

    def _in_view(self, s: Surface) -> bool:
        pane = s.pane
        ws = pane.tab.workspace
        return (self.mux.active_workspace() is ws and ws.active_tab is pane.tab
                and pane.selected is s)

    def _agent_exited(self, s: Surface, rec: AgentRecord) -> None:
        """The terminal's agent process ended: idle, authority and name dropped, released."""
        before = self._snapshot(s, rec)
        label = before.agent
        if label is None and rec.name is None:
            return
        auth = rec.authority
        if auth is not None and (auth.agent == label or auth.kind == "custom"):
            rec.session = auth.session or rec.session
            rec.authority = None
        rec.exited_agent = label
        rec.name = None
        for source, entry in list(rec.presentation.items()):
            if entry.agent_guard == label or self._owner_agent(source) == label:
                del rec.presentation[source]
        self._set_state(s, rec, "idle", "process_exit", label)
        self._emit(s, rec, before, released=label or "", final_status=rec.status)

    def _store_session(self, s: Surface, rec: AgentRecord, session: SessionRef) -> None:
        before = self._snapshot(s, rec)
        if rec.authority is not None and rec.authority.source == session.source:
            rec.authority.session = session
        else:
            rec.session = session
        self._emit(s, rec, before, force_update=True)

    def _session(self, rec: AgentRecord) -> SessionRef | None:
        if rec.authority is not None and rec.authority.session is not None:
            return rec.authority.session
        return rec.session

    def _owner_agent(self, source: str | None) -> str | None:
        for decl in self.declarations():
            if decl.source == source:
                return self.canonical(decl.agent)
        return None

    def _patch_presentation(self, rec: AgentRecord, patch: MetadataPatch,
                            deadline: float | None) -> None:
        if not (patch.set_fields or patch.state_labels or patch.clear_fields):
            return
        entry = rec.presentation.setdefault(patch.source, PresentationEntry())
        self._report_order += 1
        entry.apply(patch, self._report_order, deadline)
        if entry.empty():
            del rec.presentation[patch.source]

    # -- events ---------------------------------------------------------------------------

    def _snapshot(self, s: Surface, rec: AgentRecord, now: float | None = None) -> Snapshot:
        return self._publisher.snapshot(s, rec, now)

    def _emit(self, s: Surface, rec: AgentRecord, before: Snapshot, *,
              released: str | None = None, final_status: AgentStatus | None = None,
              force_update: bool = False) -> None:
        """Settle a managed launch, then publish what changed since ``before``
        (:meth:`AgentPublisher.publish`)."""
        self._settle_launch(s, rec)
        self._publisher.publish(s, rec, before, released=released, final_status=final_status,
                                force_update=force_update)

    # -- the model's events ------------------------------------------------------------------

    def pane_exited(self, event: PaneExited) -> None:
        """The process of the terminal the pane shows exited: its agent is released."""
        pane = event.pane
        s = pane.terminal_surface if pane.surfaces else None
        rec = self.records.get(s.uuid) if s is not None else None
        if (s is not None and pane.key in self.mux.panes and rec is not None
                and rec.exited_agent is None):
            self._agent_exited(s, rec)

    def pane_shown(self, event: PaneCreated | PaneFocused) -> None:
        self._publisher.shown_changed(event.pane)

    def pane_updated(self, event: PaneUpdated) -> None:
        self._publisher.shown_changed(event.pane)  # reads a closed terminal's record
        self._sweep()

    def pane_closed(self, event: PaneClosed) -> None:
        self._sweep()
        self._publisher.pane_closed(event.pane)

    def workspace_closed(self, event: WorkspaceClosed) -> None:
        ws_id = event.workspace.id
        self.workspace_metadata.pop(ws_id, None)
        self._timers.cancel(ws_id)

    def _sweep(self) -> None:
        """Forget the records of closed surfaces (a moved one keeps its record)."""
        for s in [s for s in self.surfaces.values() if not self.live(s)]:
            self.forget(s)

    # -- managed launches -------------------------------------------------------------------

    def _settle_launch(self, s: Surface, rec: AgentRecord) -> None:
        """Advance ``rec.launch`` (:meth:`Launch.advance`) and arm its timer, or forget it."""
        launch = rec.launch
        if launch is None:
            return
        gone = s.terminal.exited or rec.exited_agent is not None or not self.is_agent(s)
        due = launch.advance(time.monotonic(), gone=gone,
                             identified=self.effective_agent(s) is not None,
                             state=rec.state, status_source=rec.status_source)
        if due is None:
            self._end_launch(s, rec)
        else:
            self._launch_timers.arm(s.uuid, due)

    def _end_launch(self, s: Surface, rec: AgentRecord) -> None:
        rec.launch = None
        self._launch_timers.cancel(s.uuid)

    def _launch_due(self, key: str) -> None:
        s = self.surfaces.get(key)
        rec = self.records.get(key)
        if s is not None and rec is not None:
            self._emit(s, rec, self._snapshot(s, rec))

    # -- TTL expiry -------------------------------------------------------------------------

    def _schedule(self, key: str) -> None:
        """Arm the owner's expiry timer for its earliest deadline (or none)."""
        deadlines: list[float] = []
        rec = self.records.get(key)
        if rec is not None:
            deadlines.extend(rec.metadata.deadlines())
            if rec.authority_recheck is not None:
                deadlines.append(rec.authority_recheck)
            for entry in rec.presentation.values():
                deadlines.extend(entry.deadlines())
        store = self.workspace_metadata.get(key)
        if store is not None:
            deadlines.extend(store.deadlines())
        self._timers.arm(key, deadlines)

    def _expire(self, key: str) -> None:
        now = time.monotonic()
        s = self.surfaces.get(key)
        rec = self.records.get(key)
        if s is not None and rec is not None:
            # Seen from just before the deadline, so the expiry itself is the change.
            before = self._snapshot(s, rec, float("-inf"))
            rec.metadata.expire(now)
            for source, entry in list(rec.presentation.items()):
                entry.expire(now)
                if entry.empty():
                    del rec.presentation[source]
            rec.authority_recheck = None
            self._recompute(s, rec)
            self._emit(s, rec, before)
        store = self.workspace_metadata.get(key)
        if store is not None and store.expire(now):
            ws = next((w for w in self.mux.workspaces() if w.id == key), None)
            if ws is not None:
                self.events.publish(WorkspaceMetadataUpdated(ws))
        self._schedule(key)
