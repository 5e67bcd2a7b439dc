"""machine.* methods: the saved machines of the fleet and their links' state, and
``machine.relay``, which turns a connection into one to a machine's server.

The fleet itself lives in :mod:`cmux_core.fleet`; these handlers see it through the small
:class:`FleetControl` protocol the composition root hands them.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import Field

from cmux_core.api.context import Call, Peer
from cmux_core.api.dispatch import MethodTable, Result
from cmux_core.api.methods.shared.params import Empty
from cmux_core.errors import CmuxError
from cmux_core.hookspecs import Params

CHECK_TIMEOUT_S = 20.0


class RelayChannel(Protocol):
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    async def close(self) -> None: ...


class FleetControl(Protocol):
    """The fleet as these handlers use it; errors are CmuxErrors (``machine_not_found``,
    ``invalid_machine``, ``machine_offline``)."""

    def names(self) -> list[str]: ...

    def status(self, name: str) -> dict[str, Any]: ...

    def add_machine(self, name: str, destination: str, *, ssh_options: dict[str, str],
                    session: str | None, accept_new: bool) -> None: ...

    def remove(self, name: str) -> object: ...

    def rename(self, name: str, new: str) -> object: ...

    def set_enabled(self, name: str, enabled: bool) -> object: ...

    async def check(self, name: str, timeout: float) -> dict[str, Any]: ...

    async def install(self, name: str, plugins: list[str] | None = None
                      ) -> dict[str, Any]: ...

    async def open_relay(self, name: str) -> RelayChannel: ...


@dataclass(frozen=True, slots=True)
class MachineServices:
    """The services these handlers use, built by the composition root."""

    fleet: FleetControl


methods = MethodTable()


class MachineName(Params):
    machine: str = Field(max_length=64)


class MachineAddParams(MachineName):
    destination: str = Field(max_length=1024)
    ssh_options: dict[str, str] = {}
    session: str | None = None
    accept_new: bool = False


class MachineRenameParams(MachineName):
    new_name: str = Field(max_length=64)


class MachineCheckParams(MachineName):
    timeout_ms: int = Field(default=round(CHECK_TIMEOUT_S * 1000), ge=0, le=120000)


def _machine(call: Call[MachineServices], name: str) -> Result:
    return {"type": "machine", "machine": call.ctx.fleet.status(name)}


@methods.method("machine.list", Empty)
async def machine_list(call: Call[MachineServices], p: Empty) -> Result:
    """Every saved machine with its link's state, in the order they were added."""
    fleet = call.ctx.fleet
    return {"type": "machine_list", "machines": [fleet.status(n) for n in fleet.names()]}


@methods.method("machine.status", MachineName)
async def machine_status(call: Call[MachineServices], p: MachineName) -> Result:
    """One machine: its settings, ``state`` (connected, connecting, offline, auth_failed,
    incompatible), ``reason`` and ``ssh_error`` (ssh's own last line)."""
    return _machine(call, p.machine)


@methods.method("machine.add", MachineAddParams)
async def machine_add(call: Call[MachineServices], p: MachineAddParams) -> Result:
    """Save a machine (enabled) and start connecting to it."""
    call.ctx.fleet.add_machine(p.machine, p.destination, ssh_options=p.ssh_options,
                               session=p.session, accept_new=p.accept_new)
    return _machine(call, p.machine)


@methods.method("machine.remove", MachineName)
async def machine_remove(call: Call[MachineServices], p: MachineName) -> Result:
    """Forget a machine and close its link (its server keeps running)."""
    call.ctx.fleet.remove(p.machine)
    return {"type": "ok"}


@methods.method("machine.rename", MachineRenameParams)
async def machine_rename(call: Call[MachineServices], p: MachineRenameParams) -> Result:
    """Give a machine a new name; its qualified ids change with it."""
    call.ctx.fleet.rename(p.machine, p.new_name)
    return _machine(call, p.new_name)


@methods.method("machine.enable", MachineName)
async def machine_enable(call: Call[MachineServices], p: MachineName) -> Result:
    """Connect the machine again and keep it connected."""
    call.ctx.fleet.set_enabled(p.machine, True)
    return _machine(call, p.machine)


@methods.method("machine.disable", MachineName)
async def machine_disable(call: Call[MachineServices], p: MachineName) -> Result:
    """Close the machine's link and leave it out of ``"all"``."""
    call.ctx.fleet.set_enabled(p.machine, False)
    return _machine(call, p.machine)


@methods.method("machine.check", MachineCheckParams)
async def machine_check(call: Call[MachineServices], p: MachineCheckParams) -> Result:
    """Connect now (or wait for the connection under way, up to ``timeout_ms``) and time a
    ``ping``: the status with the remote version and protocol, ``round_trip_ms`` and
    ``missing`` (what stops the machine from serving, empty when nothing)."""
    row = await call.ctx.fleet.check(p.machine, p.timeout_ms / 1000)
    return {"type": "machine_check", "machine": row}


class MachineInstallParams(MachineName):
    plugins: list[str] | None = None


@methods.method("machine.install", MachineInstallParams)
async def machine_install(call: Call[MachineServices], p: MachineInstallParams) -> Result:
    """Copy the running installation's wheels (cmux-core, the plugin distributions named in
    ``plugins`` or by default every installed one, and what they need) to the machine over
    ssh and install them in its private environment (nothing is downloaded there), then
    reconnect it: the version installed, the wheels copied (empty when it was already
    current) and the status."""
    return {"type": "machine_install",
            **await call.ctx.fleet.install(p.machine, p.plugins)}


@methods.method("machine.relay", MachineName)
async def machine_relay(call: Call[MachineServices], p: MachineName) -> Result:
    """Turn this connection into one to the machine's server: after this reply, every byte
    goes to that server and back (how ``cmux --machine NAME ...`` runs any command)."""
    peer = call.connection
    if peer is None:
        raise CmuxError("invalid_stream", "a relay needs a client connection")
    channel = await call.ctx.fleet.open_relay(p.machine)
    try:
        reader = peer.take_raw()
    except CmuxError:
        await channel.close()
        raise
    peer.run_task(_relay(peer, reader, channel))
    return {"type": "machine_relay", "machine": p.machine}


async def _relay(peer: Peer, reader: asyncio.StreamReader, channel: RelayChannel) -> None:
    async def upstream() -> None:
        while data := await reader.read(1 << 16):
            channel.writer.write(data)
            await channel.writer.drain()

    async def downstream() -> None:
        while data := await channel.reader.read(1 << 16):
            peer.send(data)
            await peer.drain()

    tasks = [asyncio.ensure_future(upstream()), asyncio.ensure_future(downstream())]
    try:
        with contextlib.suppress(ConnectionError, OSError):
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await channel.close()
        peer.finish()
