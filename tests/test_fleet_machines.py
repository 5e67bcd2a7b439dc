"""The saved machines file, with no ssh: what a server does with a file it cannot read, and
the book's own rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from cmux_core.errors import CmuxError
from cmux_core.fleet.machines import MachineBook, MachineError, make_machine
from cmux_core.testing import start_server


def test_an_unreadable_file_is_reported_and_never_written_over(tmp_path: Path) -> None:
    config = tmp_path / "config"
    (config / "cmux").mkdir(parents=True)
    saved = config / "cmux" / "machines.toml"
    saved.write_text("[machine.box\ndestination = 'x'\n")
    server = start_server(env={"XDG_CONFIG_HOME": str(config)})
    assert server.call("machine.list")["machines"] == []
    with pytest.raises(CmuxError) as err:
        server.call("machine.add", {"machine": "other", "destination": "h"})
    assert err.value.code == "invalid_machine"
    assert str(saved) in err.value.message and "fix or remove the file" in err.value.message
    assert saved.read_text() == "[machine.box\ndestination = 'x'\n"
    assert server.call("ping")["type"] == "pong"
    server.stop()


def test_the_book_keeps_order_and_refuses_what_would_forge_ids(tmp_path: Path) -> None:
    book = MachineBook(tmp_path / "m.toml")
    book.load()
    book.add(make_machine("b", "host-b", {"Port": "2222"}, "work", accept_new=True))
    book.add(make_machine("a", "me@host-a"))
    book.rename("b", "c")
    book.set_enabled("a", False)
    again = MachineBook(tmp_path / "m.toml")
    again.load()
    assert [(m.name, m.destination, m.enabled) for m in again] == [
        ("c", "host-b", True), ("a", "me@host-a", False)]
    c = again.get("c")
    assert c is not None and c.session == "work" and c.accept_new
    assert dict(c.ssh_options) == {"Port": "2222"}
    (tmp_path / "bad.toml").write_text('[machine."a/b"]\ndestination = "h"\n')
    with pytest.raises(MachineError, match="invalid machine name"):
        MachineBook(tmp_path / "bad.toml").load()
    with pytest.raises(MachineError, match="invalid session name"):
        make_machine("d", "h", session="../x")
    with pytest.raises(CmuxError) as err:
        again.remove("nope")
    assert err.value.code == "machine_not_found"
