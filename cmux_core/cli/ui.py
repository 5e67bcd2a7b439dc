"""``cmux ui``: the agents sidebar beside a live pane, in one terminal.

Drawn with prompt_toolkit, imported when the command runs (it would slow every other
command's start). The sidebar is the agent list of ``agent.list {view}``: the view of the
client ``--client`` names (default ``sidebar``, the one ``cmux agents`` follows), or one
this ui sets on its own connection with ``--view``; either way plugin sorts and filters
apply. It is fetched again when the server reports a change. The pane area shows one pane
through its own ``pane.attach`` connection with ``frames: "rows"``: the server sends
changed rows as styled text, and the pane takes the area's size while no other client
typed into it more recently.

Keys: ``j``/``k`` or arrows move between agents (the pane area follows), ``tab`` and
``shift-tab`` step through every pane, ``b`` jumps to the next blocked agent, ``i`` types
into the shown pane beside the sidebar (every key goes to it until ctrl+\\), Enter
attaches to the shown pane full-screen (``cmux attach``; its detach key comes back here),
``f`` focuses the shown pane on the server, ``q`` or Ctrl-C quits (every pane keeps
running). While keys go to the pane, the terminal is switched to the cursor-key, keypad
and mouse modes the pane's program set (a rows frame's ``modes``), so it sends what the
program expects; mouse reports are moved into the pane's cells.

When the terminal answers the kitty graphics query (:func:`graphics_cell`), the shown
pane's graphics layers are drawn over the pane area (``kitty.AreaLayers``), written after
each screen prompt_toolkit draws.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import subprocess
import sys
import termios
import time
import tty
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from cmux_core.cli import kitty
from cmux_core.cli.common import AddCommon
from cmux_core.client import AsyncClient, Client
from cmux_core.config import socket_path
from cmux_core.errors import CmuxError

if TYPE_CHECKING:
    from prompt_toolkit.application import Application
    from prompt_toolkit.formatted_text import StyleAndTextTuples
    from prompt_toolkit.key_binding import KeyBindings
    from prompt_toolkit.key_binding.key_bindings import KeyBindingsBase
    from prompt_toolkit.layout import Layout

Row = Mapping[str, Any]

DEFAULT_CLIENT = "sidebar"
SIDEBAR_WIDTH = 36
FRAGMENT_CACHE_ROWS = 4096
"""Styled rows whose parsed fragments are kept (a row that did not change is not parsed
again)."""
MIN_REDRAW_S = 1 / 60
"""Least time between two redraws: a burst of changes is drawn as one screen."""
SPIN_SECONDS = 0.1
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
WATCH_EVENTS = (
    "pane.agent_status_changed", "pane.agent_detected", "pane.updated", "pane.created",
    "pane.closed", "pane.exited", "pane.focused", "pane.moved", "tab.created", "tab.closed",
    "tab.renamed", "tab.moved", "tab.focused", "workspace.created", "workspace.closed",
    "workspace.renamed", "workspace.moved", "workspace.focused", "plugin.loaded",
    "plugin.unloaded", "agent.view_changed",
)
"""What makes the sidebar fetch the list again."""
STATUS_ORDER = ("blocked", "done", "working", "idle", "unknown")
GLYPH = {"blocked": "●", "done": "✔", "idle": "○", "unknown": "·"}
STATUS_STYLE = {"blocked": "fg:ansired bold", "done": "fg:ansigreen",
                "working": "fg:ansiyellow", "idle": "fg:ansibrightblack",
                "unknown": "fg:ansibrightblack"}
SELECTED = "bg:#303030"


def age(seconds: float) -> str:
    """A compact duration: ``5s``, ``2m05s``, ``1h02m``, ``3d04h``."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def _fit(text: str, width: int) -> str:
    return text[:width] if len(text) > width else text + " " * (width - len(text))


