"""The context-menu actions on a cmux surface, which cmux names ``tab.action`` and
``surface.action``.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict

from cmux_core.api.dispatch import Result
from cmux_core.api.methods.shared.creation import creation_focus, spawning, trimmed
from cmux_core.api.methods.shared.routing import Routing, surface_keys, surface_of, surface_tab_keys
from cmux_core.api.methods.shared.rows import surface_title
from cmux_core.config import Settings
from cmux_core.errors import CmuxError, InvalidParams
from cmux_core.model import surfaces
from cmux_core.model.mux import Mux

ACTIONS = ("rename", "clear_name", "close_left", "close_right", "close_others",
           "new_terminal_right", "duplicate", "pin", "unpin", "mark_unread", "mark_read",
           "move_to_new_workspace")


GUI_ACTIONS = ("new_browser_right", "reload")


class SurfaceActionParams(Routing):
    # cmux calls a surface a tab here; the schema keeps the name its clients know
    model_config = ConfigDict(title="TabActionParams")

    action: str
    title: str | None = None
    focus: bool | None = None


async def run_action(mux: Mux, settings: Settings, p: SurfaceActionParams) -> Result:
    """Run the context-menu action ``p.action`` on the surface ``p`` routes to."""
    action = p.action.strip().lower().replace("-", "_")
    if action in GUI_ACTIONS:
        raise CmuxError("not_supported", f"tab action {action} acts on a browser surface, "
                        "which needs the cmux app's GUI", {"action": action})
    if action not in ACTIONS:
        raise InvalidParams("action", f"unknown action {p.action!r}; one of "
                            + ", ".join(ACTIONS))
    surface = surface_of(mux, p)
    pane = surface.pane
    out: dict[str, Any] = {"type": "ok", "action": action}
    if action == "rename":
        title = trimmed(p.title)
        if title is None:
            raise InvalidParams("title", "Missing title")
        surface.title = title
    elif action == "clear_name":
        surface.title = None
    elif action in ("pin", "unpin"):
        surface.pinned = action == "pin"
    elif action in ("mark_unread", "mark_read"):
        surface.unread = action == "mark_unread"
    elif action in ("close_left", "close_right", "close_others"):
        at = pane.surfaces.index(surface)
        doomed = [s for i, s in enumerate(pane.surfaces)
                  if (action == "close_left" and i < at) or (action == "close_right" and i > at)
                  or (action == "close_others" and i != at)]
        if all(s.term is None or s in doomed for s in pane.surfaces):
            raise CmuxError("invalid_state", "a pane keeps at least one terminal surface: "
                            f"{action} would close all of them", {"action": action})
        for other in doomed:
            surfaces.close_surface(mux, other)
        out["closed"] = len(doomed)
    elif action == "duplicate" and surface.path is not None:
        new = surfaces.add_markdown(mux, pane, surface.path, title=surface.title,
                                    focus=creation_focus(settings, p.focus),
                                    index=pane.surfaces.index(surface) + 1)
        out.update({"created_surface_id": new.uuid, "created_surface_ref": new.ref})
    elif action in ("new_terminal_right", "duplicate"):
        command = surface.command if action == "duplicate" else None
        cwd = mux.pane_cwd(pane) or pane.tab.workspace.cwd
        with spawning("surface_create_failed"):
            new = surfaces.add_surface(mux, pane, cwd=cwd, command=command,
                                       focus=creation_focus(settings, p.focus),
                                       index=pane.surfaces.index(surface) + 1)
        out.update({"created_surface_id": new.uuid, "created_surface_ref": new.ref})
    elif action == "move_to_new_workspace":
        moved_to = surfaces.break_out(mux, surface, title=trimmed(p.title),
                                      focus=creation_focus(settings, p.focus))
        ws = moved_to.tab.workspace
        out.update({"created_workspace_id": ws.uuid, "created_workspace_ref": ws.ref})
    out.update({**surface_keys(surface), **surface_tab_keys(surface),
                "title": surface_title(surface),
                "pinned": surface.pinned, "unread": surface.unread})
    return out
