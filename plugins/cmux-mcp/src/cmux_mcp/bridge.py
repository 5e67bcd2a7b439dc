"""How the MCP server reaches cmux: the socket client, one connection per call, and the
workspace every tool may be confined to.

Every call opens its own connection (:class:`~cmux_core.client.AsyncClient`) and closes it
when the call ends, however it ends: a tool call the MCP client cancels closes the
connection its wait was on, and the cmux server drops a waiter whose connection closed. A
server that cannot be reached, or goes away mid-call, is a :class:`CmuxError`
``server_unavailable``, like any error the server answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from cmux_core.client import AsyncClient
from cmux_core.errors import CmuxError

Row = dict[str, Any]

CALL_TIMEOUT_S = 30.0
"""How long a call that does not wait may take to answer."""

WAIT_MARGIN_S = 10.0
"""How much longer than its own timeout a waiting call may take to answer."""


def unavailable(path: Path, exc: BaseException) -> CmuxError:
    return CmuxError("server_unavailable", f"the cmux server at {path} is not answering "
                     f"({exc}); start it with: cmux serve", {"path": str(path)})


class Cmux:
    """The cmux server at ``path``, seen from within ``workspace`` (a workspace id, ref or
    label) when one is given."""

    def __init__(self, path: Path, workspace: str | None = None) -> None:
        self.path = path
        self.workspace = workspace

    @contextlib.asynccontextmanager
    async def connection(self, timeout: float | None = CALL_TIMEOUT_S
                         ) -> AsyncIterator[AsyncClient]:
        """A connected client, closed when the block ends (also when it is cancelled)."""
        client = AsyncClient(self.path, timeout=timeout)
        try:
            await client.connect()
            yield client
        except (ConnectionError, OSError) as exc:
            raise unavailable(self.path, exc) from None
        except TimeoutError:
            raise CmuxError("server_unavailable", f"the cmux server at {self.path} did not "
                            "answer in time", {"path": str(self.path)}) from None
        finally:
            await client.close()

    async def call(self, method: str, params: Mapping[str, Any] | None = None, *,
                   wait_s: float | None = None) -> Row:
        """``method``'s result. ``wait_s``: the call holds a wait that long (the connection
        then stays open that long plus :data:`WAIT_MARGIN_S`)."""
        timeout = CALL_TIMEOUT_S if wait_s is None else wait_s + WAIT_MARGIN_S
        async with self.connection(timeout) as client:
            return await client.call(method, dict(params or {}))

    @contextlib.asynccontextmanager
    async def lines(self, method: str, params: Mapping[str, Any]
                    ) -> AsyncIterator[AsyncIterator[Row]]:
        """Call a method that turns its connection into a stream of JSON lines
        (``events.subscribe``, ``pane.attach`` with row frames) and iterate those lines;
        the connection is closed when the block ends."""
        async with self.connection(CALL_TIMEOUT_S) as client:
            await client.call(method, dict(params))
            reader, writer = client.take_connection()
            try:
                yield _read_lines(reader, self.path)
            finally:
                writer.close()

    # -- the workspace the tools are confined to ------------------------------------------

    async def workspace_id(self, *, create: bool = False) -> str | None:
        """The id of the confining workspace; None when there is none. A workspace that
        does not exist is created with that label when ``create``, else is
        ``workspace_not_found``."""
        if self.workspace is None:
            return None
        for row in (await self.call("workspace.list"))["workspaces"]:
            if self.workspace in (row.get("workspace_id"), row.get("ref"), row.get("uuid"),
                                  row.get("label")):
                return str(row["workspace_id"])
        if not create:
            raise CmuxError("workspace_not_found", f"workspace {self.workspace} does not "
                            "exist yet (a tool that opens a pane creates it)",
                            {"workspace": self.workspace})
        created = await self.call("workspace.create", {"label": self.workspace})
        return str(created["workspace"]["workspace_id"])

    async def allows(self, row: Mapping[str, Any]) -> bool:
        """Whether a pane or agent row is in the confining workspace (always, without one)."""
        if self.workspace is None:
            return True
        try:
            return row.get("workspace_id") == await self.workspace_id()
        except CmuxError:
            return False

    async def check_pane(self, pane_id: str) -> None:
        """Raise ``pane_not_found`` for a pane outside the confining workspace (a pane that
        does not exist is the server's own ``pane_not_found`` either way)."""
        await self._check("pane.get", "pane_id", pane_id, "pane")

    async def check_agent(self, target: str) -> None:
        """Raise ``agent_not_found`` for an agent outside the confining workspace."""
        await self._check("agent.get", "target", target, "agent")

    async def _check(self, method: str, param: str, value: str, kind: str) -> None:
        if self.workspace is None:
            return
        row = (await self.call(method, {param: value}))[kind]
        if not await self.allows(row):
            raise CmuxError(f"{kind}_not_found", f"{kind} {value} is outside workspace "
                            f"{self.workspace}, the only one this MCP server may use",
                            {param: value, "workspace": self.workspace})


async def _read_lines(reader: asyncio.StreamReader, path: Path) -> AsyncIterator[Row]:
    while True:
        try:
            line = await reader.readline()
        except (ConnectionError, OSError) as exc:
            raise unavailable(path, exc) from None
        if not line:
            return
        yield dict(json.loads(line))
