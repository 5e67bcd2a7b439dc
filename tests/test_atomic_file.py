"""The one atomic write every rewritten file goes through: mode, replacement, cleanup."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from cmux_core.atomic_file import NEW_FILE_MODE, write_atomically


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_replaced_file_keeps_its_mode_and_a_new_one_is_private(tmp_path: Path) -> None:
    kept = tmp_path / "kept.json"
    kept.write_bytes(b"old")
    kept.chmod(0o640)
    write_atomically(kept, b"new")
    assert kept.read_bytes() == b"new"
    assert _mode(kept) == 0o640
    fresh = tmp_path / "fresh.json"
    write_atomically(fresh, b"first")
    assert _mode(fresh) == NEW_FILE_MODE == 0o600


def test_a_given_mode_wins_over_the_old_one_and_the_umask(tmp_path: Path) -> None:
    path = tmp_path / "hook"
    path.write_bytes(b"old")
    path.chmod(0o600)
    old_umask = os.umask(0o077)
    try:
        write_atomically(path, b"#!/bin/sh\n", mode=0o755)
    finally:
        os.umask(old_umask)
    assert _mode(path) == 0o755


def test_the_content_is_replaced_by_a_rename_not_rewritten_in_place(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_bytes(b"one" * 1000)
    with open(path, "rb") as reader:  # holds the old file, as a concurrent reader would
        old_inode = os.fstat(reader.fileno()).st_ino
        write_atomically(path, b"two")
        assert reader.read() == b"one" * 1000
    assert path.read_bytes() == b"two"
    assert os.stat(path).st_ino != old_inode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "keep").write_text("x")
    with pytest.raises(OSError):
        write_atomically(blocked, b"data")  # a directory cannot be renamed over
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocked"]
    assert (blocked / "keep").read_text() == "x"


def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``os.fsync`` is made to fail: a full disk or an I/O error cannot be had on demand."""
    path = tmp_path / "s.json"
    path.write_bytes(b"old")

    def failing_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="No space left"):
        write_atomically(path, b"new")
    monkeypatch.undo()
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]


def test_a_missing_directory_is_an_error_not_made(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_atomically(tmp_path / "absent" / "s.json", b"data")
    assert list(tmp_path.iterdir()) == []
