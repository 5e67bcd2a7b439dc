"""Rows of ``pane.list`` and pane nodes of ``system.tree``, kept between calls.

Building a pane's row reads some forty values (its terminal, layout, agent state); with a
thousand panes that is most of a list's time. Each row is kept with a signature of what
it was built from, and a later call builds again only the rows whose signature changed:

* the pane's change stamp and the epoch (:class:`cmux_core.model.stamps.ChangeStamps`),
  bumped by every event about the pane (agent status, rename, cwd, exit ...) or about
  anything but a pane, tab or workspace (manifests, plugins);
* its tab and workspace (which ones, their numbers and ids: moves between tabs and
  workspaces) and what changes with no event: its terminal's output count (titles and
  OSC 7 directories arrive as output), size, exit and pid; the tab's split tree, zoom and
  focus, the mux's area and which pane has the focus; the pane's label, directory, title
  revision and surfaces; its agent record's state, seen flag, sequence numbers, session
  and authority; for a tree node also each surface's title, tty, shell state, pin and
  unread flags.

Two inputs depend on the clock: a terminal's foreground directory (read from ``/proc``
at most once a second, :mod:`cmux_core.model.readings`) is checked again once its second
has passed (the first time a little earlier, spread over the rows) and the row rebuilt
when it moved; an agent record with presentation metadata
(whose fields expire) is never kept. A closed pane's row is dropped by the next call.

Callers get the kept rows themselves, not copies: a list of a thousand panes then makes no
new objects but the list, so it costs little and leaves the cycle collector little to
promote (copies made per call used to fill the oldest generation, whose full passes held
the loop for a hundred milliseconds and more). A caller must therefore never change a row;
one that adds keys (``system.top`` adds processes) copies first. ``index`` is the row's
position in the call's list: a row whose position moved is kept again as a copy with the
new index, never changed in place (an answer being written may still hold the old one).
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Callable
from typing import Any
from weakref import WeakKeyDictionary

from cmux_core.agents.record import AgentRecord
from cmux_core.agents.tracker import AgentTracker
from cmux_core.model.mux import Mux
from cmux_core.model.readings import FOREGROUND_CWD_TTL_S
from cmux_core.model.tree import Pane, Surface

__all__ = ["STEP_S", "RowCache", "row_cache"]

STEP_S = 0.005
"""Longest a list builds rows before letting the loop serve others."""

Row = dict[str, Any]
Build = Callable[[Mux, AgentTracker, Pane, int], Row]


class _Kept:
    __slots__ = ("checked", "foreground", "row", "signature")

    def __init__(self, signature: tuple[object, ...], row: Row, checked: float) -> None:
        self.signature = signature
        self.row = row
        self.checked = checked
        self.foreground = row.get("foreground_cwd")


def _record(rec: AgentRecord | None) -> tuple[object, ...] | None:
    if rec is None:
        return None
    return (rec, rec.state, rec.seen, rec.state_change_seq, rec.metadata.revision,
            rec.detected, rec.exited_agent, rec.name, rec.session, rec.authority,
            rec.status_source, rec.status_source_detail, rec.status_changed_at)


def _surface(agents: AgentTracker, s: Surface) -> tuple[object, ...]:
    term = s.term
    return (s, s.title, s.tty, s.shell_state, s.pinned, s.unread, s.path,
            None if term is None else (term.output_seq, term.exited),
            _record(agents.records.get(s.uuid)))


class RowCache:
    """The kept rows of one kind (pane rows, tree nodes) for one mux, by pane key."""

    def __init__(self, build: Build, *, surfaces: bool, foreground: bool) -> None:
        self._build = build
        self._surfaces = surfaces
        self._foreground = foreground
        self._kept: dict[str, _Kept] = {}
        self._until = 0.0
        """When the current step of building ends (shared by the calls of one request,
        such as ``system.tree``'s one per workspace)."""
        self.built = 0
        """Rows built (not reused) so far."""

    async def rows(self, mux: Mux, agents: AgentTracker, panes: list[Pane]) -> list[Row]:
        """The row of each of ``panes`` (in order, ``index`` their position): the kept
        rows themselves, which the caller must not change.

        Building many rows (the first call, or after a change to every pane) lets the loop
        serve others whenever :data:`STEP_S` has passed, counted across the calls a request
        makes in a row; a pane closed meanwhile is left out, one changed meanwhile is shown
        as it is when its turn comes.
        """
        focused = mux.focused_pane()
        focus = focused.key if focused is not None else None
        now = time.monotonic()
        if now >= self._until:
            self._until = now + STEP_S
        out: list[Row] = []
        for pane in panes:
            if mux.panes.get(pane.key) is not pane:
                continue
            built = self.built
            kept = self._row(mux, agents, pane, focus, now)
            if kept.row["index"] != len(out):
                kept.row = {**kept.row, "index": len(out)}
            out.append(kept.row)
            if self.built != built and time.monotonic() >= self._until:
                await asyncio.sleep(0)
                focused = mux.focused_pane()
                focus = focused.key if focused is not None else None
                now = time.monotonic()
                self._until = now + STEP_S
        if len(self._kept) > len(mux.panes):
            for key in [k for k in self._kept if k not in mux.panes]:
                del self._kept[key]
        return out

    def _row(self, mux: Mux, agents: AgentTracker, pane: Pane, focus: str | None,
             now: float) -> _Kept:
        surface = pane.terminal_surface
        rec = agents.records.get(surface.uuid)
        signature = self._signature(mux, agents, pane, surface, rec, focus)
        kept = self._kept.get(pane.key)
        if kept is not None and kept.signature == signature and (
                rec is None or not rec.presentation) and self._same_foreground(
                mux, surface, kept, now):
            return kept
        # Rows built together are checked again at spread-out times, so no call reads
        # /proc for every pane at once: the first check comes up to a second early.
        early = zlib.crc32(pane.key.encode()) % 1000 / 1000 * FOREGROUND_CWD_TTL_S
        kept = _Kept(signature, self._build(mux, agents, pane, 0), now - early)
        self._kept[pane.key] = kept
        self.built += 1
        return kept

    def _same_foreground(self, mux: Mux, surface: Surface, kept: _Kept, now: float) -> bool:
        """False when the foreground directory the row shows has moved (read again once
        its second has passed)."""
        term = surface.terminal
        if not self._foreground or term.exited or now - kept.checked < FOREGROUND_CWD_TTL_S:
            return True
        if mux.foreground_cwd(term) != kept.foreground:
            return False
        kept.checked = now
        return True

    def _signature(self, mux: Mux, agents: AgentTracker, pane: Pane, surface: Surface,
                   rec: AgentRecord | None, focus: str | None) -> tuple[object, ...]:
        tab = pane.tab
        term = surface.terminal
        stamps = mux.stamps
        ws = tab.workspace
        base = (stamps.epoch, stamps.pane(pane.key), tab, tab.number, ws, ws.id, tab.tree,
                tab.zoomed, tab.focused, mux.area, pane.key == focus, pane.number,
                pane.label, pane.cwd, pane.title_revision, pane.selected,
                tuple(pane.surfaces), surface, term.output_seq, term.columns, term.rows,
                term.exited, term.exit_code, term.pid, _record(rec))
        if not self._surfaces:
            return base
        return (*base, *(_surface(agents, s) for s in pane.surfaces))


_caches: WeakKeyDictionary[Mux, dict[str, RowCache]] = WeakKeyDictionary()


def row_cache(mux: Mux, kind: str, build: Build, *, surfaces: bool = False,
              foreground: bool = True) -> RowCache:
    """``mux``'s cache of rows of ``kind``, made on first use with ``build`` (which must
    read nothing the signature above leaves out). ``surfaces``: rows carry a ``surfaces``
    list (tree nodes) whose surfaces are part of the signature; ``foreground``: the row
    shows its terminal's foreground directory."""
    kinds = _caches.get(mux)
    if kinds is None:
        kinds = _caches[mux] = {}
    cache = kinds.get(kind)
    if cache is None:
        cache = kinds[kind] = RowCache(build, surfaces=surfaces, foreground=foreground)
    return cache
