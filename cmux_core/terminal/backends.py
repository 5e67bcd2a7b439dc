"""Choosing an emulator backend for a new terminal.

``pyte`` (:class:`~cmux_core.terminal.pyte.emulator.PyteEmulator`, pure Python) is
always available; ``ghostty`` (:class:`~cmux_core.terminal.ghostty.GhosttyEmulator`)
needs the optional native ``pyghostty`` package, so it is imported on first use and a
missing or broken library is a fact to handle, not an import error of this module. pyte
too is imported only when a terminal uses it: a server whose terminals all run on
ghostty never loads pyte and its character-width tables (about 8 MiB).
"""

from __future__ import annotations

from cmux_core.errors import CmuxError, InvalidParams
from cmux_core.terminal.emulator import Emulator


def _pyte(columns: int, lines: int, scrollback_lines: int) -> Emulator:
    from cmux_core.terminal.pyte.emulator import PyteEmulator

    return PyteEmulator(columns, lines, scrollback_lines=scrollback_lines)


def make_emulator(
    backend: str, columns: int, lines: int, *, scrollback_lines: int = 10_000
) -> Emulator:
    """A new emulator of ``columns`` x ``lines`` cells.

    ``backend`` is ``"pyte"``, ``"ghostty"`` or ``"auto"`` (ghostty when its
    module imports, else pyte). Raises ``CmuxError("emulator_unavailable")``
    when ghostty is asked for explicitly and cannot load, and
    :class:`InvalidParams` for an unknown backend name.
    """
    if backend == "pyte":
        return _pyte(columns, lines, scrollback_lines)
    if backend not in ("ghostty", "auto"):
        raise InvalidParams("emulator", f"unknown emulator backend {backend!r}")
    try:
        # Imported here, not at the top: the native library is optional (see the docstring).
        from cmux_core.terminal.ghostty import GhosttyEmulator
    except (ImportError, OSError) as exc:
        if backend == "ghostty":
            raise CmuxError(
                "emulator_unavailable", f"the ghostty emulator cannot be loaded: {exc}"
            ) from exc
        return _pyte(columns, lines, scrollback_lines)
    return GhosttyEmulator(columns, lines, scrollback_lines=scrollback_lines)
