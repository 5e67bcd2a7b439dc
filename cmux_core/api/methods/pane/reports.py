"""Hook-reporting methods: agent state, session and release reports, authority, metadata.

``pane.report_agent``, ``pane.report_agent_session``, ``pane.release_agent``,
``pane.clear_agent_authority``, ``pane.report_metadata`` (and
``workspace.report_metadata``, in ``methods.workspace``) are what agents' own hook
systems call (through ``hooks/`` and integrations). ``pane.open_report_socket`` opens a
socket that takes only these reports, for one terminal (:mod:`cmux_core.api.report_socket`).

They validate in the documented order (the first failure wins) and then answer ``ok``
whether or not the tracker accepted the report (stale ``seq``, wrong owner, ...);
accepted reports are passed on to plugins.

A report lands on one terminal surface (:func:`report_target`): the one ``surface_id``
names (hooks send ``$CMUX_SURFACE_ID``), else the terminal of ``pane_id``'s pane that the
reporting process runs in (its session is that terminal's, or, for a process that left the
session, the terminal's process is among its parents), else the one the pane shows.

"""

from __future__ import annotations

import os
import unicodedata
from typing import Any

from pydantic import Field

from cmux_core.agents.authority import SessionRef
from cmux_core.agents.metadata import MetadataPatch
from cmux_core.agents.tracker import AgentTracker
from cmux_core.api.context import Call
from cmux_core.api.dispatch import MethodTable, Result, services
from cmux_core.api.methods.shared.reports import (
    MAX_ANCESTRY,
    MAX_CUSTOM_STATUS_CHARS,
    MAX_SESSION_ID_BYTES,
    MAX_SESSION_PATH_BYTES,
    MAX_TEXT_CHARS,
    MAX_TTL_MS,
    START_SOURCES,
    check_source,
    check_state_labels,
    check_tokens,
    check_ttl,
    clean_text,
)
from cmux_core.api.report_socket import ReportSockets
from cmux_core.detect.manifest import AgentState
from cmux_core.errors import CmuxError, InvalidParams
from cmux_core.hookspecs import Params
from cmux_core.model.mux import Mux
from cmux_core.model.pane_io import ancestry
from cmux_core.model.tree import Surface
from cmux_core.plugin_host.host import PluginHost


@services
class ReportServices:
    mux: Mux
    agents: AgentTracker
    plugins: PluginHost
    report_sockets: ReportSockets


methods = MethodTable()


def session_ref(source: str, agent: str, session_id: str | None,
                session_path: str | None) -> SessionRef | None:
    """The session reference a report carries (an id, else an absolute path); invalid
    values are dropped."""
    def clean(value: str | None, limit: int) -> str | None:
        if value is None or not value or len(value.encode()) > limit:
            return None
        if any(unicodedata.category(ch) == "Cc" for ch in value):
            return None
        return value

    sid = clean(session_id, MAX_SESSION_ID_BYTES)
    if sid is not None:
        return SessionRef(source, agent, "id", sid)
    path = clean(session_path, MAX_SESSION_PATH_BYTES)
    if path is not None and os.path.isabs(path):
        return SessionRef(source, agent, "path", path)
    return None


def report_target(call: Call[ReportServices], p: ReportTarget) -> Surface:
    """The terminal surface a hook report is about (module doc).

    ``surface_id`` wins over ``pane_id``: a surface moved to another pane keeps the
    ``CMUX_PANE_ID`` it was started with. Raises ``surface_not_found``/``pane_not_found``,
    ``invalid_params`` for a markdown surface or when neither id is given.
    """
    mux = call.ctx.mux
    if p.surface_id is not None:
        surface = mux.surface(p.surface_id)
        if surface.term is None:
            raise InvalidParams("surface_id", "Surface is not a terminal")
        return surface
    if p.pane_id is None:
        raise InvalidParams("pane_id", "field required")
    pane = mux.pane(p.pane_id)
    pid = call.connection.peer_pid if call.connection is not None else None
    # Each live terminal by its process (the leader of its session); an exited one's pid
    # may belong to another process by now.
    terminals = {s.terminal.pid: s for s in pane.surfaces
                 if s.term is not None and s.terminal.pid > 0 and not s.terminal.exited}
    if pid is not None and len(terminals) > 1:
        try:
            found = terminals.get(os.getsid(pid))
        except OSError:
            found = None
        if found is not None:
            return found
        # A process that left its terminal's session (setsid, a multiplexer inside).
        for ancestor in ancestry(pid, MAX_ANCESTRY):
            if ancestor in terminals:
                return terminals[ancestor]
    return pane.terminal_surface


