"""``config.toml``: its model, the JSON Schema editors check it with, and the reading of it
into :class:`~cmux_core.config.Settings`.

A module of its own, beside :mod:`cmux_core.config`, because the model needs pydantic and
the ``cmux`` commands that only talk to a server must not pay for importing it.
"""

from __future__ import annotations

import logging
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.json_schema import SkipJsonSchema

from cmux_core.config import (
    MAX_RESTORE_TEXT_LINES,
    ConfigError,
    Settings,
    config_dir,
    parse_size,
)

log = logging.getLogger(__name__)

SCHEMA_ID = "https://json-schema.org/draft/2020-12/schema"


class Table(BaseModel):
    """A table of ``config.toml``: values of exactly their TOML type (``"50"`` is not a
    number, ``1`` is not ``true``); unknown keys are kept, to be warned about."""

    # Editors flag an unknown key (a typo, most often); the server warns and goes on.
    model_config = ConfigDict(extra="allow", strict=True,
                              json_schema_extra={"additionalProperties": False})


class ServerTable(Table):
    """[server]: the settings cmux serve options override."""

    size: str | SkipJsonSchema[None] = Field(
        default=None, json_schema_extra={"pattern": r"^\s*\d{1,4}\s*[xX]\s*\d{1,4}\s*$"},
        examples=["120x40"],
        description="the virtual area every tab is laid out in, COLSxROWS (default 120x40)")
    emulator: Literal["auto", "pyte", "ghostty"] | SkipJsonSchema[None] = Field(
        default=None,
        description="screen backend (default auto: ghostty when it imports, else pyte)")
    event_loop: Literal["auto", "asyncio", "uvloop"] | SkipJsonSchema[None] = Field(
        default=None, description="asyncio event loop (default auto: uvloop when it imports)")
    scrollback_lines: int | SkipJsonSchema[None] = Field(
        default=None, ge=0, description="lines of scrollback each terminal keeps (default 10000)")
    shell: str | SkipJsonSchema[None] = Field(
        default=None, min_length=1,
        description="program for new panes (default $SHELL, else /bin/sh)")
    herdr_env: bool | SkipJsonSchema[None] = Field(
        default=None, description="give panes HERDR_ENV, HERDR_SOCKET_PATH and HERDR_PANE_ID too "
        "(default true)")
    restore_text_lines: int | SkipJsonSchema[None] = Field(
        default=None, ge=0, le=MAX_RESTORE_TEXT_LINES, description="lines of each terminal's text "
        "saved at stop and shown again after a restore (default 0: none)")


class ExperimentalTable(Table):
    """[experimental]: features that are off unless switched on."""

    kitty_graphics: bool | SkipJsonSchema[None] = Field(
        default=None, description="pane graphics, pane.graphics.* (default false; "
        "CMUX_EXPERIMENTAL_KITTY_GRAPHICS=1 switches them on too)")


class CmuxTable(Table):
    """[cmux]: compatibility with scripts written for cmux."""

    focus_on_create: bool | SkipJsonSchema[None] = Field(
        default=None, description="cmux-family creating calls take focus unless told \"focus\": "
        "false, as older cmux builds did (default false; CMUX_FOCUS_ON_CREATE=1 too)")


class PluginsTable(Table):
    """[plugins]: where plugins' code runs (docs/plugins.md, Isolation)."""

    isolation: Literal["thread", "process"] | SkipJsonSchema[None] = Field(
        default=None, description="where a plugin that is not listed below and declares "
        "nothing runs: thread (in the server) or process (a process of its own); default "
        "thread")
    process: list[str] | SkipJsonSchema[None] = Field(
        default=None, description="plugin ids or distribution names run in a process of "
        "their own")
    thread: list[str] | SkipJsonSchema[None] = Field(
        default=None, description="plugin ids or distribution names run in the server's "
        "process, whatever they declare")


