"""Directory watching that costs nothing while nothing changes.

:func:`watch` is an async iterator of change batches for a set of directories, one level
deep or whole trees. On Linux it reads inotify directly from the event loop
(``loop.add_reader`` on a non-blocking inotify descriptor): no thread and no timer, so an
idle server is never woken by its watchers, and files that are only read (manifests at
load time) raise no event.

What it follows:

* a directory created or moved into a watched tree is watched at once, and the files
  already in it are reported as added (they may have been written before the watch
  was in place);
* a directory moved out of a tree, or deleted, loses its watches, so nothing is ever
  reported under a path that no longer exists;
* a root that is missing, deleted or moved away is waited for: its nearest existing
  ancestor is watched for new directories only, and when the root appears again it is
  watched and reported as added, with its files;
* a full kernel queue (``IN_Q_OVERFLOW``) makes it rescan: every tree is walked again,
  directories created meanwhile are watched, watches of vanished ones are dropped, and
  each root is reported as changed.

Where inotify cannot be had (another platform, or the per-user inotify limits reached)
it scans the roots every :data:`POLL_INTERVAL_S` seconds instead, and says so in a
warning: that is the only case in which a watcher wakes an idle server.

Batches: the first is empty and comes as soon as the watches are in place (callers use it
to rescan what changed while they were starting); after that a batch is handed over once
no event arrived for ``quiet_ms``, or once it has been collecting for ``debounce_ms``
(sustained writes).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import enum
import errno
import logging
import os
import stat
import struct
import sys
from collections.abc import AsyncGenerator, Callable, Iterable
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = ["POLL_INTERVAL_S", "Change", "Keep", "poll", "watch"]

POLL_INTERVAL_S = 1.0
"""How often the scanning fallback looks at the roots when inotify is not available."""


class Change(enum.IntEnum):
    """What happened to a path."""

    added = 1
    modified = 2
    deleted = 3


Keep = Callable[[Change, str], bool]
"""``keep(change, path)``: True for the changes a caller wants to see."""

Batch = set[tuple[Change, str]]

_IN_MODIFY = 0x2
_IN_ATTRIB = 0x4
_IN_CLOSE_WRITE = 0x8
_IN_MOVED_FROM = 0x40
_IN_MOVED_TO = 0x80
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_DELETE_SELF = 0x400
_IN_MOVE_SELF = 0x800
_IN_Q_OVERFLOW = 0x4000
_IN_IGNORED = 0x8000
_IN_ONLYDIR = 0x1000000
_IN_MASK_ADD = 0x20000000
_IN_ISDIR = 0x40000000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = 0o2000000
_MASK = (_IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO
         | _IN_CREATE | _IN_DELETE | _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_ONLYDIR)
_ANCHOR_MASK = (_IN_CREATE | _IN_MOVED_TO | _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_ONLYDIR
                | _IN_MASK_ADD)
"""An ancestor of a missing root: only what can make the root appear, added to any mask
the same directory already has (it may also be a watched directory)."""
_HEADER = struct.Struct("iIII")


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
        return libc
    except (OSError, AttributeError):
        return None


_LIBC = _libc()


async def watch(roots: Iterable[Path], *, recursive: bool, keep: Keep,
                stop: asyncio.Event, debounce_ms: int = 1000, quiet_ms: int = 50
                ) -> AsyncGenerator[Batch, None]:
    """Yield batches of ``(change, path)`` under ``roots`` that ``keep`` accepts, until
    ``stop`` is set (see the module doc for batching, missing roots and the fallback)."""
    paths = [Path(r) for r in roots]
    try:
        inotify = _Inotify(_LIBC, paths, recursive)
    except OSError as exc:
        log.warning("directory watching falls back to scanning every %.0f s: %s",
                    POLL_INTERVAL_S, exc)
        async for batch in poll(paths, recursive=recursive, keep=keep, stop=stop):
            yield batch
        return
    try:
        inotify.start()
        loop = asyncio.get_running_loop()
        loop.add_reader(inotify.fd, inotify.read)
        try:
            yield set()
            while not stop.is_set():
                if not await _until_either(inotify.arrived, stop):
                    break
                await _settle(inotify.arrived, quiet_ms / 1000, debounce_ms / 1000)
                batch = {(change, path) for change, path in inotify.take()
                         if keep(change, path)}
                if inotify.overflowed:
                    batch |= {(c, p) for c, p in inotify.rescan() if keep(c, p)}
                    batch |= {(Change.modified, str(root)) for root in paths}
                if batch:
                    yield batch
        finally:
            loop.remove_reader(inotify.fd)
    finally:
        inotify.close()


async def _until_either(arrived: asyncio.Event, stop: asyncio.Event) -> bool:
    """Wait for ``arrived`` or ``stop``; False when ``stop`` was set."""
    waits = {asyncio.ensure_future(arrived.wait()), asyncio.ensure_future(stop.wait())}
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()
    return not stop.is_set()


async def _settle(arrived: asyncio.Event, quiet_s: float, debounce_s: float) -> None:
    """Return once nothing arrived for ``quiet_s``, or ``debounce_s`` after the start."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    while True:
        arrived.clear()
        left = min(quiet_s, began + debounce_s - loop.time())
        if left <= 0:
            break
        try:
            await asyncio.wait_for(arrived.wait(), left)
        except TimeoutError:
            break
    arrived.clear()


