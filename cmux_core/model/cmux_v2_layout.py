"""The cmux v2 app's workspace layout tree (``workspace.create {layout}``): parse it, build a
workspace from it, describe one as it.

A node is a split ``{"direction": "horizontal"|"vertical", "split": 0..1, "children":
[node, node]}`` (``horizontal`` puts the children side by side, ``vertical`` stacks them;
``split`` is the first child's share, default 0.5, clamped to 0.1-0.9) or a pane
``{"pane": {"surfaces": [surface, ...]}}`` holding at least one terminal surface. A
surface is ``{"type": "terminal", "name"?, "command"?, "cwd"?, "env"?, "focus"?}``:
``name`` is the surface's title (as ``tab.action rename`` gives), ``cwd`` is relative to
the workspace's directory, ``env`` is added to that terminal's environment, and
``command`` is typed into the terminal's shell followed by Enter once it starts. Or it is
``{"type": "markdown", "path", "name"?, "cwd"?, "focus"?}``: a surface showing the file
``path`` (relative to the surface's ``cwd``, else the workspace's directory), which must
exist; ``name`` defaults to the file name.

:func:`parse` checks the whole tree before anything is spawned and raises
``invalid_layout`` naming the offending node (``layout``, ``layout.children[1]``,
``layout.children[0].pane.surfaces[2]``, ...). :func:`build` then creates the
workspace all or nothing: when a terminal cannot start, every terminal already started
is closed and no workspace, pane or event is left behind.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cmux_core import ids
from cmux_core.errors import CmuxError, InvalidEnv
from cmux_core.model import layout, surfaces
from cmux_core.model.mux import Mux
from cmux_core.model.tree import Pane, Surface, Tab, Window, Workspace
from cmux_core.terminal.process import validate_env

DIRECTIONS: dict[str, layout.Direction] = {"horizontal": "right", "vertical": "down"}
NAMES: dict[layout.Direction, str] = {"right": "horizontal", "down": "vertical"}
HEADLESS_TYPES = ("browser", "project")
"""Surface types of the cmux app that need its window (a web view, an Xcode project)."""


def invalid(path: str, message: str) -> CmuxError:
    return CmuxError("invalid_layout", f"Invalid layout at {path}: {message}", {"path": path})


@dataclass(frozen=True, slots=True)
class SurfaceSpec:
    cwd: str
    command: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    focus: bool = False
    name: str | None = None
    path: str | None = None
    """The absolute file of a markdown surface; None for a terminal."""


@dataclass(frozen=True, slots=True)
class PaneSpec:
    surfaces: tuple[SurfaceSpec, ...]


@dataclass(frozen=True, slots=True)
class SplitSpec:
    direction: layout.Direction
    ratio: float
    first: Spec
    second: Spec


Spec = PaneSpec | SplitSpec


def parse(node: object, base_cwd: str, path: str = "layout") -> Spec:
    """The checked tree of ``node``; surface directories are resolved against
    ``base_cwd`` and must exist. Raises ``invalid_layout`` naming the bad node."""
    if not isinstance(node, Mapping):
        raise invalid(path, "a node must be an object")
    if "pane" in node:
        if "direction" in node or "children" in node:
            raise invalid(path, "a node is either a pane or a split, not both")
        return _pane(node["pane"], base_cwd, f"{path}.pane")
    if "children" not in node and "direction" not in node:
        raise invalid(path, "a node needs either pane or direction and children")
    direction = node.get("direction")
    if direction not in DIRECTIONS:
        raise invalid(path, "direction must be horizontal or vertical")
    children = node.get("children")
    if not isinstance(children, list):
        raise invalid(path, "children must be a list of two nodes")
    if len(children) != 2:
        raise invalid(path, f"a split needs exactly two children, not {len(children)}")
    ratio = node.get("split", layout.DEFAULT_RATIO)
    if isinstance(ratio, bool) or not isinstance(ratio, int | float):
        raise invalid(path, "split must be a number between 0 and 1")
    return SplitSpec(DIRECTIONS[direction], layout.clamp_ratio(float(ratio)),
                     parse(children[0], base_cwd, f"{path}.children[0]"),
                     parse(children[1], base_cwd, f"{path}.children[1]"))


def _pane(node: object, base_cwd: str, path: str) -> PaneSpec:
    if not isinstance(node, Mapping):
        raise invalid(path, "pane must be an object")
    surfaces = node.get("surfaces")
    if not isinstance(surfaces, list) or not surfaces:
        raise invalid(path, "a pane needs at least one surface")
    specs = tuple(_surface(s, base_cwd, f"{path}.surfaces[{i}]")
                  for i, s in enumerate(surfaces))
    if all(s.path is not None for s in specs):
        raise invalid(f"{path}.surfaces", "a pane needs at least one terminal surface "
                      "(markdown surfaces are tabs beside a terminal)")
    return PaneSpec(specs)


def _string(node: Mapping[str, Any], key: str, path: str) -> str | None:
    value = node.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid(f"{path}.{key}", "must be a string")
    if "\0" in value:
        raise invalid(f"{path}.{key}", "must not contain NUL")
    return value


def _surface(node: object, base_cwd: str, path: str) -> SurfaceSpec:
    if not isinstance(node, Mapping):
        raise invalid(path, "a surface must be an object")
    kind = node.get("type", "terminal")
    if kind in HEADLESS_TYPES:
        raise invalid(f"{path}.type", f"{kind} surfaces need the cmux app's window; this "
                      "headless server runs terminal surfaces only")
    if kind == "markdown":
        return _markdown(node, base_cwd, path)
    if kind != "terminal":
        raise invalid(f"{path}.type", f"unknown surface type {kind!r}")
    raw_env = node.get("env")
    if raw_env is not None and not isinstance(raw_env, Mapping):
        raise invalid(f"{path}.env", "must be an object of strings")
    try:
        env = validate_env(raw_env, f"{path}.env")
    except InvalidEnv as exc:
        raise invalid(f"{path}.env", exc.message) from None
    focus = node.get("focus", False)
    if not isinstance(focus, bool):
        raise invalid(f"{path}.focus", "must be true or false")
    return SurfaceSpec(_cwd(_string(node, "cwd", path), base_cwd, f"{path}.cwd"),
                       _string(node, "command", path) or None, env, focus,
                       _string(node, "name", path))


def _markdown(node: Mapping[str, Any], base_cwd: str, path: str) -> SurfaceSpec:
    raw = _string(node, "path", path)
    if raw is None or not raw.strip():
        raise invalid(f"{path}.path", "a markdown surface needs the path of its file")
    cwd = _cwd(_string(node, "cwd", path), base_cwd, f"{path}.cwd")
    file = surfaces.document_path(raw, cwd)
    problem = surfaces.document_problem(file)
    if problem is not None:
        raise invalid(f"{path}.path", f"not_found: {problem}")
    focus = node.get("focus", False)
    if not isinstance(focus, bool):
        raise invalid(f"{path}.focus", "must be true or false")
    return SurfaceSpec(cwd, focus=focus, name=_string(node, "name", path), path=file)


def _cwd(raw: str | None, base: str, path: str) -> str:
    if not raw or not raw.strip():
        return base
    target = Path(base) / Path(raw.strip()).expanduser()
    try:
        is_dir = target.is_dir()
    except (OSError, ValueError) as exc:
        raise invalid(path, f"cannot use directory {raw}: {exc}") from None
    if not is_dir:
        raise invalid(path, f"directory {raw} does not exist")
    return str(target)


def panes_of(spec: Spec) -> Iterator[PaneSpec]:
    """The pane nodes left to right, top to bottom (pre-order)."""
    if isinstance(spec, PaneSpec):
        yield spec
    else:
        yield from panes_of(spec.first)
        yield from panes_of(spec.second)


def _tree(spec: Spec, keys: Iterator[str]) -> layout.Node:
    if isinstance(spec, PaneSpec):
        return layout.Leaf(next(keys))
    first = _tree(spec.first, keys)
    return layout.Split(spec.direction, spec.ratio, first, _tree(spec.second, keys))


# -- building ---------------------------------------------------------------------------------


def add_surface(mux: Mux, pane: Pane, *, cwd: str, command: list[str] | None,
                env: dict[str, str] | None) -> Surface:
    """Start one more terminal in ``pane`` (not selected), sized like the pane's others.
    Raises ``spawn_failed`` when it cannot start; the pane is unchanged then."""
    tab = pane.tab
    uuid = ids.new_uuid()
    ref = mux.refs.mint("surface")
    first = pane.terminal
    term = mux._spawn(tab.workspace, tab, pane, uuid, cwd=cwd, command=command, env=env,
                      size=(first.columns, first.rows))
    surface = Surface(uuid, ref, term, pane, command, cwd, env=dict(env) if env else None)
    mux._by_uuid[uuid] = surface
    mux._by_ref[ref] = surface
    pane.surfaces.append(surface)
    mux._attach(pane, surface)
    return surface


def _in_spec_order(mux: Mux, pane: Pane, specs: tuple[SurfaceSpec, ...]) -> None:
    """Give ``pane`` (holding the terminals of ``specs``, in order) its markdown
    surfaces, each where ``specs`` puts it; the first surface is selected."""
    terminals = iter(list(pane.surfaces))
    ordered: list[Surface] = []
    for spec in specs:
        if spec.path is None:
            ordered.append(next(terminals))
            continue
        uuid = ids.new_uuid()
        surface = Surface(uuid, mux.refs.mint("surface"), None, pane, None, spec.cwd,
                          path=spec.path)
        mux._by_uuid[uuid] = surface
        mux._by_ref[surface.ref] = surface
        ordered.append(surface)
    pane.surfaces = ordered
    pane.selected = ordered[0]


def build(mux: Mux, spec: Spec, *, window: Window | None, cwd: str,
          label: str | None = None, env: dict[str, str] | None = None,
          description: str = "", focus: bool = False) -> Workspace:
    """A new workspace laid out as ``spec``, appended to ``window`` (default: the active
    one; a new window when there is none), selected only with ``focus`` (or when its
    window had none selected).

    Every terminal is spawned at its final size before anything is published; a spawn
    failure closes the ones started and raises ``workspace_create_failed``. The pane
    (and surface) marked ``focus`` is focused in the workspace, else the first pane.
    Events: ``workspace_created``, ``tab_created``, ``pane_created`` per pane in order,
    ``layout_updated``, then the focus triple when the active workspace changed.
    """
    window = window or mux.active_window
    new_window = window is None
    if window is None:
        window = Window("", "")  # entered into the mux only once the workspace is built
    ws = Workspace(ids.workspace_id(mux._next_workspace), "", "", window, cwd,
                   dict(env or {}), label=label or None, description=description)
    tab = Tab(ids.new_uuid(), ws.next_tab_number, ws, layout.Leaf(""), "")
    pane_specs = list(panes_of(spec))
    stand_in = [f"\0{i}" for i in range(len(pane_specs))]
    sizes = layout.rects(_tree(spec, iter(stand_in)), mux.area)
    created: list[Pane] = []
    try:
        for key, pane_spec in zip(stand_in, pane_specs, strict=True):
            rect = sizes[key]
            head, *rest = [s for s in pane_spec.surfaces if s.path is None]
            pane = mux._new_pane(tab, cwd=head.cwd, command=None, env=head.env,
                                 size=(max(rect.width, 2), max(rect.height, 1)))
            created.append(pane)
            for surface_spec in rest:
                add_surface(mux, pane, cwd=surface_spec.cwd, command=None,
                            env=surface_spec.env)
            _in_spec_order(mux, pane, pane_spec.surfaces)
    except CmuxError as exc:
        for pane in created:
            mux._discard_pane(pane)
        raise CmuxError("workspace_create_failed", exc.message, exc.data) from None

    before = mux._focus_key()
    if new_window:
        mux._enter_window(window)
    mux._next_workspace += 1
    ws.uuid, ws.ref = mux._mint("workspace", ws)
    ws.next_tab_number += 1
    tab.tree = _tree(spec, iter(p.key for p in created))
    tab.focused = created[0].key
    for pane, pane_spec in zip(created, pane_specs, strict=True):
        for surface, surface_spec in zip(pane.surfaces, pane_spec.surfaces, strict=True):
            surface.title = (surface_spec.name or "").strip() or None
            surface.requested_command = surface_spec.command
            if surface_spec.focus:
                pane.selected = surface
                tab.focused = pane.key
    ws.tabs.append(tab)
    ws.active_tab = tab
    mux._by_uuid[tab.uuid] = tab
    mux._open_workspace(ws, tab, created, focus=focus, before=before)
    for pane, pane_spec in zip(created, pane_specs, strict=True):
        for surface, surface_spec in zip(pane.surfaces, pane_spec.surfaces, strict=True):
            if surface_spec.command and surface.term is not None:
                surface.term.write(surface_spec.command.encode() + b"\n")
    return ws


# -- describing ---------------------------------------------------------------------------------


def describe(mux: Mux, tab: Tab) -> dict[str, Any]:
    """``tab``'s split tree as a cmux v2 layout node: each surface with its title, its
    directory and its command, when it was started with one."""
    return _describe_node(mux, tab.tree)


def _describe_node(mux: Mux, tree: layout.Node) -> dict[str, Any]:
    # A module function, not a closure calling itself: such a closure is a reference cycle
    # that only the cycle collector frees.
    if isinstance(tree, layout.Leaf):
        pane = mux.panes[tree.pane]
        return {"pane": {"surfaces": [_surface_node(mux, s) for s in pane.surfaces]}}
    return {"direction": NAMES[tree.direction], "split": tree.ratio,
            "children": [_describe_node(mux, tree.first), _describe_node(mux, tree.second)]}


def _surface_node(mux: Mux, surface: Surface) -> dict[str, Any]:
    pane = surface.pane
    if surface.path is not None:
        doc: dict[str, Any] = {"type": "markdown", "path": surface.path}
        if surface.title:
            doc["name"] = surface.title
        if pane.selected is surface and mux.panes.get(pane.tab.focused) is pane:
            doc["focus"] = True
        return doc
    cwd = mux.pane_cwd(pane) if pane.selected is surface else surface.launch_cwd
    out: dict[str, Any] = {"type": "terminal"}
    if surface.title:
        out["name"] = surface.title
    if cwd:
        out["cwd"] = cwd
    if surface.requested_command:
        out["command"] = surface.requested_command
    elif surface.command:
        out["command"] = shlex.join(surface.command)
    if pane.selected is surface and mux.panes.get(pane.tab.focused) is pane:
        out["focus"] = True
    return out


def count(node: Mapping[str, Any]) -> tuple[int, int]:
    """``(panes, surfaces)`` of a layout node already checked by :func:`parse` (or made
    by :func:`describe`)."""
    if "pane" in node:
        return 1, len(node["pane"].get("surfaces", []))
    a = count(node["children"][0])
    b = count(node["children"][1])
    return a[0] + b[0], a[1] + b[1]
