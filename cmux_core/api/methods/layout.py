"""The ``layout.*`` methods: a tab's portable layout (``layout.export``, ``layout.apply``,
``layout.set_split_ratio``) and cmux v2's named saved layouts (``layout.save``,
``layout.list``, ``layout.get``, ``layout.open``, ``layout.delete``).

A saved layout is one JSON file, ``$XDG_CONFIG_HOME/cmux/layouts/<name>.json``
(``~/.config/cmux/layouts/``)::

    {"version": 1, "name": "review", "saved_at": 1764660000.0,
     "workspace": {"title": "api", "layout": <cmux layout node>}}

``workspace.layout`` is the tree ``workspace.create {layout}`` takes (see
:mod:`cmux_core.model.cmux_v2_layout`): saving describes the workspace's active tab, and
opening builds a new workspace from it, so a file written by hand opens the same way.
A name is 1-128 characters, not starting with ``.``, without ``/``, NUL or control
characters. Files are written whole (a temporary file renamed over the old one).

"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from cmux_core.api.context import Call
from cmux_core.api.dispatch import MethodTable, Result
from cmux_core.api.methods.shared.creation import (
    create_from_layout,
    created_result,
    creation_focus,
    resolve_cwd,
    trimmed,
)
from cmux_core.api.methods.shared.params import Empty
from cmux_core.api.methods.shared.routing import herdr_workspace
from cmux_core.api.methods.shared.services import ModelServices
from cmux_core.api.methods.shared.workspace_routing import Routing as WorkspaceRouting
from cmux_core.api.methods.shared.workspace_routing import route_workspace
from cmux_core.atomic_file import write_atomically
from cmux_core.config import config_dir
from cmux_core.errors import CmuxError, InvalidParams, NotFound
from cmux_core.hookspecs import Params
from cmux_core.model import arrange, cmux_v2_layout
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Tab


class LayoutServices(ModelServices):
    """What these ``layout.*`` handlers use."""


methods = MethodTable()


class TabOrPane(Params):
    tab_id: str | None = None
    pane_id: str | None = None


def layout_tab(mux: Mux, tab_id: str | None, pane_id: str | None) -> Tab:
    """``tab_id``'s tab, ``pane_id``'s tab, or the active tab; else ``layout_not_found``."""
    tab: Tab | None
    if tab_id is not None and pane_id is not None:
        raise CmuxError("layout_not_found", "give either tab_id or pane_id, not both")
    if tab_id is not None:
        tab = mux.find_tab(tab_id)
    elif pane_id is not None:
        pane = mux.find_pane(pane_id)
        tab = pane.tab if pane is not None else None
    else:
        ws = mux.active_workspace()
        tab = ws.active_tab if ws is not None else None
    if tab is None:
        raise CmuxError("layout_not_found", "layout not found")
    return tab


@methods.method("layout.export", TabOrPane)
async def layout_export(call: Call[LayoutServices], p: TabOrPane) -> Result:
    """The tab as a portable tree: splits, ratios, and each pane's label, cwd and command."""
    mux = call.ctx.mux
    return {"type": "layout_export",
            "layout": arrange.describe(mux, layout_tab(mux, p.tab_id, p.pane_id))}


class ApplyParams(Params):
    workspace_id: str | None = None
    tab_id: str | None = None
    tab_label: str | None = None
    focus: bool = False
    root: Any


@methods.method("layout.apply", ApplyParams)
async def layout_apply(call: Call[LayoutServices], p: ApplyParams) -> Result:
    """Build a new tab from a portable tree, or replace ``tab_id`` with it; all or nothing."""
    mux = call.ctx.mux
    if p.tab_id is not None and p.workspace_id is not None:
        raise CmuxError("invalid_target", "give either workspace_id or tab_id, not both")
    replace = mux.tab(p.tab_id) if p.tab_id is not None else None
    ws = replace.workspace if replace is not None else herdr_workspace(mux, p.workspace_id)
    label = trimmed(p.tab_label)
    return {"type": "layout_apply",
            "layout": arrange.apply(mux, ws, p.root, replace=replace, tab_label=label,
                                    focus=p.focus)}


class SplitRatioParams(TabOrPane):
    path: list[bool]
    ratio: float


@methods.method("layout.set_split_ratio", SplitRatioParams)
async def layout_set_split_ratio(call: Call[LayoutServices], p: SplitRatioParams) -> Result:
    """Set the ratio of the split at ``path`` (false = first child) from the root."""
    mux = call.ctx.mux
    tab = layout_tab(mux, p.tab_id, p.pane_id)
    return {"type": "layout_split_ratio_set",
            "layout": arrange.set_split_ratio(mux, tab, p.path, p.ratio)}


FORMAT_VERSION = 1


MAX_NAME = 128


def layouts_dir() -> Path:
    return config_dir() / "layouts"


def _path(name: str | None) -> tuple[str, Path]:
    """The checked name and its file; ``invalid_params`` naming ``name`` when unusable."""
    if name is None or not name.strip():
        raise InvalidParams("name", "Missing or invalid name")
    name = name.strip()
    if len(name) > MAX_NAME:
        raise InvalidParams("name", f"must be at most {MAX_NAME} characters")
    if name.startswith(".") or "/" in name or any(ord(c) < 32 or c == "\x7f" for c in name):
        raise InvalidParams("name", "must not start with '.' or hold '/' or control "
                            "characters")
    return name, layouts_dir() / f"{name}.json"


