"""The plugin contract: every ``cmux_*`` hook, its arguments and what a plugin may do in it.

A plugin is a module (an entry point in group ``cmux``, or a loose ``*.py`` file in a
plugin directory) holding functions marked with :data:`hookimpl`, each named after one
hook below. A hookimpl declares only the arguments it uses; hooks may gain arguments in
later versions, never lose them.

How the host calls hooks (``cmux_core.plugin_host.host.PluginHost``):

* pluggy collects and validates hookimpls (``check_pending`` refuses a misspelt one), but it
  never calls them: the host looks up each plugin's hookimpls and calls them itself, so it can
  choose the thread, enforce a time budget and contain failures per plugin. pluggy's own
  calling features (``pm.hook.<name>(...)``, ``historic`` replay, ``firstresult``, tracing
  and hook wrappers) are therefore not used; no hook below is marked with them, and a plugin
  holding a hook wrapper is refused. ``CMUX_TRACE_PLUGINS=1`` logs every call the host makes.
* Always with keyword arguments, one plugin at a time, each call in its own ``try``: a
  hookimpl that raises is logged with the plugin's id, recorded against that plugin and
  contained; the other plugins' results are kept. A plugin whose hookimpls fail five times in
  a row is blocked (unloaded and shown with its errors in ``plugin.list``).
* A hookimpl may be ``def`` or ``async def``; neither runs on the server's event loop.
  Coroutines run on an event loop of the plugin's own (on a thread of its own), plain
  functions on the plugin's worker thread, so a slow or stuck one delays only that plugin;
  neither may touch server objects. A plugin whose isolation is ``process`` (docs/plugins.md,
  "A process of its own") has both in a process of its own; there, what crosses is data, and
  ``cmux_register_view_sorts``, ``cmux_register_view_filters`` and
  ``cmux_register_graphics_sources`` raise :class:`RegistrationError`.
* Every call has a time budget: past a soft limit a warning is recorded, past the hard limit
  the host stops waiting and counts a failure.
* Contribution hooks (``cmux_register_*``) receive a ``register`` callback. They are called
  once per plugin, when that plugin is loaded (at startup, on enable, link or hot reload),
  not when another plugin loads. Everything registered belongs to the plugin and is withdrawn
  when it is unloaded, disabled, blocked or replaced by a reload. ``register`` validates its
  arguments and raises :class:`RegistrationError` (a ``ValueError``) for a bad name, a wrong
  type or a name another plugin already holds; a plugin may catch it and carry on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import pluggy
from pydantic import BaseModel, ConfigDict

PROJECT = "cmux"

hookspec = pluggy.HookspecMarker(PROJECT)
"""Marks a hook specification in this module."""

hookimpl = pluggy.HookimplMarker(PROJECT)
"""Marks a plugin function as the implementation of the ``cmux_*`` hook of the same name."""


class Params(BaseModel):
    """Base of every params model, core and plugin: unknown keys are ignored, as both
    method families' clients expect, and values are not converted: ``"5"`` or ``1.7`` for
    an int, ``1`` or ``"true"`` for a bool, ``5`` for a string are ``invalid_params`` naming
    the field. A float field takes a JSON integer too."""

    model_config = ConfigDict(strict=True, extra="ignore")


class RegistrationError(ValueError):
    """Raised by a ``register`` callback: bad name, wrong type, or a duplicate."""


AgentRow = Mapping[str, Any]
"""One agent row as the agent views see it: the pane's public fields (``pane_id``,
``workspace_id``, ``agent``, ``agent_status``, ``state_change_seq``, ``tokens``, ...)."""

GraphicsFrame = Mapping[str, Any]
"""One frame for a pane graphics layer: ``format`` (``png``/``rgb``/``rgba``/``bgra``),
``image_width``, ``image_height`` (pixels), ``data`` (bytes) and optionally ``placement``
(``viewport_col``, ``viewport_row``, ``grid_cols``, ``grid_rows``, in cells)."""



class PluginCall(Protocol):
    """What a plugin method handler receives as ``call``: who asked, and the socket API.

    Never the server object: a handler acts on the server only through :meth:`request`, with
    the same validation and errors as any client.
    """

    @property
    def plugin_id(self) -> str:
        """The id of the plugin whose method is being called."""
        ...

    @property
    def client_id(self) -> str | None:
        """The calling connection's id (``conn-<n>``); None for calls made inside the server."""
        ...

    @property
    def request_id(self) -> Any:
        """The request's ``id``, as the client sent it."""
        ...

    @property
    def method(self) -> str:
        """The full method name, ``plugin.<plugin_id>.<name>``."""
        ...

    async def request(self, method: str, params: Mapping[str, Any] | None = None
                      ) -> dict[str, Any]:
        """Answer one socket API call in-process, as the calling client, and return its
        ``result``; raises :class:`cmux_core.errors.CmuxError` when the call fails. For async
        handlers (on the plugin's loop; the call is answered on the server loop)."""
        ...

    def request_blocking(self, method: str, params: Mapping[str, Any] | None = None, *,
                         timeout: float = 30.0) -> dict[str, Any]:
        """:meth:`request` for sync handlers, which run on the plugin's worker thread: the
        call runs on the server loop while this thread waits (``TimeoutError`` after
        ``timeout`` seconds). Raises ``RuntimeError`` when called on the server loop."""
        ...


