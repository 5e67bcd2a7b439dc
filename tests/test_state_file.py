"""The session file itself: where it lives, how it is written, what makes it unusable."""

from __future__ import annotations

import copy
import os
import stat
from pathlib import Path
from typing import Any

import orjson
import pytest

from cmux_core.config import ConfigError, session_file
from cmux_core.config_file import load_settings
from cmux_core.state import store
from cmux_core.state.schema import StateFileError, dump, parse

UUIDS = iter(f"00000000-0000-4000-8000-{n:012X}" for n in range(1, 10_000))


def pane(number: int, cwd: str = "/") -> dict[str, Any]:
    return {"type": "pane", "key": next(UUIDS), "number": number, "ref": f"pane:{number}",
            "surfaces": [{"uuid": next(UUIDS), "ref": f"surface:{number}", "cwd": cwd}]}


def session() -> dict[str, Any]:
    return {"version": 1, "active_window": 0, "windows": [{
        "uuid": next(UUIDS), "ref": "window:1", "selected": 1, "workspaces": [{
            "number": 1, "uuid": next(UUIDS), "ref": "workspace:1", "cwd": "/",
            "active_tab": 1, "tabs": [{
                "uuid": next(UUIDS), "number": 1, "focused": 2,
                "root": {"type": "split", "direction": "down", "ratio": 0.25,
                         "first": pane(1), "second": pane(2)}}]}]}]}


def test_a_valid_session_round_trips() -> None:
    state = parse(orjson.dumps(session()))
    assert parse(dump(state)) == state
    root = state.windows[0].workspaces[0].tabs[0].root
    assert root.type == "split" and root.ratio == 0.25


def broken(change: str) -> dict[str, Any]:
    data = session()
    ws = data["windows"][0]["workspaces"][0]
    tab = ws["tabs"][0]
    if change == "same key twice":
        tab["root"]["second"]["key"] = tab["root"]["first"]["key"]
    elif change == "same pane number twice":
        tab["root"]["second"]["number"] = 1
    elif change == "focus on a missing pane":
        tab["focused"] = 9
    elif change == "missing active tab":
        ws["active_tab"] = 4
    elif change == "bad ref":
        tab["root"]["first"]["ref"] = "surface:1"
    elif change == "no tabs":
        ws["tabs"] = []
    elif change == "string version":
        data["version"] = "1"
    elif change == "selected elsewhere":
        data["windows"][0]["selected"] = 7
    elif change == "no surface":
        tab["root"]["first"]["surfaces"] = []
    elif change == "selected surface missing":
        tab["root"]["first"]["selected"] = 1
    elif change == "surface ref twice":
        tab["root"]["second"]["surfaces"][0]["ref"] = "surface:1"
    return data


@pytest.mark.parametrize("change", [
    "same key twice", "same pane number twice", "focus on a missing pane",
    "missing active tab", "bad ref", "no tabs", "string version", "selected elsewhere",
    "no surface", "selected surface missing", "surface ref twice"])
def test_an_inconsistent_file_is_corrupt(change: str) -> None:
    with pytest.raises(StateFileError) as caught:
        parse(orjson.dumps(broken(change)))
    assert not caught.value.future


def test_a_newer_version_is_a_future_file() -> None:
    data = copy.deepcopy(session())
    data["version"] = 3
    with pytest.raises(StateFileError) as caught:
        parse(orjson.dumps(data))
    assert caught.value.future
    assert "version 3" in caught.value.message


def test_writes_are_atomic_private_and_leave_nothing_behind(tmp_path: Path) -> None:
    target = tmp_path / "state" / "cmux" / "s.json"
    store.write(target, b"one")
    store.write(target, b"two")
    assert target.read_bytes() == b"two"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(target.parent).st_mode) == 0o700
    assert sorted(p.name for p in target.parent.iterdir()) == ["s.json"]
    blocked = tmp_path / "blocked.json"
    blocked.mkdir()
    (blocked / "keep").write_text("x")
    with pytest.raises(OSError):
        store.write(blocked, b"three")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocked.json", "state"]


def test_a_file_is_set_aside_under_a_free_name(tmp_path: Path) -> None:
    target = tmp_path / "s.json"
    names = set()
    for _ in range(2):
        target.write_text("{")
        names.add(store.set_aside(target, future=False).name)
    assert len(names) == 2 and all(n.startswith("s.json.corrupt-") for n in names)
    assert store.read(target) is None


def test_each_socket_has_its_own_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert session_file(tmp_path / "cmux" / "cmux.sock") == tmp_path / "state/cmux/default.json"
    assert session_file(tmp_path / "cmux" / "sessions" / "work.sock").name == "work.json"
    one = session_file(tmp_path / "a" / "s.sock")
    two = session_file(tmp_path / "b" / "s.sock")
    assert one != two and one.name.startswith("s-") and two.name.startswith("s-")
    assert session_file(tmp_path / "a" / "s.sock", tmp_path / "d") == tmp_path / "d" / one.name


@pytest.mark.parametrize("value", ["-1", "10001", "true", '"50"'])
def test_restore_text_lines_must_be_a_line_count(tmp_path: Path, value: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"[server]\nrestore_text_lines = {value}\n")
    with pytest.raises(ConfigError, match="restore_text_lines must be a whole number"):
        load_settings(path)
    path.write_text("[server]\nrestore_text_lines = 200\n")
    assert load_settings(path).restore_text_lines == 200


def test_a_version_1_file_loads_as_version_2_holding_none_of_its_additions() -> None:
    data = session()
    assert data["version"] == 1
    state = parse(orjson.dumps(data))
    assert state.version == 2
    pane = state.windows[0].workspaces[0].tabs[0].root.first  # type: ignore[union-attr]
    assert (pane.aliases, pane.tokens, pane.surfaces[0].unread) == ([], {}, False)
    assert (state.notifications, state.refs, state.next_workspace_number) == ([], {}, None)
    assert orjson.loads(dump(state))["version"] == 2


def test_version_0_is_corrupt() -> None:
    data = session()
    data["version"] = 0
    with pytest.raises(StateFileError) as caught:
        parse(orjson.dumps(data))
    assert not caught.value.future
