"""Saved machines: ``machines.toml`` in the config directory.

A machine is a name, an OpenSSH destination (anything ``ssh`` takes: ``user@host``, a
``Host`` alias of ``~/.ssh/config``), extra ``-o`` options, the remote session to reach and
whether it is enabled. The file is read whole and replaced atomically on every change
(:func:`~cmux_core.atomic_file.write_atomically`, mode 0600), so a crash leaves the old file
or the new one and a file that does not parse is reported, never overwritten.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import tomlkit

from cmux_core.atomic_file import write_atomically
from cmux_core.config import config_dir, valid_session_name
from cmux_core.errors import CmuxError, NotFound

NAME_RULE = "1-32 of a-z 0-9 -, starting with a letter, not 'local'"
_NAME = re.compile(r"[a-z][a-z0-9-]{0,31}")
LOCAL = "local"
"""The name of this machine in ``machines`` params and merged items; never a saved name."""

_OPTION_KEY = re.compile(r"[A-Za-z][A-Za-z0-9]*")


class MachineError(CmuxError):
    """A bad name, destination or option, a duplicate machine, or an unreadable file
    (``invalid_machine``); the message says which."""

    code = "invalid_machine"


def valid_machine_name(name: str) -> bool:
    """Whether ``name`` can name a machine: it cannot hold ``/`` or ``:``, so a qualified
    id ``NAME/w1:p2`` always splits at its first ``/`` into a machine and a local id."""
    return name != LOCAL and _NAME.fullmatch(name) is not None


def check_name(name: str) -> str:
    if not valid_machine_name(name):
        raise MachineError(message=f"invalid machine name {name!r}: use {NAME_RULE}")
    return name


def check_destination(destination: str) -> str:
    """An ``ssh`` destination; one that ``ssh`` would read as an option is refused."""
    if not destination or destination.startswith("-") or any(
            c.isspace() or ord(c) < 32 for c in destination):
        raise MachineError(message=f"invalid destination {destination!r}: give user@host "
                           "or a Host alias, without spaces, not starting with '-'")
    return destination


def check_option(key: str, value: str) -> tuple[str, str]:
    """One ``-o Key=Value`` for ssh; the control options are the transport's own."""
    if not _OPTION_KEY.fullmatch(key) or "\n" in value:
        raise MachineError(message=f"invalid ssh option {key}={value!r}: want Key=Value")
    if key.lower() in ("controlmaster", "controlpath", "controlpersist", "batchmode"):
        raise MachineError(message=f"ssh option {key} is set by the fleet itself")
    return key, value


@dataclass(frozen=True, slots=True)
class Machine:
    name: str
    destination: str
    ssh_options: tuple[tuple[str, str], ...] = ()
    session: str | None = None
    """The remote server's session name (None: the remote user's default socket)."""
    enabled: bool = True
    accept_new: bool = False
    """``StrictHostKeyChecking=accept-new``: trust a host key seen for the first time."""

    def to_wire(self) -> dict[str, object]:
        return {"name": self.name, "destination": self.destination,
                "ssh_options": {k: v for k, v in self.ssh_options},
                "session": self.session, "enabled": self.enabled,
                "accept_new": self.accept_new}


def make_machine(name: str, destination: str, ssh_options: dict[str, str] | None = None,
                 session: str | None = None, *, enabled: bool = True,
                 accept_new: bool = False) -> Machine:
    """A validated :class:`Machine`; raises :class:`MachineError` naming what is wrong."""
    if session is not None and not valid_session_name(session):
        raise MachineError(message=f"invalid session name {session!r}: use 1-64 of "
                           "A-Z a-z 0-9 . _ -")
    options = tuple(check_option(str(k), str(v)) for k, v in (ssh_options or {}).items())
    return Machine(check_name(name), check_destination(destination), options, session,
                   enabled, accept_new)


def machines_file() -> Path:
    return config_dir() / "machines.toml"


@dataclass
class MachineBook:
    """The saved machines, in the order they were added; every change is written at once."""

    path: Path = field(default_factory=machines_file)
    _machines: dict[str, Machine] = field(default_factory=dict)
    _unreadable: str | None = None
    """Why the file could not be loaded; while set, no change is written over it."""

    def __iter__(self) -> Iterator[Machine]:
        return iter(list(self._machines.values()))

    def get(self, name: str) -> Machine | None:
        return self._machines.get(name)

    def load(self) -> None:
        """Read the file (a missing one is no machines); raises MachineError when it does
        not parse or holds an invalid machine, leaving the book as it was and refusing
        every change until a load succeeds, so the file is never written over."""
        try:
            self._machines = self._read()
            self._unreadable = None
        except MachineError as exc:
            self._unreadable = exc.message
            raise

    def _read(self) -> dict[str, Machine]:
        try:
            data = tomllib.loads(self.path.read_text())
        except FileNotFoundError:
            data = {}
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise MachineError(message=f"cannot read {self.path}: {exc}") from None
        loaded: dict[str, Machine] = {}
        for name, entry in dict(data.get("machine", {})).items():
            if not isinstance(entry, dict):
                raise MachineError(message=f"{self.path}: machine.{name} is not a table")
            try:
                loaded[name] = make_machine(
                    name, str(entry.get("destination", "")), dict(entry.get("ssh_options", {})),
                    entry.get("session"), enabled=bool(entry.get("enabled", True)),
                    accept_new=bool(entry.get("accept_new", False)))
            except CmuxError as exc:
                raise MachineError(message=f"{self.path}: machine.{name}: {exc.message}"
                                   ) from None
            except (TypeError, ValueError) as exc:
                raise MachineError(message=f"{self.path}: machine.{name}: {exc}") from None
        return loaded

    def _save(self, machines: dict[str, Machine]) -> None:
        if self._unreadable is not None:
            raise MachineError(message=f"{self._unreadable}; fix or remove the file, then "
                               "restart the server")
        doc = tomlkit.document()
        table = tomlkit.table(is_super_table=True)
        for m in machines.values():
            entry = tomlkit.table()
            entry["destination"] = m.destination
            if m.session is not None:
                entry["session"] = m.session
            entry["enabled"] = m.enabled
            if m.accept_new:
                entry["accept_new"] = True
            if m.ssh_options:
                entry["ssh_options"] = dict(m.ssh_options)
            table[m.name] = entry
        doc["machine"] = table
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomically(self.path, tomlkit.dumps(doc).encode(), mode=0o600)
        self._machines = machines

    def add(self, machine: Machine) -> None:
        if machine.name in self._machines:
            raise MachineError(message=f"machine {machine.name} already exists")
        self._save({**self._machines, machine.name: machine})

    def remove(self, name: str) -> Machine:
        gone = self._need(name)
        self._save({k: v for k, v in self._machines.items() if k != name})
        return gone

    def rename(self, name: str, new: str) -> Machine:
        old = self._need(name)
        check_name(new)
        if new in self._machines:
            raise MachineError(message=f"machine {new} already exists")
        renamed = replace(old, name=new)
        self._save({(new if k == name else k): (renamed if k == name else v)
                    for k, v in self._machines.items()})
        return renamed

    def set_enabled(self, name: str, enabled: bool) -> Machine:
        changed = replace(self._need(name), enabled=enabled)
        self._save({**self._machines, name: changed})
        return changed

    def _need(self, name: str) -> Machine:
        machine = self._machines.get(name)
        if machine is None:
            raise NotFound("machine", name)
        return machine
