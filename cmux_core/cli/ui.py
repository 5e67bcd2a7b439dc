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
``shift-tab`` step through every pane (with ``--machines``, every shown machine's, machine by
machine as the sidebar groups them), ``b`` jumps to the next blocked agent, ``i`` types
into the shown pane beside the sidebar (every key goes to it until ctrl+\\), Enter
attaches to the shown pane full-screen (``cmux attach``; its detach key comes back here),
``f`` focuses the shown pane on the server, ``q`` or Ctrl-C quits (every pane keeps
running). While keys go to the pane, the terminal is switched to the cursor-key, keypad,
mouse, focus-reporting and kitty keyboard modes the pane's program set (a rows frame's
``modes``), so it sends what the program expects; mouse reports are moved into the pane's
cells, and ctrl+\\ is recognised in its kitty keyboard form too.

When the terminal answers the kitty graphics query (:func:`graphics_probe`), the shown
pane's graphics layers are drawn over the pane area (``kitty.AreaLayers``), written after
each screen prompt_toolkit draws; leased frames are drawn from their files when the
terminal loads files.

SIGTERM, SIGHUP and SIGINT end the ui the way ``q`` does (images deleted, modes off, the
main screen back; during a full-screen attach the signal is passed to it and the ui leaves
after it), exiting with 128 plus the signal's number; everything written to the
terminal goes through :class:`~cmux_core.cli.outer_terminal.TerminalOutput`, so a closed or
hung-up terminal never blocks or breaks the way out.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import termios
import time
import tty
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TextIO, cast

from cmux_core.cli import fleet_view, kitty
from cmux_core.cli.common import AddCommon, add_subcommand
from cmux_core.cli.fleet_view import Machines, Row
from cmux_core.cli.outer_terminal import EndSignals, TerminalOutput, signal_status
from cmux_core.cli.ui_pane import (
    Fragments,
    PanePreview,
    mouse_for_pane,
    outer_keyboard,
    outer_modes,
    switch_keyboard,
    switch_modes,
)
from cmux_core.client import AsyncClient
from cmux_core.config import socket_path
from cmux_core.errors import CmuxError

if TYPE_CHECKING:
    from prompt_toolkit.application import Application
    from prompt_toolkit.formatted_text import StyleAndTextTuples
    from prompt_toolkit.key_binding import KeyBindings
    from prompt_toolkit.key_binding.key_bindings import KeyBindingsBase
    from prompt_toolkit.layout import Layout

SIDEBAR_WIDTH = 36
MIN_REDRAW_S = 1 / 60
"""Least time between two redraws: a burst of changes is drawn as one screen."""
STATUS_STYLE = {"blocked": "fg:ansired bold", "done": "fg:ansigreen",
                "working": "fg:ansiyellow", "idle": "fg:ansibrightblack",
                "unknown": "fg:ansibrightblack"}
SELECTED = "bg:#303030"
KITTY_STOP_TYPING = re.compile(r"\x1b\[92(?::[\d:]*)?;(\d+)(?::1)?u")
"""ctrl+\\ pressed, in the kitty keyboard protocol's form (its modifiers checked apart)."""


def _fit(text: str, width: int) -> str:
    return text[:width] if len(text) > width else text + " " * (width - len(text))


def sidebar_lines(rows: list[Row], width: int, *, now: float, frame: int,
                  selected: str | None, machines: list[Mapping[str, Any]] | None = None
                  ) -> StyleAndTextTuples:
    """One line per agent: status glyph, name (else pane id), agent, time in state; the
    selected one highlighted. With ``machines`` (``--machines``), the agents are grouped
    under a line per machine that gives its state."""
    out: StyleAndTextTuples = [("bold", _fit(f" agents ({len(rows)})", width)), ("", "\n")]
    if machines is None:
        out += _agent_lines(rows, width, now, frame, selected)
    else:
        for machine, group in fleet_view.machine_groups(rows, machines):
            heading = _fit(" " + fleet_view.machine_heading(machine, len(group)), width)
            out += [("underline" if fleet_view.machine_up(machine) else "fg:ansired bold",
                     heading), ("", "\n")]
            out += _agent_lines(group, width, now, frame, selected)
    if not rows:
        out.append(("fg:ansibrightblack", " no agents in this view yet"))
    return out


