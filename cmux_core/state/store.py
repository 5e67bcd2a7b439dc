"""The session file on disk: lock it, read it, write it atomically, set a bad one aside.

A write goes through :func:`~cmux_core.atomic_file.write_atomically` (mode 0600, in a
directory made 0700 when missing): a temporary file beside the real one, flushed with
``fsync`` and renamed over it, then the directory synced, so a crash at any moment leaves
either the old file or the new one, never a mixture. A file that cannot be restored is
renamed, not deleted: ``<name>.json.corrupt-<UTC time>`` or
``<name>.json.future-<UTC time>``.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from cmux_core.atomic_file import write_atomically
from cmux_core.state.schema import MAX_FILE_BYTES, SessionState, StateFileError, parse


def read(path: Path) -> SessionState | None:
    """The session saved at ``path``; None when there is no file.

    Raises :class:`StateFileError` when the file cannot be read or restored (future is
    set when a newer server wrote it).
    """
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateFileError(f"cannot read it: {exc.strerror or exc}") from None
    return parse(data)


def claim(path: Path) -> int | None:
    """Lock ``<path>.lock`` for this process, so no other server uses the same file.

    Returns the lock's descriptor (the lock lasts until it is closed or the process ends,
    however it ends), or None when another process holds it. Raises OSError when the lock
    file cannot be made.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def set_aside(path: Path, future: bool) -> Path:
    """Rename ``path`` to a free name with a ``.corrupt-`` or ``.future-`` suffix and the
    UTC time; returns the new path. Raises OSError when it cannot be renamed."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    base = f"{path.name}.{'future' if future else 'corrupt'}-{stamp}"
    target = path.with_name(base)
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{base}.{n}")
    os.rename(path, target)
    return target


def write(path: Path, data: bytes) -> None:
    """Replace the file at ``path`` with ``data`` atomically (see the module docstring).

    Raises OSError when the directory or file cannot be made or written; the old file
    is then left as it was and no temporary file remains.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomically(path, data, mode=0o600)
