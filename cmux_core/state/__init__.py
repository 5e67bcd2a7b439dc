"""The session file: what a server saves of its session, and how the next one restores it.

* :mod:`~cmux_core.state.schema`: the file's versioned format and its validation.
* :mod:`~cmux_core.state.capture`: the model, agents and views as that format.
* :mod:`~cmux_core.state.restore`: the format rebuilt into a fresh model, processes started.
* :mod:`~cmux_core.state.store`: reading, atomic writing and setting aside the file.
* :mod:`~cmux_core.state.keeper`: :class:`SessionKeeper`, which restores at start and
  saves after changes (debounced) and at stop.
"""

from __future__ import annotations

from cmux_core.state.keeper import SessionKeeper

__all__ = ["SessionKeeper"]
