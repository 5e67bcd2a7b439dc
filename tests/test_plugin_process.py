"""Plugins in a process of their own (``isolation = "process"``): what a thread cannot contain.

A C call that holds the interpreter lock (``sum(range(...))`` over tens of millions) stops
every thread of the process it runs in. These tests run a real ``cmux serve`` with real
plugin files and measure a second client's pings while such a call runs in a plugin: with the
plugin in its own process they stay quick, and the same plugin in a thread stalls them, so
the measurement is shown to fail when isolation is missing. The budget tests run the host on
a fresh loop with a short budget and real child processes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from plugin_files import _isolated_env, write  # noqa: F401 - the autouse fixture

from cmux_core.api.dispatch import MethodTable
from cmux_core.api.methods import plugin as plugin_methods
from cmux_core.app import STOP_GRACE_S
from cmux_core.cli.plugin import describe
from cmux_core.config import Settings
from cmux_core.config_file import load_settings
from cmux_core.errors import CmuxError
from cmux_core.plugin_host import integrations
from cmux_core.plugin_host.host import PluginHost
from cmux_core.plugin_host.isolation import isolation_of
from cmux_core.plugin_host.loader import PluginSource, sources_at
from cmux_core.testing import ServerProcess, async_wait_until, start_server, wait_until

HOG_N = 30_000_000
"""``sum(range(HOG_N))`` holds the interpreter lock for seconds on a slow machine (about
three on the machine these tests were written on), ~0.5 s on a fast one."""


def plugins(server: ServerProcess) -> dict[str, dict[str, Any]]:
    return {p["plugin_id"]: p for p in server.call("plugin.list")["plugins"]}


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent to reap it does not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def worst_ping(server: ServerProcess, until: Path, seconds: float = 1.5) -> float:
    """Wait for ``until`` to exist (the plugin's lock-holding call has begun), then ping for
    ``seconds`` from a fresh client; the slowest answer, in seconds."""
    with server.client() as client:
        wait_until(until.exists, timeout=30, message=f"{until.name} to appear")
        worst = 0.0
        stop = time.monotonic() + seconds
        while time.monotonic() < stop:
            asked = time.monotonic()
            assert client.call("ping")
            worst = max(worst, time.monotonic() - asked)
            time.sleep(0.01)
    return worst


def wait_watching(server: ServerProcess, d: Path) -> None:
    """Return once the server's watch of ``d`` (started after it answers) loads a new file:
    one written before the watch began is never seen, so it is written again until it is."""
    tries = iter(range(1_000_000))

    def seen() -> bool:
        write(d, "probe.py", GOOD.replace('"early"', '"probe"') + f"# {next(tries)}\n")
        try:
            wait_until(lambda: "probe" in plugins(server), timeout=0.5)
        except AssertionError:
            return False
        return True

    wait_until(seen, timeout=30, message="the plugin folder watched")


GOOD = """
    from cmux_core.hookspecs import hookimpl

    @hookimpl
    def cmux_register_view_sorts(register):
        register("early", lambda row: 0)
"""


def hog_import(marker: Path, isolation: str) -> str:
    return f"""
        import pathlib
        from cmux_core.hookspecs import hookimpl
        CMUX_ISOLATION = {isolation!r}

        pathlib.Path({str(marker)!r}).touch()
        TOTAL = sum(range({HOG_N}))

        @hookimpl
        def cmux_register_methods(register):
            register("total", lambda call, params: {{"total": TOTAL}})
    """


@pytest.mark.parametrize("isolation", ["process", "thread"])
def test_an_import_holding_the_lock_stalls_pings_only_in_a_thread(tmp_path: Path,
                                                                 isolation: str) -> None:
    d = tmp_path / "plugins"
    write(d, "early.py", GOOD)
    server = start_server(["--plugins-dir", str(d)], env={"CMUX_PLUGIN_IMPORT_BUDGET": "60"})
    try:
        wait_watching(server, d)
        write(d, "hog.py", hog_import(tmp_path / "hog.started", isolation))
        worst = worst_ping(server, tmp_path / "hog.started")
        if isolation == "process":
            assert worst < 0.05, f"a ping took {worst * 1000:.0f} ms"
        else:  # the same plugin in a thread: the measurement sees the stall
            assert worst > 0.2, f"the slowest ping took only {worst * 1000:.0f} ms"
        wait_until(lambda: plugins(server).get("hog", {}).get("status") == "loaded",
                   timeout=60, message="hog loaded")
        hog = plugins(server)["hog"]
        assert hog["isolation"] == isolation
        assert (hog["pid"] is not None) == (isolation == "process")
        total = server.call("plugin.hog.total")["total"]
        assert total == HOG_N * (HOG_N - 1) // 2
    finally:
        server.stop()


def hog_method(marker: Path, isolation: str) -> str:
    return f"""
        import os, pathlib, threading
        from cmux_core.hookspecs import hookimpl
        CMUX_ISOLATION = {isolation!r}

        @hookimpl
        def cmux_register_methods(register):
            def hog(call, params):
                pathlib.Path({str(marker)!r}).touch()
                return {{"total": sum(range({HOG_N})), "pid": os.getpid()}}
            register("hog", hog)

            async def where(call, params):
                pong = await call.request("ping")
                return {{"pid": os.getpid(), "pong": pong["type"],
                         "client_id": call.client_id}}
            register("where", where)

            def where_sync(call, params):
                return {{"pong": call.request_blocking("ping")["type"],
                         "thread": threading.current_thread().name}}
            register("where.sync", where_sync)
    """


@pytest.mark.parametrize("isolation", ["process", "thread"])
def test_a_method_holding_the_lock_stalls_pings_only_in_a_thread(tmp_path: Path,
                                                                isolation: str) -> None:
    d = tmp_path / "plugins"
    write(d, "hog.py", hog_method(tmp_path / "hog.started", isolation))
    server = start_server(["--plugins-dir", str(d)])
    try:
        with socket.socket(socket.AF_UNIX) as hogging:
            hogging.connect(str(server.socket_path))
            hogging.sendall(b'{"id": "h", "method": "plugin.hog.hog", "params": {}}\n')
            worst = worst_ping(server, tmp_path / "hog.started")
            hogging.settimeout(60)
            answer = b""
            while not answer.endswith(b"\n"):
                answer += hogging.recv(65536)
        if isolation == "process":
            assert worst < 0.05, f"a ping took {worst * 1000:.0f} ms"
        else:
            assert worst > 0.2, f"the slowest ping took only {worst * 1000:.0f} ms"
        assert str(HOG_N * (HOG_N - 1) // 2).encode() in answer
        # call.request and call.request_blocking reach the server from the plugin's code
        where = server.call("plugin.hog.where")
        assert where["pong"] == "pong" and where["client_id"].startswith("conn-")
        assert (where["pid"] != server.process.pid) == (isolation == "process")
        assert server.call("plugin.hog.where.sync")["pong"] == "pong"
    finally:
        server.stop()


COUNTER = """
    import os
    from cmux_core.hookspecs import Params, hookimpl
    CMUX_ISOLATION = "process"
    SEEN = []

    class Hello(Params):
        name: str = "world"

    @hookimpl
    def cmux_register_methods(register):
        def hello(call, params):
            return {"greeting": f"hello, {params.name}", "pid": os.getpid(),
                    "seen": sorted(set(SEEN))}
        register("hello", hello, params=Hello)

    @hookimpl
    async def cmux_on_event(kind, data):
        SEEN.append(kind)
"""

REFUSED = """
    from cmux_core.hookspecs import hookimpl
    CMUX_ISOLATION = "process"

    @hookimpl
    def cmux_register_view_sorts(register):
        register("nope", lambda row: 0)

    @hookimpl
    def cmux_register_manifests(register):
        register({"id": "refused-toy", "process_names": ["refused-toy"]})
"""


def test_a_killed_process_is_reported_and_a_new_one_starts_on_enable_and_on_save(
        tmp_path: Path) -> None:
    d = tmp_path / "plugins"
    path = write(d, "counter.py", COUNTER)
    write(d, "refused.py", REFUSED)
    server = start_server(["--plugins-dir", str(d)])
    try:
        counter = plugins(server)["counter"]
        assert counter["status"] == "loaded" and counter["isolation"] == "process"
        pid = counter["pid"]
        assert pid != server.process.pid and alive(pid)
        assert f"    runs in a process of its own (pid {pid})" in describe(counter)
        # a callable that cannot cross a process is refused at load, saying why; what can
        # cross is registered
        refused = plugins(server)["refused"]
        [error] = refused["errors"]
        assert error["hook"] == "cmux_register_view_sorts"
        assert "view sort 'nope'" in error["message"]
        assert 'isolation = "thread"' in error["message"]
        assert refused["registrations"]["view_sorts"] == []
        assert refused["registrations"]["manifests"] == ["refused-toy"]
        # params are checked in the plugin's process, observers are delivered there
        with pytest.raises(CmuxError) as bad:
            server.call("plugin.counter.hello", {"name": 5})
        assert bad.value.code == "invalid_params"
        server.call("workspace.create", {})
        wait_until(lambda: "workspace_created" in server.call("plugin.counter.hello")["seen"],
                   timeout=30, message="the observer to see the event")
        assert server.call("plugin.counter.hello", {"name": "you"})["pid"] == pid

        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: plugins(server)["counter"]["status"] == "blocked", timeout=30,
                   message="the dead process reported")
        counter = plugins(server)["counter"]
        assert counter["error"].startswith("blocked: its process was killed by SIGKILL")
        assert counter["pid"] is None
        assert "    runs in a process of its own (none running)" in describe(counter)
        with pytest.raises(CmuxError) as gone:
            server.call("plugin.counter.hello")
        assert gone.value.code == "method_not_found"

        server.call("plugin.enable", {"plugin_id": "counter"})
        again = plugins(server)["counter"]
        assert again["status"] == "loaded" and again["pid"] not in (None, pid)
        assert server.call("plugin.counter.hello")["pid"] == again["pid"]

        # a hot reload starts a new process and ends the old one
        path.write_text(path.read_text().replace('f"hello, ', 'f"hi, '))
        wait_until(lambda: plugins(server)["counter"]["pid"] not in (None, again["pid"]),
                   timeout=30, message="the reload")
        assert server.call("plugin.counter.hello")["greeting"] == "hi, world"
        wait_until(lambda: not alive(again["pid"]), timeout=30, message="the old one to end")
        # disabling ends the process too
        newest = plugins(server)["counter"]["pid"]
        server.call("plugin.disable", {"plugin_id": "counter"})
        assert plugins(server)["counter"]["pid"] is None
        wait_until(lambda: not alive(newest), timeout=30, message="the disabled one to end")
    finally:
        server.stop()


STUCK = f"""
    import pathlib
    from cmux_core.hookspecs import hookimpl
    CMUX_ISOLATION = "process"

    @hookimpl
    def cmux_register_methods(register):
        def stuck(call, params):
            pathlib.Path(params["marker"]).touch()
            return {{"total": sum(range({HOG_N * 1000}))}}
        register("stuck", stuck)
"""


def test_sigterm_ends_the_server_and_its_plugin_processes(tmp_path: Path) -> None:
    """The plugin's process is inside one long C call, so it cannot notice that its pipe
    closed: the kernel ends it with the server."""
    d = tmp_path / "plugins"
    write(d, "stuck.py", STUCK)
    server = start_server(["--plugins-dir", str(d)])
    try:
        pid = plugins(server)["stuck"]["pid"]
        marker = tmp_path / "stuck.started"
        with socket.socket(socket.AF_UNIX) as caller:
            caller.connect(str(server.socket_path))
            caller.sendall(b'{"id": 1, "method": "plugin.stuck.stuck", "params": {"marker": '
                           + repr(str(marker)).replace("'", '"').encode() + b"}}\n")
            wait_until(marker.exists, timeout=30, message="the stuck call")
            signalled = time.monotonic()
            server.process.terminate()
            server.process.wait(STOP_GRACE_S + 5)
        assert time.monotonic() - signalled < STOP_GRACE_S + 3
        assert not server.socket_path.exists()
        wait_until(lambda: not alive(pid), timeout=10, message="the plugin process to end")
    finally:
        server.stop()


# -- the host on its own, with a short budget ---------------------------------------------------


def make_host(tmp_path: Path, *dirs: Path, **kw: Any) -> PluginHost:
    methods = MethodTable()
    settings = Settings(plugins_dirs=list(dirs), state_dir=tmp_path / "state")
    host = PluginHost(settings, methods=methods, entry_points=False, watch=False, **kw)
    methods.merge(plugin_methods.methods, context=plugin_methods.PluginServices(host))
    return host


SPIN = f"""
    from cmux_core.hookspecs import hookimpl
    CMUX_ISOLATION = "process"

    @hookimpl
    def cmux_register_methods(register):
        register("spin", lambda call, params: {{"n": sum(range({HOG_N * 1000}))}})
        register("quick", lambda call, params: {{"ok": True}})
"""


def test_a_call_past_its_budget_times_out_and_a_stuck_process_is_killed(tmp_path: Path
                                                                       ) -> None:
    d = tmp_path / "plugins"
    write(d, "spin.py", SPIN)

    async def main() -> None:
        host = make_host(tmp_path, d, budget=1.0)
        await host.start()
        spin = host.get("spin")
        pid = spin.to_wire()["pid"]
        assert pid is not None and alive(pid)
        with pytest.raises(CmuxError) as raised:
            await host.methods.call("plugin.spin.spin", {}, request_id=1)
        assert raised.value.code == "plugin_timeout"
        await async_wait_until(lambda: spin.status == "blocked", timeout=30,
                               message="the stuck plugin blocked")
        assert spin.error is not None and "its process was killed" in spin.error
        assert any("killed a plugin process stuck" in w for w in spin.warnings)
        await async_wait_until(lambda: not alive(pid), timeout=10, message="the kill")
        assert spin.to_wire()["pid"] is None
        assert "plugin.spin.quick" not in host.methods
        await host.enable("spin")
        assert await host.methods.call("plugin.spin.quick", {}, request_id=2) == {
            "ok": True, "type": "plugin_result"}
        await host.stop()

    asyncio.run(main())


INTEGRATION = """
    import os
    from pathlib import Path
    from cmux_core.hookspecs import hookimpl
    from cmux_core.plugin_host.settings_files import edit_json
    CMUX_ISOLATION = "process"

    def settings():
        return Path(os.environ["TOY_SETTINGS"])

    def install(*, dry_run=False):
        return [edit_json(settings(), lambda data: data.update(toy=os.getpid()),
                          dry_run=dry_run)]

    def uninstall(*, dry_run=False):
        return [edit_json(settings(), lambda data: data.pop("toy", None) and None,
                          dry_run=dry_run)]

    def status():
        return {"installed": settings().exists() and '"toy"' in settings().read_text()}

    @hookimpl
    def cmux_register_integrations(register):
        register("toy", install=install, uninstall=uninstall, status=status,
                 source="toy:hook", agent="toy", authority="session")
"""


def test_an_integration_installs_from_its_plugin_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "plugins"
    write(d, "toy.py", INTEGRATION)
    target = tmp_path / "toy" / "settings.json"
    target.parent.mkdir()
    target.write_text('{"mine": 1}\n')
    monkeypatch.setenv("TOY_SETTINGS", str(target))

    async def main() -> None:
        host = make_host(tmp_path, d)
        await host.start()
        toy = host.integrations()["toy"]
        assert (toy.source, toy.agent, toy.authority) == ("toy:hook", "toy", "session")
        dry = await integrations.run_action(host, toy, "install", dry_run=True)
        assert target.read_text() == '{"mine": 1}\n'
        assert dry.files and '+  "toy"' in dry.files[0].diff()
        await integrations.run_action(host, toy, "install")
        assert '"toy"' in target.read_text()
        assert (await integrations.read_status(host, toy))["installed"] is True
        await integrations.run_action(host, toy, "uninstall")
        assert target.read_text() == '{"mine": 1}\n'
        target.write_text("{ not json")
        with pytest.raises(CmuxError) as broken:
            await integrations.run_action(host, toy, "install")
        assert broken.value.code == "integration_install_failed"
        assert str(target) in broken.value.message
        await host.stop()

    asyncio.run(main())


def test_isolation_comes_from_config_then_the_plugin_then_the_default(tmp_path: Path) -> None:
    declared = write(tmp_path, "declared.py", 'CMUX_ISOLATION = "process"\n')
    plain = write(tmp_path, "plain.py", "x = 1\n")
    sources = {p.stem: PluginSource(p.stem, "file", str(p), path=p) for p in (declared, plain)}
    config = tmp_path / "config.toml"
    assert isolation_of(sources["declared"], load_settings(config)) == "process"
    assert isolation_of(sources["plain"], load_settings(config)) == "thread"
    config.write_text('[plugins]\nisolation = "process"\nthread = ["declared"]\n')
    settings = load_settings(config)
    assert isolation_of(sources["declared"], settings) == "thread"
    assert isolation_of(sources["plain"], settings) == "process"
    config.write_text('[plugins]\nprocess = ["plain"]\n')
    assert isolation_of(sources["plain"], load_settings(config)) == "process"
    project = tmp_path / "dist"
    write(project / "src" / "dist_mod", "__init__.py", "x = 1\n")
    write(project, "pyproject.toml", """
        [project]
        name = "dist"
        [project.entry-points.cmux]
        dist = "dist_mod"
        [tool.cmux]
        isolation = "process"
    """)
    [linked] = sources_at(project)
    assert isolation_of(linked, load_settings(tmp_path / "none.toml")) == "process"
    config.write_text('[plugins]\nisolation = "fork"\n')
    with pytest.raises(ValueError, match=r"\[plugins\] isolation must be one of thread, "):
        load_settings(config)


def test_an_import_that_ends_its_process_is_reported_with_how_it_ended(tmp_path: Path) -> None:
    d = tmp_path / "plugins"
    write(d, "quits.py", 'import os\nCMUX_ISOLATION = "process"\nos._exit(3)\n')
    write(d, "fine.py", 'CMUX_ISOLATION = "process"\n')

    async def main() -> None:
        host = make_host(tmp_path, d)
        await host.start()
        quits = host.get("quits")
        assert quits.status == "blocked"
        assert quits.error == "import failed: ProcessGone: the plugin's process ended " \
                              "(exit status 3)"
        assert host.get("fine").status == "loaded"
        await host.stop()

    asyncio.run(main())


def test_a_process_plugin_is_checked_like_one_in_a_thread(tmp_path: Path) -> None:
    """A misspelt hook, a hook argument that does not exist and a wrapper block the plugin
    with the same message whichever way it runs."""
    bodies = {
        "typo": "@hookimpl\ndef cmux_startpu():\n    pass\n",
        "badarg": "@hookimpl\ndef cmux_on_event(kind, colour):\n    pass\n",
        "wrapper": "@hookimpl(wrapper=True)\ndef cmux_on_event(kind):\n    yield\n",
    }
    errors: dict[str, dict[str, str]] = {}
    for isolation in ("thread", "process"):
        d = tmp_path / isolation
        for name, body in bodies.items():
            write(d, f"{name}.py", f"from cmux_core.hookspecs import hookimpl\n"
                                   f"CMUX_ISOLATION = {isolation!r}\n{body}")

        async def main(d: Path = d) -> dict[str, str]:
            host = make_host(tmp_path / f"{d.name}-home", d)
            await host.start()
            found = {name: str(host.get(name).error).replace(str(d), "DIR")
                     for name in bodies}
            assert all(host.get(name).status == "blocked" for name in bodies)
            await host.stop()
            return found

        errors[isolation] = asyncio.run(main())
    assert errors["process"] == errors["thread"]
    assert "cmux_startpu" in errors["process"]["typo"]
    assert "colour" in errors["process"]["badarg"]
    assert "hook wrappers are not supported" in errors["process"]["wrapper"]
