"""Report-only sockets: one terminal's way in for hooks that run where the server's socket
is out of reach (an agent on a remote host, behind ``ssh`` in that terminal's pane).

A report socket answers ``ping`` and the hook report methods (:data:`REPORT_METHODS`) and
nothing else; every other method gets ``forbidden``. Reports through it are about its own
terminal only: a ``pane_id`` or ``surface_id`` in the params must name that terminal's pane
or the terminal itself, or the report is refused with ``forbidden`` and changes nothing;
without them the report lands on its terminal. It is served like the main socket (same
framing, same limits, the peer's uid checked) from ``0600`` in a ``0700`` directory made
beside the main socket, and is closed and removed when its terminal's pane closes, when the
client connection that opened it goes away, and when the server stops. On closing, the hook
authority its reports gave the terminal is cleared, so the screen speaks for the pane again.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cmux_core.agents.tracker import AgentTracker
from cmux_core.api.context import Peer
from cmux_core.api.dispatch import MethodTable, Result
from cmux_core.api.server import Server
from cmux_core.errors import CmuxError, InvalidParams, NotFound
from cmux_core.events import EventHub
from cmux_core.model.events import PaneClosed, PaneUpdated
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Surface
from cmux_core.socket_safety import SocketPathError

log = logging.getLogger(__name__)

REPORT_METHODS = frozenset({"pane.report_agent", "pane.report_agent_session",
                            "pane.release_agent", "pane.clear_agent_authority",
                            "pane.report_metadata"})
"""What a report socket passes on, besides ``ping``."""
DIR_PREFIX = "cmux-reports-"


class ReportGate:
    """The method table of one report socket: the allowed methods of the server's table,
    each report pinned to ``surface``."""

    def __init__(self, methods: MethodTable, mux: Mux, surface: Surface) -> None:
        self.methods = methods
        self.mux = mux
        self.surface = surface
        self.pane_id = surface.pane.id
        """The pane it was opened for (a moved surface keeps its ``CMUX_PANE_ID``)."""
        self.sources: set[str] = set()
        """The sources whose reports it passed on (their authority is cleared on close)."""

    def _refuse(self, what: str) -> CmuxError:
        return CmuxError("forbidden", f"{what}: this report-only socket accepts ping and "
                         f"{', '.join(sorted(REPORT_METHODS))} for pane {self.pane_id} only",
                         {"pane_id": self.pane_id})

    def _own(self, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` about this gate's terminal, or ``forbidden`` when they name another."""
        out = dict(params)
        pane_id, surface_id = out.pop("pane_id", None), out.pop("surface_id", None)
        for key, value in (("pane_id", pane_id), ("surface_id", surface_id)):
            if value is not None and not isinstance(value, str):
                raise InvalidParams(key, "input should be a valid string")
        try:
            if pane_id is not None and pane_id != self.pane_id and (
                    self.mux.pane(pane_id) is not self.surface.pane):
                raise self._refuse(f"pane {pane_id} is not this socket's pane")
            if surface_id is not None and self.mux.surface(surface_id) is not self.surface:
                raise self._refuse(f"surface {surface_id} is not this socket's terminal")
        except NotFound:
            raise self._refuse(f"{pane_id or surface_id} is not this socket's pane") from None
        out["surface_id"] = self.surface.uuid
        return out

    async def call(self, name: str, raw_params: dict[str, Any], *,
                   connection: Peer | None = None, request_id: Any = None) -> Result:
        if name != "ping" and name not in REPORT_METHODS:
            raise self._refuse(f"{name} is not a report")
        params = self._own(raw_params) if name in REPORT_METHODS else raw_params
        result = await self.methods.call(name, params, connection=connection,
                                         request_id=request_id)
        source = params.get("source")
        if name in REPORT_METHODS and isinstance(source, str):
            self.sources.add(source)
        return result


@dataclass(eq=False)
class ReportSocket:
    """One open report socket: its path, its gate, its server and who opened it."""

    path: Path
    gate: ReportGate
    server: Server
    owner: str | None
    """The ``client_id`` of the connection that opened it (None: the server itself)."""


@dataclass(eq=False)
class ReportSockets:
    """Every open report socket of a server; the composition root hands it the server's
    method table and feeds it pane and connection ends."""

    events: EventHub
    methods: MethodTable
    mux: Mux
    agents: AgentTracker
    socket_path: Path
    open_sockets: list[ReportSocket] = field(init=False, default_factory=list)
    _dir: Path | None = field(init=False, default=None)

    def directory(self) -> Path:
        """The private directory (``0700``, made on first use) beside the main socket."""
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir=self.socket_path.parent))
        return self._dir

    async def open(self, surface: Surface, owner: Peer | None) -> ReportSocket:
        """Listen on a new report socket for ``surface`` (a terminal); it lives until
        :meth:`close` (see the module doc for when that is called). Raises
        ``report_socket_failed`` when no socket can be made beside the main one."""
        gate = ReportGate(self.methods, self.mux, surface)
        try:
            path = self.directory() / f"{secrets.token_hex(6)}.sock"
            server = Server(self.events, gate, path)
            await server.listen()
        except (OSError, SocketPathError) as exc:
            raise CmuxError("report_socket_failed", f"cannot open a report socket beside "
                            f"{self.socket_path}: {exc}") from None
        opened = ReportSocket(path, gate, server, owner.client_id if owner else None)
        self.open_sockets.append(opened)
        log.info("report socket %s opened for pane %s", path, gate.pane_id,
                 extra={"cmux_pane": gate.pane_id})
        return opened

    def close(self, opened: ReportSocket) -> None:
        """Stop serving ``opened``, remove its file and clear the authority its reports
        gave its terminal (when that is still there). Closing twice does nothing."""
        if opened not in self.open_sockets:
            return
        self.open_sockets.remove(opened)
        opened.server.stop_accepting()
        opened.server.drop_connections()
        opened.server.unlink()
        surface = opened.gate.surface
        if self.mux.find_surface(surface.uuid) is surface:
            for source in sorted(opened.gate.sources):
                self.agents.clear_authority(surface, source=source)

    def connection_closed(self, client_id: str) -> None:
        for opened in [s for s in self.open_sockets if s.owner == client_id]:
            self.close(opened)

    def pane_changed(self, event: PaneClosed | PaneUpdated) -> None:
        """Close the sockets whose terminal is gone (its pane closed, or it was closed)."""
        for opened in list(self.open_sockets):
            surface = opened.gate.surface
            if self.mux.find_surface(surface.uuid) is not surface:
                self.close(opened)

    def stop(self) -> None:
        for opened in list(self.open_sockets):
            self.close(opened)
        if self._dir is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(self._dir)
            self._dir = None
