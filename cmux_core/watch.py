"""Directory watching that costs nothing while nothing changes.

:func:`watch` is an async iterator of change batches for a set of directories, one level
deep or whole trees. On Linux it reads inotify directly from the event loop
(``loop.add_reader`` on a non-blocking inotify descriptor): no thread and no timer, so an
idle server is never woken by its watchers, and files that are only read (manifests at
load time) raise no event. Elsewhere it falls back to ``watchfiles``, which polls.

Batches: the first is empty and comes as soon as the watches are in place (callers use it
to rescan what changed while they were starting); after that a batch is handed over once
no event arrived for ``quiet_ms``, or once it has been collecting for ``debounce_ms``
(sustained writes). A full kernel queue (``IN_Q_OVERFLOW``) reports each root as changed.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import enum
import errno
import logging
import os
import struct
import sys
from collections.abc import AsyncGenerator, Callable, Iterable
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = ["Change", "Keep", "watch"]


class Change(enum.IntEnum):
    """What happened to a path (the values match ``watchfiles.Change``)."""

    added = 1
    modified = 2
    deleted = 3


Keep = Callable[[Change, str], bool]
"""``keep(change, path)``: True for the changes a caller wants to see."""

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
_IN_ISDIR = 0x40000000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = 0o2000000
_MASK = (_IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO
         | _IN_CREATE | _IN_DELETE | _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_ONLYDIR)
_HEADER = struct.Struct("iIII")


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        return libc
    except (OSError, AttributeError):
        return None


_LIBC = _libc()


async def watch(roots: Iterable[Path], *, recursive: bool, keep: Keep,
                stop: asyncio.Event, debounce_ms: int = 1000, quiet_ms: int = 50
                ) -> AsyncGenerator[set[tuple[Change, str]], None]:
    """Yield batches of ``(change, path)`` under ``roots`` that ``keep`` accepts, until
    ``stop`` is set (see the module doc for batching). Roots that do not exist are
    skipped."""
    paths = [Path(r) for r in roots]
    if _LIBC is None:
        async for batch in _watch_polling(paths, recursive, keep, stop, debounce_ms,
                                          quiet_ms):
            yield batch
        return
    inotify = _Inotify(_LIBC, recursive)
    try:
        for root in paths:
            inotify.add_tree(root) if recursive else inotify.add(root)
        loop = asyncio.get_running_loop()
        loop.add_reader(inotify.fd, inotify.read)
        yield set()
        stopped = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                arrived = asyncio.ensure_future(inotify.arrived.wait())
                await asyncio.wait({arrived, stopped}, return_when=asyncio.FIRST_COMPLETED)
                if stop.is_set():
                    arrived.cancel()
                    break
                began = loop.time()
                while True:
                    inotify.arrived.clear()
                    left = min(quiet_ms / 1000, began + debounce_ms / 1000 - loop.time())
                    if left <= 0:
                        break
                    try:
                        await asyncio.wait_for(inotify.arrived.wait(), left)
                    except TimeoutError:
                        break
                inotify.arrived.clear()
                batch = {(change, path) for change, path in inotify.take()
                         if keep(change, path)}
                if inotify.overflowed:
                    inotify.overflowed = False
                    batch |= {(Change.modified, str(root)) for root in paths}
                if batch:
                    yield batch
        finally:
            stopped.cancel()
            loop.remove_reader(inotify.fd)
    finally:
        inotify.close()


class _Inotify:
    """One inotify descriptor: its watches (descriptor → directory) and pending events."""

    def __init__(self, libc: ctypes.CDLL, recursive: bool) -> None:
        self.libc = libc
        self.recursive = recursive
        fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify_init1: {os.strerror(err)}")
        self.fd: int = fd
        self.dirs: dict[int, Path] = {}
        self.pending: list[tuple[Change, str]] = []
        self.arrived = asyncio.Event()
        self.overflowed = False

    def add(self, directory: Path) -> bool:
        wd = self.libc.inotify_add_watch(self.fd, os.fsencode(directory), _MASK)
        if wd < 0:
            err = ctypes.get_errno()
            if err not in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
                log.warning("cannot watch %s: %s", directory, os.strerror(err))
            return False
        self.dirs[wd] = directory
        return True

    def add_tree(self, root: Path) -> list[Path]:
        """Watch ``root`` and every directory below it; the files found (for a directory
        that appeared after its parent was watched, their creation may have been missed)."""
        found: list[Path] = []
        if not self.add(root):
            return found
        for top, subdirs, files in os.walk(root, onerror=lambda _exc: None):
            base = Path(top)
            found.extend(base / name for name in files)
            for name in subdirs:
                if self.add(base / name):
                    found.append(base / name)
        return found

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
            directory = self.dirs.get(wd)
            if directory is None:
                continue
            if mask & _IN_IGNORED:
                del self.dirs[wd]
                continue
            name = raw.split(b"\0", 1)[0]
            if not name:
                if mask & (_IN_DELETE_SELF | _IN_MOVE_SELF):
                    self.pending.append((Change.deleted, str(directory)))
                continue
            path = directory / os.fsdecode(name)
            if mask & (_IN_CREATE | _IN_MOVED_TO):
                self.pending.append((Change.added, str(path)))
                if self.recursive and mask & _IN_ISDIR:
                    self.pending.extend((Change.added, str(p)) for p in self.add_tree(path))
            elif mask & (_IN_DELETE | _IN_MOVED_FROM):
                self.pending.append((Change.deleted, str(path)))
            else:
                self.pending.append((Change.modified, str(path)))

    def take(self) -> list[tuple[Change, str]]:
        out, self.pending = self.pending, []
        return out

    def close(self) -> None:
        os.close(self.fd)


async def _watch_polling(roots: list[Path], recursive: bool, keep: Keep,
                         stop: asyncio.Event, debounce_ms: int, quiet_ms: int
                         ) -> AsyncGenerator[set[tuple[Change, str]], None]:
    """Where inotify is not available: ``watchfiles`` (a polling thread)."""
    import watchfiles

    existing = [r for r in roots if r.exists()]
    yield set()
    if not existing:
        await stop.wait()
        return
    async for changes in watchfiles.awatch(
            *existing, stop_event=stop, debounce=debounce_ms, step=quiet_ms,
            recursive=recursive, watch_filter=lambda c, p: keep(Change(int(c)), p)):
        batch = {(Change(int(c)), p) for c, p in changes}
        if batch:
            yield batch
