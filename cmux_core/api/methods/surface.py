"""The cmux v2 ``surface.*`` methods and ``markdown.open``: the terminals of a pane.

Calls are routed as :mod:`cmux_core.api.methods.shared.routing` describes; results carry the
window, workspace, pane and surface UUIDs in ``*_id`` with short refs in ``*_ref``.
Creating, splitting and moving never move focus unless the request says
``"focus": true`` (``surface.focus`` always does). Surfaces are terminals or markdown
surfaces (a tab showing a file, read back by ``surface.read_text``; ``markdown.open``
adds one); asking for a browser or other GUI surface is ``not_supported``.

"""

from __future__ import annotations

import asyncio
import base64
from typing import Literal

from cmux_core.api.context import Call
from cmux_core.api.dispatch import MethodTable, Result
from cmux_core.api.methods.shared.creation import (
    ExecString,
    NewTerminalParams,
    SurfaceSplitParams,
    command_argv,
    created,
    creation_focus,
    requested_command,
    resolve_cwd,
    spawning,
    split_direction,
    split_here,
    terminal_spec,
    terminal_started,
    trimmed,
)
from cmux_core.api.methods.shared.input import key_bytes, write
from cmux_core.api.methods.shared.routing import (
    Routing,
    given,
    pane_keys,
    pane_of,
    surface_keys,
    surface_of,
    workspace_keys,
    workspace_of,
)
from cmux_core.api.methods.shared.rows import surface_row, workspace_surfaces
from cmux_core.api.methods.shared.services import ModelServices
from cmux_core.api.methods.shared.surface_actions import SurfaceActionParams, run_action
from cmux_core.errors import CmuxError, InvalidParams
from cmux_core.model import surfaces
from cmux_core.model.events import PaneCwdChanged
from cmux_core.model.mux import Mux
from cmux_core.model.pane_io import surface_text
from cmux_core.model.tree import Surface, Workspace

_EDGES: dict[str, surfaces.SplitDirection] = {
    "left": "left", "right": "right", "top": "up", "bottom": "down", "up": "up",
    "down": "down"}


class SurfaceServices(ModelServices):
    """What these ``surface.*`` handlers use."""


methods = MethodTable()


@methods.method("surface.list", Routing)
async def surface_list(call: Call[SurfaceServices], p: Routing) -> Result:
    """The workspace's surfaces in spatial order (panes left to right, top to bottom,
    then each pane's tab order)."""
    mux = call.ctx.mux
    ws = workspace_of(mux, p)
    return {"type": "surface_list", **workspace_keys(ws),
            "surfaces": [surface_row(mux, call.ctx.agents, s, i)
                         for i, s in enumerate(workspace_surfaces(mux, ws))]}


@methods.method("surface.current", Routing)
async def surface_current(call: Call[SurfaceServices], p: Routing) -> Result:
    """The focused surface of the workspace the call means."""
    mux = call.ctx.mux
    ws = workspace_of(mux, Routing(workspace_id=p.workspace_id, window_id=p.window_id))
    pane = mux.focused_pane_of(ws)
    if pane is None:
        raise CmuxError("not_found", "No focused surface")
    return {"type": "surface", **surface_keys(pane.surface),
            "surface_type": pane.surface.kind}


class SurfaceFocusParams(Routing):
    surface_id: str


@methods.method("surface.focus", SurfaceFocusParams)
async def surface_focus(call: Call[SurfaceServices], p: SurfaceFocusParams) -> Result:
    """Select the surface in its pane and focus that pane, its workspace and window."""
    mux = call.ctx.mux
    surface = mux.surface(p.surface_id)
    mux.focus_surface(surface)
    return {"type": "surface", **surface_keys(surface)}


class SurfaceTextParams(Routing):
    text: str


@methods.method("surface.send_text", SurfaceTextParams)
async def surface_send_text(call: Call[SurfaceServices], p: SurfaceTextParams) -> Result:
    """Type ``text`` into the terminal as-is; a newline acts like Enter."""
    surface = surface_of(call.ctx.mux, p)
    write(surface, p.text.encode())
    return {"type": "ok", **surface_keys(surface), "queued": False}


class SurfaceKeyParams(Routing):
    key: str


@methods.method("surface.send_key", SurfaceKeyParams)
async def surface_send_key(call: Call[SurfaceServices], p: SurfaceKeyParams) -> Result:
    surface = surface_of(call.ctx.mux, p)
    write(surface, key_bytes(surface, p.key))
    return {"type": "ok", **surface_keys(surface), "queued": False}


