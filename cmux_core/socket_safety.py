"""Who may control the socket's path, and who is at the other end of a connection.

Both ends of the socket API trust only their own uid. Before binding, the server makes the
socket's directory and checks every directory on the way (:func:`clear_socket_path`);
after a connection is made, each end asks the kernel who the other is
(:func:`peer_credentials`, ``SO_PEERCRED``): the server refuses a client of another uid,
the client refuses such a server before sending anything.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
from pathlib import Path
from typing import NamedTuple

from cmux_core.config import socket_dirs

_CREDENTIALS = struct.Struct("3i")


class ServerAlreadyRunning(RuntimeError):
    pass


class SocketPathError(RuntimeError):
    """The socket path is unsafe or unusable; the message names the path and why."""


class Credentials(NamedTuple):
    """The peer process as the kernel recorded it when the connection was made."""

    pid: int
    uid: int
    gid: int


def peer_credentials(sock: socket.socket) -> Credentials:
    """Who is at the other end of the connected Unix socket ``sock`` (``SO_PEERCRED``).

    Raises OSError when the kernel cannot tell.
    """
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDENTIALS.size)
    return Credentials(*_CREDENTIALS.unpack(raw))


def peer_is_own_user(sock: socket.socket) -> bool:
    """True when the peer process runs as this uid; False when it cannot be told."""
    try:
        return peer_credentials(sock).uid == os.getuid()
    except OSError:
        return False


async def clear_socket_path(path: Path) -> None:
    """Make the socket's directory ready and clear a stale socket of ours at ``path``.

    cmux's own directories (:func:`~cmux_core.config.socket_dirs`) are created 0700; one
    that exists must be a real directory owned by this uid that group and others cannot
    write, and is made 0700. Any other directory is created 0700 when missing and
    otherwise keeps its mode. Every directory on the way to the socket (as named and as
    resolved) must belong to this uid or root and, when group or others can write it,
    carry the sticky bit, so no one else can swap the socket. Something already at the
    path is removed only when it is a socket owned by this uid that no server answers.

    Raises :class:`ServerAlreadyRunning` when a live server answers on the path and
    :class:`SocketPathError` for anything else that makes the path unsafe or unusable;
    a refused path is left as it was found.
    """
    path = Path(os.path.abspath(path))
    try:
        _prepare_socket_dir(path.parent)
        if not os.path.lexists(path):
            return
        st = os.lstat(path)
    except OSError as exc:
        raise SocketPathError(f"cannot use {path}: {exc}") from None
    if not stat.S_ISSOCK(st.st_mode):
        raise SocketPathError(f"{path} exists and is {_kind(st.st_mode)}, not a socket; "
                              "refusing to remove it (pick another --socket)")
    if st.st_uid != os.getuid():
        raise SocketPathError(f"{path} is a socket owned by uid {st.st_uid}, not by uid "
                              f"{os.getuid()}; refusing to replace it")
    if await _socket_is_live(path):
        raise ServerAlreadyRunning(f"a cmux server is already running on {path}")
    try:
        path.unlink()
    except OSError as exc:
        raise SocketPathError(f"cannot remove the stale socket {path}: {exc.strerror}"
                              ) from None


async def _socket_is_live(path: Path) -> bool:
    import asyncio

    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(str(path)), 1.0)
    except (TimeoutError, OSError):
        return False
    writer.close()
    return True


def _prepare_socket_dir(directory: Path) -> None:
    """Check every directory on the way to ``directory``, then create what is missing (0700).

    Raises :class:`SocketPathError` before anything is created or changed.
    """
    own = {Path(os.path.abspath(d)) for d in socket_dirs()}
    missing: list[Path] = []
    existing = directory
    while not os.path.lexists(existing):
        missing.append(existing)
        existing = existing.parent
    real = Path(os.path.realpath(existing))
    for d in [existing, *existing.parents, real, *real.parents]:
        _check_dir(d, strict=d in own)
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            _check_dir(d, strict=d in own)  # made by someone else meanwhile
        except OSError as exc:
            raise SocketPathError(f"cannot create {d}: {exc.strerror}") from None
    for d in [directory, *directory.parents]:
        if d in own:
            try:
                os.chmod(d, 0o700)
            except OSError as exc:
                raise SocketPathError(f"cannot make {d} private: {exc.strerror}") from None


def _check_dir(path: Path, *, strict: bool) -> None:
    """Refuse a directory (or symlink) on the socket's way that someone else controls.

    ``strict`` (cmux's own directories): a real directory of this uid that group and others
    cannot write. Otherwise: owned by this uid or root; writable by group or others only
    with the sticky bit; a symlink owned by this uid or root.
    """
    st = os.lstat(path)
    me = os.getuid()
    if strict:
        if not stat.S_ISDIR(st.st_mode):
            problem = f"is {_kind(st.st_mode)}, not a directory"
        elif st.st_uid != me:
            problem = f"is owned by uid {st.st_uid}, not by uid {me}"
        elif st.st_mode & 0o022:
            problem = (f"can be written by group or others (mode "
                       f"{stat.S_IMODE(st.st_mode):04o})")
        else:
            return
        raise SocketPathError(f"unsafe socket directory {path}: it {problem}; remove it and "
                              "start again")
    if st.st_uid not in (me, 0):
        raise SocketPathError(f"unsafe socket path: {path} is owned by uid {st.st_uid}, who "
                              "could replace the socket; pick another --socket")
    if (stat.S_ISDIR(st.st_mode) and st.st_mode & 0o022
            and not st.st_mode & stat.S_ISVTX):
        raise SocketPathError(f"unsafe socket path: {path} can be written by group or others "
                              f"(mode {stat.S_IMODE(st.st_mode):04o}) and is not sticky; "
                              "pick another --socket")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISREG, "a regular file"), (stat.S_ISFIFO, "a FIFO")):
        if test(mode):
            return name
    return "a special file"