def sidebar_lines(rows: list[Row], width: int, *, now: float, frame: int,
                  selected: str | None) -> StyleAndTextTuples:
    """One line per agent: status glyph, name (else pane id), agent, time in state; the
    selected one highlighted."""
    out: StyleAndTextTuples = [("bold", _fit(f" agents ({len(rows)})", width)), ("", "\n")]
    name_width = max(4, width - 20)
    for row in rows:
        status = str(row.get("agent_status", "unknown"))
        glyph = SPINNER[frame % len(SPINNER)] if status == "working" else GLYPH.get(status, "·")
        since = row.get("status_changed_at")
        shown = age(now - since) if isinstance(since, int | float) else ""
        back = SELECTED if row.get("pane_id") == selected else ""
        name = str(row.get("name") or row.get("pane_id", ""))
        agent = str(row.get("display_agent") or row.get("agent") or "")
        out += [(back, " "), (f"{back} {STATUS_STYLE.get(status, '')}", glyph),
                (back, " " + _fit(name, name_width) + " "),
                (f"{back} fg:ansibrightblack", _fit(agent, 10)),
                (back, f"{shown:>6} "), ("", "\n")]
    if not rows:
        out.append(("fg:ansibrightblack", " no agents in this view yet"))
    return out


def counts(rows: list[Row]) -> str:
    """Agents per status, most urgent first: ``● 1 blocked  ○ 2 idle``."""
    per: dict[str, int] = {}
    for row in rows:
        status = str(row.get("agent_status", "unknown"))
        per[status] = per.get(status, 0) + 1
    return "  ".join(f"{GLYPH.get(s, '*')} {per[s]} {s}" for s in STATUS_ORDER if per.get(s))


class Fragments:
    """Styled rows as prompt_toolkit fragments, one fragment per run of one style.

    Parsing SGR gives a fragment per character, which prompt_toolkit then splits and
    measures one by one; merged runs and a cache by row text keep a redraw cheap.
    """

    def __init__(self) -> None:
        self._cache: dict[str, StyleAndTextTuples] = {}

    def row(self, text: str) -> StyleAndTextTuples:
        hit = self._cache.get(text)
        if hit is None:
            from prompt_toolkit.formatted_text import ANSI  # see the module docstring

            hit = []
            for fragment in ANSI(text).__pt_formatted_text__():
                style, chars = fragment[0], fragment[1]
                if hit and hit[-1][0] == style:
                    hit[-1] = (style, hit[-1][1] + chars)
                else:
                    hit.append((style, chars))
            if len(self._cache) >= FRAGMENT_CACHE_ROWS:
                self._cache.clear()
            self._cache[text] = hit
        return hit

    def rows(self, texts: list[str]) -> StyleAndTextTuples:
        out: StyleAndTextTuples = []
        for i, text in enumerate(texts):
            if i:
                out.append(("", "\n"))
            out.extend(self.row(text))
        return out


_SGR_MOUSE = re.compile(r"\x1b\[<(\d+);(\d+);(\d+)([Mm])")


def outer_modes(modes: Mapping[str, Any]) -> tuple[bool, bool, int]:
    """What the ui's terminal is switched to while keys go to a pane whose program set
    ``modes``: application cursor keys, application keypad, mouse tracking (0: off)."""
    return (bool(modes.get("app_cursor")), bool(modes.get("app_keypad")),
            int(modes.get("mouse_tracking") or 0))


def switch_modes(new: tuple[bool, bool, int], old: tuple[bool, bool, int]) -> bytes:
    """Sequences that take a terminal from ``old`` to ``new`` (see :func:`outer_modes`).
    Mouse reports are asked for in SGR form, whatever the program wants: the ui moves them
    into the pane's coordinates and encodes them again (:func:`mouse_for_pane`)."""
    out = b""
    if new[0] != old[0]:
        out += b"\x1b[?1h" if new[0] else b"\x1b[?1l"
    if new[1] != old[1]:
        out += b"\x1b=" if new[1] else b"\x1b>"
    if new[2] != old[2]:
        if old[2]:
            out += f"\x1b[?{old[2]}l\x1b[?1006l".encode()
        if new[2]:
            out += f"\x1b[?{new[2]}h\x1b[?1006h".encode()
    return out


