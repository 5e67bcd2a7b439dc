"""What a new user sees when something is wrong, and the offline manifest commands: the
real ``cmux`` command run as a subprocess, with its own config directory."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from cmux_core.config import installation_bin_dir
from cmux_core.detect.manifest import bundled_manifests_dir
from cmux_core.testing import ServerProcess, start_server, wait_until

BOT = 'id = "bot"\nversion = "1.2"\n[[rules]]\nid = "busy"\nstate = "working"\n' \
      'contains = ["busy"]\n'


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """An empty ``$XDG_CONFIG_HOME``; ``config / "cmux"`` is cmux's config directory."""
    (tmp_path / "config" / "cmux").mkdir(parents=True)
    return tmp_path / "config"


def run(config: Path, *args: str, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CMUX_")}
    return subprocess.run([sys.executable, "-m", "cmux_core", *args], capture_output=True,
                          text=True, timeout=60, cwd=config.parent,
                          env={**clean, "XDG_CONFIG_HOME": str(config), **(env or {})})


def one_line_error(proc: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """The single ``cmux: ...`` line the command printed; checks nothing else came out."""
    assert proc.returncode == code, proc.stderr
    assert proc.stdout == ""
    assert re.fullmatch(r"cmux: [^\n]+\n", proc.stderr), proc.stderr
    return proc.stderr


# -- usage errors -----------------------------------------------------------------------------


def test_a_bad_size_is_one_line(config: Path) -> None:
    err = one_line_error(run(config, "serve", "--size", "big"))
    assert "--size" in err and "'big'" in err and "120x40" in err


@pytest.mark.parametrize("args", [("--session", "bad name!", "ping"),
                                  ("ping", "--session", "bad name!")])
def test_a_bad_session_name_is_one_line(config: Path, args: tuple[str, ...]) -> None:
    err = one_line_error(run(config, *args))
    assert "--session" in err and "'bad name!'" in err


def test_a_bad_session_name_from_the_environment_is_one_line(config: Path) -> None:
    err = one_line_error(run(config, "ping", env={"CMUX_SESSION": "bad name!"}))
    assert "'bad name!'" in err


def test_a_missing_subcommand_is_one_line(config: Path) -> None:
    err = one_line_error(run(config, "pane"))
    assert "ACTION" in err and "cmux pane --help" in err


# -- config.toml ------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("[server]\nsize = 120x40\n", r"invalid TOML: .*\(at line 2, column \d+\)"),
    ("[server\n", r"invalid TOML"),
    ('[server]\nsize = "big"\n', r"\[server\] size must look like 120x40, not 'big'"),
    ('[server]\nemulator = "fancy"\n', r"\[server\] emulator must be one of auto, pyte, "
                                       r"ghostty, not 'fancy'"),
    ("[server]\nscrollback_lines = -1\n", r"\[server\] scrollback_lines"),
    ('server = "x"\n', r"'server' must be a table"),
])
def test_a_bad_config_file_is_one_line_naming_it(config: Path, text: str,
                                                  expected: str) -> None:
    path = config / "cmux" / "config.toml"
    path.write_text(text)
    err = one_line_error(run(config, "serve", "--socket", str(config / "s.sock")))
    assert err.startswith(f"cmux: {path}: ")
    assert re.search(expected, err), err
    assert not (config / "s.sock").exists()


def test_unknown_config_keys_are_warned_about_and_ignored(config: Path) -> None:
    path = config / "cmux" / "config.toml"
    path.write_text('[server]\nemulater = "ghostty"\nemulator = "pyte"\n[client]\ncolor = 1\n')
    server = start_server(env={"XDG_CONFIG_HOME": str(config)})
    try:
        pane = server.call("pane.get", {"pane_id": "w1:p1"})["pane"]
        log = server.log()
    finally:
        server.stop()
    assert re.search(rf"WARNING .*{re.escape(str(path))}: unknown key 'emulater' in "
                     r"\[server\]", log), log
    assert re.search(rf"WARNING .*{re.escape(str(path))}: unknown table 'client'", log), log
    assert pane["emulator"] == "pyte"  # the known key next to them is read


