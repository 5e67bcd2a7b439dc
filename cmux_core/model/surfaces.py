"""Surfaces inside panes: the cmux family's tabs-in-a-pane.

A pane holds an ordered list of surfaces (each one terminal) and shows one of them, its
*selected* surface. These functions add, close, reorder and move surfaces, split one off
into a pane of its own, exchange two panes' selected surfaces and restart a surface's
process. They work on objects already resolved (the method handlers raise the not-found
errors) and either raise before changing anything or finish the whole change.

Selection rule: when the selected surface leaves a pane, the surface now at its index is
selected, else the one before it (the last one).

A surface that moves keeps its terminal, its process, its uuid and its ref. A pane emptied
by a move leaves its tree like a closed pane (``pane_closed``, ``layout_updated``, its tab
and workspace closing when they empty), but the terminal that moved out stays running.

A markdown surface shows a file (an absolute path) and has no process. It is a tab beside
terminal tabs: every pane keeps at least one terminal surface, since the herdr family's
pane is a terminal. Closing, moving, splitting off or swapping away a pane's last terminal
while markdown surfaces stay behind is ``invalid_state``, changing nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from cmux_core import ids
from cmux_core.errors import CmuxError
from cmux_core.model import arrange, layout
from cmux_core.model.events import LayoutUpdated, PaneCreated, PaneUpdated
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Pane, Surface, Tab

SplitDirection = Literal["left", "right", "up", "down"]


def split_shape(direction: SplitDirection) -> tuple[layout.Direction, bool]:
    """The tree direction and whether the new pane comes first (left of / above)."""
    if direction in ("left", "right"):
        return "right", direction == "left"
    return "down", direction == "up"


def _rect(mux: Mux, pane: Pane) -> layout.Rect:
    return mux.pane_rects(pane.tab).get(pane.key) or mux.area


def _register(mux: Mux, surface: Surface) -> None:
    mux._by_uuid[surface.uuid] = surface
    mux._by_ref[surface.ref] = surface


def _take(pane: Pane, surface: Surface) -> None:
    """Remove ``surface`` from ``pane`` (which keeps at least one), reselecting by the rule."""
    index = pane.surfaces.index(surface)
    pane.surfaces.remove(surface)
    if pane.selected is surface:
        pane.selected = pane.surfaces[min(index, len(pane.surfaces) - 1)]


def _put(mux: Mux, pane: Pane, surface: Surface, index: int | None) -> None:
    """Insert ``surface`` into ``pane`` at ``index`` (clamped; None appends) and select it."""
    at = len(pane.surfaces) if index is None else max(0, min(index, len(pane.surfaces)))
    pane.surfaces.insert(at, surface)
    _show(mux, pane, surface)


def _show(mux: Mux, pane: Pane, surface: Surface) -> None:
    """Make ``surface`` (already among ``pane``'s) the one ``pane`` shows; its terminal, if
    it has one, is attached to the pane and takes the pane's size."""
    surface.pane = pane
    pane.selected = surface
    if surface.term is not None:
        mux._attach(pane, surface)
        rect = _rect(mux, pane)
        surface.term.resize(rect.width, rect.height)


def _keeps_terminal(pane: Pane, leaving: Surface, arriving: Surface | None = None) -> None:
    """Raise ``invalid_state`` when ``leaving`` going (and ``arriving`` coming) would
    leave ``pane`` with markdown surfaces and no terminal."""
    rest = [s for s in pane.surfaces if s is not leaving]
    if arriving is not None:
        rest.append(arriving)
    if rest and all(s.term is None for s in rest):
        raise CmuxError("invalid_state", "a pane keeps at least one terminal surface: "
                        "close or move its markdown surfaces first",
                        {"surface_id": leaving.uuid, "pane_id": pane.key})


def _release(mux: Mux, pane: Pane) -> None:
    """Take ``pane``, whose only surface is moving out, out of its tree. The surface's
    terminal is not closed: the pane is emptied first, so closing it closes nothing."""
    pane.surfaces = []
    mux.close_pane(pane)


def _empty_pane(mux: Mux, tab: Tab, like: Pane) -> Pane:
    """A new pane of ``tab`` with no surface and no place in the tree yet."""
    ws = tab.workspace
    pane = Pane(ids.new_uuid(), ws.next_pane_number, mux.refs.mint("pane"), tab,
                cwd=like.cwd)
    ws.next_pane_number += 1
    mux._by_uuid[pane.key] = pane
    mux._by_ref[pane.ref] = pane
    mux.panes[pane.key] = pane
    return pane


def add_surface(mux: Mux, pane: Pane, *, cwd: str, command: list[str] | None = None,
                env: dict[str, str] | None = None, focus: bool = False,
                index: int | None = None) -> Surface:
    """Start a terminal as a new surface of ``pane`` (appended, or at ``index``).

    With ``focus`` it becomes the pane's selected surface and the pane is focused;
    otherwise the pane keeps showing what it showed. Raises ``spawn_failed`` (nothing
    added) when the process cannot start. Publishes ``pane_updated``.
    """
    rect = _rect(mux, pane)
    uuid = ids.new_uuid()
    term = mux._spawn(pane.tab.workspace, pane.tab, pane, uuid, cwd=cwd, command=command,
                      env=env, size=(rect.width, rect.height))
    surface = Surface(uuid, mux.refs.mint("surface"), term, pane, command, cwd,
                      env=dict(env) if env else None)
    _register(mux, surface)
    at = len(pane.surfaces) if index is None else max(0, min(index, len(pane.surfaces)))
    pane.surfaces.insert(at, surface)
    mux._attach(pane, surface)
    if focus:
        pane.selected = surface
    mux.events.publish(PaneUpdated(pane))
    if focus:
        mux.focus_pane(pane)
    return surface


def split(mux: Mux, target: Pane, direction: SplitDirection, *, ratio: float | None = None,
          cwd: str | None = None, command: list[str] | None = None,
          env: dict[str, str] | None = None, focus: bool = False) -> Pane:
    """Split ``target`` with a new pane (one new terminal) on the ``direction`` side."""
    shape, first = split_shape(direction)
    pane = mux.split_pane(target, shape, ratio=ratio, cwd=cwd, env=env, command=command,
                          focus=focus)
    if first:
        # The new pane was placed second: exchanging the two siblings puts it first.
        tab = pane.tab
        tab.tree = layout.swap(tab.tree, target.key, pane.key)
        mux.apply_sizes(tab)
        mux.events.publish(LayoutUpdated(tab))
    return pane


def close_surface(mux: Mux, surface: Surface) -> None:
    """Close ``surface`` and end its process group; a pane closes with its last surface.

    Raises ``invalid_state`` for the last surface of a workspace (close the workspace).
    """
    pane = surface.pane
    if len(pane.surfaces) > 1:
        _keeps_terminal(pane, surface)
        _take(pane, surface)
        mux._forget(surface.uuid, surface.ref)
        if surface.term is not None:
            mux._close_terminal(surface.term)
        mux.events.publish(PaneUpdated(pane))
        return
    if len(mux.workspace_panes(pane.tab.workspace)) == 1:
        raise CmuxError("invalid_state", "Cannot close the last surface")
    mux.close_pane(pane)


def reorder(mux: Mux, surface: Surface, index: int) -> None:
    """Move ``surface`` to position ``index`` (clamped) of its own pane."""
    pane = surface.pane
    pane.surfaces.remove(surface)
    pane.surfaces.insert(max(0, min(index, len(pane.surfaces))), surface)
    mux.events.publish(PaneUpdated(pane))


def move(mux: Mux, surface: Surface, dest: Pane, *, index: int | None = None,
         focus: bool = False) -> None:
    """Move ``surface`` into ``dest`` (any workspace or window), where it is selected.

    Within its own pane this is :func:`reorder`. A source pane left empty is closed
    (its tab and workspace too when they empty). ``focus`` focuses ``dest``.
    """
    src = surface.pane
    if dest is src:
        reorder(mux, surface, len(src.surfaces) if index is None else index)
        if focus:
            src.selected = surface
            mux.focus_pane(src)
        return
    if len(src.surfaces) == 1:
        _put(mux, dest, surface, index)
        _release(mux, src)
    else:
        _keeps_terminal(src, surface)
        _take(src, surface)
        _put(mux, dest, surface, index)
        mux.events.publish(PaneUpdated(src))
    mux.events.publish(PaneUpdated(dest))
    if focus:
        mux.focus_pane(dest)


def split_off(mux: Mux, surface: Surface, direction: SplitDirection, *,
              target: Pane | None = None, focus: bool = False) -> Pane:
    """Put ``surface`` in a pane of its own on the ``direction`` side of ``target``
    (default: its own pane); returns that pane.

    A surface alone in its pane moves with its pane; split off beside that same pane
    it would leave the pane empty: ``invalid_state``.
    """
    src = surface.pane
    target = target or src
    shape, first = split_shape(direction)
    if len(src.surfaces) == 1:
        if target is src:
            raise CmuxError("invalid_state",
                            "Cannot split off the only surface of a pane beside that pane")
        return _move_pane_beside(mux, src, target, shape, first, focus)
    if surface.term is None:
        raise CmuxError("invalid_state", "a markdown surface cannot be a pane of its own: "
                        "a pane keeps at least one terminal surface",
                        {"surface_id": surface.uuid})
    _keeps_terminal(src, surface)
    before = mux._focus_key()
    tab = target.tab
    _take(src, surface)
    pane = _empty_pane(mux, tab, src)
    tab.tree = layout.split(tab.tree, target.key, pane.key, shape, before=first)
    _put(mux, pane, surface, None)
    if focus:
        mux._place_focus(pane)
    mux.apply_sizes(tab)
    mux.events.publish(PaneUpdated(src))
    mux.events.publish(PaneCreated(pane))
    mux.events.publish(LayoutUpdated(tab))
    mux._emit_focus_if_changed(before)
    return pane


def _move_pane_beside(mux: Mux, pane: Pane, target: Pane, shape: layout.Direction,
                      first: bool, focus: bool) -> Pane:
    tab = target.tab
    if pane.tab is not tab:
        result = arrange.move(mux, pane, arrange.ToTab(tab, target, shape), focus=focus)
        if result.reason is not None:
            raise CmuxError("invalid_state", f"cannot move the pane: {result.reason}")
        if first:
            tab.tree = layout.swap(tab.tree, target.key, pane.key)
            mux.apply_sizes(tab)
            mux.events.publish(LayoutUpdated(tab))
        return pane
    before = mux._focus_key()
    rest = layout.remove(tab.tree, pane.key)
    assert rest is not None, "target is another pane of this tree"
    tab.tree = layout.split(rest, target.key, pane.key, shape, before=first)
    if focus:
        mux._place_focus(pane)
    mux.apply_sizes(tab)
    mux.events.publish(LayoutUpdated(tab))
    mux._emit_focus_if_changed(before)
    return pane


def break_out(mux: Mux, surface: Surface, *, title: str | None = None,
              focus: bool = False) -> Pane:
    """Move ``surface`` into a new workspace appended to its window; returns its pane
    there. A surface sharing its pane is first split off into a pane of its own."""
    pane = surface.pane
    if len(pane.surfaces) > 1:
        pane = split_off(mux, surface, "right")
    result = arrange.move(mux, pane, arrange.ToNewWorkspace(label=title), focus=focus)
    if result.reason is not None:
        raise CmuxError("invalid_state", f"cannot move the surface: {result.reason}")
    return pane


def swap_selected(mux: Mux, source: Pane, target: Pane, *, focus: bool = False) -> None:
    """Exchange the selected surfaces of two panes; each takes the other's place.

    With ``focus`` the target pane (now showing the source's surface) is focused.
    """
    a, b = source.surface, target.surface
    _keeps_terminal(source, a, b)
    _keeps_terminal(target, b, a)
    ia, ib = source.surfaces.index(a), target.surfaces.index(b)
    source.surfaces[ia], target.surfaces[ib] = b, a
    for pane, surface in ((source, b), (target, a)):
        _show(mux, pane, surface)
    mux.events.publish(PaneUpdated(source))
    mux.events.publish(PaneUpdated(target))
    if focus:
        mux.focus_pane(target)


def respawn(mux: Mux, surface: Surface, *, command: list[str] | None, cwd: str) -> None:
    """Start a new process in ``surface`` and end the old one; the surface keeps its ids
    and the env its creator gave it.

    The new process starts first: when it cannot, ``spawn_failed`` is raised and the old
    one keeps running.
    """
    pane = surface.pane
    old = surface.terminal  # a markdown surface is refused before anything starts
    rect = _rect(mux, pane)
    term = mux._spawn(pane.tab.workspace, pane.tab, pane, surface.uuid, cwd=cwd,
                      command=command, env=surface.env, size=(rect.width, rect.height))
    surface.terminal = term
    surface.command = command
    surface.launch_cwd = cwd
    mux._attach(pane, surface)
    mux._close_terminal(old)
    mux.events.publish(PaneUpdated(pane))


# -- markdown surfaces ------------------------------------------------------------------------

DOCUMENT_MAX_BYTES = 4 * 1024 * 1024
"""The largest file a markdown surface reads back (``surface.read_text``)."""


def document_path(raw: str, base: str) -> str:
    """``raw`` (``~`` expanded) made absolute against the directory ``base``, with ``.``
    and ``..`` resolved (symlinks are kept, as the caller named them); the file need not
    exist."""
    return os.path.normpath(Path(base) / Path(raw.strip()).expanduser())


def document_problem(path: str) -> str | None:
    """Why ``path`` cannot be shown (missing, not a regular file), or None."""
    try:
        target = Path(path)
        if not target.exists():
            return f"file {path} does not exist"
        if not target.is_file():
            return f"{path} is not a regular file"
    except (OSError, ValueError) as exc:
        return f"cannot use {path}: {exc}"
    return None


def add_markdown(mux: Mux, pane: Pane, path: str, *, title: str | None = None,
                 select: bool = False, focus: bool = False,
                 index: int | None = None) -> Surface:
    """A markdown surface showing the absolute ``path`` as a new tab of ``pane``
    (appended, or at ``index``); ``title`` names it (default: the file name). With
    ``select`` it becomes the pane's selected surface; with ``focus`` it is selected and
    the pane focused. Publishes ``pane_updated``. The caller checks the file first;
    nothing is spawned.
    """
    surface = Surface(ids.new_uuid(), mux.refs.mint("surface"), None, pane, None,
                      str(Path(path).parent), path=path, title=title or None)
    _register(mux, surface)
    at = len(pane.surfaces) if index is None else max(0, min(index, len(pane.surfaces)))
    pane.surfaces.insert(at, surface)
    if select or focus:
        pane.selected = surface
    mux.events.publish(PaneUpdated(pane))
    if focus:
        mux.focus_pane(pane)
    return surface


def read_document(surface: Surface) -> str:
    """The current text of a markdown surface's file, read now (UTF-8, undecodable bytes
    replaced). Raises ``not_found`` when the file is gone, ``file_too_large`` past
    :data:`DOCUMENT_MAX_BYTES`, ``file_unreadable`` when it cannot be read."""
    path = surface.path or ""
    data = {"surface_id": surface.uuid, "path": path}
    try:
        with open(path, "rb") as fh:
            raw = fh.read(DOCUMENT_MAX_BYTES + 1)
    except FileNotFoundError:
        raise CmuxError("not_found", f"Markdown file not found: {path}", data) from None
    except OSError as exc:
        raise CmuxError("file_unreadable", f"cannot read {path}: {exc.strerror or exc}",
                        data) from None
    if len(raw) > DOCUMENT_MAX_BYTES:
        raise CmuxError("file_too_large", f"{path} is larger than {DOCUMENT_MAX_BYTES} "
                        "bytes", {**data, "max_bytes": DOCUMENT_MAX_BYTES})
    return raw.decode("utf-8", "replace")