def mouse_for_pane(report: str, area: tuple[int, int, int, int],
                   modes: Mapping[str, Any]) -> str | None:
    """The mouse ``report`` the terminal sent (SGR or X10 form, screen cells) as the pane's
    program expects it: in the pane area's cells, SGR or X10 as it asked; None when it
    happened outside the area or cannot be encoded."""
    found = _SGR_MOUSE.fullmatch(report)
    if found is not None:
        button, x, y = int(found[1]), int(found[2]), int(found[3])
        release = found[4] == "m"
    elif report.startswith("\x1b[M") and len(report) == 6:
        button, x, y = (ord(c) - 32 for c in report[3:])
        release = button & 3 == 3 and not button & 64
    else:
        return None
    left, top, width, height = area
    x, y = x - left, y - top
    if not (1 <= x <= width and 1 <= y <= height):
        return None
    if modes.get("mouse_sgr"):
        return f"\x1b[<{button};{x};{y}{'m' if release else 'M'}"
    if release:
        button = button & ~3 | 3
    if max(button, x, y) > 223:
        return None
    return "\x1b[M" + "".join(chr(32 + n) for n in (button, x, y))


class PanePreview:
    """One pane's rows, kept current through a ``pane.attach`` connection (rows frames).

    :meth:`show` switches to another pane (closing the previous connection);
    ``on_change`` is called on the loop after every frame. With ``graphics`` (the terminal
    draws kitty images), the connection also asks for the pane's graphics layers
    (``attach.graphics`` with the terminal's cell size) and gives their frames to it.
    """

    def __init__(self, path: str, on_change: Callable[[], None],
                 graphics: kitty.AreaLayers | None = None) -> None:
        self.path = path
        self.on_change = on_change
        self.graphics = graphics
        self.pane_id: str | None = None
        self.rows: list[str] = []
        self.title: str | None = None
        self.bracketed_paste = False
        self.modes: dict[str, Any] = {}
        """The input modes the pane's program set (a rows frame's ``modes``)."""
        self.ended: str | None = None
        self.size = (0, 0)
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None

    async def show(self, pane_id: str | None, columns: int, lines: int) -> None:
        if pane_id == self.pane_id and self._task is not None and not self._task.done():
            await self.resize(columns, lines)
            return
        await self.close()
        self.pane_id, self.rows, self.title, self.ended = pane_id, [], None, None
        self.modes = {}
        self.size = (columns, lines)
        if self.graphics is not None:
            self.graphics.reset()
        if pane_id is None:
            return
        client = Client(self.path, timeout=10)
        try:
            client.call("pane.attach", {"pane_id": pane_id, "columns": columns,
                                        "lines": lines, "frames": "rows"})
        except CmuxError as exc:
            client.close()
            self.ended = exc.message
            self.on_change()
            return
        sock, pending = client.take_connection()
        reader, writer = await asyncio.open_unix_connection(sock=sock, limit=1 << 24)
        self._writer = writer
        if self.graphics is not None:
            cell_w, cell_h = self.graphics.cell
            writer.write(json.dumps({"id": "ui-graphics", "method": "attach.graphics",
                                     "params": {"cell_width_px": cell_w,
                                                "cell_height_px": cell_h}}).encode() + b"\n")
        self._task = asyncio.create_task(self._follow(reader, pending))

    async def resize(self, columns: int, lines: int) -> None:
        if (columns, lines) == self.size or self._writer is None:
            return
        self.size = (columns, lines)
        self._writer.write(json.dumps({"method": "attach.resize", "params": {
            "columns": columns, "lines": lines}}).encode() + b"\n")
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.drain()

    async def type(self, data: str) -> None:
        """Write ``data`` to the pane as typed (``attach.input``)."""
        if self._writer is None or not data:
            return
        self._writer.write(json.dumps({"method": "attach.input", "params": {
            "data": data}}).encode() + b"\n")
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.drain()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    async def _follow(self, reader: asyncio.StreamReader, pending: bytes) -> None:
        # Frames: a header line, then ``length`` bytes when it says so. What came with the
        # reply (``pending``) is read before the connection.
        buf = bytearray(pending)

        async def more() -> bool:
            chunk = await reader.read(1 << 16)
            buf.extend(chunk)
            return bool(chunk)

        try:
            while self.ended is None:
                while (end := buf.find(b"\n")) < 0:
                    if not await more():
                        self.ended = "the server closed the connection"
                        return
                line = bytes(buf[:end])
                del buf[:end + 1]
                if not line.strip():
                    continue
                header = json.loads(line)
                length = int(header.get("length", 0)) if "frame" in header else 0
                while len(buf) < length:
                    if not await more():
                        self.ended = "the server closed the connection"
                        return
                payload = bytes(buf[:length])
                del buf[:length]
                self._apply(header, payload)
        finally:
            self.on_change()

    def _apply(self, header: dict[str, Any], payload: bytes) -> None:
        kind = header.get("frame")
        if kind == "rows":
            lines = int(header["lines"])
            if header.get("whole") or len(self.rows) != lines:
                self.rows = [""] * lines
            for index, text in header["rows"]:
                self.rows[index] = text
            self.title = header.get("title")
            self.bracketed_paste = bool(header.get("bracketed_paste"))
            self.modes = dict(header.get("modes") or {})
            self.on_change()
        elif kind in ("graphics", "graphics_clear"):
            if self.graphics is not None:
                self.graphics.frame(header, payload)
                self.on_change()
        elif kind == "end":
            self.ended = str(header.get("reason"))


