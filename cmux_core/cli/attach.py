"""``cmux attach [PANE|AGENT]``: this terminal shows one pane and types into it.

The terminal is put in raw mode and on its alternate screen; the server sends the pane's
screen in frames (``pane.attach``, see docs/attach.md) and :class:`TerminalRenderer`
writes them out; keys, pastes and mouse reports go to the pane as they were typed
(the modes the program switched on are set on this terminal, so it sends what the program
expects). The detach key (``ctrl+\\`` unless ``--detach-key`` or ``$CMUX_DETACH_KEY``
says otherwise) ends the session and leaves the pane running. On the way out the
terminal gets back its screen, modes, cursor and title: also when the pane or the server
goes away and when SIGTERM, SIGHUP or SIGINT ends the client (exit status 128 plus the
signal's number). Everything is written through
:class:`~cmux_core.cli.outer_terminal.TerminalOutput`, so a terminal that closed or hung up
never blocks or breaks the way out.

With no server at the socket, one is started in the background first (its log goes to
``cmux-serve.log`` beside the socket) and its first pane attached.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import re
import selectors
import shutil
import signal
import socket
import sys
import termios
import tty
from collections.abc import Iterator
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from cmux_core.cli.common import AddCommon, add_subcommand
from cmux_core.cli.kitty import AreaLayers, probe
from cmux_core.cli.outer_terminal import EndSignals, TerminalOutput, signal_status
from cmux_core.client import Client, ensure_server
from cmux_core.config import socket_path
from cmux_core.errors import CmuxError

DETACH_DEFAULT = "ctrl+\\"
INPUT_CHUNK = 64 * 1024
GRAPHICS_REQUEST = "cmux-attach-graphics"
SIZE_REQUEST = "cmux-attach-pane-size"

_CTRL_KEYS = {**{chr(c): c - 0x60 for c in range(ord("a"), ord("z") + 1)},
              "@": 0, "[": 0x1B, "\\": 0x1C, "]": 0x1D, "^": 0x1E, "_": 0x1F}


def detach_sequences(key: str) -> tuple[bytes, ...]:
    """What a terminal sends for the detach ``key`` (``ctrl+<letter>`` or ``ctrl+`` one of
    ``@ [ \\ ] ^ _``): the control byte, and its kitty keyboard protocol form. Raises
    ValueError for any other key."""
    name = key.strip().lower()
    if not name.startswith("ctrl+") or name[5:] not in _CTRL_KEYS:
        raise ValueError(f"invalid detach key {key!r}: use ctrl+<letter> or ctrl+ one of "
                         "@ [ \\ ] ^ _")
    char = name[5:]
    code = ord(char)
    return bytes([_CTRL_KEYS[char]]), f"\x1b[{code};5u".encode()


class TerminalRenderer:
    """Everything this client writes to its terminal goes through here.

    :meth:`open` saves the title and switches to the alternate screen; :meth:`screen`
    writes a frame of terminal bytes the server painted; :meth:`graphics` draws the pane's
    image layers over it, cropped to the part of the pane the terminal shows (its top-left
    corner, as wide and high as both the terminal and the pane) and placed again on
    :meth:`resize` and :meth:`pane_resized`; :meth:`close` deletes the images and restores
    modes, cursor shape and visibility, the main screen and the title.
    """

    OPEN = b"\x1b[22;0t\x1b[?1049h\x1b[H\x1b[2J"
    CLOSE = (b"\x1b[?2026l\x1b[?2004l\x1b[?1l\x1b>\x1b[?1004l\x1b[?1000l\x1b[?1002l"
             b"\x1b[?1003l\x1b[?1006l\x1b[=0;1u\x1b[0 q\x1b[?25h\x1b[?7h\x1b[0m"
             b"\x1b[?1049l\x1b[23;0t")

    def __init__(self, out: TerminalOutput, columns: int, lines: int,
                 pane_size: tuple[int, int] | None = None) -> None:
        self.out = out
        self.is_open = False
        self.kitty: AreaLayers | None = None
        """Draws the pane's graphics layers, when the terminal can (see :func:`start_graphics`)."""
        self.size = (columns, lines)
        self.pane_size = pane_size
        """The pane's columns and lines, when known."""
        self.area = self._shown()
        """The cells showing the pane, its top-left first: layers are cropped to them."""

    def _shown(self) -> tuple[int, int, int, int]:
        columns, lines = self.size
        if self.pane_size is not None:
            columns, lines = min(columns, self.pane_size[0]), min(lines, self.pane_size[1])
        return 0, 0, columns, lines

    def open(self) -> None:
        self.write(self.OPEN)
        self.is_open = True

    def screen(self, data: bytes) -> None:
        self.write(data)
        if self.kitty is not None:
            if b"\x1b[2J" in data:
                self.kitty.erased()
            self.kitty.draw(self.area)

    def graphics(self, header: dict[str, Any], payload: bytes) -> None:
        """Draw a ``graphics`` frame's layer, or remove a ``graphics_clear`` frame's."""
        if self.kitty is not None:
            self.kitty.frame(header, payload)
            self.kitty.draw(self.area)

    def resize(self, columns: int, lines: int) -> None:
        """The terminal has ``columns`` by ``lines`` cells now: layers are placed again,
        cropped to the part of the pane they show."""
        self.size = (columns, lines)
        self.area = self._shown()
        if self.kitty is not None:
            self.kitty.draw(self.area)

    def pane_resized(self, columns: int, lines: int) -> None:
        """The pane has ``columns`` by ``lines`` cells now: layers are placed again."""
        self.pane_size = (columns, lines)
        self.area = self._shown()
        if self.kitty is not None:
            self.kitty.draw(self.area)

    def close(self) -> None:
        if self.is_open:
            self.is_open = False
            if self.kitty is not None:
                self.kitty.forget()
            self.write(self.CLOSE)

    def write(self, data: bytes) -> None:
        self.out.write(data)