class _Inotify:
    """One inotify descriptor: the watched directories, the anchors of missing roots and
    the events decoded but not yet taken."""

    def __init__(self, libc: ctypes.CDLL | None, roots: list[Path], recursive: bool) -> None:
        if libc is None:
            raise OSError(errno.ENOSYS, "inotify is not available on this platform")
        self.libc = libc
        self.roots = roots
        self.recursive = recursive
        fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify_init1: {os.strerror(err)}")
        self.fd: int = fd
        self.dirs: dict[int, Path] = {}
        self.anchors: dict[int, Path] = {}
        self.missing: set[Path] = set()
        self.pending: list[tuple[Change, str]] = []
        self.arrived = asyncio.Event()
        self.overflowed = False

    def start(self) -> None:
        """Watch every root there is and anchor the others; nothing is reported."""
        self.missing.update(self.roots)
        self._retry_missing()
        self.pending.clear()

    # -- watches ------------------------------------------------------------------------

    def _add(self, directory: Path, mask: int = _MASK) -> int | None:
        wd: int = self.libc.inotify_add_watch(self.fd, os.fsencode(directory), mask)
        if wd < 0:
            err = ctypes.get_errno()
            if err not in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
                log.warning("cannot watch %s: %s", directory, os.strerror(err))
            return None
        return wd

    def _watch_dir(self, directory: Path) -> bool:
        wd = self._add(directory)
        if wd is None:
            return False
        self.dirs[wd] = directory
        return True

    def _attach(self, root: Path) -> list[Path] | None:
        """Watch ``root`` (and its tree when recursive); the paths found in it, or None
        when it cannot be watched (missing, not a directory)."""
        if self.recursive:
            return self._add_tree(root)
        if not self._watch_dir(root):
            return None
        return _listing(root)

    def _add_tree(self, top: Path) -> list[Path] | None:
        """Watch ``top`` and every directory below it; every path found below it (for a
        directory that appeared after its parent was watched, their creation may have
        been missed). None when ``top`` itself cannot be watched."""
        if not self._watch_dir(top):
            return None
        found: list[Path] = []
        for here, subdirs, files in os.walk(top, onerror=lambda _exc: None):
            base = Path(here)
            found.extend(base / name for name in files)
            for name in subdirs:
                if self._watch_dir(base / name):
                    found.append(base / name)
        return found

    def _drop_tree(self, top: Path) -> None:
        """Stop watching ``top`` and every watched directory below it."""
        for wd, directory in list(self.dirs.items()):
            if directory == top or directory.is_relative_to(top):
                del self.dirs[wd]
                if wd not in self.anchors:
                    self.libc.inotify_rm_watch(self.fd, wd)

    def _anchor_missing(self) -> None:
        """Watch the nearest existing ancestor of every missing root, and nothing else."""
        wanted: dict[int, Path] = {}
        for root in self.missing:
            for ancestor in root.parents:
                wd = self._add(ancestor, _ANCHOR_MASK)
                if wd is not None:
                    wanted[wd] = ancestor
                    break
        for wd in set(self.anchors) - set(wanted):
            if wd not in self.dirs:
                self.libc.inotify_rm_watch(self.fd, wd)
        self.anchors = wanted

    def _retry_missing(self) -> None:
        """Attach the missing roots that exist now (reported as added, with what they
        hold) and anchor the rest again.

        A directory on the way to a root made after it was looked for but before its
        parent's anchor was in place raises no event: after anchoring, whatever exists
        between an anchor and its root is looked at again, until nothing moves.
        """
        while True:
            attached = False
            for root in sorted(self.missing):
                found = self._attach(root)
                if found is not None:
                    attached = True
                    self.missing.discard(root)
                    self.pending.append((Change.added, str(root)))
                    self.pending.extend((Change.added, str(p)) for p in found)
            before = set(self.anchors.values())
            self._anchor_missing()
            moved = set(self.anchors.values()) != before
            if not (attached or moved) or not self._ahead_of_anchors():
                return

    def _ahead_of_anchors(self) -> bool:
        """Whether a directory exists between a missing root (included) and its anchor."""
        anchored = set(self.anchors.values())
        for root in self.missing:
            for path in (root, *root.parents):
                if path in anchored:
                    break
                if path.is_dir():
                    return True
        return False

    def _lose_root(self, root: Path) -> None:
        self._drop_tree(root)
        self.missing.add(root)
        self._anchor_missing()

    def rescan(self) -> list[tuple[Change, str]]:
        """After a queue overflow: walk every root again, watch what is new, drop the
        watches of what vanished; the directories found that were not watched before."""
        self.overflowed = False
        before = dict(self.dirs)
        self.dirs.clear()
        for root in self.roots:
            if root not in self.missing and self._attach(root) is None:
                self.missing.add(root)
        for wd in set(before) - set(self.dirs):
            if wd not in self.anchors:
                self.libc.inotify_rm_watch(self.fd, wd)
        self._retry_missing()
        known = set(before.values())
        return [(Change.added, str(d)) for d in self.dirs.values() if d not in known]

    # -- events -------------------------------------------------------------------------

    def read(self) -> None:
        """The loop's reader callback: decode everything the descriptor holds."""
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            except OSError as exc:
                log.warning("inotify read failed: %s", exc)
                break
            if not data:
                break
            self._decode(data)
        if self.pending or self.overflowed:
            self.arrived.set()

    def _decode(self, data: bytes) -> None:
        offset = 0
        while offset + _HEADER.size <= len(data):
            wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
            raw = data[offset + _HEADER.size:offset + _HEADER.size + length]
            offset += _HEADER.size + length
            if mask & _IN_Q_OVERFLOW:
                self.overflowed = True
                continue
            name = os.fsdecode(raw.split(b"\0", 1)[0])
            if wd in self.anchors:
                self._on_anchor(wd, mask, name)
            directory = self.dirs.get(wd)
            if directory is not None:
                self._on_dir(wd, directory, mask, name)

    def _on_anchor(self, wd: int, mask: int, name: str) -> None:
        anchor = self.anchors[wd]
        if mask & _IN_IGNORED:
            del self.anchors[wd]
        if name:
            # Only a new entry on the way to a missing root can make it appear.
            if not mask & (_IN_CREATE | _IN_MOVED_TO) or not any(
                    root.parts[len(anchor.parts)] == name for root in self.missing
                    if root.is_relative_to(anchor) and root != anchor):
                return
        elif not mask & (_IN_DELETE_SELF | _IN_MOVE_SELF | _IN_IGNORED):
            return
        self._retry_missing()

    def _on_dir(self, wd: int, directory: Path, mask: int, name: str) -> None:
        if mask & _IN_IGNORED:
            del self.dirs[wd]
            if directory in self.roots and directory not in self.missing:
                self._lose_root(directory)
            return
        if not name:
            if mask & (_IN_DELETE_SELF | _IN_MOVE_SELF) and directory in self.roots:
                self.pending.append((Change.deleted, str(directory)))
                self._lose_root(directory)
            return
        path = directory / name
        is_dir = bool(mask & _IN_ISDIR)
        if mask & (_IN_CREATE | _IN_MOVED_TO):
            self.pending.append((Change.added, str(path)))
            if self.recursive and is_dir:
                found = self._add_tree(path) or []
                self.pending.extend((Change.added, str(p)) for p in found)
        elif mask & (_IN_DELETE | _IN_MOVED_FROM):
            self.pending.append((Change.deleted, str(path)))
            if is_dir:
                self._drop_tree(path)
        else:
            self.pending.append((Change.modified, str(path)))

    def take(self) -> list[tuple[Change, str]]:
        out, self.pending = self.pending, []
        return out

    def close(self) -> None:
        os.close(self.fd)


