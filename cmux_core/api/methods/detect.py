"""Agent detection methods: ``agent.explain`` and the manifest status and reload calls.

Result shapes follow the herdr Local API: ``agent_explain {explain}`` (every rule's
evidence for the pane's live screen), ``agent_manifest_status {last_check_unix,
last_result, manifests}`` and ``agent_manifest_reload {manifests}``, where each
manifest entry is an ``AgentManifestInfo``. The detection runtime is
``call.ctx.detection``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from cmux_core.agents.targets import resolve_agent_target
from cmux_core.api.context import Call
from cmux_core.api.dispatch import MethodTable, Result
from cmux_core.hookspecs import Params

if TYPE_CHECKING:
    from cmux_core.agents.scheduler import DetectionScheduler

methods = MethodTable()


async def _runtime(call: Call) -> DetectionScheduler:
    """The server's detection runtime once its manifests are loaded."""
    runtime = call.ctx.detection
    await runtime.registry.loaded.wait()
    return runtime


class Empty(Params):
    pass


class AgentTargetParams(Params):
    target: str = Field(min_length=1)


@methods.method("agent.explain", AgentTargetParams)
async def agent_explain(call: Call, p: AgentTargetParams) -> Result:
    """Why the agent's screen reads as its state: the manifest in force and every rule's
    evidence. ``agent_explain_unavailable`` when the pane has no agent with a manifest."""
    runtime = await _runtime(call)
    surface = resolve_agent_target(call.ctx.agents, p.target)
    return {"type": "agent_explain", "explain": await runtime.explain(surface)}


@methods.method("server.agent_manifests", Empty)
async def server_agent_manifests(call: Call, p: Empty) -> Result:
    """The manifest in force per agent, its source and any warning; reloads nothing."""
    return (await _runtime(call)).registry.status()


@methods.method("server.reload_agent_manifests", Empty)
async def server_reload_agent_manifests(call: Call, p: Empty) -> Result:
    """Re-read and re-validate every manifest source now, then re-detect every pane."""
    registry = (await _runtime(call)).registry
    report = await registry.reload("request", force=True)
    return {"type": "agent_manifest_reload", "manifests": registry.infos(),
            "files": [r.to_wire() for r in report.files]}