def _agent_lines(rows: list[Row], width: int, now: float, frame: int, selected: str | None
                 ) -> StyleAndTextTuples:
    out: StyleAndTextTuples = []
    name_width = max(4, width - 20)
    for row in rows:
        status = str(row.get("agent_status", "unknown"))
        glyph = fleet_view.status_glyph(status, frame)
        since = row.get("status_changed_at")
        shown = fleet_view.age(now - since) if isinstance(since, int | float) else ""
        back = SELECTED if row.get("pane_id") == selected else ""
        name = str(row.get("name") or row.get("pane_id", ""))
        agent = str(row.get("display_agent") or row.get("agent") or "")
        out += [(back, " "), (f"{back} {STATUS_STYLE.get(status, '')}", glyph),
                (back, " " + _fit(name, name_width) + " "),
                (f"{back} fg:ansibrightblack", _fit(agent, 10)),
                (back, f"{shown:>6} "), ("", "\n")]
    return out


def counts(rows: list[Row]) -> str:
    """Agents per status, most urgent first: ``● 1 blocked  ○ 2 idle``."""
    per = fleet_view.status_counts(rows)
    return "  ".join(f"{fleet_view.GLYPH.get(s, '*')} {per[s]} {s}"
                     for s in fleet_view.STATUS_ORDER if per.get(s))