class FrameReader:
    """Splits what the server sends into frames (header line plus ``length`` bytes) and
    reply lines."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._header: dict[str, Any] | None = None

    def feed(self, data: bytes) -> Iterator[tuple[dict[str, Any], bytes]]:
        """Yield ``(header, payload)`` for each complete frame or reply line in ``data``
        (plus what was held back from before)."""
        self._buf += data
        while True:
            if self._header is None:
                end = self._buf.find(b"\n")
                if end < 0:
                    return
                line = bytes(self._buf[:end])
                del self._buf[:end + 1]
                if not line.strip():
                    continue
                self._header = json.loads(line)
            header = self._header
            length = int(header.get("length", 0)) if "frame" in header else 0
            if len(self._buf) < length:
                return
            payload = bytes(self._buf[:length])
            del self._buf[:length]
            self._header = None
            yield header, payload


def _input_request(data: bytes) -> bytes:
    try:
        params: dict[str, str] = {"data": data.decode("utf-8")}
    except UnicodeDecodeError:
        params = {"data_base64": base64.b64encode(data).decode()}
    return json.dumps({"method": "attach.input", "params": params},
                      separators=(",", ":")).encode() + b"\n"


def _request(method: str, params: dict[str, Any] | None = None) -> bytes:
    return json.dumps({"method": method, "params": params or {}},
                      separators=(",", ":")).encode() + b"\n"


def terminal_size(fd: int) -> tuple[int, int]:
    try:
        size = os.get_terminal_size(fd)
        return max(2, size.columns), max(1, size.lines)
    except OSError:
        fallback = shutil.get_terminal_size()
        return max(2, fallback.columns), max(1, fallback.lines)


def resolve_target(c: Client, target: str | None) -> tuple[str | None, str | None]:
    """The pane id ``target`` names (a pane or surface handle, or an agent), or None (the
    focused pane), and the handle to attach with: a surface handle is passed on as it is,
    so the pane shows that surface."""
    if target is None:
        return None, None
    try:
        return str(c.call("pane.get", {"pane_id": target})["pane"]["pane_id"]), target
    except CmuxError as exc:
        if exc.code != "pane_not_found":
            raise
    pane_id = str(c.call("agent.get", {"target": target})["agent"]["pane_id"])
    return pane_id, pane_id


@contextlib.contextmanager
def raw_terminal(fd: int) -> Iterator[None]:
    """``fd`` in raw mode (no echo, no signals from keys) until the block ends; a terminal
    that is gone by then is left as it is."""
    saved = termios.tcgetattr(fd)
    try:
        tty.setraw(fd, termios.TCSANOW)
        yield
    finally:
        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(fd, termios.TCSAFLUSH, saved)


@dataclass(eq=False)
class AttachClient:
    """One attach session from this terminal: call :meth:`run`, then :meth:`close`.

    The session ends (:attr:`reason`) on the server's ``end`` frame, the detach key, the
    server going away (``server_closed``), the terminal closing (``input_closed`` when
    reading from it fails, ``terminal_closed`` when writing does), or a signal in
    :attr:`signals` (its name).
    """

    sock: socket.socket
    pending: bytes
    renderer: TerminalRenderer
    in_fd: int
    _: KW_ONLY
    detach: tuple[bytes, ...]
    read_only: bool
    pane_id: str | None = None
    frames: FrameReader = field(init=False, default_factory=FrameReader)
    reason: str | None = field(init=False, default=None)
    error: str | None = field(init=False, default=None)
    signals: EndSignals = field(init=False)
    """Install (``with``) around everything done in raw mode."""
    _detach_re: re.Pattern[bytes] = field(init=False)
    _wake_r: int = field(init=False)
    _wake_w: int = field(init=False)

    def __post_init__(self) -> None:
        self.signals = EndSignals(self.renderer.out, self._wake)
        self._detach_re = re.compile(b"|".join(re.escape(s) for s in self.detach))
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)

    def _wake(self, _sig: int = 0) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"\0")

    def close(self) -> None:
        os.close(self._wake_r)
        os.close(self._wake_w)

    def run(self) -> str:
        """Pass frames and keys until the session ends; returns the end reason."""
        sel = selectors.DefaultSelector()
        resized = [False]

        def on_winch(_sig: int, _frame: object) -> None:
            resized[0] = True
            self._wake()

        previous = signal.signal(signal.SIGWINCH, on_winch)
        try:
            sel.register(self.sock, selectors.EVENT_READ, "server")
            sel.register(self.in_fd, selectors.EVENT_READ, "keys")
            sel.register(self._wake_r, selectors.EVENT_READ, "wake")
            self._from_server(self.pending)
            while self.reason is None:
                if self.signals.received is not None:
                    self.reason = signal.Signals(self.signals.received).name
                    break
                for key, _ in sel.select():
                    if key.data == "server":
                        try:
                            data = self.sock.recv(1 << 16)
                        except OSError:
                            data = b""
                        if not data:
                            self.reason = self.reason or "server_closed"
                            break
                        self._from_server(data)
                    elif key.data == "keys":
                        try:
                            self._keys(os.read(self.in_fd, 1 << 16))
                        except OSError:
                            self._keys(b"")
                    else:
                        os.read(self._wake_r, 512)
                        if resized[0] and self.signals.received is None:
                            resized[0] = False
                            columns, lines = terminal_size(self.in_fd)
                            self.renderer.resize(columns, lines)
                            self._send(_request("attach.resize", {
                                "columns": columns, "lines": lines}))
                    if self.renderer.out.gone:
                        self.reason = self.reason or "terminal_closed"
                    if self.reason is not None or self.signals.received is not None:
                        break
        finally:
            signal.signal(signal.SIGWINCH, previous)
            sel.close()
        return self.reason or "server_closed"

    def _send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError:
            self.reason = self.reason or "server_closed"

    def _from_server(self, data: bytes) -> None:
        for header, payload in self.frames.feed(data):
            kind = header.get("frame")
            if kind == "screen":
                self.renderer.screen(payload)
                if b"\x1b[2J" in payload and self.renderer.kitty is not None and self.pane_id:
                    # A whole new screen: the pane may have a new size, which crops layers.
                    self._send(json.dumps({"id": SIZE_REQUEST, "method": "pane.get",
                                           "params": {"pane_id": self.pane_id}}).encode()
                               + b"\n")
            elif kind == "end":
                self.reason = str(header.get("reason", "ended"))
            elif kind in ("graphics", "graphics_clear"):
                self.renderer.graphics(header, payload)
            elif header.get("id") == GRAPHICS_REQUEST:
                pass  # graphics off on the server: the pane is shown without them
            elif header.get("id") == SIZE_REQUEST:
                pane = (header.get("result") or {}).get("pane") or {}
                if "columns" in pane and "rows" in pane:
                    self.renderer.pane_resized(int(pane["columns"]), int(pane["rows"]))
            elif header.get("ok") is False:
                err = header.get("error") or {}
                self.error = f"{err.get('code')}: {err.get('message')}"

    def _keys(self, data: bytes) -> None:
        if not data:
            self.reason = "input_closed"
            return
        found = self._detach_re.search(data)
        before = data if found is None else data[:found.start()]
        if before and not self.read_only:
            for i in range(0, len(before), INPUT_CHUNK):
                self._send(_input_request(before[i:i + INPUT_CHUNK]))
        if found is not None:
            self._send(_request("attach.detach"))


def start_graphics(sock: socket.socket, renderer: TerminalRenderer, in_fd: int,
                   out_fd: int) -> bytes:
    """When the terminal answers the kitty graphics query and its cell size is known, ask
    the server for the pane's graphics layers (``attach.graphics``, with ``file_frames``
    when the terminal also loaded the query image from a file) and draw them; returns bytes
    typed during the query, for the pane."""
    found = probe(in_fd, out_fd)
    if found.graphics and found.cell is not None:
        renderer.kitty = AreaLayers(renderer.write, found.cell, one_step=True)
        sock.sendall(json.dumps({"id": GRAPHICS_REQUEST, "method": "attach.graphics", "params": {
            "cell_width_px": found.cell[0], "cell_height_px": found.cell[1],
            "file_frames": found.files}}).encode() + b"\n")
    return found.typed


def cmd_attach(args: argparse.Namespace) -> int:
    in_fd = sys.stdin.fileno()
    if not os.isatty(in_fd) or not os.isatty(sys.stdout.fileno()):
        raise CmuxError("not_a_terminal", "cmux attach needs a terminal on stdin and stdout")
    key = args.detach_key or os.environ.get("CMUX_DETACH_KEY") or DETACH_DEFAULT
    try:
        detach = detach_sequences(key)
    except ValueError as exc:
        raise CmuxError("invalid_params", str(exc)) from None
    path = socket_path(args.socket, args.session)
    ensure_server(path)
    columns, lines = terminal_size(in_fd)
    # A machine-qualified target (box/w1:p2) attaches through that machine's relay.
    machine, sep, rest = (args.target or "").partition("/")
    target = rest if sep else args.target
    with Client(path, timeout=30, machine=machine if sep else None) as c:
        pane_id, handle = resolve_target(c, target)
        own = os.environ.get("CMUX_PANE_ID")
        if own and pane_id == own and os.environ.get("CMUX_SOCKET_PATH") == str(path) \
                and c.machine is None:
            raise CmuxError("invalid_params", "target: cannot attach a pane to itself")
        attached = c.call("pane.attach", {
            "pane_id": handle, "columns": columns, "lines": lines,
            "read_only": args.read_only, "resize": not args.no_resize})
        sock, pending = c.take_connection()
    out = TerminalOutput(sys.stdout.fileno())
    renderer = TerminalRenderer(out, columns, lines,
                                (int(attached["columns"]), int(attached["lines"])))
    session = AttachClient(sock, pending, renderer, in_fd, detach=detach,
                           read_only=args.read_only, pane_id=str(attached["pane_id"]))
    try:
        with session.signals, raw_terminal(in_fd):
            typed = start_graphics(sock, renderer, in_fd, sys.stdout.fileno())
            renderer.open()
            try:
                if typed:
                    session._keys(typed)
                reason = session.run()
            finally:
                renderer.close()
    finally:
        sock.close()
        session.close()
    if not (out.gone or out.hung_up):
        messages = {"detached": "detached", "pane_exited": "the pane's process exited",
                    "SIGTERM": "terminated", "SIGHUP": "the terminal went away",
                    "SIGINT": "interrupted", "pane_closed": "the pane was closed",
                    "server_closed": "the server went away", "input_closed": "input ended"}
        with contextlib.suppress(OSError):
            print(f"[{messages.get(reason, reason)}]", file=sys.stderr, flush=True)
            if session.error:
                print(session.error, file=sys.stderr, flush=True)
    if session.signals.received is not None:
        return signal_status(session.signals.received)
    return 0 if reason == "detached" else 1


def add_attach_command(sub: Any, add_common: AddCommon) -> None:
    p = add_subcommand(
        sub, "attach", add_common, cmd_attach,
        help="show a pane in this terminal and type into it",
        description="Show a pane (default: the focused one) in this terminal: its screen, "
        "then live output; keys, pastes and mouse go to it. The detach key (default "
        "ctrl+\\) leaves it running. Starts a server first when none is running.")
    p.add_argument("target", nargs="?", metavar="PANE|AGENT",
                   help="pane or surface id, ref or UUID, or an agent target, NAME/... for "
                   "one on a saved machine (default: focused pane)")
    p.add_argument("--read-only", action="store_true",
                   help="watch only: keys other than the detach key are not sent")
    p.add_argument("--no-resize", action="store_true",
                   help="never resize the pane to this terminal")
    p.add_argument("--detach-key", metavar="KEY",
                   help="key that detaches, ctrl+<letter> or ctrl+ one of @ [ \\ ] ^ _ "
                   "(default: $CMUX_DETACH_KEY, else ctrl+\\)")
