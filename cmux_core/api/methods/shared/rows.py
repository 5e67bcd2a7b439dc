"""How windows, workspaces, panes and surfaces appear as rows of the results of several
families.
"""

from __future__ import annotations

from typing import Any

from cmux_core.agents.tracker import AgentTracker
from cmux_core.api import wire
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Pane, Surface, Window, Workspace


def workspace_row(mux: Mux, agents: AgentTracker, ws: Workspace) -> dict[str, Any]:
    """A workspace as both families list it."""
    info = wire.workspace_info(mux, agents, ws)
    info.update({
        "id": ws.uuid,
        "ref": ws.ref,
        "index": ws.window.workspaces.index(ws),
        "title": info["label"],
        "description": ws.description,
        "selected": ws.window.selected is ws,
        "pinned": ws.pinned,
        "custom_color": ws.color,
        "current_directory": mux._workspace_cwd(ws),
        "latest_submitted_message": ws.last_prompt,
        "latest_submitted_at": ws.last_prompt_at,
    })
    return info


NOMINAL_CELL_PX = (8, 16)
"""A cell's size in pixels as the screens report it to programs (``CSI 16 t``): a headless
pane has no pixels, so its ``pixel_frame`` is its cell rectangle in this unit."""


def pane_row(mux: Mux, agents: AgentTracker, pane: Pane, index: int) -> dict[str, Any]:
    """PaneInfo plus the cmux family's pane row keys."""
    info = wire.pane_info(mux, agents, pane)
    info.update({
        "id": pane.key,
        "index": index,
        "surface_ids": [s.uuid for s in pane.surfaces],
        "surface_refs": [s.ref for s in pane.surfaces],
        "selected_surface_id": pane.surface.uuid,
        "selected_surface_ref": pane.surface.ref,
        "surface_count": len(pane.surfaces),
    })
    rect = mux.pane_rects(pane.tab).get(pane.key)
    if rect is not None:
        width, height = NOMINAL_CELL_PX
        info.update({"pixel_frame": {"x": rect.x * width, "y": rect.y * height,
                                     "width": rect.width * width,
                                     "height": rect.height * height},
                     "cell_width_px": width, "cell_height_px": height})
    return info


def surface_title(surface: Surface) -> str:
    return surface.title or surface.own_title


def surface_row(mux: Mux, agents: AgentTracker, surface: Surface, index: int
                ) -> dict[str, Any]:
    """One surface as ``surface.list`` and ``system.tree`` show it, with its own
    terminal's agent fields (:func:`~cmux_core.api.wire.surface_agent_fields`)."""
    pane = surface.pane
    focused = mux.is_focused(pane) and pane.selected is surface
    return {"id": surface.uuid, "ref": surface.ref, "index": index, "type": surface.kind,
            "title": surface_title(surface), "focused": focused,
            "selected": pane.selected is surface, "selected_in_pane": pane.selected is surface,
            "pane_id": pane.key, "pane_ref": pane.ref,
            "index_in_pane": pane.surfaces.index(surface), "tty": surface.tty, "url": None,
            "shell_state": surface.shell_state,
            "pinned": surface.pinned, "unread": surface.unread,
            "requested_working_directory": surface.launch_cwd,
            "initial_command": surface.requested_command or (
                " ".join(surface.command) if surface.command else None),
            "terminal_id": surface.term.id if surface.term is not None else None,
            "public_pane_id": pane.id,
            **({"path": surface.path} if surface.path is not None else {}),
            **wire.surface_agent_fields(agents, surface)}


def workspace_surfaces(mux: Mux, ws: Workspace) -> list[Surface]:
    """Every surface of ``ws``: panes in layout order, then each pane's tab order."""
    return [s for pane in mux.workspace_panes(ws) for s in pane.surfaces]


def window_row(mux: Mux, window: Window, index: int) -> dict[str, Any]:
    sel = window.selected
    return {"id": window.uuid, "ref": window.ref, "index": index,
            "key": mux.active_window is window, "visible": True,
            "workspace_count": len(window.workspaces),
            "selected_workspace_id": sel.uuid if sel else None,
            "selected_workspace_ref": sel.ref if sel else None}
