"""The ``cmux`` command as a shell sees it: the version, the grouped help and its examples,
the command table against the modules, lazy imports, completion scripts, exit codes and
the schemas ``cmux config schema`` and ``cmux manifests schema`` print."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import jsonschema
import pytest

from cmux_core.cli.commands import COMMANDS, COMPAT, MAIN, build_parser
from cmux_core.config import ConfigError
from cmux_core.config_file import load_settings
from cmux_core.detect import manifest
from cmux_core.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[1]
VERSION = importlib.metadata.version("cmux-core")


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cmux_core", *args], capture_output=True,
                          text=True, timeout=30, env=env)


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_version_comes_from_the_distribution() -> None:
    done = run("--version")
    assert (done.returncode, done.stdout) == (0, f"cmux {VERSION}\n"), done.stderr


def test_the_command_table_names_what_the_modules_build() -> None:
    built = set(subcommands(build_parser()))
    assert built == {n for e in COMMANDS for n in (e.name, *e.aliases)}
    for entry in COMMANDS:
        assert entry.name in subcommands(build_parser(entry.name)), entry
        # The help line of `cmux --help` is the one the module gives its parser.
        sub = next(a for a in build_parser(entry.name)._actions
                   if isinstance(a, argparse._SubParsersAction))
        helps = {c.dest: c.help for c in sub._choices_actions}
        assert helps[entry.name] == entry.help, entry.name
    assert subcommands(build_parser("")) == {}
    assert subcommands(build_parser("capture-pane")).keys() >= {"read-screen", "send"}


def test_help_lists_main_commands_first_each_with_an_example_that_parses() -> None:
    done = run("--help")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.index("main commands:") < text.index("cmux-compatible commands:")
    compat = text[text.index("cmux-compatible commands:"):]
    assert "\n  send " in compat and "\n  read-screen, capture-pane" in compat
    assert "124" in text
    parser = build_parser()
    for entry in COMMANDS:
        assert bool(entry.example) == (entry.group == MAIN), entry.name
        assert entry.group in (MAIN, COMPAT)
        if entry.example:
            assert f"$ {entry.example}\n" in text
            line = entry.example.removeprefix("source <(").removesuffix(")")
            words = shlex.split(line.partition(" > ")[0].partition(" && ")[0])
            assert words[0] == "cmux"
            parser.parse_args(words[1:])
            own = subcommands(parser)[entry.name].format_help()
            assert f"example: {entry.example}" in " ".join(own.split())


def test_building_the_parser_imports_no_command_module_and_no_pydantic() -> None:
    probe = ("import sys\n"
             "from cmux_core.cli.main import build_parser\n"
             "build_parser('ping').parse_args(['ping'])\n"
             "import cmux_core\n"
             "print(sorted(m for m in sys.modules if m.startswith(('cmux_core', 'pydantic',"
             " 'asyncio', 'pluggy'))))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=30)
    loaded = eval(done.stdout)
    assert loaded == ["cmux_core", "cmux_core.cli", "cmux_core.cli.commands",
                      "cmux_core.cli.common", "cmux_core.cli.main", "cmux_core.errors"], loaded


def test_unknown_commands_and_no_command_are_usage_errors() -> None:
    done = run("--json", "nope")
    assert done.returncode == 2 and "cmux: unknown command 'nope'" in done.stderr
    done = run()
    assert done.returncode == 2 and "main commands:" in done.stdout


def test_bash_completion_sources_cleanly_and_completes_commands(tmp_path: Path) -> None:
    script = tmp_path / "cmux.bash"
    done = run("completion", "bash")
    assert done.returncode == 0, done.stderr
    script.write_text(done.stdout)

    def complete(*words: str) -> list[str]:
        line = " ".join(shlex.quote(w) for w in words)
        shell = (f"source {shlex.quote(str(script))} && COMP_WORDS=(cmux {line}) && "
                 f"COMP_CWORD={len(words)} && _cmux && printf '%s\\n' \"${{COMPREPLY[@]}}\"")
        out = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=30)
        assert out.returncode == 0 and out.stderr == "", out.stderr
        return out.stdout.split()

    assert complete("pa") == ["pane"]
    assert complete("pane", "send-") == ["send-text", "send-keys", "send-input"]
    assert complete("--json", "plugin", "l") == ["list", "link"]
    assert "--timeout" in complete("pane", "wait", "--t")
    zsh = run("completion", "zsh").stdout
    assert zsh.splitlines()[1] == "autoload -U +X bashcompinit && bashcompinit"
    assert zsh.replace(zsh.splitlines()[1] + "\n", "").split("\n", 1)[1] == \
        done.stdout.split("\n", 1)[1]
    fish = run("completion", "fish").stdout
    assert "complete -c cmux -f -n '__cmux_at pane' -a send-text -d 'type text" in fish


def test_a_wait_that_times_out_exits_124(cmux_server: ServerProcess) -> None:
    socket = ["--socket", str(cmux_server.socket_path)]
    done = run("pane", "wait", "w1:p1", "never-printed-text", "--timeout", "0.2", *socket,
               env=cmux_server.env)
    assert (done.returncode, done.stderr.split(":")[0]) == (124, "timeout"), done.stderr
    done = run("pane", "get", "w1:p99", *socket, env=cmux_server.env)
    assert done.returncode == 1, done.stderr
    ping = json.loads(run("--json", "ping", *socket, env=cmux_server.env).stdout)
    assert ping["version"] == VERSION


def test_config_schema_accepts_what_the_server_reads_and_names_bad_keys(tmp_path: Path
                                                                        ) -> None:
    done = run("config", "schema")
    schema = json.loads(done.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    text = ('[server]\nsize = "100x30"\nemulator = "pyte"\nscrollback_lines = 500\n'
            'restore_text_lines = 20\nherdr_env = false\nshell = "/bin/sh"\n'
            "[experimental]\nkitty_graphics = true\n[cmux]\nfocus_on_create = true\n"
            '[plugins]\nisolation = "process"\nprocess = ["a"]\nthread = ["b"]\n')
    validator.validate(tomllib.loads(text))
    path = tmp_path / "config.toml"
    path.write_text(text)
    settings = load_settings(path)
    assert (settings.columns, settings.rows, settings.scrollback_lines) == (100, 30, 500)
    assert settings.plugin_default_isolation == "process"
    assert settings.plugin_isolation == {"process": ["a"], "thread": ["b"]}
    for bad, message in [('[server]\nherdr_env = "no"\n', "[server] herdr_env must be true "
                          "or false, not 'no'"),
                         ("[server]\nscrollback_lines = true\n", "[server] scrollback_lines "
                          "must be a whole number of lines, not True"),
                         ("[server]\nshell = 3\n", "[server] shell must be a program path"),
                         ("experimental = 1\n", "'experimental' must be a table")]:
        assert not validator.is_valid(tomllib.loads(bad)), bad
        path.write_text(bad)
        with pytest.raises(ConfigError) as caught:
            load_settings(path)
        assert str(caught.value).startswith(f"{path}: {message}"), caught.value
        assert "\n" not in str(caught.value)
    assert not validator.is_valid({"server": {"emulater": "pyte"}})


def test_manifest_schema_has_the_loaders_keys_and_passes_every_bundled_manifest() -> None:
    schema = json.loads(run("manifests", "schema").stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert set(schema["properties"]) == manifest._TOP_KEYS
    assert set(schema["$defs"]["rule"]["properties"]) == manifest._RULE_KEYS
    validator = jsonschema.Draft202012Validator(schema)
    files = [p for p in (ROOT / "manifests").glob("*.toml") if ".cases." not in p.name]
    assert files
    for path in files:
        with path.open("rb") as f:
            errors = [e.message for e in validator.iter_errors(tomllib.load(f))]
        assert errors == [], path
    assert not validator.is_valid({"id": "x", "rules": [{"id": "r", "stat": "idle"}]})