# -- serve --quiet ------------------------------------------------------------------------------


def plugin_dir(tmp: Path) -> Path:
    """A plugin directory whose one plugin logs ``plugin hello loaded`` at INFO."""
    directory = tmp / "plugins"
    directory.mkdir()
    (directory / "hello.py").write_text('"""A plugin that does nothing."""\n')
    return directory


def test_serve_quiet_logs_warnings_only(config: Path) -> None:
    server = start_server(["--plugins-dir", str(plugin_dir(config.parent))],
                          env={"XDG_CONFIG_HOME": str(config)})
    try:
        assert "hello" in json.dumps(server.call("plugin.list"))
        log = server.log()
    finally:
        server.stop()
    assert " INFO " not in log and "listening on" not in log, log


def test_serve_without_quiet_logs_info(config: Path) -> None:
    """The other side of the test above: the same server without ``--quiet`` says more."""
    home = Path(tempfile.mkdtemp(prefix="cmux-t-"))
    sock = home / "s.sock"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CMUX_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cmux_core", "serve", "--socket", str(sock), "--plugins-dir",
         str(plugin_dir(config.parent))], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, cwd=home,
        env={**clean, "XDG_CONFIG_HOME": str(config), "SHELL": "/bin/sh"})
    try:
        wait_until(lambda: sock.exists() or proc.poll() is not None, timeout=30,
                   message="the server to listen")
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
        shutil.rmtree(home, ignore_errors=True)
    assert "listening on" in out
    assert re.search(r" INFO .*plugin hello loaded", out), out


# -- manifests list and check ----------------------------------------------------------------


def bundled() -> list[Path]:
    return sorted(p for p in bundled_manifests_dir().glob("*.toml")
                  if not p.name.endswith(".cases.toml"))


def test_manifests_list_shows_every_active_manifest(config: Path, tmp_path: Path) -> None:
    (config / "cmux" / "manifests").mkdir()
    (config / "cmux" / "manifests" / "bot.toml").write_text(BOT)
    extra = tmp_path / "extra"
    extra.mkdir()
    claude = (bundled_manifests_dir() / "claude.toml").read_text()
    (extra / "claude.toml").write_text(re.sub(r'(?m)^version = ".*"$', 'version = "9.9"',
                                              claude))
    proc = run(config, "manifests", "list", "--manifests-dir", str(extra))
    assert proc.returncode == 0, proc.stderr
    header, *rows = proc.stdout.splitlines()
    assert header.split() == ["AGENT", "VERSION", "RULES", "SOURCE", "PATH"]
    shown = {row.split()[0]: row.split() for row in rows}
    assert set(shown) == {p.stem for p in bundled()} | {"bot"}
    assert shown["bot"][1:] == ["1.2", "1", "user",
                                str(config / "cmux" / "manifests" / "bot.toml")]
    assert shown["claude"][1] == "9.9"
    assert shown["claude"][3:] == ["manifests_dir", str(extra / "claude.toml")]
    assert shown["codex"][3:] == ["bundled", str(bundled_manifests_dir() / "codex.toml")]

    listed = json.loads(run(config, "manifests", "list", "--json").stdout)
    by_agent = {m["agent"]: m for m in listed["manifests"]}
    assert by_agent["bot"]["version"] == "1.2" and by_agent["bot"]["rules"] == 1
    assert by_agent["claude"]["source_kind"] == "bundled"
    assert listed["invalid"] == []