class SurfaceReadParams(Routing):
    scrollback: bool = False
    lines: int | None = None
    format: Literal["text", "vt"] = "text"


@methods.method("surface.read_text", SurfaceReadParams)
async def surface_read_text(call: Call[SurfaceServices], p: SurfaceReadParams) -> Result:
    """The visible screen, or when asked the last 1000 rows of screen and scrollback;
    with ``lines``, their last ``lines`` lines of text (blank rows below the text do not
    count). Plain text, or with ``format: "vt"`` the colours and styles as escape
    sequences."""
    surface = surface_of(call.ctx.mux, p)
    if p.lines is not None and p.lines <= 0:
        raise InvalidParams("lines", "must be greater than 0")
    if surface.term is None:
        return await document_text(surface, p)
    fmt: Literal["text", "ansi"] = "ansi" if p.format == "vt" else "text"
    text = surface_text(surface, recent=p.scrollback or p.lines is not None, fmt=fmt)
    if p.lines is not None:
        kept = text.split("\n")[:-1][-p.lines:]
        text = "\n".join(kept) + "\n" if kept else ""
    return {"type": "surface_text", "text": text, "format": p.format,
            "base64": base64.b64encode(text.encode()).decode(), **surface_keys(surface)}


async def document_text(surface: Surface, p: SurfaceReadParams) -> Result:
    """A markdown surface's file as it is now (``lines``: its last lines), read off the
    event loop (a slow filesystem must not stall the server)."""
    text = await asyncio.to_thread(surfaces.read_document, surface)
    if p.lines is not None:
        kept = text.splitlines(keepends=True)[-p.lines:]
        text = "".join(kept)
    return {"type": "surface_text", "text": text, "format": "text", "path": surface.path,
            "base64": base64.b64encode(text.encode()).decode(), **surface_keys(surface)}


def markdown_file(mux: Mux, raw: str | None, base: str | None, ws: Workspace) -> str:
    """The absolute, resolved file a new markdown surface shows: ``raw`` (``~``
    expanded) against ``base``, else the workspace's directory. ``invalid_params`` for a
    missing or non-file path, ``not_found`` when the file does not exist."""
    if raw is None or not raw.strip():
        raise InvalidParams("path", "Missing 'path' parameter")
    if "\0" in raw:
        raise InvalidParams("path", "must not contain NUL")
    path = surfaces.document_path(raw, base or ws.cwd)
    problem = surfaces.document_problem(path)
    if problem is not None:
        code = "not_found" if problem.endswith("does not exist") else "invalid_params"
        raise CmuxError(code, f"Markdown {problem}", {"path": path})
    return path


class SurfaceCreateParams(NewTerminalParams):
    path: str | None = None
    title: str | None = None


@methods.method("surface.create", SurfaceCreateParams)
async def surface_create(call: Call[SurfaceServices], p: SurfaceCreateParams) -> Result:
    """A new terminal surface (a new tab) in ``pane_id`` (default: the focused pane of
    the workspace the call means); selected and focused only with ``focus`` (or ``[cmux]
    focus_on_create``). With ``type: "markdown"`` the tab shows the file ``path``
    (relative to ``working_directory``, else the workspace's directory), named ``title``
    or the file's name."""
    mux = call.ctx.mux
    pane = pane_of(mux, p)
    if p.type == "markdown":
        base = (resolve_cwd(p.working_directory, "working_directory")
                or resolve_cwd(p.cwd, "cwd"))
        path = markdown_file(mux, p.path, base, pane.tab.workspace)
        surface = surfaces.add_markdown(mux, pane, path, title=trimmed(p.title),
                                        focus=creation_focus(call.ctx.settings, p.focus))
        return created(surface)
    cwd, command, env = terminal_spec(mux, p, pane)
    with spawning("surface_create_failed"):
        surface = surfaces.add_surface(mux, pane, cwd=cwd, command=command, env=env,
                                       focus=creation_focus(call.ctx.settings, p.focus))
    terminal_started(surface, p.initial_input, p.initial_command, p.command)
    return created(surface)


@methods.method("surface.split", SurfaceSplitParams)
async def surface_split(call: Call[SurfaceServices], p: SurfaceSplitParams) -> Result:
    """A new pane with a new terminal beside the source surface's pane (default: the
    focused surface), on the ``direction`` side."""
    return await split_here(call.ctx.mux, call.ctx.settings, p)


