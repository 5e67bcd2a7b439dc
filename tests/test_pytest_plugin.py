"""The pytest plugin in ``cmux_core.testing``: servers started through it leave nothing behind.

The checks run an inner pytest session (``pytester``) because what is checked happens in
fixture teardown, after the inner tests have finished.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

INNER = '''
from pathlib import Path

from cmux_core.testing import start_server

HOMES = Path({homes!r})


def note(server):
    with HOMES.open("a") as f:
        f.write(f"{{server.home}}\\n")


def test_through_the_fixture(cmux_server):
    note(cmux_server)


def test_through_the_fixture_failing(cmux_server):
    note(cmux_server)
    assert False, "fails on purpose"


def test_started_and_never_stopped():
    note(start_server())


def test_started_and_killed():
    server = start_server()
    note(server)
    server.process.kill()
    server.process.wait()
'''


def test_servers_remove_their_homes(pytester: pytest.Pytester) -> None:
    homes = pytester.path / "homes.txt"
    pytester.makepyfile(test_inner=INNER.format(homes=str(homes)))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist")
    result.assert_outcomes(passed=3, failed=1)
    started = [Path(line) for line in homes.read_text().splitlines()]
    assert len(started) == 4
    left = [home for home in started if home.exists()]
    assert not left, f"server homes left behind: {left}"
