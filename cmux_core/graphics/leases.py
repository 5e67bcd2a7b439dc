"""Direct file-frame delivery: the server's frame directory and the frames leased from it.

When a client drawing a pane can read files itself (its terminal loads kitty images from a
path, ``t=f``), a frame submitted with ``pane.graphics.stream.direct`` on the pane's
``primary`` layer is not copied into the server: the layer holds a :class:`Lease` (the
file's path and size) and clients are sent the path. A lease holds no image bytes, so it
does not count against the server's image budget.

:class:`FrameDirectory` is the private directory (mode 0700) producers put such files in.
The files are the producer's: the server never writes or deletes one while it runs; it
removes the directory, with whatever is left in it, when it stops.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cmux_core.errors import CmuxError

log = logging.getLogger(__name__)

PREFIX = "cmux-frames-"


@dataclass(frozen=True, slots=True)
class Lease:
    """A frame held as a file: its resolved path inside the frame directory and its size."""

    path: str
    size: int


def _bad(path: str, why: str, **data: object) -> CmuxError:
    return CmuxError("invalid_frame_file", f"{path}: {why}", data or None)


class FrameDirectory:
    """The server's directory of leased frame files."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._real = os.path.realpath(path)

    @classmethod
    def create(cls, socket_path: Path) -> FrameDirectory | None:
        """A new private directory under ``$XDG_RUNTIME_DIR`` when that is a directory, else
        beside the socket; None (no direct delivery) when neither takes one."""
        bases = [os.environ.get("XDG_RUNTIME_DIR", ""), str(socket_path.parent)]
        for base in bases:
            if not base or not os.path.isdir(base):
                continue
            try:
                return cls(Path(tempfile.mkdtemp(prefix=PREFIX, dir=base)))
            except OSError as exc:
                log.warning("cannot create a frame directory in %s: %s", base, exc)
        return None

    def remove(self) -> None:
        """Remove the directory and every file left in it."""
        shutil.rmtree(self.path, ignore_errors=True)

    def holds(self, path: str) -> bool:
        """Whether ``path``, as written (``..`` folded, links not followed), names a file
        in this directory: such a frame is leased, under :meth:`lease`'s checks."""
        if not os.path.isabs(path):
            return False
        folder = os.path.dirname(os.path.normpath(path))
        return any(folder == root or folder.startswith(root + os.sep)
                   for root in (str(self.path), self._real))

    def lease(self, path: str, expected: int) -> Lease:
        """A lease on ``path`` when it is a regular file (not a symbolic link) in this
        directory holding exactly ``expected`` bytes; ``invalid_frame_file`` otherwise."""
        if not os.path.isabs(path):
            raise _bad(path, f"a leased frame needs an absolute path in {self.path}")
        folder, name = os.path.split(os.path.normpath(path))
        real_folder = os.path.realpath(folder)
        if real_folder != self._real and not real_folder.startswith(self._real + os.sep):
            raise _bad(path, f"not in the frame directory {self.path} (see "
                       "pane.graphics.info's file_frame_directory)")
        resolved = os.path.join(real_folder, name)
        try:
            fd = os.open(resolved, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            if os.path.islink(resolved):
                raise _bad(path, "is a symbolic link; a leased frame must be the file "
                           "itself") from None
            raise _bad(path, f"cannot open it: {exc.strerror}") from None
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _bad(path, "is not a regular file")
        if st.st_size != expected:
            raise _bad(path, f"holds {st.st_size} bytes; the frame needs {expected}",
                       bytes=st.st_size, expected=expected)
        return Lease(resolved, expected)


def read_lease(lease: Lease) -> bytes | None:
    """The leased file's bytes for a client that cannot read it itself; None when the file
    is gone, is no longer a regular file or no longer holds the leased size."""
    try:
        fd = os.open(lease.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size != lease.size:
                return None
            data = f.read(lease.size + 1)
    except OSError:
        return None
    return data if len(data) == lease.size else None
