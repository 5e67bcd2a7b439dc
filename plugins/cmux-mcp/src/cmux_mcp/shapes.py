"""What the tools answer: compact, typed projections of cmux's rows.

cmux's own rows carry both method families' fields (UUIDs, refs, pixel frames); a model
reading them pays for every one. These models keep what an orchestrating agent acts on, and
are the tools' output schemas.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from cmux_mcp.bridge import Row


class Workspace(BaseModel):
    workspace_id: str
    label: str | None = None
    focused: bool = False
    pane_count: int = 0
    status: str = Field(description="the status of its pane that needs the most attention")
    cwd: str | None = None


class Pane(BaseModel):
    pane_id: str
    workspace_id: str
    tab_id: str | None = None
    title: str | None = None
    cwd: str | None = None
    focused: bool = False
    status: str = Field(description="idle, working, blocked, done or unknown")
    agent: str | None = Field(default=None,
                              description="the agent detected in the pane (claude, ...)")
    name: str | None = Field(default=None, description="the agent's name, from start_agent")
    changed_at: float | None = Field(default=None, description="unix time of the last state change")
    exited: bool = False
    exit_code: int | None = None


class Agent(BaseModel):
    pane_id: str
    workspace_id: str
    name: str | None = Field(default=None, description="its name, from start_agent; a target")
    agent: str | None = Field(default=None, description="which agent it is (claude, codex, ...)")
    status: str = Field(description="idle, working, blocked, done or unknown")
    cwd: str | None = None
    changed_at: float | None = Field(default=None, description="unix time of the last state change")
    state_change_seq: int = Field(default=0, description="server-wide number of the last change")
    launch_pending: bool = Field(default=False, description="started, not yet seen drawing its "
                                 "input box")
    message: str | None = Field(default=None, description="what its last hook report said")


class Screen(BaseModel):
    pane_id: str
    source: str = Field(description="visible: the screen; recent: the last lines with "
                        "scrollback")
    text: str
    truncated: bool = Field(description="more lines were there than were read")


class WorkspaceList(BaseModel):
    workspaces: list[Workspace]


class PaneList(BaseModel):
    panes: list[Pane]


class AgentList(BaseModel):
    agents: list[Agent]


class PaneResult(BaseModel):
    pane: Pane


class AgentResult(BaseModel):
    agent: Agent


class Prompted(BaseModel):
    agent: Agent
    screen: Screen | None = Field(default=None, description="with wait: the end of its pane's text "
                                  "when the turn ended")


class AgentTurn(BaseModel):
    agent: Agent
    screen: Screen = Field(description="the end of its pane's text when the wait ended")


class OutputMatch(BaseModel):
    pane_id: str
    matched_line: str
    screen: Screen


class Done(BaseModel):
    ok: bool = True


class RuleEvidence(BaseModel):
    id: str
    state: str
    matched: bool


class Explanation(BaseModel):
    agent: str | None = None
    state: str | None = None
    matched_rule: str | None = None
    identified_by: str | None = None
    reason: str | None = Field(default=None, description="why no rule decided, when none did")
    rules: list[RuleEvidence] = Field(default_factory=list,
                                      description="every rule of its manifest, in order")


def _status(row: Row) -> str:
    return str(row.get("agent_status") or row.get("status") or "unknown")


def workspace(row: Row) -> Workspace:
    return Workspace(workspace_id=row["workspace_id"], label=row.get("label"),
                     focused=bool(row.get("focused")), pane_count=int(row.get("pane_count", 0)),
                     status=_status(row), cwd=row.get("cwd"))


def pane(row: Row) -> Pane:
    return Pane(pane_id=row["pane_id"], workspace_id=row["workspace_id"],
                tab_id=row.get("tab_id"), title=row.get("title") or row.get("label"),
                cwd=row.get("foreground_cwd") or row.get("cwd"),
                focused=bool(row.get("focused")), status=_status(row), agent=row.get("agent"),
                name=row.get("name"), changed_at=row.get("status_changed_at"),
                exited=bool(row.get("exited")), exit_code=row.get("exit_code"))


def agent(row: Row) -> Agent:
    return Agent(pane_id=row["pane_id"], workspace_id=row["workspace_id"], name=row.get("name"),
                 agent=row.get("agent"), status=_status(row),
                 cwd=row.get("foreground_cwd") or row.get("cwd"),
                 changed_at=row.get("status_changed_at"),
                 state_change_seq=int(row.get("state_change_seq", 0)),
                 launch_pending=bool(row.get("launch_pending")), message=row.get("message"))


def screen(read: Row) -> Screen:
    return Screen(pane_id=read["pane_id"], source=read.get("source", "recent"),
                  text=read.get("text", ""), truncated=bool(read.get("truncated")))


def explanation(row: Row) -> Explanation:
    matched: Any = row.get("matched_rule")
    return Explanation(
        agent=row.get("agent"), state=row.get("state"),
        matched_rule=matched.get("id") if isinstance(matched, dict) else None,
        identified_by=row.get("identified_by"),
        reason=row.get("fallback_reason") or row.get("skipped_update_reason"),
        rules=[RuleEvidence(id=r["id"], state=r["state"], matched=bool(r.get("matched")))
               for r in row.get("evaluated_rules", [])])
