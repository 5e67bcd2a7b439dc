"""The fleet: saved machines, one OpenSSH master connection per machine carrying
``cmux bridge`` to that machine's own server, and the routing of machine-qualified ids
(``box/w1:p2``) and of the ``machines`` param, merging remote answers at the edge.

:mod:`.machines` is the saved list, :mod:`.link` one machine's connection, :mod:`.fleet`
the set of links, :mod:`.routing` what the method table asks before serving a call itself,
:mod:`.install` putting the running installation on a machine over one command runner.
"""

from __future__ import annotations

from cmux_core.fleet.fleet import Fleet
from cmux_core.fleet.link import Link, LinkState
from cmux_core.fleet.machines import LOCAL, Machine, MachineBook, MachineError
from cmux_core.fleet.routing import FleetRouter

__all__ = ["LOCAL", "Fleet", "FleetRouter", "Link", "LinkState", "Machine", "MachineBook",
           "MachineError"]
