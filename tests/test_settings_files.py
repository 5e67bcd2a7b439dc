"""The settings-file library: parsed edits, no-op reruns, backups, atomic writes, locking."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from cmux_core.plugin_host.settings_files import (
    BACKUP_SUFFIX,
    FileChange,
    SettingsError,
    edit_json,
    edit_toml,
    remove_file,
    write_text,
)

USER_JSON = """{
    "model": "opus",
    "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "my-own-hook"}]}]},
    "zeta": 1, "alpha": [1, 2]
}
"""

USER_TOML = """# my codex config
model = "o3"  # keep this comment

[profiles.fast]
model = "mini"
"""


def add_our_hook(data: dict[str, Any]) -> None:
    entries = data.setdefault("hooks", {}).setdefault("Stop", [])
    ours = {"hooks": [{"type": "command", "command": "cmux-hook stop"}]}
    if ours not in entries:
        entries.append(ours)


def remove_our_hook(data: dict[str, Any]) -> None:
    entries = data.get("hooks", {}).get("Stop", [])
    entries[:] = [e for e in entries if e["hooks"][0]["command"] != "cmux-hook stop"]


def test_json_round_trip_keeps_user_keys_and_order(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(USER_JSON)
    change = edit_json(path, add_our_hook)
    assert change.changed and change.before == USER_JSON
    data = json.loads(path.read_text())
    assert list(data) == ["model", "hooks", "zeta", "alpha"]
    assert data["hooks"]["Stop"][0]["hooks"][0]["command"] == "my-own-hook"
    assert data["hooks"]["Stop"][1]["hooks"][0]["command"] == "cmux-hook stop"
    assert path.read_text() == json.dumps(data, indent=2) + "\n"
    assert '+            "command": "cmux-hook stop"\n' in change.diff()
    assert change.diff().startswith(f"--- {path}\n+++ {path}\n")

    # Uninstall takes away only our entry; the user's hook and keys stay, and since
    # nothing else changed, the file is the user's own again, byte for byte.
    edit_json(path, remove_our_hook)
    assert path.read_text() == USER_JSON


def test_second_identical_edit_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(USER_JSON)
    edit_json(path, add_our_hook)
    first = path.read_bytes()
    inode = path.stat().st_ino
    again = edit_json(path, add_our_hook)
    assert not again.changed and again.diff() == ""
    assert path.read_bytes() == first
    assert path.stat().st_ino == inode  # not even rewritten with the same bytes


def test_unchanged_content_in_foreign_formatting_is_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(USER_JSON)
    assert not edit_json(path, lambda data: None).changed
    assert path.read_text() == USER_JSON
    assert not (tmp_path / ("settings.json" + BACKUP_SUFFIX)).exists()


def test_change_may_return_new_data(tmp_path: Path) -> None:
    path = tmp_path / "new" / "dir" / "settings.json"
    change = edit_json(path, lambda data: {"a": [1]})
    assert change.before is None and change.backup is None
    assert path.read_text() == '{\n  "a": [\n    1\n  ]\n}\n'
    assert change.diff().startswith("--- /dev/null\n")
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_missing_file_left_missing_when_nothing_to_add(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    change = edit_json(path, remove_our_hook)
    assert not change.changed
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no lock file either
    # Nor is a missing directory made (an uninstall where the agent was never set up).
    absent = tmp_path / "no-agent-here" / "settings.json"
    assert not edit_json(absent, remove_our_hook).changed
    assert not edit_toml(absent.with_suffix(".toml"), lambda doc: None).changed
    assert not absent.parent.exists()


def test_undo_after_other_changes_keeps_them(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(USER_JSON)
    edit_json(path, add_our_hook)
    edit_json(path, lambda data: data.update(theme="light"))  # the user's own later edit
    edit_json(path, remove_our_hook)
    data = json.loads(path.read_text())
    assert data["theme"] == "light" and data["model"] == "opus"
    assert path.read_text() == json.dumps(data, indent=2) + "\n"


def test_backup_written_once_before_first_change(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(USER_JSON)
    backup = tmp_path / ("settings.json" + BACKUP_SUFFIX)
    first = edit_json(path, add_our_hook)
    assert first.backup == backup and backup.read_text() == USER_JSON
    second = edit_json(path, lambda data: data.update(extra=True))
    assert second.changed and second.backup is None
    assert backup.read_text() == USER_JSON  # never overwritten
    assert "original kept in" in first.summary()


def test_no_backup_when_asked_or_when_file_is_new(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    edit_json(path, add_our_hook)
    assert not (tmp_path / ("settings.json" + BACKUP_SUFFIX)).exists()
    other = tmp_path / "other.json"
    other.write_text("{}")
    assert edit_json(other, add_our_hook, backup=False).backup is None
    assert not (tmp_path / ("other.json" + BACKUP_SUFFIX)).exists()


def test_mode_kept(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(USER_JSON)
    path.chmod(0o600)
    edit_json(path, add_our_hook)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    backup = tmp_path / ("settings.json" + BACKUP_SUFFIX)
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600


@pytest.mark.parametrize("text", ['{"hooks": {', "\xff\xfe not utf8"])
def test_unparsable_left_untouched(tmp_path: Path, text: str) -> None:
    path = tmp_path / "settings.json"
    raw = text.encode("latin-1")
    path.write_bytes(raw)
    with pytest.raises(SettingsError, match=r"settings\.json: cannot parse"):
        edit_json(path, add_our_hook)
    assert path.read_bytes() == raw
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith("cmux-lock")) == [
        "settings.json"
    ]


def test_unparsable_toml_names_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("model = \n")
    with pytest.raises(SettingsError, match=r"config\.toml: cannot parse as TOML"):
        edit_toml(path, lambda doc: doc.update(x=1))
    assert path.read_text() == "model = \n"


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(USER_JSON)
    change = edit_json(path, add_our_hook, dry_run=True)
    assert change.changed and "cmux-hook stop" in change.diff()
    assert change.backup == tmp_path / ("settings.json" + BACKUP_SUFFIX)
    assert path.read_text() == USER_JSON
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.json"]


def test_symlink_edited_at_target(tmp_path: Path) -> None:
    real_dir = tmp_path / "dotfiles"
    real_dir.mkdir()
    real = real_dir / "settings.json"
    real.write_text(USER_JSON)
    link = tmp_path / "settings.json"
    link.symlink_to(real)
    change = edit_json(link, add_our_hook)
    assert change.path == link
    assert link.is_symlink()
    assert "cmux-hook stop" in real.read_text()
    assert (real_dir / ("settings.json" + BACKUP_SUFFIX)).read_text() == USER_JSON


def test_toml_keeps_comments_and_layout(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(USER_TOML)

    def add(doc: Any) -> None:
        doc["notify"] = ["cmux-hook", "codex"]

    change = edit_toml(path, add)
    text = path.read_text()
    assert text.startswith(USER_TOML.split("\n[profiles")[0])
    assert "# keep this comment" in text and 'notify = ["cmux-hook", "codex"]' in text
    assert change.backup is not None
    before = path.read_bytes()
    assert not edit_toml(path, add).changed
    assert path.read_bytes() == before

    with pytest.raises(SettingsError, match="returned a Array"):
        edit_toml(path, lambda doc: doc.pop("notify"))
    assert path.read_bytes() == before

    def remove(doc: Any) -> None:
        del doc["notify"]

    edit_toml(path, remove)
    assert path.read_text() == USER_TOML


def test_toml_new_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    edit_toml(path, lambda doc: doc.update(notify=["x"]))
    assert path.read_text() == 'notify = ["x"]\n'


def test_write_text_and_remove_file(tmp_path: Path) -> None:
    path = tmp_path / "hooks" / "cmux.sh"
    created = write_text(path, "#!/bin/sh\nexit 0\n", mode=0o755)
    assert created.before is None and created.changed
    assert stat.S_IMODE(path.stat().st_mode) == 0o755
    inode = path.stat().st_ino
    again = write_text(path, "#!/bin/sh\nexit 0\n", mode=0o755)
    assert not again.changed and path.stat().st_ino == inode
    path.chmod(0o644)
    write_text(path, "#!/bin/sh\nexit 0\n", mode=0o755)
    assert stat.S_IMODE(path.stat().st_mode) == 0o755

    dry = remove_file(path, dry_run=True)
    assert dry.after is None and dry.changed and path.exists()
    assert dry.diff().endswith("-exit 0\n") and "+++ /dev/null" in dry.diff()
    removed = remove_file(path)
    assert removed.changed and not path.exists()
    assert "removed" in removed.summary()
    assert not remove_file(path).changed
    assert not remove_file(tmp_path / "nowhere" / "x.sh").changed


def test_unwritable_directory_is_settings_error(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    path = tmp_path / "settings.json"
    path.write_text("{}")
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(SettingsError, match=r"settings\.json"):
            edit_json(path, add_our_hook)
        assert path.read_text() == "{}"
    finally:
        tmp_path.chmod(0o700)


def test_diff_marks_missing_final_newline() -> None:
    change = FileChange(Path("f"), "a", "b\n")
    assert change.diff() == "--- f\n+++ f\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n"


def _add_key(path: str, key: str, rounds: int) -> None:
    def append(data: dict[str, Any], value: int) -> None:
        data.setdefault(key, []).append(value)
        time.sleep(0.005)  # widen the read-change-write window the lock must cover

    for i in range(rounds):
        edit_json(path, lambda data, i=i: append(data, i))


def test_concurrent_edits_from_processes_all_land(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(USER_JSON)
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_add_key, args=(str(path), f"k{n}", 15)) for n in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    data = json.loads(path.read_text())
    for n in range(4):
        assert data[f"k{n}"] == list(range(15))
    assert data["model"] == "opus"
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []
