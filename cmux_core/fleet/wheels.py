"""Wheels of the running installation, made on this machine without a network.

:func:`running_distributions` names what a remote needs to run what runs here: ``cmux-core``,
the plugin distributions (those with an entry point in group ``cmux``) and every distribution
they require that is installed here, found through :mod:`importlib.metadata`.
:func:`wheel_of` gives each one's wheel, in one of two ways:

* **built** from its source tree when it is an editable install (``direct_url.json`` says
  so): the tree is copied to a temporary directory (building in place would write
  ``build/`` and ``*.egg-info`` into the checkout) and built with this interpreter's ``pip
  wheel --no-deps --no-index --no-build-isolation``, so the build backend (setuptools) must be
  installed here, as the development install has it;
* **repacked** from the installed files otherwise: the files its ``RECORD`` lists under
  ``site-packages``, its metadata and its ``WHEEL`` tags, zipped again with a new
  ``RECORD``. Files installed outside ``site-packages`` (console scripts in ``bin/``) are
  left out: an installer makes the console scripts again from ``entry_points.txt``. A
  distribution without a ``RECORD`` (not installed from a wheel) cannot be repacked.

Neither needs pip's index or cache, nor any network: the wheels are this machine's files.
They therefore suit a remote whose interpreter runs them, which :class:`Wheel.portable`
tells (a pure-Python wheel runs on any Python 3; a compiled one only on the same
implementation, version and machine). Made wheels are kept in ``cache_dir``, keyed by what
they were made from (a built tree's file names, sizes and modification times; a repacked
distribution's ``RECORD``), so asking again costs a directory walk or a hash.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from cmux_core.atomic_file import write_atomically
from cmux_core.errors import CmuxError

CORE = "cmux-core"
PLUGIN_GROUP = "cmux"
BUILD_IGNORE = (".*", "build", "dist", "*.egg-info", "__pycache__", "tests", "bench", "docs")
"""Parts of a source tree no wheel of this project holds. ``plugins/`` stays: the core
wheel carries the first-party integrations from their folders there."""
_LEFT_OUT = {"INSTALLER", "REQUESTED", "RECORD", "direct_url.json"}
_NAME_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)")


def normalise(name: str) -> str:
    """A distribution name as indexes compare them (``Pydantic_Core`` → ``pydantic-core``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True, slots=True)
class Wheel:
    """One distribution's wheel file, made or found in the cache."""

    name: str
    version: str
    path: Path
    sha256: str
    pure: bool
    """Tagged ``py3-none-any``-like: runs on any Python 3."""

    @property
    def filename(self) -> str:
        return self.path.name


def running_distributions(plugins: Iterable[str] | None = None) -> list[str]:
    """``cmux-core``, the plugin distributions and the distributions they need, installed
    here, sorted by normalised name.

    ``plugins`` names the plugin distributions to carry (the caller knows which are enabled);
    None takes every installed distribution with an entry point in group ``cmux``. A required
    distribution is followed when it is installed here and its requirement names no extra;
    one a marker leaves out here is not installed here, so it is not followed either.
    Raises ``CmuxError("distribution_not_found")`` for a named plugin not installed here.
    """
    if plugins is None:
        names = {normalise(ep.dist.name) for ep in
                 importlib.metadata.entry_points(group=PLUGIN_GROUP) if ep.dist is not None}
    else:
        names = {normalise(name) for name in plugins}
    wanted = [CORE, *sorted(names - {CORE})]
    seen: dict[str, importlib.metadata.Distribution] = {}
    while wanted:
        name = wanted.pop()
        if name in seen:
            continue
        dist = installed(name)
        if dist is None:
            raise CmuxError("distribution_not_found",
                            f"{name} is not installed in {sys.prefix}")
        seen[name] = dist
        for requirement in dist.requires or ():
            required, _, marker = requirement.partition(";")
            match = _NAME_RE.match(required.strip())
            if match is None or "extra" in marker:
                continue
            other = normalise(match.group(1))
            if other not in seen and installed(other) is not None:
                wanted.append(other)
    return sorted(seen)


def installed(name: str) -> importlib.metadata.Distribution | None:
    """The installed distribution ``name``: the one an installer recorded (``RECORD``),
    not the ``*.egg-info`` an editable build leaves in its source tree, which is found
    first when that tree is on ``sys.path``."""
    found = list(importlib.metadata.distributions(name=name))
    recorded = [dist for dist in found if dist.read_text("RECORD") is not None]
    candidates = recorded or found
    return candidates[0] if candidates else None


def wheel_of(name: str, cache_dir: Path) -> Wheel:
    """The wheel of the installed distribution ``name``, built or repacked (module doc).

    Raises ``CmuxError("wheel_build_failed")`` when a source tree does not build (with the
    build's output) or a distribution cannot be repacked.
    """
    dist = installed(name)
    if dist is None:
        raise CmuxError("distribution_not_found", f"{name} is not installed in {sys.prefix}")
    source = editable_source(dist)
    if source is not None:
        return _built(dist, source, cache_dir)
    return _repacked(dist, cache_dir)


def editable_source(dist: importlib.metadata.Distribution) -> Path | None:
    """The source tree of an editable install, None for any other."""
    raw = dist.read_text("direct_url.json")
    if not raw:
        return None
    try:
        info = json.loads(raw)
    except ValueError:
        return None
    url = info.get("url", "") if isinstance(info, dict) else ""
    if not (info.get("dir_info", {}).get("editable") and url.startswith("file://")):
        return None
    return Path(url.removeprefix("file://"))


