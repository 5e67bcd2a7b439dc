"""Plugin code stays off the server loop: slow or hung imports, hung hooks, narrow watches.

The import tests run a real ``cmux serve`` with a one-second import budget
(``CMUX_PLUGIN_IMPORT_BUDGET``); the others run the host on a fresh event loop with real
plugin files, real worker threads and real directory watches.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import textwrap
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest
from conftest import plugin_version, wait_version
from plugin_files import _isolated_env, write  # noqa: F401 - the autouse fixture

from cmux_core.api.dispatch import MethodTable
from cmux_core.api.methods import plugin as plugin_methods
from cmux_core.app import STOP_GRACE_S
from cmux_core.config import Settings
from cmux_core.errors import CmuxError
from cmux_core.plugin_host.host import PluginHost
from cmux_core.plugin_host.loader import WatchRoot
from cmux_core.testing import ServerProcess, async_wait_until, start_server, wait_until

T = TypeVar("T")


def sleeper(marker: Path, seconds: float) -> str:
    """A plugin that marks the start of its import, then sleeps through it."""
    return f"""
        import pathlib, time
        from cmux_core.hookspecs import hookimpl

        pathlib.Path({str(marker)!r}).touch()
        time.sleep({seconds})

        @hookimpl
        def cmux_register_view_sorts(register):
            register("sleepy", lambda row: 0)
    """


GOOD = """
    from cmux_core.hookspecs import hookimpl

    @hookimpl
    def cmux_register_view_sorts(register):
        register("by-agent", lambda row: row.get("agent", ""))
"""


def plugins(server: ServerProcess) -> dict[str, dict[str, Any]]:
    return {p["plugin_id"]: p for p in server.call("plugin.list")["plugins"]}


def serve(plugin_dir: Path) -> ServerProcess:
    return start_server(["--plugins-dir", str(plugin_dir)],
                        env={"CMUX_PLUGIN_IMPORT_BUDGET": "1"})


# -- imports against a real server ------------------------------------------------------------


def test_a_slow_import_is_blocked_and_never_stalls_requests(tmp_path: Path) -> None:
    d = tmp_path / "plugins"
    write(d, "sleepy.py", sleeper(tmp_path / "sleepy.started", 3))
    write(d, "good.py", GOOD)
    server = serve(d)
    try:
        listed = plugins(server)
        assert listed["good"]["status"] == "loaded"
        assert listed["sleepy"]["status"] == "blocked"
        assert listed["sleepy"]["error"] == "import timed out after 1s (its thread was abandoned)"

        # The watch of the folder starts after the server answers: a plugin seen loading
        # shows that it is in place before the slow file is dropped in.
        write(d, "early.py", GOOD.replace("by-agent", "early"))
        wait_until(lambda: plugins(server).get("early", {}).get("status") == "loaded",
                   timeout=30, message="the folder watched")
        # A file dropped in while serving sleeps 8 s in its import: requests keep flowing,
        # each answered well before the import could end (4 s leaves a loaded machine room).
        write(d, "drowsy.py", sleeper(tmp_path / "drowsy.started", 8))
        wait_until((tmp_path / "drowsy.started").exists, timeout=30, message="drowsy import")
        with server.client() as client:
            until = time.monotonic() + 1.5
            while time.monotonic() < until:
                asked = time.monotonic()
                assert client.call("ping")
                assert time.monotonic() - asked < 4.0, "ping waited for a plugin import"
                time.sleep(0.05)
        wait_until(lambda: plugins(server)["drowsy"]["status"] == "blocked", timeout=30,
                   message="drowsy blocked")
        assert "import timed out after 1s" in plugins(server)["drowsy"]["error"]

        # Fixing the file loads it on a fresh thread.
        write(d, "sleepy.py", GOOD.replace("by-agent", "fixed"))
        wait_until(lambda: plugins(server)["sleepy"]["status"] == "loaded", timeout=30,
                   message="sleepy fixed")
        assert server.call("ping")
    finally:
        server.stop()


def test_an_import_that_never_returns_does_not_keep_the_socket_closed(tmp_path: Path) -> None:
    d = tmp_path / "plugins"
    write(d, "forever.py", """
        import threading
        threading.Event().wait()
    """)
    write(d, "good.py", GOOD)
    server = serve(d)  # raises when the socket never answers
    try:
        listed = plugins(server)
        assert listed["good"]["status"] == "loaded"
        assert listed["forever"]["status"] == "blocked"
        assert "import timed out after 1s" in listed["forever"]["error"]
        assert listed["forever"]["abandoned_threads"] == 1
        assert any("abandoned a worker thread" in w for w in listed["forever"]["warnings"])
    finally:
        # the abandoned thread is a daemon: it does not hold the server open
        assert server.stop() == 0


# -- the host on its own ----------------------------------------------------------------------


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def make_host(tmp_path: Path, *dirs: Path, **kw: Any) -> PluginHost:
    kw.setdefault("watch", False)
    methods = MethodTable()
    settings = Settings(plugins_dirs=list(dirs), state_dir=tmp_path / "state")
    host = PluginHost(settings, methods=methods, entry_points=False, **kw)
    methods.merge(plugin_methods.methods, context=plugin_methods.PluginServices(host))
    return host




LIVE = """
    import threading
    from cmux_core.hookspecs import hookimpl

    @hookimpl
    def cmux_register_methods(register):
        def version(call, params):
            return {{"type": "version", "version": {version}}}
        register("version", version)

    @hookimpl
    def cmux_on_event(kind):
        if kind == "hang" and {hangs}:
            threading.Event().wait()
