"""Edits of an agent's own settings files that a user can trust.

Integration plugins install hooks by changing files the user also edits by hand
(``~/.claude/settings.json``, ``~/.codex/config.toml``, ...). Every function here keeps
the same promises, so a plugin only says *what* to change:

* The file is parsed (``json`` or ``tomlkit``), never matched with regexes; a file that
  cannot be parsed or decoded is left untouched and :class:`SettingsError` is raised.
* A change that leaves the parsed content as it was writes nothing: a second identical
  install leaves the file byte-identical, whatever its formatting; on a missing file it
  creates nothing, not even the directory or the lock file.
* Before the first change to a file that already exists, its original bytes are kept in
  ``<name>.cmux-backup`` beside it; a backup that exists is never overwritten. A change
  whose result is exactly the backup's content (an uninstall undoing every change) writes
  the backup's own text, so the file comes back byte for byte.
* Writes are atomic: a temporary file in the same directory with the mode of the file it
  replaces, flushed with ``fsync``, then ``os.replace``; a failed write leaves the old file.
* Read, change and write happen under an exclusive ``fcntl.flock`` on a sidecar
  ``.<name>.cmux-lock`` file, and the file is read again under the lock, so two edits at
  once (two processes, two installs) both land and neither corrupts the file; the sidecar
  is removed when the edit is done.
* A symlinked settings file is edited at its target; the link stays a link.

Every call returns a :class:`FileChange` saying what was (or, with ``dry_run=True``, would
be) done; a dry run writes nothing at all, not even the lock file. The functions block
(file I/O and the lock): call them from a worker thread, as the plugin host does for
integration callables.
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import fcntl
import json
import os
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions

from cmux_core.atomic_file import sync_directory, write_atomically

__all__ = [
    "BACKUP_SUFFIX",
    "FileChange",
    "SettingsError",
    "edit_json",
    "edit_toml",
    "remove_file",
    "write_text",
]

BACKUP_SUFFIX = ".cmux-backup"
LOCK_TIMEOUT_S = 10.0
_NEW_FILE_MODE = 0o644


class SettingsError(Exception):
    """A settings file that cannot be parsed, decoded, locked or written.

    The message names the file and the reason; the file is as it was before the call.
    """


@dataclass(frozen=True)
class FileChange:
    """What one call did to one file (or, for a dry run, would do).

    ``before``/``after`` are the file's text; ``None`` means the file does not exist
    (``after is None`` for a file removed). ``backup`` is the backup written by this call
    (for a dry run: the one it would write), else ``None``.
    """

    path: Path
    before: str | None
    after: str | None
    backup: Path | None = None

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        """A unified diff from ``before`` to ``after``, labelled with the path; ``""`` if none."""
        if not self.changed:
            return ""
        label = str(self.path)
        lines = difflib.unified_diff(
            [] if self.before is None else self.before.splitlines(keepends=True),
            [] if self.after is None else self.after.splitlines(keepends=True),
            fromfile="/dev/null" if self.before is None else label,
            tofile="/dev/null" if self.after is None else label,
        )
        out: list[str] = []
        for line in lines:
            out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
        return "".join(out)

    def summary(self, *, dry_run: bool = False) -> str:
        """One line for a person: what happened (``dry_run``: what would happen) to the file."""
        if not self.changed:
            return f"{self.path}: unchanged"
        verb = "would be " if dry_run else ""
        if self.before is None:
            return f"{self.path}: {verb}created"
        if self.after is None:
            return f"{self.path}: {verb}removed"
        if self.backup is not None:
            kept = "would be kept" if dry_run else "kept"
            return f"{self.path}: {verb}updated (original {kept} in {self.backup})"
        return f"{self.path}: {verb}updated"


@dataclass(frozen=True)
class _Format:
    name: str
    parse: Callable[[str], Any]
    dump: Callable[[Any], str]
    top_level: tuple[type, ...]


def _parse_json(text: str) -> Any:
    return json.loads(text)


def _dump_json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _dump_toml(data: Any) -> str:
    return tomlkit.dumps(data)


_JSON = _Format("JSON", _parse_json, _dump_json, (dict, list))
_TOML = _Format("TOML", tomlkit.parse, _dump_toml, (dict,))


def edit_json(
    path: str | os.PathLike[str],
    change: Callable[[Any], Any],
    *,
    dry_run: bool = False,
    backup: bool = True,
    default: Callable[[], Any] = dict,
) -> FileChange:
    """Change a JSON file through its parsed content.

    A missing (or blank) file starts as ``default()``. ``change(data)`` mutates ``data``
    in place (returning ``None``) or returns the new content (an object or array; any
    other return value is a :class:`SettingsError`); exceptions it raises pass through
    with the file untouched. The new content is written with a 2-space indent,
    key order kept, ending in a newline — and only if it differs from what was parsed.
    """
    return _edit(Path(path), _JSON, change, dry_run=dry_run, backup=backup, default=default)


def edit_toml(
    path: str | os.PathLike[str],
    change: Callable[[Any], Any],
    *,
    dry_run: bool = False,
    backup: bool = True,
    default: Callable[[], Any] = tomlkit.document,
) -> FileChange:
    """Change a TOML file through ``tomlkit``, keeping its comments and layout.

    ``change`` receives a ``tomlkit`` document (a mutable mapping); the rules are those of
    :func:`edit_json`.
    """
    return _edit(Path(path), _TOML, change, dry_run=dry_run, backup=backup, default=default)


def write_text(
    path: str | os.PathLike[str], text: str, *, mode: int = 0o644, dry_run: bool = False
) -> FileChange:
    """Make ``path`` hold exactly ``text`` with permission bits ``mode`` (a hook script, say).

    The same text writes nothing (only the mode is corrected if it differs). No backup is
    kept: this is for files the integration owns.
    """
    given = Path(path).expanduser()
    target = _resolve(given)
    if dry_run:
        before = _read_text(target)
        return FileChange(given, before, text)
    with _locked(target):
        before = _read_text(target)
        if before == text:
            if stat.S_IMODE(target.stat().st_mode) != mode:
                _chmod(target, mode)
            return FileChange(given, before, before)
        _atomic_write(target, text, mode)
    return FileChange(given, before, text)


def remove_file(path: str | os.PathLike[str], *, dry_run: bool = False) -> FileChange:
    """Remove ``path`` (a symlink itself, not its target); a missing file is no change."""
    given = Path(path).expanduser()
    if dry_run:
        return FileChange(given, _read_text(given), None)
    if not given.parent.is_dir():
        return FileChange(given, None, None)
    with _locked(given):
        before = _read_text(given)
        if before is None and not given.is_symlink():
            return FileChange(given, None, None)
        try:
            given.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise SettingsError(f"{given}: cannot remove: {exc.strerror or exc}") from exc
        sync_directory(given.parent)
    return FileChange(given, before, None)


def _edit(
    path: Path,
    fmt: _Format,
    change: Callable[[Any], Any],
    *,
    dry_run: bool,
    backup: bool,
    default: Callable[[], Any],
) -> FileChange:
    given = path.expanduser()
    target = _resolve(given)
    if dry_run or not target.exists():
        # An edit of a missing file that adds nothing (an uninstall on a machine without
        # the agent) must not create the directory or the lock file.
        preview = _apply(given, target, fmt, change, backup=backup, default=default,
                         write=False)
        if dry_run or not preview.changed:
            return preview
    with _locked(target):
        return _apply(given, target, fmt, change, backup=backup, default=default, write=True)


def _apply(
    given: Path,
    target: Path,
    fmt: _Format,
    change: Callable[[Any], Any],
    *,
    backup: bool,
    default: Callable[[], Any],
    write: bool,
) -> FileChange:
    before = _read_text(target)
    if before is None or not before.strip():
        data = default()
    else:
        try:
            data = fmt.parse(before)
        except (ValueError, tomlkit.exceptions.TOMLKitError) as exc:
            raise SettingsError(f"{given}: cannot parse as {fmt.name}: {exc}") from exc
    snapshot = fmt.dump(data)
    result = change(data)
    if result is None:
        result = data
    elif not isinstance(result, fmt.top_level):
        # A stray return value (``lambda d: d.pop(k)``) must not become the whole file.
        raise SettingsError(
            f"{given}: the change returned a {type(result).__name__}, not the new content "
            "(mutate the data in place and return None, or return the whole new content)"
        )
    try:
        after = fmt.dump(result)
    except (TypeError, ValueError) as exc:
        raise SettingsError(f"{given}: the new content is not valid {fmt.name}: {exc}") from exc
    if after in (snapshot, before):
        return FileChange(given, before, before)
    candidate = target.with_name(target.name + BACKUP_SUFFIX)
    original = _original_text(candidate, fmt, after)
    if original is not None:
        after = original
    backup_path: Path | None = None
    if backup and before is not None and not candidate.exists():
        backup_path = candidate
    if write:
        if backup_path is not None:
            _atomic_write(backup_path, before or "", _mode_of(target))
        _atomic_write(target, after, _mode_of(target))
    return FileChange(given, before, after, backup_path)


def _original_text(backup: Path, fmt: _Format, after: str) -> str | None:
    """The backup's own text when the new content is exactly what it holds, so undoing
    every change (an uninstall) gives the user's file back byte for byte."""
    try:
        text = backup.read_text(encoding="utf-8")
        return text if text.strip() and fmt.dump(fmt.parse(text)) == after else None
    except (OSError, UnicodeDecodeError, ValueError, tomlkit.exceptions.TOMLKitError):
        return None


