"""What the plugin-isolation tests share: an environment of their own and plugin files."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name in ("CMUX_LOAD_PLUGINS", "CMUX_TRACE_PLUGINS", "CMUX_PLUGIN_IMPORT_BUDGET"):
        monkeypatch.delenv(name, raising=False)


def write(directory: Path, name: str, body: str) -> Path:
    """``body`` (dedented) as the file ``name`` in ``directory``, made if missing."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(textwrap.dedent(body).lstrip())
    return path
