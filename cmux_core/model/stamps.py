"""Change stamps: counters that say when what a pane's list row shows may have changed.

Every typed event reaches :meth:`ChangeStamps.event_seen` (the composition root observes
:class:`~cmux_core.events.Event` with it). An event about one pane or one of its surfaces
(an agent's status, a rename, a pane's update, its cwd, its exit ...) bumps that pane's own
stamp. An event about a tab or a workspace (created, renamed, moved, focused, its layout)
bumps nothing: what a pane row takes from its tab and workspace (which ones they are,
their ids, the split tree, zoom and focus) is compared by the rows themselves. Any other
event (manifests reloaded, a plugin loaded, a view set) bumps the epoch, which every row
depends on. A row kept with the stamps it was built at is still right while both are the
same and the inputs the row reads without any event (its terminal's output, size, layout)
are too; :mod:`cmux_core.api.methods.shared.projections` checks those itself.
"""

from __future__ import annotations

from cmux_core.events import Event
from cmux_core.model.events import PaneClosed
from cmux_core.model.tree import Pane, Surface, Tab, Workspace

__all__ = ["ChangeStamps"]


class ChangeStamps:
    """The epoch and each pane's own stamp (by pane key); all on the loop."""

    def __init__(self) -> None:
        self.epoch = 0
        self._panes: dict[str, int] = {}

    def pane(self, key: str) -> int:
        """``key``'s own stamp (0 until an event about it)."""
        return self._panes.get(key, 0)

    def touch_pane(self, key: str) -> None:
        self._panes[key] = self._panes.get(key, 0) + 1

    def touch_all(self) -> None:
        self.epoch += 1

    def event_seen(self, event: Event) -> None:
        """Bump the stamp ``event`` is about: its pane's; none for a tab or workspace; else
        the epoch. A closed pane's stamp is dropped with it (pane keys are never handed out
        again)."""
        pane = getattr(event, "pane", None)
        if not isinstance(pane, Pane):
            surface = getattr(event, "surface", None)
            pane = surface.pane if isinstance(surface, Surface) else None
        if pane is None:
            if not isinstance(getattr(event, "tab", None), Tab) and not isinstance(
                    getattr(event, "workspace", None), Workspace):
                self.touch_all()
        elif isinstance(event, PaneClosed):
            self._panes.pop(pane.key, None)
        else:
            self.touch_pane(pane.key)
