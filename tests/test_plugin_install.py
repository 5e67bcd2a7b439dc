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


def test_install_a_built_plugin_into_a_running_server_and_uninstall_it(tmp_path: Path) -> None:
    root = scaffold("cmux-hello", tmp_path)
    built = _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index",
                  "--no-build-isolation", "--wheel-dir", tmp_path / "dist", root])
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("cmux_hello-*.whl")
    venv = tmp_path / "venv"
    assert _run([sys.executable, "-m", "venv", "--without-pip", venv]).returncode == 0
    python = venv / "bin" / "python"
    purelib = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
                        ).stdout.strip())
    (purelib / "borrowed.pth").write_text(
        "".join(f"{p}\n" for p in [str(ROOT), *site.getsitepackages()]))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CMUX_", "PYTHONPATH"))}
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
