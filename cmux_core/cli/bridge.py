"""``cmux bridge``: relay standard input and output to this machine's server socket, line
protocol and all, starting the server (detached, so it outlives the bridge) when none
answers. It is what the fleet runs on a remote machine over ssh; it does nothing a local
client could not do, with this user's rights only.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sys
import threading
from typing import Any

from cmux_core.cli.common import AddCommon
from cmux_core.client import Client, ensure_server
from cmux_core.config import socket_path


def _pump_in(sock: socket.socket) -> None:
    """Standard input to the socket until it ends; then half-close, so the server sees
    the end of requests and the replies still come back."""
    fd = sys.stdin.fileno()
    with contextlib.suppress(OSError):
        while data := os.read(fd, 1 << 16):
            sock.sendall(data)
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)


def cmd_bridge(args: argparse.Namespace) -> int:
    path = socket_path(args.socket, args.session)
    os.environ.pop("CMUX_MACHINE", None)
    ensure_server(path)
    c = Client(path, timeout=None, machine="local")
    c.connect()
    sock, _ = c.take_connection()
    threading.Thread(target=_pump_in, args=(sock,), daemon=True).start()
    out = sys.stdout.fileno()
    try:
        while data := sock.recv(1 << 16):
            view = memoryview(data)
            while view:
                view = view[os.write(out, view):]
    except OSError:
        return 1
    finally:
        sock.close()
    return 0


def add_bridge_command(sub: Any, add_common: AddCommon) -> None:
    p = sub.add_parser("bridge", help="relay stdin/stdout to the server's socket (what the "
                       "fleet runs over ssh)",
                       description="Relay standard input and output to the server's socket, "
                       "starting the server in the background when none answers; the "
                       "server keeps running after the bridge ends.")
    add_common(p)
    p.set_defaults(func=cmd_bridge)
