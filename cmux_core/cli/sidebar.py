"""``cmux agents``: the agent list through a view, once or live (``--watch``).

The list comes from ``agent.list {view}``, so it shows exactly what any other front end
showing the same client's view shows. Which view:

* ``--filter`` / ``--sort`` flags set a view on the command's own connection (it ends when
  the command exits);
* otherwise the view of the named client ``--client`` (default ``sidebar``), which anyone can
  change with ``agent.view.set {"client_id": "sidebar", ...}``.

Once a saved machine is enabled, both forms show the whole fleet (``--machines all``),
grouped under a line per machine with its state; ``--machines local`` keeps to this machine.
``--json`` prints the list with each agent's ``machine``.

``--watch`` draws on the alternate screen and redraws when the server reports a change
(agent status, detection, pane updates, focus, closes, view changes): no request is sent
while nothing happens. The clock only re-renders what it already has (time in state and
the working spinner). Keys: ``j``/``k`` or arrows move, Enter focuses the agent's pane
(which marks it seen), ``q``, Esc or Ctrl-C quit; the terminal is restored on every exit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import termios
import time
import tty
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, TextIO

from cmux_core.cli.common import AddCommon, add_subcommand
from cmux_core.cli.fleet_view import (
    DEFAULT_CLIENT,
    MACHINE_EVENTS,
    SPIN_SECONDS,
    STATUS_ORDER,
    VIEW_EVENT,
    WATCH_EVENTS,
    Machines,
    Row,
    age,
    followed_view,
    machine_groups,
    machine_heading,
    machine_list,
    machine_up,
    machines_option,
    machines_param,
    next_tick,
    shown_machines,
    status_counts,
    status_glyph,
)
from cmux_core.client import AsyncClient, Client
from cmux_core.config import socket_path
from cmux_core.errors import CmuxError

DEFAULT_COLUMNS = "status,name,agent,where,title,age"
MIN_FLEX = 12
"""Cells the title column needs before optional columns are dropped to make room."""

# SGR parameters
RESET = "\x1b[0m"
STYLE = {
    "blocked": "1;31", "done": "32", "working": "33", "idle": "2", "unknown": "2",
    "dim": "2", "bold": "1", "heading": "2;4", "bar": "1;38;5;255;48;5;238",
    "bar_dim": "38;5;250;48;5;238", "view": "1;36;48;5;238", "selected": "48;5;236",
    "focus": "36",
}


# -- view flags -------------------------------------------------------------------------------


def filter_node(expr: str) -> dict[str, Any]:
    """One ``--filter`` expression as a view filter node.

    ``{...}`` is a JSON filter node; ``plugin_id/name`` a plugin predicate;
    ``field=v1,v2`` compares a field (``$name`` for a token) with one value (``eq``) or
    several (``in``); ``field?`` tests that it exists; a leading ``!`` negates.
    Raises ValueError for an expression it cannot read.
    """
    expr = expr.strip()
    if expr.startswith("!"):
        return {"op": "not", "filter": filter_node(expr[1:])}
    if expr.startswith("{"):
        node = json.loads(expr)
        if not isinstance(node, dict):
            raise ValueError(f"{expr!r} is not a JSON object")
        return node
    if expr.endswith("?"):
        return {"op": "exists", "field": _field(expr[:-1])}
    name, sep, values = expr.partition("=")
    if not sep:
        if "/" in expr:
            return {"plugin": expr}
        raise ValueError(f"cannot read filter {expr!r}: use FIELD=VALUE[,VALUE], FIELD?, "
                         "PLUGIN/NAME, !EXPR or a JSON node")
    fld = _field(name)
    parsed = [_value(fld, v) for v in values.split(",")]
    if len(parsed) == 1:
        return {"op": "eq", "field": fld, "value": parsed[0]}
    return {"op": "in", "field": fld, "values": parsed}


def sort_key(expr: str) -> dict[str, Any]:
    """One ``--sort`` key: ``FIELD``, ``$token`` or ``plugin_id/name``, with ``:desc``
    (or a leading ``-``) to reverse it."""
    expr = expr.strip()
    order = "asc"
    if expr.startswith("-"):
        expr, order = expr[1:], "desc"
    head, sep, tail = expr.rpartition(":")
    if sep and tail in ("asc", "desc"):
        expr, order = head, tail
    fld: Any = {"plugin": expr} if "/" in expr else _field(expr)
    return {"field": fld, "order": order}


def view_params(filters: Sequence[str], sorts: Sequence[str], label: str | None
                ) -> dict[str, Any] | None:
    """``agent.view.set`` params for the flags, or None when no flag asks for a view."""
    if not filters and not sorts:
        return None
    params: dict[str, Any] = {"source": "cli"}
    nodes = [filter_node(f) for f in filters]
    if nodes:
        params["filter"] = nodes[0] if len(nodes) == 1 else {"op": "all", "filters": nodes}
    if sorts:
        params["sort"] = [sort_key(s) for s in sorts]
    if label:
        params["label"] = label
    return params


def _field(name: str) -> Any:
    name = name.strip()
    return {"token": name[1:]} if name.startswith("$") else name


def _value(fld: Any, text: str) -> Any:
    text = text.strip()
    if text in ("@workspace", "@tab"):
        return {"context": f"current_{text[1:]}_id"}
    if fld == "seen":
        return text.lower() in ("true", "1", "yes")
    if fld == "state_change_seq":
        return int(text)
    return text


# -- what is drawn ----------------------------------------------------------------------------


@dataclass(slots=True)
class Board:
    """One fetched state of the list: the projected rows and what decorates them."""

    rows: list[Row]
    total: int
    view: Mapping[str, Any] = field(default_factory=dict)
    workspaces: Mapping[str, str] = field(default_factory=dict)
    tabs: Mapping[str, str] = field(default_factory=dict)
    multi_tab: frozenset[str] = frozenset()
    machines: list[Mapping[str, Any]] | None = None
    """With ``--machines``: each machine shown (``name``, ``state``, ``reason``), this one
    (``local``) first; the rows are then drawn grouped by machine."""




def fetch_board(client: Client, view: bool | str, machines: Machines = None) -> Board:
    """Fetch a :class:`Board` through ``view`` (see ``agent.list``), merged from
    ``machines`` when given."""
    more = machines_param(machines)
    board = _board(client.call("agent.list", {"view": view, **more}),
                   client.call("agent.list", more),
                   client.call("agent.view.get", _view_owner(view)),
                   client.call("workspace.list"), client.call("tab.list"))
    if machines is not None:
        board.machines = shown_machines(machines, client.call("machine.list"))
    return board


async def fetch_board_async(client: AsyncClient, view: bool | str,
                            machines: Machines = None) -> Board:
    more = machines_param(machines)
    board = _board(await client.call("agent.list", {"view": view, **more}),
                   await client.call("agent.list", more),
                   await client.call("agent.view.get", _view_owner(view)),
                   await client.call("workspace.list"), await client.call("tab.list"))
    if machines is not None:
        board.machines = shown_machines(machines, await client.call("machine.list"))
    return board


def _view_owner(view: bool | str) -> dict[str, Any]:
    return {"client_id": view} if isinstance(view, str) else {}


def _board(projected: Mapping[str, Any], every: Mapping[str, Any], view: Mapping[str, Any],
           workspaces: Mapping[str, Any], tabs: Mapping[str, Any]) -> Board:
    tab_rows = list(tabs.get("tabs", []))
    per_ws: dict[str, int] = {}
    for tab in tab_rows:
        per_ws[tab["workspace_id"]] = per_ws.get(tab["workspace_id"], 0) + 1
    return Board(
        rows=list(projected.get("agents", [])), total=len(every.get("agents", [])),
        view=view,
        workspaces={w["workspace_id"]: str(w.get("label") or w["workspace_id"])
                    for w in workspaces.get("workspaces", [])},
        tabs={t["tab_id"]: str(t.get("label") or t.get("number") or t["tab_id"])
              for t in tab_rows},
        multi_tab=frozenset(ws for ws, n in per_ws.items() if n > 1))


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    heading: str
    width: int
    """Preferred width in cells; 0 for the one flexible column."""
    cell: Callable[[Row, Board, float, int], tuple[str, str]]
    """``(row, board, now, frame)`` → ``(text, SGR style)``."""
    right: bool = False


def row_key(row: Row) -> str:
    """What names a row's agent: its terminal (two tabs of one pane are two agents), else
    its pane."""
    return str(row.get("terminal_id") or row.get("pane_id"))


def _status_cell(row: Row, board: Board, now: float, frame: int) -> tuple[str, str]:
    status = str(row.get("agent_status", "unknown"))
    return status_glyph(status, frame), STYLE.get(status, "")


def _name_cell(row: Row, board: Board, now: float, frame: int) -> tuple[str, str]:
    name = row.get("name")
    if name:
        return str(name), STYLE["bold"]
    return str(row.get("pane_id", "")), STYLE["dim"]


def _agent_cell(row: Row, board: Board, now: float, frame: int) -> tuple[str, str]:
    return str(row.get("display_agent") or row.get("agent") or "—"), ""


def _where_cell(row: Row, board: Board, now: float, frame: int) -> tuple[str, str]:
    ws_id = str(row.get("workspace_id", ""))
    text = board.workspaces.get(ws_id, ws_id)
    if ws_id in board.multi_tab:
        text += " / " + board.tabs.get(str(row.get("tab_id")), str(row.get("tab_id")))
    return text, STYLE["dim"]


def _machine_cell(row: Row, board: Board, now: float, frame: int) -> tuple[str, str]:
    return str(row.get("machine", "local")), STYLE["dim"]


def _title_cell(row: Row, board: Board, now: float, frame: int) -> tuple[str, str]:
    for key in ("title", "message", "custom_status", "terminal_title_stripped",
                "terminal_title"):
        value = row.get(key)
        if value:
            return str(value), ""
    return "", ""


def _age_cell(row: Row, board: Board, now: float, frame: int) -> tuple[str, str]:
    since = row.get("status_changed_at")
    if not isinstance(since, int | float):
        return "", ""
    status = str(row.get("agent_status", "unknown"))
    style = STYLE[status] if status in ("blocked", "done") else STYLE["dim"]
    return age(now - since), style


def _token_cell(name: str) -> Callable[[Row, Board, float, int], tuple[str, str]]:
    def cell(row: Row, board: Board, now: float, frame: int) -> tuple[str, str]:
        tokens = row.get("tokens")
        value = tokens.get(name) if isinstance(tokens, Mapping) else None
        return ("" if value is None else str(value)), ""
    return cell


COLUMNS: dict[str, Column] = {
    "status": Column("status", "", 1, _status_cell),
    "machine": Column("machine", "MACHINE", 10, _machine_cell),
    "name": Column("name", "NAME", 16, _name_cell),
    "agent": Column("agent", "AGENT", 10, _agent_cell),
    "where": Column("where", "WHERE", 20, _where_cell),
    "title": Column("title", "TITLE", 0, _title_cell),
    "age": Column("age", "FOR", 6, _age_cell, right=True),
}


def columns_from(spec: str) -> list[Column]:
    """``status,name,$branch,...`` → columns; ``$name`` shows a metadata token.

    Raises ValueError naming an unknown column.
    """
    out: list[Column] = []
    for key in (k.strip() for k in spec.split(",") if k.strip()):
        if key.startswith("$") and len(key) > 1:
            out.append(Column(key, key[1:].upper(), 14, _token_cell(key[1:])))
        elif key in COLUMNS:
            out.append(COLUMNS[key])
        else:
            raise ValueError(f"unknown column {key!r} (columns: {', '.join(COLUMNS)}, $token)")
    return out


def cell_width(text: str) -> int:
    """Terminal cells ``text`` occupies (wide East Asian characters take two)."""
    width = 0
    for ch in text:
        if unicodedata.combining(ch) or ch in "\u200b\u200d\ufe0f":
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


def fit(text: str, width: int, *, right: bool = False) -> str:
    """``text`` cut (with ``…``) or padded to exactly ``width`` cells."""
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    if cell_width(text) > width:
        out, used = "", 0
        for ch in text:
            w = cell_width(ch)
            if used + w > width - 1:
                break
            out += ch
            used += w
        text = out + "…" if width > 0 else ""
    pad = " " * max(0, width - cell_width(text))
    return pad + text if right else text + pad


def _paint(text: str, style: str, color: bool) -> str:
    return f"\x1b[{style}m{text}{RESET}" if color and style and text.strip() else text


def _layout(columns: list[Column], width: int) -> list[tuple[Column, int]]:
    """Give each column its width; drop optional columns right to left when narrow."""
    cols = list(columns)

    def room(cs: list[Column]) -> int:
        return width - 1 - sum(c.width for c in cs) - 2 * (len(cs) - 1)

    while room(cols) < (MIN_FLEX if any(not c.width for c in cols) else 0):
        droppable = [c for c in cols if c.key in ("where", "agent") or c.key.startswith("$")]
        if not droppable:
            break
        cols.remove(droppable[-1])
    left = room(cols)
    flexible = sum(1 for c in cols if not c.width)
    out: list[tuple[Column, int]] = []
    for col in cols:
        w = col.width
        if not w:
            w = max(0, left) // flexible
        elif col.key == "name" and left < 0:
            # still too narrow: the name column gives up cells before anything is cut off
            w = max(6, w + left)
        out.append((col, w))
    return out


def render_rows(board: Board, columns: list[Column], *, width: int, now: float, frame: int = 0,
                color: bool = True, selected: str | None = None) -> list[str]:
    """The heading line and one line per row, each exactly ``width`` cells wide."""
    laid = _layout(columns, width)
    heading = " " + "  ".join(fit(col.heading, w, right=col.right) for col, w in laid)
    lines = [_paint(fit(heading, width), STYLE["heading"] if color else "", color)]
    if board.machines is None:
        return lines + [_row_line(row, board, laid, width, now, frame, color, selected)
                        for row in board.rows]
    for machine, rows in machine_groups(board.rows, board.machines):
        lines.append(_paint(fit(" " + machine_heading(machine, len(rows)), width),
                            STYLE["bold" if machine_up(machine) else "blocked"], color))
        lines += [_row_line(row, board, laid, width, now, frame, color, selected)
                  for row in rows]
    return lines


def _row_line(row: Row, board: Board, laid: list[tuple[Column, int]], width: int,
              now: float, frame: int, color: bool, selected: str | None) -> str:
    """One agent's line, exactly ``width`` cells wide."""
    cells = []
    for col, w in laid:
        text, style = col.cell(row, board, now, frame)
        cells.append(_paint(fit(text, w, right=col.right), style, color))
    marker = "▸" if row.get("focused") else " "
    line = _paint(marker, STYLE["focus"], color) + "  ".join(cells)
    used = 1 + sum(w for _, w in laid) + 2 * (len(laid) - 1)
    line += " " * max(0, width - used)
    if color and selected is not None and row_key(row) == selected:
        line = f"\x1b[{STYLE['selected']}m" + line.replace(RESET, RESET + "\x1b["
                                                              + STYLE["selected"] + "m")
        line += RESET
    return line


