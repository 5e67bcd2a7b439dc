"""The ``pane.*`` methods that talk to a pane's terminal: send text, keys and input, read
the screen, wait for output, list its processes.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pydantic import Field

from cmux_core.api.context import Call, ServerInfo
from cmux_core.api.dispatch import MethodTable, Result, services
from cmux_core.api.methods.shared.reading import (
    STRIP_ANSI,
    OutputMatch,
    ReadLines,
    ReadOptions,
    ReadSource,
    line_matcher,
    next_output,
    read_result,
)
from cmux_core.api.methods.shared.waiting import deadline_of, served
from cmux_core.errors import CmuxError, NotFound, WaitTimeout
from cmux_core.hookspecs import Params
from cmux_core.model.mux import Mux
from cmux_core.model.pane_io import foreground_processes, keys_for, paste_bytes
from cmux_core.model.tree import Surface


@services
class PaneIoServices:
    mux: Mux
    info: ServerInfo


methods = MethodTable()


class SendTextParams(Params):
    pane_id: str
    text: str


def write(surface: Surface, data: bytes) -> None:
    if surface.terminal.exited:
        raise CmuxError("pane_send_failed", "the pane's process has exited")
    surface.terminal.write(data)


@methods.method("pane.send_text", SendTextParams)
async def pane_send_text(call: Call[PaneIoServices], p: SendTextParams) -> Result:
    """Write ``text`` as raw UTF-8: no bracketed paste, no Enter."""
    pane = call.ctx.mux.pane(p.pane_id)
    write(pane.terminal_surface, p.text.encode())
    return {"type": "ok"}


class SendKeysParams(Params):
    pane_id: str
    keys: list[str]


@methods.method("pane.send_keys", SendKeysParams)
async def pane_send_keys(call: Call[PaneIoServices], p: SendKeysParams) -> Result:
    """Send key combos in order; one invalid key rejects the request before any byte."""
    pane = call.ctx.mux.pane(p.pane_id)
    for data in keys_for(pane.terminal_surface, p.keys):
        write(pane.terminal_surface, data)
    return {"type": "ok"}


class SendInputParams(Params):
    pane_id: str
    text: str = ""
    keys: list[str] = []


@methods.method("pane.send_input", SendInputParams)
async def pane_send_input(call: Call[PaneIoServices], p: SendInputParams) -> Result:
    """Paste ``text`` (bracketed when enabled) then send ``keys``, in one write."""
    pane = call.ctx.mux.pane(p.pane_id)
    surface = pane.terminal_surface
    encoded = keys_for(surface, p.keys)
    write(surface, paste_bytes(surface, p.text) + b"".join(encoded))
    return {"type": "ok"}


class ReadParams(ReadOptions):
    pane_id: str


@methods.method("pane.read", ReadParams)
async def pane_read(call: Call[PaneIoServices], p: ReadParams) -> Result:
    """Read the screen, scrollback or detection snapshot as text or ANSI."""
    pane = call.ctx.mux.pane(p.pane_id)
    return {"type": "pane_read", "read": read_result(pane, p.source, p.lines, p.format)}


class WaitForOutputParams(Params):
    pane_id: str
    source: ReadSource = "recent"
    lines: ReadLines = None
    match: OutputMatch
    timeout_ms: int | None = Field(default=None, ge=0)
    strip_ansi: bool = STRIP_ANSI


@methods.method("pane.wait_for_output", WaitForOutputParams)
async def pane_wait_for_output(call: Call[PaneIoServices], p: WaitForOutputParams) -> Result:
    """Hold the request until a line of the pane's output matches, woken by new output."""
    mux = call.ctx.mux
    pane = mux.pane(p.pane_id)
    find_line = line_matcher(p.match)
    source: ReadSource = "recent_unwrapped" if p.source == "recent" else p.source
    deadline = deadline_of(p.timeout_ms)

    async def wait() -> Result:
        burst = 0
        while True:
            if pane.key not in mux.panes:
                raise NotFound("pane", pane.id)
            changed = mux.output_signal(pane)
            read = read_result(pane, source, p.lines, "text")
            try:
                # A search on the loop always finishes; one on a thread is cut off here.
                async with asyncio.timeout(None if deadline is None
                                           else deadline - time.monotonic()):
                    line = await find_line.find(read["text"])
            except TimeoutError:
                raise WaitTimeout(message="timed out waiting for output match") from None
            if line is not None:
                return {"type": "output_matched", "pane_id": pane.id, "revision": 0,
                        "matched_line": line, "read": read}
            checked = time.monotonic()
            remaining = None if deadline is None else deadline - checked
            if remaining is not None and remaining <= 0:
                raise WaitTimeout(message="timed out waiting for output match")
            try:
                burst = await next_output(changed, checked, burst, remaining)
            except TimeoutError:
                raise WaitTimeout(message="timed out waiting for output match") from None

    result: Result = await served(call.ctx.info, call.connection, wait())
    return result


class ProcessInfoParams(Params):
    pane_id: str | None = None


@methods.method("pane.process_info", ProcessInfoParams)
async def pane_process_info(call: Call[PaneIoServices], p: ProcessInfoParams) -> Result:
    """The pane's shell pid and the processes of its terminal's foreground group."""
    pane = call.ctx.mux.pane(p.pane_id)
    term = pane.terminal
    info: dict[str, Any] = {"pane_id": pane.id}
    if not term.exited:
        info["shell_pid"] = term.pid
        pgid = term.foreground_pgid()
        if pgid is not None:
            info["foreground_process_group_id"] = pgid
            info["foreground_processes"] = foreground_processes(pgid)
    return {"type": "pane_process_info", "process_info": info}