class Ui:
    """The ``cmux ui`` application: one request connection, one event stream, one
    preview connection, one prompt_toolkit application."""

    def __init__(self, path: str, view: bool | str, params: dict[str, Any] | None, *,
                 sidebar_width: int = SIDEBAR_WIDTH,
                 cell: tuple[int, int] | None = None) -> None:
        """``cell``: the terminal's cell size in pixels when it draws kitty graphics (the
        shown pane's layers are then drawn over it); None: no graphics."""
        from prompt_toolkit.application import Application  # see the module docstring

        self.path = path
        self.view = view
        self.params = params
        self.sidebar_width = sidebar_width
        self.rows: list[Row] = []
        self.rows_version = 0
        self.selected: str | None = None
        self.shown: str | None = None
        self.notice = ""
        self.stale = asyncio.Event()
        self.requests = AsyncClient(path)
        self.graphics = None if cell is None else kitty.AreaLayers(self._write, cell)
        self.preview = PanePreview(path, self._preview_changed, self.graphics)
        self.app: Application[int] = Application(
            layout=self._layout(), key_bindings=self._keys(), full_screen=True,
            mouse_support=False, refresh_interval=None, min_redraw_interval=MIN_REDRAW_S,
            after_render=self._after_render)
        self._outer = outer_modes({})
        """The modes this ui switched its terminal to for the pane it types into."""
        self._typed: list[str] = []
        self._sidebar_key: tuple[object, ...] = ()
        self._sidebar_lines: StyleAndTextTuples = []
        self.fragments = Fragments()
        self.typing = False
        """Keys go to the shown pane (``i``) instead of the sidebar, until ctrl+\\."""

    # -- layout ------------------------------------------------------------------------

    def _layout(self) -> Layout:
        from prompt_toolkit.layout import HSplit, Layout, VSplit, Window
        from prompt_toolkit.layout.controls import FormattedTextControl
        from prompt_toolkit.layout.dimension import Dimension

        # Sizes are given, so laying out never measures the text.
        fill = Dimension(min=1, preferred=10_000)
        sidebar = Window(FormattedTextControl(self._sidebar_text), width=Dimension.exact(
            self.sidebar_width), height=fill, wrap_lines=False)
        self._pane_window = Window(FormattedTextControl(self._pane_text), height=fill,
                                   width=fill, wrap_lines=False)
        pane = HSplit([
            Window(FormattedTextControl(self._pane_heading), height=1, width=fill,
                   style="reverse"),
            self._pane_window,
        ])
        return Layout(HSplit([
            VSplit([sidebar, Window(width=1, char="│", style="fg:#666666"), pane]),
            Window(FormattedTextControl(self._footer), height=1, style="reverse"),
        ]))

    def _pane_area(self) -> tuple[int, int]:
        size = self.app.output.get_size()
        return max(2, size.columns - self.sidebar_width - 1), max(1, size.rows - 2)

    def _sidebar_text(self) -> StyleAndTextTuples:
        now = time.time()
        frame = int(now / SPIN_SECONDS)
        # The list only changes with the board, the selection, the second and the spinner.
        key = (self.rows_version, self.selected, int(now), frame)
        if key != self._sidebar_key:
            self._sidebar_key = key
            self._sidebar_lines = sidebar_lines(self.rows, self.sidebar_width, now=now,
                                                frame=frame, selected=self.selected)
        return self._sidebar_lines

    def _pane_heading(self) -> StyleAndTextTuples:
        pane = self.shown or "no pane"
        title = f" {self.preview.title}" if self.preview.title else ""
        ended = f" [{self.preview.ended}]" if self.preview.ended else ""
        return [("", f" {pane}{title}{ended}")]

    def _pane_text(self) -> StyleAndTextTuples:
        columns, lines = self._pane_area()
        if self.preview.size != (columns, lines) and self.shown is not None:
            asyncio.get_running_loop().create_task(self.preview.resize(columns, lines))
        return self.fragments.rows(self.preview.rows[:lines])

    def _footer(self) -> StyleAndTextTuples:
        if self.typing:
            return [("bold", f" typing into {self.shown}: ctrl+\\ returns to the sidebar")]
        keys = self.notice or ("j/k agents · tab panes · b next blocked · i type · "
                               "enter attach · f focus · q quit")
        return [("", f" {counts(self.rows)}   {keys}")]

    def _preview_changed(self) -> None:
        if self.preview.ended == "pane_closed":
            self.stale.set()
        if self.typing:
            self._sync_modes()
        self.app.invalidate()

    def _area(self) -> tuple[int, int, int, int] | None:
        """Where the pane is on the screen as last drawn (column, row, width, height: the
        pane area, down to the pane's own size), or None."""
        screen = self.app.renderer.last_rendered_screen
        at = None if screen is None else screen.visible_windows_to_write_positions.get(
            self._pane_window)
        if at is None:
            return None
        columns, lines = self.preview.size
        if self.preview.rows:
            lines = min(lines, len(self.preview.rows))
        return at.xpos, at.ypos, min(at.width, columns), min(at.height, lines)

    def _after_render(self, _app: object) -> None:
        if self.graphics is not None:
            self.graphics.draw(self._area() if self.preview.ended is None else None)

    def _write(self, data: bytes) -> None:
        """Write ``data`` to the terminal beside prompt_toolkit's own output (the
        sequences keep the cursor where it was)."""
        output = self.app.output
        output.write_raw(data.decode("latin-1"))
        output.flush()

    def _sync_modes(self) -> None:
        """Switch the terminal to the modes of the pane's program while keys go to it, and
        back when they do not, so arrows, keypad and mouse send what the program expects."""
        wanted = outer_modes(self.preview.modes if self.typing else {})
        if wanted != self._outer:
            self._write(switch_modes(wanted, self._outer))
            self._outer = wanted

    def _type(self, data: str) -> None:
        """Send ``data`` to the shown pane with the other keys of the same read: a
        sequence prompt_toolkit splits into keys (an unknown one like keypad ``ESC O p``)
        reaches the program in one piece."""
        if not self._typed:
            asyncio.get_running_loop().call_soon(self._send_typed)
        self._typed.append(data)

    def _send_typed(self) -> None:
        data, self._typed = "".join(self._typed), []
        self.app.create_background_task(self.preview.type(data))

    def _leave(self, code: int) -> None:
        """End the ui: its images deleted and the terminal's modes back first."""
        self.typing = False
        self._sync_modes()
        if self.graphics is not None:
            self.graphics.forget()
        self.app.exit(result=code)

    # -- keys --------------------------------------------------------------------------

    def _keys(self) -> KeyBindingsBase:
        """Keys for the pane while typing into it; the sidebar's keys otherwise."""
        from prompt_toolkit.filters import Condition
        from prompt_toolkit.key_binding import (
            ConditionalKeyBindings,
            KeyBindings,
            KeyPressEvent,
            merge_key_bindings,
        )
        from prompt_toolkit.keys import Keys

        typing = Condition(lambda: self.typing)
        kb = KeyBindings()

        @kb.add("c-\\", filter=typing)
        def _stop_typing(event: KeyPressEvent) -> None:
            self.typing = False
            self._sync_modes()
            self.app.invalidate()

        @kb.add(Keys.Vt100MouseEvent, filter=typing)
        def _mouse(event: KeyPressEvent) -> None:
            area = self._area()
            report = None if area is None else mouse_for_pane(
                event.data, area, self.preview.modes)
            if report is not None:
                self._type(report)

        @kb.add(Keys.BracketedPaste, filter=typing)
        def _paste(event: KeyPressEvent) -> None:
            data = event.data
            if self.preview.bracketed_paste:
                data = f"\x1b[200~{data}\x1b[201~"
            self._type(data)

        @kb.add(Keys.Any, filter=typing)
        def _key(event: KeyPressEvent) -> None:
            self._type("".join(press.data for press in event.key_sequence))

        return merge_key_bindings([kb, ConditionalKeyBindings(self._sidebar_keys(), ~typing)])

    def _sidebar_keys(self) -> KeyBindings:
        from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

        sidebar = KeyBindings()

        @sidebar.add("i")
        def _start_typing(event: KeyPressEvent) -> None:
            if self.shown is not None and self.preview.ended is None:
                self.typing = True
                self._sync_modes()
                self.app.invalidate()

        @sidebar.add("q")
        @sidebar.add("c-c")
        def _quit(event: KeyPressEvent) -> None:
            self._leave(0)

        @sidebar.add("j")
        @sidebar.add("down")
        def _down(event: KeyPressEvent) -> None:
            self._move(1)

        @sidebar.add("k")
        @sidebar.add("up")
        def _up(event: KeyPressEvent) -> None:
            self._move(-1)

        @sidebar.add("b")
        def _blocked(event: KeyPressEvent) -> None:
            self._next_blocked()

        @sidebar.add("tab")
        def _next_pane(event: KeyPressEvent) -> None:
            event.app.create_background_task(self._step_pane(1))

        @sidebar.add("s-tab")
        def _previous_pane(event: KeyPressEvent) -> None:
            event.app.create_background_task(self._step_pane(-1))

        @sidebar.add("enter")
        def _attach(event: KeyPressEvent) -> None:
            event.app.create_background_task(self._attach())

        @sidebar.add("f")
        def _focus(event: KeyPressEvent) -> None:
            event.app.create_background_task(self._focus())

        return sidebar

    def _ids(self) -> list[str]:
        return [str(r.get("pane_id")) for r in self.rows]

    def _select(self, pane_id: str | None) -> None:
        self.selected = pane_id
        self._show(pane_id)

    def _show(self, pane_id: str | None) -> None:
        self.shown = pane_id
        columns, lines = self._pane_area()
        self.app.create_background_task(self.preview.show(pane_id, columns, lines))
        self.app.invalidate()

    def _move(self, step: int) -> None:
        ids = self._ids()
        if not ids:
            return
        index = ids.index(self.selected) if self.selected in ids else -1 if step > 0 else 0
        self._select(ids[max(0, min(len(ids) - 1, index + step))])

    def _next_blocked(self) -> None:
        ids = self._ids()
        blocked = [str(r.get("pane_id")) for r in self.rows
                   if r.get("agent_status") == "blocked"]
        if not blocked:
            self.notice = "no blocked agent"
            self.app.invalidate()
            return
        start = ids.index(self.selected) if self.selected in ids else -1
        after = [p for p in blocked if ids.index(p) > start]
        self.notice = ""
        self._select((after or blocked)[0])

    async def _step_pane(self, step: int) -> None:
        try:
            panes = [str(p["pane_id"]) for p in
                     (await self.requests.call("pane.list"))["panes"]]
        except CmuxError as exc:
            self.notice = exc.message
            return
        if not panes:
            return
        index = panes.index(self.shown) if self.shown in panes else -1
        self._show(panes[(index + step) % len(panes)])

    async def _attach(self) -> None:
        from prompt_toolkit.application import run_in_terminal

        if self.shown is None:
            return
        argv = [sys.executable, "-m", "cmux_core", "attach", self.shown, "--socket", self.path]
        if self.graphics is not None:
            self.graphics.forget()  # drawn again after the next screen
        await run_in_terminal(lambda: subprocess.call(argv), in_executor=True)
        self.stale.set()

    async def _focus(self) -> None:
        if self.shown is None:
            return
        try:
            await self.requests.call("pane.focus", {"pane_id": self.shown})
        except CmuxError as exc:
            self.notice = exc.message
        self.stale.set()

    # -- data --------------------------------------------------------------------------

    async def run(self) -> int:
        await self.requests.connect()
        if self.params is not None:
            await self.requests.call("agent.view.set", self.params)
        tasks = [asyncio.create_task(self._follow_events()),
                 asyncio.create_task(self._refresh()), asyncio.create_task(self._tick())]
        try:
            return await self.app.run_async()
        finally:
            for task in tasks:
                task.cancel()
            await self.preview.close()
            await self.requests.close()

    async def _refresh(self) -> None:
        self.stale.set()
        while True:
            await self.stale.wait()
            self.stale.clear()
            try:
                listed = await self.requests.call("agent.list", {"view": self.view})
                self.rows = list(listed.get("agents", []))
                self.rows_version += 1
            except (ConnectionError, OSError, TimeoutError):
                self._gone()
                return
            except CmuxError as exc:
                self.notice = f"{exc.code}: {exc.message}"
            ids = self._ids()
            if self.selected not in ids:
                self.selected = ids[0] if ids else None
            # A shown pane that was closed gives way to the selected agent (or the focus).
            if self.shown is None or self.preview.ended == "pane_closed":
                self._show(self.selected or await self._focused_pane())
            self.app.invalidate()

    async def _tick(self) -> None:
        """Redraw for the clock alone: the working spinner, and the time in state."""
        while True:
            working = any(r.get("agent_status") == "working" for r in self.rows)
            await asyncio.sleep(SPIN_SECONDS if working else 1.0 - time.time() % 1.0)
            self.app.invalidate()

    async def _focused_pane(self) -> str | None:
        try:
            return str((await self.requests.call("pane.current"))["pane"]["pane_id"])
        except CmuxError:
            return None

    async def _follow_events(self) -> None:
        events = AsyncClient(self.path, timeout=None)
        try:
            async for _event in events.events(list(WATCH_EVENTS)):
                self.stale.set()
        except (ConnectionError, OSError):
            self._gone()
        finally:
            await events.close()

    def _gone(self) -> None:
        self.notice = "the cmux server went away"
        if self.app.is_running:
            self._leave(1)