class Ui:
    """The ``cmux ui`` application: one request connection, one event stream, one
    preview connection, one prompt_toolkit application."""

    def __init__(self, path: str, view: bool | str, params: dict[str, Any] | None, *,
                 sidebar_width: int = SIDEBAR_WIDTH,
                 cell: tuple[int, int] | None = None, files: bool = False,
                 signals: EndSignals | None = None, machines: Machines = None) -> None:
        """``cell``: the terminal's cell size in pixels when it draws kitty graphics (the
        shown pane's layers are then drawn over it); None: no graphics. ``files``: the
        terminal loads images from files. ``signals``: the ending signals installed around
        the ui; one received ends it. ``machines``: the ``machines`` of ``agent.list`` (the
        agents of those machines, grouped by machine with each one's state); None: this
        machine's alone."""
        from prompt_toolkit.application import Application  # see the module docstring

        self.path = path
        self.view = view
        self.params = params
        self.sidebar_width = sidebar_width
        self.machines = machines
        self.shown_machines: list[Mapping[str, Any]] | None = None
        self.rows: list[Row] = []
        self.rows_version = 0
        self.selected: str | None = None
        self.shown: str | None = None
        self.notice = ""
        self.stale = asyncio.Event()
        self.requests = AsyncClient(path)
        self.graphics = None if cell is None else kitty.AreaLayers(self._write, cell)
        self.preview = PanePreview(path, self._preview_changed, self.graphics, files=files)
        self.signals = signals
        self.app: Application[int] = Application(
            layout=self._layout(), key_bindings=self._keys(), full_screen=True,
            mouse_support=False, refresh_interval=None, min_redraw_interval=MIN_REDRAW_S,
            after_render=self._after_render)
        self._outer = outer_modes({})
        """The modes this ui switched its terminal to for the pane it types into."""
        self._keyboard = outer_keyboard({})
        """Likewise its focus reporting and kitty keyboard flags."""
        self._typed: list[str] = []
        self._sidebar_key: tuple[object, ...] = ()
        self._sidebar_lines: StyleAndTextTuples = []
        self.fragments = Fragments()
        self._finished = False
        self._child: subprocess.Popen[bytes] | None = None
        """The full-screen ``cmux attach`` while it runs (Enter)."""
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
        frame = int(now / fleet_view.SPIN_SECONDS)
        # The list only changes with the board, the selection, the second and the spinner.
        key = (self.rows_version, self.selected, int(now), frame)
        if key != self._sidebar_key:
            self._sidebar_key = key
            self._sidebar_lines = sidebar_lines(self.rows, self.sidebar_width, now=now,
                                                frame=frame, selected=self.selected,
                                                machines=self.shown_machines)
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
        modes = self.preview.modes if self.typing else {}
        wanted, keyboard = outer_modes(modes), outer_keyboard(modes)
        if (wanted, keyboard) != (self._outer, self._keyboard):
            self._write(switch_modes(wanted, self._outer)
                        + switch_keyboard(keyboard, self._keyboard))
            self._outer, self._keyboard = wanted, keyboard

    def _type(self, data: str) -> None:
        """Send ``data`` to the shown pane with the other keys of the same read: a
        sequence prompt_toolkit splits into keys (an unknown one like keypad ``ESC O p``)
        reaches the program in one piece."""
        if not self._typed:
            asyncio.get_running_loop().call_soon(self._send_typed)
        self._typed.append(data)

    def _send_typed(self) -> None:
        data, self._typed = "".join(self._typed), []
        for found in KITTY_STOP_TYPING.finditer(data):
            if (int(found[1]) - 1) & ~(64 | 128) == 4:  # ctrl alone (lock keys aside)
                self.app.create_background_task(self.preview.type(data[:found.start()]))
                self._stop_typing()
                return
        self.app.create_background_task(self.preview.type(data))

    def _stop_typing(self) -> None:
        self.typing = False
        self._sync_modes()
        self.app.invalidate()

    def _leave(self, code: int) -> None:
        """End the ui: its images deleted and the terminal's modes back first."""
        if self.app.future is None or self.app.future.done():
            return  # already leaving
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
            self._stop_typing()

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
            panes = await self._pane_ids()
        except CmuxError as exc:
            self.notice = exc.message
            return
        if not panes:
            return
        index = panes.index(self.shown) if self.shown in panes else -1
        self._show(panes[(index + step) % len(panes)])

    async def _pane_ids(self) -> list[str]:
        """Every pane tab steps through: this machine's, or with ``machines`` those of each
        machine shown, machine by machine in the sidebar's order (a machine that cannot
        answer has none)."""
        if self.machines is None:
            listed = await self.requests.call("pane.list")
            return [str(p["pane_id"]) for p in listed["panes"]]
        listed = await self.requests.call("pane.list", {"machines": self.machines})
        groups = fleet_view.machine_groups(listed["panes"], self.shown_machines or [])
        return [str(p["pane_id"]) for _machine, panes in groups for p in panes]

    async def _attach(self) -> None:
        from prompt_toolkit.application import run_in_terminal

        if self.shown is None:
            return
        argv = [sys.executable, "-m", "cmux_core", "attach", self.shown, "--socket", self.path]
        if self.graphics is not None:
            self.graphics.forget()  # drawn again after the next screen

        def attach() -> None:
            self._child = subprocess.Popen(argv)
            self._child.wait()

        try:
            await run_in_terminal(attach, in_executor=True)
        finally:
            self._child = None
        if self.signals is not None and self.signals.received is not None:
            self._leave(signal_status(self.signals.received))  # it came during the attach
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
        if self.signals is not None:
            loop = asyncio.get_running_loop()

            def notify(sig: int) -> None:
                loop.call_soon_threadsafe(self._on_signal, sig)

            self.signals.notify = notify
            if self.signals.received is not None:
                return signal_status(self.signals.received)
        await self.requests.connect()
        if self.params is not None:
            await self.requests.call("agent.view.set", self.params)
        tasks = [asyncio.create_task(self._follow_events()),
                 asyncio.create_task(self._refresh()), asyncio.create_task(self._tick())]
        try:
            # With ``signals`` SIGINT is theirs; prompt_toolkit's own handler ignores it.
            return await self.app.run_async(handle_sigint=self.signals is None)
        finally:
            self._finished = True
            for task in tasks:
                task.cancel()
            await self.preview.close()
            await self.requests.close()

    def _on_signal(self, sig: int) -> None:
        """An ending signal arrived: leave as ``q`` does, as soon as the application runs."""
        if self._finished:
            return
        child = self._child
        if child is not None and child.poll() is None:
            # The full-screen attach has the terminal: it ends first, restoring it, and the
            # ui leaves after it (see :meth:`_attach`).
            child.send_signal(sig)
            return
        if self.app.future is None:
            asyncio.get_running_loop().call_later(0.05, self._on_signal, sig)
            return
        self._leave(signal_status(sig))

    async def _refresh(self) -> None:
        self.stale.set()
        while True:
            await self.stale.wait()
            self.stale.clear()
            try:
                more = fleet_view.machines_param(self.machines)
                listed = await self.requests.call("agent.list", {"view": self.view, **more})
                if self.machines is not None:
                    self.shown_machines = fleet_view.shown_machines(
                        self.machines, await self.requests.call("machine.list"))
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
            await asyncio.sleep(fleet_view.next_tick(self.rows))
            self.app.invalidate()

    async def _focused_pane(self) -> str | None:
        try:
            return str((await self.requests.call("pane.current"))["pane"]["pane_id"])
        except CmuxError:
            return None

    async def _follow_events(self) -> None:
        events = AsyncClient(self.path, timeout=None)
        try:
            kinds = [*fleet_view.WATCH_EVENTS, fleet_view.VIEW_EVENT,
                     *(fleet_view.MACHINE_EVENTS if self.machines is not None else ())]
            async for _event in events.events(kinds, self.machines):
                self.stale.set()
        except (ConnectionError, OSError):
            self._gone()
        finally:
            await events.close()

    def _gone(self) -> None:
        self.notice = "the cmux server went away"
        if self.app.is_running:
            self._leave(1)


