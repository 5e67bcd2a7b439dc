"""Replacing a file so that a crash at any moment leaves the old file or the new one.

The bytes go to a temporary file beside the target (``.<name>.<random>.tmp``), which is
given its mode, flushed with ``fsync`` and renamed over the target; then the directory is
synced so the rename itself survives a crash. Every file cmux rewrites goes through
:func:`write_atomically`: the session file, agents' settings files, saved layouts.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

NEW_FILE_MODE = 0o600
"""The mode :func:`write_atomically` gives a new file when it is not told one."""


def write_atomically(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace the file at ``path`` (made when missing) with ``data``.

    ``mode`` is the new file's permission bits, set whatever the umask; None keeps those of
    the file being replaced (:data:`NEW_FILE_MODE` when there is none). A symlink at
    ``path`` is replaced by the file, so resolve it first to write through it. The
    directory must exist. Raises OSError when the file cannot be written; the old file is
    then left as it was and no temporary file remains.
    """
    if mode is None:
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except FileNotFoundError:
            mode = NEW_FILE_MODE
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    sync_directory(path.parent)


def sync_directory(directory: Path) -> None:
    """Flush ``directory``'s entries (a rename or an unlink in it) to disk; best effort, as
    some file systems cannot sync a directory."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