MethodHandler = Callable[[PluginCall, Any], Awaitable[dict[str, Any]] | dict[str, Any]]
"""``handler(call, params)`` returning the result dict; may be sync or async."""


class RegisterManifest(Protocol):
    def __call__(self, manifest: str | Path | Mapping[str, Any], /) -> None:
        """Register one detection manifest: TOML text, a path to a ``.toml`` file, or an
        already parsed table. It must have a string ``id``."""


class RegisterIntegration(Protocol):
    def __call__(self, name: str, *, install: Callable[..., Any],
                 uninstall: Callable[..., Any], status: Callable[[], Any],
                 description: str = "", source: str | None = None,
                 agent: str | None = None, authority: str | None = None,
                 state_ttl_ms: int | None = None) -> None:
        """Register one installable agent integration under ``name``."""


class RegisterViewSort(Protocol):
    def __call__(self, name: str, key: Callable[[AgentRow], Any], *,
                 description: str = "") -> None:
        """Register a sort key usable as a field in agent views."""


class RegisterViewFilter(Protocol):
    def __call__(self, name: str, predicate: Callable[[AgentRow], bool], *,
                 description: str = "") -> None:
        """Register a named predicate usable in agent view filters."""


class RegisterGraphicsSource(Protocol):
    def __call__(self, name: str,
                 open: Callable[[str, Mapping[str, Any]], AsyncIterator[GraphicsFrame]], *,
                 description: str = "") -> None:
        """Register a named frame source for pane graphics streams."""


class RegisterMethod(Protocol):
    def __call__(self, name: str, handler: MethodHandler, *,
                 params: type[Params] | None = None, doc: str = "") -> None:
        """Register the socket method ``plugin.<plugin_id>.<name>``."""


# -- contribution hooks ---------------------------------------------------------------------


@hookspec
def cmux_register_manifests(register: RegisterManifest) -> None:
    """Supply agent-detection manifests.

    ``register(manifest)`` takes TOML text, a :class:`~pathlib.Path` to a ``.toml`` file, or a
    parsed mapping, in the herdr manifest format (``id``, ``aliases``, ``rules``, ...). The host
    checks that it parses and names a string ``id``; agent detection validates the rest and
    treats plugin manifests as the lowest-precedence source (bundled, user and
    ``--manifests-dir`` manifests override them). Two plugins may not register the same ``id``.

    Called once when the plugin is loaded, on the plugin's loop (async impls) or its worker
    thread (sync impls). Read files here if needed; do not start background work.
    """


