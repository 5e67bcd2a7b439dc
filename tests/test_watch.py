"""The directory watcher on real directories: moves in and out of a tree, a root deleted
and made again, a root that does not exist yet, a kernel queue overflow, and the scanning
fallback.

Each test ends a stretch of changes with a marker file and collects batches until the
marker is reported: inotify keeps one descriptor's events in order, so whatever a change
before the marker produced has been reported by then.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncGenerator, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from cmux_core import watch as watch_module
from cmux_core.watch import Batch, Change, poll, watch

Changes = set[tuple[Change, str]]


def everything(_change: Change, _path: str) -> bool:
    return True


class Watched:
    """A running watch and what it reported so far."""

    def __init__(self, batches: AsyncGenerator[Batch, None]) -> None:
        self.batches = batches
        self.seen: Changes = set()

    async def until(self, path: Path, change: Change = Change.added,
                    timeout: float = 30.0) -> Changes:
        """Collect batches until ``(change, path)`` is among them; everything collected."""
        got: Changes = set()
        while (change, str(path)) not in got:
            got |= await asyncio.wait_for(self.batches.__anext__(), timeout)
        self.seen |= got
        return got

    async def mark(self, directory: Path, name: str) -> Changes:
        """Write a marker file into ``directory`` and collect until it is reported."""
        marker = directory / name
        marker.write_text("marker\n")
        return await self.until(marker)


def run(recursive: bool, roots: list[Path],
        body: Callable[[Watched], Coroutine[Any, Any, None]]) -> None:
    async def main() -> None:
        stop = asyncio.Event()
        batches = watch(roots, recursive=recursive, keep=everything, stop=stop, quiet_ms=20,
                        debounce_ms=200)
        watched = Watched(batches)
        assert await asyncio.wait_for(batches.__anext__(), 30) == set()
        try:
            await body(watched)
        finally:
            stop.set()
            await batches.aclose()

    asyncio.run(main())


def under(changes: Changes, top: Path) -> set[str]:
    return {p for _c, p in changes if Path(p) == top or Path(p).is_relative_to(top)}


def test_a_folder_moved_out_of_the_tree_is_no_longer_reported(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "pkg" / "deep").mkdir(parents=True)
    outside = tmp_path / "outside"

    async def body(w: Watched) -> None:
        (root / "pkg").rename(outside)
        got = await w.until(root / "pkg", Change.deleted)
        assert (Change.deleted, str(root / "pkg")) in got
        (outside / "late.py").write_text("x = 1\n")
        (outside / "deep" / "later.py").write_text("x = 2\n")
        await w.mark(root, "after.txt")
        assert not under(w.seen, root / "pkg" / "late.py")
        assert not under(w.seen, root / "pkg" / "deep" / "later.py")
        assert not under(w.seen, outside)

    run(True, [root], body)


def test_a_folder_moved_into_the_tree_is_reported_with_its_files_and_watched(
        tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    incoming = tmp_path / "incoming"
    (incoming / "sub").mkdir(parents=True)
    (incoming / "sub" / "mod.py").write_text("x = 1\n")

    async def body(w: Watched) -> None:
        incoming.rename(root / "pkg")
        got = await w.until(root / "pkg" / "sub" / "mod.py")
        assert (Change.added, str(root / "pkg")) in got
        assert (Change.added, str(root / "pkg" / "sub")) in got
        (root / "pkg" / "sub" / "mod.py").write_text("x = 2\n")
        await w.until(root / "pkg" / "sub" / "mod.py", Change.modified)

    run(True, [root], body)


def test_a_folder_moved_within_the_tree_reports_under_its_new_name(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "old" / "deep").mkdir(parents=True)

    async def body(w: Watched) -> None:
        (root / "old").rename(root / "new")
        await w.until(root / "new")
        (root / "new" / "deep" / "mod.py").write_text("x = 1\n")
        await w.until(root / "new" / "deep" / "mod.py")
        await w.mark(root, "after.txt")
        assert not under(w.seen - {(Change.deleted, str(root / "old"))}, root / "old")

    run(True, [root], body)


@pytest.mark.parametrize("recursive", [True, False], ids=["tree", "flat"])
def test_a_deleted_root_is_reported_and_followed_again_once_made_again(
        tmp_path: Path, recursive: bool) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)

    async def body(w: Watched) -> None:
        shutil.rmtree(root)
        await w.until(root, Change.deleted)
        root.mkdir()
        (root / "made.toml").write_text("a = 1\n")
        got = await w.until(root / "made.toml")
        assert (Change.added, str(root)) in w.seen | got
        (root / "made.toml").write_text("a = 2\n")
        await w.until(root / "made.toml", Change.modified)

    run(recursive, [root], body)


def test_a_root_moved_away_reports_nothing_from_its_new_place(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    away = tmp_path / "away"

    async def body(w: Watched) -> None:
        root.rename(away)
        await w.until(root, Change.deleted)
        (away / "stray.toml").write_text("a = 1\n")
        root.mkdir()
        await w.mark(root, "back.toml")
        assert not under(w.seen, away)
        assert not under(w.seen, root / "stray.toml")

    run(False, [root], body)


def test_a_root_that_does_not_exist_yet_is_followed_once_it_appears(tmp_path: Path) -> None:
    root = tmp_path / "a" / "b" / "root"

    async def body(w: Watched) -> None:
        (tmp_path / "unrelated").mkdir()
        root.parent.mkdir(parents=True)
        root.mkdir()
        (root / "first.toml").write_text("a = 1\n")
        got = await w.until(root / "first.toml")
        assert (Change.added, str(root)) in w.seen | got
        assert not under(w.seen, tmp_path / "unrelated")

    run(False, [root], body)


def test_a_queue_overflow_rescans_and_watches_folders_made_meanwhile(tmp_path: Path) -> None:
    """The loop is held (no await) while more events than the kernel queues are made, so
    the queue overflows for real; a folder made then is found only by the rescan."""
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    root = tmp_path / "root"
    (root / "flood").mkdir(parents=True)

    async def body(w: Watched) -> None:
        for i in range(limit // 2 + 64):
            fd = os.open(root / "flood" / f"f{i}", os.O_CREAT | os.O_WRONLY, 0o600)
            os.close(fd)
        (root / "made" / "during").mkdir(parents=True)
        got = await w.until(root, Change.modified)
        assert (Change.added, str(root / "made" / "during")) in got
        (root / "made" / "during" / "mod.py").write_text("x = 1\n")
        await w.until(root / "made" / "during" / "mod.py")

    run(True, [root], body)


def test_the_scanning_fallback_reports_the_same_changes(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "old.toml").write_text("a = 1\n")

    async def main() -> None:
        stop = asyncio.Event()
        batches = poll([root, tmp_path / "later"], recursive=True, keep=everything,
                       stop=stop, interval=0.05)
        w = Watched(batches)
        assert await asyncio.wait_for(batches.__anext__(), 30) == set()
        (root / "sub" / "new.py").write_text("x = 1\n")
        await w.until(root / "sub" / "new.py")
        os.utime(root / "old.toml", ns=(1, 1))
        await w.until(root / "old.toml", Change.modified)
        (root / "old.toml").unlink()
        await w.until(root / "old.toml", Change.deleted)
        (tmp_path / "later").mkdir()
        (tmp_path / "later" / "x.toml").write_text("b = 1\n")
        await w.until(tmp_path / "later" / "x.toml")
        stop.set()
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(batches.__anext__(), 30)

    asyncio.run(main())


def test_watch_scans_when_inotify_cannot_be_had(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
        ) -> None:
    """Without inotify (another platform, or the per-user limit reached): a machine like
    that cannot be made here, so the loaded C library is taken away for this test."""
    monkeypatch.setattr(watch_module, "_LIBC", None)
    monkeypatch.setattr(watch_module, "POLL_INTERVAL_S", 0.05)

    async def body(w: Watched) -> None:
        await w.mark(tmp_path, "seen.toml")

    run(False, [tmp_path], body)
    assert "falls back to scanning" in caplog.text


def test_a_root_made_just_before_its_parent_is_watched_is_not_missed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The root appears after the watcher looked for it and before the watch of its new
    parent is in place, so no event ever tells of it. That window is microseconds wide, so
    the test makes the root in it by wrapping the step that adds the parent's watch; the
    watcher and the kernel's events stay real."""
    root = tmp_path / "a" / "root"
    anchor = watch_module._Inotify._anchor_missing
    made: list[Path] = []

    def anchor_after_making_the_root(self: Any) -> None:
        if (tmp_path / "a").is_dir() and not made:
            root.mkdir()
            made.append(root)
        anchor(self)

    monkeypatch.setattr(watch_module._Inotify, "_anchor_missing", anchor_after_making_the_root)

    async def body(w: Watched) -> None:
        (tmp_path / "a").mkdir()
        await w.until(root, timeout=10)
        (root / "first.toml").write_text("a = 1\n")
        await w.until(root / "first.toml", timeout=10)
        assert made == [root]

    run(False, [root], body)