def test_manifests_check_defaults_to_the_active_manifests(config: Path,
                                                          tmp_path: Path) -> None:
    proc = run(config, "manifests", "check")
    assert proc.returncode == 0, proc.stderr
    assert [line.split()[1] for line in proc.stdout.splitlines()] == [
        str(p) for p in bundled()]

    user = config / "cmux" / "manifests"
    user.mkdir()
    (user / "bot.toml").write_text(BOT)
    (user / "bad.toml").write_text('id = "bad"\n[[rules]]\nid = "r"\nregion = "middle"\n'
                                   'contains = ["x"]\n')
    proc = run(config, "manifests", "check")
    assert proc.returncode == 1
    assert f"ok: {user / 'bot.toml'} (bot, 1 rules)" in proc.stdout.splitlines()
    assert f"error: {user / 'bad.toml'}:4:1: rule 'r': unknown region 'middle'" in proc.stderr
    assert len(proc.stdout.splitlines()) == len(bundled()) + 1

    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "other.toml").write_text(BOT.replace('"bot"', '"other"'))
    checked = json.loads(run(config, "manifests", "check", "--json", "--manifests-dir",
                             str(extra)).stdout)
    assert {r["path"] for r in checked} == {*map(str, bundled()), str(user / "bot.toml"),
                                           str(user / "bad.toml"), str(extra / "other.toml")}


def test_manifests_check_refuses_a_missing_manifests_dir(config: Path,
                                                         tmp_path: Path) -> None:
    proc = run(config, "manifests", "check", "--manifests-dir", str(tmp_path / "nope"))
    assert proc.returncode == 1
    assert proc.stderr == f"invalid_params: manifests directory {tmp_path / 'nope'} is not " \
                          "a directory\n"


# -- a program the server cannot find ----------------------------------------------------------


def searched(server_path: str) -> str:
    """The PATH a pane's program is looked up on: the running cmux's bin directory first."""
    bin_dir = installation_bin_dir()
    return server_path if bin_dir is None else f"{bin_dir}{os.pathsep}{server_path}"


def test_a_missing_program_names_the_servers_path(shared_server: ServerProcess) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cmux_core", "pane", "split", "--socket",
         str(shared_server.socket_path), "--", "no-such-program-here"], capture_output=True,
        text=True, timeout=30, env={**shared_server.env, "PATH": "/elsewhere"})
    assert proc.returncode == 1
    assert proc.stderr == (
        "pane_split_failed: cannot start no-such-program-here: not found on the PATH the "
        "server searched (the server looks programs up, not your shell; give a full path "
        f"or start the server with it on PATH): {searched(shared_server.env['PATH'])}\n")


def test_agent_start_names_the_path_the_server_searched(shared_server: ServerProcess) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cmux_core", "agent", "start", "bob", "--socket",
         str(shared_server.socket_path), "--", "no-such-program-here"], capture_output=True,
        text=True, timeout=30, env={**shared_server.env, "PATH": "/elsewhere"})
    assert proc.returncode == 1
    assert proc.stderr.startswith(
        "agent_start_failed: cannot start no-such-program-here: not found on the PATH the "
        "server searched"), proc.stderr
    assert proc.stderr.endswith(f": {searched(shared_server.env['PATH'])}\n")


def test_a_long_server_path_is_cut(tmp_path: Path) -> None:
    long_path = ":".join(["/usr/bin", "/bin", *(f"/opt/tool-{i}/bin" for i in range(60))])
    server = start_server(env={"PATH": long_path})
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "cmux_core", "pane", "split", "--socket",
             str(server.socket_path), "--", "no-such-program-here"], capture_output=True,
            text=True, timeout=30, env=server.env)
    finally:
        server.stop()
    assert proc.returncode == 1
    full = searched(long_path)
    assert proc.stderr.endswith(f"on PATH): {full[:400]}... ({len(full)} "
                                "characters)\n"), proc.stderr


def test_a_missing_program_with_a_path_is_not_looked_up(shared_server: ServerProcess) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cmux_core", "tab", "create", "--socket",
         str(shared_server.socket_path), "--", "/no/such/program"], capture_output=True,
        text=True, timeout=30, env=shared_server.env)
    assert proc.returncode == 1
    assert proc.stderr == "tab_create_failed: cannot start /no/such/program: no such program\n"
