"""``cmux mcp`` driven by the MCP SDK's own stdio client, against a real cmux server.

One cmux server (knowing a small fake agent from a test manifest) and one MCP session are
shared by the tests of this module: the session lists the tools, opens a pane and reads it
back, starts the fake agent, prompts it, waits for its turn and for it to block, cancels a
wait, reads and subscribes to resources. Two more sessions, ``--read-only`` and
``--workspace sandbox``, check the limits; the read-only one, on a cmux server of its own,
also follows a resource on the 2026 protocol and outlives that server.

The fake agent (``mcpbot_agent.py``) draws an idle prompt; a line ``ask`` makes it ask a
question (``blocked``) until a ``y``; any other line makes it work for a moment, then print
the line reversed as its answer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import warnings
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import cmux_mcp.cli
import jsonschema
import mcp_types as types
import pytest
from fake_agent import DRAWN_SCREEN, agent_argv, write_agent, write_manifests
from mcp import Client, StdioServerParameters

from cmux_core.cli.extensions import find_extension
from cmux_core.testing import ServerProcess, start_server, wait_until

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[1]

AGENT_SCRIPT = DRAWN_SCREEN + textwrap.dedent("""\
    show("MCPBOT\\n> type here")
    for line in sys.stdin:
        text = line.strip()
        if text == "ask":
            show("MCPBOT\\nAllow this? [y/n]")
        elif text == "y":
            show("MCPBOT allowed\\n> type here")
        else:
            show("MCPBOT on " + text + "\\nthinking... (esc to interrupt)")
            time.sleep(0.5)
            show("MCPBOT answer: " + text[::-1] + "\\n> type here")
""")

RULES = [("asks", "blocked", "visible_blocker", "Allow this? [y/n]"),
         ("thinking", "working", None, "esc to interrupt"),
         ("prompt", "idle", "visible_idle", "type here")]
"""The manifest's rules, highest priority first: id, state, visibility flag, text."""

MANIFEST = 'id = "mcpbot"\nversion = "1.0"\nprocess_names = ["mcpbot_agent"]\n' + "".join(
    f'\n[[rules]]\nid = "{rule}"\nstate = "{state}"\npriority = {30 - 10 * rank}\n'
    + (f"{flag} = true\n" if flag else "") + f"contains = [{json.dumps(text)}]\n"
    for rank, (rule, state, flag, text) in enumerate(RULES))

READERS = {"list_workspaces", "list_panes", "list_agents", "read_pane", "explain_agent",
           "wait_for_output", "wait_for_agent", "wait_for_blocked"}
ACTORS = {"open_pane", "type_text", "press_keys", "close_pane", "start_agent", "prompt_agent"}


