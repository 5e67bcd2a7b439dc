"""What restoring a saved session does to the model: objects entered under their saved
uuids and refs, the number allocators moved past them, and surfaces spawned into restored
panes.

Functions over :class:`~cmux_core.model.mux.Mux` (the only owner of the model), in the
manner of :mod:`cmux_core.model.arrange`, for ``cmux_core.state.restore``, which publishes
the restored objects' events once the tree is whole.
"""

from __future__ import annotations

from typing import cast

from cmux_core import ids
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Pane, Surface, Workspace


def reserve_workspace_numbers(mux: Mux, upto: int) -> None:
    """Count every workspace number below ``upto`` as handed out (a restored session's
    closed ones too); a smaller ``upto`` changes nothing."""
    mux._next_workspace = max(mux._next_workspace, upto)


def adopt(mux: Mux, obj: object, uuid: str, ref: str = "") -> None:
    """Enter a restored object under its saved uuid and short ref (``""`` for none, as
    tabs have) so lookups find it, and make the allocators continue after them: the
    ref's kind counts on from its number, and workspace numbers from a workspace's."""
    mux._by_uuid[uuid] = obj
    if ref:
        kind, _, number = ref.partition(":")
        mux._by_ref[ref] = obj
        mux.refs.reserve(cast(ids.RefKind, kind), int(number))
    if isinstance(obj, Workspace):
        reserve_workspace_numbers(mux, ids.decode_number(obj.id[1:]) + 1)


def restore_surface(mux: Mux, pane: Pane, *, uuid: str, ref: str, cwd: str,
                    command: list[str] | None, argv: list[str] | None = None,
                    env: dict[str, str] | None = None, size: tuple[int, int]) -> Surface:
    """Spawn one surface of a restored ``pane`` under its saved uuid and ref, running
    ``argv`` (None: ``command``), and append it to the pane; ``command`` is kept as
    what it was launched with. The first surface is selected and enters the pane into
    the mux; the caller adopts the pane, places it in its tab's tree and publishes.
    Raises ``spawn_failed``, adding nothing, when the process cannot start.
    """
    term = mux._spawn(pane.tab.workspace, pane.tab, pane, uuid, cwd=cwd,
                      command=argv or command, env=env, size=size)
    surface = Surface(uuid, ref, term, pane, command, cwd, env=dict(env) if env else None)
    pane.surfaces.append(surface)
    if pane.selected is None:
        pane.selected = surface
    adopt(mux, surface, uuid, ref)
    mux.panes[pane.key] = pane
    mux._attach(pane, surface)
    return surface
