"""Input written to a surface's terminal: cmux key names and the write itself.
"""

from __future__ import annotations

from cmux_core.errors import CmuxError
from cmux_core.model.pane_io import keys_for
from cmux_core.model.tree import Surface


def write(surface: Surface, data: bytes) -> None:
    """Write input to the surface's terminal; ``process_exited`` once its process ended."""
    if surface.terminal.exited:
        raise CmuxError("process_exited", "the surface's process has exited",
                        {"surface_id": surface.uuid})
    surface.terminal.write(data)


_CMUX_KEY_ALIASES = {"sigint": "ctrl+c", "eof": "ctrl+d", "sigtstp": "ctrl+z",
                     "sigquit": "ctrl+\\", "kill-line": "ctrl+u", "return": "enter"}


def key_bytes(surface: Surface, key: str) -> bytes:
    """The bytes of one cmux key name (``ctrl-c``, ``enter``, ``up``, ...)."""
    name = key.strip()
    name = _CMUX_KEY_ALIASES.get(name.lower(), name)
    if name.lower().startswith("ctrl-") and len(name) > 5:
        name = "ctrl+" + name[5:]
    try:
        encoded = keys_for(surface, [name])
    except CmuxError:
        if surface.term is None:
            raise  # a markdown surface: cmux's "Surface is not a terminal", whatever the key
        raise CmuxError("invalid_params", "Unknown key", {"key": key}) from None
    return b"".join(encoded)