def graphics_cell(in_fd: int, out_fd: int) -> tuple[int, int] | None:
    """The terminal's cell size in pixels when it answers the kitty graphics query (asked
    as ``cmux attach`` asks it) and the size is known; else None: no graphics. Keys typed
    during the query are dropped."""
    saved = termios.tcgetattr(in_fd)
    try:
        tty.setraw(in_fd, termios.TCSANOW)
        found = kitty.probe(in_fd, out_fd)
    finally:
        termios.tcsetattr(in_fd, termios.TCSAFLUSH, saved)
    return found.cell if found.graphics else None


def cmd_ui(args: argparse.Namespace) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise CmuxError("not_a_terminal", "cmux ui needs a terminal on stdin and stdout")
    params: dict[str, Any] | None = None
    if args.view is not None:
        try:
            params = json.loads(args.view)
        except json.JSONDecodeError as exc:
            raise CmuxError("invalid_params", f"--view is not valid JSON: {exc}") from None
        if not isinstance(params, dict):
            raise CmuxError("invalid_params", "--view must be a JSON object")
        params.setdefault("source", "cli")
    view: bool | str = True if params is not None else (args.client or DEFAULT_CLIENT)
    path = str(socket_path(args.socket, args.session))
    ui = Ui(path, view, params, sidebar_width=args.sidebar_width,
            cell=graphics_cell(sys.stdin.fileno(), sys.stdout.fileno()))
    code = asyncio.run(ui.run())
    if code and ui.notice:
        print(ui.notice, file=sys.stderr)
    return code


def add_ui_command(sub: Any, add_common: AddCommon) -> None:
    p = sub.add_parser(
        "ui", help="the agents sidebar beside a live pane",
        description="The agents sidebar (through an agent view) beside a "
        "live pane. j/k or arrows move between agents, tab/shift-tab step through panes, "
        "b jumps to the next blocked agent, i types into the pane (ctrl+\\ returns), "
        "enter attaches full-screen (the detach key comes back), f focuses the pane on "
        "the server, q quits.")
    add_common(p)
    p.add_argument("--client", default=None, metavar="ID",
                   help=f"follow the view of client ID (default {DEFAULT_CLIENT}); ignored "
                        "with --view")
    p.add_argument("--view", metavar="JSON",
                   help="set this ui's own view: agent.view.set params (source "
                        "defaults to cli), e.g. "
                        "'{\"filter\": {\"op\": \"eq\", \"field\": \"agent\", "
                        "\"value\": \"claude\"}}'")
    p.add_argument("--sidebar-width", type=int, default=SIDEBAR_WIDTH, metavar="CELLS",
                   help=f"width of the sidebar (default {SIDEBAR_WIDTH})")
    p.set_defaults(func=cmd_ui)
