"""What a pane's processes find in their environment: herdr's variables beside ours (so
herdr's hook scripts report to us, unchanged), and the running ``cmux`` first on PATH."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Api

from cmux_core.config import installation_bin_dir
from cmux_core.testing import ServerProcess, start_server, wait_until

# Prints the variables as one JSON line between markers, so the screen can be parsed.
SHOW_ENV = [sys.executable, "-c", textwrap.dedent("""\
    import json, os, shutil
    keys = ["CMUX_ENV", "CMUX_SOCKET_PATH", "CMUX_PANE_ID", "HERDR_ENV", "HERDR_SOCKET_PATH",
            "HERDR_PANE_ID"]
    found = {k: os.environ.get(k) for k in keys}
    found["cmux"] = shutil.which("cmux")
    print("ENV>" + json.dumps(found) + "<ENV", flush=True)
    input()
""")]

# A session hook in herdr's style: silent unless HERDR_* are set, one JSON line to the
# socket they name, the herdr:claude source.
HERDR_STYLE_HOOK = [sys.executable, "-c", textwrap.dedent("""\
    import json, os, socket
    if os.environ.get("HERDR_ENV") == "1" and os.environ.get("HERDR_PANE_ID"):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(30)
        s.connect(os.environ["HERDR_SOCKET_PATH"])
        s.sendall(json.dumps({"id": "h1", "method": "pane.report_agent_session", "params": {
            "pane_id": os.environ["HERDR_PANE_ID"], "source": "herdr:claude",
            "agent": "claude", "agent_session_id": "sess-42",
            "session_start_source": "startup"}}).encode() + b"\\n")
        print("HOOK>" + s.recv(4096).decode().strip(), flush=True)
    else:
        print("HOOK>skipped", flush=True)
    input()
""")]


def pane_env(api: Api) -> dict[str, str | None]:
    pane = api.run(SHOW_ENV)
    api.wait_text(pane, "<ENV")
    text = api.read(pane, lines=20).replace("\n", "")
    start = text.index("ENV>") + 4
    return dict(json.loads(text[start:text.index("<ENV", start)]))


def test_panes_export_herdr_variables_and_cmux_on_path(api: Api,
                                                       cmux_server: ServerProcess) -> None:
    env = pane_env(api)
    assert env["CMUX_ENV"] == "1" and env["HERDR_ENV"] == "1"
    assert env["HERDR_SOCKET_PATH"] == env["CMUX_SOCKET_PATH"] == str(cmux_server.socket_path)
    assert env["HERDR_PANE_ID"] == env["CMUX_PANE_ID"]
    bin_dir = installation_bin_dir()
    assert bin_dir is not None, "the test environment runs an installed cmux"
    assert env["cmux"] == str(bin_dir / "cmux")


def test_cmux_inside_a_pane_reaches_its_server(api: Api) -> None:
    pane = api.run(["sh", "-c", "cmux pane get --json > out.json && echo CALLED; read x"])
    api.wait_text(pane, "CALLED", timeout_ms=30000)


def test_a_herdr_style_session_hook_is_accepted(api: Api) -> None:
    pane = api.run(HERDR_STYLE_HOOK)
    # The whole reply line: a PTY read can stop before its end.
    line = api.wait_line(pane, r"HOOK>\{.*\}")
    assert '"ok":true' in line.replace(" ", "")
    session = wait_until(lambda: api("pane.get", {"pane_id": pane})["pane"].get(
        "agent_session"), message="session stored")
    assert session == {"source": "herdr:claude", "agent": "claude", "kind": "id",
                       "value": "sess-42"}


@pytest.fixture
def no_herdr_server(tmp_path: Path) -> Iterator[ServerProcess]:
    config = tmp_path / "config" / "cmux"
    config.mkdir(parents=True)
    (config / "config.toml").write_text("[server]\nherdr_env = false\n")
    with start_server(env={"XDG_CONFIG_HOME": str(tmp_path / "config")}) as server:
        yield server


def test_config_switch_turns_herdr_variables_off(no_herdr_server: ServerProcess) -> None:
    api = Api(no_herdr_server)
    try:
        env = pane_env(api)
        assert env["CMUX_ENV"] == "1"
        assert env["HERDR_ENV"] is None and env["HERDR_PANE_ID"] is None
        assert env["HERDR_SOCKET_PATH"] is None
        pane = api.run(HERDR_STYLE_HOOK)
        api.wait_text(pane, "HOOK>skipped")
    finally:
        api.close()
