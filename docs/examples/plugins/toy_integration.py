"""An installable integration that writes a marker file for the "toy" agent."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cmux_core.hookspecs import RegisterIntegration, hookimpl


def _marker() -> Path:
    return Path(os.environ.get("TOY_CONFIG_DIR", "~/.toy")).expanduser() / "cmux-hook"


def install() -> list[str]:
    _marker().parent.mkdir(parents=True, exist_ok=True)
    _marker().write_text("installed by cmux\n")
    return [f"wrote {_marker()}"]


def uninstall() -> list[str]:
    _marker().unlink(missing_ok=True)
    return [f"removed {_marker()}"]


def status() -> dict[str, Any]:
    return {"installed": _marker().exists(), "path": str(_marker())}


@hookimpl
def cmux_register_integrations(register: RegisterIntegration) -> None:
    register("toy", install=install, uninstall=uninstall, status=status,
             description="marker file for the toy agent")