class MarkdownOpenParams(Routing):
    path: str | None = None
    working_directory: str | None = None
    focus: bool | None = None


@methods.method("markdown.open", MarkdownOpenParams)
async def markdown_open(call: Call[SurfaceServices], p: MarkdownOpenParams) -> Result:
    """Show the file ``path`` (``~`` expanded; relative to ``working_directory``, else
    the workspace's directory) in a new markdown surface: a tab of the pane of
    ``surface_id`` (else ``pane_id``, else the focused pane), selected there. cmux's app
    opens a split instead; here a pane keeps a terminal, so the document joins the pane as
    a tab. Focus moves only with ``focus``. ``not_found`` when the file does not exist."""
    mux = call.ctx.mux
    source = surface_of(mux, p)
    pane = source.pane
    base = resolve_cwd(p.working_directory, "working_directory")
    path = markdown_file(mux, p.path, base, pane.tab.workspace)
    surface = surfaces.add_markdown(mux, pane, path, index=pane.surfaces.index(source) + 1,
                                    select=True, focus=creation_focus(call.ctx.settings, p.focus))
    return {"type": "markdown", **surface_keys(surface), "surface_type": "markdown",
            "source_surface_id": source.uuid, "source_surface_ref": source.ref,
            "source_pane_id": pane.key, "source_pane_ref": pane.ref,
            "target_pane_id": pane.key, "target_pane_ref": pane.ref, "path": path}


@methods.method("surface.close", Routing)
async def surface_close(call: Call[SurfaceServices], p: Routing) -> Result:
    """Close the surface (default: the focused one). The pane shows the surface now at
    its index, else the one before; a pane closes with its last surface; the last
    surface of a workspace is ``invalid_state``."""
    mux = call.ctx.mux
    surface = surface_of(mux, p)
    keys = surface_keys(surface)
    surfaces.close_surface(mux, surface)
    return {"type": "ok", **keys}


def index_beside(surface: Surface, anchor: Surface, *, before: bool) -> int:
    """The index, among the other surfaces of ``anchor``'s pane, that puts ``surface``
    just before (else just after) ``anchor``."""
    others = [s for s in anchor.pane.surfaces if s is not surface]
    return others.index(anchor) + (0 if before else 1)


class SurfaceMoveParams(Routing):
    surface_id: str
    before_surface_id: str | None = None
    after_surface_id: str | None = None
    index: int | None = None
    focus: bool = False


@methods.method("surface.move", SurfaceMoveParams)
async def surface_move(call: Call[SurfaceServices], p: SurfaceMoveParams) -> Result:
    """Move a surface before/after another surface, into ``pane_id``, into the focused
    pane of ``workspace_id``, or of ``window_id``'s selected workspace (at ``index``)."""
    mux = call.ctx.mux
    surface = mux.surface(p.surface_id)
    before, after = given(p.before_surface_id), given(p.after_surface_id)
    if before and after:
        raise InvalidParams("after_surface_id", "give before_surface_id or after_surface_id, "
                            "not both")
    index = p.index
    if before or after:
        anchor = mux.surface(before or after or "")
        if anchor is surface:
            raise InvalidParams("before_surface_id" if before else "after_surface_id",
                                "anchor is the moved surface")
        dest = anchor.pane
        index = index_beside(surface, anchor, before=bool(before))
    elif given(p.pane_id):
        dest = mux.pane(given(p.pane_id))
    elif given(p.workspace_id) or given(p.window_id):
        ws = workspace_of(mux, Routing(workspace_id=p.workspace_id, window_id=p.window_id))
        focused = mux.focused_pane_of(ws)
        if focused is None:
            raise CmuxError("not_found", "No focused pane")
        dest = focused
    else:
        raise InvalidParams("pane_id", "give a destination: before_surface_id, "
                            "after_surface_id, pane_id, workspace_id or window_id")
    surfaces.move(mux, surface, dest, index=index, focus=p.focus)
    return {"type": "ok", **surface_keys(surface)}


class SurfaceReorderParams(Routing):
    surface_id: str
    index: int | None = None
    before_surface_id: str | None = None
    after_surface_id: str | None = None
    focus: bool = False


