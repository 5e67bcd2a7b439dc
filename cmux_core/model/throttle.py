"""How often a pane's OSC announcements become events: a storm costs a bounded number.

A program can print titles, progress reports, directories and notifications as fast as it
writes (100,000 OSC 9 notifications are two megabytes); were each one an event, every
subscriber would be sent every one. :class:`SignalThrottle` stands between a terminal's
signals (:class:`~cmux_core.terminal.emulator.TerminalSignal`) and the events published
for them, per pane and per kind (notifications per terminal: a pane's tabs are limited
apart, each named by its surface's key):

* ``title``, ``progress`` and ``cwd`` are states: the first change after a quiet spell is
  published at once; changes within the next :data:`STATE_INTERVAL` only replace a held
  value, published when that interval ends (which opens the next one). So a pane costs at
  most one event per kind per interval, and the final value is always published, at most
  one interval late.
* ``notification``: up to :data:`NOTIFICATION_BURST` per :data:`NOTIFICATION_WINDOW` are
  published at once. Past that the newest is held and the ones it replaces are counted;
  when the window ends the held one is published with that count (``dropped``), and opens
  the next window. So the last notification of a storm is always published, and every
  notification is either published or counted in the next published one.

A gate exists only while its pane is announcing: it is dropped when a window ends with
nothing held. It names its pane by key, never holds the pane, and keeps at most one
signal, so a storm leaves nothing behind.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from cmux_core.terminal.emulator import TerminalSignal

STATE_INTERVAL = 0.05
"""Seconds: at most one title, progress or cwd event per pane and kind in this time."""
NOTIFICATION_WINDOW = 1.0
"""Seconds over which :data:`NOTIFICATION_BURST` notifications per pane may be published."""
NOTIFICATION_BURST = 10
"""Notifications per pane published at once within one :data:`NOTIFICATION_WINDOW`."""

Emit = Callable[[str, TerminalSignal, int], None]
"""Called with ``(pane_key, signal, dropped)`` for every signal let through; ``dropped``
counts the signals of its kind that pane discarded since the previous one let through."""


@dataclass(slots=True)
class _Gate:
    window: float
    burst: int
    sent: int = 0
    held: TerminalSignal | None = None
    dropped: int = 0


class SignalThrottle:
    """Lets a pane's signals through at a bounded rate (see the module docstring).

    ``emit`` is called on the event loop, either inside :meth:`offer` or from a timer when
    a window ends; it must look the pane up itself (it may have closed since).
    """

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self._gates: dict[tuple[str, str], _Gate] = {}

    def offer(self, pane_key: str, signal: TerminalSignal) -> None:
        """Emit ``signal`` now if its gate allows, else hold it (replacing any held one).

        Must be called on the running event loop, which times the windows.
        """
        key = (pane_key, signal.kind)
        gate = self._gates.get(key)
        if gate is None:
            if signal.kind == "notification":
                gate = _Gate(NOTIFICATION_WINDOW, NOTIFICATION_BURST)
            else:
                gate = _Gate(STATE_INTERVAL, 1)
            self._gates[key] = gate
            asyncio.get_running_loop().call_later(gate.window, self._window_end, key)
        if gate.sent < gate.burst:
            gate.sent += 1
            self._emit(pane_key, signal, 0)
            return
        if gate.held is not None:
            gate.dropped += 1
        gate.held = signal

    def _window_end(self, key: tuple[str, str]) -> None:
        gate = self._gates[key]
        held, dropped = gate.held, gate.dropped
        if held is None:
            del self._gates[key]
            return
        gate.held, gate.dropped, gate.sent = None, 0, 1
        asyncio.get_running_loop().call_later(gate.window, self._window_end, key)
        self._emit(key[0], held, dropped)

    def active(self) -> int:
        """Gates open now: (pane, kind) pairs that announced within their last window."""
        return len(self._gates)
