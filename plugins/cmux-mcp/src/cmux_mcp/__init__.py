"""cmux-mcp: cmux as a Model Context Protocol server.

``cmux mcp`` (or ``cmux-mcp``) serves MCP on standard input and output, built on the
official ``mcp`` SDK, and reaches the cmux server through its socket like any other client
(:mod:`cmux_mcp.bridge`), starting one when none answers. An MCP client then sees
workspaces, panes and agents with their status, reads panes, opens panes, types and presses
keys, starts and prompts agents, and waits for output, for an agent's turn to end or for
any agent to block (:mod:`cmux_mcp.tools`); the agent list and pane screens are resources
with update notices (:mod:`cmux_mcp.resources`). See ``docs/mcp.md``.
"""

__version__ = "0.1.0"