"""


async def ticking(during: Callable[[], Awaitable[T]]) -> tuple[T, int]:
    """Run ``during()`` and count 10 ms loop ticks meanwhile."""
    ticks = 0
    done = False

    async def tick() -> None:
        nonlocal ticks
        while not done:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    try:
        return await during(), ticks
    finally:
        done = True
        await ticker


def test_a_reload_whose_import_outlasts_the_budget_keeps_the_old_version(tmp_path: Path) -> None:
    d = tmp_path / "plugins"
    path = write(d, "live.py", LIVE.format(version=1, hangs=False))

    async def main() -> None:
        # A 1 s budget and a 6 s import: the reload gives up long before the import ends,
        # and the loop has time for many ticks meanwhile, even on a loaded machine.
        host = make_host(tmp_path, d, import_budget=1.0)
        await host.start()
        assert await plugin_version(host) == 1
        serving = host.get("live").module
        failed = tmp_path / "late.failed"
        path.write_text(f"import pathlib, time\ntime.sleep(6)\npathlib.Path({str(failed)!r})"
                        ".touch()\nraise RuntimeError('late')\n" + path.read_text())
        started = time.monotonic()
        threads = set(threading.enumerate())
        reloaded, ticks = await ticking(lambda: host.reload("live"))
        assert reloaded is False
        assert time.monotonic() - started < 4.0
        # The import runs on a worker thread of its own, named after the plugin.
        [importing] = [t for t in threading.enumerate()
                       if t not in threads and t.name == "cmux-plugin-live"]
        assert ticks >= 20  # the loop ran while the import slept
        live = host.get("live")
        assert live.status == "loaded" and live.module is serving
        assert live.errors[-1].message.startswith("import timed out after 1s")
        assert sys.modules["_cmux_plugin_live"] is serving
        assert await plugin_version(host) == 1
        # A newer version loads while the abandoned import still sleeps; that import's late
        # failure leaves the newer version's module in place.
        path.write_text(textwrap.dedent(LIVE.format(version=2, hangs=False)).lstrip())
        assert await host.reload("live") is True
        newer = host.get("live").module
        await async_wait_until(failed.exists, timeout=30, message="abandoned import failed")
        await async_wait_until(lambda: not importing.is_alive(),
                               message="the abandoned import's thread to end")
        assert sys.modules["_cmux_plugin_live"] is newer
        assert await plugin_version(host) == 2
        await host.stop()

    run(main())


def test_a_hung_sync_hook_does_not_outlive_a_hot_reload(tmp_path: Path) -> None:
    d = tmp_path / "plugins"
    path = write(d, "live.py", LIVE.format(version=1, hangs=True))

    async def main() -> None:
        # A 3 s budget: a call sent to the hung thread would take that long; one on a fresh
        # thread answers well within 2 s, even on a loaded machine.
        host = make_host(tmp_path, d, budget=3.0, watch=True, watch_debounce_ms=50)
        await host.start()
        await host.wait_watching()
        assert await plugin_version(host) == 1
        host.on_event("hang", {})
        await async_wait_until(lambda: host.get("live").errors, timeout=30,
                               message="hang timed out")
        assert host.get("live").errors[-1].message == "timed out after 3s"
        # The hung call holds the thread: the same version's next call times out too.
        assert await plugin_version(host) is None

        path.write_text(textwrap.dedent(LIVE.format(version=2, hangs=False)).lstrip())
        await wait_version(host, 2)
        started = time.monotonic()
        assert await plugin_version(host) == 2
        assert time.monotonic() - started < 2.0
        live = host.get("live")
        assert live.abandoned_threads == 1
        assert live.to_wire()["abandoned_threads"] == 1
        assert any("abandoned a worker thread" in w for w in live.warnings)
        await host.stop()

    run(main())


def test_linking_one_file_watches_that_file_only(tmp_path: Path) -> None:
    project = tmp_path / "project"
    linked = write(project, "live.py", LIVE.format(version=1, hangs=False))
    sibling = write(project, "sibling.py", "x = 1\n")
    deep = write(project / "sub", "deep.py", "y = 1\n")

    async def main() -> None:
        host = make_host(tmp_path, watch=True, watch_debounce_ms=50)
        seen: list[set[Path]] = []
        apply = host._watcher.on_change

        async def record(paths: set[Path]) -> None:
            # wraps the host's own handler, which still runs, to see what the watcher reports
            seen.append(paths)
            await apply(paths)

        host._watcher.on_change = record
        await host.start()
        await host.link(linked)
        await host.wait_watching()
        ours = [r for r in host.watch_roots() if r.path == project]
        assert ours == [WatchRoot(project, recursive=False, names=frozenset({"live.py"}))]
        assert not any(r.recursive for r in host._watcher.roots)

        sibling.write_text("x = 2\n")
        deep.write_text("y = 2\n")
        linked.write_text(textwrap.dedent(LIVE.format(version=2, hangs=False)).lstrip())
        await wait_version(host, 2)
        assert seen and set().union(*seen) == {linked}
        await host.stop()

    run(main())


def test_the_import_budget_comes_from_the_environment_when_not_given(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    assert make_host(tmp_path).import_budget == 10.0
    assert make_host(tmp_path, import_budget=0.25).import_budget == 0.25
    monkeypatch.setenv("CMUX_PLUGIN_IMPORT_BUDGET", "2.5")
    assert make_host(tmp_path).import_budget == 2.5
    for bad in ("soon", "0", "-1", "nan", "inf"):
        monkeypatch.setenv("CMUX_PLUGIN_IMPORT_BUDGET", bad)
        caplog.clear()
        assert make_host(tmp_path).import_budget == 10.0
        assert f"ignoring CMUX_PLUGIN_IMPORT_BUDGET={bad!r}" in caplog.text


SPINNER = """
    import threading
    from cmux_core.hookspecs import hookimpl

    @hookimpl
    def cmux_register_methods(register):
        async def spin(call, params):
            while True:
                pass

        async def where(call, params):
            return {"thread": threading.current_thread().name}
        register("spin", spin)
        register("where", where)

    @hookimpl
    async def cmux_shutdown():
        while True:
            pass
