"""The cmux v2 method names, and the ones that mean nothing on a headless server.

:data:`CMUX_METHODS` lists the methods the cmux app advertises outside ``browser.*``
(release and debug builds). This server answers most of them; :data:`NOT_SUPPORTED` holds
the rest, each with the reason, and every one of those answers ``not_supported`` with that
reason (never ``method_not_found``), so a cmux client learns why. Every ``browser.*``
method drives a web view of the GUI app and answers ``not_supported`` the same way.
``system.capabilities`` lists only the methods that work.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from cmux_core.api.context import Call
from cmux_core.api.dispatch import MethodTable, Result
from cmux_core.errors import CmuxError
from cmux_core.hookspecs import Params

GUI_ONLY_PREFIX = "browser."

CMUX_METHODS: tuple[str, ...] = (
    "system.ping", "system.capabilities", "system.identify", "system.tree", "system.top",
    "system.memory",
    "auth.login", "auth.status", "auth.begin_sign_in", "auth.sign_in_url", "auth.sign_out",
    "window.list", "window.current", "window.focus", "window.create", "window.close",
    "window.displays", "window.display",
    "workspace.list", "workspace.create", "workspace.select", "workspace.current",
    "workspace.close", "workspace.move_to_window", "workspace.reorder",
    "workspace.reorder_many", "workspace.rename", "workspace.action", "workspace.next",
    "workspace.previous", "workspace.last", "workspace.equalize_splits",
    "workspace.prompt_submit", "workspace.set_auto_title", "workspace.env",
    "workspace.group.list", "workspace.group.create", "workspace.group.add",
    "workspace.group.focus", "workspace.group.set_collapsed",
    "workspace.remote.configure", "workspace.remote.foreground_auth_ready",
    "workspace.remote.reconnect", "workspace.remote.disconnect", "workspace.remote.status",
    "workspace.remote.clear", "workspace.remote.terminal_session_end",
    "layout.save", "layout.open", "layout.list", "layout.get", "layout.delete",
    "session.restore_previous", "settings.open", "feedback.open", "feedback.submit",
    "feed.push", "feed.permission.reply", "feed.question.reply", "feed.exit_plan.reply",
    "feed.jump", "feed.list",
    "surface.list", "surface.current", "surface.focus", "surface.split", "surface.create",
    "surface.close", "surface.drag_to_split", "surface.split_off", "surface.move",
    "surface.reorder", "surface.action", "tab.action", "surface.refresh", "surface.health",
    "surface.send_text", "surface.send_key", "surface.read_text", "surface.clear_history",
    "surface.trigger_flash", "surface.respawn", "surface.report_tty", "surface.report_pwd",
    "surface.report_shell_state", "surface.ports_kick", "surface.report_git_branch",
    "surface.clear_git_branch", "surface.read_selection",
    "surface.resume.set", "surface.resume.get", "surface.resume.clear",
    "pane.list", "pane.focus", "pane.surfaces", "pane.create", "pane.resize", "pane.swap",
    "pane.break", "pane.join", "pane.last",
    "notification.create", "notification.create_for_surface",
    "notification.create_for_target", "notification.create_for_caller", "notification.list",
    "notification.clear", "notification.dismiss", "notification.mark_read",
    "notification.open", "notification.jump_to_unread",
    "app.focus_override.set", "app.simulate_active",
    "markdown.open", "file.open", "sidebar.custom.open", "extension.sidebar.snapshot",
    "events.stream",
    "debug.terminals",
    "debug.shortcut.set", "debug.shortcut.simulate", "debug.type", "debug.app.activate",
    "debug.command_palette.toggle", "debug.command_palette.rename_tab.open",
    "debug.command_palette.visible", "debug.command_palette.selection",
    "debug.command_palette.results", "debug.command_palette.rename_input.interact",
    "debug.command_palette.rename_input.delete_backward",
    "debug.command_palette.rename_input.selection",
    "debug.command_palette.rename_input.select_all",
    "debug.browser.address_bar_focused", "debug.browser.favicon", "debug.sidebar.visible",
    "debug.terminal.is_focused", "debug.terminal.read_text", "debug.terminal.render_stats",
    "debug.layout", "debug.portal.stats", "debug.bonsplit_underflow.count",
    "debug.bonsplit_underflow.reset", "debug.empty_panel.count", "debug.empty_panel.reset",
    "debug.notification.focus", "debug.flash.count", "debug.flash.reset",
    "debug.panel_snapshot", "debug.panel_snapshot.reset", "debug.window.screenshot",
)

_CLOUD = "concerns the cmux cloud account, which a local headless server does not have"
_DISPLAY = "moves windows between macOS displays; a headless server has no screen"
_GROUPS = "workspace groups are folders of the cmux app's sidebar, which is GUI"
_REMOTE = ("SSH remote workspaces run through the cmux app's relay daemon, which this "
           "server does not have")
_FEED = "the agent feed is a panel of the cmux app's sidebar"
_PORTS = "asks the cmux app to scan for listening ports to show in its sidebar"
_SIDEBAR = "sets the git branch label of the cmux app's sidebar"
_RESUME = ("resume bindings belong to the cmux app's agent session restore; see "
           "manifests' [resume] table")
_VIEW = "opens a viewer surface of the GUI (file preview, custom sidebar)"
_PALETTE = "the command palette is part of the GUI"
_GUI_DEBUG = "inspects the GUI's views, which a headless server does not draw"

NOT_SUPPORTED: dict[str, str] = {
    "auth.status": _CLOUD, "auth.begin_sign_in": _CLOUD, "auth.sign_in_url": _CLOUD,
    "auth.sign_out": _CLOUD,
    "window.displays": _DISPLAY, "window.display": _DISPLAY,
    "workspace.group.list": _GROUPS, "workspace.group.create": _GROUPS,
    "workspace.group.add": _GROUPS, "workspace.group.focus": _GROUPS,
    "workspace.group.set_collapsed": _GROUPS,
    "workspace.remote.configure": _REMOTE, "workspace.remote.foreground_auth_ready": _REMOTE,
    "workspace.remote.reconnect": _REMOTE, "workspace.remote.disconnect": _REMOTE,
    "workspace.remote.status": _REMOTE, "workspace.remote.clear": _REMOTE,
    "workspace.remote.terminal_session_end": _REMOTE,
    "session.restore_previous": "restores the cmux app's windows from its previous launch",
    "settings.open": "opens the cmux app's settings window",
    "feedback.open": "opens the cmux app's feedback form",
    "feedback.submit": "sends feedback through the cmux app's account",
    "feed.push": _FEED, "feed.permission.reply": _FEED, "feed.question.reply": _FEED,
    "feed.exit_plan.reply": _FEED, "feed.jump": _FEED, "feed.list": _FEED,
    "surface.ports_kick": _PORTS, "surface.report_git_branch": _SIDEBAR,
    "surface.clear_git_branch": _SIDEBAR,
    "surface.read_selection": "a text selection is made with a mouse in a GUI view",
    "surface.resume.set": _RESUME, "surface.resume.get": _RESUME,
    "surface.resume.clear": _RESUME,
    "file.open": _VIEW, "sidebar.custom.open": _VIEW,
    "extension.sidebar.snapshot": "reads the cmux app's sidebar extensions",
    "events.stream": ("this server streams events with events.subscribe (the Local API's "
                      "form)"),
    "debug.shortcut.set": "rebinds a keyboard shortcut of the GUI",
    "debug.command_palette.toggle": _PALETTE,
    "debug.command_palette.rename_tab.open": _PALETTE,
    "debug.command_palette.visible": _PALETTE, "debug.command_palette.selection": _PALETTE,
    "debug.command_palette.results": _PALETTE,
    "debug.command_palette.rename_input.interact": _PALETTE,
    "debug.command_palette.rename_input.delete_backward": _PALETTE,
    "debug.command_palette.rename_input.selection": _PALETTE,
    "debug.command_palette.rename_input.select_all": _PALETTE,
    "debug.browser.address_bar_focused": _GUI_DEBUG, "debug.browser.favicon": _GUI_DEBUG,
    "debug.sidebar.visible": _GUI_DEBUG,
    "debug.portal.stats": _GUI_DEBUG,
    "debug.bonsplit_underflow.count": _GUI_DEBUG,
    "debug.bonsplit_underflow.reset": _GUI_DEBUG,
    "debug.empty_panel.count": _GUI_DEBUG, "debug.empty_panel.reset": _GUI_DEBUG,
    "debug.panel_snapshot": _GUI_DEBUG, "debug.panel_snapshot.reset": _GUI_DEBUG,
    "debug.window.screenshot": _GUI_DEBUG,
}

methods = MethodTable()


class AnyParams(Params):
    """Any params: the answer is the same whatever they are."""


def refusal(name: str, reason: str) -> Callable[[Call[None], AnyParams], Awaitable[Result]]:
    """A handler answering ``not_supported`` for ``name`` with ``reason``."""
    async def refuse(call: Call[None], p: AnyParams) -> Result:
        raise CmuxError("not_supported", f"{name} is not supported: {reason}",
                        {"method": name})
    return refuse


for _name, _reason in NOT_SUPPORTED.items():
    methods.add(_name, AnyParams, refusal(_name, _reason),
                doc=f"Not supported on a headless server: {_reason}.")

GUI_ONLY_REASON = "browser surfaces are web views of the cmux app, which a headless server has not"


async def _refuse_browser(call: Call[None], p: AnyParams) -> Result:
    raise CmuxError("not_supported", f"{call.method} is not supported: {GUI_ONLY_REASON}",
                    {"method": call.method})


methods.add_family(GUI_ONLY_PREFIX, AnyParams, _refuse_browser,
                   doc=f"Not supported on a headless server: {GUI_ONLY_REASON}.")