class Session:
    """An MCP client session with ``cmux mcp ARGS`` on an event loop of its own thread, so
    sync tests call it; ``notices`` collects the server's notifications."""

    def __init__(self, server: ServerProcess, *args: str, mode: str = "legacy") -> None:
        self.notices: list[types.ServerNotification] = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "cmux_core", "mcp", "--socket", str(server.socket_path), *args],
            env=server.env)
        self.client = Client(params, mode=mode, message_handler=self._message)  # type: ignore[arg-type]
        self.ready = threading.Event()
        self.done = asyncio.Event()
        self.held = self.submit(self._hold())
        while not self.ready.wait(0.05):
            if self.held.done():
                self.held.result()  # raises what ended the session

    async def _hold(self) -> None:
        """Keep the session open in one task (the SDK's scopes must end where they began)."""
        async with self.client:
            self.ready.set()
            await self.done.wait()

    async def _message(self, message: Any) -> None:
        if not isinstance(message, Exception):
            self.notices.append(message)

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return self.submit(coro).result(timeout)

    def start(self, tool: str, /, **arguments: Any) -> concurrent.futures.Future[
            types.CallToolResult]:
        return self.submit(self.client.call_tool(tool, arguments))

    def raw(self, tool: str, /, **arguments: Any) -> types.CallToolResult:
        return self.start(tool, **arguments).result(60)

    def __call__(self, tool: str, /, **arguments: Any) -> dict[str, Any]:
        """The tool's structured result; a tool error fails the test."""
        result = self.raw(tool, **arguments)
        assert not result.is_error, result.content
        assert result.structured_content is not None
        return result.structured_content

    def error(self, tool: str, /, **arguments: Any) -> dict[str, Any]:
        result = self.raw(tool, **arguments)
        assert result.is_error, result.structured_content
        assert result.structured_content is not None
        error: dict[str, Any] = result.structured_content["error"]
        text = result.content[0]
        assert isinstance(text, types.TextContent)
        assert text.text == f"{error['code']}: {error['message']}"
        return error

    def close(self) -> None:
        try:
            self.loop.call_soon_threadsafe(self.done.set)
            self.held.result(30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    directory = tmp_path_factory.mktemp("mcp")
    script = write_agent(directory, "mcpbot_agent", AGENT_SCRIPT)
    server = start_server(["--manifests-dir",
                           str(write_manifests(directory, {"mcpbot": MANIFEST}))])
    try:
        yield server, script
    finally:
        server.stop()


@pytest.fixture(scope="module")
def mcp(world: tuple[ServerProcess, Path]) -> Iterator[Session]:
    session = Session(world[0])
    try:
        yield session
    finally:
        session.close()


@pytest.fixture(scope="module")
def bot(mcp: Session, world: tuple[ServerProcess, Path]) -> dict[str, Any]:
    """The fake agent, started through the MCP session as ``bot``: what start_agent said."""
    started: dict[str, Any] = mcp("start_agent", name="bot",
                                  command=agent_argv(world[1]))["agent"]
    return started


def pending_waits(server: ServerProcess) -> int:
    return int(server.call("server.stats")["pending_waits"])


def test_tools_have_valid_schemas_and_annotations(mcp: Session) -> None:
    listed = mcp.run(mcp.client.list_tools()).tools
    assert {t.name for t in listed} == READERS | ACTORS
    for tool in listed:
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
        assert tool.output_schema is not None
        jsonschema.Draft202012Validator.check_schema(tool.output_schema)
        assert tool.description
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is (tool.name in READERS), tool.name
        if tool.name in ACTORS:
            assert tool.annotations.destructive_hint is True


def test_a_command_in_a_new_pane_is_read_back(mcp: Session) -> None:
    pane = mcp("open_pane", command="echo mcp-$((6*7)); sleep 600", label="calc")["pane"]
    matched = mcp("wait_for_output", pane_id=pane["pane_id"], regex="^mcp-\\d+$",
                  timeout_s=30)
    assert matched["matched_line"] == "mcp-42"
    screen = mcp("read_pane", pane_id=pane["pane_id"])
    assert "mcp-42" in screen["text"] and isinstance(screen["truncated"], bool)
    panes = mcp("list_panes")["panes"]
    assert any(p["pane_id"] == pane["pane_id"] and p["title"] == "calc" for p in panes)
    mcp("close_pane", pane_id=pane["pane_id"])


def test_errors_are_tool_errors_with_cmux_codes(mcp: Session) -> None:
    assert mcp.error("read_pane", pane_id="w9:p9")["code"] == "pane_not_found"
    pane_id = mcp("list_panes")["panes"][0]["pane_id"]
    bad = mcp.error("wait_for_output", pane_id=pane_id, regex="(?<=x)y", timeout_s=5)
    assert bad["code"] == "invalid_regex"
    assert mcp.error("wait_for_output", pane_id=pane_id, regex="^never there$",
                     timeout_s=0.3)["code"] == "timeout"
    invalid = mcp.error("read_pane", pane_id=pane_id, lines=0)
    assert invalid["code"] == "invalid_params" and invalid["data"]["field"] == "lines"
    assert mcp.error("list_agents", extra=1)["code"] == "invalid_params"
    assert mcp("list_workspaces")["workspaces"], "the server stopped answering"


def test_an_agent_is_started_prompted_and_waited_for(mcp: Session, bot: dict[str, Any]
                                                     ) -> None:
    assert bot["name"] == "bot" and bot["launch_pending"] is True
    turn = mcp("prompt_agent", target="bot", text="hello", wait=True, timeout_s=30)
    assert turn["agent"]["status"] == "idle" and turn["agent"]["agent"] == "mcpbot"
    assert "MCPBOT answer: olleh" in turn["screen"]["text"]
    prompted = mcp("prompt_agent", target="bot", text="again")
    assert prompted["screen"] is None and prompted["agent"]["status"] in ("working", "idle")
    done = mcp("wait_for_agent", target="bot", until=["idle"], timeout_s=30)
    assert done["agent"]["state_change_seq"] >= prompted["agent"]["state_change_seq"]
    after = mcp("wait_for_output", pane_id=done["agent"]["pane_id"],
                regex="^MCPBOT answer: niaga$", timeout_s=30)
    assert after["matched_line"] == "MCPBOT answer: niaga"
    agents = mcp("list_agents")["agents"]
    assert [a["name"] for a in agents] == ["bot"]
    explained = mcp("explain_agent", target="bot")
    assert explained["matched_rule"] == "prompt"
    assert {r["id"] for r in explained["rules"]} == {"asks", "thinking", "prompt"}


def test_wait_for_blocked_names_the_agent_and_shows_its_screen(mcp: Session,
                                                              bot: dict[str, Any]) -> None:
    waiting = mcp.start("wait_for_blocked", timeout_s=30)
    mcp("prompt_agent", target="bot", text="ask")
    result = waiting.result(40)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    assert result.structured_content["agent"]["name"] == "bot"
    assert result.structured_content["agent"]["status"] == "blocked"
    assert "Allow this? [y/n]" in result.structured_content["screen"]["text"]
    again = mcp("wait_for_blocked", timeout_s=5)
    assert again["agent"]["name"] == "bot", "an agent already blocked answers at once"
    mcp("type_text", pane_id=again["agent"]["pane_id"], text="y", submit=True)
    assert mcp("wait_for_agent", target="bot", until=["idle"], timeout_s=30)["agent"][
        "status"] == "idle"


def test_a_cancelled_wait_leaves_nothing_on_the_server(
        mcp: Session, world: tuple[ServerProcess, Path]) -> None:
    server = world[0]
    pane_id = mcp("list_panes")["panes"][0]["pane_id"]
    before = pending_waits(server)
    waiting = mcp.start("wait_for_output", pane_id=pane_id, regex="^never there$",
                        timeout_s=600)
    wait_until(lambda: pending_waits(server) > before, timeout=20,
               message="the wait to reach the cmux server")
    waiting.cancel()
    wait_until(lambda: pending_waits(server) == before, timeout=20,
               message="the cmux server to drop the cancelled wait")
    assert mcp("list_workspaces")["workspaces"]


def test_resources_list_read_and_notify(mcp: Session, bot: dict[str, Any]) -> None:
    listed = mcp.run(mcp.client.list_resources()).resources
    uris = {r.uri for r in listed}
    assert "cmux://agents" in uris
    pane = mcp("open_pane")["pane"]
    uri = f"cmux://panes/{pane['pane_id']}/screen"
    agents = mcp.run(mcp.client.read_resource("cmux://agents")).contents[0]
    assert isinstance(agents, types.TextResourceContents) and '"name": "bot"' in agents.text
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # resources/subscribe is the 2025 protocol's
        mcp.run(mcp.client.subscribe_resource(uri))

    def notices() -> int:
        return sum(isinstance(n, types.ResourceUpdatedNotification) and n.params.uri == uri
                   for n in mcp.notices)
    wait_until(notices, timeout=20, message=f"the notice that {uri} is watched")
    watched = notices()
    mcp("type_text", pane_id=pane["pane_id"], text="echo resource-changed", submit=True)
    wait_until(lambda: notices() > watched, timeout=20, message=f"an update notice for {uri}")
    screen = mcp.run(mcp.client.read_resource(uri)).contents[0]
    assert isinstance(screen, types.TextResourceContents)
    assert "resource-changed" in screen.text
    mcp("close_pane", pane_id=pane["pane_id"])


async def update_after(client: Client, uri: str, act: Any) -> Any:
    """The event of a ``subscriptions/listen`` stream on ``uri`` after the one saying the
    watch is in place and ``act()``."""
    with anyio.fail_after(30):
        async with client.listen(resource_subscriptions=[uri]) as stream:
            events = aiter(stream)
            await anext(events)
            act()
            return await anext(events)


def test_read_only_offers_the_readers_and_outlives_its_cmux_server() -> None:
    """On the 2026 protocol (subscriptions/listen); then its cmux server dies."""
    server = start_server()
    session = Session(server, "--read-only", mode="auto")
    try:
        names = {t.name for t in session.run(session.client.list_tools()).tools}
        assert names == READERS
        pane_id = session("list_panes")["panes"][0]["pane_id"]
        assert session.error("type_text", pane_id=pane_id, text="x")["code"] == "unknown_tool"
        uri = f"cmux://panes/{pane_id}/screen"
        event = session.run(update_after(session.client, uri, lambda: server.call(
            "pane.send_text", {"pane_id": pane_id, "text": "echo listened\n"})))
        assert getattr(event, "uri", None) == uri
        server.process.kill()
        server.process.wait()
        assert session.error("list_workspaces")["code"] == "server_unavailable"
        assert session.error("read_pane", pane_id=pane_id)["code"] == "server_unavailable"
    finally:
        session.close()
        server.stop()


def test_a_workspace_confines_every_tool(mcp: Session, world: tuple[ServerProcess, Path],
                                         bot: dict[str, Any]) -> None:
    outside = mcp("list_panes")["panes"][0]["pane_id"]
    session = Session(world[0], "--workspace", "sandbox")
    try:
        assert session("list_panes")["panes"] == [], "the workspace does not exist yet"
        pane = session("open_pane", command="echo inside; sleep 600")["pane"]
        workspaces = session("list_workspaces")["workspaces"]
        assert [w["label"] for w in workspaces] == ["sandbox"]
        assert pane["workspace_id"] == workspaces[0]["workspace_id"]
        assert {p["pane_id"] for p in session("list_panes")["panes"]} >= {pane["pane_id"]}
        assert outside not in {p["pane_id"] for p in session("list_panes")["panes"]}
        assert session.error("read_pane", pane_id=outside)["code"] == "pane_not_found"
        assert session.error("type_text", pane_id=outside, text="x")["code"] == \
            "pane_not_found"
        assert session("list_agents")["agents"] == []
        assert session.error("prompt_agent", target="bot", text="x")["code"] == \
            "agent_not_found"
    finally:
        session.close()



def test_cmux_finds_the_subcommand_and_keeps_its_own() -> None:
    assert find_extension("mcp") is cmux_mcp.cli.main
    assert find_extension("no-such-command") is None
    # Options before the name reach the subcommand; a built-in name never reaches one.
    run = subprocess.run([sys.executable, "-m", "cmux_core", "--socket", "/nonexistent/s",
                          "mcp", "--help"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "--read-only" in run.stdout, run.stderr
    unknown = subprocess.run([sys.executable, "-m", "cmux_core", "no-such-command"],
                             capture_output=True, text=True, timeout=60)
    assert unknown.returncode == 2 and "unknown command" in unknown.stderr


def test_the_plugin_installs_from_its_own_directory(tmp_path: Path) -> None:
    """plugins/cmux-mcp alone, built and installed (not editable) into a directory of its
    own, provides ``cmux mcp``."""
    source = tmp_path / "src"
    shutil.copytree(ROOT / "plugins" / "cmux-mcp", source,
                    ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input",
                    "install", "-q", "--no-deps", "--no-build-isolation", "--target",
                    str(target), str(source)], check=True, capture_output=True, timeout=300)
    script = ("import cmux_mcp, pathlib, sys\n"
              f"assert pathlib.Path(cmux_mcp.__file__).is_relative_to({str(target)!r})\n"
              "from cmux_core.cli.main import main\n"
              "sys.exit(main(['mcp', '--help']))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(target)}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: cmux mcp")