def summary(rows: Sequence[Row], color: bool, frame: int = 0, *, compact: bool = False
            ) -> str:
    """Counts per status, most urgent first: ``● 1 blocked  ✔ 2 done`` (``● 1 ✔ 2`` when
    ``compact``)."""
    counts = status_counts(rows)
    parts = []
    for status in STATUS_ORDER:
        if counts.get(status):
            text = f"{status_glyph(status, frame)} {counts[status]}"
            text += "" if compact else f" {status}"
            parts.append(_paint(text, STYLE[status], color))
    return (" " if compact else "  ").join(parts)


def render_screen(board: Board, columns: list[Column], *, width: int, height: int, now: float,
                  frame: int = 0, color: bool = True, selected: str | None = None,
                  notice: str = "") -> list[str]:
    """The full ``--watch`` screen: title bar, list, footer; exactly ``height`` lines."""
    width, height = max(width, 20), max(height, 4)
    title = " cmux agents"
    if board.view.get("active"):
        title += f" · {board.view.get('label') or board.view.get('source') or 'view'}"
    shown = len(board.rows)
    count = f"{shown} agent{'s' if shown != 1 else ''} " if shown == board.total else \
        f"{shown} of {board.total} agents "
    bar = fit(title, width - cell_width(count) - 1) + " " + count
    lines = [_paint(bar, STYLE["bar"], color) if color else bar]
    area = height - 2
    body = render_rows(board, columns, width=width, now=now, frame=frame, color=color,
                       selected=selected)
    if not board.rows:
        hint = ("no agents match this view" if board.total else
                "no agents yet: start one in a pane, or report one with pane.report_agent")
        body += ["", _paint(fit("   " + hint, width), STYLE["dim"], color)]
    elif len(body) > area:
        more = _paint(fit(f"   … {len(body) - area + 1} more", width), STYLE["dim"], color)
        body = [*body[:area - 1], more]
    lines += body[:area]
    lines += [" " * width] * (area + 1 - len(lines))
    lines.append(_footer(board, width, color, frame, notice))
    return lines[:height]


