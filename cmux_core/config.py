"""Where things live: config, state and runtime paths, the socket path, settings.

Paths follow XDG: config in ``$XDG_CONFIG_HOME/cmux`` (``~/.config/cmux``), state in
``$XDG_STATE_HOME/cmux`` (``~/.local/state/cmux``), made files that can be made again in
``$XDG_CACHE_HOME/cmux`` (``~/.cache/cmux``), the socket in
``$XDG_RUNTIME_DIR/cmux/`` or ``/tmp/cmux-$UID/`` without it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

_SESSION_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
MAX_RESTORE_TEXT_LINES = 10_000


class ConfigError(ValueError):
    """A setting that cannot be used: ``config.toml`` that does not parse or holds a bad
    value (the message names the file and the key), or an invalid session name."""


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "cmux"


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "cmux"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cmux"


def runtime_dir() -> Path:
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and Path(xdg).is_dir():
        return Path(xdg) / "cmux"
    return Path(f"/tmp/cmux-{os.getuid()}")


def socket_dirs() -> tuple[Path, Path]:
    """The directories cmux makes for its sockets: the runtime directory and its sessions."""
    return runtime_dir(), runtime_dir() / "sessions"


def valid_session_name(name: str) -> bool:
    return bool(_SESSION_RE.match(name)) and name not in (".", "..")


def socket_path(explicit: str | None = None, session: str | None = None) -> Path:
    """Resolve the API socket path.

    Order: ``explicit`` (``--socket``) > ``CMUX_SOCKET_PATH`` > ``session``
    (``--session``) or ``CMUX_SESSION`` > the default ``cmux.sock``. Raises
    :class:`ConfigError` for an invalid session name.
    """
    if explicit:
        return Path(explicit)
    env_path = os.environ.get("CMUX_SOCKET_PATH")
    if env_path:
        return Path(env_path)
    name = session or os.environ.get("CMUX_SESSION") or ""
    if name and name != "default":
        if not valid_session_name(name):
            raise ConfigError(f"invalid session name {name!r}: use 1-64 of A-Z a-z 0-9 . _ -")
        return runtime_dir() / "sessions" / f"{name}.sock"
    return runtime_dir() / "cmux.sock"


def session_file(socket: Path, directory: Path | None = None) -> Path:
    """Where the server on ``socket`` keeps its session: ``<directory>/<name>.json``
    (default directory: :func:`state_dir`).

    ``name`` is ``default`` for the default socket, the session name for a session's
    socket, and otherwise the socket's file name with a hash of its absolute path, so two
    servers never share one file.
    """
    path = Path(os.path.abspath(socket))
    if path == Path(os.path.abspath(runtime_dir() / "cmux.sock")):
        name = "default"
    elif path.parent == Path(os.path.abspath(runtime_dir() / "sessions")) and \
            path.suffix == ".sock" and valid_session_name(path.stem):
        name = path.stem
    else:
        digest = hashlib.sha256(str(path).encode("utf-8", "surrogateescape")).hexdigest()
        name = f"{path.stem}-{digest[:12]}"
    return (directory or state_dir()) / f"{name}.json"


def default_shell() -> str:
    shell = os.environ.get("SHELL", "")
    if shell and os.access(shell, os.X_OK):
        return shell
    return "/bin/sh"


@dataclass(slots=True)
class Settings:
    """Settings from ``config.toml`` (:func:`cmux_core.config_file.load_settings`) overlaid
    by command-line options."""

    columns: int = 120
    rows: int = 40
    emulator: str = "auto"
    event_loop: str = "auto"
    scrollback_lines: int = 10_000
    shell: str = field(default_factory=default_shell)
    plugins_dirs: list[Path] = field(default_factory=list)
    plugin_isolation: dict[str, list[str]] = field(default_factory=dict)
    """``[plugins] process = [...]`` and ``thread = [...]``: plugin ids (or distribution
    names) by isolation, ahead of what a plugin declares."""
    plugin_default_isolation: str = "thread"
    """``[plugins] isolation``: for plugins neither configured nor declaring one."""
    manifests_dirs: list[Path] = field(default_factory=list)
    state_dir: Path = field(default_factory=state_dir)
    restore: bool = True
    """Restore the session saved by the last server on this socket (``--no-restore``)."""
    state_file: Path | None = None
    """The session file (``--state-file``); None: :func:`session_file` of the socket."""
    restore_text_lines: int = 0
    """Lines of each terminal's text saved at stop and shown again after a restore
    (``[server] restore_text_lines``; 0, the default: none)."""
    empty: bool = False
    """Without a session to restore, start with no window or workspace (``--empty``)
    instead of one workspace holding one shell."""
    herdr_env: bool = True
    """Panes also get ``HERDR_ENV``, ``HERDR_SOCKET_PATH`` and ``HERDR_PANE_ID`` (``[server]
    herdr_env = false`` turns it off), so herdr's hook scripts report to this server."""
    kitty_graphics: bool = field(
        default_factory=lambda: os.environ.get("CMUX_EXPERIMENTAL_KITTY_GRAPHICS") == "1")
    """Pane graphics (``pane.graphics.*``): ``[experimental] kitty_graphics = true``, or
    ``CMUX_EXPERIMENTAL_KITTY_GRAPHICS=1`` in the server's environment; off, they answer
    ``feature_disabled``."""
    focus_on_create: bool = field(
        default_factory=lambda: os.environ.get("CMUX_FOCUS_ON_CREATE") == "1")
    """cmux-family creating calls (``workspace.create``, ``surface.split``, ...) take focus
    unless the request says ``"focus": false``, as older cmux builds did: ``[cmux]
    focus_on_create = true``, or ``CMUX_FOCUS_ON_CREATE=1`` in the server's environment."""


@functools.cache
def installation_bin_dir() -> Path | None:
    """The directory of the running installation's ``cmux`` script, for panes' ``PATH``.

    The directory of ``sys.argv[0]`` when that is the ``cmux`` script (as typed, links not
    followed), else this interpreter's scripts directory; None when neither holds an
    executable ``cmux``. Computed once per process.
    """
    candidates: list[Path] = []
    if sys.argv and sys.argv[0] and Path(sys.argv[0]).name == "cmux":
        candidates.append(Path(os.path.abspath(sys.argv[0])).parent)
    scripts = sysconfig.get_path("scripts")
    if scripts:
        candidates.append(Path(scripts))
    for directory in candidates:
        script = directory / "cmux"
        if script.is_file() and os.access(script, os.X_OK):
            return directory
    return None


def parse_size(text: str) -> tuple[int, int]:
    """Parse ``COLSxROWS`` (e.g. ``120x40``); raises ValueError when malformed."""
    m = re.fullmatch(r"\s*(\d{1,4})\s*[xX]\s*(\d{1,4})\s*", text)
    if not m:
        raise ValueError(f"size must look like 120x40, not {text!r}")
    cols, rows = int(m.group(1)), int(m.group(2))
    if not (2 <= cols <= 2000 and 2 <= rows <= 1000):
        raise ValueError(f"size {cols}x{rows} is out of range (2..2000 x 2..1000)")
    return cols, rows
