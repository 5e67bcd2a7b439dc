"""Print like a busy coding agent at a steady byte rate: coloured log lines and spinner redraws.

Run as a pane's program by the scale case and the soak:
``python agent_stream.py BYTES_PER_S [PREFILL_LINES]``. With PREFILL_LINES it first prints
that many lines at once (a pane that has been busy for a while: its scrollback already
full). Then output goes out every 50 ms in one write (a twentieth of the rate each time),
forever, until the pane closes. The last line on screen is a status line with a spinner
glyph, the way an agent shows it is working: each write erases it (carriage return, erase
line), prints its lines and draws it again with the next glyph. Lines fit in 80 columns.
They are made once up front, so the program itself costs little CPU beside the server.
"""

from __future__ import annotations

import os
import sys
import time

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
TICK_S = 0.05
ERASE = b"\r\x1b[K"
DISTINCT = 997
"""Different lines made up front (a prime, so line numbers and colours do not repeat in step)."""


def line(i: int) -> str:
    return (f"\x1b[3{i % 8}m{i:7d}\x1b[0m \x1b[1mtool\x1b[0m "
            f"\x1b[38;5;{i % 256}mread src/module_{i % 97}.py\x1b[0m "
            f"\x1b[38;2;{i % 256};160;90m+{i % 50} -{i % 7}\x1b[0m\r\n")


def main() -> None:
    rate = int(sys.argv[1])
    prefill = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    per_tick = max(1, int(rate * TICK_S))
    lines = b"".join(line(i).encode() for i in range(DISTINCT))
    if prefill:
        os.write(1, b"".join(line(i).encode() for i in range(prefill)))
    statuses = [f"\x1b[38;5;208m{glyph}\x1b[0m Working… (esc to interrupt)".encode()
                for glyph in SPINNER]
    pos = tick = 0
    began = time.monotonic()
    while True:
        status = statuses[tick % len(statuses)]
        end = lines.find(b"\n", pos + per_tick - len(status)) + 1 or len(lines)
        chunk = ERASE + lines[pos:end] + status
        pos = 0 if end >= len(lines) else end
        os.write(1, chunk)
        tick += 1
        # Paced against the start, so a write that blocked is caught up on (the rate holds
        # on average).
        delay = began + tick * TICK_S - time.monotonic()
        if delay > 0:
            time.sleep(delay)


if __name__ == "__main__":
    main()
