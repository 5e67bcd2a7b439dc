"""A private tmux server that tests type into like a person: ``send``, ``capture``.

Each :class:`Tmux` runs its own server (``tmux -L <unique name>``, no config file, no
status line) so nothing of the user's tmux is touched; :meth:`Tmux.kill` ends it and is
safe to call twice.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable

from cmux_core.testing import wait_until

CMUX = f"{sys.executable} -m cmux_core"
"""How the shell inside tmux runs this checkout's cmux."""


def have_tmux() -> bool:
    return shutil.which("tmux") is not None


class Tmux:
    def __init__(self, env: dict[str, str]) -> None:
        self.name = f"cmux-t-{uuid.uuid4().hex[:10]}"
        self.env = {**{k: v for k, v in os.environ.items() if not k.startswith("CMUX_")},
                    **env, "PS1": "outer$ ", "ENV": ""}
        self._started = False

    def run(self, *args: str) -> str:
        proc = subprocess.run(["tmux", "-L", self.name, "-f", "/dev/null", *args],
                              capture_output=True, text=True, env=self.env, timeout=30)
        if proc.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    def new_session(self, name: str, columns: int = 100, lines: int = 30) -> str:
        """A detached session ``name`` of ``columns`` x ``lines`` running /bin/sh; returns
        its target for :meth:`send` and :meth:`capture`."""
        self.run("new-session", "-d", "-s", name, "-x", str(columns), "-y", str(lines),
                 "env PS1='outer$ ' /bin/sh")
        if not self._started:
            self._started = True
            self.run("set-option", "-g", "status", "off")
        self.run("set-option", "-t", name, "status", "off")
        self.run("resize-window", "-t", name, "-x", str(columns), "-y", str(lines))
        target = f"{name}:0.0"
        self.wait_for(target, lambda text: "outer$" in text)
        return target

    def send(self, target: str, *keys: str) -> None:
        self.run("send-keys", "-t", target, *keys)

    def type(self, target: str, text: str) -> None:
        """Type ``text`` literally (no key names), without Enter."""
        self.run("send-keys", "-t", target, "-l", text)

    def capture(self, target: str) -> str:
        return self.run("capture-pane", "-p", "-t", target)

    def size(self, target: str) -> tuple[int, int]:
        width, height = self.run("display-message", "-p", "-t", target,
                                 "#{pane_width} #{pane_height}").split()
        return int(width), int(height)

    def wait_for(self, target: str, predicate: Callable[[str], object],
                 timeout: float = 60.0) -> str:
        """The first capture of ``target`` for which ``predicate`` holds; AssertionError
        with the last capture when none does within ``timeout`` seconds."""
        seen = [""]

        def check() -> object:
            seen[0] = self.capture(target)
            return predicate(seen[0])

        try:
            wait_until(check, timeout=timeout, interval=0.02)
        except AssertionError:
            raise AssertionError(f"tmux pane {target} never matched; it shows:\n"
                                 f"{seen[0]}") from None
        return seen[0]

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.name, "kill-server"], capture_output=True,
                       env=self.env, timeout=30)