@hookspec
def cmux_register_integrations(register: RegisterIntegration) -> None:
    """Supply installable agent integrations (for example an agent's own hook scripts).

    ``register(name, install=..., uninstall=..., status=..., description="")``: ``name`` is
    the integration target (``claude``), unique across plugins. The callables are called
    later by the ``integration.*`` methods (and ``cmux integration ...``), never at load
    time, each under the same isolation and time budget as hooks; they may be sync (run on
    the plugin's worker thread) or async:

    * ``install(*, dry_run=False, options={})`` and ``uninstall(*, dry_run=False)`` change
      the user's agent configuration. The host passes only the keywords the signature
      accepts: a callable without ``dry_run`` asked for a dry run answers ``not_supported``
      (so does an ``install`` without ``options`` given options); with ``dry_run=True`` it
      must write nothing. When it takes ``dry_run``, a real call is preceded by a dry run,
      so a settings file that cannot be parsed stops it before anything is written.
    * Both return a list of human-readable messages (``str``) and/or
      :class:`cmux_core.plugin_host.settings_files.FileChange` records (or None); the host
      turns each record into a message and, for a dry run, adds its diff. Edit files with
      :mod:`cmux_core.plugin_host.settings_files`; a ``SettingsError`` becomes
      ``integration_install_failed`` / ``integration_uninstall_failed`` with its message.
    * ``status()`` returns a mapping with at least ``installed: bool`` (more keys are shown
      as they are).

    ``source``, ``agent`` and ``authority`` declare what the integration's hook reports
    (``pane.report_agent`` with that ``source`` for that ``agent``) may decide: ``authority``
    is ``"lifecycle"``, ``"session"`` or ``"shared"``, and ``state_ttl_ms`` bounds a
    ``shared`` report's ``blocked`` that the screen does not confirm. What each authority
    decides is in docs/agents.md, "Authority" (the rules: :mod:`cmux_core.agents.authority`).

    Called once when the plugin is loaded. Do not install anything here.
    """


@hookspec
def cmux_register_view_sorts(register: RegisterViewSort) -> None:
    """Supply named sort keys for agent views.

    ``register(name, key, description="")``: ``key(row)`` receives one agent row (a read-only
    mapping of the pane's public fields) and returns a comparable value; views sort ascending
    or descending by it as the request says. ``key`` must be fast, pure and synchronous: it is
    called for every row of every view evaluation, on the plugin's worker thread within its
    time budget (one that raises or overruns counts as a missing value). Names are unique
    across plugins.

    Called once when the plugin is loaded.
    """


@hookspec
def cmux_register_view_filters(register: RegisterViewFilter) -> None:
    """Supply named predicates for agent view filters.

    ``register(name, predicate, description="")``: ``predicate(row)`` receives one agent row
    and returns whether it belongs in the view. Like sort keys it must be fast, pure and
    synchronous. Names are unique across plugins.

    Called once when the plugin is loaded.
    """


@hookspec
def cmux_register_graphics_sources(register: RegisterGraphicsSource) -> None:
    """Supply named frame sources for pane graphics streams.

    ``register(name, open, description="")``: ``open(pane_id, options)`` returns an async
    iterator of frames (mappings with ``format`` png/rgb/rgba/bgra, ``image_width``,
    ``image_height``, ``data`` bytes, optional ``placement``); a frame may be ``None``,
    meaning nothing new. Names are unique across plugins. ``pane.graphics.attach_source``
    calls ``open`` and then pulls one frame at a time on the plugin's loop, each pull a plugin
    call under the time budget; each frame replaces the layer's image. A source that
    raises, yields an invalid frame or overruns the budget is stopped, recorded against the
    plugin, and its layer cleared; the iterator is closed (``aclose``) when the source is
    detached or its layer, pane or plugin goes.

    Called once when the plugin is loaded.
    """


