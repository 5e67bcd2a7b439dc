"""``cmux new-workspace``, as cmux's scripts run it against a real server: it prints
``OK workspace:<n>``, leaves focus where it was unless ``--focus true``, types
``--command`` into the new shell with Enter, and refuses a ``--focus`` that is neither true
nor false without creating anything."""

from __future__ import annotations

import os
import subprocess
import sys

from cmux_v2 import V2

from cmux_core.testing import ServerProcess, wait_until


def cli(server: ServerProcess, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CMUX_")}
    return subprocess.run([sys.executable, "-m", "cmux_core", "--socket",
                           str(server.socket_path), *argv], capture_output=True, text=True,
                          timeout=60, env=env)


def test_new_workspace_in_background_then_focused(cmux_server: ServerProcess) -> None:
    with V2(cmux_server.socket_path) as v2:
        before = v2("workspace.current")["workspace_id"]
        count = len(v2("workspace.list")["workspaces"])

        made = cli(cmux_server, "new-workspace", "--focus", "false",
                   "--command", "echo made-$((6*7))")
        assert made.returncode == 0, made.stderr
        ref = made.stdout.strip().removeprefix("OK ")
        assert made.stdout.startswith("OK workspace:") and ref.startswith("workspace:")
        assert v2("workspace.current")["workspace_id"] == before
        listed = {w["ref"]: w for w in v2("workspace.list")["workspaces"]}
        assert ref in listed and len(listed) == count + 1
        wait_until(lambda: "made-42" in v2("surface.read_text", workspace_id=ref)["text"],
                   timeout=30)

        shown = cli(cmux_server, "new-workspace", "--focus", "true")
        assert shown.returncode == 0, shown.stderr
        assert v2("workspace.current")["workspace_ref"] == shown.stdout.strip()[3:]

        bad = cli(cmux_server, "new-workspace", "--focus", "maybe")
        assert bad.returncode != 0 and "--focus takes true or false" in bad.stderr
        assert len(v2("workspace.list")["workspaces"]) == count + 2
