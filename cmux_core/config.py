"""Where things live: config, state and runtime paths, the socket path, settings.

Paths follow XDG: config in ``$XDG_CONFIG_HOME/cmux`` (``~/.config/cmux``), state in
``$XDG_STATE_HOME/cmux`` (``~/.local/state/cmux``), made files that can be made again in
``$XDG_CACHE_HOME/cmux`` (``~/.cache/cmux``), the socket in
``$XDG_RUNTIME_DIR/cmux/`` or ``/tmp/cmux-$UID/`` without it.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import sys
import sysconfig
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_SESSION_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_CHOICES = {"emulator": ("auto", "pyte", "ghostty"), "event_loop": ("auto", "asyncio", "uvloop")}
_SERVER_KEYS = ("size", "emulator", "event_loop", "scrollback_lines", "shell", "herdr_env",
                "restore_text_lines")
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

    @classmethod
    def load(cls, path: Path | None = None) -> Settings:
        """Read ``config.toml`` when it exists.

        Raises :class:`ConfigError` when the file cannot be read, is not valid TOML or
        holds a value of the wrong type or range; an unknown table or key is logged as a
        warning and ignored.
        """
        settings = cls()
        path = path or config_dir() / "config.toml"
        try:
            data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return settings
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from None
        for key in data:
            if key not in ("server", "experimental", "cmux"):
                kind = "table" if isinstance(data[key], dict) else "key"
                log.warning("%s: unknown %s %r ignored (settings go in [server])", path,
                            kind, key)
        experimental = _table(data, "experimental", ("kitty_graphics",), path)
        if (kitty_graphics := _flag(experimental, "experimental", "kitty_graphics", path)
                ) is not None:
            settings.kitty_graphics = settings.kitty_graphics or kitty_graphics
        cmux = _table(data, "cmux", ("focus_on_create",), path)
        if (focus_on_create := _flag(cmux, "cmux", "focus_on_create", path)) is not None:
            settings.focus_on_create = settings.focus_on_create or focus_on_create
        _apply_server(settings, _table(data, "server", _SERVER_KEYS, path), path)
        return settings


def _table(data: dict[str, Any], name: str, known: Sequence[str],
           path: Path) -> dict[str, Any]:
    """The table ``[name]`` of the file (empty when absent); its keys not in ``known`` are
    logged and ignored. Raises ConfigError when ``name`` is not a table."""
    table = data.get(name, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: {name!r} must be a table, [{name}]")
    for key in table:
        if key not in known:
            log.warning("%s: unknown key %r in [%s] ignored (known: %s)", path, key, name,
                        ", ".join(known))
    return table


def _flag(table: dict[str, Any], name: str, key: str, path: Path) -> bool | None:
    """The boolean ``key`` of ``[name]``; None when absent. Raises ConfigError when it is not
    true or false."""
    if key not in table:
        return None
    value = table[key]
    if not isinstance(value, bool):
        raise ConfigError(f"{path}: [{name}] {key} must be true or false, not {value!r}")
    return value


def _apply_server(settings: Settings, server: dict[str, Any], path: Path) -> None:
    """Set what the ``[server]`` table holds; raises ConfigError for a value of the wrong
    type or range."""
    for key, choices in _CHOICES.items():
        if key in server:
            if server[key] not in choices:
                raise ConfigError(f"{path}: [server] {key} must be one of "
                                  f"{', '.join(choices)}, not {server[key]!r}")
            setattr(settings, key, server[key])
    if "scrollback_lines" in server:
        lines = server["scrollback_lines"]
        if type(lines) is not int or lines < 0:
            raise ConfigError(f"{path}: [server] scrollback_lines must be a whole number "
                              f"of lines, not {lines!r}")
        settings.scrollback_lines = lines
    if "restore_text_lines" in server:
        lines = server["restore_text_lines"]
        if type(lines) is not int or not 0 <= lines <= MAX_RESTORE_TEXT_LINES:
            raise ConfigError(f"{path}: [server] restore_text_lines must be a whole number "
                              f"from 0 to {MAX_RESTORE_TEXT_LINES}, not {lines!r}")
        settings.restore_text_lines = lines
    if "shell" in server:
        if not isinstance(server["shell"], str) or not server["shell"]:
            raise ConfigError(f"{path}: [server] shell must be a program path, not "
                              f"{server['shell']!r}")
        settings.shell = server["shell"]
    if (herdr_env := _flag(server, "server", "herdr_env", path)) is not None:
        settings.herdr_env = herdr_env
    if "size" in server:
        try:
            settings.columns, settings.rows = parse_size(str(server["size"]))
        except ValueError as exc:
            raise ConfigError(f"{path}: [server] {exc}") from None


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
