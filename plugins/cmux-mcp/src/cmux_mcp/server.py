"""The MCP server: the SDK's low-level ``Server`` answering with :mod:`cmux_mcp.tools` and
:mod:`cmux_mcp.resources`.

A tool's result is its output model twice, as ``structuredContent`` and as JSON text for
clients that read only text. A failure is a tool error (``isError``) whose text is
``code: message`` and whose ``structuredContent`` is ``{"error": {"code", "message",
"data"}}``: cmux's own errors as cmux answered them, ``invalid_params`` naming the field
for arguments that do not fit the schema, ``server_unavailable`` when cmux cannot be
reached. No failure of a call ends the server.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

import cmux_mcp
from cmux_core.errors import CmuxError
from cmux_mcp import resources, tools
from cmux_mcp.bridge import Cmux
from cmux_mcp.tools import TOOLS, Tool

log = logging.getLogger(__name__)

Context = ServerRequestContext[Any, Any]

READS = types.ToolAnnotations(read_only_hint=True, destructive_hint=False,
                              idempotent_hint=True, open_world_hint=False)
ACTS = types.ToolAnnotations(read_only_hint=False, destructive_hint=True,
                             idempotent_hint=False, open_world_hint=True)
"""Tools that type into panes or run programs: what runs there may change anything."""

INSTRUCTIONS = (
    "cmux runs shells and coding agents in terminal panes and knows each agent's status "
    "(idle, working, blocked, done). To delegate: start_agent, then prompt_agent with "
    "wait=true (its answer is in the returned screen); wait_for_blocked finds an agent "
    "asking for permission. For a command: open_pane, then wait_for_output or read_pane.")


def tool_error(code: str, message: str, data: Any = None) -> types.CallToolResult:
    error = {"code": code, "message": message, "data": data}
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"{code}: {message}")],
                                structured_content={"error": error}, is_error=True)


def invalid_params(exc: ValidationError) -> types.CallToolResult:
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "arguments"
    return tool_error("invalid_params", f"{field}: {first['msg']}", {"field": field})


def describe(tool: Tool) -> types.Tool:
    return types.Tool(name=tool.name, description=tool.description,
                      input_schema=tool.params.model_json_schema(),
                      output_schema=tool.output.model_json_schema(),
                      annotations=READS if tool.reads_only else ACTS)


async def call(cmux: Cmux, tool: Tool | None, name: str, arguments: dict[str, Any] | None
               ) -> types.CallToolResult:
    """Run one tool call; every failure is a tool error."""
    if tool is None:
        return tool_error("unknown_tool", f"no tool {name}", {"name": name})
    try:
        params = tool.params.model_validate(arguments or {})
    except ValidationError as exc:
        return invalid_params(exc)
    try:
        result = await tool.run(cmux, params)
    except CmuxError as exc:
        return tool_error(exc.code, exc.message, exc.data)
    except Exception as exc:
        log.exception("tool %s failed", name)
        return tool_error("internal_error", f"{type(exc).__name__}: {exc}")
    data = result.model_dump(mode="json")
    return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(data))],
                                structured_content=data)


def build(cmux: Cmux, *, read_only: bool = False) -> Server[Any]:
    """The server for ``cmux``: every tool, or with ``read_only`` only those that read."""
    offered = {t.name: t for t in TOOLS if t.reads_only or not read_only}
    described = types.ListToolsResult(tools=[describe(t) for t in offered.values()])
    bus = InMemorySubscriptionBus()
    watcher = resources.Watcher(cmux, bus)
    listen = ListenHandler(bus)

    @contextlib.asynccontextmanager
    async def lifespan(_: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        async with watcher.running():
            yield {}

    async def list_tools(ctx: Context, params: Any) -> types.ListToolsResult:
        return described

    async def call_tool(ctx: Context, params: types.CallToolRequestParams
                        ) -> types.CallToolResult:
        return await call(cmux, offered.get(params.name), params.name, params.arguments)

    async def list_resources(ctx: Context, params: Any) -> types.ListResourcesResult:
        listed = [types.Resource(uri=resources.AGENTS_URI, name="agents",
                                 description="every agent with its status (JSON)",
                                 mime_type="application/json")]
        with contextlib.suppress(CmuxError):
            panes = await tools.list_panes(cmux, tools.ListPanesParams())
            listed += [types.Resource(uri=resources.screen_uri(p.pane_id),
                                      name=f"pane {p.pane_id}", mime_type="text/plain",
                                      description=f"the screen of pane {p.pane_id}")
                       for p in panes.panes]
        return types.ListResourcesResult(resources=listed)

    async def list_templates(ctx: Context, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[types.ResourceTemplate(
            uri_template=resources.SCREEN_TEMPLATE, name="pane screen",
            description="a pane's visible screen", mime_type="text/plain")])

    async def read_resource(ctx: Context, params: types.ReadResourceRequestParams
                            ) -> types.ReadResourceResult:
        try:
            text, mime = await resources.read(cmux, str(params.uri))
        except CmuxError as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=f"{exc.code}: {exc.message}",
                           data={"uri": str(params.uri), "code": exc.code}) from None
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=params.uri, text=text, mime_type=mime)])

    async def subscribe(ctx: Context, params: types.SubscribeRequestParams) -> types.EmptyResult:
        watcher.subscribe(ctx.session, str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(ctx: Context, params: types.UnsubscribeRequestParams
                          ) -> types.EmptyResult:
        watcher.unsubscribe(ctx.session, str(params.uri))
        return types.EmptyResult()

    async def listen_stream(ctx: Context, params: types.SubscriptionsListenRequestParams
                            ) -> types.SubscriptionsListenResult:
        async with watcher.watching(params.notifications.resource_subscriptions or ()):
            return await listen(ctx, params)

    return Server("cmux", version=cmux_mcp.__version__, instructions=INSTRUCTIONS,
                  lifespan=lifespan, on_list_tools=list_tools, on_call_tool=call_tool,
                  on_list_resources=list_resources, on_list_resource_templates=list_templates,
                  on_read_resource=read_resource, on_subscribe_resource=subscribe,
                  on_unsubscribe_resource=unsubscribe, on_subscriptions_listen=listen_stream)


async def serve(cmux: Cmux, read_only: bool = False) -> None:
    """Serve MCP on this process's stdin and stdout until stdin ends."""
    server = build(cmux, read_only=read_only)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
