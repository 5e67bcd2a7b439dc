"""system.top, system.memory, debug.terminals and the debug input helpers on a real
server: real processes in real terminals, read from /proc."""

from __future__ import annotations

import os
from typing import Any

from cmux_v2 import V2

from cmux_core.testing import ServerProcess, wait_until


def surface_nodes(tree: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for w in tree["windows"] for ws in w["workspaces"] for p in ws["panes"]
            for s in p["surfaces"]]


def test_top_memory_and_terminals_see_each_terminals_processes(
        cmux_server: ServerProcess) -> None:
    with V2(cmux_server.socket_path) as v2:
        shell = v2("system.identify")["focused"]["surface_id"]
        busy = v2("surface.split", direction="right",
                  initial_command="exec sleep 3001")["surface_id"]
        v2("surface.send_text", surface_id=shell, text="sleep 3002\n")

        def commands(surface_id: str) -> list[str]:
            nodes = surface_nodes(v2("system.top", sample_ms=0))
            node = next(s for s in nodes if s["id"] == surface_id)
            return [p["command"] for p in node["processes"]]

        wait_until(lambda: "sleep 3002" in commands(shell))
        top = v2("system.top", sample_ms=50)
        assert top["sample"]["interval_ms"] == 50
        assert top["server"]["pid"] == cmux_server.process.pid
        assert top["server"]["rss_bytes"] > 0
        nodes = {s["id"]: s for s in surface_nodes(top)}
        sleeper = nodes[busy]["processes"]
        assert [p["command"] for p in sleeper] == ["sleep 3001"]
        assert sleeper[0]["rss_bytes"] > 0 and sleeper[0]["name"] == "sleep"
        assert nodes[busy]["totals"]["process_count"] == 1
        assert top["totals"]["process_count"] >= 3
        assert "processes" not in surface_nodes(v2("system.top", sample_ms=0,
                                                   include_processes=False))[0]
        assert v2.error("system.top", sample_ms=-1).code == "invalid_params"

        memory = v2("system.memory", group_limit=1)
        assert len(memory["program_totals"]) == 1
        programs = {g["program"]: g for g in v2("system.memory")["program_totals"]}
        assert programs["sleep"]["process_count"] == 2
        rows = {r["surface_id"]: r for r in memory["surfaces"]}
        assert rows[busy]["process_count"] == 1 and rows[busy]["rss_bytes"] > 0
        assert memory["totals"]["process_count"] >= 3

        terms = {t["surface_id"]: t for t in v2("debug.terminals")["terminals"]}
        assert set(terms) == {shell, busy}
        term = terms[busy]
        assert term["argv"][-1] == "exec sleep 3001" and term["exited"] is False
        assert term["tty"].startswith("/dev/pts/") and term["process_count"] == 1
        with open(f"/proc/{term['pid']}/cmdline", "rb") as f:
            assert f.read().split(b"\0")[:2] == [b"sleep", b"3001"]
        assert term["columns"] > 0 and term["rows"] > 0
        os.kill(term["pid"], 9)
        wait_until(lambda: {t["surface_id"]: t for t in v2("debug.terminals")["terminals"]}
                   [busy]["exited"])


def test_debug_input_goes_to_the_focused_surface(cmux_server: ServerProcess) -> None:
    with V2(cmux_server.socket_path) as v2:
        first = v2("system.identify")["focused"]["surface_id"]
        second = v2("surface.split", direction="right", focus=True)["surface_id"]
        assert v2("debug.terminal.is_focused", surface_id=second)["focused"] is True
        assert v2("debug.terminal.is_focused", surface_id=first)["focused"] is False
        v2("debug.type", text="echo typed-$((2*21))")
        v2("debug.shortcut.simulate", combo="enter")
        wait_until(lambda: "typed-42" in v2("debug.terminal.read_text",
                                            surface_id=second)["text"])
        assert "typed-42" not in v2("surface.read_text", surface_id=first)["text"]
        shortcut = v2.error("debug.shortcut.simulate", combo="cmd+d")
        assert shortcut.code == "not_supported"
        assert v2.error("debug.shortcut.simulate", combo="hyper-x").code == "invalid_params"


def test_capabilities_leave_out_what_is_not_supported(cmux_server: ServerProcess) -> None:
    with V2(cmux_server.socket_path) as v2:
        methods = set(v2("system.capabilities")["methods"])
        assert {"surface.split", "pane.break", "notification.create", "system.top",
                "debug.terminals", "tab.action", "surface.action"} <= methods
        assert "window.displays" not in methods and "feed.push" not in methods
        refused = v2.error("window.displays")
        assert refused.code == "not_supported" and "screen" in refused.message