class ReportTarget(Params):
    """The terminal a report is about (:func:`report_target`)."""

    pane_id: str | None = None
    surface_id: str | None = None


class SourceReport(ReportTarget):
    """A report of the declared ``source`` about ``agent``; ``seq`` orders the source's
    reports."""

    source: str
    agent: str
    seq: int | None = Field(default=None, ge=0)


def source_target(call: Call[ReportServices], p: SourceReport) -> tuple[Surface, str]:
    """The terminal a source's report is about (:func:`report_target`) and the agent it
    names, as the tracker labels agents."""
    return report_target(call, p), call.ctx.agents.normalise_label(p.agent)


class ReportAgentParams(SourceReport):
    state: AgentState
    message: str | None = None
    custom_status: str | None = None
    agent_session_id: str | None = None
    agent_session_path: str | None = None
    launch_env: dict[str, Any] | None = None
    ttl_ms: int | None = Field(default=None, ge=1, le=MAX_TTL_MS)
    """How long the reported state counts; after it the screen decides again."""
    subagent: bool = False
    """The report comes from a subagent of the pane's agent: it never moves the state."""


@methods.method("pane.report_agent", ReportAgentParams)
async def pane_report_agent(call: Call[ReportServices], p: ReportAgentParams) -> Result:
    """Report an agent state from a hook; ``ok`` even when the report is ignored."""
    tracker = call.ctx.agents
    surface, agent = source_target(call, p)
    custom = clean_text(p.custom_status, MAX_CUSTOM_STATUS_CHARS) if p.custom_status else None
    accepted = tracker.report_agent(
        surface, source=p.source, agent=agent, state=p.state, seq=p.seq, message=p.message,
        custom_status=custom or None,
        session=session_ref(p.source, agent, p.agent_session_id, p.agent_session_path),
        ttl_s=p.ttl_ms / 1000 if p.ttl_ms is not None else None, subagent=p.subagent)
    if accepted:
        report = p.model_dump(exclude_none=True)
        report["agent"] = agent
        call.ctx.plugins.notify_report_agent(surface.pane.id, report)
    return {"type": "ok"}


class ReportSessionParams(SourceReport):
    agent_session_id: str | None = None
    agent_session_path: str | None = None
    session_start_source: str | None = None
    launch_env: dict[str, Any] | None = None


@methods.method("pane.report_agent_session", ReportSessionParams)
async def pane_report_agent_session(call: Call[ReportServices], p: ReportSessionParams) -> Result:
    """Record an agent's native session reference (declared sources only); never a state."""
    tracker = call.ctx.agents
    surface, agent = source_target(call, p)
    start = (p.session_start_source or "").strip()
    tracker.report_session(
        surface, source=p.source, agent=agent, seq=p.seq, replaces=start in START_SOURCES,
        session=session_ref(p.source, agent, p.agent_session_id, p.agent_session_path))
    return {"type": "ok"}


class ReleaseAgentParams(SourceReport):
    pass


@methods.method("pane.release_agent", ReleaseAgentParams)
async def pane_release_agent(call: Call[ReportServices], p: ReleaseAgentParams) -> Result:
    """The agent gives the pane back: its authority, name and label go (custom sources)."""
    tracker = call.ctx.agents
    surface, agent = source_target(call, p)
    tracker.release_agent(surface, source=p.source, agent=agent, seq=p.seq)
    return {"type": "ok"}


