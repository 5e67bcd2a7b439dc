"""Workspaces, tabs and panes on real PTYs running real programs."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Api, regex_literal

from cmux_core.api.methods.shared.reading import OutputMatch, line_matcher
from cmux_core.testing import ServerProcess, wait_until

PY = sys.executable


def test_server_starts_with_one_workspace_tab_and_shell_pane(api: Api) -> None:
    snap = api("session.snapshot")["snapshot"]
    assert [w["workspace_id"] for w in snap["workspaces"]] == ["w1"]
    assert [t["tab_id"] for t in snap["tabs"]] == ["w1:t1"]
    assert [p["pane_id"] for p in snap["panes"]] == ["w1:p1"]
    assert snap["focused_pane_id"] == "w1:p1"
    pane = snap["panes"][0]
    assert pane["focused"] and pane["columns"] == 80 and pane["rows"] == 24
    windows = api("window.list")["windows"]
    assert len(windows) == 1 and windows[0]["workspace_count"] == 1


def test_pane_environment_is_injected_and_managed_values_win(api: Api) -> None:
    script = ("import os;print('|'.join(os.environ.get(k,'-') for k in ['CMUX_ENV',"
              "'CMUX_PANE_ID','CMUX_WORKSPACE_ID','CMUX_TAB_ID','TERM','MY_VAR']))")
    pane = api.run([PY, "-c", script], env={"MY_VAR": "hello", "CMUX_PANE_ID": "spoofed",
                                            "TERM": "dumb"})
    api.wait_line(pane, regex_literal(f"1|{pane}|w1|w1:t1|xterm-256color|hello"))


@pytest.mark.parametrize(("env", "fragment"), [
    ({"": "x"}, "empty"), ({"A=B": "x"}, "'='"), ({"A\u0000": "x"}, "NUL"),
    ({"A": "x\u0000y"}, "NUL"),
])
def test_invalid_env_is_rejected_and_creates_nothing(shared_api: Api, env: dict[str, str],
                                                     fragment: str) -> None:
    api = shared_api
    err = api.error("pane.split", {"env": env})
    assert err["code"] == "invalid_env" and fragment in err["message"]
    assert len(api("pane.list")["panes"]) == 1


def test_split_places_new_pane_second_and_clamps_ratio(api: Api) -> None:
    right = api("pane.split", {"direction": "right", "ratio": 0.99})["pane"]
    assert right["pane_id"] == "w1:p2" and not right["focused"]
    layout = api("pane.layout", {"pane_id": "w1:p1"})["layout"] if "pane.layout" in api(
        "system.capabilities")["methods"] else None
    panes = api("pane.list")["panes"]
    assert [p["pane_id"] for p in panes] == ["w1:p1", "w1:p2"]
    widths = {p["pane_id"]: p["columns"] for p in panes}
    assert widths == {"w1:p1": 72, "w1:p2": 8}  # ratio clamped to 0.9 of 80 columns
    if layout is not None:
        assert layout["splits"][0]["ratio"] == pytest.approx(0.9)
    down = api("pane.split", {"target_pane_id": "w1:p2", "direction": "down", "focus": True})
    assert down["pane"]["focused"] and api.focused_pane() == "w1:p3"


def test_split_with_missing_cwd_or_command_fails_cleanly(api: Api) -> None:
    assert api.error("pane.split", {"cwd": "/no/such/dir"})["code"] == "invalid_params"
    err = api.error("pane.split", {"command": ["/no/such/program-xyz"]})
    assert err["code"] == "pane_split_failed"
    assert len(api("pane.list")["panes"]) == 1


def test_stty_size_matches_the_pane_rect_and_resize_sends_sigwinch(api: Api) -> None:
    script = ("import signal,shutil,sys,os\n"
              "def show(*a):\n"
              "    print('size', os.get_terminal_size(0).columns, os.get_terminal_size(0).lines,"
              " flush=True)\n"
              "signal.signal(signal.SIGWINCH, show)\nshow()\n"
              "while True: signal.pause()\n")
    pane = api.run([PY, "-c", script], direction="down")
    api.wait_line(pane, "size 80 12")
    api("server.set_area", {"width": 100, "height": 30})
    api.wait_text(pane, "size 100 15")
    info = api("pane.get", {"pane_id": pane})["pane"]
    assert (info["columns"], info["rows"]) == (100, 15)


def test_ctrl_c_interrupts_a_foreground_program_started_as_argv(api: Api) -> None:
    script = ("import time\ntry:\n    print('looping', flush=True)\n    while True: "
              "time.sleep(0.05)\nexcept KeyboardInterrupt:\n    print('interrupted', flush=True)"
              "\n    time.sleep(30)\n")
    pane = api.run([PY, "-c", script])
    api.wait_text(pane, "looping")
    api("pane.send_keys", {"pane_id": pane, "keys": ["ctrl+c"]})
    api.wait_text(pane, "interrupted")


def test_send_text_keys_and_input(api: Api) -> None:
    pane = api.run(["cat"])
    api("pane.send_text", {"pane_id": pane, "text": "héllo wörld"})
    api("pane.send_keys", {"pane_id": pane, "keys": ["enter"]})
    api.wait_text(pane, "héllo wörld")
    api("pane.send_input", {"pane_id": pane, "text": "second", "keys": ["Enter"]})
    wait_until(lambda: api.read(pane).count("second") == 2, message="echo and cat's copy")


def test_invalid_key_rejects_the_whole_request_before_writing(api: Api) -> None:
    pane = api.run(["cat"])
    err = api.error("pane.send_keys", {"pane_id": pane, "keys": ["a", "b", "prefix+x"]})
    assert err["code"] == "invalid_key" and "prefix+x" in err["message"]
    api("pane.send_keys", {"pane_id": pane, "keys": ["z", "enter"]})
    api.wait_text(pane, "z")
    assert "a" not in api.read(pane)


def test_bracketed_paste_only_when_the_program_enabled_it(api: Api) -> None:
    script = ("import os,sys,tty\ntty.setraw(0)\nsys.stdout.write('\\x1b[?2004hready\\r\\n')\n"
              "sys.stdout.flush()\ndata=b''\nwhile b'!' not in data: data+=os.read(0,100)\n"
              "sys.stdout.write(repr(data)+'\\r\\n')\nsys.stdout.flush()\nimport time\n"
              "time.sleep(30)\n")
    pane = api.run([PY, "-c", script])
    api.wait_text(pane, "ready")
    api("pane.send_input", {"pane_id": pane, "text": "pasted!"})
    line = api.wait_line(pane, "b'.*pasted.*'")
    assert "\\x1b[200~pasted!\\x1b[201~" in line


def test_read_sources_and_line_limits(api: Api) -> None:
    pane = api.run(["seq", "1", "300"])
    # Once seq has exited its output has all been read: "300" alone can be seen before the
    # line feed after it moves the cursor.
    wait_until(lambda: api("pane.get", {"pane_id": pane})["pane"].get("exited"),
               timeout=30, message="seq's exit")
    recent = api("pane.read", {"pane_id": pane, "source": "recent", "lines": 5})["read"]
    # The last five lines of output: the cursor's empty row below them is not output.
    assert recent["text"] == "296\n297\n298\n299\n300\n" and recent["truncated"] is True
    assert recent["revision"] == 0 and recent["source"] == "recent"
    everything = api.read(pane, "recent", lines=5000)
    assert everything.splitlines()[0] == "1"
    visible = api("pane.read", {"pane_id": pane, "source": "visible"})["read"]
    assert visible["text"].splitlines()[-1] == "300"
    ansi = api("pane.read", {"pane_id": pane, "source": "visible", "format": "ansi"})["read"]
    assert ansi["format"] == "ansi" and "300" in ansi["text"]
    assert api.read(pane, "visible", lines=0) == ""


def test_wait_for_output_matches_existing_text_at_once(api: Api) -> None:
    pane = api.run(["sh", "-c", "echo ready-marker; sleep 30"])
    api.wait_text(pane, "ready-marker")
    result = api("pane.wait_for_output", {"pane_id": pane, "source": "visible",
                                          "match": {"type": "regex", "value": r"^ready-\w+$"},
                                          "timeout_ms": 1})
    assert result["matched_line"] == "ready-marker" and result["type"] == "output_matched"


def test_wait_for_output_is_woken_by_new_output(api: Api) -> None:
    pane = api.run(["cat"])
    waiter = Api(api.server)
    waiter.send_request("w", "pane.wait_for_output", {
        "pane_id": pane, "source": "recent",
        "match": {"type": "substring", "value": "late-line"}})
    api("pane.send_text", {"pane_id": pane, "text": "late-line\r"})
    reply = waiter.readline()
    assert reply["ok"] and reply["result"]["matched_line"] == "late-line"
    waiter.close()


def test_wait_for_output_errors(shared_api: Api) -> None:
    api = shared_api
    pane = api.focused_pane()
    err = api.error("pane.wait_for_output", {"pane_id": pane, "source": "recent",
                                             "match": {"type": "regex", "value": "(unclosed"}})
    assert err["code"] == "invalid_regex"
    err = api.error("pane.wait_for_output", {"pane_id": pane, "source": "recent",
                                             "timeout_ms": 50,
                                             "match": {"type": "substring", "value": "absent!"}})
    assert err == {"code": "timeout", "message": "timed out waiting for output match"}
    err = api.error("pane.wait_for_output", {"pane_id": "w1:p9", "source": "recent",
                                             "match": {"type": "substring", "value": "x"}})
    assert err["code"] == "pane_not_found"


@pytest.mark.parametrize(("match", "text", "line"), [
    ({"type": "substring", "value": "two"}, "one\ntwo three\ntwo\n", "two three"),
    ({"type": "substring", "value": "last"}, "a\nthe last", "the last"),
    ({"type": "substring", "value": "x"}, "a\nbx\r\nc\n", "bx"),
    ({"type": "substring", "value": "a\nb"}, "a\nb\n", None),
    ({"type": "substring", "value": ""}, "first\nsecond\n", "first"),
    ({"type": "substring", "value": "b\r"}, "ab\r\n", None),
    ({"type": "substring", "value": "absent"}, "one\ntwo\n", None),
    ({"type": "regex", "value": r"^t\w+$"}, "one\ntwo three\nthree\n", "three"),
])
def test_line_matcher_finds_the_first_matching_line(match: dict[str, str], text: str,
                                                     line: str | None) -> None:
    assert line_matcher(OutputMatch.model_validate(match))(text) == line


def test_a_remembered_pane_id_follows_close_and_move(api: Api) -> None:
    p2 = api("pane.split", {})["pane"]["pane_id"]
    assert api("pane.get", {"pane_id": p2})["pane"]["pane_id"] == p2
    api("pane.close", {"pane_id": p2})
    assert api.error("pane.get", {"pane_id": p2})["code"] == "pane_not_found"
    p3 = api("pane.split", {})["pane"]["pane_id"]
    assert api("pane.get", {"pane_id": p3})["pane"]["pane_id"] == p3
    moved = api("pane.move", {"pane_id": p3, "destination": {"type": "new_workspace"}})
    new_id = moved["move_result"]["pane"]["pane_id"]
    assert new_id != p3
    assert api("pane.get", {"pane_id": p3})["pane"]["pane_id"] == new_id
    assert api("pane.get", {"pane_id": new_id})["pane"]["pane_id"] == new_id


def test_pane_exit_is_reported_and_pane_kept_readable(api: Api) -> None:
    api("events.subscribe", {"subscriptions": [{"type": "pane.exited"}]})
    assert api("ping")["type"] == "pong"
    pane = api.run(["sh", "-c", "echo bye; exit 3"])
    event = api.event()
    assert event["event"] == "pane_exited" and event["data"]["pane_id"] == pane
    info = api("pane.get", {"pane_id": pane})["pane"]
    assert info["exited"] is True and info["exit_code"] == 3
    assert "bye" in api.read(pane)
    assert api.error("pane.send_text", {"pane_id": pane, "text": "x"})["code"] == \
        "pane_send_failed"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def _zombie_children(server_pid: int) -> list[int]:
    zombies = []
    for task in os.listdir(f"/proc/{server_pid}/task"):
        with open(f"/proc/{server_pid}/task/{task}/children") as f:
            for pid in f.read().split():
                try:
                    with open(f"/proc/{pid}/stat") as g:
                        if g.read().split(") ")[1][0] == "Z":
                            zombies.append(int(pid))
                except FileNotFoundError:
                    pass
    return zombies


def test_closing_a_pane_ends_its_process_group_without_zombies(
        cmux_server: ServerProcess, api: Api) -> None:
    pane = api.run(["sh", "-c", "sleep 300 & echo bg $! end; trap '' HUP; wait"])
    line = api.wait_line(pane, r"bg \d+ end")
    bg_pid = int(line.split()[1])
    shell_pid = api("pane.process_info", {"pane_id": pane})["process_info"]["shell_pid"]
    api("pane.close", {"pane_id": pane})
    wait_until(lambda: not _alive(bg_pid), 30, message="background child to end")
    wait_until(lambda: not _alive(shell_pid), 30, message="shell ignoring HUP to be killed")
    quick = api.run(["true"])
    wait_until(lambda: api("pane.get", {"pane_id": quick})["pane"].get("exited"), 30)
    api("pane.close", {"pane_id": quick})
    wait_until(lambda: not _zombie_children(cmux_server.process.pid), 30, message="no zombies")
    # Closed terminals are forgotten once their processes are gone (nothing accumulates).
    wait_until(lambda: api("server.stats")["closing_terminals"] == 0, 30,
               message="closed terminals to be released")


def test_process_info_lists_the_foreground_group(api: Api) -> None:
    pane = api.run(["sh", "-c", "exec sleep 60"])
    info = wait_until(lambda: (i := api("pane.process_info", {"pane_id": pane})["process_info"])
                      .get("foreground_processes") and i["foreground_processes"][0]["name"]
                      == "sleep" and i, 30)
    proc = info["foreground_processes"][0]
    assert proc["argv"] == ["sleep", "60"] and proc["pid"] == info["shell_pid"]


def test_workspace_and_tab_lifecycle_with_events(api: Api) -> None:
    watcher = Api(api.server)
    watcher("events.subscribe", {"subscriptions": [
        {"type": t} for t in ("workspace.created", "workspace.closed", "tab.created",
                              "tab.closed", "pane.created", "pane.closed", "layout.updated",
                              "workspace.focused", "tab.focused", "pane.focused",
                              "workspace.renamed", "tab.renamed")]})
    created = api("workspace.create", {"label": "second", "cwd": "/tmp"})
    ws = created["workspace"]["workspace_id"]
    assert ws == "w2" and created["workspace"]["label"] == "second"
    assert not created["workspace"]["focused"]  # creation does not steal focus
    kinds = [watcher.event()["event"] for _ in range(4)]
    assert kinds == ["workspace_created", "tab_created", "pane_created", "layout_updated"]
    tab = api("tab.create", {"workspace_id": ws, "label": "logs"})["tab"]
    assert tab["tab_id"] == "w2:t2" and tab["label"] == "logs"
    assert [watcher.event()["event"] for _ in range(3)] == [
        "tab_created", "pane_created", "layout_updated"]
    api("workspace.focus", {"workspace_id": "2"})
    assert [watcher.event()["event"] for _ in range(3)] == [
        "workspace_focused", "tab_focused", "pane_focused"]
    api("workspace.rename", {"workspace_id": ws, "label": "renamed"})
    assert watcher.event()["data"] == {"type": "workspace_renamed", "workspace_id": ws,
                                       "label": "renamed"}
    api("tab.rename", {"tab_id": tab["tab_id"], "label": ""})
    assert watcher.event()["data"]["label"] == "2"
    api("tab.close", {"tab_id": tab["tab_id"]})
    assert [watcher.event()["event"] for _ in range(2)] == ["pane_closed", "tab_closed"]
    api("workspace.close", {"workspace_id": ws})
    kinds = [watcher.event()["event"] for _ in range(3)]
    assert kinds[:3] == ["pane_closed", "tab_closed", "workspace_closed"]
    assert [w["workspace_id"] for w in api("workspace.list")["workspaces"]] == ["w1"]
    watcher.close()


def test_every_handle_form_resolves(api: Api) -> None:
    pane = api("pane.get", {"pane_id": "w1:p1"})["pane"]
    for form in ("w1:p1", pane["uuid"], pane["uuid"].lower(), pane["ref"], "w1-1", "1:p1",
                 "w_1:p1"):
        assert api("pane.get", {"pane_id": form})["pane"]["pane_id"] == "w1:p1", form
    ws = api("workspace.list")["workspaces"][0]
    for form in ("w1", "1", "w_1", ws["id"], ws["ref"]):
        assert api("workspace.get", {"workspace_id": form})["workspace"]["workspace_id"] == "w1"
    for form in ("w1:t1", "w1:1", "t_w1_1"):
        assert api("tab.get", {"tab_id": form})["tab"]["tab_id"] == "w1:t1"
    assert api.error("pane.get", {"pane_id": "term_123"})["code"] == "pane_not_found"


def test_closed_pane_numbers_are_not_reused(api: Api) -> None:
    p2 = api("pane.split", {})["pane"]["pane_id"]
    api("pane.close", {"pane_id": p2})
    assert api("pane.split", {})["pane"]["pane_id"] == "w1:p3"


def test_focus_and_current(api: Api) -> None:
    p2 = api("pane.split", {})["pane"]["pane_id"]
    assert api("pane.current")["pane"]["pane_id"] == "w1:p1"
    assert api("pane.current", {"caller_pane_id": p2})["pane"]["pane_id"] == p2
    assert api("pane.focus", {"pane_id": p2})["pane"]["focused"]
    assert api("pane.current")["pane"]["pane_id"] == p2
    err = api.error("pane.current", {"caller_pane_id": "w1:p77"})
    assert err == {"code": "pane_not_found", "message": "pane not found"}


@pytest.mark.cmux_server(env={"CMUX_AGENT": "claude", "HERDR_AGENT": "codex",
                              "CODEX_THREAD_ID": "t1", "KEEP_ME": "yes"})
def test_server_environment_hints_do_not_leak_into_panes(api: Api) -> None:
    script = ("import os;print('|'.join(os.environ.get(k,'-') for k in "
              "['CMUX_AGENT','HERDR_AGENT','CODEX_THREAD_ID','KEEP_ME']))")
    pane = api.run([PY, "-c", script])
    api.wait_line(pane, regex_literal("-|-|-|yes"))


def test_cursor_position_query_is_answered_through_the_pty(api: Api) -> None:
    script = ("import os,sys,tty\ntty.setraw(0)\nsys.stdout.write('\\x1b[5;9H\\x1b[6n')\n"
              "sys.stdout.flush()\nreply=b''\nwhile not reply.endswith(b'R'): "
              "reply+=os.read(0,32)\nsys.stdout.write('\\r\\ngot '+repr(reply)+'\\r\\n')\n"
              "sys.stdout.flush()\nimport time\ntime.sleep(30)\n")
    pane = api.run([PY, "-c", script])
    api.wait_line(pane, regex_literal("got b'\\x1b[5;9R'"))


def test_pane_list_shows_each_change_in_the_next_list(api: Api, tmp_path: Path) -> None:
    """pane.list remembers rectangles and foreground directories between lists; a split,
    a zoom and a cd each show in the very next one."""
    def rows() -> dict[str, dict[str, Any]]:
        return {row["pane_id"]: row for row in api("pane.list")["panes"]}

    pane = api.focused_pane()
    width = rows()[pane]["pixel_frame"]["width"]
    other = api("pane.split", {"pane_id": pane, "direction": "right"})["pane"]["pane_id"]
    listed = rows()
    assert listed[pane]["pixel_frame"]["width"] < width and other in listed
    api("pane.zoom", {"pane_id": other})
    assert rows()[other]["pixel_frame"]["width"] == width
    api("pane.send_text", {"pane_id": pane, "text": f"cd {tmp_path} && echo moved-$((2*3))\n"})
    api.wait_text(pane, "moved-6")
    assert rows()[pane].get("foreground_cwd") == os.path.realpath(tmp_path)