def _footer(board: Board, width: int, color: bool, frame: int, notice: str) -> str:
    """Status counts on the left, key hints (or a notice) on the right; shorter forms first
    give way when the terminal is narrow."""
    keys = notice or "j/k move · enter focus · q quit"
    for counts, hint in ((summary(board.rows, color, frame), keys),
                         (summary(board.rows, color, frame, compact=True), keys),
                         (summary(board.rows, color, frame, compact=True), "q quit"),
                         (summary(board.rows, color, frame, compact=True), "")):
        gap = width - 2 - _visible_width(counts) - cell_width(hint)
        if gap >= 1:
            return " " + counts + " " * gap + _paint(hint, STYLE["dim"], color) + " "
    plain = summary(board.rows, False, frame, compact=True)
    return " " + fit(plain, width - 1)


def _visible_width(text: str) -> int:
    out, i = 0, 0
    while i < len(text):
        if text[i] == "\x1b":
            end = text.find("m", i)
            i = end + 1 if end >= 0 else len(text)
            continue
        out += cell_width(text[i])
        i += 1
    return out


# -- the commands -----------------------------------------------------------------------------


AGENTS_HELP = f"""\
The agent list through a view, once or live (--watch). The view is the one --filter
and --sort set for this command, else the view of client --client (default
{DEFAULT_CLIENT}). Once a machine is saved and enabled, the list is the whole fleet's,
grouped under a line per machine with its state (--machines local: this machine's
alone). With --watch: j/k or arrows move, Enter focuses the agent's pane, q, Esc or
Ctrl-C quit."""
AGENTS_EXAMPLES = """\
more examples:
  cmux agents                     # every enabled machine's agents, machine by machine
  cmux agents --machines local    # this machine's alone
  cmux agents --machines box,ci   # these saved machines' (and not this one's)
  cmux agents --json              # the list as JSON, each agent with its machine"""


