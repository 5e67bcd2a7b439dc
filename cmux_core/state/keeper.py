"""The session keeper: restores the saved session at start and saves the session after
changes and at stop.

Saving is driven by what happens, never by a clock running on its own: every typed event
(a pane created or closed, a split resized, a rename, an agent's session reported, a view
set ...) arms one timer :data:`EVENT_DELAY_S` ahead, pane output (which is how a shell's
``cd`` shows) one :data:`OUTPUT_DELAY_S` ahead and a client request that may change the
session (any but those in :data:`READS_ONLY`) one :data:`REQUEST_DELAY_S` ahead, unless an
earlier one is armed already. When it fires
the session is captured and dumped on the loop, a tab at a time with other work in between
(:data:`STEP_S`), and, only when it differs from what was last saved, written by a worker
thread (:func:`cmux_core.state.store.write`).
An idle server therefore never wakes up for this, and a server killed outright loses at
most the changes of its last second. At stop the session is saved one last time, before
any pane is closed, so the agents running then are the ones resumed next time; only this
save records the terminals' last lines of text (``restore_text_lines``), and saves after
changes leave it out again.

The first save compares with the session as it stood at start (restored or new), so a
server that changes nothing leaves the file as it found it; with ``--no-restore`` the
old file therefore stays until this server's own session differs from a fresh one.

A server holds a lock on the file (``<file>.lock``) from start to stop; a second server
given the same file (``--state-file``) starts a fresh session and never saves it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any, TypeVar

import orjson

from cmux_core.agents.events import SurfaceAgentDetected
from cmux_core.agents.tracker import AgentTracker
from cmux_core.agents.views import AgentView, AgentViewChanged, ViewBook, ViewPlugins
from cmux_core.events import Event
from cmux_core.model.events import PaneClosed, PaneExited
from cmux_core.model.mux import Mux
from cmux_core.model.notifications import NotificationBook
from cmux_core.state import store
from cmux_core.state.capture import ResumeFor, capture, capture_steps
from cmux_core.state.restore import RestoreFailed, restore
from cmux_core.state.schema import SessionState, StateFileError, dump_steps, encode

log = logging.getLogger(__name__)
T = TypeVar("T")

EVENT_DELAY_S = 0.2
"""Seconds from an event to the save it asks for."""
OUTPUT_DELAY_S = 0.5
"""Seconds from pane output to the check it asks for (a ``cd`` changes no event)."""
REQUEST_DELAY_S = 1.0
"""Seconds from a client's request to the check it asks for: a client polling lists many
times a second asks for a check of the whole session once a second, not after each call."""
READS_ONLY = frozenset({
    "ping", "system.ping", "system.identify", "system.capabilities", "system.tree",
    "system.top", "system.memory", "server.stats", "server.agent_manifests",
    "pane.list", "pane.get", "pane.read", "pane.layout", "pane.edges", "pane.neighbor",
    "pane.surfaces", "pane.process_info", "pane.current", "pane.wait_for_output",
    "pane.graphics.info", "pane.graphics.layers",
    "agent.list", "agent.get", "agent.read", "agent.wait", "agent.explain", "agent.view.get",
    "workspace.list", "workspace.get", "workspace.current", "workspace.env",
    "tab.list", "tab.get", "surface.list", "surface.current", "surface.read_text",
    "surface.health", "window.list", "window.current",
    "layout.list", "layout.get", "layout.export", "notification.list",
    "plugin.list", "integration.list", "integration.status",
    "machine.list", "machine.status", "events.wait",
    "debug.terminals", "debug.terminal.read_text", "debug.terminal.is_focused",
    "debug.terminal.render_stats", "debug.layout", "debug.flash.count"})
"""Requests that change nothing a save records: they ask for no check. With a thousand
panes a check (capturing the whole session) costs tens of milliseconds, so a client
polling lists would otherwise pay for one every :data:`REQUEST_DELAY_S`."""
STEP_S = 0.005
"""Longest a save's capture runs before letting the loop serve others (it goes on at the
next tab once that time has passed)."""


class SessionKeeper:
    """Restores and saves one server's session in the file at ``path``.

    ``resume_for`` gives the command that resumes an agent session (the composition root
    reads it from the agent's manifest). ``text_lines``: how many lines of each terminal's
    text the save at stop records (0: none). ``notifications``: the book whose
    notifications are saved and restored too. Call :meth:`restore` once, into the empty
    mux, then :meth:`start`; :meth:`stop` saves for the last time. The composition root
    hands it every event, pane output and client request (the ``*_seen`` methods). All on
    the loop.
    """

    def __init__(self, path: Path, mux: Mux, tracker: AgentTracker, views: ViewBook,
                 plugins: ViewPlugins, *, resume_for: ResumeFor,
                 restore: bool = True, text_lines: int = 0,
                 notifications: NotificationBook | None = None) -> None:
        self.path = path
        self.notifications = notifications
        self.text_lines = text_lines
        self.mux = mux
        self.tracker = tracker
        self.views = views
        self.plugins = plugins
        self.resume_for = resume_for
        self.restore_enabled = restore
        self._named: dict[str, AgentView] = {}
        self._carried: set[str] = set()
        self._running = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._task: asyncio.Task[None] | None = None
        self._again = False
        self._saved: bytes | None = None
        self._failure: str | None = None
        self._lock: int | None = None
        self.saves = 0
        """Files written by this keeper."""
        self.checks = 0
        """Captures of the session taken to compare with the last save (written or not)."""

    # -- start ----------------------------------------------------------------------------

    def restore(self, fresh: Callable[[], object]) -> bool:
        """Rebuild the saved session in the (empty) mux, or call ``fresh`` to make a new
        session when no workspace came back; True when one did.

        Without restoring (``--no-restore``), or without a file, nothing is read. A file
        that cannot be restored is set aside with a log line. The session as it stands
        when this returns is what the first save compares with.
        """
        restored = self._claim() and self._restore()
        if not restored:
            fresh()
        self._saved = self._key(self._capture())
        return restored

    def _claim(self) -> bool:
        """Lock the file for this server; False (and never saving) when that fails."""
        try:
            self._lock = store.claim(self.path)
        except OSError as exc:
            log.warning("cannot lock the session file %s (%s): this server neither restores "
                        "nor saves its session", self.path, exc.strerror or exc)
            return False
        if self._lock is None:
            log.warning("the session file %s is in use by another server: this server "
                        "neither restores nor saves its session", self.path)
            return False
        return True

    def _restore(self) -> bool:
        if not self.restore_enabled:
            log.info("starting a fresh session; %s is not restored (--no-restore)", self.path)
            return False
        try:
            state = store.read(self.path)
            if state is None:
                return False
            done = restore(state, self.mux, self.tracker, self.views, self.plugins,
                           self.notifications)
        except StateFileError as exc:
            self._set_aside(exc.message, exc.future)
            return False
        except RestoreFailed as exc:
            self._set_aside(str(exc), False)
            return False
        self._carried = done.resumed
        self._named.update(done.views)
        log.info("restored %d workspaces and %d panes (%d resuming an agent session) from %s",
                 done.workspaces, done.panes, len(done.resumed), self.path)
        return done.workspaces > 0

    def _set_aside(self, reason: str, future: bool) -> None:
        try:
            moved = store.set_aside(self.path, future)
        except OSError as exc:
            log.warning("session file %s cannot be restored (%s) nor set aside (%s); "
                        "starting a fresh session", self.path, reason, exc.strerror or exc)
            return
        log.warning("session file %s cannot be restored: %s; set aside as %s, starting a "
                    "fresh session", self.path, reason, moved.name)

    def start(self) -> None:
        """Save from now on: at once when the session changed since :meth:`restore`, and
        after every change. Call once the manifests are loaded (resume commands come from
        them). Without the file's lock (another server has it) nothing is ever saved."""
        if self._lock is None:
            return
        self._loop = asyncio.get_running_loop()
        self._running = True
        self._changed(0.0)

    async def stop(self) -> None:
        """Save the session as it is now (when it changed) and stop saving; call before
        any pane closes."""
        if not self._running:
            return
        self._running = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task
        await self._save_once(self.text_lines)
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    # -- triggers ---------------------------------------------------------------------------

    def view_changed(self, event: AgentViewChanged) -> None:
        if event.view is None:
            self._named.pop(event.client_id, None)
        else:
            self._named[event.client_id] = event.view

    def agent_detected(self, event: SurfaceAgentDetected) -> None:
        """A terminal with an agent to resume has its own agent now, or none."""
        if event.released or event.agent is not None:
            self._carried.discard(event.surface.uuid)

    def pane_exited(self, event: PaneExited) -> None:
        self._carried.discard(event.pane.terminal_surface.uuid)

    def pane_closed(self, event: PaneClosed) -> None:
        self._carried.difference_update(s.uuid for s in event.pane.surfaces)

    def event_seen(self, event: Event) -> None:
        """Any event: a save after it."""
        self._changed(EVENT_DELAY_S)

    def output_seen(self) -> None:
        """Pane output: a check after it (a shell's ``cd`` publishes no event)."""
        self._changed(OUTPUT_DELAY_S)

    def request_seen(self, method: str) -> None:
        """A client's request: a check after it, for changes that publish no event (a
        workspace's pin or colour), unless ``method`` only reads."""
        if method not in READS_ONLY:
            self._changed(REQUEST_DELAY_S)

    def _changed(self, delay: float) -> None:
        """Arm the save timer ``delay`` seconds ahead, unless it is armed earlier."""
        if not self._running or self._loop is None:
            return
        due = self._loop.time() + delay
        if self._timer is not None:
            if self._due <= due:
                return
            self._timer.cancel()
        self._due = due
        self._timer = self._loop.call_at(due, self._fire)

    def _fire(self) -> None:
        self._timer = None
        if self._task is not None and not self._task.done():
            self._again = True
            return
        assert self._loop is not None
        self._task = self._loop.create_task(self._save())

    # -- saving -----------------------------------------------------------------------------

    async def _save(self) -> None:
        while True:
            self._again = False
            await self._save_once()
            if not self._again or not self._running:
                return

    async def _save_once(self, text_lines: int = 0) -> None:
        self.checks += 1
        try:
            state = await _in_steps(capture_steps(
                self.mux, self.tracker, self._named, resume_for=self.resume_for,
                carried=self._carried, text_lines=text_lines,
                notifications=self.notifications))
            data = await _in_steps(dump_steps(state))
        except Exception:
            log.exception("cannot capture the session for %s", self.path)
            return
        key = self._key_of(data)
        if key == self._saved:
            return
        try:
            await asyncio.to_thread(lambda: store.write(self.path, encode(data)))
        except OSError as exc:
            message = f"{exc.strerror or exc}"
            if message != self._failure:
                log.warning("cannot save the session to %s: %s", self.path, message)
            self._failure = message
            return
        self._saved = key
        self._failure = None
        self.saves += 1

    def _capture(self, text_lines: int = 0) -> SessionState:
        return capture(self.mux, self.tracker, self._named, resume_for=self.resume_for,
                       carried=self._carried, text_lines=text_lines,
                       notifications=self.notifications)

    @staticmethod
    def _key(state: SessionState) -> bytes:
        """What a save compares: the session without its time stamp."""
        return SessionKeeper._key_of(state.model_dump(mode="json", exclude_none=True))

    @staticmethod
    def _key_of(data: dict[str, Any]) -> bytes:
        return orjson.dumps({k: v for k, v in data.items() if k != "saved_at"})


async def _in_steps(steps: Generator[None, None, T]) -> T:
    """Run ``steps`` to its end, letting the loop run other work whenever :data:`STEP_S`
    has passed, so a big session never holds up requests for long."""
    until = time.monotonic() + STEP_S
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: T = done.value
            return result
        if time.monotonic() >= until:
            await asyncio.sleep(0)
            until = time.monotonic() + STEP_S
