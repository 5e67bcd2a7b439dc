"""The session file's format, version :data:`VERSION`, and its validation.

One JSON object: ``version``, ``saved_at`` (UTC, informational), the ``windows`` with
their ``workspaces``, each workspace's ``tabs`` with the split tree (``root``) whose
leaves are the panes, and the named clients' agent ``views``. Objects are recorded under
their public numbers, UUIDs and short refs, so a restore gives them back the same
handles. Unknown keys are ignored; a file whose ``version`` is higher than :data:`VERSION`
is a *future* file, any other problem makes it *corrupt*: :func:`parse` raises
:class:`StateFileError` saying which.

Versions: 1 held the layout, terminals, agent sessions and views. 2 adds what a server
would otherwise drop on its next save, which is why it is a new version (a version 1
server sets such a file aside instead of saving over it): the old ids of moved panes
(``aliases``), the id counters, metadata tokens of panes and workspaces, notifications,
surfaces' unread flags, the titles their programs set, the commands as their creators
gave them, the agents and tokens of terminals a pane did not show, and workspaces'
proposed titles and last submitted prompts. A version 1 file is read as a
version 2 file that holds none of these.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

VERSION: Literal[2] = 2
"""The version this server writes and the highest it reads (1 and 2 are read)."""

MAX_FILE_BYTES = 64 * 1024 * 1024
"""A larger file is not read (it is set aside as corrupt)."""

MAX_TEXT_CHARS = 256 * 1024
"""Most characters of a terminal's text saved (``restore_text_lines``): the last ones."""

_UUID = r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"
_NUMBER = r"[1-9][0-9]{0,17}"
_PANE_ID = r"^w[0-9A-Z]{1,13}:p[0-9A-Z]{1,13}$"

Uuid = Annotated[str, Field(pattern=_UUID)]
Number = Annotated[int, Field(ge=1, le=10**18)]
Argv = Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]