def graphics_probe(in_fd: int, out_fd: int) -> kitty.Probe:
    """What the terminal says to the kitty graphics query (asked as ``cmux attach`` asks
    it): whether it draws images, its cell size, whether it loads files. Keys typed
    during the query are dropped."""
    saved = termios.tcgetattr(in_fd)
    try:
        tty.setraw(in_fd, termios.TCSANOW)
        return kitty.probe(in_fd, out_fd)
    finally:
        termios.tcsetattr(in_fd, termios.TCSAFLUSH, saved)


class TerminalText:
    """The text stream prompt_toolkit writes to: UTF-8 into a :class:`TerminalOutput`, so
    a closed or hung-up terminal neither raises nor blocks in prompt_toolkit's writes."""

    encoding = "utf-8"

    def __init__(self, out: TerminalOutput) -> None:
        self.out = out

    def write(self, data: str) -> int:
        self.out.write(data.encode("utf-8", "replace"))
        return len(data)

    def flush(self) -> None:
        """Nothing is held back: :meth:`write` has written it."""

    def fileno(self) -> int:
        return self.out.fd

    def isatty(self) -> bool:
        return True


def cmd_ui(args: argparse.Namespace) -> int:
    from prompt_toolkit.application import create_app_session  # see the module docstring
    from prompt_toolkit.output.vt100 import Vt100_Output

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
    view = fleet_view.followed_view(params, args.client)
    path = str(socket_path(args.socket, args.session))
    machines = fleet_view.machines_option(args.machines, lambda: fleet_view.machine_list(path))
    out = TerminalOutput(sys.stdout.fileno())
    with EndSignals(out) as signals:
        found = graphics_probe(sys.stdin.fileno(), out.fd)
        output = Vt100_Output.from_pty(cast(TextIO, TerminalText(out)),
                                       term=os.environ.get("TERM"))
        with create_app_session(output=output):
            ui = Ui(path, view, params, sidebar_width=args.sidebar_width,
                    cell=found.cell if found.graphics else None, files=found.files,
                    signals=signals, machines=machines)
            try:
                code = asyncio.run(ui.run())
            except EOFError:  # the terminal closed under the ui
                code = 1
    if code and ui.notice and not (out.gone or out.hung_up):
        with contextlib.suppress(OSError):
            print(ui.notice, file=sys.stderr, flush=True)
    return code


def add_ui_command(sub: Any, add_common: AddCommon) -> None:
    p = add_subcommand(
        sub, "ui", add_common, cmd_ui, help="the agents sidebar beside a live pane",
        description="The agents sidebar (through an agent view) beside a "
        "live pane. j/k or arrows move between agents, tab/shift-tab step through panes "
        "(every shown machine's, in the sidebar's order), "
        "b jumps to the next blocked agent, i types into the pane (ctrl+\\ returns), "
        "enter attaches full-screen (the detach key comes back), f focuses the pane on "
        "the server, q quits.")
    p.add_argument("--client", default=None, metavar="ID",
                   help=f"follow the view of client ID (default {fleet_view.DEFAULT_CLIENT}); "
                        "ignored with --view")
    p.add_argument("--view", metavar="JSON",
                   help="set this ui's own view: agent.view.set params (source "
                        "defaults to cli), e.g. "
                        "'{\"filter\": {\"op\": \"eq\", \"field\": \"agent\", "
                        "\"value\": \"claude\"}}'")
    p.add_argument("--machines", metavar="all|local|NAME,...",
                   help="also the agents of these saved machines (local for this one), or "
                        "all: every enabled machine and this; grouped by machine, with each "
                        "machine's state (default: all when a machine is enabled; local: "
                        "this machine alone)")
    p.add_argument("--sidebar-width", type=int, default=SIDEBAR_WIDTH, metavar="CELLS",
                   help=f"width of the sidebar (default {SIDEBAR_WIDTH})")
