"""Who decides a pane's agent state: the hook authority and the screen report, declared
sources, herdr's official sources, and the rules that arbitrate between them
(:func:`decide`).

A hook report's ``(source, agent)`` pair is looked up among the declarations integrations
make (``cmux_register_integrations(..., source=, agent=, authority=)``) and then among
herdr's sixteen official ``herdr:<integration>`` sources, so herdr's own hook scripts work
in our panes under herdr's rules: six own the agent's lifecycle, the others carry only a
session reference.

A ``lifecycle`` authority owns idle/working/blocked while its agent's process is detected:
no screen overrides it and screen detection is skipped. A ``session`` source's report only
records the session reference; the screen keeps deciding the state. A ``custom``
(undeclared) one speaks at once, but a live permission prompt of the same known agent on
screen, newer than the report, is ``blocked``. For every kind, a report's TTL (``ttl_ms``)
is its deadline, past which its state no longer counts, and a report from a subagent never
moves the state.

``shared`` is hooks and screen together (:func:`shared_state`):

* a permission dialog on screen (``blocked`` with ``visible_blocker``) is ``blocked``,
  whatever the hook said;
* a reported ``working`` is taken at once; once :data:`SHARED_CONFIRM_S` has passed since
  the report, a screen showing the agent idle (a rule matched ``idle``: its prompt, an
  interrupt notice) wins;
* a reported ``blocked`` holds until its deadline (the report's ``ttl_ms``, else the
  declaration's ``state_ttl_ms``, else :data:`SHARED_BLOCKED_TTL_S`), unless the screen,
  classified after the report, shows the agent idle or working by a rule of its manifest
  (the dialog was answered and no hook said so);
* a reported ``idle`` holds unless the screen, classified after the report, shows the agent
  working by a rule;
* past a report's deadline its state no longer counts and the screen decides;
* a report the screen overrode by its own evidence (the ``working``, ``blocked`` and
  ``idle`` rules above; not the dialog's, which holds only while the dialog is visible) is
  spent: it never speaks again, and every later screen is judged on its own until the next
  report. A ``blocked`` the user answered ``no`` to, or a ``working`` an interrupt ended,
  does not come back when the screen next shows something no rule explains (a menu, the
  agent's goodbye) or when the agent is identified afresh.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from cmux_core.detect.manifest import AgentState

__all__ = [
    "HERDR_DECLARATIONS", "SHARED_BLOCKED_TTL_S", "SHARED_CONFIRM_S", "Authority", "Decision",
    "HookAuthority", "ScreenReport", "SessionRef", "SharedVerdict", "SourceDeclaration", "decide",
    "declarations_from", "hook_speaks", "shared_state",
]

Authority = Literal["lifecycle", "session", "shared"]

SHARED_CONFIRM_S = 0.75
"""How long a ``shared`` hook's ``working`` stands against a screen showing the agent idle."""

SHARED_BLOCKED_TTL_S = 30.0
"""How long a ``shared`` hook's ``blocked`` lasts without a dialog on screen, by default."""


@dataclass(frozen=True, slots=True)
class SourceDeclaration:
    """An integration's claim: reports from ``source`` about ``agent`` carry ``authority``.

    ``state_ttl_ms`` (``shared`` only) bounds a reported ``blocked`` the screen does not
    confirm. ``plugin_id`` is None for the built-in herdr declarations.
    """

    source: str
    agent: str
    authority: Authority
    plugin_id: str | None = None
    state_ttl_ms: int | None = None


def declarations_from(integrations: Iterable[object]) -> list[SourceDeclaration]:
    """The source declarations of registered integrations (those naming a source, an agent
    and an authority); others declare nothing."""
    out: list[SourceDeclaration] = []
    for integration in integrations:
        source = getattr(integration, "source", None)
        agent = getattr(integration, "agent", None)
        authority = getattr(integration, "authority", None)
        ttl = getattr(integration, "state_ttl_ms", None)
        if (isinstance(source, str) and isinstance(agent, str) and source and agent.strip()
                and authority in ("lifecycle", "session", "shared")):
            out.append(SourceDeclaration(source, agent, authority,
                                         getattr(integration, "plugin_id", None),
                                         ttl if isinstance(ttl, int) else None))
    return out


_HERDR_LIFECYCLE = ("pi", "omp", "mastracode", "opencode", "kilo", "kimi")
_HERDR_SESSION = ("claude", "codex", "copilot", "devin", "droid", "qodercli", "cursor", "grok",
                  "hermes")

HERDR_DECLARATIONS: tuple[SourceDeclaration, ...] = (
    *(SourceDeclaration(f"herdr:{name}", name, "lifecycle") for name in _HERDR_LIFECYCLE),
    *(SourceDeclaration(f"herdr:{name}", name, "session") for name in _HERDR_SESSION),
    SourceDeclaration("herdr:antigravity_cli", "agy", "session"),
)
"""herdr's official integrations: their ``herdr:<name>`` sources keep herdr's meaning
(lifecycle owners, or session references only), so its shipped hooks work unchanged."""


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

    @property
    def has_evidence(self) -> bool:
        """Whether a rule of the manifest (not the fallback) made this classification."""
        return (self.matched_rule is not None or self.visible_idle or self.visible_working
                or self.visible_blocker)