def add_sidebar_commands(sub: Any, add_common: AddCommon) -> None:
    """Add ``cmux agents`` to the ``cmux`` subcommands."""
    p = add_subcommand(sub, "agents", add_common, cmd_agents,
                       help="the agent list through your view (--watch: live)",
                       description=AGENTS_HELP, epilog=AGENTS_EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-w", "--watch", action="store_true",
                   help="keep the list on screen, redrawn as agents change")
    p.add_argument("--client", default=None, metavar="ID",
                   help=f"show the view of client ID (default {DEFAULT_CLIENT}); "
                        "ignored with --filter/--sort")
    p.add_argument("--filter", action="append", default=[], metavar="EXPR",
                   help="FIELD=V[,V], $TOKEN=V, FIELD?, PLUGIN/NAME, !EXPR or JSON; repeat "
                        "to require all")
    p.add_argument("--sort", action="append", default=[], metavar="KEY",
                   help="FIELD, $TOKEN or PLUGIN/NAME, with :desc to reverse; repeatable")
    p.add_argument("--label", help="label of the view set by --filter/--sort")
    p.add_argument("--columns", default=DEFAULT_COLUMNS,
                   help=f"comma-separated: {', '.join(COLUMNS)}, $TOKEN "
                        f"(default {DEFAULT_COLUMNS})")
    p.add_argument("--machines", metavar="all|local|NAME,...",
                   help="the agents of these saved machines (local for this one), or all: "
                        "every enabled machine and this; grouped per machine with its state "
                        "and a MACHINE column (default: all when a machine is enabled; "
                        "local: this machine alone)")
    p.add_argument("--color", choices=["auto", "always", "never"], default="auto",
                   help="colour the list: auto (when printing to a terminal and NO_COLOR is "
                        "unset), always or never")