@methods.method("surface.reorder", SurfaceReorderParams)
async def surface_reorder(call: Call[SurfaceServices], p: SurfaceReorderParams) -> Result:
    """Move a surface within its pane: to ``index``, or before/after a surface of it."""
    mux = call.ctx.mux
    surface = mux.surface(p.surface_id)
    targets = [x for x in (p.index, given(p.before_surface_id), given(p.after_surface_id))
               if x is not None]
    if len(targets) != 1:
        raise InvalidParams("index", "give exactly one of index, before_surface_id, "
                            "after_surface_id")
    pane = surface.pane
    if p.index is not None:
        index = p.index
    else:
        anchor_text = given(p.before_surface_id) or given(p.after_surface_id) or ""
        anchor = mux.surface(anchor_text)
        if anchor.pane is not pane or anchor is surface:
            raise InvalidParams("before_surface_id" if p.before_surface_id
                                else "after_surface_id",
                                "Anchor surface must be another surface of the same pane")
        index = index_beside(surface, anchor, before=bool(given(p.before_surface_id)))
    surfaces.reorder(mux, surface, index)
    if p.focus:
        mux.focus_surface(surface)
    return {"type": "ok", **surface_keys(surface)}


class SplitOffParams(Routing):
    surface_id: str
    direction: str | None = None
    target_surface_id: str | None = None
    edge: str | None = None
    focus: bool = False


async def split_off(call: Call[SurfaceServices], p: SplitOffParams) -> Result:
    mux = call.ctx.mux
    surface = mux.surface(p.surface_id)
    ws = surface.pane.tab.workspace
    ws_text, window_text = given(p.workspace_id), given(p.window_id)
    if ws_text and mux.workspace(ws_text) is not ws:
        raise InvalidParams("workspace_id", "the surface is not in this workspace")
    if window_text and mux.window(window_text) is not ws.window:
        raise InvalidParams("window_id", "the surface is not in this window")
    target_text = given(p.target_surface_id)
    target = mux.surface(target_text).pane if target_text else None
    if p.edge is not None:
        direction = _EDGES.get(p.edge.strip().lower())
        if direction is None:
            raise InvalidParams("edge", "must be left, right, top or bottom")
    elif p.direction is not None:
        direction = split_direction(p.direction)
    else:
        raise InvalidParams("direction", "Missing or invalid direction (left|right|up|down)")
    pane = surfaces.split_off(mux, surface, direction, target=target, focus=p.focus)
    return {"type": "ok", **surface_keys(surface), **pane_keys(pane)}


@methods.method("surface.split_off", SplitOffParams)
async def surface_split_off(call: Call[SurfaceServices], p: SplitOffParams) -> Result:
    """Move a surface out of its pane into a new pane on the ``direction`` side of its
    pane (or of ``target_surface_id``'s pane); ``invalid_state`` when that would empty
    its pane."""
    return await split_off(call, p)


@methods.method("surface.drag_to_split", SplitOffParams)
async def surface_drag_to_split(call: Call[SurfaceServices], p: SplitOffParams) -> Result:
    """``surface.split_off`` as a drop: ``direction``, or ``target_surface_id`` with the
    ``edge`` (left, right, top, bottom) of its pane."""
    return await split_off(call, p)


@methods.method("surface.clear_history", Routing)
async def surface_clear_history(call: Call[SurfaceServices], p: Routing) -> Result:
    """Erase the screen and the scrollback of the surface's terminal (the program is
    not told; a shell redraws its prompt at the next key)."""
    surface = surface_of(call.ctx.mux, p)
    surface.terminal.emulator.feed(b"\x1b[H\x1b[2J\x1b[3J")
    return {"type": "ok", **surface_keys(surface)}


@methods.method("surface.trigger_flash", Routing)
async def surface_trigger_flash(call: Call[SurfaceServices], p: Routing) -> Result:
    """Flash the surface: headless there is nothing to light up, so the flash is
    counted (``debug.flash.count``) for clients that check it."""
    surface = surface_of(call.ctx.mux, p)
    surface.flash_count += 1
    return {"type": "ok", **surface_keys(surface)}


@methods.method("surface.health", Routing)
async def surface_health(call: Call[SurfaceServices], p: Routing) -> Result:
    """Each surface of the workspace: ``in_window`` is true while it belongs to a
    window (every live surface does), ``alive`` while its process runs (a markdown
    surface: while its file exists)."""
    mux = call.ctx.mux
    ws = workspace_of(mux, p)
    rows = [{"index": i, "id": s.uuid, "ref": s.ref, "type": s.kind, "in_window": True,
             "alive": (not s.term.exited if s.term is not None
                       else surfaces.document_problem(s.path or "") is None)}
            for i, s in enumerate(workspace_surfaces(mux, ws))]
    return {"type": "surface_health", **workspace_keys(ws), "surfaces": rows}


