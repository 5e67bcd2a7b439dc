"""cmux's older line protocol, the part of it that addresses windows and workspaces.

cmux's socket takes, beside the v2 JSON requests, plain text commands: a lower_snake
command name, then its arguments, one line in and one answer out (``OK ...``, ``ERROR: ...``,
a bare UUID, or a listing of several lines). Its command line and shell integration still
send some of them. A line is one of these when it starts with a letter and is not JSON
(``true``, ``null``, a quoted string or a number stay JSON and get the JSON errors); each
command is answered by calling the v2 method that does the same thing, so both spellings
act alike. Commands outside this small set answer cmux's "Unknown command" line.
"""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from cmux_core.errors import CmuxError

Call = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
"""Calls one v2 method with its params and returns its result (raises CmuxError)."""


def is_text_command(line: bytes) -> bool:
    """True for a line this module answers: it starts with an ASCII letter and is not
    valid JSON."""
    text = line.strip()
    if not text[:1].isalpha() or not text[:1].isascii():
        return False
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return True
    return False


async def answer(line: bytes, call: Call) -> str:
    """The reply to one text command, without its final newline."""
    text = line.decode("utf-8", errors="replace").strip()
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    name, args = words[0].lower(), words[1:]
    handler = COMMANDS.get(name)
    if handler is None:
        return f"ERROR: Unknown command '{name}'. Use 'help' for available commands."
    try:
        return await handler(call, args)
    except CmuxError as exc:
        return f"ERROR: {exc.message}"


async def _ping(call: Call, args: list[str]) -> str:
    return "PONG"


async def _help(call: Call, args: list[str]) -> str:
    return "Commands: " + ", ".join(sorted(COMMANDS))


async def _auth(call: Call, args: list[str]) -> str:
    return "OK: Authentication not required"


async def _list_windows(call: Call, args: list[str]) -> str:
    windows = (await call("window.list", {}))["windows"]
    if not windows:
        return "No windows"
    return "\n".join(
        f"{'*' if w.get('key') else ' '} {w['index']}: {w['id']} "
        f"selected_workspace={w.get('selected_workspace_id') or 'none'} "
        f"workspaces={w.get('workspace_count', 0)}" for w in windows)


async def _current_window(call: Call, args: list[str]) -> str:
    return str((await call("window.current", {}))["window_id"])


async def _list_workspaces(call: Call, args: list[str]) -> str:
    rows = (await call("workspace.list", {}))["workspaces"]
    if not rows:
        return "No workspaces"
    return "\n".join(f"{'*' if w.get('selected') else ' '} {w['index']}: {w['id']} "
                     f"{w.get('title') or ''}".rstrip() for w in rows)


async def _current_workspace(call: Call, args: list[str]) -> str:
    return str((await call("workspace.current", {}))["workspace_id"])


async def _new_workspace(call: Call, args: list[str]) -> str:
    params: dict[str, Any] = {"title": " ".join(args)} if args else {}
    return f"OK {(await call('workspace.create', params))['workspace_id']}"


async def _workspace_uuid(call: Call, handle: str) -> str | None:
    """The UUID a ``select_workspace``/``close_workspace`` argument names: a UUID or ref,
    or a number counted in the active window's list."""
    rows = (await call("workspace.list", {}))["workspaces"]
    if handle.isdigit():
        by_index = [w for w in rows if w["index"] == int(handle)]
        return str(by_index[0]["id"]) if by_index else None
    try:
        found = await call("workspace.get", {"workspace_id": handle})
    except CmuxError:
        return None
    return str(found["workspace"]["uuid"])


def _workspace_command(method: str, usage: str
                       ) -> Callable[[Call, list[str]], Awaitable[str]]:
    """A command taking one workspace argument and calling ``method`` on it."""
    async def run(call: Call, args: list[str]) -> str:
        if len(args) != 1:
            return f"ERROR: Usage: {usage}"
        uuid = await _workspace_uuid(call, args[0])
        if uuid is None:
            return "ERROR: Tab not found"
        await call(method, {"workspace_id": uuid})
        return "OK"
    return run


_select_workspace = _workspace_command("workspace.select", "select_workspace <id|index>")
_close_workspace = _workspace_command("workspace.close", "close_workspace <id>")


COMMANDS: dict[str, Callable[[Call, list[str]], Awaitable[str]]] = {
    "ping": _ping,
    "help": _help,
    "auth": _auth,
    "list_windows": _list_windows,
    "current_window": _current_window,
    "list_workspaces": _list_workspaces,
    "current_workspace": _current_workspace,
    "new_workspace": _new_workspace,
    "select_workspace": _select_workspace,
    "close_workspace": _close_workspace,
}