class StateFileError(Exception):
    """A session file that cannot be restored; ``future`` when a newer server wrote it."""

    def __init__(self, message: str, *, future: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.future = future


class _Model(BaseModel):
    model_config = ConfigDict(strict=True, frozen=True, extra="ignore")


class SessionRefState(_Model):
    """An agent's native session reference (``agents.authority.SessionRef``)."""

    source: Annotated[str, Field(min_length=1)]
    agent: Annotated[str, Field(min_length=1)]
    kind: Literal["id", "path"]
    value: Annotated[str, Field(min_length=1)]


class PaneAgentState(_Model):
    """The agent a pane ran: its name, its session and the command that resumes it.

    ``resume`` was filled in from the agent's manifest when the session was saved.
    ``in_shell``: the agent ran inside the program the pane shows (a shell), so ``resume``
    is typed there; otherwise the agent was that program, and ``resume`` runs in its place.
    """

    name: str | None = None
    session: SessionRefState | None = None
    resume: Argv | None = None
    in_shell: bool = False


class TokenState(_Model):
    """A metadata token; ``expires_at`` is a UTC time stamp (seconds), None for never."""

    value: str
    expires_at: float | None = None


class SurfaceState(_Model):
    """One terminal of a pane: where it works, what it was launched with."""

    uuid: Uuid
    ref: Annotated[str, Field(pattern=f"^surface:{_NUMBER}$")]
    cwd: Annotated[str, Field(min_length=1)]
    command: Argv | None = None
    """The argv it was launched with; None for the shell."""
    requested_command: str | None = None
    """The command as its creator gave it (``initial_command``, a layout's ``command``)."""
    env: dict[str, str] | None = None
    """The env its creator asked for, besides the workspace's."""
    title: str | None = None
    """The name a client gave it (it wins over the program's title)."""
    terminal_title: str | None = None
    """The title its program set (OSC 0/2)."""
    pinned: bool = False
    unread: bool = False
    text: Annotated[str, Field(max_length=MAX_TEXT_CHARS)] | None = None
    """Its last lines of text when the server stopped (only with ``restore_text_lines``)."""
    path: Annotated[str, Field(min_length=1)] | None = None
    """The file a markdown surface shows (absolute); None for a terminal. A markdown
    surface is restored without its file being checked: a read reports it missing."""
    agent: PaneAgentState | None = None
    """The agent of a terminal the pane did not show (the shown one's is the pane's)."""
    tokens: dict[str, TokenState] = Field(default_factory=dict)
    """That terminal's metadata tokens (the shown one's are the pane's)."""


class PaneState(_Model):
    """A leaf of a split tree. ``agent`` and ``tokens`` are those of the terminal the pane
    shows (the selected surface, or the first terminal when a markdown one is selected);
    its other terminals keep theirs in their :class:`SurfaceState`."""

    type: Literal["pane"]
    key: Uuid
    number: Number
    ref: Annotated[str, Field(pattern=f"^pane:{_NUMBER}$")]
    surfaces: Annotated[list[SurfaceState], Field(min_length=1)]
    selected: int = 0
    """Index in ``surfaces`` of the one the pane shows."""
    label: str | None = None
    agent: PaneAgentState | None = None
    aliases: list[Annotated[str, Field(pattern=_PANE_ID)]] = Field(default_factory=list)
    """Public ids it had in other workspaces before it was moved here (they still name it)."""
    tokens: dict[str, TokenState] = Field(default_factory=dict)

    @field_validator("selected")
    @classmethod
    def _index(cls, value: int) -> int:
        if value < 0:
            raise ValueError("selected must be an index into surfaces")
        return value


class SplitState(_Model):
    type: Literal["split"]
    direction: Literal["right", "down"]
    ratio: float
    first: Node
    second: Node

    @field_validator("ratio")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("ratio must be a finite number")
        return value


Node = Annotated[PaneState | SplitState, Field(discriminator="type")]
SplitState.model_rebuild()


class TabState(_Model):
    uuid: Uuid
    number: Number
    root: Node
    focused: Number
    """The number of the tab's focused pane."""
    previous_focus: Number | None = None
    zoomed: bool = False
    label: str | None = None


class WorkspaceState(_Model):
    number: Number
    """The workspace's public number: its id is ``w`` and this number in the id alphabet."""
    uuid: Uuid
    ref: Annotated[str, Field(pattern=f"^workspace:{_NUMBER}$")]
    cwd: Annotated[str, Field(min_length=1)]
    env: dict[str, str] = Field(default_factory=dict)
    label: str | None = None
    description: str = ""
    pinned: bool = False
    color: str | None = None
    tabs: Annotated[list[TabState], Field(min_length=1)]
    active_tab: Number | None = None
    """The active tab's number."""
    next_tab_number: Number = 1
    next_pane_number: Number = 1
    tokens: dict[str, TokenState] = Field(default_factory=dict)
    auto_title: str | None = None
    """The title an agent's hook proposed (``workspace.set_auto_title``)."""
    last_prompt: str | None = None
    """The last message submitted (``workspace.prompt_submit``), and when (UTC seconds)."""
    last_prompt_at: float | None = None


class WindowState(_Model):
    uuid: Uuid
    ref: Annotated[str, Field(pattern=f"^window:{_NUMBER}$")]
    workspaces: list[WorkspaceState]
    selected: Number | None = None
    """The selected workspace's number."""
    previous: Number | None = None


class ViewState(_Model):
    """A named client's agent view, as ``agent.view.set`` received it."""

    client_id: Annotated[str, Field(min_length=1)]
    source: str
    label: str | None = None
    filter: Any = None
    sort: Any = None


class NotificationState(_Model):
    """A notification (``model.notifications.Notification``), naming its workspace and
    surface by UUID; ``created_at`` is a UTC time stamp (seconds)."""

    id: Uuid
    workspace: Uuid
    surface: Uuid | None = None
    title: str = ""
    subtitle: str = ""
    body: str = ""
    created_at: float = 0.0
    is_read: bool = False
    source: str = "api"
    """``api`` (notification.create*) or ``terminal`` (an escape sequence)."""


class SessionState(_Model):
    version: Literal[2]
    saved_at: str = ""
    windows: list[WindowState]
    active_window: int | None = None
    """Index of the active window in ``windows``."""
    views: list[ViewState] = Field(default_factory=list)
    next_workspace_number: Number | None = None
    """The number the next new workspace gets (closed ones are not handed out again)."""
    refs: dict[Literal["window", "workspace", "pane", "surface", "workspace_group"],
               Annotated[int, Field(ge=0, le=10**18)]] = Field(default_factory=dict)
    """The last short ref handed out of each kind."""
    notifications: list[NotificationState] = Field(default_factory=list)


def leaves(node: PaneState | SplitState) -> list[PaneState]:
    """The panes of a tree, left to right."""
    if isinstance(node, PaneState):
        return [node]
    return leaves(node.first) + leaves(node.second)


def parse(data: bytes) -> SessionState:
    """Validate a session file's bytes; raises :class:`StateFileError`."""
    if len(data) > MAX_FILE_BYTES:
        raise StateFileError(f"the file is larger than {MAX_FILE_BYTES} bytes")
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise StateFileError(f"not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise StateFileError("not a JSON object")
    version = raw.get("version")
    if type(version) is not int:
        raise StateFileError("no version number")
    if version > VERSION:
        raise StateFileError(f"written in version {version}; this server reads up to "
                             f"version {VERSION}", future=True)
    if version < 1:
        raise StateFileError(f"version {version} does not exist")
    if version == 1:
        raw["version"] = VERSION  # version 2 only added keys, each with its default
    try:
        state = SessionState.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the file"
        raise StateFileError(f"{where}: {first['msg']}") from None
    _check_unique(state)
    return state


def _check_unique(state: SessionState) -> None:
    """Handles must be unique, and every number a focus or selection names must exist."""
    seen: set[str] = set()

    def once(handle: str, what: str) -> None:
        if handle in seen:
            raise StateFileError(f"{what} {handle} appears twice")
        seen.add(handle)

    for window in state.windows:
        once(window.uuid, "uuid")
        once(window.ref, "ref")
        numbers = set()
        for ws in window.workspaces:
            once(ws.uuid, "uuid")
            once(ws.ref, "ref")
            once(f"workspace number {ws.number}", "the")
            numbers.add(ws.number)
            tabs = set()
            for tab in ws.tabs:
                once(tab.uuid, "uuid")
                if tab.number in tabs:
                    raise StateFileError(f"workspace {ws.number}: tab {tab.number} twice")
                tabs.add(tab.number)
                panes = set()
                for pane in leaves(tab.root):
                    once(pane.key, "uuid")
                    once(pane.ref, "ref")
                    for surface in pane.surfaces:
                        once(surface.uuid, "uuid")
                        once(surface.ref, "ref")
                    if pane.selected >= len(pane.surfaces):
                        raise StateFileError(f"pane {ws.number}:{pane.number}: selected "
                                             f"surface {pane.selected} does not exist")
                    once(f"pane {ws.number}:{pane.number}", "the")
                    panes.add(pane.number)
                for number in (tab.focused, tab.previous_focus):
                    if number is not None and number not in panes:
                        raise StateFileError(f"workspace {ws.number} tab {tab.number}: "
                                             f"focused pane {number} is not in the tab")
            if ws.active_tab is not None and ws.active_tab not in tabs:
                raise StateFileError(f"workspace {ws.number}: active tab {ws.active_tab} "
                                     "does not exist")
        for number in (window.selected, window.previous):
            if number is not None and number not in numbers:
                raise StateFileError(f"window {window.ref}: workspace {number} is not in it")
    if state.active_window is not None and not 0 <= state.active_window < len(state.windows):
        raise StateFileError(f"active_window {state.active_window} does not exist")


def dump(state: SessionState) -> bytes:
    """The file's bytes: indented JSON, keys in model order, absent values left out."""
    return encode(state.model_dump(mode="json", exclude_none=True))


def dump_steps(state: SessionState) -> Generator[None, None, dict[str, Any]]:
    """``state.model_dump(mode="json", exclude_none=True)`` (what :func:`dump` encodes, keys
    in the same order) a tab at a time: yields after each tab, returns the dict."""
    windows = []
    for window in state.windows:
        workspaces = []
        for ws in window.workspaces:
            tabs = []
            for tab in ws.tabs:
                tabs.append(tab.model_dump(mode="json", exclude_none=True))
                yield
            workspaces.append(_dumped_with(ws, "tabs", tabs))
        windows.append(_dumped_with(window, "workspaces", workspaces))
    return _dumped_with(state, "windows", windows)


def _dumped_with(model: BaseModel, name: str, value: list[dict[str, Any]]) -> dict[str, Any]:
    """``model`` dumped as above, with ``value`` (already dumped) as its field ``name``."""
    data = model.model_dump(mode="json", exclude_none=True, exclude={name})
    return {key: value if key == name else data[key] for key in type(model).model_fields
            if key == name or key in data}


def encode(data: dict[str, Any]) -> bytes:
    """The file's bytes of a session already dumped (``model_dump(mode="json",
    exclude_none=True)``): what :func:`dump` writes."""
    return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
