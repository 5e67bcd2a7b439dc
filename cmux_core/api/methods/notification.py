"""The cmux v2 ``notification.*`` and ``app.*`` methods over the server's notification list.

See :mod:`cmux_core.model.notifications` for the rules (what is kept, what replaces what,
when the "app" counts as active). Each created notification is also published as a
``pane_notification`` event of its surface's pane.
"""

from __future__ import annotations

from typing import Any, Literal

from cmux_core.api.context import Call
from cmux_core.api.dispatch import MethodTable, Result, services
from cmux_core.api.methods.shared.params import Empty
from cmux_core.api.methods.shared.routing import (
    Routing,
    given,
    surface_handle,
    surface_keys,
    workspace_keys,
    workspace_of,
)
from cmux_core.errors import CmuxError, InvalidParams
from cmux_core.hookspecs import Params
from cmux_core.model.mux import Mux
from cmux_core.model.notifications import Notification, NotificationBook
from cmux_core.model.tree import Surface, Workspace


@services
class NotificationServices:
    mux: Mux
    notifications: NotificationBook


methods = MethodTable()


def notification_row(note: Notification) -> dict[str, Any]:
    surface = note.surface
    return {"id": note.id, "workspace_id": note.workspace.uuid,
            "workspace_ref": note.workspace.ref,
            "surface_id": surface.uuid if surface else None,
            "surface_ref": surface.ref if surface else None,
            "is_read": note.is_read, "title": note.title, "subtitle": note.subtitle,
            "body": note.body, "created_at": note.created_at, "source": note.source,
            "tab_title": (surface.title or surface.own_title or None)
            if surface else None}


class CreateParams(Routing):
    title: str = ""
    subtitle: str = ""
    body: str = ""


def target_of(mux: Mux, p: Routing) -> tuple[Workspace, Surface | None]:
    """The workspace and surface a notification is for: the named surface (or pane's),
    else the focused surface of the workspace the call means."""
    sid = surface_handle(p)
    if sid:
        surface = mux.surface(sid)
        return surface.pane.tab.workspace, surface
    if given(p.pane_id):
        pane = mux.pane(given(p.pane_id))
        return pane.tab.workspace, pane.surface
    ws = workspace_of(mux, p)
    focused = mux.focused_pane_of(ws)
    return ws, focused.surface if focused else None


def created(book: NotificationBook, ws: Workspace, surface: Surface | None,
            p: CreateParams) -> Result:
    if not (p.title or p.subtitle or p.body):
        raise InvalidParams("title", "a notification needs a title, subtitle or body")
    note = book.add(ws, surface, p.title, p.subtitle, p.body)
    keys = surface_keys(surface) if surface else workspace_keys(ws)
    return {"type": "notification", **keys, "notification_id": note.id if note else None,
            "suppressed": note is None}


@methods.method("notification.create", CreateParams)
async def notification_create(call: Call[NotificationServices], p: CreateParams) -> Result:
    """Notify about a surface (default: the focused one of the workspace the call
    means); ``suppressed`` when the app is active and that surface is in view."""
    ws, surface = target_of(call.ctx.mux, p)
    return created(call.ctx.notifications, ws, surface, p)


class ForSurfaceParams(CreateParams):
    surface_id: str


@methods.method("notification.create_for_surface", ForSurfaceParams)
async def notification_create_for_surface(call: Call[NotificationServices],
                                          p: ForSurfaceParams) -> Result:
    """``notification.create`` for ``surface_id``."""
    surface = call.ctx.mux.surface(p.surface_id)
    return created(call.ctx.notifications, surface.pane.tab.workspace, surface, p)


class ForTargetParams(CreateParams):
    workspace_id: str
    surface_id: str


@methods.method("notification.create_for_target", ForTargetParams)
async def notification_create_for_target(call: Call[NotificationServices],
                                         p: ForTargetParams) -> Result:
    """``notification.create`` for ``surface_id``, which must be in ``workspace_id``."""
    mux = call.ctx.mux
    ws, surface = mux.workspace(p.workspace_id), mux.surface(p.surface_id)
    if surface.pane.tab.workspace is not ws:
        raise CmuxError("not_found", "Surface not found in that workspace",
                        {"workspace_id": p.workspace_id, "surface_id": p.surface_id})
    return created(call.ctx.notifications, ws, surface, p)


@methods.method("notification.create_for_caller", CreateParams)
async def notification_create_for_caller(call: Call[NotificationServices],
                                         p: CreateParams) -> Result:
    """``notification.create`` for the surface a caller names as its own with
    ``workspace_id`` and ``surface_id`` (a pane's ``CMUX_WORKSPACE_ID`` and
    ``CMUX_SURFACE_ID``); answers where it landed."""
    return await notification_create(call, p)


