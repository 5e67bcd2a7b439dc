"""Creating windows, workspaces, panes and surfaces the way every family does: a command, a
working directory, whether the new thing takes focus.
"""

from __future__ import annotations

import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from cmux_core.agents.tracker import AgentTracker
from cmux_core.api import wire
from cmux_core.api.dispatch import Result
from cmux_core.api.methods.shared.routing import Routing, surface_keys, surface_of, workspace_keys
from cmux_core.config import Settings
from cmux_core.errors import CmuxError, InvalidParams
from cmux_core.model import cmux_v2_layout, surfaces
from cmux_core.model.mux import Mux, spawn_error
from cmux_core.model.pane_io import launch_env
from cmux_core.model.tree import Pane, Surface, Window, Workspace


def resolve_cwd(value: str | None, field: str) -> str | None:
    """Expand ``~``; a path that is not a directory, or cannot be looked up (a NUL, a name
    over the filesystem's limits, a parent that may not be searched), is invalid_params
    naming ``field``."""
    if value is None or not value.strip():
        return None
    if "\0" in value:
        raise InvalidParams(field, "must not contain NUL")
    path = Path(value.strip()).expanduser()
    if not path.is_absolute():
        path = Path.cwd() / path
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InvalidParams(field, f"directory {value} does not exist") from None
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InvalidParams(field, f"cannot use directory {value}: {reason}") from None
    if not stat.S_ISDIR(mode):
        raise InvalidParams(field, f"{value} is not a directory")
    return str(path)


@contextmanager
def spawning(code: str) -> Iterator[None]:
    """Raise a spawn failure inside the block as ``code`` (e.g. ``tab_create_failed``), with
    its message and data (:func:`~cmux_core.model.mux.spawn_error`); other errors pass."""
    try:
        yield
    except CmuxError as exc:
        raise spawn_error(exc, code) from None


def _exec_string(value: str) -> str:
    if "\0" in value:
        raise ValueError("must not contain NUL")
    return value


ExecString = Annotated[str, AfterValidator(_exec_string)]
"""A params string that reaches ``exec`` (a command or one of its arguments): no NUL."""


def command_argv(value: list[str] | str | None, field: str) -> list[str] | None:
    """An argv list, or a command string run by ``sh -c``."""
    if value is None:
        return None
    if isinstance(value, str):
        if not value.strip():
            return None
        return ["/bin/sh", "-c", value]
    if not value or not value[0]:
        raise InvalidParams(field, "must be a non-empty argv list")
    return value


def trimmed(value: str | None) -> str | None:
    return value.strip() or None if value is not None else None


def requested_command(*values: object) -> str | None:
    """The first command given as text, as written (what ``layout.save`` keeps)."""
    return next((v.strip() for v in values if isinstance(v, str) and v.strip()), None)


def terminal_started(surface: Surface, initial_input: str | None, *commands: object) -> None:
    """After a new terminal is spawned: keep the first of ``commands`` given as text (what
    ``layout.save`` writes back) and type ``initial_input`` into it."""
    surface.requested_command = requested_command(*commands)
    if initial_input:
        surface.terminal.write(initial_input.encode())


def creation_focus(settings: Settings, focus: bool | None) -> bool:
    """Whether a cmux-family creating call takes focus: what the request says, else the
    server's ``[cmux] focus_on_create`` setting (off: cmux's current policy)."""
    return settings.focus_on_create if focus is None else focus


def create_from_layout(mux: Mux, tree: object, *, window: Window | None, cwd: str | None,
                       label: str | None = None, env: dict[str, str] | None = None,
                       description: str = "", focus: bool = False) -> Workspace:
    """A workspace built from a cmux layout tree (see :mod:`cmux_core.model.cmux_v2_layout`);
    ``invalid_layout`` naming the bad node, and nothing created, when it is malformed."""
    base = cwd or mux.default_cwd()
    spec = cmux_v2_layout.parse(tree, base)
    return cmux_v2_layout.build(mux, spec, window=window, cwd=base, label=label, env=env,
                             description=description, focus=focus)