class ConfigFile(Table):
    """~/.config/cmux/config.toml ($XDG_CONFIG_HOME/cmux/config.toml)."""

    model_config = ConfigDict(title="cmux config.toml")

    server: ServerTable = ServerTable()
    experimental: ExperimentalTable = ExperimentalTable()
    cmux: CmuxTable = CmuxTable()
    plugins: PluginsTable = PluginsTable()


MUST = {
    "emulator": "one of auto, pyte, ghostty", "event_loop": "one of auto, asyncio, uvloop",
    "scrollback_lines": "a whole number of lines",
    "restore_text_lines": f"a whole number from 0 to {MAX_RESTORE_TEXT_LINES}",
    "shell": "a program path", "size": "a string like 120x40",
    "isolation": "one of thread, process", "process": "a list of plugin ids",
    "thread": "a list of plugin ids",
}
"""What a wrong value of each key must be instead; true or false for the others."""


def config_schema() -> dict[str, Any]:
    """The JSON Schema of ``config.toml``. A key left out of the file keeps its default
    (each description names it); TOML has no null, so no default is written as one."""
    return {"$schema": SCHEMA_ID, **_without_null_defaults(ConfigFile.model_json_schema())}


def _without_null_defaults(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_null_defaults(v) for k, v in node.items()
                if not (k == "default" and v is None)}
    if isinstance(node, list):
        return [_without_null_defaults(v) for v in node]
    return node


def load_settings(path: Path | None = None) -> Settings:
    """:class:`Settings` from ``config.toml`` (default: the user's), defaults when it does
    not exist.

    Raises :class:`ConfigError` when the file cannot be read, is not valid TOML or holds a
    value of the wrong type or range (one line naming the file and the key); an unknown
    table or key is logged as a warning and ignored.
    """
    settings = Settings()
    path = path or config_dir() / "config.toml"
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return settings
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    try:
        config = ConfigFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {wrong_value(exc, data)}") from None
    warn_unknown(path, config)
    apply(config, settings, path)
    return settings


def wrong_value(exc: ValidationError, data: dict[str, Any]) -> str:
    """The first error of ``exc`` as ``[table] key must be ..., not VALUE``."""
    loc = exc.errors()[0]["loc"]
    table = str(loc[0])
    if len(loc) == 1:
        return f"{table!r} must be a table, [{table}]"
    key = str(loc[1])
    must = MUST.get(key, "true or false")
    return f"[{table}] {key} must be {must}, not {data[table][key]!r}"


def warn_unknown(path: Path, config: ConfigFile) -> None:
    for key, value in (config.model_extra or {}).items():
        kind = "table" if isinstance(value, dict) else "key"
        log.warning("%s: unknown %s %r ignored (settings go in [server])", path, kind, key)
    for name in ConfigFile.model_fields:
        table: Table = getattr(config, name)
        known = ", ".join(type(table).model_fields)
        for key in table.model_extra or {}:
            log.warning("%s: unknown key %r in [%s] ignored (known: %s)", path, key, name,
                        known)


def apply(config: ConfigFile, settings: Settings, path: Path) -> None:
    """Copy the keys ``config`` sets onto ``settings``."""
    server = config.server
    for key in ("emulator", "event_loop", "scrollback_lines", "shell", "herdr_env",
                "restore_text_lines"):
        if getattr(server, key) is not None:
            setattr(settings, key, getattr(server, key))
    if server.size is not None:
        try:
            settings.columns, settings.rows = parse_size(server.size)
        except ValueError as exc:
            raise ConfigError(f"{path}: [server] {exc}") from None
    settings.kitty_graphics = settings.kitty_graphics or bool(config.experimental.kitty_graphics)
    settings.focus_on_create = settings.focus_on_create or bool(config.cmux.focus_on_create)
    plugins = config.plugins
    if plugins.isolation is not None:
        settings.plugin_default_isolation = plugins.isolation
    for choice in ("process", "thread"):
        if getattr(plugins, choice) is not None:
            settings.plugin_isolation[choice] = list(getattr(plugins, choice))
