"""``cmux notify``, ``cmux list-notifications``, ``cmux clear-notifications``: the
notification list, with the command names cmux's own command line uses.

Inside a pane, ``cmux notify`` is about the caller's own surface (``$CMUX_SURFACE_ID``)
unless ``--surface`` or ``--workspace`` says otherwise.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from cmux_core.cli.common import AddCommon, Result, run_and_print, show_table, star


def cmd_notify(ns: argparse.Namespace) -> int:
    surface = ns.surface_id
    if surface is None and ns.workspace_id is None:
        surface = os.environ.get("CMUX_SURFACE_ID") or None
    params = {"title": ns.title, "subtitle": ns.subtitle, "body": ns.body,
              "surface_id": surface, "workspace_id": ns.workspace_id}
    return run_and_print(ns, "notification.create", params, show_created)


def show_created(r: Result) -> None:
    print("suppressed (the surface is in view)" if r.get("suppressed")
          else f"OK {r.get('notification_id')}")


show_notifications = show_table("notifications", [
    ("ID", "id"), ("SURFACE", "surface_ref"), ("UNREAD", lambda n: star(not n.get("is_read"))),
    ("TITLE", "title"), ("BODY", "body")])


def cmd_list(ns: argparse.Namespace) -> int:
    return run_and_print(ns, "notification.list", {"workspace_id": ns.workspace_id},
                         show_notifications)


def cmd_clear(ns: argparse.Namespace) -> int:
    return run_and_print(ns, "notification.clear", {"workspace_id": ns.workspace_id},
                         lambda r: print(f"cleared {r.get('cleared')}"))


def add_notification_commands(sub: Any, add_common: AddCommon) -> None:
    """Add ``notify``, ``list-notifications`` and ``clear-notifications`` to ``sub``."""
    p = sub.add_parser("notify", help="notify about a surface (notification.create)",
                       description="Add a notification for a surface: the caller's own "
                       "($CMUX_SURFACE_ID) inside a pane, else the focused one.")
    p.add_argument("--title", default="", help="title")
    p.add_argument("--subtitle", default="", help="subtitle")
    p.add_argument("--body", default="", help="body text")
    p.add_argument("--surface", dest="surface_id", metavar="SURFACE",
                   help="the surface (default: $CMUX_SURFACE_ID, else the focused one)")
    p.add_argument("--workspace", dest="workspace_id", metavar="WORKSPACE",
                   help="the workspace whose focused surface it is about")
    add_common(p)
    p.set_defaults(func=cmd_notify)

    for name, func, what in (("list-notifications", cmd_list, "list the notifications"),
                             ("clear-notifications", cmd_clear, "drop the notifications")):
        p = sub.add_parser(name, help=f"{what} (notification.{name.split('-')[0]})",
                           description=what[:1].upper() + what[1:] + ".")
        p.add_argument("--workspace", dest="workspace_id", metavar="WORKSPACE",
                       help="only those of this workspace")
        add_common(p)
        p.set_defaults(func=func)
