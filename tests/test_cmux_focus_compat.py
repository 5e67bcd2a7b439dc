"""cmux's older focus policy behind ``[cmux] focus_on_create`` (or ``CMUX_FOCUS_ON_CREATE=1``),
and the selection and listing rules cmux scripts rely on, on real servers with cmux's
shapes: creating calls take focus unless ``"focus": false``, herdr-family calls keep their
own rule, ``workspace.list`` is the active window's, ``pane.move`` emptying a workspace
selects its neighbour."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Api

from cmux_core.config import ConfigError
from cmux_core.config_file import load_settings
from cmux_core.testing import start_server


def focused(api: Api) -> dict[str, Any]:
    return dict(api("system.identify")["focused"])


def current_workspace(api: Api) -> str:
    return str(api("workspace.current")["workspace_id"])


@pytest.fixture
def old_policy(tmp_path: Path) -> Iterator[Api]:
    """A server whose config file turns the older focus policy on."""
    config = tmp_path / "config"
    (config / "cmux").mkdir(parents=True)
    (config / "cmux" / "config.toml").write_text("[cmux]\nfocus_on_create = true\n")
    with start_server(env={"XDG_CONFIG_HOME": str(config)}) as server, Api(server) as conn:
        yield conn


def test_creating_calls_take_focus_under_the_setting(old_policy: Api) -> None:
    api = old_policy
    first = current_workspace(api)
    ws = api("workspace.create", {"title": "second"})
    assert current_workspace(api) == ws["workspace_id"] != first
    assert focused(api)["surface_id"] == ws["surface_id"]

    split = api("surface.split", {"direction": "right"})
    assert focused(api)["surface_id"] == split["surface_id"]
    assert api("debug.terminal.is_focused", {"surface_id": split["surface_id"]})["focused"]

    tab = api("surface.create", {"type": "terminal"})
    assert focused(api)["surface_id"] == tab["surface_id"]
    assert (focused(api)["pane_id"], tab["pane_id"]) == (split["pane_id"], split["pane_id"])

    pane = api("pane.create", {"direction": "down"})
    assert focused(api)["pane_id"] == pane["pane_id"]

    broken = api("pane.break", {"surface_id": tab["surface_id"]})
    assert current_workspace(api) == broken["workspace_id"] != ws["workspace_id"]

    window = api("window.create")
    assert api("window.current")["window_id"] == window["window_id"]
    assert current_workspace(api) == window["workspace_id"]


def test_layout_open_and_tab_actions_take_focus_under_the_setting(old_policy: Api) -> None:
    api = old_policy
    api("layout.save", {"name": "one"})
    opened = api("layout.open", {"name": "one"})
    assert current_workspace(api) == opened["workspace_id"]
    added = api("tab.action", {"action": "new_terminal_right"})
    assert focused(api)["surface_id"] == added["created_surface_id"]
    moved = api("tab.action", {"action": "move_to_new_workspace",
                               "surface_id": added["created_surface_id"]})
    assert current_workspace(api) == moved["created_workspace_id"]


def test_a_new_tab_takes_typed_input_under_the_setting(old_policy: Api,
                                                      wait_until: Any) -> None:
    """What cmux's new-tab script does: a new tab is focused, ``debug.type`` reaches it,
    and ``presentCount`` grows as the typed text is echoed."""
    api = old_policy
    api("surface.split", {"direction": "right"})
    tab = api("surface.create", {"type": "terminal"})["surface_id"]
    assert api("debug.terminal.is_focused", {"surface_id": tab})["focused"] is True
    api("debug.app.activate")

    def present() -> int:
        stats = api("debug.terminal.render_stats", {"surface_id": tab})["stats"]
        return int(stats["presentCount"])

    baseline = present()
    api("debug.type", {"text": "echo TYPED_$((3*4))"})
    wait_until(lambda: present() > baseline, timeout=30, message="presentCount to grow")
    api("debug.type", {"text": "\n"})
    wait_until(lambda: "TYPED_12" in api("surface.read_text", {"surface_id": tab})["text"],
               timeout=30, message="the typed command's output in the new tab")


def test_focus_false_still_keeps_focus_under_the_setting(old_policy: Api) -> None:
    api = old_policy
    first = current_workspace(api)
    before = focused(api)["surface_id"]
    api("workspace.create", {"focus": False})
    api("surface.split", {"direction": "right", "focus": False})
    api("surface.create", {"focus": False})
    api("window.create", {"focus": False})
    assert current_workspace(api) == first
    assert focused(api)["surface_id"] == before


def test_herdr_family_creation_keeps_its_own_rule(old_policy: Api) -> None:
    api = old_policy
    pane = api.focused_pane()
    api("pane.split", {"target_pane_id": pane, "direction": "right"})
    api("tab.create", {})
    assert api.focused_pane() == pane


@pytest.mark.cmux_server(env={"CMUX_FOCUS_ON_CREATE": "1"})
def test_environment_turns_the_setting_on(api: Api) -> None:
    ws = api("workspace.create")["workspace_id"]
    assert current_workspace(api) == ws
    assert api("workspace.list")["workspaces"][-1]["selected"] is True


def test_default_policy_moves_focus_only_when_asked(api: Api) -> None:
    first = current_workspace(api)
    api("workspace.create")
    split = api("surface.split", {"direction": "right"})
    assert current_workspace(api) == first
    assert focused(api)["surface_id"] != split["surface_id"]


def test_setting_is_validated(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[cmux]\nfocus_on_create = true\n")
    assert load_settings(path).focus_on_create is True
    path.write_text('[cmux]\nfocus_on_create = "yes"\n')
    with pytest.raises(ConfigError, match=r"\[cmux\] focus_on_create must be true or false"):
        load_settings(path)
    path.write_text("cmux = 1\n")
    with pytest.raises(ConfigError, match="'cmux' must be a table"):
        load_settings(path)


# -- workspace.list and selection after emptying ----------------------------------------


def test_workspace_list_without_window_is_the_active_windows(api: Api) -> None:
    first_window = api("window.current")["window_id"]
    first_ws = current_workspace(api)
    other = api("window.create")
    assert other["window_id"] != first_window
    listed = api("workspace.list")
    assert listed["window_id"] == first_window
    assert [w["id"] for w in listed["workspaces"]] == [first_ws]
    assert [w["index"] for w in listed["workspaces"]] == [0]

    api("window.focus", {"window_id": other["window_id"]})
    listed = api("workspace.list")
    assert listed["window_id"] == other["window_id"]
    assert [w["id"] for w in listed["workspaces"]] == [other["workspace_id"]]
    named = api("workspace.list", {"window_id": first_window})
    assert [w["id"] for w in named["workspaces"]] == [first_ws]


def test_pane_move_emptying_the_selected_workspace_selects_its_neighbour(api: Api) -> None:
    a = current_workspace(api)
    b = api("workspace.create")["workspace_id"]
    c = api("workspace.create")["workspace_id"]
    api("workspace.select", {"workspace_id": b})  # a, b, c with a selected before b
    api("workspace.select", {"workspace_id": a})
    api("workspace.select", {"workspace_id": b})
    mover = api("pane.list", {"workspace_id": b})["panes"][0]["pane_id"]
    tab = api("tab.list", {"workspace_id": a})["tabs"][0]["tab_id"]
    moved = api("pane.move", {"pane_id": mover, "destination": {
        "type": "tab", "tab_id": tab, "split": "right"}})
    assert moved["move_result"]["closed_workspace_id"] is not None
    # The one that took its place (c), not the one selected before it (a).
    assert current_workspace(api) == c
    assert [w["id"] for w in api("workspace.list")["workspaces"]] == [a, c]


def test_pane_move_emptying_the_last_workspace_selects_the_one_before(api: Api) -> None:
    a = current_workspace(api)
    b = api("workspace.create")["workspace_id"]
    c = api("workspace.create")["workspace_id"]
    api("workspace.select", {"workspace_id": a})
    api("workspace.select", {"workspace_id": c})
    mover = api("pane.list", {"workspace_id": c})["panes"][0]["pane_id"]
    tab = api("tab.list", {"workspace_id": a})["tabs"][0]["tab_id"]
    api("pane.move", {"pane_id": mover, "destination": {
        "type": "tab", "tab_id": tab, "split": "down"}})
    assert current_workspace(api) == b



# -- layout.save keeps the commands as they were asked for -------------------------------


def surface_nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    if "pane" in node:
        return list(node["pane"]["surfaces"])
    return [s for child in node["children"] for s in surface_nodes(child)]


def test_layout_save_keeps_the_commands_the_user_gave(api: Api, wait_until: Any) -> None:
    typed = "echo LAYOUT_$((6*7))"
    ws = api("workspace.create", {"layout": {"pane": {"surfaces": [
        {"type": "terminal", "command": typed}]}}})["workspace_id"]
    started = "echo SPLIT_$((5*5)); exec sh"
    split = api("surface.split", {"workspace_id": ws, "direction": "right",
                                  "initial_command": started})
    rows = api("surface.list", {"workspace_id": ws})["surfaces"]
    assert {r["id"]: r["initial_command"] for r in rows}[split["surface_id"]] == started

    api("layout.save", {"name": "asked", "workspace_id": ws})
    saved = api("layout.get", {"name": "asked"})["workspace"]["layout"]
    assert [s.get("command") for s in surface_nodes(saved)] == [typed, started]

    opened = api("layout.open", {"name": "asked"})["workspace_id"]
    surfaces = [r["id"] for r in api("surface.list", {"workspace_id": opened})["surfaces"]]

    def shows(surface: str, text: str) -> bool:
        return text in api("surface.read_text", {"surface_id": surface})["text"]

    wait_until(lambda: shows(surfaces[0], "LAYOUT_42") and shows(surfaces[1], "SPLIT_25"),
               timeout=30, message="the opened layout to run both commands")
