"""The order of evidence in ``identify_group``, on process facts given in memory.

The classifier reads nothing itself; a table stands in for ``/proc`` here so each
kind of evidence can be set up exactly (real processes are identified in
``test_detect_runtime.py``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from cmux_core.detect.identify import identify_group
from cmux_core.terminal.procfs import ProcessInfo

KNOWN = {"fakebot": "fakebot", "other-bot": "other", "wrapbot": "wrapbot"}


@dataclass
class Table:
    """Processes by pid, their environments, and the pids of each group."""

    processes: dict[int, ProcessInfo] = field(default_factory=dict)
    environments: dict[int, dict[str, str]] = field(default_factory=dict)
    groups: dict[int, list[int]] = field(default_factory=dict)
    asked_for_members: bool = False

    def add(self, pgid: int, pid: int, *argv: str, comm: str = "",
            env: dict[str, str] | None = None) -> None:
        self.processes[pid] = ProcessInfo(pid, comm or argv[0].rsplit("/", 1)[-1], argv)
        self.environments[pid] = env or {}
        self.groups.setdefault(pgid, []).append(pid)

    def process(self, pid: int) -> ProcessInfo | None:
        return self.processes.get(pid)

    def environment(self, pid: int, names: Collection[str]) -> dict[str, str]:
        return {k: v for k, v in self.environments.get(pid, {}).items() if k in names and v}

    def group_members(self, pgid: int) -> list[int]:
        self.asked_for_members = True
        return self.groups.get(pgid, [])


def identify(table: Table, pgid: int = 10) -> tuple[str, int] | None:
    found = identify_group(pgid, KNOWN.get, table)
    return None if found is None else (found.label, found.pid)


def test_the_leaders_hint_beats_its_name() -> None:
    table = Table()
    table.add(10, 10, "fakebot", env={"CMUX_AGENT": " Other-Bot "})
    assert identify(table) == ("other", 10)


def test_an_unknown_hint_is_ignored_and_a_blank_one_skipped() -> None:
    table = Table()
    table.add(10, 10, "fakebot", env={"CMUX_AGENT": "   ", "HERDR_AGENT": "nobody"})
    assert identify(table) == ("fakebot", 10)


def test_an_interactive_shell_leader_ends_the_search_without_listing_members() -> None:
    table = Table()
    table.add(10, 10, "-bash")
    table.add(10, 11, "fakebot")
    assert identify(table) is None
    assert not table.asked_for_members


def test_a_tmux_leader_means_no_agent() -> None:
    table = Table()
    table.add(10, 10, "tmux", env={"CMUX_AGENT": "fakebot"})
    table.add(10, 11, "fakebot")
    assert identify(table) is None


def test_a_members_hint_beats_the_members_names() -> None:
    table = Table()
    table.add(10, 10, "sh", "-c", "x")
    table.add(10, 11, "fakebot")
    table.add(10, 12, "cat", env={"HERDR_AGENT": "wrapbot"})
    assert identify(table) == ("wrapbot", 12)


def test_members_by_name_one_known_by_another_name_than_its_own_beats_a_plain_one() -> None:
    # A script under a runtime or a wrapper is named unlike its kernel name; ties keep
    # the lowest pid.
    table = Table()
    table.add(10, 10, "sh", "-c", "x")
    table.add(10, 11, "other-bot")
    table.add(10, 12, "node", "/opt/fakebot/cli.js")
    table.add(10, 13, "/nix/store/x/bin/.wrapbot-wrapped", comm=".wrapbot-wrappe")
    assert identify(table) == ("fakebot", 12)
    del table.processes[12]
    assert identify(table) == ("wrapbot", 13)
    del table.processes[13]
    assert identify(table) == ("other", 11)


def test_a_leader_that_is_gone_leaves_the_members() -> None:
    table = Table()
    table.add(10, 11, "fakebot")
    assert identify(table) == ("fakebot", 11)
