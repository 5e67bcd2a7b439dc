"""Speaking to a machine's server without the bridge: the remote server's socket forwarded
over the machine's master connection (OpenSSH stream-local forwarding, ``ssh -O forward
-L <local socket>:<remote socket>``), where the machine's sshd allows it.

The forwarded socket is in the link's private 0700 control directory, beside the master's
control socket, and ssh creates it with its ``StreamLocalBindMask`` (0177 unless the user
set another), so only this user reaches it. Each connection to it is one ``direct-
streamlocal`` channel of the master: no new ssh connection, no process on the remote but
the server itself. A sshd that refuses stream-local forwarding (``AllowStreamLocalForwarding
no``, ``DisableForwarding``) accepts the forward request, which only makes the local
listener, but closes each channel at once: a ``ping`` through the socket tells, and the
forward is then cancelled and the link keeps using the bridge.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from pathlib import Path

from cmux_core.fleet.machines import Machine

log = logging.getLogger(__name__)

FORWARD_TIMEOUT_S = 5.0


def forward_argv(machine: Machine, control: Path, op: str, local: Path, remote: str
                 ) -> list[str]:
    """``ssh -O <op> -L local:remote`` for the master at ``control``."""
    return ["ssh", "-S", str(control), "-o", "BatchMode=yes", "-O", op,
            "-L", f"{local}:{remote}", "--", machine.destination]


async def _ssh(argv: list[str]) -> bool:
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL, start_new_session=True)
    except OSError:
        return False
    try:
        return await asyncio.wait_for(proc.wait(), FORWARD_TIMEOUT_S) == 0
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return False


async def open_forward(machine: Machine, control: Path, local: Path, remote: str
                       ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    """Forward ``remote`` (the server's socket on the machine) to ``local`` over the
    master and return a connection to it that answered ``ping``; None when the paths
    cannot be forwarded, ssh refuses, or the far end does not answer (the forward is then
    cancelled and ``local`` removed)."""
    if ":" in str(local) or ":" in remote or not remote.startswith("/"):
        return None
    with contextlib.suppress(FileNotFoundError):
        local.unlink()
    if not await _ssh(forward_argv(machine, control, "forward", local, remote)):
        return None
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_unix_connection(str(local), limit=1 << 24), FORWARD_TIMEOUT_S)
        writer.write(json.dumps({"id": 0, "method": "ping", "params": {}}).encode() + b"\n")
        line = await asyncio.wait_for(reader.readline(), FORWARD_TIMEOUT_S)
        reply = json.loads(line) if line else None
        if isinstance(reply, dict) and reply.get("ok") and reply.get("id") == 0:
            return reader, writer
        writer.close()
    except (OSError, TimeoutError, ValueError) as exc:
        log.debug("machine %s: the forwarded socket did not answer: %s", machine.name, exc)
    await close_forward(machine, control, local, remote)
    return None


async def close_forward(machine: Machine, control: Path, local: Path, remote: str) -> None:
    """Cancel the forward on the master and remove the local socket."""
    await _ssh(forward_argv(machine, control, "cancel", local, remote))
    with contextlib.suppress(FileNotFoundError):
        local.unlink()