def _listing(directory: Path) -> list[Path]:
    try:
        with os.scandir(directory) as entries:
            return [Path(entry.path) for entry in entries]
    except OSError:
        return []


Snapshot = dict[str, tuple[int, int, bool]]


def _snapshot(roots: list[Path], recursive: bool) -> Snapshot:
    """Every path under ``roots`` (roots included) with its mtime, size and whether it
    is a directory."""
    seen: Snapshot = {}
    todo = list(roots)
    while todo:
        directory = todo.pop()
        try:
            info = directory.stat()
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode):
            continue
        seen[str(directory)] = (info.st_mtime_ns, 0, True)
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    try:
                        entry_info = entry.stat()
                    except OSError:
                        continue
                    is_dir = stat.S_ISDIR(entry_info.st_mode)
                    if is_dir and recursive:
                        todo.append(Path(entry.path))
                    else:
                        seen[entry.path] = (entry_info.st_mtime_ns, entry_info.st_size, is_dir)
        except OSError:
            continue
    return seen


def _difference(before: Snapshot, after: Snapshot) -> list[tuple[Change, str]]:
    changes = [(Change.added, p) for p in after.keys() - before.keys()]
    changes += [(Change.deleted, p) for p in before.keys() - after.keys()]
    changes += [(Change.modified, p) for p in after.keys() & before.keys()
                if after[p] != before[p] and not after[p][2]]
    return changes


async def poll(roots: Iterable[Path], *, recursive: bool, keep: Keep, stop: asyncio.Event,
               interval: float | None = None) -> AsyncGenerator[Batch, None]:
    """:func:`watch` by scanning ``roots`` every ``interval`` seconds (default
    :data:`POLL_INTERVAL_S`): for a machine without inotify. The same batches, except
    that a file written twice within one interval is one change and directories report
    no ``modified``."""
    paths = [Path(r) for r in roots]
    every = POLL_INTERVAL_S if interval is None else interval
    before = await asyncio.to_thread(_snapshot, paths, recursive)
    yield set()
    while True:
        try:
            await asyncio.wait_for(stop.wait(), every)
            return
        except TimeoutError:
            pass
        after = await asyncio.to_thread(_snapshot, paths, recursive)
        batch = {(c, p) for c, p in _difference(before, after) if keep(c, p)}
        before = after
        if batch:
            yield batch
