"""Classify one screen of a known agent with its manifest, and explain the decision.

:func:`classify` is the hot path (it runs on every screen change of every agent pane):
rules are tried from the highest priority down, the first match wins, and each region's
text, lowercase form and lines are computed once per call. :func:`explain` evaluates
every rule and reports each one's evidence.

Selection: among matching rules the highest ``priority`` wins, ties go to the rule that
comes first in the file. No matching rule means ``idle`` with ``fallback_reason =
"default_known_agent_idle_fallback"`` (the agent is known, only its screen is not).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from cmux_core.detect.manifest import AgentState, Gate, Manifest, Region, Rule
from cmux_core.detect.pattern import encode
from cmux_core.detect.regions import ScreenView, split_lines
from cmux_core.detect.shapes import FINDERS

FALLBACK_IDLE = "default_known_agent_idle_fallback"
UNKNOWN_AGENT = "unknown_agent"
PREVIEW_CHARS = 240
OSC_REGIONS = frozenset({"osc_title", "osc_progress"})
"""Region kinds that read what the terminal was told (OSC strings), not what it shows."""


@dataclass(frozen=True)
class ScreenInput:
    """What detection looks at: ``screen`` is the ``pane.read source=detection`` text (rows
    trimmed, trailing blank rows dropped, ``\\n``-joined with a final ``\\n``); the OSC
    strings are the latest title (OSC 0/2) and progress (OSC 9, after ``9;``)."""

    screen: str
    osc_title: str = ""
    osc_progress: str = ""


@dataclass(frozen=True)
class Classification:
    """The state a screen shows and why.

    ``visible_*`` are set only when the matched rule asks for them and its state is the
    matching one. ``skip_state_update`` means the screen is a viewer or menu: keep the
    previous state. ``on_screen`` means the matched rule reads the screen text, not only
    the terminal title or progress: the agent has drawn what decided.
    """

    state: AgentState
    matched_rule: str | None
    visible_idle: bool
    visible_blocker: bool
    visible_working: bool
    skip_state_update: bool
    fallback_reason: str | None
    on_screen: bool = False


class _Text:
    """A region's text with its lowercase form, lines and UTF-8 forms (what regexes
    search), computed on first use."""

    def __init__(self, text: str) -> None:
        self.text = text

    @cached_property
    def folded(self) -> str:
        return self.text.lower()

    @cached_property
    def lines(self) -> list[str]:
        return split_lines(self.text)

    @cached_property
    def utf8(self) -> bytes:
        return encode(self.text)

    @cached_property
    def utf8_lines(self) -> list[bytes]:
        """:attr:`lines`, encoded (``\\n`` and ``\\r`` are single bytes in UTF-8)."""
        if not self.utf8:
            return []
        lines = self.utf8.split(b"\n")
        if lines[-1] == b"":
            lines.pop()
        return [line[:-1] if line.endswith(b"\r") else line for line in lines]


class _Input:
    def __init__(self, inp: ScreenInput) -> None:
        self.view = ScreenView(inp.screen, inp.osc_title, inp.osc_progress)
        self.texts: dict[Region, _Text] = {}

    def text(self, region: Region) -> _Text:
        found = self.texts.get(region)
        if found is None:
            found = self.texts[region] = _Text(self.view.region(region))
        return found


def gate_matches(gate: Gate, text: _Text) -> bool:
    """Every matcher of ``gate`` holds on ``text`` (nested gates see the same text)."""
    if gate.folded:
        folded = text.folded
        for needle in gate.folded:
            if needle not in folded:
                return False
    for pattern in gate.regex:
        if not pattern.search_utf8(text.utf8):
            return False
    for pattern in gate.line_regex:
        if not pattern.search_lines(text.utf8, text.utf8_lines):
            return False
    for shape in gate.shape:
        if FINDERS[shape](text.lines) is None:
            return False
    for sub in gate.all:
        if not gate_matches(sub, text):
            return False
    if gate.any and not any(gate_matches(sub, text) for sub in gate.any):
        return False
    return not any(gate_matches(sub, text) for sub in gate.not_)


def _result(best: Rule | None) -> Classification:
    if best is None:
        return Classification(state="idle", matched_rule=None, visible_idle=False,
                              visible_blocker=False, visible_working=False,
                              skip_state_update=False, fallback_reason=FALLBACK_IDLE)
    state: AgentState = best.state or "unknown"
    return Classification(
        state=state, matched_rule=best.id,
        visible_idle=best.visible_idle and state == "idle",
        visible_blocker=best.visible_blocker and state == "blocked",
        visible_working=best.visible_working and state == "working",
        skip_state_update=best.skip_state_update, fallback_reason=None,
        on_screen=best.region.kind not in OSC_REGIONS)


def classify(manifest: Manifest, inp: ScreenInput) -> Classification:
    """The state ``inp`` shows according to ``manifest``; never raises for any input."""
    state = _Input(inp)
    for rule in manifest.by_priority:
        if gate_matches(rule.gate, state.text(rule.region)):
            return _result(rule)
    return _result(None)


def _preview(text: str) -> str:
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + "..."


def _evidence(rule: Rule, text: _Text) -> dict[str, Any]:
    gate = rule.gate
    return {
        "contains": [{"value": needle, "matched": folded in text.folded}
                     for needle, folded in zip(gate.contains, gate.folded, strict=True)],
        "regex": [{"value": p.source, "matched": p.search_utf8(text.utf8)}
                  for p in gate.regex],
        "line_regex": [{"value": p.source,
                        "matched": p.search_lines(text.utf8, text.utf8_lines)}
                       for p in gate.line_regex],
        "all_count": len(gate.all),
        "any_count": len(gate.any),
        "not_count": len(gate.not_),
        "region_bytes": len(text.text.encode("utf-8")),
        "region_preview": _preview(text.text),
    } | ({"shape": [{"value": name, "matched": FINDERS[name](text.lines) is not None}
                    for name in gate.shape]} if gate.shape else {})


def _rule_ref(rule: Rule) -> dict[str, Any]:
    return {"id": rule.id, "priority": rule.priority, "region": rule.region.name,
            "state": rule.state or "unknown"}


def explain(manifest: Manifest, inp: ScreenInput) -> dict[str, Any]:
    """The ``agent.explain`` object (the value of its ``explain`` key) for ``inp``.

    Every key is always present (``null`` when absent). Every rule is evaluated and listed
    in file order with the evidence of its top-level matchers; nested gates are counted.
    Keys about remote manifest updates are present for compatibility and always empty.
    """
    state = _Input(inp)
    evaluated: list[dict[str, Any]] = []
    best: Rule | None = None
    for rule in manifest.rules:
        text = state.text(rule.region)
        matched = gate_matches(rule.gate, text)
        if matched and (best is None or rule.priority > best.priority):
            best = rule
        evaluated.append({**_rule_ref(rule), "matched": matched,
                          "evidence": _evidence(rule, text)})
    result = _result(best)
    return {
        "agent": manifest.id,
        "state": result.state,
        "manifest_source": manifest.source,
        "manifest_version": manifest.version,
        "cached_remote_version": None,
        "local_override_shadowing_remote": False,
        "remote_update_status": None,
        "remote_update_error": None,
        "matched_rule": _rule_ref(best) if best is not None else None,
        "visible_idle": result.visible_idle,
        "visible_blocker": result.visible_blocker,
        "visible_working": result.visible_working,
        "screen_detection_skipped": False,
        "skip_state_update": result.skip_state_update,
        "skipped_update_reason": f"matched_rule:{best.id}"
        if best is not None and result.skip_state_update else None,
        "fallback_reason": result.fallback_reason,
        "warning": None,
        "evaluated_rules": evaluated,
    }


def explain_unknown_agent(agent: str | None) -> dict[str, Any]:
    """The explain object for a label no manifest knows: state ``unknown``, no rules."""
    return {
        "agent": agent, "state": "unknown", "manifest_source": None, "manifest_version": None,
        "cached_remote_version": None, "local_override_shadowing_remote": False,
        "remote_update_status": None, "remote_update_error": None, "matched_rule": None,
        "visible_idle": False, "visible_blocker": False, "visible_working": False,
        "screen_detection_skipped": False, "skip_state_update": False,
        "skipped_update_reason": None, "fallback_reason": UNKNOWN_AGENT, "warning": None,
        "evaluated_rules": [],
    }
