"""``cmux machine ssh DEST [SSH_ARG...] [-- COMMAND...]``: ``ssh`` from a pane, with the
remote's agent hooks reporting to that pane.

Run inside a cmux pane, it asks the server for a report-only socket bound to the pane's
terminal (``pane.open_report_socket``; see docs/security.md for what that socket accepts),
then runs the user's own ``ssh`` with ``-R <remote socket>:<report socket>`` (OpenSSH's
Unix-socket forwarding, created 0600 on the remote by sshd's default
``StreamLocalBindMask``) and a remote command that sets ``CMUX_SOCKET_PATH``,
``CMUX_PANE_ID`` and ``CMUX_SURFACE_ID`` before it starts a login shell (or COMMAND). The
remote's ``cmux-hook`` then reports into this pane, which shows the remote agent like a
local one.

This process stays in the foreground beside ``ssh``, ignoring SIGINT and SIGQUIT (the
terminal's keys go to ssh), and holds the connection that opened the report socket: when
ssh ends, the connection closes, the server closes the socket and clears the authority its
reports gave the pane. The exit status is ssh's.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shlex
import signal
import subprocess
from typing import Any

from cmux_core.cli.common import AddCommon, client
from cmux_core.errors import CmuxError

REMOTE_DIR = "/tmp"
"""Where the forwarded socket goes on the remote (sticky, so no one else can replace it)."""

EPILOG = """\
Everything after DEST goes to ssh before the destination (-p 2222, -i KEY, -o K=V, ...);
after --, the words are the remote command (default: the remote user's login shell).

Examples:
  cmux machine ssh devbox
  cmux machine ssh me@build.example.com -p 2222 -- claude
"""


def remote_command(socket: str, pane_id: str, surface_id: str, command: list[str]) -> str:
    """The command line the remote shell runs: the cmux variables, then ``command`` (ssh
    joins its words with spaces, as ssh itself does) or a login shell; the forwarded
    socket's file is removed when it ends."""
    env = {"CMUX_SOCKET_PATH": socket, "CMUX_PANE_ID": pane_id, "CMUX_SURFACE_ID": surface_id}
    assign = " ".join(f"{key}={shlex.quote(value)}" for key, value in env.items())
    run = " ".join(command) if command else '"${SHELL:-/bin/sh}" -l'
    return (f"{assign}; export {' '.join(env)}; {run}; status=$?; "
            f"rm -f {shlex.quote(socket)}; exit $status")


def ssh_argv(destination: str, ssh_args: list[str], local_socket: str, opened: dict[str, Any]
             ) -> list[str]:
    """The ``ssh`` command line: the forward, a terminal (unless ``-T`` or ``-t`` is given),
    the user's arguments, the destination and :func:`remote_command`."""
    extra, _, command = _split(ssh_args)
    remote = f"{REMOTE_DIR}/cmux-report-{secrets.token_hex(8)}.sock"
    tty = [] if {"-t", "-T", "-tt"} & set(extra) else ["-t"]
    return ["ssh", "-o", "ExitOnForwardFailure=yes", "-R", f"{remote}:{local_socket}", *tty,
            *extra, destination,
            remote_command(remote, opened["pane_id"], opened["surface_id"], command)]


def _split(words: list[str]) -> tuple[list[str], bool, list[str]]:
    if "--" not in words:
        return words, False, []
    at = words.index("--")
    return words[:at], True, words[at + 1:]


def cmd_machine_ssh(args: argparse.Namespace) -> int:
    surface_id = os.environ.get("CMUX_SURFACE_ID")
    pane_id = os.environ.get("CMUX_PANE_ID")
    if not (surface_id or pane_id):
        raise CmuxError("not_in_pane", "cmux machine ssh runs inside a cmux pane "
                        "(CMUX_PANE_ID is not set)")
    target = {"surface_id": surface_id} if surface_id else {"pane_id": pane_id}
    with client(args, timeout=None) as c:
        opened = c.call("pane.open_report_socket", target)
        argv = ssh_argv(args.destination, list(args.ssh_args), opened["path"], opened)
        try:
            child = subprocess.Popen(argv)
        except FileNotFoundError:
            raise CmuxError("ssh_not_found", "ssh is not on PATH") from None
        held = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT,
                                                                    signal.SIGQUIT)}
        try:
            return child.wait()
        finally:
            for sig, handler in held.items():
                signal.signal(sig, handler)


def add_machine_ssh_command(machine_sub: Any, add_common: AddCommon) -> None:
    """Add ``ssh`` to the ``machine`` group's subparsers ``machine_sub``."""
    p = machine_sub.add_parser(
        "ssh", help="ssh to DEST from this pane; the remote's agent hooks report here",
        description="Run ssh to DEST from inside a cmux pane, forwarding a report-only\n"
        "socket, so agent hooks on the remote report into this pane.", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common(p)
    p.add_argument("destination", metavar="DEST",
                   help="[user@]host, or a Host of your ~/.ssh/config")
    p.add_argument("ssh_args", nargs=argparse.REMAINDER, metavar="SSH_ARG",
                   help="ssh arguments; after --, the remote command")
    p.set_defaults(func=cmd_machine_ssh)
