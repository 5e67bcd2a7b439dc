"""``cmux plugin install|uninstall`` end to end: the ``cmux plugin new`` scaffold built into a
wheel (this environment's setuptools, nothing downloaded), installed into a throwaway
virtual environment that a running server uses, and loaded by that server without a
restart.

The throwaway environment has no pip or cmux-core of its own: a ``.pth`` file lends it
this checkout and this environment's packages, so pip sees cmux-core installed and
downloads nothing. Only the scaffold plugin loads there (``CMUX_LOAD_PLUGINS``).
"""

from __future__ import annotations

import json
import os
import re
import site
import subprocess
import sys
import zipfile
from pathlib import Path

from cmux_core.cli.plugin import scaffold
from cmux_core.testing import start_server
from cmux_core.version import __version__

ROOT = Path(__file__).resolve().parents[1]


def _run(argv: list[str | Path], env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=120,
                          env=env)


def _incompatible(wheel: Path, into: Path) -> Path:
    """A copy of ``wheel`` whose metadata asks for a cmux-core that does not exist."""
    copy = into / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(copy, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename.endswith(".dist-info/METADATA"):
                data = re.sub(rb"Requires-Dist: cmux-core[^\n]*", b"Requires-Dist: cmux-core>=99",
                              data)
            dst.writestr(item, data)
    return copy


def _build(root: Path, into: Path) -> Path:
    """The wheel of the plugin project at ``root``, built into ``into`` with no download."""
    built = _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index",
                  "--no-build-isolation", "--wheel-dir", into, root])
    assert built.returncode == 0, built.stderr
    (wheel,) = into.glob("cmux_hello-*.whl")
    return wheel


def _borrowing_venv(venv: Path) -> tuple[Path, Path]:
    """A virtual environment without pip or cmux-core that borrows this checkout and this
    environment's packages; its python and its purelib folder."""
    assert _run([sys.executable, "-m", "venv", "--without-pip", venv]).returncode == 0
    python = venv / "bin" / "python"
    purelib = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
                        ).stdout.strip())
    (purelib / "borrowed.pth").write_text(
        "".join(f"{p}\n" for p in [str(ROOT), *site.getsitepackages()]))
    return python, purelib


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("CMUX_", "PYTHONPATH", "PIP_"))}


def test_install_a_built_plugin_into_a_running_server_and_uninstall_it(tmp_path: Path) -> None:
    wheel = _build(scaffold("cmux-hello", tmp_path), tmp_path / "dist")
    python, purelib = _borrowing_venv(tmp_path / "venv")
    env = _clean_env()
    server = start_server(command=[str(python), "-m", "cmux_core"],
                          env={"CMUX_LOAD_PLUGINS": "cmux-hello"})
    try:
        env = {**env, "CMUX_SOCKET_PATH": str(server.socket_path)}
        cmux = [python, "-m", "cmux_core"]

        refused = _run([*cmux, "plugin", "install", _incompatible(wheel, tmp_path)], env=env)
        assert refused.returncode == 1
        assert refused.stderr == ("plugin_incompatible: cmux-hello 0.1.0 requires "
                                  f"cmux-core>=99, and this is cmux-core {__version__}: not "
                                  "installed\n")
        assert not list(purelib.glob("cmux_hello*"))

        done = _run([*cmux, "plugin", "install", wheel], env=env)
        assert done.returncode == 0, done.stderr
        assert "loaded by the running server: cmux-hello" in done.stdout
        listed = server.call("plugin.list", {"plugin_id": "cmux-hello"})["plugins"][0]
        assert (listed["status"], listed["source"]["loader"]) == ("loaded", "entry_point")
        assert server.call("plugin.cmux-hello.hello", {"name": "x"})["greeting"] == "hello, x"

        gone = _run([*cmux, "--json", "plugin", "uninstall", "cmux-hello"], env=env)
        assert gone.returncode == 0, gone.stderr
        assert json.loads(gone.stdout)["rescan"]["removed"] == ["cmux-hello"]
        assert server.call("plugin.list")["plugins"] == []
        assert not list(purelib.glob("cmux_hello*"))
        core = _run([*cmux, "plugin", "uninstall", "cmux-core"], env=env)
        assert core.returncode == 1 and "not a plugin distribution" in core.stderr
    finally:
        server.stop()


def test_outdated_names_a_newer_release_and_upgrade_reloads_it_in_the_server(
        tmp_path: Path) -> None:
    root = scaffold("cmux-hello", tmp_path)
    old = _build(root, tmp_path / "old")
    project = root / "pyproject.toml"
    project.write_text(project.read_text().replace('version = "0.1.0"', 'version = "0.2.0"'))
    code = root / "src" / "cmux_hello" / "__init__.py"
    code.write_text(code.read_text().replace('f"hello, {', 'f"hello again, {').replace(
        '__version__ = "0.1.0"', '__version__ = "0.2.0"'))
    newer = tmp_path / "index"
    _build(root, newer)
    python, purelib = _borrowing_venv(tmp_path / "venv")
    # The newer release is found in a local folder, as pip would find it on an index.
    env = {**_clean_env(), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(newer)}
    server = start_server(command=[str(python), "-m", "cmux_core"],
                          env={"CMUX_LOAD_PLUGINS": "cmux-hello"})
    try:
        env["CMUX_SOCKET_PATH"] = str(server.socket_path)
        cmux = [python, "-m", "cmux_core"]
        assert _run([*cmux, "plugin", "install", old], env=env).returncode == 0
        assert server.call("plugin.cmux-hello.hello", {"name": "x"})["greeting"] == "hello, x"

        outdated = _run([*cmux, "plugin", "list", "--outdated"], env=env)
        assert outdated.returncode == 0, outdated.stderr
        assert outdated.stdout.splitlines() == ["cmux-hello 0.1.0 -> 0.2.0"]

        upgraded = _run([*cmux, "plugin", "upgrade", "cmux-hello"], env=env)
        assert upgraded.returncode == 0, upgraded.stderr
        assert "installed cmux-hello 0.2.0" in upgraded.stdout
        assert "loaded by the running server: cmux-hello" in upgraded.stdout
        listed = server.call("plugin.list", {"plugin_id": "cmux-hello"})["plugins"][0]
        assert (listed["status"], listed["version"]) == ("loaded", "0.2.0")
        assert server.call("plugin.cmux-hello.hello", {"name": "x"})["greeting"] == (
            "hello again, x")
        assert [p.name for p in purelib.glob("cmux_hello-*.dist-info")] == [
            "cmux_hello-0.2.0.dist-info"]

        current = _run([*cmux, "plugin", "list", "--outdated"], env=env)
        assert current.stdout.splitlines() == ["every plugin distribution is up to date"]
    finally:
        server.stop()


def test_the_scaffolds_own_tests_pass_out_of_the_box(tmp_path: Path) -> None:
    root = scaffold("cmux-hello", tmp_path)
    env = {**_clean_env(), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "tests"], cwd=root, capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