@dataclass(frozen=True, slots=True)
class SessionRef:
    """An agent's native session reference, as reported by its integration."""

    source: str
    agent: str
    kind: Literal["id", "path"]
    value: str

    def to_wire(self) -> dict[str, str]:
        return {"source": self.source, "agent": self.agent, "kind": self.kind,
                "value": self.value}


@dataclass(slots=True)
class HookAuthority:
    """The last accepted state report; ``lifecycle``, ``shared`` or ``custom`` (undeclared)
    authority. Past ``expires_at`` (monotonic; None: never) its state no longer counts."""

    source: str
    agent: str
    state: AgentState
    kind: Literal["lifecycle", "shared", "custom"]
    message: str | None = None
    custom_status: str | None = None
    reported_at: float = field(default_factory=time.monotonic)
    session: SessionRef | None = None
    expires_at: float | None = None
    spent: bool = False
    """``shared`` only: the screen overrode this report (:attr:`Decision.spends_report`),
    so its state no longer counts. The tracker sets it; a new report starts unspent."""


@dataclass(frozen=True, slots=True)
class SharedVerdict:
    """The state a shared authority yields, who decided it, and when to look again.

    ``overrides``: the screen's evidence overrode the report, which is thereby spent.
    """

    state: AgentState
    from_screen: bool
    recheck_at: float | None = None
    overrides: bool = False


def shared_state(reported: AgentState, reported_at: float, expires_at: float | None,
                 screen: ScreenReport | None, now: float, *, spent: bool = False
                 ) -> SharedVerdict:
    """Arbitrate a ``shared`` authority's ``reported`` state against ``screen`` at ``now``.

    Times are monotonic seconds; ``expires_at`` is the report's deadline (None: none);
    ``spent``: the screen already overrode this report. ``recheck_at`` is when the answer
    may change without a new signal (a confirmation window or a deadline ending), for the
    caller's timer.
    """
    def from_screen(overrides: bool = False) -> SharedVerdict:
        return SharedVerdict(screen.state if screen is not None else "unknown", True,
                             overrides=overrides)

    if spent:
        return from_screen()
    if screen is not None and screen.state == "blocked" and screen.visible_blocker:
        return from_screen()
    if expires_at is not None and now >= expires_at:
        return from_screen()
    fresh = screen is not None and screen.at > reported_at and screen.has_evidence
    if reported == "working":
        confirm_at = reported_at + SHARED_CONFIRM_S
        if screen is not None and screen.state == "idle" and screen.has_evidence:
            if now >= confirm_at:
                return from_screen(overrides=True)
            return SharedVerdict("working", False, _earliest(confirm_at, expires_at))
    elif reported == "blocked":
        if fresh and screen is not None and screen.state in ("idle", "working"):
            return from_screen(overrides=True)
    elif reported == "idle":
        if fresh and screen is not None and screen.state == "working":
            return from_screen(overrides=True)
    elif reported == "unknown" and screen is not None:
        return from_screen()
    return SharedVerdict(reported, False, expires_at)


@dataclass(frozen=True, slots=True)
class Decision:
    """A pane's effective state, who set it (the source or matched rule in ``detail``), and
    when it may change without a new signal. ``spends_report``: the screen overrode the
    ``shared`` report, which the caller marks :attr:`HookAuthority.spent`."""

    state: AgentState
    source: Literal["hook", "screen", "none"]
    detail: str | None = None
    recheck_at: float | None = None
    spends_report: bool = False


def hook_speaks(auth: HookAuthority, detected: str | None, exited_agent: str | None) -> bool:
    """A lifecycle authority speaks only while its agent process is detected; others do."""
    return auth.kind != "lifecycle" or (detected == auth.agent and exited_agent != auth.agent)


def decide(auth: HookAuthority | None, screen: ScreenReport | None, detected: str | None,
           exited_agent: str | None, now: float) -> Decision:
    """The effective state of a pane whose hook authority is ``auth`` and whose latest
    screen classification is ``screen`` (``detected``: the agent process identified, if
    any; ``exited_agent``: the one that just exited). Times are monotonic seconds."""
    def by_screen(recheck: float | None = None, spends: bool = False) -> Decision:
        if screen is None:
            return Decision("unknown", "none", None, recheck, spends)
        return Decision(screen.state, "screen", screen.matched_rule, recheck, spends)

    if auth is None:
        return by_screen()
    if auth.kind == "shared":
        verdict = shared_state(auth.state, auth.reported_at, auth.expires_at, screen, now,
                               spent=auth.spent)
        if verdict.from_screen:
            return by_screen(verdict.recheck_at, verdict.overrides)
        return Decision(verdict.state, "hook", auth.source, verdict.recheck_at)
    if auth.expires_at is not None and now >= auth.expires_at:
        return by_screen()
    if not hook_speaks(auth, detected, exited_agent):
        return by_screen(auth.expires_at)
    if (auth.kind == "custom" and screen is not None and screen.state == "blocked"
            and screen.visible_blocker and screen.at >= auth.reported_at
            and auth.state != "blocked" and detected is not None and auth.agent == detected):
        return Decision("blocked", "screen", screen.matched_rule, auth.expires_at)
    return Decision(auth.state, "hook", auth.source, auth.expires_at)


def _earliest(a: float, b: float | None) -> float:
    return a if b is None else min(a, b)
