"""Where things live: config, state and runtime paths, the socket path, settings.

Paths follow XDG: config in ``$XDG_CONFIG_HOME/cmux`` (``~/.config/cmux``), state in
``$XDG_STATE_HOME/cmux`` (``~/.local/state/cmux``), the socket in
``$XDG_RUNTIME_DIR/cmux/`` or ``/tmp/cmux-$UID/`` without it.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_SESSION_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "cmux"


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "cmux"


def runtime_dir() -> Path:
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and Path(xdg).is_dir():
        return Path(xdg) / "cmux"
    return Path(f"/tmp/cmux-{os.getuid()}")


def valid_session_name(name: str) -> bool:
    return bool(_SESSION_RE.match(name)) and name not in (".", "..")


def socket_path(explicit: str | None = None, session: str | None = None) -> Path:
    """Resolve the API socket path.

    Order: ``explicit`` (``--socket``) > ``CMUX_SOCKET_PATH`` > ``session``
    (``--session``) or ``CMUX_SESSION`` > the default ``cmux.sock``. Raises
    ValueError for an invalid session name.
    """
    if explicit:
        return Path(explicit)
    env_path = os.environ.get("CMUX_SOCKET_PATH")
    if env_path:
        return Path(env_path)
    name = session or os.environ.get("CMUX_SESSION") or ""
    if name and name != "default":
        if not valid_session_name(name):
            raise ValueError(f"invalid session name {name!r}: use 1-64 of A-Z a-z 0-9 . _ -")
        return runtime_dir() / "sessions" / f"{name}.sock"
    return runtime_dir() / "cmux.sock"


def default_shell() -> str:
    shell = os.environ.get("SHELL", "")
    if shell and os.access(shell, os.X_OK):
        return shell
    return "/bin/sh"


@dataclass(slots=True)
class Settings:
    """Settings from ``config.toml`` overlaid by command-line options."""

    columns: int = 120
    rows: int = 40
    emulator: str = "auto"
    event_loop: str = "auto"
    scrollback_lines: int = 10_000
    shell: str = field(default_factory=default_shell)
    plugins_dirs: list[Path] = field(default_factory=list)
    manifests_dirs: list[Path] = field(default_factory=list)
    state_dir: Path = field(default_factory=state_dir)

    @classmethod
    def load(cls, path: Path | None = None) -> Settings:
        """Read ``config.toml`` when it exists; unknown keys are ignored."""
        settings = cls()
        path = path or config_dir() / "config.toml"
        try:
            data: dict[str, Any] = tomllib.loads(path.read_text())
        except FileNotFoundError:
            return settings
        server = data.get("server", {})
        if isinstance(server.get("emulator"), str):
            settings.emulator = server["emulator"]
        if isinstance(server.get("event_loop"), str):
            settings.event_loop = server["event_loop"]
        if isinstance(server.get("scrollback_lines"), int):
            settings.scrollback_lines = server["scrollback_lines"]
        if isinstance(server.get("shell"), str):
            settings.shell = server["shell"]
        size = server.get("size")
        if isinstance(size, str):
            settings.columns, settings.rows = parse_size(size)
        return settings


def parse_size(text: str) -> tuple[int, int]:
    """Parse ``COLSxROWS`` (e.g. ``120x40``); raises ValueError when malformed."""
    m = re.fullmatch(r"\s*(\d{1,4})\s*[xX]\s*(\d{1,4})\s*", text)
    if not m:
        raise ValueError(f"size must look like 120x40, not {text!r}")
    cols, rows = int(m.group(1)), int(m.group(2))
    if not (2 <= cols <= 2000 and 2 <= rows <= 1000):
        raise ValueError(f"size {cols}x{rows} is out of range (2..2000 x 2..1000)")
    return cols, rows