@methods.method("surface.refresh", Routing)
async def surface_refresh(call: Call[SurfaceServices], p: Routing) -> Result:
    """Headless terminals have no view to redraw: answers how many terminal surfaces
    the workspace holds, as ``refreshed``."""
    mux = call.ctx.mux
    ws = workspace_of(mux, p)
    return {"type": "ok", **workspace_keys(ws),
            "refreshed": sum(s.term is not None for s in workspace_surfaces(mux, ws))}


class RespawnParams(Routing):
    command: list[ExecString] | ExecString | None = None
    initial_command: ExecString | None = None
    working_directory: str | None = None
    focus: bool = False


@methods.method("surface.respawn", RespawnParams)
async def surface_respawn(call: Call[SurfaceServices], p: RespawnParams) -> Result:
    """Restart the surface's terminal: a new process (``command``, default the shell)
    in ``working_directory`` (default where it was started); the old one is ended."""
    mux = call.ctx.mux
    surface = surface_of(mux, p)
    cwd = resolve_cwd(p.working_directory, "working_directory") or surface.launch_cwd
    command = command_argv(p.command, "command") or command_argv(p.initial_command,
                                                                 "initial_command")
    with spawning("surface_respawn_failed"):
        surfaces.respawn(mux, surface, command=command, cwd=cwd)
    surface.requested_command = requested_command(p.command, p.initial_command)
    if p.focus:
        mux.focus_surface(surface)
    return {"type": "ok", **surface_keys(surface)}


@methods.method("surface.action", SurfaceActionParams)
async def surface_action(call: Call[SurfaceServices], p: SurfaceActionParams) -> Result:
    """The same actions as ``tab.action``."""
    return await run_action(call.ctx.mux, call.ctx.settings, p)


class ReportPwdParams(Routing):
    path: str | None = None
    directory: str | None = None
    cwd: str | None = None


@methods.method("surface.report_pwd", ReportPwdParams)
async def surface_report_pwd(call: Call[SurfaceServices], p: ReportPwdParams) -> Result:
    """A shell says where it works now (``path``, or ``directory``/``cwd``): the pane's
    cwd, as an OSC 7 report would set it; new splits and workspace names use it."""
    mux = call.ctx.mux
    given_paths = {k: v for k, v in (("path", p.path), ("directory", p.directory),
                                     ("cwd", p.cwd)) if v is not None and v.strip()}
    if not given_paths:
        raise InvalidParams("path", "Missing or invalid path")
    if len(set(given_paths.values())) > 1:
        raise InvalidParams(sorted(given_paths)[1], "conflicts with another path alias")
    path = next(iter(given_paths.values())).strip()
    if "\0" in path or not path.startswith("/"):
        raise InvalidParams(next(iter(given_paths)), "must be an absolute path")
    surface = surface_of(mux, p)
    pane = surface.pane
    if pane.selected is surface and pane.cwd != path:
        pane.cwd = path
        mux.events.publish(PaneCwdChanged(pane, path))
    return {"type": "ok", **surface_keys(surface), "path": path}


class ReportTtyParams(Routing):
    tty: str


@methods.method("surface.report_tty", ReportTtyParams)
async def surface_report_tty(call: Call[SurfaceServices], p: ReportTtyParams) -> Result:
    """A shell says which terminal device it runs on; ``surface.list`` shows it as
    ``tty``."""
    tty = p.tty.strip()
    if not tty or "\0" in tty:
        raise InvalidParams("tty", "Missing or invalid tty")
    surface = surface_of(call.ctx.mux, p)
    surface.tty = tty
    return {"type": "ok", **surface_keys(surface), "tty": tty}


class ReportShellStateParams(Routing):
    state: str


@methods.method("surface.report_shell_state", ReportShellStateParams)
async def surface_report_shell_state(call: Call[SurfaceServices],
                                     p: ReportShellStateParams) -> Result:
    """A shell says what it is doing (e.g. ``prompt``, ``running``); ``surface.list``
    shows it as ``shell_state``."""
    state = p.state.strip()
    if not state:
        raise InvalidParams("state", "Missing or invalid state")
    surface = surface_of(call.ctx.mux, p)
    surface.shell_state = state
    return {"type": "ok", **surface_keys(surface), "state": state}