def created_result(mux: Mux, agents: AgentTracker, ws: Workspace) -> Result:
    """What ``workspace.create`` answers: both families' shapes, with the focused pane as
    ``root_pane`` and its selected surface."""
    tab = ws.tabs[0]
    pane = mux.panes[tab.focused]
    return {"type": "workspace_created", "workspace": wire.workspace_info(mux, agents, ws),
            "tab": wire.tab_info(mux, agents, tab), "root_pane": wire.pane_info(mux, agents, pane),
            **workspace_keys(ws),
            "pane_id": pane.key, "pane_ref": pane.ref,
            "surface_id": pane.surface.uuid, "surface_ref": pane.surface.ref}


_SHORT_DIRECTIONS: dict[str, surfaces.SplitDirection] = {
    "l": "left", "r": "right", "u": "up", "d": "down",
    "left": "left", "right": "right", "up": "up", "down": "down"}


def only_terminal(kind: str | None) -> None:
    if kind == "markdown":
        raise CmuxError("not_supported", "a markdown surface is a tab beside a terminal, "
                        "never a pane of its own: open it with surface.create or "
                        "markdown.open", {"type": kind})
    if kind is not None and kind != "terminal":
        raise CmuxError("not_supported",
                        f"surface type {kind!r} needs the cmux app's GUI; this server runs "
                        "terminal surfaces only", {"type": kind})


def split_direction(value: str, field: str = "direction") -> surfaces.SplitDirection:
    direction = _SHORT_DIRECTIONS.get(value.strip().lower())
    if direction is None:
        raise InvalidParams(field, "Missing or invalid direction (left|right|up|down)")
    return direction


class NewTerminalParams(Routing):
    type: str | None = None
    url: str | None = None
    working_directory: str | None = None
    cwd: str | None = None
    initial_command: ExecString | None = None
    command: ExecString | None = None
    initial_input: str | None = None
    startup_environment: dict[str, str] | None = None
    initial_env: dict[str, str] | None = None
    focus: bool | None = None


def terminal_spec(mux: Mux, p: NewTerminalParams, near: Pane
                  ) -> tuple[str, list[str] | None, dict[str, str] | None]:
    """cwd (default: where ``near`` works now), argv and env of a new terminal."""
    only_terminal(p.type)
    cwd = (resolve_cwd(p.working_directory, "working_directory")
           or resolve_cwd(p.cwd, "cwd") or mux.pane_cwd(near) or near.tab.workspace.cwd)
    command = (command_argv(p.initial_command, "initial_command")
               or command_argv(p.command, "command"))
    env_field = "startup_environment" if p.startup_environment is not None else "initial_env"
    env = launch_env(p.startup_environment if p.startup_environment is not None
                       else p.initial_env, env_field)
    return cwd, command, env or None


def herdr_launch(cwd: str | None, env: dict[str, str] | None, command: list[str] | None
                 ) -> tuple[str | None, list[str] | None, dict[str, str]]:
    """cwd, argv and env of a herdr ``tab.create`` or ``pane.split`` from its ``cwd``,
    ``env`` and ``command`` params; a bad ``env`` is named before a bad ``cwd``."""
    launch = launch_env(env)
    return resolve_cwd(cwd, "cwd"), command_argv(command, "command"), launch


def created(surface: Surface) -> dict[str, Any]:
    out = {"type": surface.kind, **surface_keys(surface), "surface_type": surface.kind}
    if surface.path is not None:
        out["path"] = surface.path
    return out


class SurfaceSplitParams(NewTerminalParams):
    direction: str
    initial_divider_position: float | None = Field(default=None, ge=0.1, le=0.9)


async def split_here(mux: Mux, settings: Settings, p: SurfaceSplitParams) -> Result:
    direction = split_direction(p.direction)
    source = surface_of(mux, p)
    cwd, command, env = terminal_spec(mux, p, source.pane)
    with spawning("surface_create_failed"):
        pane = surfaces.split(mux, source.pane, direction,
                              ratio=p.initial_divider_position, cwd=cwd, command=command,
                              env=env, focus=creation_focus(settings, p.focus))
    terminal_started(pane.surface, p.initial_input, p.initial_command, p.command)
    return created(pane.surface)
