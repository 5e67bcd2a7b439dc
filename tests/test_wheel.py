"""The wheel users install: built from this checkout and installed, not editable, in a fresh
virtual environment, it detects agents, serves its bundled manifests and holds the hook
programs integrations install.

Only ``cmux_core`` comes from the wheel (checked through ``cmux_core.__file__``); the other
distributions are borrowed from the running environment through a ``.pth`` file, and the
wheel is built with the running environment's setuptools (a dev dependency), so nothing is
downloaded. Everything is built and installed in one temporary directory, removed at the end.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import logging
import os
import shutil
import site
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cmux_core.config import Settings
from cmux_core.detect.manifest import load_manifest
from cmux_core.detect.registry import ManifestRegistry
from cmux_core.testing import start_server

ROOT = Path(__file__).resolve().parents[1]
SCREEN = ROOT / "tests" / "captured" / "agents" / "claude-blocked-1"
BUILD_IGNORE = shutil.ignore_patterns(".*", "build", "dist", "*.egg-info", "__pycache__",
                                      "tests", "bench", "docs")
INTEGRATIONS = ("claude", "codex", "copilot", "gemini", "opencode", "qwen")
"""The first-party integrations the wheel holds (plugins/cmux-NAME/src/cmux_NAME)."""


@dataclass(frozen=True)
class Installed:
    """A virtual environment holding the wheel."""

    wheel: Path
    venv: Path
    site_packages: Path

    @property
    def cmux(self) -> Path:
        return self.venv / "bin" / "cmux"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


def _run(argv: list[str | Path], cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run ``argv`` to completion; its stdout, or a failure showing all it printed."""
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=env or _isolated_env(cwd),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{argv} failed ({done.returncode}):\n{done.stdout}{done.stderr}"
    return done.stdout


