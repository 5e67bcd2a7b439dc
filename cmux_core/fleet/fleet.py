"""The fleet: the saved machines and one :class:`~cmux_core.fleet.link.Link` for each
enabled one, kept connected while the server runs."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cmux_core.errors import CmuxError, InvalidParams, NotFound
from cmux_core.events import Event
from cmux_core.fleet.events import MachineRemoved, MachineStateChanged
from cmux_core.fleet.install import CommandRunner, install
from cmux_core.fleet.link import Channel, Link, LinkState, private_control_dir, ssh_argv
from cmux_core.fleet.machines import LOCAL, Machine, MachineBook, check_name, make_machine


class Fleet:
    """Owns the links; :meth:`start` and :meth:`stop` on the server's loop. Every change to
    the book is written to its file before the links follow it. ``publish`` gets a
    :class:`~cmux_core.fleet.events.MachineStateChanged` for every change of a link's state
    or reason (a machine added or enabled starts ``connecting``, a disabled one goes
    ``offline``) and a :class:`~cmux_core.fleet.events.MachineRemoved` when a machine is
    removed or renamed."""

    def __init__(self, book: MachineBook, control_dir: Path, local_protocol: int,
                 publish: Callable[[Event], None] = lambda event: None) -> None:
        self.book = book
        self.control_dir = control_dir
        self.local_protocol = local_protocol
        self._publish = publish
        self._links: dict[str, Link] = {}
        self._started = False
        self._stopping: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Event()
        """Set (and replaced) at each change of any link's state."""

    async def start(self) -> None:
        """Read the book and connect every enabled machine (in the background: returns at
        once). A book that does not parse leaves the fleet empty and is raised."""
        self._started = True
        private_control_dir(self.control_dir)
        self.book.load()
        for machine in self.book:
            self._follow(machine)

    async def stop(self) -> None:
        """Close every master and remove the control directory; the remote servers keep
        running."""
        started, self._started = self._started, False
        links, self._links = list(self._links.values()), {}
        await asyncio.gather(*(link.stop() for link in links), *self._stopping)
        if started and not self.control_dir.is_symlink():
            shutil.rmtree(self.control_dir, ignore_errors=True)

    def _follow(self, machine: Machine | None, old: str | None = None) -> None:
        """Start, restart or stop the link of ``old`` (or ``machine.name``) to match."""
        gone = self._links.pop(old or (machine.name if machine else ""), None)
        was: LinkState | None = None
        connects = 0
        if gone is not None:
            was, connects = gone.status.state, gone.status.connects
            task = asyncio.get_running_loop().create_task(gone.stop())
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)
        if not self._started:
            return
        if machine is None or (old is not None and old != machine.name):
            self._publish(MachineRemoved(str(old), machine.name if machine else None))
            was = None
        if machine is None:
            return
        if machine.enabled:
            link = self._links[machine.name] = Link(machine, self.control_dir,
                                                    self.local_protocol, self._link_changed)
            self._link_changed(link, was)
            link.start()
        elif was is not None:
            self._publish(MachineStateChanged(machine.name, LinkState.OFFLINE.value,
                                              was.value, "disabled", "", connects,
                                              time.time()))
        self._changed_now()

    def _link_changed(self, link: Link, previous: LinkState | None) -> None:
        st = link.status
        self._publish(MachineStateChanged(
            link.name, st.state.value, previous.value if previous else None, st.reason,
            st.ssh_error, st.connects, st.since))
        self._changed_now()

    def _changed_now(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def changed(self, timeout: float | None = None) -> None:
        """Wait until a machine's state changes (or it is added, removed, renamed, enabled
        or disabled), or ``timeout`` seconds pass."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)

    def connected(self, name: str) -> bool:
        """Whether machine ``name`` is saved, enabled and connected now."""
        link = self._links.get(name)
        return link is not None and link.status.state == LinkState.CONNECTED

    # -- the book ------------------------------------------------------------------------

    def names(self) -> list[str]:
        return [m.name for m in self.book]

    def add_machine(self, name: str, destination: str, *, ssh_options: dict[str, str],
                    session: str | None, accept_new: bool) -> None:
        """Save a new, enabled machine and start connecting it; ``invalid_machine`` when a
        field is bad or the name is taken."""
        machine = make_machine(name, destination, ssh_options, session,
                               accept_new=accept_new)
        self.book.add(machine)
        self._follow(machine)

    def remove(self, name: str) -> Machine:
        gone = self.book.remove(name)
        self._follow(None, name)
        return gone

    def rename(self, name: str, new: str) -> Machine:
        renamed = self.book.rename(name, new)
        self._follow(renamed, name)
        return renamed

    def set_enabled(self, name: str, enabled: bool) -> Machine:
        machine = self.book.set_enabled(name, enabled)
        self._follow(machine, name)
        return machine

    # -- links ----------------------------------------------------------------------------

    def link(self, name: str) -> Link:
        """The link of a saved, enabled machine; ``machine_not_found`` or
        ``machine_offline`` (disabled) otherwise."""
        link = self._links.get(name)
        if link is not None:
            return link
        if self.book.get(name) is None:
            raise NotFound("machine", name)
        raise CmuxError("machine_offline", f"machine {name} is disabled",
                        {"machine": name, "state": "offline"})

    async def open_relay(self, name: str) -> Channel:
        """A new bridge session to machine ``name``'s server; the caller closes it."""
        return await self.link(name).open_channel()

    def known(self, name: str) -> bool:
        return self.book.get(name) is not None

    def enabled_names(self) -> list[str]:
        return [m.name for m in self.book if m.enabled]

    def select(self, machines: object) -> list[str]:
        """The machine names a ``machines`` param means: ``"local"``, ``"all"`` (local and
        every enabled machine), one name or a list; unknown names are ``invalid_params``."""
        if machines == "all":
            return [LOCAL, *self.enabled_names()]
        names = [machines] if isinstance(machines, str) else machines
        if not isinstance(names, list) or not names or not all(
                isinstance(n, str) for n in names):
            raise InvalidParams("machines", 'want "local", "all", a machine name or a '
                                "non-empty list of names")
        for name in names:
            if name != LOCAL and not self.known(check_name(name)):
                raise NotFound("machine", name)
        return list(dict.fromkeys(names))

    def status(self, name: str) -> dict[str, Any]:
        """A machine as ``machine.list`` and ``machine.status`` show it."""
        machine = self.book.get(name)
        if machine is None:
            raise NotFound("machine", name)
        row: dict[str, Any] = {**machine.to_wire()}
        link = self._links.get(name)
        if link is None:
            row.update(state=LinkState.OFFLINE.value, reason="disabled", ssh_error="")
            return row
        st = link.status
        row.update(state=st.state.value, reason=st.reason, ssh_error=st.ssh_error,
                   version=st.version, protocol=st.protocol, since=st.since,
                   connects=st.connects, master_pid=st.master_pid, transport=st.transport)
        return row

    async def check(self, name: str, timeout: float) -> dict[str, Any]:
        """Wait up to ``timeout`` seconds for the machine's link to settle (retrying at
        once if it is down), then time a ``ping`` round trip; returns its status with
        ``round_trip_ms`` (None when it is not connected) and ``missing``."""
        link = self.link(name)
        if link.status.state != LinkState.CONNECTED:
            link.retry_now()
        deadline = time.monotonic() + timeout
        await link.settled(timeout)
        row = self.status(name)
        row["round_trip_ms"] = None
        if link.status.state == LinkState.CONNECTED:
            started = time.perf_counter()
            await link.request("ping", {}, timeout=max(1.0, deadline - time.monotonic()))
            row["round_trip_ms"] = round((time.perf_counter() - started) * 1000, 3)
        row["missing"] = _missing(link.status.state, row)
        return row


    async def install(self, name: str, plugins: list[str] | None = None) -> dict[str, Any]:
        """Install or update the running cmux on ``name`` (see
        :func:`~cmux_core.fleet.install.install`; ``plugins`` as there, None for every
        installed plugin distribution), over ``ssh`` with the machine's options and through
        its master when the link is connected, in a worker thread; then reconnect the link
        at once and return what the install did beside the machine's status. Errors of the
        install (no python3 there, a failed pip, ...) are raised as they come.

        A link that is not connected (no cmux there yet, an old one) keeps retrying
        meanwhile, and each try starts a master that ends when the remote cannot serve:
        the install then connects by itself, so none of its commands rides on such a
        master and dies with it (ssh's exit 255, with nothing said)."""
        link = self.link(name)
        control = link.control if link.status.state == LinkState.CONNECTED else None
        runner = CommandRunner(ssh_argv(link.machine, control, master=False)[:-1])
        report = await asyncio.to_thread(install, runner, plugins=plugins)
        link.retry_now()
        return {"version": report.version, "copied": report.copied, "venv": report.venv,
                "used_uv": report.used_uv, "python": report.python,
                "distributions": report.distributions, "machine": self.status(name)}

def _missing(state: LinkState, row: dict[str, Any]) -> list[str]:
    if state == LinkState.INCOMPATIBLE:
        return ["cmux (or a cmux that speaks this protocol): run cmux machine install "
                f"{row['name']}"]
    if state == LinkState.AUTH_FAILED:
        return ["ssh access: " + str(row["reason"])]
    if state != LinkState.CONNECTED:
        return ["a working connection: " + str(row["reason"] or row["state"])]
    return []
