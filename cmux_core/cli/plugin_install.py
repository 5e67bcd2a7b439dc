"""``cmux plugin install|upgrade|uninstall`` and ``plugin list --outdated``: plugin
distributions installed into the environment ``cmux`` runs from, then loaded by a running
server without a restart (``plugin.rescan``).

An install first gets the plugin's wheel (``pip wheel --no-deps``: a name, a URL, a
directory or a wheel file) and reads its metadata: a distribution without a ``cmux`` entry
point, or one that requires another cmux-core version than this one, is refused before
anything is installed. The install itself (``uv pip`` when ``uv`` is on ``PATH``, else
``pip``) is constrained to this cmux-core, so it can never replace the core, and pip
installs all of it or nothing. When the running server then cannot load the plugin, it is
uninstalled again: nothing stays half installed.
"""

from __future__ import annotations

import argparse
import configparser
import importlib.metadata
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from email.parser import HeaderParser
from pathlib import Path
from typing import Any, NamedTuple

from cmux_core.cli.common import client, print_json
from cmux_core.errors import CmuxError
from cmux_core.version import DISTRIBUTION, __version__

GROUP = "cmux"
"""The entry-point group the server loads plugins from."""


class Wheel(NamedTuple):
    """What an install needs to know of a plugin's wheel before installing it."""

    path: Path
    name: str
    version: str
    plugin_ids: list[str]
    requires_core: str | None
    """The cmux-core requirement (``cmux-core>=2``), None without one."""


def pip(command: str, *args: str) -> list[str]:
    """``pip COMMAND ARGS`` for this environment: ``uv pip`` when ``uv`` is on ``PATH``,
    else this interpreter's pip (an uninstall asks no question either way)."""
    uv = shutil.which("uv")
    if uv:
        return [uv, "pip", command, "--python", sys.executable, *args]
    yes = ["--yes"] if command == "uninstall" else []
    return [sys.executable, "-m", "pip", command, *yes, *args]


def _run(argv: list[str], what: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise CmuxError("plugin_install_failed",
                        f"{what} failed: {detail[-1] if detail else done.returncode}")
    return done.stdout


def fetch_wheel(target: str, directory: Path) -> Wheel:
    """The wheel of ``target`` (a wheel file as it is, anything else built or downloaded
    with ``pip wheel --no-deps``), with its metadata read."""
    path = Path(target).expanduser()
    if path.suffix == ".whl" and path.is_file():
        return read_wheel(path)
    if importlib.util.find_spec("pip") is None:
        raise CmuxError("plugin_install_failed", f"cannot get {target}: pip is not installed "
                        f"in this environment ({sys.executable} -m ensurepip adds it), "
                        "or give a wheel file")
    source = str(path.resolve()) if path.exists() else target
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir",
          str(directory), source], f"getting {target}")
    (wheel,) = directory.glob("*.whl")
    return read_wheel(wheel)


def read_wheel(path: Path) -> Wheel:
    """Name, version, ``cmux`` entry points and cmux-core requirement of a wheel."""
    with zipfile.ZipFile(path) as archive:
        info = next((n for n in archive.namelist()
                     if n.count("/") == 1 and n.split("/")[0].endswith(".dist-info")), None)
        if info is None:
            raise CmuxError("plugin_install_failed", f"{path.name} is not a wheel")
        folder = info.split("/")[0]
        metadata = HeaderParser().parsestr(archive.read(f"{folder}/METADATA").decode())
        points = configparser.ConfigParser(delimiters=("=",))
        points.optionxform = str  # type: ignore[assignment,method-assign]
        if f"{folder}/entry_points.txt" in archive.namelist():
            points.read_string(archive.read(f"{folder}/entry_points.txt").decode())
    ids = list(points[GROUP]) if points.has_section(GROUP) else []
    core = [r for r in metadata.get_all("Requires-Dist") or [] if _names_core(r)]
    return Wheel(path, str(metadata["Name"]), str(metadata["Version"]), ids,
                 core[0] if core else None)


def _names_core(requirement: str) -> bool:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    return bool(canonicalize_name(Requirement(requirement).name) == DISTRIBUTION)


def check_wheel(wheel: Wheel) -> None:
    """Refuse a wheel that is no cmux plugin or needs another cmux-core than this one."""
    from packaging.requirements import Requirement

    if not wheel.plugin_ids:
        raise CmuxError("plugin_install_failed", f"{wheel.name} {wheel.version} declares no "
                        f"'{GROUP}' entry point: it is not a cmux plugin")
    if wheel.requires_core is None:
        return
    requirement = Requirement(wheel.requires_core)
    applies = requirement.marker is None or requirement.marker.evaluate()
    if applies and not requirement.specifier.contains(__version__, prereleases=True):
        raise CmuxError("plugin_incompatible", f"{wheel.name} {wheel.version} requires "
                        f"{DISTRIBUTION}{requirement.specifier}, and this is {DISTRIBUTION} "
                        f"{__version__}: not installed")


