"""Calling the integrations plugins register: ``install``, ``uninstall`` and ``status``.

The contract (documented for plugin authors on
:func:`cmux_core.hookspecs.cmux_register_integrations`):

* ``install(*, dry_run=False, options={})`` and ``uninstall(*, dry_run=False)`` are called
  with only the keywords their signature accepts (a ``**kwargs`` accepts all). A dry run of a
  callable without ``dry_run`` is ``not_supported``, and so are options for an ``install``
  without ``options``; nothing is called then.
* They return a list of messages (``str``) and/or
  :class:`~cmux_core.plugin_host.settings_files.FileChange` records (or ``None``); each
  record becomes a message, carrying its diff in a dry run.
* ``status()`` returns a mapping with at least ``installed: bool``.
* A :class:`~cmux_core.plugin_host.settings_files.SettingsError` they raise is
  ``integration_<action>_failed`` with its message. Before a real ``install`` or
  ``uninstall`` of a callable that takes ``dry_run``, a dry run is made first, so a file
  that cannot be parsed is found before any file is written.

Every call goes through :meth:`PluginHost.invoke`: the plugin's worker thread (or the loop
for coroutines) under the host's time budget; a crash or timeout is recorded against the
plugin and answered as ``integration_<action>_failed``.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from cmux_core.errors import CmuxError
from cmux_core.plugin_host.registry import Integration
from cmux_core.plugin_host.settings_files import FileChange, SettingsError

if TYPE_CHECKING:
    from cmux_core.plugin_host.host import PluginHost

Action = Literal["install", "uninstall"]

_HOST_FAILURES = frozenset({"plugin_failed", "plugin_timeout", "plugin_disabled"})


@dataclass(frozen=True, slots=True)
class IntegrationOutcome:
    """What one install or uninstall said and which files it reported."""

    messages: list[str] = field(default_factory=list)
    files: list[FileChange] = field(default_factory=list)


def accepted_keywords(fn: Callable[..., Any]) -> frozenset[str] | None:
    """The keyword names ``fn`` accepts; ``None`` when it takes ``**kwargs``."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return frozenset()
    names: set[str] = set()
    for param in signature.parameters.values():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            return None
        if param.kind in (inspect.Parameter.KEYWORD_ONLY,
                          inspect.Parameter.POSITIONAL_OR_KEYWORD):
            names.add(param.name)
    return frozenset(names)


async def run_action(host: PluginHost, integration: Integration, action: Action, *,
                     dry_run: bool = False,
                     options: Mapping[str, Any] | None = None) -> IntegrationOutcome:
    """Run ``integration``'s ``install`` or ``uninstall`` and turn its answer into messages.

    Raises ``not_supported`` (nothing called), ``integration_<action>_failed`` (a settings
    file that cannot be parsed or written, a crash, a timeout, an answer of the wrong
    shape), or a :class:`CmuxError` the callable raised itself.
    """
    fn: Callable[..., Any] = getattr(integration, action)
    accepted = accepted_keywords(fn)
    kwargs: dict[str, Any] = {}
    takes_dry_run = accepted is None or "dry_run" in accepted
    if dry_run:
        if not takes_dry_run:
            raise CmuxError("not_supported",
                            f"integration {integration.name}: {action} has no dry run",
                            {"target": integration.name, "action": action})
        kwargs["dry_run"] = True
    if options:
        if action != "install" or not (accepted is None or "options" in accepted):
            raise CmuxError("not_supported",
                            f"integration {integration.name}: {action} takes no options",
                            {"target": integration.name, "action": action})
        kwargs["options"] = dict(options)
    if not dry_run and takes_dry_run:
        await _call(host, integration, action, fn, {**kwargs, "dry_run": True})
    result = await _call(host, integration, action, fn, kwargs)
    return _outcome(integration, action, result, dry_run=dry_run)


async def read_status(host: PluginHost, integration: Integration) -> dict[str, Any]:
    """``integration``'s ``status()`` mapping, made JSON-safe; ``integration_status_failed``
    when it fails or answers without a boolean ``installed``."""
    result = await _call(host, integration, "status", integration.status, {})
    if not isinstance(result, Mapping) or not isinstance(result.get("installed"), bool):
        raise _failure(integration, "status",
                       f"status() returned {_kind(result)}, not a mapping with a boolean "
                       "'installed'")
    status: dict[str, Any] = json.loads(json.dumps(dict(result), default=str))
    return status


async def _call(host: PluginHost, integration: Integration, action: str,
                fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    label = f"integration {integration.name}.{action}"
    try:
        return await host.invoke(integration.plugin_id, label, _guarded(fn, integration, action),
                                 **kwargs)
    except CmuxError as exc:
        if exc.code in _HOST_FAILURES:
            raise _failure(integration, action, exc.message, cause=exc.code) from exc
        raise


def _guarded(fn: Callable[..., Any], integration: Integration, action: str
             ) -> Callable[..., Any]:
    """``fn`` with a :class:`SettingsError` turned into the action's error, so a settings
    file the user broke is reported as such rather than counted as a plugin fault."""
    if inspect.iscoroutinefunction(fn):
        async def run_async(**kwargs: Any) -> Any:
            try:
                return await fn(**kwargs)
            except SettingsError as exc:
                raise _failure(integration, action, str(exc)) from exc
        return run_async

    def run(**kwargs: Any) -> Any:
        try:
            result = fn(**kwargs)
        except SettingsError as exc:
            raise _failure(integration, action, str(exc)) from exc
        if inspect.isawaitable(result):
            return _awaited(result, integration, action)
        return result
    return run


async def _awaited(awaitable: Any, integration: Integration, action: str) -> Any:
    try:
        return await awaitable
    except SettingsError as exc:
        raise _failure(integration, action, str(exc)) from exc


def _outcome(integration: Integration, action: str, result: Any, *,
             dry_run: bool) -> IntegrationOutcome:
    if result is None:
        return IntegrationOutcome()
    if isinstance(result, (str, bytes, Mapping)) or not isinstance(result, (list, tuple)):
        raise _failure(integration, action, f"{action}() returned {_kind(result)}, not a list "
                       "of messages or FileChange records")
    messages: list[str] = []
    files: list[FileChange] = []
    for item in result:
        if isinstance(item, str):
            messages.append(item)
        elif isinstance(item, FileChange):
            files.append(item)
            line = item.summary(dry_run=dry_run)
            diff = item.diff()
            messages.append(f"{line}\n{diff.rstrip()}" if dry_run and diff else line)
        else:
            raise _failure(integration, action, f"{action}() returned a list holding "
                           f"{_kind(item)}, not only messages and FileChange records")
    return IntegrationOutcome(messages, files)


def _failure(integration: Integration, action: str, message: str, *,
             cause: str | None = None) -> CmuxError:
    data: dict[str, Any] = {"target": integration.name, "plugin_id": integration.plugin_id}
    if cause is not None:
        data["cause"] = cause
    return CmuxError(f"integration_{action}_failed",
                     f"integration {integration.name}: {message}", data)


def _kind(value: object) -> str:
    return "None" if value is None else f"a {type(value).__name__}"