@methods.method("notification.list", Routing)
async def notification_list(call: Call[NotificationServices], p: Routing) -> Result:
    """Every kept notification, newest last (of ``workspace_id`` when given)."""
    book = call.ctx.notifications
    notes = book.live()
    if given(p.workspace_id):
        ws = call.ctx.mux.workspace(given(p.workspace_id) or "")
        notes = [n for n in notes if n.workspace is ws]
    return {"type": "notification_list", "notifications": [notification_row(n) for n in notes]}


@methods.method("notification.clear", Routing)
async def notification_clear(call: Call[NotificationServices], p: Routing) -> Result:
    """Drop every notification, or those of ``workspace_id``."""
    mux = call.ctx.mux
    text = given(p.workspace_id)
    ws = mux.workspace(text) if text else None
    cleared = call.ctx.notifications.clear(ws)
    return {"type": "ok", "cleared": cleared}


class NoteTarget(Params):
    id: str | None = None
    notification_id: str | None = None
    all_read: bool = False


def one(book: NotificationBook, p: NoteTarget) -> Notification:
    text = p.id or p.notification_id
    if not text:
        raise InvalidParams("id", "Missing or invalid id")
    note = book.find(text)
    if note is None:
        raise CmuxError("not_found", "Notification not found", {"id": text})
    return note


@methods.method("notification.dismiss", NoteTarget)
async def notification_dismiss(call: Call[NotificationServices], p: NoteTarget) -> Result:
    """Drop one notification (``id``), or every read one (``all_read``)."""
    book = call.ctx.notifications
    if p.all_read:
        if p.id or p.notification_id:
            raise InvalidParams("all_read", "give id or all_read, not both")
        doomed = [n for n in book.live() if n.is_read]
    else:
        doomed = [one(book, p)]
    book.remove(doomed)
    return {"type": "ok", "dismissed": len(doomed)}


@methods.method("notification.mark_read", NoteTarget)
async def notification_mark_read(call: Call[NotificationServices], p: NoteTarget) -> Result:
    """Mark one notification (``id``) read, or every one (``all_read``)."""
    book = call.ctx.notifications
    notes = book.live() if p.all_read else [one(book, p)]
    for note in notes:
        note.is_read = True
    return {"type": "ok", "marked": len(notes)}


def show(mux: Mux, note: Notification) -> Result:
    """Focus the notification's surface (or workspace) and flash it; it stays unread."""
    if note.surface is not None:
        flashes = note.surface.flash_count
        note.surface.pane.selected = note.surface
        mux.focus_pane(note.surface.pane)
        if note.surface.flash_count == flashes:  # showing it did not flash it already
            note.surface.flash_count += 1
        return {"type": "ok", "id": note.id, **surface_keys(note.surface)}
    mux.focus_workspace(note.workspace)
    return {"type": "ok", "id": note.id, **workspace_keys(note.workspace)}


@methods.method("notification.open", NoteTarget)
async def notification_open(call: Call[NotificationServices], p: NoteTarget) -> Result:
    """Go to a notification's surface, as clicking it does (focus intent)."""
    return show(call.ctx.mux, one(call.ctx.notifications, p))


@methods.method("notification.jump_to_unread", Empty)
async def notification_jump_to_unread(call: Call[NotificationServices], p: Empty) -> Result:
    """Go to the newest unread notification's surface; ``not_found`` when all are read."""
    unread = [n for n in call.ctx.notifications.live() if not n.is_read]
    if not unread:
        raise CmuxError("not_found", "No unread notification")
    return show(call.ctx.mux, unread[-1])


class FocusOverrideParams(Params):
    state: Literal["active", "inactive", "clear"] | None = None
    focused: bool | None = None


@methods.method("app.focus_override.set", FocusOverrideParams)
async def app_focus_override_set(call: Call[NotificationServices],
                                 p: FocusOverrideParams) -> Result:
    """Say whether the app counts as active (``state``: active, inactive, clear; or
    ``focused``: true, false, null); while active, notifications for the surface in view
    are not kept."""
    book = call.ctx.notifications
    if p.state is not None:
        book.focus_override = {"active": True, "inactive": False, "clear": None}[p.state]
    else:
        book.focus_override = p.focused
    return {"type": "ok", "override": book.focus_override}


@methods.method("app.simulate_active", Empty)
async def app_simulate_active(call: Call[NotificationServices], p: Empty) -> Result:
    """The app becomes active, as when the user comes back to it; notifications stay
    unread."""
    call.ctx.notifications.app_became_active = True
    return {"type": "ok", "active": call.ctx.notifications.app_active}