def _isolated_env(home: Path) -> dict[str, str]:
    """The environment without what could put another cmux_core first (``PYTHONPATH``) or
    add manifests and plugins (``CMUX_*``, the user's config)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CMUX_", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"))}
    env.update({"XDG_CONFIG_HOME": str(home / "config"), "XDG_STATE_HOME": str(home / "state")})
    return env


def _bundled_ids() -> set[str]:
    paths = (p for p in (ROOT / "manifests").glob("*.toml") if not p.name.endswith(".cases.toml"))
    return {load_manifest(p).id for p in paths}


@pytest.fixture(scope="module")
def installed() -> Iterator[Installed]:
    setuptools = importlib.metadata.version("setuptools")
    assert int(setuptools.split(".")[0]) >= 77, f"setuptools {setuptools}: run make venv"
    with tempfile.TemporaryDirectory(prefix="cmux-wheel-") as tmp:
        work = Path(tmp)
        # A copy, because building in the checkout writes build/ and *.egg-info there,
        # where parallel test runs would trip over each other.
        shutil.copytree(ROOT, work / "src", ignore=BUILD_IGNORE)
        _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index",
              "--no-build-isolation", "--wheel-dir", work / "dist", work / "src"], cwd=work)
        (wheel,) = (work / "dist").glob("cmux_core-*.whl")
        venv = work / "venv"
        _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=work)
        _run([sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install",
              "--quiet", "--no-deps", "--no-index", wheel], cwd=work)
        purelib = _run([venv / "bin" / "python", "-c",
                        "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd=work)
        site_packages = Path(purelib.strip())
        # Written after the install, so pip never sees the editable cmux-core of this
        # environment. Lines of a .pth only extend sys.path; the .pth files in those
        # directories (the editable finder among them) are not run.
        (site_packages / "borrowed-dependencies.pth").write_text(
            "".join(f"{path}\n" for path in site.getsitepackages()))
        yield Installed(wheel, venv, site_packages)


def test_the_package_list_names_every_package() -> None:
    with (ROOT / "pyproject.toml").open("rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for p in (ROOT / "cmux_core").rglob("__init__.py")}
    bundled = {f"cmux_{name}" for name in INTEGRATIONS}
    assert listed == found | {"cmux_core._manifests", "cmux_core._hooks"} | bundled


def test_the_wheel_holds_the_code_and_the_manifests(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    sources = {p.relative_to(ROOT).as_posix() for p in (ROOT / "cmux_core").rglob("*.py")}
    for name in INTEGRATIONS:
        src = ROOT / "plugins" / f"cmux-{name}" / "src"
        sources |= {p.relative_to(src).as_posix() for p in src.rglob("*.py")}
        assert f"cmux_{name}/py.typed" in names
    assert sources <= names, f"missing from the wheel: {sorted(sources - names)}"
    bundled = {p.relative_to(ROOT / "manifests") for p in (ROOT / "manifests").rglob("*")
               if p.is_file() and p.suffix in (".toml", ".txt")}
    shipped = {Path(n).relative_to("cmux_core/_manifests") for n in names
               if n.startswith("cmux_core/_manifests/") and not n.endswith(".py")}
    assert shipped == bundled
    assert "cmux_core/py.typed" in names
    hooks = {p.relative_to(ROOT / "hooks").as_posix() for p in (ROOT / "hooks").rglob("*")
             if p.is_file() and "__pycache__" not in p.parts and p.name != "README.md"}
    shipped_hooks = {n.removeprefix("cmux_core/_hooks/") for n in names
                     if n.startswith("cmux_core/_hooks/")}
    assert shipped_hooks == hooks
    mode = zipfile.ZipFile(installed.wheel).getinfo("cmux_core/_hooks/cmux-hook").external_attr
    assert (mode >> 16) & 0o111, "cmux-hook lost its executable mode in the wheel"


def test_the_installed_package_is_the_wheel(installed: Installed) -> None:
    probe = ("import cmux_core\n"
             "from cmux_core.detect.manifest import bundled_manifests_dir\n"
             "print(cmux_core.__file__)\n"
             "print(bundled_manifests_dir())\n")
    done = _run([installed.python, "-c", probe], cwd=installed.venv)
    package, manifests = (Path(line) for line in done.splitlines())
    assert package.is_relative_to(installed.site_packages), package
    assert manifests == installed.site_packages / "cmux_core" / "_manifests"
    assert (manifests / "claude.toml").is_file()


def test_the_installed_package_holds_the_hooks(installed: Installed) -> None:
    probe = ("from cmux_core.plugin_host import hook_kit\n"
             "from importlib import resources\n"
             "print(resources.files(hook_kit.BUNDLED_PACKAGE))\n"
             "print(hook_kit.bundled_text('opencode/cmux.js'), end='')\n")
    done = _run([installed.python, "-c", probe], cwd=installed.venv)
    where, _, text = done.partition("\n")
    assert Path(where) == installed.site_packages / "cmux_core" / "_hooks"
    assert text == (ROOT / "hooks" / "opencode" / "cmux.js").read_text()
    assert os.access(Path(where) / "cmux-hook", os.X_OK)


def test_the_installed_cli_classifies_a_recorded_claude_screen(installed: Installed) -> None:
    with SCREEN.with_suffix(".meta.toml").open("rb") as f:
        meta = tomllib.load(f)
    done = _run([installed.cmux, "--json", "agent", "explain",
                 "--file", SCREEN.with_suffix(".expected"), "--agent", "claude",
                 "--title", meta["osc"]["title"]], cwd=installed.venv)
    explain = json.loads(done)["explain"]
    assert explain["state"] == meta["agent"]["state"] == "blocked"
    assert "claude.toml" in explain["manifest_source"]


def test_the_installed_cli_runs_a_bundled_integration_without_a_server(
        installed: Installed, tmp_path: Path) -> None:
    home = tmp_path / "someone"
    env = {**_isolated_env(home), "HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude")}
    done = _run([installed.cmux, "--version"], cwd=installed.venv, env=env)
    assert done == f"cmux {importlib.metadata.version('cmux-core')}\n"
    listed = json.loads(_run([installed.cmux, "--json", "integration", "list"],
                             cwd=installed.venv, env=env))
    rows = {row["name"]: row for row in listed["integrations"]}
    assert set(rows) == set(INTEGRATIONS)
    assert rows["claude"]["plugin_id"] == "cmux-claude"
    dry = _run([installed.cmux, "integration", "install", "claude", "--dry-run"],
               cwd=installed.venv, env=env)
    assert dry.splitlines()[0].endswith(f"HOME={home})")
    assert f"+++ {home / '.claude' / 'settings.json'}" in dry
    assert not (home / ".claude").exists()
    # The hook program comes from the installed core, not from this checkout.
    _run([installed.cmux, "integration", "install", "claude"], cwd=installed.venv, env=env)
    hook = home / "config" / "cmux" / "hooks" / "claude" / "cmux-hook"
    assert os.access(hook, os.X_OK)
    assert hook.read_bytes() == (ROOT / "hooks" / "cmux-hook").read_bytes()
    assert sorted(p.name for p in (home / ".claude").iterdir()) == ["settings.json"]


def test_the_installed_server_serves_the_bundled_manifests(installed: Installed) -> None:
    # Plugins stay off: this environment's entry points are visible there, their code is not.
    # An empty PYTHONPATH is ignored, like an unset one.
    server = start_server(command=[str(installed.cmux)],
                          env={"CMUX_LOAD_PLUGINS": "", "PYTHONPATH": ""})
    try:
        status = server.call("server.agent_manifests")
        log = server.log()
    finally:
        server.stop()
    agents = {m["agent"] for m in status["manifests"] if m["source"] == "bundled"}
    assert agents == _bundled_ids()
    bundled_files = [Path(f["file"]) for f in status["files"] if f["source_kind"] == "bundled"]
    assert bundled_files
    assert all(p.is_relative_to(installed.site_packages) for p in bundled_files)
    assert " ERROR " not in log and " WARNING " not in log, log


def test_a_registry_without_bundled_manifests_logs_where_it_looked(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    missing = tmp_path / "not-installed"

    async def start_and_stop() -> None:
        registry = ManifestRegistry(Settings(), bundled_dir=missing,
                                    user_dir=tmp_path / "user", watch=False)
        await registry.start()
        await registry.stop()

    with caplog.at_level(logging.ERROR, logger="cmux_core.detect.registry"):
        asyncio.run(start_and_stop())
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any("no bundled agent manifests" in m and str(missing) in m for m in errors), errors