def _io_error(action: str, path: Path, exc: OSError) -> CmuxError:
    return CmuxError("layout_store_failed", f"cannot {action} {path}: {exc.strerror or exc}",
                     {"path": str(path), "errno": exc.errno})


def _load(name: str, path: Path) -> dict[str, Any]:
    """The saved document, checked enough to be opened; ``layout_not_found`` when absent."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise NotFound("layout", name, f"no saved layout named {name}") from None
    except OSError as exc:
        raise _io_error("read", path, exc) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CmuxError("invalid_layout", f"saved layout {name} is not valid JSON: {exc}",
                        {"path": str(path)}) from None
    workspace = doc.get("workspace") if isinstance(doc, dict) else None
    if not isinstance(workspace, dict) or not isinstance(workspace.get("layout"), dict):
        raise CmuxError("invalid_layout", f"saved layout {name} has no workspace.layout",
                        {"path": str(path)})
    return dict(doc)


def _write(path: Path, doc: dict[str, Any]) -> None:
    data = (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, data)
    except OSError as exc:
        raise _io_error("write", path, exc) from None


def _summary(name: str, doc: dict[str, Any]) -> dict[str, Any]:
    workspace = doc["workspace"]
    try:
        panes, surfaces = cmux_v2_layout.count(workspace["layout"])
    except (KeyError, IndexError, TypeError, AttributeError):
        panes = surfaces = 0
    return {"name": name, "title": workspace.get("title"), "saved_at": doc.get("saved_at"),
            "pane_count": panes, "surface_count": surfaces}


class SaveParams(WorkspaceRouting):
    name: str | None = None
    overwrite: bool = False


@methods.method("layout.save", SaveParams)
async def layout_save(call: Call[LayoutServices], p: SaveParams) -> Result:
    """Save the workspace's (default: the selected one's) active tab under ``name``;
    ``layout_exists`` unless ``overwrite`` when the name is taken."""
    mux = call.ctx.mux
    name, path = _path(p.name)
    ws = route_workspace(mux, p)
    if path.exists() and not p.overwrite:
        raise CmuxError("layout_exists", f"a layout named {name} exists; pass overwrite",
                        {"name": name})
    assert ws.active_tab is not None
    doc = {"version": FORMAT_VERSION, "name": name, "saved_at": time.time(),
           "workspace": {"title": mux.workspace_label(ws),
                         "layout": cmux_v2_layout.describe(mux, ws.active_tab)}}
    _write(path, doc)
    return {"type": "layout_saved", **_summary(name, doc), "path": str(path),
            "workspace_id": ws.uuid, "workspace_ref": ws.ref}


@methods.method("layout.list", Empty)
async def layout_list(call: Call[LayoutServices], p: Empty) -> Result:
    """Every saved layout, by name; a file that cannot be read is listed with ``error``."""
    rows = []
    try:
        files = sorted(layouts_dir().glob("*.json"))
    except OSError:
        files = []
    for path in files:
        name = path.stem
        if name.startswith("."):
            continue
        try:
            rows.append(_summary(name, _load(name, path)))
        except CmuxError as exc:
            rows.append({"name": name, "error": exc.message})
    return {"type": "layout_list", "layouts": rows}


class NameParams(Params):
    name: str | None = None


@methods.method("layout.get", NameParams)
async def layout_get(call: Call[LayoutServices], p: NameParams) -> Result:
    """The saved document: ``workspace.title`` and ``workspace.layout``."""
    name, path = _path(p.name)
    doc = _load(name, path)
    return {"type": "layout", **_summary(name, doc), "workspace": doc["workspace"]}


class OpenParams(NameParams):
    window_id: str | None = None
    title: str | None = None
    cwd: str | None = None
    focus: bool | None = None


@methods.method("layout.open", OpenParams)
async def layout_open(call: Call[LayoutServices], p: OpenParams) -> Result:
    """A new workspace built from the saved layout (all or nothing, as
    ``workspace.create {layout}``); selected only with ``focus`` (or ``[cmux]
    focus_on_create``)."""
    mux = call.ctx.mux
    name, path = _path(p.name)
    doc = _load(name, path)
    window = mux.window(p.window_id) if p.window_id else None
    title = trimmed(p.title) or doc["workspace"].get("title")
    ws = create_from_layout(mux, doc["workspace"]["layout"], window=window,
                            cwd=resolve_cwd(p.cwd, "cwd"),
                            label=title if isinstance(title, str) else None,
                            focus=creation_focus(call.ctx.settings, p.focus))
    return {**created_result(mux, call.ctx.agents, ws), "name": name}


@methods.method("layout.delete", NameParams)
async def layout_delete(call: Call[LayoutServices], p: NameParams) -> Result:
    """Remove the saved layout; ``layout_not_found`` when there is none."""
    name, path = _path(p.name)
    try:
        path.unlink()
    except FileNotFoundError:
        raise NotFound("layout", name, f"no saved layout named {name}") from None
    except OSError as exc:
        raise _io_error("delete", path, exc) from None
    return {"type": "layout_deleted", "name": name, "deleted": True}