def cmd_agents(args: argparse.Namespace) -> int:
    try:
        columns = columns_from(args.columns)
        params = view_params(args.filter, args.sort, args.label)
    except ValueError as exc:
        raise CmuxError("invalid_params", str(exc)) from None
    view = followed_view(params, args.client)
    path = str(socket_path(args.socket, args.session))
    machines = machines_option(args.machines, lambda: machine_list(path))
    if machines is not None and all(c.key != "machine" for c in columns):
        columns.insert(1 if columns and columns[0].key == "status" else 0, COLUMNS["machine"])
    if args.watch:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise CmuxError("invalid_params", "--watch needs a terminal")
        return asyncio.run(Sidebar(path, columns, view, params, machines=machines).run())
    with Client(path) as client:
        if params is not None:
            client.call("agent.view.set", params)
        if args.json:
            print(json.dumps(_json_list(client, view, machines), indent=2,
                             ensure_ascii=False))
            return 0
        board = fetch_board(client, view, machines)
    color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty()
                                       and "NO_COLOR" not in os.environ)
    width = os.get_terminal_size().columns if sys.stdout.isatty() else 120
    lines = render_rows(board, columns, width=width, now=time.time(), color=color)
    for line in lines:
        print(line.rstrip())
    status = summary(board.rows, color)
    if board.rows:
        print(" " + status if board.total == len(board.rows)
              else f" {status}  ({board.total - len(board.rows)} hidden by the view)")
    return 0


