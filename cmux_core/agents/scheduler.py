"""Detection scheduling: when each terminal is identified and classified, and what is published.

Every terminal surface is detected on its own, whether its pane shows it or it is a
background tab: "pane" below means that terminal. Nothing here polls a pane in a loop.
Work is triggered by:

* **output** — each batch a terminal absorbed (:meth:`DetectionScheduler.surface_output`):
  a cheap ``tcgetpgrp`` check for a new foreground process group, and for a pane
  with an agent one screen classification at most every :data:`SCREEN_DEBOUNCE_S`;
* **foreground changes** — a new process group is probed (``/proc``) shortly
  after it appears; in a pane with no agent, output opens an acquisition window
  of a few probes (an agent may ``exec`` without changing group);
* **one slow timer** for the whole server (:data:`SAFETY_INTERVAL_S`) that
  notices panes nobody heard from, re-probes identified agents every
  :data:`AGENT_REPROBE_S` and re-checks what output may have missed. It runs only
  while there is something to catch: an agent in some pane, a pane not yet probed,
  or output in the last :data:`SAFETY_QUIET_S`; new panes and output arm it again, so
  a server whose panes are all quiet shells is never woken.

Short per-pane timers exist only while something is pending: the working→idle
hold, the end of the startup grace, the probes confirming an agent is gone.

Publishing (into :class:`~cmux_core.agents.tracker.AgentTracker`): a new agent is
``unknown`` and its screen is not classified for :data:`STARTUP_GRACE_S`; after that it
stays ``unknown`` until a rule of its manifest that reads the screen matches (a screen
no rule knows is the agent still starting, or the shell's leftovers, not an idle prompt;
a title alone may be set before anything is drawn). Then results
are published when state or evidence changed; ``working`` → plain ``idle`` is held
until confirmed; a ``skip_state_update`` match discards the result; losing an agent takes
:data:`LOSS_PROBES` probes in a row, unless the pane's own shell got the
foreground back, which publishes the exit at once and clears the agent on the
next probe.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from cmux_core.agents.authority import ScreenReport
from cmux_core.agents.events import ServerManifestsReloaded
from cmux_core.detect.engine import (
    OSC_REGIONS,
    Classification,
    ScreenInput,
    classify,
    explain,
    explain_unknown_agent,
)
from cmux_core.detect.identify import Identity, identify_group
from cmux_core.detect.manifest import Manifest
from cmux_core.detect.registry import ManifestRegistry, ReloadReport
from cmux_core.errors import CmuxError
from cmux_core.model.events import PaneClosed, PaneCreated, PaneUpdated
from cmux_core.terminal.procfs import ProcessReader

if TYPE_CHECKING:
    from cmux_core.agents.tracker import AgentTracker
    from cmux_core.events import EventHub
    from cmux_core.model.mux import Mux
    from cmux_core.model.tree import Pane, Surface
    from cmux_core.terminal.process import Terminal

log = logging.getLogger(__name__)

CLASSIFY_INLINE_COST = 1 << 24
"""Largest ``screen characters * regex_size`` of a classification run on the event loop.
A costlier one (a manifest with a huge regex program, or a very large screen) runs on a
thread of its own, so it can delay only its own pane's state: RE2 lets go of the GIL while
it matches. Every bundled manifest classifies an 80x24 or 120x40 screen on the loop."""

T = TypeVar("T")


def costly(manifest: Manifest, inputs: ScreenInput) -> bool:
    """Whether classifying ``inputs`` with ``manifest`` may cost more than the loop can
    spare (:data:`CLASSIFY_INLINE_COST`)."""
    return len(inputs.screen) * manifest.regex_size > CLASSIFY_INLINE_COST


def beside_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[], T],
                done: Callable[[T | Exception], object]) -> None:
    """Run ``fn()`` on a thread of its own, then ``done(result or exception)`` on ``loop``.

    A daemon thread, not the loop's executor: that one is joined when the server stops,
    which would hold a SIGTERM until the work ends. If the loop has closed by then, the
    result is dropped.
    """
    def run() -> None:
        try:
            result: T | Exception = fn()
        except Exception as exc:
            result = exc
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(done, result)

    threading.Thread(target=run, name="cmux-classify", daemon=True).start()


SCREEN_DEBOUNCE_S = 0.075
"""Output batches within this long of the first one are classified together."""
PROBE_DELAY_S = 0.05
"""Wait after a foreground change before reading ``/proc`` (the child may not have exec'd)."""
SAFETY_INTERVAL_S = 2.0
SAFETY_QUIET_S = 10.0
AGENT_REPROBE_S = 5.0
STARTUP_GRACE_S = 3.0
NOT_DRAWN = "agent_screen_not_recognised_yet"
"""``agent.explain``'s ``fallback_reason`` when no screen rule of the agent has matched
since it started: the server publishes ``unknown`` then, not the idle fallback."""
LOSS_PROBES = 6
LOSS_PROBE_INTERVAL_S = 1.0
EXIT_CLEAR_DELAY_S = 1.0
HOLD_RECHECK_S = 0.1
HOLD_CONFIRMATIONS = 3
HOLD_MAX_S = 0.7
BLOCKER_REPUBLISH_S = 0.8
ACQUIRE_FAST_S, ACQUIRE_FAST_EVERY_S = 1.5, 0.5
ACQUIRE_END_S, ACQUIRE_EVERY_S = 8.0, 2.0
ACQUIRE_QUIET_S = 2.0
GROUPS_CACHE_S = 0.5
"""Probes this close together share one scan of ``/proc`` for process-group members."""


@dataclass(eq=False)
class Deferred:
    """One pending call for a pane: a loop timer and when it is due (``inf`` when idle)."""

    handle: asyncio.TimerHandle | None = None
    due: float = math.inf

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
        self.handle, self.due = None, math.inf


@dataclass(eq=False)
class PaneDetection:
    """Detection state of one terminal surface; timers are loop handles, cancelled when
    replaced."""

    surface: Surface
    pgid: int | None = None
    agent: str | None = None
    identity: Identity | None = None
    probed_at: float = -math.inf
    missing: int = 0
    exited: bool = False
    grace_until: float = 0.0
    scanned_seq: int = -1
    published: tuple[str, bool, bool, bool] | None = None
    drawn: bool = False
    """A screen rule with a state has matched since the agent was adopted (module doc)."""
    published_at: float = -math.inf
    hold_since: float | None = None
    hold_confirms: int = 0
    osc_baseline: tuple[str, str] = ("", "")
    osc_fresh: list[bool] = field(default_factory=lambda: [True, True])
    acquire_since: float | None = None
    last_output: float = -math.inf
    next_screen: Deferred = field(default_factory=Deferred)
    next_probe: Deferred = field(default_factory=Deferred)
    classifying: bool = False
    """A classification of this pane is running on a thread."""
    rescan: bool = False
    """The screen changed while it ran: classify again when it returns."""
    mismatch: dict[str, Any] | None = None
    """The last time a hook said ``blocked`` and the screen read otherwise (see
    :meth:`DetectionScheduler._witness`); logged the first time only."""

    @property
    def pane(self) -> Pane:
        """The pane holding the terminal now (it follows a move)."""
        return self.surface.pane

    @property
    def term(self) -> Terminal:
        return self.surface.terminal

    def cancel(self) -> None:
        self.next_screen.cancel()
        self.next_probe.cancel()


@dataclass(eq=False)
class DetectionScheduler:
    """Runs agent detection for every pane of ``mux``, reporting to ``tracker`` with the
    manifests of ``registry``; all methods run on the loop."""

    mux: Mux
    tracker: AgentTracker
    registry: ManifestRegistry
    events: EventHub
    panes: dict[str, PaneDetection] = field(init=False, default_factory=dict)
    """Detection state by terminal surface uuid."""
    _loop: asyncio.AbstractEventLoop | None = field(init=False, default=None)
    _safety: asyncio.TimerHandle | None = field(init=False, default=None)
    _running: bool = field(init=False, default=False)
    _processes: ProcessReader = field(
        init=False, default_factory=lambda: ProcessReader(groups_max_age=GROUPS_CACHE_S))

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Load the manifests, start watching them and begin detecting in every pane."""
        self._loop = asyncio.get_running_loop()
        await self.registry.start()
        self._running = True
        self._safety_tick()

    async def stop(self) -> None:
        self._running = False
        if self._safety is not None:
            self._safety.cancel()
            self._safety = None
        for st in self.panes.values():
            st.cancel()
        self.panes.clear()
        await self.registry.stop()

    # -- triggers -------------------------------------------------------------------------

    def _state(self, target: Pane | Surface) -> PaneDetection:
        surface = self.tracker.surface_of(target)
        st = self.panes.get(surface.uuid)
        if st is None:
            st = self.panes[surface.uuid] = PaneDetection(surface)
        return st

    def _alive(self, st: PaneDetection) -> bool:
        return self._running and self.tracker.live(st.surface)

    def _terminals(self) -> list[Surface]:
        return [s for p in self.mux.panes.values() for s in p.surfaces if s.term is not None]

    def pane_changed(self, event: PaneCreated | PaneUpdated) -> None:
        """A pane came or changed: the slow timer has something to catch again."""
        self._arm_safety()

    def drop_closed(self, event: PaneClosed | PaneUpdated) -> None:
        """A closed terminal's state (and its screen) goes at once, not at the next tick."""
        for key in [k for k, st in self.panes.items() if not self.tracker.live(st.surface)]:
            self.panes.pop(key).cancel()

    def surface_output(self, surface: Surface) -> None:
        """``surface``'s terminal absorbed a batch of output."""
        if not self._running:
            return
        st = self._state(surface)
        now = time.monotonic()
        pgid = surface.terminal.foreground_pgid()
        if pgid != st.pgid:
            st.pgid = pgid
            self._schedule_probe(st, PROBE_DELAY_S)
        if st.agent is None:
            self._acquire(st, now)
        elif not st.exited:
            self._schedule_screen(st, SCREEN_DEBOUNCE_S)
        st.last_output = now
        if self._safety is None:
            self._arm_safety()

    def _acquire(self, st: PaneDetection, now: float) -> None:
        """Open an acquisition window on output in a pane with no agent (see module doc)."""
        if st.acquire_since is not None and now - st.acquire_since < ACQUIRE_END_S:
            return
        if st.acquire_since is not None and now - st.last_output < ACQUIRE_QUIET_S:
            return
        st.acquire_since = now
        self._schedule_probe(st, ACQUIRE_FAST_EVERY_S)

    def _arm_safety(self) -> None:
        if self._running and self._safety is None and self._loop is not None:
            self._safety = self._loop.call_later(SAFETY_INTERVAL_S, self._safety_tick)

    def _safety_tick(self) -> None:
        """The one slow timer: catch what no output announced (see the module doc)."""
        self._safety = None
        try:
            self._safety_check()
        finally:
            now = time.monotonic()
            if any(st.agent is not None or st.probed_at == -math.inf
                   or now - st.last_output < SAFETY_QUIET_S for st in self.panes.values()):
                self._arm_safety()

    def _safety_check(self) -> None:
        now = time.monotonic()
        for key in [k for k, st in self.panes.items() if not self.tracker.live(st.surface)]:
            self.panes.pop(key).cancel()
        for surface in self._terminals():
            st = self._state(surface)
            pgid = surface.terminal.foreground_pgid()
            if pgid != st.pgid or st.probed_at == -math.inf:
                st.pgid = pgid
                self._schedule_probe(st, 0)
            elif st.agent is not None and (now - st.probed_at >= AGENT_REPROBE_S
                                           or (surface.terminal.exited and not st.exited)):
                self._schedule_probe(st, 0)
            if st.agent is not None and not st.exited and (
                    surface.terminal.output_seq != st.scanned_seq
                    or (st.published is not None and st.published[2])):
                self._schedule_screen(st, 0)

    def _schedule_probe(self, st: PaneDetection, delay: float) -> None:
        self._schedule(st, st.next_probe, delay, self._probe)

    def _schedule_screen(self, st: PaneDetection, delay: float) -> None:
        self._schedule(st, st.next_screen, delay, self._screen)

    def _schedule(self, st: PaneDetection, slot: Deferred, delay: float,
                  fn: Callable[[PaneDetection], None]) -> None:
        """Run ``fn(st)`` after ``delay`` unless ``slot`` is already due sooner."""
        assert self._loop is not None
        due = time.monotonic() + delay
        if due >= slot.due:
            return
        slot.cancel()
        slot.due = due
        slot.handle = self._loop.call_later(delay, self._fire, st, slot, fn)

    def _fire(self, st: PaneDetection, slot: Deferred,
              fn: Callable[[PaneDetection], None]) -> None:
        slot.handle, slot.due = None, math.inf
        if not self._alive(st):
            return
        try:
            fn(st)
        except Exception:
            log.exception("agent detection failed", extra={"cmux_pane": st.pane.id})

    # -- identification -------------------------------------------------------------------

    def _probe(self, st: PaneDetection, *, reset: bool = False) -> None:
        surface = st.surface
        term = st.term
        now = time.monotonic()
        st.probed_at = now
        pgid = None if term.exited else term.foreground_pgid()
        st.pgid = pgid
        identity = (identify_group(pgid, self.registry.lookup, self._processes)
                    if pgid is not None else None)
        label = identity.label if identity is not None else None
        if st.agent is None:
            if label is not None:
                self._adopt(st, identity)
            elif st.acquire_since is not None:
                since = now - st.acquire_since
                if since < ACQUIRE_FAST_S:
                    self._schedule_probe(st, ACQUIRE_FAST_EVERY_S)
                elif since < ACQUIRE_END_S:
                    self._schedule_probe(st, ACQUIRE_EVERY_S)
            return
        if st.exited:
            if label is not None:
                # The same agent right after an exit is a new process: start it afresh.
                self._clear(st)
                self._adopt(st, identity)
            else:
                self._clear(st)
            return
        if label == st.agent:
            st.missing = 0
            st.identity = identity
            if self.tracker.record(surface).detected != label:
                # The tracker declined it (a release suppresses re-acquisition briefly).
                self.tracker.set_detected(surface, label)
                if self.tracker.record(surface).detected == label:
                    # Taken now, with no screen report: publish the next result afresh.
                    st.published = None
                    self._schedule_screen(st, 0)
            return
        if label is not None:
            self._adopt(st, identity)
        elif pgid is None or pgid == term.pid:
            self._exit(st)
        elif reset:
            self._clear(st)
        else:
            st.missing += 1
            if st.missing >= LOSS_PROBES:
                self._clear(st)
            else:
                self._schedule_probe(st, LOSS_PROBE_INTERVAL_S)

    def _adopt(self, st: PaneDetection, identity: Identity | None) -> None:
        """A (new) agent owns the pane: blank OSC evidence, ``unknown`` until a rule
        matches, start the grace."""
        assert identity is not None
        emulator = st.term.emulator
        st.agent, st.identity = identity.label, identity
        st.missing, st.exited = 0, False
        st.acquire_since = None
        st.grace_until = time.monotonic() + STARTUP_GRACE_S
        st.osc_baseline = (emulator.title or "", emulator.progress or "")
        st.osc_fresh = [False, False]
        st.hold_since = None
        st.published, st.drawn = None, False
        log.info("pane %s runs agent %s (%s)", st.pane.id, identity.label, identity.evidence,
                 extra={"cmux_pane": st.pane.id})
        self.tracker.set_detected(st.surface, identity.label)
        self._schedule_screen(st, STARTUP_GRACE_S)

    def _exit(self, st: PaneDetection) -> None:
        """The agent's process ended: publish idle with ``process_exited`` now, clear later."""
        st.exited = True
        st.hold_since = None
        self._publish(st, ScreenReport("idle", visible_idle=True, process_exited=True),
                      force=True)
        self._schedule_probe(st, EXIT_CLEAR_DELAY_S)

    def _clear(self, st: PaneDetection) -> None:
        st.agent = st.identity = None
        st.exited = False
        st.missing = 0
        st.published = None
        st.hold_since = None
        self.tracker.set_detected(st.surface, None)

    # -- classification -------------------------------------------------------------------

    def _inputs(self, st: PaneDetection) -> ScreenInput:
        """The detection screen and the OSC strings, blank until the agent itself set them."""
        emulator = st.term.emulator
        screen = st.term.read("detection", None, "text")[0]
        osc = [emulator.title or "", emulator.progress or ""]
        for i in (0, 1):
            if not st.osc_fresh[i]:
                if osc[i] != st.osc_baseline[i]:
                    st.osc_fresh[i] = True
                else:
                    osc[i] = ""
        return ScreenInput(screen, osc[0], osc[1])

    def _screen(self, st: PaneDetection) -> None:
        if st.agent is None or st.exited:
            return
        now = time.monotonic()
        if now < st.grace_until:
            self._schedule_screen(st, st.grace_until - now)
            return
        if self.tracker.screen_detection_skipped(st.surface):
            return
        manifest = self.registry.get(st.agent)
        if manifest is None:
            return
        if st.classifying:
            st.rescan = True
            return
        st.scanned_seq = st.term.output_seq
        inputs = self._inputs(st)
        if not costly(manifest, inputs):
            self._apply(st, classify(manifest, inputs), now)
            return
        assert self._loop is not None
        st.classifying = True
        beside_loop(self._loop, functools.partial(classify, manifest, inputs),
                    functools.partial(self._classified, st, st.agent))

    def _classified(self, st: PaneDetection, agent: str | None,
                    result: Classification | Exception) -> None:
        st.classifying = False
        if isinstance(result, Exception):
            log.error("classifying pane %s as %s failed: %s", st.pane.id, agent, result,
                      extra={"cmux_pane": st.pane.id})
            return
        if (not self._running or self.panes.get(st.surface.uuid) is not st or st.agent != agent
                or st.exited):
            return
        self._apply(st, result, time.monotonic())
        if st.rescan:
            st.rescan = False
            self._schedule_screen(st, 0)

    def _apply(self, st: PaneDetection, result: Classification, now: float) -> None:
        if result.skip_state_update:
            st.hold_since = None
            return
        if not st.drawn:
            if result.matched_rule is None or not result.on_screen:
                return
            st.drawn = result.state != "unknown"
        self._witness(st, result)
        report = ScreenReport(result.state, result.visible_idle, result.visible_blocker,
                              result.visible_working, matched_rule=result.matched_rule)
        if (st.published is not None and st.published[0] == "working"
                and report.state == "idle" and not report.visible_idle
                and not report.visible_blocker):
            if st.hold_since is None:
                st.hold_since, st.hold_confirms = now, 0
            else:
                st.hold_confirms += 1
            if st.hold_confirms < HOLD_CONFIRMATIONS and now - st.hold_since < HOLD_MAX_S:
                self._schedule_screen(st, HOLD_RECHECK_S)
                return
        st.hold_since = None
        self._publish(st, report)

    def _witness(self, st: PaneDetection, result: Classification) -> None:
        """The hook is the second witness: when it says ``blocked`` (a permission or a
        question) and the screen reads otherwise, the rules missed a dialog. Kept with the
        screen for ``agent.explain`` (``last_mismatch``), logged once per pane."""
        if result.state == "blocked" or self.tracker.hook_reported(st.surface) != "blocked":
            return
        first = st.mismatch is None
        screen = st.term.read("detection", None, "text")[0]
        st.mismatch = {"at": time.time(), "agent": st.agent, "hook_state": "blocked",
                       "screen_state": result.state, "matched_rule": result.matched_rule,
                       "screen": screen}
        if first:
            log.warning("pane %s: the %s hook says blocked, the screen reads %s (rule %s); "
                        "a dialog the manifest misses? screen:\n%s", st.pane.id, st.agent,
                        result.state, result.matched_rule, screen,
                        extra={"cmux_pane": st.pane.id})

    def _publish(self, st: PaneDetection, report: ScreenReport, *, force: bool = False) -> None:
        key = (report.state, report.visible_idle, report.visible_blocker,
               report.visible_working)
        now = time.monotonic()
        if not force and key == st.published and not (
                report.visible_blocker and now - st.published_at >= BLOCKER_REPUBLISH_S):
            return
        st.published, st.published_at = key, now
        self.tracker.publish_screen(st.surface, report)

    # -- manifests --------------------------------------------------------------------------

    def manifests_reloaded(self, report: ReloadReport) -> None:
        """Manifests changed: publish it; every pane is re-identified and re-classified (no
        grace)."""
        self.events.publish(ServerManifestsReloaded(report, self.registry))
        if not self._running:
            return
        for surface in self._terminals():
            st = self._state(surface)
            if st.agent is not None and self.registry.lookup(st.agent) != st.agent:
                self._clear(st)
            self._probe(st, reset=True)
            st.grace_until = 0.0
            st.hold_since = None
            if st.agent is not None and not st.exited:
                self._schedule_screen(st, 0)

    # -- explain ----------------------------------------------------------------------------

    async def explain(self, target: Pane | Surface) -> dict[str, Any]:
        """The ``agent.explain`` object for the live screen of ``target``'s terminal (a
        pane's: the one it shows; a costly one is worked out beside the loop, as
        classifications are).

        ``last_ignored_report`` is the latest hook report about the terminal that was not
        applied (method, source, agent, reason, ``at`` in epoch seconds), or None.

        A terminal without an agent that has a manifest answers with state ``unknown``
        and no rules when it has an ignored report, and otherwise raises
        ``agent_explain_unavailable``.
        """
        tracker = self.tracker
        surface = tracker.surface_of(target)
        pane = surface.pane
        rec = tracker.record(surface)
        ignored = rec.last_ignored
        ignored_wire = None if ignored is None else {
            "method": ignored.method, "source": ignored.source, "agent": ignored.agent,
            "reason": ignored.reason, "at": ignored.at}
        if tracker.screen_detection_skipped(surface):
            return {
                "agent": tracker.effective_agent(surface), "state": rec.state,
                "manifest_source": None, "manifest_version": None,
                "cached_remote_version": None, "local_override_shadowing_remote": False,
                "remote_update_status": None, "remote_update_error": None,
                "matched_rule": None, "visible_idle": False, "visible_blocker": False,
                "visible_working": False, "screen_detection_skipped": True,
                "screen_detection_skip_reason": "full_lifecycle_hook_authority",
                "skip_state_update": False, "skipped_update_reason": None,
                "fallback_reason": None, "warning": None, "evaluated_rules": [],
                "last_ignored_report": ignored_wire}
        st = self._state(surface)
        label = st.agent if st.agent is not None and not st.exited else None
        if label is None:
            effective = tracker.effective_agent(surface)
            label = self.registry.lookup(effective) if effective is not None else None
        manifest = self.registry.get(label) if label is not None else None
        if (label is None or manifest is None) and ignored is not None:
            out = explain_unknown_agent(tracker.effective_agent(surface))
            out["last_ignored_report"] = ignored_wire
            return out
        if label is None or manifest is None:
            raise CmuxError("agent_explain_unavailable",
                            f"pane {pane.id} has no detected agent with a manifest")
        inputs = self._inputs(st)
        if costly(manifest, inputs):
            assert self._loop is not None
            answer: asyncio.Future[dict[str, Any] | Exception] = self._loop.create_future()
            beside_loop(self._loop, functools.partial(explain, manifest, inputs),
                        lambda r: None if answer.done() else answer.set_result(r))
            found = await answer
            if isinstance(found, Exception):
                raise found
            out = found
        else:
            out = explain(manifest, inputs)
        entry = self.registry.entry(label)
        out["agent"] = label
        if entry is not None:
            out["manifest_source"] = entry.where
        out["warning"] = self.registry.warning(label)
        if st.identity is not None and st.identity.label == label:
            out["identified_by"] = st.identity.evidence
        out["startup_grace"] = time.monotonic() < st.grace_until
        out["last_ignored_report"] = ignored_wire
        out["last_mismatch"] = st.mismatch
        rule = out["matched_rule"]
        if not st.drawn and (rule is None or rule["region"] in OSC_REGIONS):
            # What the server publishes: nothing until a screen rule matched, so unknown.
            out["state"] = "unknown"
            out["fallback_reason"] = NOT_DRAWN
        return out
