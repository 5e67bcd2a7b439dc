"""Installing the running cmux on a "remote" that is this machine under another ``HOME``.

The runner is :class:`~cmux_core.fleet.install.CommandRunner` over ``sh -c``, which is what
an ssh exec channel runs a command with; its ``PATH`` holds only a ``python3`` (this
interpreter's base, so the compiled wheels made here fit) and the system's tools. The
wheels are made once for the module (the core built from this checkout, its dependencies
repacked from this environment) and the whole install, its repeat and its failures run in
one remote home, because making a virtual environment is the slow part.
"""

from __future__ import annotations

import os
import shutil
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from fleet_sshd import running_sshd

from cmux_core.errors import CmuxError
from cmux_core.fleet.install import CommandRunner, InstallReport, compatible, install, probe
from cmux_core.fleet.wheels import CORE, running_distributions, wheel_of

PLUGINS: list[str] = []
"""No plugin distribution: the core alone exercises every step, and builds fastest."""


def _runner(home: Path, path: str, **extra: str) -> CommandRunner:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CMUX_", "VIRTUAL_ENV", "PYTHON", "PIP_", "XDG_"))}
    env.update(HOME=str(home), PATH=path, **extra)
    return CommandRunner(["/bin/sh", "-c"], env, timeout_s=300)


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, str]]:
    """A remote home, a wheel cache, and the remote's PATH."""
    root = tmp_path_factory.mktemp("remote")
    tools = root / "bin"
    tools.mkdir()
    (tools / "python3").symlink_to(os.path.realpath(sys.executable))
    home = root / "home"
    home.mkdir()
    yield home, root / "cache", f"{tools}:/usr/bin:/bin"
    shutil.rmtree(root, ignore_errors=True)


def test_the_core_wheel_is_built_from_the_checkout_and_kept(remote: tuple[Path, Path, str]
                                                           ) -> None:
    _home, cache, _path = remote
    first = wheel_of(CORE, cache)
    assert first.pure and first.path.is_relative_to(cache / "built")
    names = set(zipfile.ZipFile(first.path).namelist())
    assert "cmux_core/fleet/install.py" in names
    assert wheel_of(CORE, cache) == first, "a second ask must reuse the built wheel"
    repacked = wheel_of("pydantic-core", cache)
    assert not repacked.pure and repacked.path.is_relative_to(cache / "repacked")
    record = zipfile.ZipFile(repacked.path).read(
        next(n for n in zipfile.ZipFile(repacked.path).namelist() if n.endswith("/RECORD")))
    assert b"INSTALLER" not in record and b"../" not in record


def test_install_then_again_copies_nothing_then_a_bad_wheel_fails_clearly(
        remote: tuple[Path, Path, str]) -> None:
    home, cache, path = remote
    runner = _runner(home, path)
    report = install(runner, plugins=PLUGINS, cache_dir=cache)
    assert isinstance(report, InstallReport)
    assert report.version == "0.1.0" and report.changed and not report.used_uv
    assert report.venv == str(home / ".local" / "share" / "cmux" / "venv")
    assert set(report.distributions) == {*running_distributions(PLUGINS), "pip"}
    assert any(name.startswith("cmux_core-") for name in report.copied)
    venv = Path(report.venv)
    # The environment's own cmux runs, from the installed wheel, not from this checkout.
    assert (venv / "bin" / "cmux").exists()
    assert not list(venv.glob("lib/python*/site-packages/__editable__*"))

    again = install(runner, plugins=PLUGINS, cache_dir=cache)
    assert again.copied == [] and again.version == "0.1.0"

    # A wheel spoilt in the cache is copied (its hash changed) and pip refuses it; the
    # environment keeps what it had, and its stamp, so the next good install copies again.
    stamp = (venv / "cmux-install.json").read_bytes()
    spoilt = wheel_of("pyte", cache).path
    good = spoilt.read_bytes()
    spoilt.write_bytes(good[: len(good) // 2])
    try:
        with pytest.raises(CmuxError) as failed:
            install(runner, plugins=PLUGINS, cache_dir=cache)
    finally:
        spoilt.write_bytes(good)
    assert failed.value.code == "remote_install_failed"
    assert "pip install of the copied wheels failed" in failed.value.message
    assert (venv / "cmux-install.json").read_bytes() == stamp


def test_with_uv_on_the_remote_uv_makes_the_environment(remote: tuple[Path, Path, str],
                                                        tmp_path: Path) -> None:
    uv = shutil.which("uv", path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    if uv is None:
        pytest.skip("uv is not installed (make venv installs it)")
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "uv").symlink_to(uv)
    runner = _runner(tmp_path, f"{tools}:{remote[2]}")
    report = install(runner, plugins=PLUGINS, cache_dir=remote[1])
    assert report.used_uv and report.version == "0.1.0" and report.changed


def test_no_python3_on_the_remote_is_named(remote: tuple[Path, Path, str],
                                           tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CmuxError) as failed:
        install(_runner(tmp_path, str(empty)), plugins=PLUGINS, cache_dir=remote[1])
    assert failed.value.code == "remote_python_missing"
    assert "no python3" in failed.value.message


def test_a_runner_that_cannot_start_is_unreachable(tmp_path: Path) -> None:
    with pytest.raises(CmuxError) as failed:
        probe(CommandRunner([str(tmp_path / "no-such-ssh")]))
    assert failed.value.code == "remote_unreachable"
    assert "no-such-ssh" in failed.value.message


def test_a_python3_without_venv_is_named(remote: tuple[Path, Path, str],
                                         tmp_path: Path) -> None:
    # As on a system that leaves the venv module out of its python3: it does not import.
    shadow = tmp_path / "shadow" / "venv"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('venv is not available')\n")
    runner = _runner(tmp_path, remote[2], PYTHONPATH=str(shadow.parent))
    with pytest.raises(CmuxError) as failed:
        install(runner, plugins=PLUGINS, cache_dir=remote[1])
    assert failed.value.code == "remote_venv_unavailable"
    assert "no venv module" in failed.value.message and "python3-venv" in failed.value.message
    assert not (tmp_path / ".local").exists()


def test_a_remote_with_another_python_is_refused_before_copying(
        remote: tuple[Path, Path, str], tmp_path: Path) -> None:
    found = probe(_runner(tmp_path, remote[2]))
    wheels = [wheel_of(name, remote[1]) for name in ("pyte", "pydantic-core")]
    compatible(found, wheels)
    other = replace(found, version=(3, found.version[1] + 1, 0))
    compatible(other, wheels[:1])  # a pure-Python wheel runs on any Python 3
    with pytest.raises(CmuxError) as failed:
        compatible(other, wheels)
    assert failed.value.code == "remote_incompatible"
    assert "pydantic-core" in failed.value.message


def test_the_probe_runs_the_same_over_a_real_ssh_exec_channel() -> None:
    # Only the probe, which changes nothing: over ssh the home is this user's real one.
    with running_sshd() as sshd:
        over_ssh = probe(CommandRunner(["ssh", *sshd.ssh_args(), "127.0.0.1"]))
    assert over_ssh.executable and over_ssh.version[:2] >= (3, 11)
    assert over_ssh.venv == os.path.expanduser("~/.local/share/cmux/venv")
