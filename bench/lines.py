"""A line reader over a raw fd with deadlines, shared by the cmux and tmux clients."""

from __future__ import annotations

import os
import select
import time


class LineReader:
    """Reads ``\\n``-terminated lines from ``fd``, which the caller owns and closes.

    ``readline`` raises ``TimeoutError`` when no full line arrives before the
    monotonic ``deadline`` and ``EOFError`` when the other end closes.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buf = bytearray()
        self._start = 0

    def readline(self, deadline: float) -> bytes:
        while True:
            end = self._buf.find(b"\n", self._start)
            if end >= 0:
                line = bytes(self._buf[self._start:end])
                self._start = end + 1
                if self._start > 1 << 16:
                    del self._buf[:self._start]
                    self._start = 0
                return line
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no line before the deadline")
            ready, _, _ = select.select([self.fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                raise EOFError("the other end closed")
            self._buf += chunk