def _json_list(client: Client, view: bool | str, machines: Machines) -> dict[str, Any]:
    """``agent.list {view, machines}`` as ``--json`` prints it: every agent with its
    ``machine`` (``local`` for this one's, also when the list is this machine's alone)."""
    more = machines_param(machines)
    listed = dict(client.call("agent.list", {"view": view, **more}))
    listed["agents"] = [{**row, "machine": row.get("machine", "local")}
                        for row in listed.get("agents", [])]
    return listed


@dataclass(eq=False)
class Sidebar:
    """The ``--watch`` screen: one request connection, one event stream, one terminal."""

    path: str
    columns: list[Column]
    view: bool | str
    params: dict[str, Any] | None
    out: TextIO = sys.stdout
    _: KW_ONLY
    machines: Machines = None
    board: Board = field(init=False, default_factory=lambda: Board([], 0))
    selected: str | None = field(init=False, default=None)
    notice: str = field(init=False, default="")
    stale: bool = field(init=False, default=True)
    wake: asyncio.Event = field(init=False, default_factory=asyncio.Event)
    stopping: bool = field(init=False, default=False)
    exit_code: int = field(init=False, default=0)
    last_frame: list[str] = field(init=False, default_factory=list)
    requests: AsyncClient = field(init=False)

    def __post_init__(self) -> None:
        self.requests = AsyncClient(self.path)

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        await self.requests.connect()
        if self.params is not None:
            await self.requests.call("agent.view.set", self.params)
        stream = asyncio.create_task(self._follow_events())
        with _terminal(self.out) as fd:
            loop.add_reader(fd, self._on_input, fd)
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                loop.add_signal_handler(sig, self.stop)
            loop.add_signal_handler(signal.SIGWINCH, self._redraw)
            try:
                await self._loop()
            finally:
                loop.remove_reader(fd)
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGWINCH):
                    loop.remove_signal_handler(sig)
                stream.cancel()
                with contextlib.suppress(BaseException):
                    await stream
                await self.requests.close()
        if self.notice and self.exit_code:
            print(self.notice, file=sys.stderr)
        return self.exit_code

    def stop(self) -> None:
        self.stopping = True
        self.wake.set()

    async def _loop(self) -> None:
        while not self.stopping:
            if self.stale:
                self.stale = False
                try:
                    self.board = await fetch_board_async(self.requests, self.view,
                                                         self.machines)
                except (ConnectionError, OSError, TimeoutError):
                    self._gone()
                    break
                self._keep_selection()
            self._draw()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), next_tick(self.board.rows))
            if self.wake.is_set():
                self.wake.clear()
                # let a burst of events (a pane closing emits several) land as one redraw
                await asyncio.sleep(0.02)

    async def _follow_events(self) -> None:
        events = AsyncClient(self.path, timeout=None)
        try:
            machine = MACHINE_EVENTS if self.machines is not None else ()
            for kinds in ((*WATCH_EVENTS, VIEW_EVENT, *machine), (*WATCH_EVENTS, VIEW_EVENT),
                          WATCH_EVENTS):
                try:
                    async for _event in events.events(list(kinds), self.machines):
                        self.stale = True
                        self.wake.set()
                except CmuxError:
                    # an older server without agent.view_changed: follow the rest
                    continue
                break
        except (ConnectionError, OSError):
            pass
        finally:
            await events.close()
        self._gone()

    def _gone(self) -> None:
        if not self.stopping:
            self.notice = "the cmux server went away"
            self.exit_code = 1
            self.stop()

    def _redraw(self) -> None:
        self.last_frame = []
        self.wake.set()

    def _draw(self) -> None:
        size = os.get_terminal_size(self.out.fileno())
        now = time.time()
        lines = render_screen(self.board, self.columns, width=size.columns, height=size.lines,
                              now=now, frame=int(now / SPIN_SECONDS), selected=self.selected,
                              notice=self.notice)
        if lines == self.last_frame:
            return
        self.last_frame = lines
        # synchronized update, so the terminal never shows half a frame
        # erase first: with wrapping off, an erase after a full-width line would eat its
        # last cell
        body = "".join(f"\x1b[{i + 1};1H\x1b[2K{line}\x1b[0m" for i, line in enumerate(lines))
        self.out.write(f"\x1b[?2026h{body}\x1b[J\x1b[?2026l")
        self.out.flush()

    def _keep_selection(self) -> None:
        ids = [row_key(r) for r in self.board.rows]
        if self.selected not in ids:
            self.selected = ids[0] if ids else None

    def _move(self, step: int) -> None:
        ids = [row_key(r) for r in self.board.rows]
        if not ids:
            return
        index = ids.index(self.selected) if self.selected in ids else 0
        self.selected = ids[max(0, min(len(ids) - 1, index + step))]
        self.wake.set()

    def _on_input(self, fd: int) -> None:
        try:
            data = os.read(fd, 64)
        except OSError:
            return
        for key in _keys(data):
            if key in ("q", "esc"):
                self.stop()
            elif key in ("j", "down"):
                self._move(1)
            elif key in ("k", "up"):
                self._move(-1)
            elif key in ("g", "home"):
                self._move(-len(self.board.rows))
            elif key in ("G", "end"):
                self._move(len(self.board.rows))
            elif key == "enter" and self.selected:
                asyncio.get_running_loop().create_task(self._focus(self.selected))

    async def _focus(self, key: str) -> None:
        """Show the selected agent: its tab in its pane, the pane focused."""
        try:
            await self.requests.call("agent.focus", {"target": key})
        except CmuxError as exc:
            self.notice = exc.message
        self.stale = True
        self.wake.set()


def _keys(data: bytes) -> Iterator[str]:
    sequences = {b"\x1b[A": "up", b"\x1b[B": "down", b"\x1bOA": "up", b"\x1bOB": "down",
                 b"\x1b[H": "home", b"\x1b[F": "end", b"\r": "enter", b"\n": "enter"}
    i = 0
    while i < len(data):
        for seq, name in sequences.items():
            if data.startswith(seq, i):
                yield name
                i += len(seq)
                break
        else:
            ch = data[i:i + 1]
            yield "esc" if ch == b"\x1b" else ch.decode("latin-1")
            i += 1


@contextlib.contextmanager
def _terminal(out: TextIO) -> Iterator[int]:
    """Alternate screen, hidden cursor, no wrap, keys unbuffered; all restored on exit."""
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)
    out.write("\x1b[?1049h\x1b[?25l\x1b[?7l\x1b[H\x1b[2J")
    out.flush()
    try:
        yield fd
    finally:
        out.write("\x1b[0m\x1b[?7h\x1b[?25h\x1b[?1049l")
        out.flush()
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
