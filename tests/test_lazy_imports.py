"""What a server imports only when a request needs it: the pure-Python screen backend and
its character-width tables stay out of a server whose terminals run on ghostty."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("pyte", "wcwidth", "cmux_core.terminal.pyte.emulator")


def _modules_after(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys\nprint('\\n'.join(sys.modules))"],
        capture_output=True, text=True, check=True, timeout=120)
    return set(done.stdout.split())


def test_the_app_and_a_ghostty_terminal_load_no_pyte() -> None:
    pytest.importorskip("pyghostty")
    loaded = _modules_after(
        "import cmux_core.app\n"
        "from cmux_core.terminal.backends import make_emulator\n"
        "em = make_emulator('ghostty', 80, 24)\n"
        "em.feed(b'hello \\xe4\\xb8\\xad\\r\\n')\n"
        "assert em.backend == 'ghostty'")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_a_pyte_terminal_still_loads_it_when_asked() -> None:
    loaded = _modules_after(
        "from cmux_core.terminal.backends import make_emulator\n"
        "em = make_emulator('pyte', 80, 24)\n"
        "em.feed(b'hello\\r\\n')\n"
        "assert em.backend == 'pyte'")
    assert "cmux_core.terminal.pyte.emulator" in loaded
