"""Who may decide a pane's agent state: declared sources, herdr's official sources, and the
rules of the ``shared`` authority.

A hook report's ``(source, agent)`` pair is looked up among the declarations integrations
make (``cmux_register_integrations(..., source=, agent=, authority=)``) and then among
herdr's sixteen official ``herdr:<integration>`` sources, so herdr's own hook scripts work
in our panes under herdr's rules: six own the agent's lifecycle, the others carry only a
session reference.

``shared`` is hooks and screen together. The tracker asks :func:`shared_state` what a
shared authority's report means given the latest screen classification:

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
* past a report's deadline its state no longer counts and the screen decides.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "HERDR_DECLARATIONS", "SHARED_BLOCKED_TTL_S", "SHARED_CONFIRM_S", "Authority",
    "ScreenView", "SharedVerdict", "SourceDeclaration", "declarations_from", "shared_state",
]

Authority = Literal["lifecycle", "session", "shared"]
State = Literal["idle", "working", "blocked", "unknown"]

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


@dataclass(frozen=True, slots=True)
class ScreenView:
    """What :func:`shared_state` needs of a screen classification."""

    state: State
    at: float
    visible_blocker: bool = False
    visible_idle: bool = False
    visible_working: bool = False
    matched_rule: str | None = None

    @property
    def has_evidence(self) -> bool:
        """Whether a rule of the manifest (not the fallback) made this classification."""
        return (self.matched_rule is not None or self.visible_idle or self.visible_working
                or self.visible_blocker)


@dataclass(frozen=True, slots=True)
class SharedVerdict:
    """The state a shared authority yields, who decided it, and when to look again."""

    state: State
    from_screen: bool
    recheck_at: float | None = None


def shared_state(reported: State, reported_at: float, expires_at: float | None,
                 screen: ScreenView | None, now: float) -> SharedVerdict:
    """Arbitrate a ``shared`` authority's ``reported`` state against ``screen`` at ``now``.

    Times are monotonic seconds; ``expires_at`` is the report's deadline (None: none).
    ``recheck_at`` is when the answer may change without a new signal (a confirmation
    window or a deadline ending), for the caller's timer.
    """
    def from_screen() -> SharedVerdict:
        return SharedVerdict(screen.state if screen is not None else "unknown", True)

    if screen is not None and screen.state == "blocked" and screen.visible_blocker:
        return from_screen()
    if expires_at is not None and now >= expires_at:
        return from_screen()
    fresh = screen is not None and screen.at > reported_at and screen.has_evidence
    if reported == "working":
        confirm_at = reported_at + SHARED_CONFIRM_S
        if screen is not None and screen.state == "idle" and screen.has_evidence:
            if now >= confirm_at:
                return from_screen()
            return SharedVerdict("working", False, _earliest(confirm_at, expires_at))
    elif reported == "blocked":
        if fresh and screen is not None and screen.state in ("idle", "working"):
            return from_screen()
    elif reported == "idle":
        if fresh and screen is not None and screen.state == "working":
            return from_screen()
    elif reported == "unknown" and screen is not None:
        return from_screen()
    return SharedVerdict(reported, False, expires_at)


def _earliest(a: float, b: float | None) -> float:
    return a if b is None else min(a, b)