class ClearAuthorityParams(ReportTarget):
    source: str | None = None
    seq: int | None = Field(default=None, ge=0)


@methods.method("pane.clear_agent_authority", ClearAuthorityParams)
async def pane_clear_agent_authority(call: Call[ReportServices], p: ClearAuthorityParams) -> Result:
    """Drop the hook authority (of ``source`` when given); the screen decides again."""
    tracker = call.ctx.agents
    surface = report_target(call, p)
    tracker.clear_authority(surface, source=p.source, seq=p.seq)
    return {"type": "ok"}


class ReportMetadataParams(ReportTarget):
    source: str
    agent: str | None = None
    applies_to_source: str | None = None
    title: str | None = None
    display_agent: str | None = None
    custom_status: str | None = None
    state_labels: dict[str, Any] | None = None
    tokens: dict[str, Any] | None = None
    clear_title: bool = False
    clear_display_agent: bool = False
    clear_custom_status: bool = False
    clear_state_labels: bool = False
    seq: int | None = Field(default=None, ge=0)
    ttl_ms: int | None = None


def metadata_patch(tracker: AgentTracker, p: ReportMetadataParams) -> MetadataPatch:
    """Validate a pane metadata report in the documented order; the first failure wins."""
    agent = tracker.normalise_label(p.agent) if p.agent is not None else None
    source = check_source(p.source)
    tokens = check_tokens(p.tokens)
    ttl_s = check_ttl(p.ttl_ms)
    texts = {"title": (p.title, MAX_TEXT_CHARS), "display_agent": (p.display_agent,
             MAX_TEXT_CHARS), "custom_status": (p.custom_status, MAX_CUSTOM_STATUS_CHARS)}
    set_fields = {name: clean_text(value, limit) for name, (value, limit) in texts.items()
                  if value is not None}
    set_fields = {name: value for name, value in set_fields.items() if value}
    applies = (check_source(p.applies_to_source, "applies_to_source")
               if p.applies_to_source is not None else None)
    labels = check_state_labels(p.state_labels)
    clears = {"title": p.clear_title, "display_agent": p.clear_display_agent,
              "custom_status": p.clear_custom_status, "state_labels": p.clear_state_labels}
    raw = {"title": p.title, "display_agent": p.display_agent,
           "custom_status": p.custom_status, "state_labels": p.state_labels}
    if any(clears[name] and raw[name] is not None for name in clears):
        raise CmuxError("invalid_metadata_request",
                        "cannot set and clear the same metadata field")
    clear_fields = {name for name, flag in clears.items() if flag}
    if not (tokens or set_fields or labels or clear_fields):
        raise CmuxError("invalid_metadata_request", "missing metadata field to set or clear")
    return MetadataPatch(source, tokens, set_fields, labels, clear_fields, agent, applies,
                         p.seq, ttl_s)


@methods.method("pane.report_metadata", ReportMetadataParams)
async def pane_report_metadata(call: Call[ReportServices], p: ReportMetadataParams) -> Result:
    """Set or clear a pane's tokens and presentation (title, display agent, labels)."""
    tracker = call.ctx.agents
    surface = report_target(call, p)
    patch = metadata_patch(tracker, p)
    if tracker.report_metadata(surface, patch):
        report = p.model_dump(exclude_none=True)
        report.update(source=patch.source, tokens=patch.tokens)
        call.ctx.plugins.notify_report_metadata(surface.pane.id, report)
    return {"type": "ok"}


class OpenReportSocketParams(ReportTarget):
    pass


@methods.method("pane.open_report_socket", OpenReportSocketParams)
async def pane_open_report_socket(call: Call[ReportServices], p: OpenReportSocketParams
                                  ) -> Result:
    """Open a socket that accepts only hook reports for one terminal, until its pane closes
    or this connection ends; returns its path."""
    surface = report_target(call, p)
    opened = await call.ctx.report_sockets.open(surface, call.connection)
    return {"type": "report_socket", "path": str(opened.path), "pane_id": surface.pane.id,
            "surface_id": surface.uuid}