@hookspec
def cmux_register_methods(register: RegisterMethod) -> None:
    """Add socket API methods.

    ``register(name, handler, params=None, doc="")`` adds ``plugin.<plugin_id>.<name>``:
    ``name`` is one or more dot-separated lowercase words; the prefix means a plugin can never
    shadow a core method. ``params`` is a :class:`Params` subclass used to validate the
    request (``invalid_params`` names the bad field); without it the handler gets the raw params
    dict. ``handler(call, params)`` gets a :class:`PluginCall` (never the server object), may be
    sync or async and returns the result dict (the host adds ``"type": "plugin_result"``
    when it has none). Raising :class:`cmux_core.errors.CmuxError` answers with that error;
    anything else answers ``internal_error`` and is recorded against the plugin. Async
    handlers run on the plugin's own loop, sync handlers on its worker thread.

    Called once when the plugin is loaded.
    """


# -- observers ------------------------------------------------------------------------------


@hookspec
def cmux_on_report_agent(pane_id: str, source: str, agent: str, state: str,
                         message: str | None, report: Mapping[str, Any]) -> None:
    """Observe an agent state report (``pane.report_agent``) after the server accepted it.

    ``pane_id`` is the pane's public id; ``source``, ``agent``, ``state`` (``idle``,
    ``working``, ``blocked``, ``unknown``) and ``message`` come from the request; ``report``
    holds all of its params, read-only. The return value is ignored.

    Called after the report was applied, never before the request is answered; calls for one
    plugin are delivered in order, through a bounded queue (a plugin that falls far behind
    loses reports and gets a warning).
    """


@hookspec
def cmux_on_report_metadata(pane_id: str, source: str, tokens: Mapping[str, str | None],
                            report: Mapping[str, Any]) -> None:
    """Observe a presentation-metadata report (``pane.report_metadata``).

    ``tokens`` maps token names to values (None clears one); ``report`` holds every param of
    the request (``title``, ``display_agent``, ``state_labels``, ``ttl_ms``, ...), read-only.
    Delivered like :func:`cmux_on_report_agent`. The return value is ignored.
    """


@hookspec
def cmux_on_event(kind: str, data: Mapping[str, Any]) -> None:
    """Observe every server event (``pane_created``, ``pane_agent_status_changed``, ...).

    ``kind`` is the snake_case event kind and ``data`` its payload (``data["type"] == kind``),
    read-only. ``plugin_error`` events are not delivered here, so a failing observer cannot
    feed itself. Agent changes come twice for a pane's shown terminal:
    ``surface_agent_*`` for every terminal (``shown: false`` in a background tab), and
    ``pane_agent_*`` for the terminal a pane shows only. Delivered in order per plugin
    through a bounded queue, after the event was sent to subscribers. To act on the
    server, call its socket API.
    """


# -- lifecycle ------------------------------------------------------------------------------


@hookspec
def cmux_startup(plugin_id: str, state_dir: Path, socket_path: str | None) -> None:
    """The server is serving: start background work here.

    ``plugin_id`` is the id the plugin was loaded under; ``state_dir`` is a directory reserved
    for it (``<state dir>/plugins/<plugin_id>``, not created until the plugin creates it);
    ``socket_path`` is the API socket, for processes the plugin spawns (None when the host runs
    without a server).

    A plugin loaded later (enable, link, hot reload) gets this call from the host as soon as
    it is loaded, so every plugin sees it exactly once per load, before any observer call
    (``cmux_on_event`` and the report observers): what happened while it loaded is delivered
    after it, in order. An async impl may start tasks with ``asyncio.create_task`` and must
    stop them in :func:`cmux_shutdown`.
    """


@hookspec
def cmux_shutdown(plugin_id: str) -> None:
    """The plugin is being unloaded: the server stops, or this plugin is disabled, unlinked,
    blocked or replaced by a hot reload.

    Stop background work and release resources; the plugin's registrations are withdrawn
    right after this returns (or its time budget runs out).
    """
