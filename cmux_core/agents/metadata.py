"""Metadata of panes and workspaces: tokens, per-source presentation, and their TTLs.

A :class:`MetadataStore` holds one pane's or workspace's tokens with the limits and
ordering rules of ``report_metadata`` (at most :data:`MAX_TOKENS` tokens, sequenced reports
from at most :data:`MAX_SEQUENCED_TOKEN_SOURCES` sources, each source's ``seq`` increasing).
A pane's presentation (title, display agent, custom status, state labels) is kept per
source as a :class:`PresentationEntry`; :func:`effective_presentation` merges the entries
whose guards pass, newest report winning per field.

Deadlines are ``time.monotonic()`` values, which is also the event loop's clock, so one
deadline serves both reads (an expired value is never shown) and :class:`ExpiryTimers`,
which fires once per owner at its earliest deadline so expiry is published on time.
Everything here runs on the event loop; the agent tracker owns the stores.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from cmux_core.errors import CmuxError

MAX_TOKENS = 32
"""Tokens one pane or workspace may hold."""
MAX_SEQUENCED_TOKEN_SOURCES = 32
"""Distinct sources that may send sequenced token reports to one pane or workspace."""


@dataclass(frozen=True, slots=True)
class Token:
    value: str
    deadline: float | None = None
    """``time.monotonic()`` at which the token expires; None = never."""


@dataclass(slots=True)
class Presented:
    """One presentation value from one source; ``order`` says which report is newer."""

    value: str
    order: int
    deadline: float | None = None


@dataclass(slots=True)
class PresentationEntry:
    """Presentation metadata one source reported, with the guards of its latest report."""

    fields: dict[str, Presented] = field(default_factory=dict)
    labels: dict[str, Presented] = field(default_factory=dict)
    agent_guard: str | None = None
    source_guard: str | None = None

    def empty(self) -> bool:
        return not self.fields and not self.labels

    def apply(self, patch: MetadataPatch, order: int, deadline: float | None) -> None:
        """Take the guards of ``patch`` and its clears, then its values as report ``order``."""
        self.agent_guard = patch.agent
        self.source_guard = patch.applies_to_source
        for name in patch.clear_fields:
            if name == "state_labels":
                self.labels.clear()
            else:
                self.fields.pop(name, None)
        for name, value in patch.set_fields.items():
            self.fields[name] = Presented(value, order, deadline)
        for status, label in patch.state_labels.items():
            self.labels[status] = Presented(label, order, deadline)

    def expire(self, now: float) -> None:
        """Drop every value whose deadline has passed at ``now``."""
        for values in (self.fields, self.labels):
            for name, item in list(values.items()):
                if _expired(item.deadline, now):
                    del values[name]

    def deadlines(self) -> Iterable[float]:
        return (p.deadline for p in (*self.fields.values(), *self.labels.values())
                if p.deadline is not None)


@dataclass(slots=True)
class MetadataPatch:
    """A validated, normalised ``report_metadata`` request (see ``methods.report``).

    ``tokens`` maps a key to its new value or None (clear); ``set_fields`` holds
    presentation values to set, ``clear_fields`` the names to clear (``state_labels``
    included); ``ttl_s`` applies to every touched token and presentation value.
    """

    source: str
    tokens: dict[str, str | None] = field(default_factory=dict)
    set_fields: dict[str, str] = field(default_factory=dict)
    state_labels: dict[str, str] = field(default_factory=dict)
    clear_fields: set[str] = field(default_factory=set)
    agent: str | None = None
    applies_to_source: str | None = None
    seq: int | None = None
    ttl_s: float | None = None


@dataclass(eq=False)
class MetadataStore:
    """Tokens and metadata sequence bookkeeping of one pane or workspace."""

    tokens: dict[str, Token] = field(default_factory=dict)
    seqs: dict[str, int] = field(default_factory=dict)
    sequenced_token_sources: set[str] = field(default_factory=set)
    revision: int = 0

    def token_values(self) -> dict[str, str]:
        return {k: t.value for k, t in sorted(self.tokens.items())}

    def accept_seq(self, source: str, seq: int | None) -> bool:
        """Metadata ordering: sequenced reports must increase; unsequenced always pass."""
        if seq is None:
            return True
        last = self.seqs.get(source)
        return last is None or seq > last

    def check_tokens(self, source: str, seq: int | None, tokens: Mapping[str, str | None],
                     what: str) -> None:
        """Raise the limit errors a token patch would hit, before anything is applied."""
        if not tokens:
            return
        keys = set(self.tokens)
        for key, value in tokens.items():
            if value is None:
                keys.discard(key)
            else:
                keys.add(key)
        if len(keys) > MAX_TOKENS:
            raise CmuxError("invalid_metadata_tokens",
                            f"{what} metadata may contain at most {MAX_TOKENS} tokens",
                            {"reason": "metadata_token_limit", "limit": MAX_TOKENS})
        if (seq is not None and source not in self.sequenced_token_sources
                and len(self.sequenced_token_sources) >= MAX_SEQUENCED_TOKEN_SOURCES):
            raise CmuxError("metadata_sequence_source_limit",
                            f"{what} metadata accepts sequenced tokens from at most "
                            f"{MAX_SEQUENCED_TOKEN_SOURCES} sources")

    def patch_tokens(self, source: str, seq: int | None, tokens: Mapping[str, str | None],
                     deadline: float | None) -> bool:
        """Apply a checked patch; True when any token changed (``revision`` bumped)."""
        if seq is not None and tokens:
            self.sequenced_token_sources.add(source)
        changed = False
        for key, value in tokens.items():
            if value is None:
                changed |= self.tokens.pop(key, None) is not None
                continue
            token = Token(value, deadline)
            if self.tokens.get(key) != token:
                self.tokens[key] = token
                changed = True
        if changed:
            self.revision += 1
        return changed

    def expire(self, now: float) -> bool:
        gone = [k for k, t in self.tokens.items() if _expired(t.deadline, now)]
        for key in gone:
            del self.tokens[key]
        if gone:
            self.revision += 1
        return bool(gone)

    def deadlines(self) -> Iterable[float]:
        return (t.deadline for t in self.tokens.values() if t.deadline is not None)


def effective_presentation(entries: Iterable[PresentationEntry], agent: str | None,
                           authority_source: str | None, now: float
                           ) -> tuple[dict[str, str], dict[str, str]]:
    """Fields and state labels in effect at ``now``: the newest unexpired value per name
    among entries whose guards pass (``agent`` is the pane's effective agent,
    ``authority_source`` the source holding its hook authority). Labels come sorted."""
    best: dict[str, Presented] = {}
    labels: dict[str, Presented] = {}
    for entry in entries:
        if entry.agent_guard is not None and entry.agent_guard != agent:
            continue
        if entry.source_guard is not None and entry.source_guard != authority_source:
            continue
        for table, values in ((best, entry.fields), (labels, entry.labels)):
            for name, item in values.items():
                if _expired(item.deadline, now):
                    continue
                if name not in table or item.order > table[name].order:
                    table[name] = item
    return ({name: item.value for name, item in best.items()},
            {k: v.value for k, v in sorted(labels.items())})


def _expired(deadline: float | None, now: float) -> bool:
    return deadline is not None and deadline <= now


def deadline_after(ttl_s: float | None) -> float | None:
    """The deadline ``ttl_s`` seconds from now; None (never) without a TTL."""
    # asyncio's loop clock is time.monotonic(), so deadlines serve reads and call_at alike.
    return None if ttl_s is None else time.monotonic() + ttl_s


class ExpiryTimers:
    """At most one ``call_at`` timer per owner key (pane key or workspace id).

    ``expire(key)`` is called on the loop when the key's timer fires; the timer is already
    forgotten by then, so ``expire`` may arm the next one.
    """

    def __init__(self, expire: Callable[[str], None]) -> None:
        self._expire = expire
        self._timers: dict[str, asyncio.TimerHandle] = {}

    def arm(self, key: str, deadlines: Iterable[float]) -> None:
        """Replace the key's timer with one at the earliest of ``deadlines`` (none if empty)."""
        self.cancel(key)
        earliest = min(deadlines, default=None)
        if earliest is not None:
            loop = asyncio.get_running_loop()
            self._timers[key] = loop.call_at(earliest, self._fire, key)

    def cancel(self, key: str) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    def _fire(self, key: str) -> None:
        self._timers.pop(key, None)
        self._expire(key)
