"""Readiness of a managed launch: a terminal ``agent.start`` named.

* ``launch_pending`` from the start until the agent is identified (process detection or
  a hook report naming it) *and* a real observation of its state exists that is not
  ``unknown``: any hook-set state, or a screen state once :data:`LAUNCH_SETTLE_S` have
  passed since identification. Detection leaves an identified agent ``unknown`` until
  a rule of its manifest matches its screen, which it first looks at after its startup
  grace (shorter than the settle), republishing only what differs; so from the settle on,
  the last screen report is what the screen really shows.
* ``interactive_ready`` once that observed state is ``idle`` (``done`` included) or
  ``blocked``: the agent is drawn and waiting for input (a prompt box or a question).
  It stays set while the agent runs, even when it goes on to work. A launch that settles
  ``working`` is no longer pending and becomes ready at its first idle or blocked state.
* The launch is forgotten (neither flag, the terminal is treated like any other) when
  its process exits, the agent is lost after being identified, the name is cleared, or
  its deadline passes while still pending (``agent.start`` ``timeout_ms``, default 30 s;
  never before the settle of an identified agent).

:class:`Launch` holds these rules; the tracker (:mod:`cmux_core.agents.tracker`) keeps one per
named terminal, feeds it what it observes and arms a timer for when it must look again.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LAUNCH_SETTLE_S", "LAUNCH_TIMEOUT_S", "Launch"]

LAUNCH_SETTLE_S = 3.2
"""Seconds after a started agent is identified before its screen state counts for
readiness; longer than detection's startup grace (``detect.runtime.STARTUP_GRACE_S``),
so detection's first real classification has been made and published by then."""

LAUNCH_TIMEOUT_S = 30.0
"""Default time a managed launch may stay pending (``agent.start`` ``timeout_ms``)."""


@dataclass(slots=True)
class Launch:
    """Readiness of one managed launch (see the module docstring).

    Times are monotonic seconds; ``settle_at`` is set when the agent is first identified.
    """

    deadline: float
    settle_at: float | None = None
    pending: bool = True
    ready: bool = False

    def advance(self, now: float, *, gone: bool, identified: bool, state: str,
                status_source: str) -> list[float] | None:
        """Apply the rules at ``now``; None when the launch is over and must be forgotten,
        else the times at which it must be looked at again (none once ready).

        ``gone``: the terminal or its agent process exited, or the terminal is no longer an
        agent's; ``identified``: an agent is effective in it; ``state`` and
        ``status_source``: its agent state and what set it (``hook``, ``screen``, ...).
        """
        if gone:
            return None
        if self.ready:
            return []
        if not identified:
            if self.settle_at is not None or now >= self.deadline:
                return None
        else:
            if self.settle_at is None:
                self.settle_at = now + LAUNCH_SETTLE_S
                self.deadline = max(self.deadline, self.settle_at)
            observed = state != "unknown" and (
                status_source == "hook"
                or (status_source == "screen" and now >= self.settle_at))
            if observed:
                self.pending = False
                self.ready = state in ("idle", "blocked")
            elif self.pending and now >= self.deadline:
                return None
        if self.ready:
            return []
        due = [t for t in (self.settle_at,) if t is not None and t > now]
        if self.pending:
            due.append(self.deadline)
        return due