def _resolve(path: Path) -> Path:
    """The file a write must replace: the final target of a symlink chain."""
    return Path(os.path.realpath(path))


def _read_text(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError as exc:
        raise SettingsError(f"{path}: is a directory, not a settings file") from exc
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{path}: cannot parse: not UTF-8 text ({exc})") from exc


def _mode_of(path: Path) -> int:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return _NEW_FILE_MODE


def _chmod(path: Path, mode: int) -> None:
    try:
        path.chmod(mode)
    except OSError as exc:
        raise SettingsError(f"{path}: cannot change mode: {exc.strerror or exc}") from exc


@contextlib.contextmanager
def _locked(target: Path) -> Iterator[None]:
    """Hold the exclusive lock that serialises every edit of ``target``.

    The lock lives in a sidecar file because the settings file itself is replaced (a new
    inode) by each write. The holder removes the sidecar before it lets go, so none is left
    behind; a waiter that then gets the lock of the removed file sees that the path no
    longer names it and locks the path afresh, so two holders never overlap.
    """
    lock = target.with_name(f".{target.name}.cmux-lock")
    deadline = time.monotonic() + LOCK_TIMEOUT_S
    while True:
        fd = _lock_fd(target, lock, deadline)
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(lock))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()
        os.close(fd)  # closing the descriptor releases the lock


def _lock_fd(target: Path, lock: Path, deadline: float) -> int:
    """A descriptor of ``lock`` (created if missing) holding its exclusive ``flock``."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise SettingsError(f"{target}: cannot lock for editing: {exc.strerror or exc}") from exc
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                os.close(fd)
                raise SettingsError(f"{target}: cannot lock: {exc.strerror}") from exc
            if time.monotonic() > deadline:
                os.close(fd)
                raise SettingsError(
                    f"{target}: still being edited by another process after "
                    f"{LOCK_TIMEOUT_S:g} s"
                ) from exc
            time.sleep(0.01)


def _atomic_write(target: Path, text: str, mode: int) -> None:
    try:
        write_atomically(target, text.encode("utf-8"), mode=mode)
    except OSError as exc:
        raise SettingsError(f"{target}: cannot write: {exc.strerror or exc}") from exc