def install_wheel(wheel: Wheel, *, upgrade: bool, directory: Path) -> None:
    """Install ``wheel`` and what it needs, never another cmux-core than this one."""
    constraints = directory / "constraints.txt"
    constraints.write_text(f"{DISTRIBUTION}=={__version__}\n")
    upgrading = ["--upgrade"] if upgrade else []
    _run(pip("install", "--quiet", "--constraint", str(constraints), *upgrading,
             str(wheel.path)), f"installing {wheel.name}")


def uninstall(name: str) -> None:
    _run(pip("uninstall", name), f"uninstalling {name}")


def rescan(args: argparse.Namespace) -> dict[str, Any] | None:
    """The running server's ``plugin.rescan``; None when no server answers."""
    try:
        with client(args, timeout=60.0) as c:
            return c.call("plugin.rescan")
    except (ConnectionError, FileNotFoundError):
        return None


def cmd_install(args: argparse.Namespace) -> int:
    upgrade = args.plugin_command == "upgrade"
    with tempfile.TemporaryDirectory(prefix="cmux-plugin-") as tmp:
        wheel = fetch_wheel(args.target, Path(tmp))
        check_wheel(wheel)
        install_wheel(wheel, upgrade=upgrade, directory=Path(tmp))
    lines = [f"installed {wheel.name} {wheel.version} into {sys.prefix} "
             f"(plugins: {', '.join(wheel.plugin_ids)})"]
    result = rescan(args)
    if result is None:
        lines.append("no server is running: the plugins load when one starts")
    else:
        failed = [p for p in result["plugins"]
                  if p["plugin_id"] in wheel.plugin_ids and p["status"] != "loaded"]
        if failed:
            uninstall(wheel.name)
            rescan(args)
            reasons = "; ".join(f"{p['plugin_id']}: {p.get('error') or p['status']}"
                                for p in failed)
            raise CmuxError("plugin_install_failed", f"the server could not load "
                            f"{wheel.name} {wheel.version} ({reasons}): uninstalled again")
        lines.append(f"loaded by the running server: {', '.join(wheel.plugin_ids)}")
    return _emit(args, {"type": "plugin_installed", "name": wheel.name,
                        "version": wheel.version, "plugin_ids": wheel.plugin_ids,
                        "rescan": result}, lines)


def plugin_distribution(name: str) -> importlib.metadata.Distribution:
    """The installed distribution ``name``; refuses the core and non-plugins."""
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise CmuxError("plugin_not_found", f"{name} is not installed in {sys.prefix}") from None
    if dist.metadata["Name"].lower() == DISTRIBUTION or not dist.entry_points.select(
            group=GROUP):
        raise CmuxError("invalid_params", f"{name} is not a plugin distribution (its "
                        "integrations come with cmux-core: cmux plugin disable ID)")
    return dist


def cmd_uninstall(args: argparse.Namespace) -> int:
    dist = plugin_distribution(args.name)
    uninstall(args.name)
    result = rescan(args)
    lines = [f"uninstalled {dist.metadata['Name']} {dist.version}"]
    if result is not None:
        lines.append(f"unloaded by the running server: {', '.join(result['removed']) or '-'}")
    return _emit(args, {"type": "plugin_uninstalled", "name": dist.metadata["Name"],
                        "rescan": result}, lines)


def cmd_outdated(args: argparse.Namespace) -> int:
    """``plugin list --outdated``: installed plugin distributions with a newer release."""
    names = {ep.dist.metadata["Name"].lower() for ep in importlib.metadata.entry_points(
        group=GROUP) if ep.dist is not None}
    names.discard(DISTRIBUTION)
    out = _run(pip("list", "--outdated", "--format", "json"), "looking for newer releases")
    rows = [r for r in json.loads(out or "[]") if r["name"].lower() in names]
    lines = [f"{r['name']} {r['version']} -> {r['latest_version']}" for r in rows]
    return _emit(args, {"type": "plugin_outdated", "plugins": rows},
                 lines or ["every plugin distribution is up to date"])


def _emit(args: argparse.Namespace, result: dict[str, Any], lines: list[str]) -> int:
    if args.json:
        print_json(result)
    else:
        print("\n".join(lines))
    return 0
