"""``cmux mcp [--read-only] [--workspace NAME] [--socket PATH | --session NAME]``.

The command line of the MCP server: it logs to standard error only (standard output is the
protocol), starts a cmux server in the background when none answers at the socket (as
``cmux attach`` does, with :func:`cmux_core.client.ensure_server`), then serves until its
client closes standard input.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

import anyio

from cmux_core.cli.common import session_name
from cmux_core.client import ensure_server
from cmux_core.config import ConfigError, socket_path
from cmux_core.errors import CmuxError
from cmux_mcp.bridge import Cmux

log = logging.getLogger("cmux_mcp")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cmux mcp", description="Serve cmux to an MCP client on standard input and "
        "output: see and drive panes and agents, and wait for them.")
    p.add_argument("--read-only", action="store_true",
                   help="offer only the tools that read and wait, none that types or runs")
    p.add_argument("--workspace", metavar="NAME",
                   help="confine every tool to this workspace (id, ref or label; created "
                   "with that label by the first tool that opens a pane)")
    p.add_argument("--socket", metavar="PATH", help="socket path (default: "
                   "$CMUX_SOCKET_PATH, else the session's or the per-user default)")
    p.add_argument("--session", type=session_name, metavar="NAME",
                   help="named session with its own socket (default: $CMUX_SESSION)")
    p.add_argument("--log-level", default="WARNING",
                   choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                   help="what is logged to standard error (default WARNING)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    # The SDK takes a second or more to import: not for --help or a wrong command line.
    from cmux_mcp.server import serve

    logging.basicConfig(level=args.log_level, stream=sys.stderr, force=True,
                        format="cmux-mcp %(levelname)s %(name)s: %(message)s")
    try:
        path = socket_path(args.socket, args.session)
    except ConfigError as exc:
        print(f"cmux mcp: {exc}", file=sys.stderr)
        return 2
    try:
        if ensure_server(path):
            log.info("started a cmux server at %s", path)
    except CmuxError as exc:
        log.warning("%s: %s (tools answer server_unavailable until it runs)", exc.code,
                    exc.message)
    try:
        anyio.run(serve, Cmux(path, args.workspace), args.read_only)
    except KeyboardInterrupt:
        return 130
    return 0
