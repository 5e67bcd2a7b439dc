"""integration.* methods: list, inspect, install and uninstall the integrations plugins register.

Results follow the herdr Local API where it has the method (``integration_install
{target, details: {messages}}``, errors ``integration_install_failed`` /
``integration_uninstall_failed``) and also carry ``messages`` at the top level and the
``files`` the integration reported. How the callables are called is
:mod:`cmux_core.plugin_host.integrations`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import Field

from cmux_core.api.context import Call
from cmux_core.api.dispatch import MethodTable, Result, services
from cmux_core.errors import CmuxError, NotFound
from cmux_core.hookspecs import Params
from cmux_core.plugin_host.host import PluginHost
from cmux_core.plugin_host.integrations import (
    Action,
    IntegrationOutcome,
    read_status,
    run_action,
)
from cmux_core.plugin_host.registry import Integration
from cmux_core.plugin_host.settings_files import FileChange


@services
class IntegrationServices:
    plugins: PluginHost


methods = MethodTable()


class IntegrationListParams(Params):
    status: bool = True
    """Call every integration's ``status()`` (a failing one shows its error)."""


class IntegrationTargetParams(Params):
    target: str = Field(min_length=1)


class IntegrationInstallParams(IntegrationTargetParams):
    dry_run: bool = False
    options: dict[str, Any] = Field(default_factory=dict)


class IntegrationUninstallParams(IntegrationTargetParams):
    dry_run: bool = False


def _find(call: Call[IntegrationServices], target: str) -> Integration:
    integration = call.ctx.plugins.integrations().get(target)
    if integration is None:
        known = sorted(call.ctx.plugins.integrations())
        raise NotFound("integration", target,
                       f"no integration named {target!r}"
                       + (f" (registered: {', '.join(known)})" if known else
                          " (no plugin registers any)"))
    return integration


def _describe(integration: Integration) -> dict[str, Any]:
    return {
        "name": integration.name,
        "target": integration.name,
        "plugin_id": integration.plugin_id,
        "description": integration.description,
        "source": integration.source,
        "agent": integration.agent,
        "authority": integration.authority,
        "state_ttl_ms": integration.state_ttl_ms,
    }


async def _status_or_error(call: Call[IntegrationServices], integration: Integration
                           ) -> dict[str, Any]:
    try:
        return await read_status(call.ctx.plugins, integration)
    except CmuxError as exc:
        return {"installed": None, "error": exc.to_wire()}


@methods.method("integration.list", IntegrationListParams)
async def integration_list(call: Call[IntegrationServices], p: IntegrationListParams) -> Result:
    """Every registered integration, with its declaration and (by default) its status."""
    found = sorted(call.ctx.plugins.integrations().values(), key=lambda i: i.name)
    rows = [_describe(integration) for integration in found]
    if p.status:
        statuses = await asyncio.gather(*(_status_or_error(call, i) for i in found))
        for row, status in zip(rows, statuses, strict=True):
            row["status"] = status
    return {"type": "integration_list", "integrations": rows}


@methods.method("integration.status", IntegrationTargetParams)
async def integration_status(call: Call[IntegrationServices], p: IntegrationTargetParams) -> Result:
    """One integration's declaration and what its ``status()`` says."""
    integration = _find(call, p.target)
    status = await read_status(call.ctx.plugins, integration)
    return {"type": "integration_status", **_describe(integration), "status": status,
            "installed": status["installed"]}


@methods.method("integration.install", IntegrationInstallParams)
async def integration_install(call: Call[IntegrationServices],
                              p: IntegrationInstallParams) -> Result:
    """Install an integration (``dry_run``: say what would change, write nothing)."""
    return await _run(call, "install", p.target, dry_run=p.dry_run, options=p.options)


@methods.method("integration.uninstall", IntegrationUninstallParams)
async def integration_uninstall(call: Call[IntegrationServices],
                                p: IntegrationUninstallParams) -> Result:
    """Remove what an integration installed (``dry_run``: say what would change)."""
    return await _run(call, "uninstall", p.target, dry_run=p.dry_run, options=None)


async def _run(call: Call[IntegrationServices], action: Action, target: str, *, dry_run: bool,
               options: dict[str, Any] | None) -> Result:
    integration = _find(call, target)
    outcome = await run_action(call.ctx.plugins, integration, action, dry_run=dry_run,
                               options=options)
    return _result(action, integration, outcome, dry_run=dry_run)


def _result(action: Action, integration: Integration, outcome: IntegrationOutcome, *,
            dry_run: bool) -> Result:
    return {
        "type": f"integration_{action}",
        "target": integration.name,
        "plugin_id": integration.plugin_id,
        "dry_run": dry_run,
        "details": {"messages": outcome.messages},
        "messages": outcome.messages,
        "files": [_file(change, dry_run=dry_run) for change in outcome.files],
    }


def _file(change: FileChange, *, dry_run: bool) -> dict[str, Any]:
    return {
        "path": str(change.path),
        "changed": change.changed,
        "created": change.changed and change.before is None,
        "removed": change.changed and change.after is None,
        "backup": str(change.backup) if change.backup is not None else None,
        "summary": change.summary(dry_run=dry_run),
        "diff": change.diff(),
    }