"""


def test_a_spinning_coroutine_neither_stalls_clients_nor_holds_up_sigterm(tmp_path: Path
                                                                          ) -> None:
    """A plugin coroutine that never yields spins on the plugin's own loop: another client's
    pings stay quick, and SIGTERM ends the server (within its stop grace, socket removed)
    although the plugin's shutdown spins too."""
    d = tmp_path / "plugins"
    write(d, "spinner.py", SPINNER)
    server = serve(d)
    try:
        with socket.socket(socket.AF_UNIX) as spinning, server.client() as other:
            assert other.call("plugin.spinner.where")["thread"] != "MainThread"
            spinning.connect(str(server.socket_path))
            spinning.sendall(b'{"id": "s", "method": "plugin.spinner.spin", "params": {}}\n')
            worst = 0.0
            for _ in range(20):
                asked = time.monotonic()
                assert other.call("ping")
                worst = max(worst, time.monotonic() - asked)
            assert worst < 0.05, f"a ping took {worst * 1000:.0f} ms"
            signalled = time.monotonic()
            server.process.terminate()
            server.process.wait(STOP_GRACE_S + 5)
        assert time.monotonic() - signalled < STOP_GRACE_S + 3
        assert not server.socket_path.exists()
        assert "did not stop within" in server.log()
    finally:
        server.stop()


def test_a_spinning_method_times_out_and_blocks_its_plugin(tmp_path: Path) -> None:
    d = tmp_path / "plugins"
    write(d, "spinner.py", SPINNER)
    write(d, "live.py", LIVE.format(version=1, hangs=False))

    async def main() -> None:
        host = make_host(tmp_path, d, budget=0.5)
        await host.start()
        with pytest.raises(CmuxError) as raised:
            await host.methods.call("plugin.spinner.spin", {}, request_id=1)
        assert raised.value.code == "plugin_timeout"
        spinner = host.get("spinner")
        await async_wait_until(lambda: spinner.status == "blocked", timeout=30,
                               message="the spinner blocked")
        assert spinner.error is not None and "is still running" in spinner.error
        assert "plugin.spinner.where" not in host.methods
        assert spinner.abandoned_threads == 1
        assert await plugin_version(host) == 1
        await host.stop()

    run(main())
