"""The herdr methods outside the Local API seed: answered as a headless server can.

herdr's client-facing methods have no client to act on here: ``notification.show`` (a toast)
answers ``shown: false`` and ``client.window_title.set``/``clear`` ``changed: false``, both
with the reason ``no_foreground_client``, once their params are valid; ``popup.close``
answers ``popup_not_open``, as no popup ever opens. :data:`NOT_SUPPORTED` holds the rest,
each with the reason, answered ``not_supported`` (never ``method_not_found``).
``server.reload_config`` is the server family's (:mod:`cmux_core.api.methods.server`).
"""

from __future__ import annotations

import re
from typing import Literal

from cmux_core.api.context import Call
from cmux_core.api.dispatch import MethodTable, Result
from cmux_core.api.methods.cmux_v2_catalog import AnyParams, refusal
from cmux_core.errors import CmuxError, InvalidParams
from cmux_core.hookspecs import Params

_PLUGIN_KIND = ("cmux plugins are Python modules with hooks and socket methods (plugin.list); "
                "herdr's manifest plugin actions, logs and plugin panes are not part of them")
_WORKTREE = ("git worktrees are not managed by the server; create one with git and open a "
             "workspace in it (workspace.create with cwd)")

NOT_SUPPORTED: dict[str, str] = {
    **dict.fromkeys(("worktree.list", "worktree.create", "worktree.open", "worktree.remove"),
                    _WORKTREE),
    **dict.fromkeys(("plugin.action.list", "plugin.action.invoke", "plugin.log.list",
                     "plugin.pane.open", "plugin.pane.focus", "plugin.pane.close"),
                    _PLUGIN_KIND),
    "pane.input.set": "right-click handling is a setting of herdr's own client; cmux attach "
                      "passes mouse input to programs that ask for it",
    "server.live_handoff": "a running server cannot hand its panes to another executable; "
                           "stop and start it (the session is restored)",
}

methods = MethodTable()

for _name, _reason in NOT_SUPPORTED.items():
    methods.add(_name, AnyParams, refusal(_name, _reason),
                doc=f"Not supported on a headless server: {_reason}.")

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SPACES = re.compile(r"[\n\r\t ]+")


def clean_line(value: str, limit: int) -> str:
    """``value`` as one line: line breaks and tabs are spaces, other control characters
    go, runs of spaces are one, at most ``limit`` characters."""
    return _SPACES.sub(" ", _CONTROL.sub("", value)).strip()[:limit]


class ShowParams(Params):
    title: str
    body: str | None = None
    position: Literal["top-left", "top-right", "bottom-left", "bottom-right"] | None = None
    sound: Literal["none", "done", "request"] = "none"


@methods.method("notification.show", ShowParams)
async def notification_show(call: Call[None], p: ShowParams) -> Result:
    """A toast for the foreground client: a headless server has none, so nothing is shown
    (``notification.create`` keeps a notification in the list instead)."""
    if not clean_line(p.title, 80):
        raise InvalidParams("title", "must not be empty")
    return {"type": "notification_show", "shown": False, "reason": "no_foreground_client"}


class TitleParams(Params):
    title: str


@methods.method("client.window_title.set", TitleParams)
async def client_window_title_set(call: Call[None], p: TitleParams) -> Result:
    """Set the foreground client's window title: there is no such client here."""
    if not clean_line(p.title, 200):
        raise InvalidParams("title", "must not be empty")
    return {"type": "client_window_title", "changed": False, "reason": "no_foreground_client"}


class NoParams(Params):
    pass


@methods.method("client.window_title.clear", NoParams)
async def client_window_title_clear(call: Call[None], p: NoParams) -> Result:
    """Clear the foreground client's window title: there is no such client here."""
    return {"type": "client_window_title", "changed": False, "reason": "no_foreground_client"}


@methods.method("popup.close", NoParams)
async def popup_close(call: Call[None], p: NoParams) -> Result:
    """Close the client's popup: none is ever open on a headless server."""
    raise CmuxError("popup_not_open", "no popup is open")