def _tree_files(root: Path) -> Iterator[Path]:
    ignored = shutil.ignore_patterns(*BUILD_IGNORE)
    for top, dirs, files in os.walk(root):
        skip = ignored(top, [*dirs, *files])
        dirs[:] = sorted(d for d in dirs if d not in skip)
        for file in sorted(files):
            if file not in skip:
                yield Path(top) / file


def _fingerprint(parts: Iterable[str]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:20]


def _cached(directory: Path) -> Wheel | None:
    found = sorted(directory.glob("*.whl")) if directory.is_dir() else []
    return _describe(found[0]) if found else None


def _describe(path: Path) -> Wheel:
    """A wheel file as :class:`Wheel` (its name, version and tags from its file name)."""
    name, version, *_, python, abi, platform = path.stem.split("-")
    pure = abi == "none" and platform == "any" and python.startswith(("py3", "py2.py3"))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return Wheel(normalise(name), version, path, digest, pure)


def _built(dist: importlib.metadata.Distribution, source: Path, cache_dir: Path) -> Wheel:
    files = list(_tree_files(source))
    key = _fingerprint(f"{p.relative_to(source)}:{p.stat().st_size}:{p.stat().st_mtime_ns}"
                       for p in files)
    target = cache_dir / "built" / f"{normalise(dist.name)}-{dist.version}-{key}"
    cached = _cached(target)
    if cached is not None:
        return cached
    with tempfile.TemporaryDirectory(prefix="cmux-build-") as tmp:
        copy = Path(tmp) / "src"
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns(*BUILD_IGNORE))
        out = Path(tmp) / "dist"
        done = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index",
             "--no-build-isolation", "--wheel-dir", str(out), str(copy)],
            capture_output=True, text=True, cwd=tmp, check=False)
        wheels = sorted(out.glob("*.whl")) if done.returncode == 0 else []
        if not wheels:
            raise CmuxError("wheel_build_failed", f"building {dist.name} from {source} "
                            f"failed: {last_lines(done.stdout + done.stderr)}")
        target.mkdir(parents=True, exist_ok=True)
        write_atomically(target / wheels[0].name, wheels[0].read_bytes(), mode=0o644)
    return _describe(target / wheels[0].name)


def _repacked(dist: importlib.metadata.Distribution, cache_dir: Path) -> Wheel:
    record = dist.read_text("RECORD")
    wheel_meta = dist.read_text("WHEEL")
    if not record or not wheel_meta:
        raise CmuxError("wheel_build_failed", f"{dist.name} {dist.version} was not installed "
                        "from a wheel (no RECORD or WHEEL): it cannot be repacked")
    target = cache_dir / "repacked" / (f"{normalise(dist.name)}-{dist.version}-"
                                       f"{_fingerprint([record])}")
    cached = _cached(target)
    if cached is not None:
        return cached
    info = Path(str(dist.locate_file(""))) / _info_dir(dist)
    root = info.parent
    prefix = info.name.removesuffix(".dist-info")
    filename = f"{prefix}-{_tag(wheel_meta)}.whl"
    target.mkdir(parents=True, exist_ok=True)
    fd, part = tempfile.mkstemp(dir=target, suffix=".part")
    os.close(fd)
    try:
        _zip_installed(Path(part), root, info, _recorded(record))
        os.replace(part, target / filename)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(part)
        raise
    return _describe(target / filename)


def _info_dir(dist: importlib.metadata.Distribution) -> str:
    for file in dist.files or ():
        if file.parts and file.parts[0].endswith(".dist-info"):
            return file.parts[0]
    raise CmuxError("wheel_build_failed", f"{dist.name}: no .dist-info directory recorded")


def _recorded(record: str) -> list[str]:
    """The paths a RECORD lists that belong in a wheel (module doc)."""
    paths = []
    for line in record.splitlines():
        path = line.rsplit(",", 2)[0] if line.count(",") >= 2 else line
        parts = path.split("/")
        if (not path or path.startswith(("../", "/")) or "__pycache__" in parts
                or path.endswith(".pyc")
                or (parts[0].endswith(".dist-info") and parts[-1] in _LEFT_OUT)):
            continue
        paths.append(path)
    return paths


def _zip_installed(out: Path, root: Path, info: Path, paths: list[str]) -> None:
    """Write the wheel of the files ``paths`` (relative to ``root``) to ``out``, with a new
    RECORD; each file keeps its mode (an executable hook program stays executable)."""
    rows = []
    with zipfile.ZipFile(out, "w") as archive:
        for path in paths:
            data = (root / path).read_bytes()
            archive.writestr(zipfile.ZipInfo.from_file(root / path, path), data,
                             compress_type=zipfile.ZIP_DEFLATED, compresslevel=1)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            rows.append(f"{path},sha256={digest.decode()},{len(data)}")
        rows.append(f"{info.name}/RECORD,,")
        archive.writestr(f"{info.name}/RECORD", "\n".join(rows) + "\n")


def _tag(wheel_meta: str) -> str:
    """The compressed tag set (``cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64``)
    of a WHEEL file's ``Tag:`` lines."""
    tags = [line.split(":", 1)[1].strip().split("-") for line in wheel_meta.splitlines()
            if line.startswith("Tag:")]
    if not tags:
        raise CmuxError("wheel_build_failed", "WHEEL file names no tag")
    return "-".join(".".join(dict.fromkeys(tag[i] for tag in tags)) for i in range(3))


def last_lines(text: str, lines: int = 12) -> str:
    """The end of a tool's output, for an error message."""
    return "\n".join(text.strip().splitlines()[-lines:]) or "no output"
