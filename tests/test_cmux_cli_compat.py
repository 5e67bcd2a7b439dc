"""The command lines cmux's own scripts run, against a real server: ``cmux tab-action`` and
``cmux read-screen`` (``capture-pane``), with ``--socket`` and ``--json`` before the
command as cmux's command line takes them; and ``surface.read_text`` in ``vt`` format."""

from __future__ import annotations

import json
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


def test_tab_action_command(cmux_server: ServerProcess) -> None:
    help_text = cli(cmux_server, "tab-action", "--help").stdout
    assert "Target tab" in help_text and "tab:<n>" in help_text and "--tab tab:" in help_text
    with V2(cmux_server.socket_path) as v2:
        ws = v2("workspace.current")["workspace_id"]
        tab = "tab:" + v2("surface.current")["surface_ref"].split(":")[1]
    pinned = cli(cmux_server, "--json", "tab-action", "--workspace", ws, "--tab", tab,
                 "--action", "pin")
    assert pinned.returncode == 0, pinned.stderr
    out = json.loads(pinned.stdout)
    assert out["pinned"] is True and out["tab_ref"] == tab and out["workspace_id"] == ws
    plain = cli(cmux_server, "tab-action", "--tab", tab, "unpin")
    assert plain.returncode == 0 and plain.stdout.strip() == f"OK {tab} unpin"
    bad = cli(cmux_server, "tab-action", "--tab", tab, "--action", "explode")
    assert bad.returncode == 1 and bad.stderr.startswith("invalid_params:")


def test_read_screen_command_and_vt_format(cmux_server: ServerProcess) -> None:
    with V2(cmux_server.socket_path) as v2:
        sid = v2("surface.current")["surface_id"]
        v2("surface.send_text", surface_id=sid,
           text="printf '\\033[31m%s\\033[0m\\n' red-$((40+2))\n")
        # The output and the prompt after it: the shell prints that prompt a moment later.
        wait_until(lambda: "red-42\n$" in v2("surface.read_text", surface_id=sid)["text"])
        vt = v2("surface.read_text", surface_id=sid, format="vt", lines=80)
        assert vt["format"] == "vt" and "\x1b[" in vt["text"] and "red-42" in vt["text"]
        # "lines" counts lines of text: the blank rows under the prompt do not count.
        last = v2("surface.read_text", surface_id=sid, lines=2)["text"]
        assert last.startswith("red-42\n") and last.count("\n") == 2
        plain = v2("surface.read_text", surface_id=sid)
        assert plain["format"] == "text" and "\x1b[" not in plain["text"]
        assert v2.error("surface.read_text", format="html").code == "invalid_params"

    shown = cli(cmux_server, "read-screen", "--surface", sid)
    assert shown.returncode == 0 and "red-42" in shown.stdout
    assert "red-42" in cli(cmux_server, "capture-pane", "--scrollback", "--lines", "50").stdout
    as_json = json.loads(cli(cmux_server, "--json", "read-screen").stdout)
    assert "red-42" in as_json["text"] and as_json["surface_id"] == sid
    zero = cli(cmux_server, "read-screen", "--lines", "0")
    assert zero.returncode != 0 and "--lines must be greater than 0" in zero.stderr


def test_notify_from_inside_a_pane_is_about_that_surface(cmux_server: ServerProcess) -> None:
    with V2(cmux_server.socket_path) as v2:
        other = v2("surface.split", direction="right")["surface_id"]
        v2("surface.send_text", surface_id=other,
           text=f"{sys.executable} -m cmux_core notify --title from-pane --body hi\n")
        wait_until(lambda: v2("notification.list")["notifications"], timeout=30)
        note = v2("notification.list")["notifications"][0]
        assert (note["surface_id"], note["title"], note["body"]) == (other, "from-pane", "hi")
    listed = cli(cmux_server, "list-notifications")
    assert listed.returncode == 0 and "from-pane" in listed.stdout
    assert cli(cmux_server, "clear-notifications").stdout.strip() == "cleared 1"
    assert json.loads(cli(cmux_server, "--json", "list-notifications").stdout) == {
        "type": "notification_list", "notifications": []}


def test_surface_commands(cmux_server: ServerProcess) -> None:
    with V2(cmux_server.socket_path) as v2:
        first = v2("surface.current")
    split = cli(cmux_server, "new-split", "right")
    assert split.returncode == 0 and split.stdout.startswith("OK surface:"), split.stderr
    new_ref = split.stdout.split()[1]
    sent = cli(cmux_server, "send", "--surface", new_ref, "echo", "sent-$((3*14))\\n")
    assert sent.stdout.strip() == f"OK {new_ref}"
    with V2(cmux_server.socket_path) as v2:
        wait_until(lambda: "sent-42" in v2("surface.read_text", surface_id=new_ref)["text"])
    assert cli(cmux_server, "send-key", "--surface", new_ref, "ctrl-c").returncode == 0
    tab = cli(cmux_server, "new-surface", "--pane", first["pane_ref"])
    assert tab.stdout.startswith("OK surface:")
    listed = cli(cmux_server, "list-pane-surfaces", "--pane", first["pane_ref"]).stdout
    assert first["surface_ref"] in listed and tab.stdout.split()[1] in listed
    closed = cli(cmux_server, "close-surface", "--surface", tab.stdout.split()[1])
    assert closed.returncode == 0
    assert tab.stdout.split()[1] not in cli(cmux_server, "list-pane-surfaces", "--pane",
                                            first["pane_ref"]).stdout
    bad = cli(cmux_server, "new-split", "sideways")
    assert bad.returncode == 2
