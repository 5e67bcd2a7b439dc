"""Plugins inside a real ``cmux serve``: third-party-style plugins written from the docs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cmux_core.errors import CmuxError
from cmux_core.testing import ServerProcess, start_server, wait_until

EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples" / "plugins"

RAISER = '''
from cmux_core.hookspecs import hookimpl

@hookimpl
def cmux_register_view_sorts(register):
    raise RuntimeError("no sorts today")

@hookimpl
def cmux_on_event(kind):
    raise RuntimeError("boom " + kind)

@hookimpl
def cmux_startup():
    raise RuntimeError("bad start")
'''

SLOW = '''
import time
from cmux_core.hookspecs import hookimpl

@hookimpl
def cmux_on_event(kind):
    time.sleep(2)
'''

LIVE = '''
from cmux_core.hookspecs import hookimpl

@hookimpl
def cmux_register_methods(register):
    async def version(call, params):
        return {{"type": "version", "version": {version}}}
    register("version", version)
'''


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    d = tmp_path / "plugins"
    d.mkdir()
    for name in ("greeter", "longest_waiting"):
        shutil.copy(EXAMPLES / f"{name}.py", d)
    (d / "raiser.py").write_text(RAISER)
    (d / "slow.py").write_text(SLOW)
    (d / "live.py").write_text(LIVE.format(version=1))
    return d


@pytest.fixture
def server(plugin_dir: Path) -> Iterator[ServerProcess]:
    with start_server(["--plugins-dir", str(plugin_dir)]) as proc:
        yield proc


def plugins(server: ServerProcess) -> dict[str, dict[str, Any]]:
    return {p["plugin_id"]: p for p in server.call("plugin.list")["plugins"]}


def live_version(server: ServerProcess) -> int | None:
    try:
        return int(server.call("plugin.live.version")["version"])
    except CmuxError:
        return None


def test_failing_slow_and_edited_plugins_in_a_running_server(server: ServerProcess,
                                                              plugin_dir: Path) -> None:
    listed = plugins(server)
    ours = {k: v["status"] for k, v in listed.items() if k in (
        "greeter", "longest_waiting", "raiser", "slow", "live")}
    # The raiser may already be blocked by the events of startup (delivered after its
    # cmux_startup, which therefore always ran); the others load.
    assert ours.pop("raiser") in ("loaded", "blocked")
    assert ours == {"greeter": "loaded", "longest_waiting": "loaded", "slow": "loaded",
                    "live": "loaded"}
    assert listed["longest_waiting"]["registrations"]["view_sorts"] == ["longest-waiting"]
    # cmux_startup comes once the server is serving, so its failure may be a moment later.
    wait_until(lambda: {e["hook"] for e in plugins(server)["raiser"]["errors"]} >= {
        "cmux_register_view_sorts", "cmux_startup"}, timeout=30, message="raiser's faults")
    hello = server.call("plugin.greeter.hello", {"name": "e2e"})
    assert hello["greeting"] == "hello, e2e"
    # the handler asked the server for its panes in-process, as the calling client
    assert hello["panes"] == len(server.call("pane.list")["panes"]) >= 1
    assert hello["client_id"].startswith("conn-")

    # Events reach the raiser until it is blocked; the slow plugin never delays requests.
    for n in range(6):
        server.call("workspace.create", {"label": f"w{n}"})
        assert server.call("ping")
    wait_until(lambda: plugins(server)["raiser"]["status"] == "blocked", timeout=30,
               message="raiser blocked")
    assert "consecutive failures" in plugins(server)["raiser"]["error"]
    assert server.call("plugin.greeter.hello")["greeting"] == "hello, world"

    (plugin_dir / "live.py").write_text(LIVE.format(version=2))
    wait_until(lambda: live_version(server) == 2, timeout=30, message="live v2")
    (plugin_dir / "live.py").write_text("def broken(:\n")
    wait_until(lambda: plugins(server)["live"]["errors"], timeout=30, message="broken edit")
    assert live_version(server) == 2
    (plugin_dir / "live.py").write_text(LIVE.format(version=3))
    wait_until(lambda: live_version(server) == 3, timeout=30, message="live v3")

    server.call("plugin.disable", {"plugin_id": "greeter"})
    with pytest.raises(CmuxError) as err:
        server.call("plugin.greeter.hello")
    assert err.value.code == "method_not_found"
    server.call("plugin.enable", {"plugin_id": "greeter"})
    assert server.call("plugin.greeter.hello")["type"] == "greeting"


def cli(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cmux_core", *args, "--socket",
                           str(server.socket_path)], capture_output=True, text=True,
                          env=server.env, timeout=60)


def test_cli_plugin_commands(server: ServerProcess) -> None:
    out = cli(server, "plugin", "list")
    assert out.returncode == 0, out.stderr
    assert "greeter" in out.stdout and "plugin.greeter.hello" in out.stdout
    out = cli(server, "plugin", "disable", "greeter", "--json")
    assert json.loads(out.stdout)["plugin"]["enabled"] is False
    out = cli(server, "plugin", "enable", "nope")
    assert out.returncode == 1 and out.stderr.startswith("plugin_not_found:")


def test_scaffolded_plugin_passes_its_own_test(tmp_path: Path) -> None:
    made = subprocess.run([sys.executable, "-m", "cmux_core", "plugin", "new", "cmux-hello",
                           "--dir", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    root = tmp_path / "cmux-hello"
    assert "cmux-hello = \"cmux_hello\"" in (root / "pyproject.toml").read_text()
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             str(root / "tests")], capture_output=True, text=True, cwd=root,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
    again = subprocess.run([sys.executable, "-m", "cmux_core", "plugin", "new", "cmux-hello",
                            "--dir", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and "plugin_scaffold_exists" in again.stderr
