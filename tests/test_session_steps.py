"""The session save captures and dumps the session a tab at a time, letting requests in
between (:mod:`cmux_core.state.keeper`): on a real server with several workspaces, tabs
and splits, the file it writes holds every pane, and the dump made in steps is byte for
byte what one ``model_dump`` gives."""

from __future__ import annotations

from collections.abc import Generator
from typing import TypeVar

from conftest import Api

from cmux_core.config import session_file
from cmux_core.state.schema import SessionState, dump, dump_steps, encode, leaves, parse
from cmux_core.testing import ServerProcess, wait_until

T = TypeVar("T")


def run(steps: Generator[None, None, T]) -> T:
    count = 0
    while True:
        try:
            next(steps)
            count += 1
        except StopIteration as done:
            assert count > 1, "the dump took a single step"
            result: T = done.value
            return result


def saved(server: ServerProcess) -> SessionState | None:
    path = session_file(server.socket_path, server.home / "state" / "cmux")
    return parse(path.read_bytes()) if path.exists() else None


def pane_keys(state: SessionState | None) -> set[str]:
    if state is None:
        return set()
    return {p.key for w in state.windows for ws in w.workspaces for t in ws.tabs
            for p in leaves(t.root)}


def test_the_stepwise_save_holds_every_pane_and_dumps_as_one_call(
        api: Api, cmux_server: ServerProcess) -> None:
    first = api("pane.list")["panes"][0]
    api("pane.split", {"pane_id": first["pane_id"], "direction": "down"})
    for _ in range(3):
        api("tab.create", {})
    ws = api("workspace.create", {})["workspace"]
    api("tab.create", {"workspace_id": ws["workspace_id"]})
    live = {r["uuid"] for r in api("pane.list")["panes"]}
    assert len(live) == 7
    state = wait_until(lambda: (s := saved(cmux_server)) is not None
                       and pane_keys(s) == live and s, message="every pane in the file")
    assert isinstance(state, SessionState)
    assert encode(run(dump_steps(state))) == dump(state)
