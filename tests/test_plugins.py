"""The plugin host on its own: real plugin files, real threads, real directory watches.

Each test runs its host on a fresh event loop (``asyncio.run``); plugin files are written
to ``tmp_path`` or taken from ``docs/examples/plugins`` (the files the docs include).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import re
import textwrap
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest
from conftest import plugin_version, wait_version

from cmux_core import hookspecs
from cmux_core.api import wire
from cmux_core.api.context import Call
from cmux_core.api.dispatch import MethodTable
from cmux_core.api.methods import plugin as plugin_methods
from cmux_core.config import Settings
from cmux_core.errors import CmuxError
from cmux_core.hookspecs import Params
from cmux_core.plugin_host.events import PluginEvent, PluginRegistrationsChanged
from cmux_core.plugin_host.host import PluginHost
from cmux_core.testing import async_wait_until

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "docs" / "examples" / "plugins"
DOCS = ROOT / "docs" / "plugins.md"
HOOKS = sorted(n for n in dir(hookspecs) if n.startswith("cmux_"))
COVERED: set[str] = set()
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def covers(*hooks: str) -> Callable[[F], F]:
    """Declare which hooks a test exercises; test_every_hook_has_a_test checks the union."""
    unknown = set(hooks) - set(HOOKS)
    assert not unknown, f"no such hooks: {unknown}"
    COVERED.update(hooks)
    return lambda fn: fn


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("CMUX_LOAD_PLUGINS", raising=False)
    monkeypatch.delenv("CMUX_TRACE_PLUGINS", raising=False)


def write(directory: Path, name: str, body: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(textwrap.dedent(body).lstrip())
    return path


def make_host(tmp_path: Path, *dirs: Path, events: list[tuple[str, dict[str, Any]]] | None = None,
              changes: list[tuple[str, set[str]]] | None = None,
              methods: MethodTable | None = None, **kw: Any) -> PluginHost:
    """A host whose events (wire form) and registration changes go to those lists."""
    kw.setdefault("watch", False)
    settings = Settings(plugins_dirs=list(dirs), state_dir=tmp_path / "state")
    table = methods if methods is not None else MethodTable()

    def publish(event: PluginEvent | PluginRegistrationsChanged) -> None:
        if isinstance(event, PluginRegistrationsChanged):
            if changes is not None:
                changes.append((event.plugin_id, set(event.kinds)))
        elif events is not None:
            events.append((event.kind, wire.plugin_event(event)))
    host = PluginHost(settings, methods=table, publish=publish, entry_points=False, **kw)
    if methods is None:
        table.merge(plugin_methods.methods, context=plugin_methods.PluginServices(host))
    return host


def examples(tmp_path: Path, *names: str) -> Path:
    """A plugin dir holding copies of the named example plugins."""
    target = tmp_path / "examples"
    target.mkdir(exist_ok=True)
    for name in names:
        (target / f"{name}.py").write_text((EXAMPLES / f"{name}.py").read_text())
    return target


def module_of(host: PluginHost, plugin_id: str) -> Any:
    return host.get(plugin_id).module


async def call(host: PluginHost, method: str, params: dict[str, Any] | None = None) -> Any:
    # The plugin.* handlers are bound to this host, so these tests need no socket (the
    # end-to-end tests use a real one).
    return await host.methods.call(method, params or {}, request_id=1)


GOOD = '''
    """A good plugin."""
    from cmux_core.hookspecs import hookimpl

    @hookimpl
    def cmux_register_view_sorts(register):
        register("by-agent", lambda row: row.get("agent", ""))
'''


# -- loading --------------------------------------------------------------------------------


@covers("cmux_register_view_sorts", "cmux_register_view_filters", "cmux_register_manifests",
        "cmux_register_graphics_sources", "cmux_register_integrations")
def test_loads_every_example_from_a_plugin_dir(tmp_path: Path) -> None:
    d = examples(tmp_path, "agent_manifest", "toy_integration", "longest_waiting", "needs_me",
                 "solid_colour")
    events: list[tuple[str, dict[str, Any]]] = []

    async def main() -> None:
        host = make_host(tmp_path, d, events=events)
        await host.start()
        assert {p.plugin_id: p.status for p in host.plugins()} == {
            "agent_manifest": "loaded", "toy_integration": "loaded", "longest_waiting": "loaded",
            "needs_me": "loaded", "solid_colour": "loaded"}
        (manifest,) = host.manifests()
        assert manifest.agent_id == "toy" and manifest.data["aliases"] == ["toy-agent"]
        rows = [{"pane_id": "a", "agent_status": "working"},
                {"pane_id": "b", "agent_status": "blocked", "status_changed_unix_ms": 20},
                {"pane_id": "c", "agent_status": "done", "status_changed_unix_ms": 10}]
        key = host.view_sorts()["longest-waiting"].key
        assert [r["pane_id"] for r in sorted(rows, key=key)] == ["c", "b", "a"]
        keep = host.view_filters()["needs-me"].predicate
        assert [r["pane_id"] for r in rows if keep(r)] == ["b", "c"]
        source = host.graphics_sources()["solid"]
        frames = [f async for f in source.open("w1:p1", {"width": 2, "height": 1, "frames": 2})]
        assert frames == [{"format": "rgb", "image_width": 2, "image_height": 1,
                           "data": bytes([255, 128, 0]) * 2}] * 2
        integration = host.integrations()["toy"]
        assert integration.plugin_id == "toy_integration"
        await host.stop()

    run(main())
    assert [k for k, _ in events].count("plugin_loaded") == 5


@covers("cmux_register_integrations")
def test_integration_callables_run_through_invoke(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOY_CONFIG_DIR", str(tmp_path / "toy"))
    d = examples(tmp_path, "toy_integration")

    async def main() -> None:
        host = make_host(tmp_path, d)
        await host.start()
        toy = host.integrations()["toy"]
        assert (await host.invoke(toy.plugin_id, "status", toy.status))["installed"] is False
        assert (await host.invoke(toy.plugin_id, "install", toy.install))[0].startswith("wrote")
        assert (await host.invoke(toy.plugin_id, "status", toy.status))["installed"] is True
        await host.stop()

    run(main())


def test_allowlist_limits_loading_and_empty_loads_none(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    d = examples(tmp_path, "greeter", "needs_me", "longest_waiting")

    async def loaded() -> list[str]:
        host = make_host(tmp_path, d)
        await host.start()
        ids = [p.plugin_id for p in host.plugins()]
        await host.stop()
        return ids

    monkeypatch.setenv("CMUX_LOAD_PLUGINS", "greeter, needs_me")
    assert sorted(run(loaded())) == ["greeter", "needs_me"]
    monkeypatch.setenv("CMUX_LOAD_PLUGINS", "")
    assert run(loaded()) == []
    monkeypatch.delenv("CMUX_LOAD_PLUGINS")
    assert len(run(loaded())) == 3


def test_broken_import_is_blocked_while_others_load(tmp_path: Path) -> None:
    d = tmp_path / "plugins"
    write(d, "good.py", GOOD)
    write(d, "broken.py", "import no_such_module_anywhere\n")
    write(d, "syntax.py", "def (:\n")
    events: list[tuple[str, dict[str, Any]]] = []

    async def main() -> None:
        host = make_host(tmp_path, d, events=events)
        await host.start()
        assert host.get("good").status == "loaded"
        for bad in ("broken", "syntax"):
            plugin = host.get(bad)
            assert plugin.status == "blocked" and plugin.module is None
        assert "ModuleNotFoundError" in (host.get("broken").error or "")
        assert "SyntaxError" in (host.get("syntax").error or "")
        assert "by-agent" in host.view_sorts()
        await host.stop()

    run(main())
    assert {d["plugin_id"] for k, d in events if k == "plugin_error"} == {"broken", "syntax"}


def test_misspelt_hook_fails_check_pending_and_blocks(tmp_path: Path) -> None:
    d = tmp_path / "plugins"
    write(d, "typo.py", """
        from cmux_core.hookspecs import hookimpl

        @hookimpl
        def cmux_startpu():
            pass
    """)
    write(d, "wrapper.py", """
        from cmux_core.hookspecs import hookimpl

        @hookimpl(wrapper=True)
        def cmux_on_event():
            return (yield)
    """)
    write(d, "badargs.py", """
        from cmux_core.hookspecs import hookimpl

        @hookimpl
        def cmux_on_event(kind, nonsense):
            pass
    """)

    async def main() -> None:
        host = make_host(tmp_path, d)
        await host.start()
        assert "cmux_startpu" in (host.get("typo").error or "")
        assert "wrappers are not supported" in (host.get("wrapper").error or "")
        assert "nonsense" in (host.get("badargs").error or "")
        assert all(p.status == "blocked" for p in host.plugins())
        host.pm.check_pending()
        await host.stop()

    run(main())


# -- isolation ------------------------------------------------------------------------------


@covers("cmux_on_event")
def test_raising_hookimpl_is_contained_and_other_results_kept(tmp_path: Path) -> None:
    d = examples(tmp_path, "event_counter")
    write(d, "raiser.py", """
        from cmux_core.hookspecs import hookimpl

        @hookimpl
        def cmux_on_event(kind):
            raise RuntimeError("boom " + kind)
    """)
    write(d, "answers.py", """
        from cmux_core.hookspecs import hookimpl

        @hookimpl
        def cmux_on_event(kind):
            return "seen " + kind
    """)
    events: list[tuple[str, dict[str, Any]]] = []

    async def main() -> None:
        host = make_host(tmp_path, d, events=events, max_failures=3)
        await host.start()
        outcomes = await host.call_hook("cmux_on_event", kind="pane_created", data={})
        by_id = {o.plugin_id: o for o in outcomes}
        assert by_id["answers"].ok and by_id["answers"].value == "seen pane_created"
        assert not by_id["raiser"].ok and "boom pane_created" in (by_id["raiser"].error or "")
        assert by_id["event_counter"].ok
        for _ in range(3):
            host.on_event("pane_focused", {"type": "pane_focused"})
        counter = module_of(host, "event_counter")
        await async_wait_until(lambda: counter.COUNTS["pane_focused"] == 3, message="counter")
        raiser = await async_wait_until(lambda: host.get("raiser").status == "blocked" and
                                        host.get("raiser"), message="raiser blocked")
        assert "consecutive failures" in (raiser.error or "")
        assert [f.hook for f in raiser.errors].count("cmux_on_event") >= 3
        assert host.get("answers").status == "loaded"
        # plugin_error events are not fed back to observers
        host.on_event("plugin_error", {"type": "plugin_error"})
        host.on_event("pane_closed", {"type": "pane_closed"})
        await async_wait_until(lambda: counter.COUNTS["pane_closed"] == 1, message="pane_closed")
        assert counter.COUNTS["plugin_error"] == 0
        await host.stop()

    run(main())
    assert ("plugin_unloaded", "raiser") in [(k, d.get("plugin_id")) for k, d in events]


def test_observer_calls_queued_while_loading_come_after_cmux_startup(tmp_path: Path) -> None:
    d = tmp_path / "plugins"
    write(d, "order.py", """
        from cmux_core.hookspecs import hookimpl

        CALLS = []

        @hookimpl
        def cmux_startup(plugin_id):
            CALLS.append("startup")

        @hookimpl
        def cmux_on_event(kind):
            CALLS.append(kind)
    """)

    async def main() -> None:
        host = make_host(tmp_path, d)
        await host.load()
        host.on_event("workspace_created", {"type": "workspace_created"})
        host.on_event("pane_created", {"type": "pane_created"})
        # A window in which no call may arrive: the plugin's worker would have run them.
        await asyncio.sleep(0.2)
        calls = module_of(host, "order").CALLS
        assert calls == []
        await host.start()
        await async_wait_until(lambda: len(calls) == 3, message="three calls")
        assert calls == ["startup", "workspace_created", "pane_created"]
        await host.stop()

    run(main())


def test_raising_contribution_hook_keeps_the_plugins_other_registrations(tmp_path: Path) -> None:
    d = tmp_path / "plugins"
    write(d, "half.py", """
        from cmux_core.hookspecs import hookimpl

        @hookimpl
        def cmux_register_view_filters(register):
            register("lost", lambda row: True)
            raise RuntimeError("broken filters")

        @hookimpl
        def cmux_register_view_sorts(register):
            register("kept", lambda row: 0)
    """)

    async def main() -> None:
        host = make_host(tmp_path, d)
        await host.start()
        half = host.get("half")
        assert half.status == "loaded"
        assert list(host.view_sorts()) == ["kept"] and host.view_filters() == {}
        assert half.errors[-1].hook == "cmux_register_view_filters"
        await host.stop()

    run(main())


@covers("cmux_on_event")
def test_slow_hooks_are_warned_timed_out_and_never_stall_the_loop(tmp_path: Path) -> None:
    d = tmp_path / "plugins"
    write(d, "slowsync.py", """
        import time
        from cmux_core.hookspecs import hookimpl

        @hookimpl
        def cmux_on_event(kind):
            time.sleep(0.3 if kind == "slow" else 1.5)
    """)
    write(d, "slowasync.py", """
        import asyncio
        from cmux_core.hookspecs import hookimpl

        @hookimpl
        async def cmux_on_event(kind):
            await asyncio.sleep(0.3 if kind == "slow" else 1.5)
    """)

    async def main() -> None:
        host = make_host(tmp_path, d, slow_after=0.1, budget=1.0)
        await host.start()
        host.on_event("slow", {})
        # The loop keeps ticking while the sync plugin sleeps on its worker thread.
        ticks = 0
        started = time.monotonic()
        while time.monotonic() - started < 0.25:
            await asyncio.sleep(0.01)
            ticks += 1
        assert ticks >= 10
        for pid in ("slowsync", "slowasync"):
            await async_wait_until(lambda pid=pid: any("took" in w for w in host.get(pid).warnings),
                                   message=f"{pid} warned")
            assert not host.get(pid).errors
        host.on_event("stuck", {})
        for pid in ("slowsync", "slowasync"):
            await async_wait_until(lambda pid=pid: host.get(pid).errors, message=f"{pid} timed out")
            assert "timed out after 1s" in host.get(pid).errors[-1].message
        await host.stop()

    run(main())


@covers("cmux_on_report_metadata", "cmux_startup", "cmux_shutdown")
def test_async_hooks_are_awaited_on_the_loop(tmp_path: Path) -> None:
    d = examples(tmp_path, "token_mirror", "heartbeat")

    async def main() -> None:
        host = make_host(tmp_path, d)
        await host.start()
        host.notify_report_metadata("w1:p1", {"source": "x", "tokens": {"branch": "main",
                                                                      "gone": None}})
        mirror = module_of(host, "token_mirror")
        await async_wait_until(lambda: mirror.LATEST == {"w1:p1": {"branch": "main"}},
                               message="tokens")
        heart = module_of(host, "heartbeat")
        await async_wait_until(lambda: len(heart.BEATS) >= 3, message="heartbeat")
        task = heart._TASK[0]
        assert task.get_name() == "heartbeat-heartbeat"
        await host.stop()
        await async_wait_until(task.done, message="task stopped")
        assert task.cancelled()

    run(main())


@covers("cmux_on_report_agent", "cmux_startup")
def test_sync_observer_runs_in_order_off_the_loop(tmp_path: Path) -> None:
    d = examples(tmp_path, "state_log")

    async def main() -> None:
        host = make_host(tmp_path, d)
        await host.start()
        for seq, state in enumerate(["working", "blocked", "idle"]):
            host.notify_report_agent("w1:p2", {"source": "t", "agent": "toy", "state": state,
                                               "seq": seq})
        log = tmp_path / "state" / "plugins" / "state_log" / "reports.jsonl"
        await async_wait_until(lambda: log.exists() and len(log.read_text().splitlines()) == 3,
                               message="three reports")
        rows = [json.loads(line) for line in log.read_text().splitlines()]
        assert [(r["state"], r["seq"]) for r in rows] == [("working", 0), ("blocked", 1),
                                                          ("idle", 2)]
        assert rows[0]["pane_id"] == "w1:p2" and rows[0]["agent"] == "toy"
        await host.stop()

    run(main())


@covers("cmux_startup")
def test_startup_is_historic_for_plugins_loaded_later(tmp_path: Path) -> None:
    d = examples(tmp_path, "heartbeat")

    async def main() -> None:
        host = make_host(tmp_path, d)
        await host.start()
        await host.disable("heartbeat")
        await host.enable("heartbeat")
        heart = module_of(host, "heartbeat")
        await async_wait_until(lambda: len(heart.BEATS) >= 2, message="heartbeat after enable")
        await host.stop()

    run(main())


def test_trace_logs_every_hook_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("CMUX_TRACE_PLUGINS", "1")
    d = examples(tmp_path, "needs_me")

    async def main() -> None:
        host = make_host(tmp_path, d)
        await host.start()
        await host.stop()

    trace = "cmux_core.plugin_host.host.trace"
    with caplog.at_level(logging.INFO, logger=trace):
        run(main())
    traced = [r.getMessage() for r in caplog.records if r.name == trace]
    assert "plugin needs_me: cmux_register_view_filters(register)" in traced
    assert any(re.match(r"plugin needs_me: cmux_register_view_filters ok in [\d.]+ ms", t)
               for t in traced)


# -- registrations and methods --------------------------------------------------------------


@covers("cmux_register_methods")
def test_methods_are_namespaced_and_cannot_shadow_core_methods(tmp_path: Path) -> None:
    d = examples(tmp_path, "greeter")
    write(d, "action.py", """
        from cmux_core.hookspecs import hookimpl

        @hookimpl
        def cmux_register_methods(register):
            async def shadow(call, params):
                return {"type": "shadow"}
            register("run", shadow)
            register("list", shadow)
    """)
    write(d, "badnames.py", """
        from cmux_core.hookspecs import hookimpl

        @hookimpl
        def cmux_register_methods(register):
            for name in ("Upper", "a..b", "", "plugin list"):
                try:
                    register(name, lambda call, params: {})
                except ValueError as exc:
                    print(exc)
                else:
                    raise AssertionError(name)
            register("ok", "not callable")
    """)
    table = MethodTable()

    class Empty(Params):
        pass

    async def core(call: Call, params: Empty) -> dict[str, Any]:
        return {"type": "core"}

    table.add("plugin.action.list", Empty, core)

    asked: list[tuple[str, dict[str, Any], Any]] = []

    async def api(method: str, params: dict[str, Any], connection: Any) -> dict[str, Any]:
        # The host's in-process socket API, without a server: what the plugin asked for is
        # recorded (tests/test_plugin_server.py answers it from a real server).
        asked.append((method, params, connection))
        return {"type": "pane_list", "panes": [{}, {}]}

    async def main() -> None:
        host = make_host(tmp_path, d, methods=table, api=api)
        await host.start()
        assert await call(host, "plugin.greeter.hello", {"name": "ann"}) == {
            "type": "greeting", "greeting": "hello, ann", "panes": 2, "client_id": None}
        assert asked == [("pane.list", {}, None)]
        with pytest.raises(CmuxError) as err:
            await call(host, "plugin.greeter.hello", {"name": 5})
        assert err.value.code == "invalid_params" and "name" in err.value.message
        assert table.get("plugin.action.list").owner == "core"  # type: ignore[union-attr]
        assert await call(host, "plugin.action.list") == {"type": "core"}
        # the failed hook call drops what it registered before raising
        assert "plugin.action.run" not in table
        assert "already provided by core" in host.get("action").errors[-1].message
        assert "must be callable" in host.get("badnames").errors[-1].message
        assert [n for n in table.names() if n.startswith("plugin.")] == [
            "plugin.action.list", "plugin.greeter.hello"]
        await host.stop()
        assert table.names() == ["plugin.action.list"]

    run(main())


def test_plugin_method_failures_answer_errors_and_are_recorded(tmp_path: Path) -> None:
    d = tmp_path / "plugins"
    write(d, "flaky.py", """
        from cmux_core.errors import CmuxError
        from cmux_core.hookspecs import hookimpl

        @hookimpl
        def cmux_register_methods(register):
            def sync_echo(call, params):
                return {"echo": params}
            async def boom(call, params):
                raise KeyError("x")
            async def refuse(call, params):
                raise CmuxError("not_today", "come back tomorrow")
            async def bad_result(call, params):
                return [1]
            register("echo", sync_echo)
            register("boom", boom)
            register("refuse", refuse)
            register("bad.result", bad_result)
    """)

    async def main() -> None:
        host = make_host(tmp_path, d)
        await host.start()
        assert await call(host, "plugin.flaky.echo", {"a": 1}) == {
            "type": "plugin_result", "echo": {"a": 1}}
        for method, code in (("plugin.flaky.boom", "plugin_failed"),
                             ("plugin.flaky.refuse", "not_today"),
                             ("plugin.flaky.bad.result", "internal_error")):
            with pytest.raises(CmuxError) as err:
                await call(host, method)
            assert err.value.code == code
        assert [f.hook for f in host.get("flaky").errors] == [
            "plugin.flaky.boom", "plugin.flaky.bad.result"]
        assert host.get("flaky").status == "loaded"
        await host.stop()

    run(main())


def test_registration_names_types_and_duplicates_are_validated(tmp_path: Path) -> None:
    d = tmp_path / "plugins"
    write(d, "a_first.py", """
        from cmux_core.hookspecs import hookimpl

        @hookimpl
        def cmux_register_view_sorts(register):
            register("shared", lambda row: 0)

        @hookimpl
        def cmux_register_manifests(register):
            register({"id": "dup"})
    """)
    write(d, "b_second.py", """
        from pathlib import Path
        from cmux_core.hookspecs import RegistrationError, hookimpl

        SEEN = []

        def attempt(fn, *args, **kw):
            try:
                fn(*args, **kw)
            except RegistrationError as exc:
                SEEN.append(str(exc))

        @hookimpl
        def cmux_register_view_sorts(register):
            attempt(register, "shared", lambda row: 1)
            attempt(register, "Bad Name", lambda row: 1)
            attempt(register, "mine", lambda row: 1)
            attempt(register, "mine", lambda row: 2)

        @hookimpl
        def cmux_register_manifests(register):
            attempt(register, {"id": "dup"})
            attempt(register, "id = ")
            attempt(register, {"rules": []})
            attempt(register, Path("/no/such/manifest.toml"))
            attempt(register, 42)
            attempt(register, 'id = "fine"')

        @hookimpl
        def cmux_register_integrations(register):
            attempt(register, "x", install=1, uninstall=print, status=print)
            attempt(register, "y", install=print, uninstall=print, status=print, description=3)
    """)

    async def main() -> None:
        host = make_host(tmp_path, d)
        await host.start()
        seen = module_of(host, "b_second").SEEN
        # contribution hooks run in a fixed order: manifests, integrations, sorts, ...
        assert seen == [
            "manifest 'dup' is already registered by plugin a_first",
            seen[1], "a manifest needs a string id", seen[3],
            "a manifest is TOML text, a Path or a mapping, not int",
            "install must be callable, not int", "description must be a string, not int",
            "view sort 'shared' is already registered by plugin a_first",
            "invalid name 'Bad Name': use 1-64 of a-z 0-9 _ - starting with a letter",
            "view sort 'mine' is registered twice",
        ]
        assert seen[1].startswith("manifest  is not valid TOML")
        assert seen[3].startswith("cannot read manifest /no/such/manifest.toml")
        assert host.view_sorts()["shared"].plugin_id == "a_first"
        assert host.view_sorts()["mine"].plugin_id == "b_second"
        assert [m.agent_id for m in host.manifests()] == ["dup", "fine"]
        await host.stop()

    run(main())


def test_unload_withdraws_everything_a_plugin_registered(tmp_path: Path) -> None:
    d = examples(tmp_path, "greeter", "needs_me", "agent_manifest", "solid_colour",
                 "toy_integration", "longest_waiting")
    events: list[tuple[str, dict[str, Any]]] = []
    changes: list[tuple[str, set[str]]] = []

    async def main() -> None:
        host = make_host(tmp_path, d, events=events, changes=changes)
        await host.start()
        assert "plugin.greeter.hello" in host.methods
        for pid in ("greeter", "needs_me", "agent_manifest", "solid_colour", "toy_integration",
                    "longest_waiting"):
            await host.disable(pid)
        assert [n for n in host.methods.names() if n.count(".") > 1] == []
        assert host.manifests() == [] and host.view_filters() == {} and host.view_sorts() == {}
        assert host.graphics_sources() == {} and host.integrations() == {}
        assert all(p.status == "disabled" and p.module is None for p in host.plugins())
        await host.stop()

    run(main())
    assert ("needs_me", {"view_filters"}) in changes
    assert ("greeter", {"methods"}) in changes
    unloaded = [d for k, d in events if k == "plugin_unloaded"]
    assert {d["reason"] for d in unloaded} == {"disabled"} and len(unloaded) == 6


# -- state: enable/disable, link/unlink ------------------------------------------------------


def test_enable_disable_persist_across_hosts(tmp_path: Path) -> None:
    d = examples(tmp_path, "greeter", "needs_me")

    async def statuses() -> dict[str, str]:
        host = make_host(tmp_path, d)
        await host.start()
        out = {p.plugin_id: p.status for p in host.plugins()}
        await host.stop()
        return out

    async def toggle(action: str, pid: str) -> dict[str, Any]:
        host = make_host(tmp_path, d)
        await host.start()
        result = await call(host, f"plugin.{action}", {"plugin_id": pid})
        await host.stop()
        return dict(result)

    result = run(toggle("disable", "greeter"))
    assert result["type"] == "plugin_disabled" and result["plugin"]["enabled"] is False
    assert run(statuses()) == {"greeter": "disabled", "needs_me": "loaded"}
    state = json.loads((tmp_path / "state" / "plugins.json").read_text())
    assert state["disabled"] == ["greeter"]
    result = run(toggle("enable", "greeter"))
    assert result["type"] == "plugin_enabled" and result["plugin"]["status"] == "loaded"
    assert run(statuses()) == {"greeter": "loaded", "needs_me": "loaded"}


def test_plugin_methods_validate_and_report_unknown_ids(tmp_path: Path) -> None:
    d = examples(tmp_path, "greeter")

    async def main() -> None:
        host = make_host(tmp_path, d)
        await host.start()
        listed = await call(host, "plugin.list")
        assert listed["type"] == "plugin_list"
        (entry,) = listed["plugins"]
        assert entry["plugin_id"] == "greeter" and entry["hooks"] == ["cmux_register_methods"]
        assert entry["registrations"]["methods"] == ["plugin.greeter.hello"]
        assert entry["source"]["kind"] == "local" and entry["source"]["loader"] == "file"
        assert entry["description"] == "Adds the socket method plugin.greeter.hello."
        for method, params, code, field in (
                ("plugin.enable", {"plugin_id": "nope"}, "plugin_not_found", None),
                ("plugin.list", {"plugin_id": "nope"}, "plugin_not_found", None),
                ("plugin.disable", {}, "invalid_params", "plugin_id"),
                ("plugin.link", {}, "invalid_params", "path"),
                ("plugin.link", {"path": "relative/dir"}, "invalid_params", "path"),
                ("plugin.link", {"path": str(tmp_path / "missing")}, "invalid_params", "path"),
                ("plugin.unlink", {"plugin_id": "nope"}, "plugin_not_found", None)):
            with pytest.raises(CmuxError) as err:
                await call(host, method, params)
            assert err.value.code == code, (method, err.value)
            if field:
                assert err.value.data == {"field": field}
        unlinked = await call(host, "plugin.unlink", {"plugin_id": "greeter"})
        assert unlinked == {"type": "plugin_unlinked", "plugin_id": "greeter", "removed": False,
                            "plugin_ids": []}
        await host.stop()

    run(main())


def test_link_a_scaffolded_distribution_and_unlink_it(tmp_path: Path) -> None:
    from cmux_core.cli.plugin import scaffold

    root = scaffold("cmux-hello", tmp_path / "src")

    async def main(expect_linked: bool) -> None:
        host = make_host(tmp_path)
        await host.start()
        if not expect_linked:
            linked = await call(host, "plugin.link", {"path": str(root)})
            assert linked["type"] == "plugin_linked"
            assert linked["plugin"]["plugin_id"] == "cmux-hello"
            assert linked["plugin"]["source"]["loader"] == "package"
            assert linked["plugin"]["version"] == "0.1.0"
        result = await call(host, "plugin.cmux-hello.hello", {"name": "x"})
        assert result == {"type": "greeting", "greeting": "hello, x"}
        await host.stop()

    run(main(False))
    run(main(True))

    async def unlink() -> None:
        host = make_host(tmp_path)
        await host.start()
        result = await call(host, "plugin.unlink", {"plugin_id": "cmux-hello"})
        assert result["removed"] is True
        assert "plugin.cmux-hello.hello" not in host.methods
        assert host.plugins() == []
        await host.stop()

    run(unlink())
    assert json.loads((tmp_path / "state" / "plugins.json").read_text())["links"] == []


def test_link_a_single_file_replaces_a_plugin_dir_copy(tmp_path: Path) -> None:
    d = examples(tmp_path, "greeter")
    other = write(tmp_path / "elsewhere", "greeter.py", """
        from cmux_core.hookspecs import hookimpl

        @hookimpl
        def cmux_register_methods(register):
            async def hello(call, params):
                return {"type": "greeting", "greeting": "linked"}
            register("hello", hello)
    """)

    async def main() -> None:
        host = make_host(tmp_path, d)
        await host.start()
        await host.link(other)
        assert (await call(host, "plugin.greeter.hello"))["greeting"] == "linked"
        assert host.get("greeter").source.link == other
        await host.stop()
        again = make_host(tmp_path, d)
        await again.start()
        assert (await call(again, "plugin.greeter.hello"))["greeting"] == "linked"
        assert any("also provides greeter" in w for w in again.get("greeter").warnings)
        await again.stop()

    run(main())


# -- hot reload -----------------------------------------------------------------------------


VERSION = '''
    from cmux_core.hookspecs import hookimpl

    @hookimpl
    def cmux_register_methods(register):
        async def version(call, params):
            return {{"type": "version", "version": {version}}}
        register("version", version)

    @hookimpl
    def cmux_register_view_sorts(register):
        register("sort-v{version}", lambda row: 0)
'''




@covers("cmux_register_methods", "cmux_register_view_sorts", "cmux_shutdown")
def test_hot_reload_of_an_edited_file_and_a_broken_edit(tmp_path: Path) -> None:
    d = tmp_path / "plugins"
    path = write(d, "live.py", VERSION.format(version=1))
    events: list[tuple[str, dict[str, Any]]] = []

    async def main() -> None:
        host = make_host(tmp_path, d, events=events, watch=True, watch_debounce_ms=50)
        await host.start()
        await host.wait_watching()
        assert await plugin_version(host) == 1
        path.write_text(textwrap.dedent(VERSION.format(version=2)).lstrip())
        await wait_version(host, 2)
        assert list(host.view_sorts()) == ["sort-v2"]
        # A broken edit keeps version 2 serving and reports the failure.
        path.write_text("def broken(:\n")
        await async_wait_until(lambda: any(k == "plugin_error" for k, _ in events), timeout=30,
                               message="reload error")
        live = host.get("live")
        assert live.status == "loaded" and "SyntaxError" in live.errors[-1].message
        assert await plugin_version(host) == 2 and list(host.view_sorts()) == ["sort-v2"]
        path.write_text(textwrap.dedent(VERSION.format(version=3)).lstrip())
        await wait_version(host, 3)
        assert list(host.view_sorts()) == ["sort-v3"]
        # A new file is picked up; a deleted one is withdrawn.
        write(d, "newcomer.py", GOOD)
        await async_wait_until(lambda: "by-agent" in host.view_sorts(), timeout=30,
                               message="new file")
        path.unlink()
        await async_wait_until(lambda: "plugin.live.version" not in host.methods, timeout=30,
                               message="removed file withdrawn")
        await host.stop()

    run(main())
    loaded = [d for k, d in events if k == "plugin_loaded" and d["plugin_id"] == "live"]
    assert [d["reloaded"] for d in loaded] == [False, True, True]


def test_reload_rejects_a_version_whose_contribution_hook_raises(tmp_path: Path) -> None:
    d = tmp_path / "plugins"
    path = write(d, "live.py", VERSION.format(version=1))

    async def main() -> None:
        host = make_host(tmp_path, d)
        await host.start()
        path.write_text(path.read_text() + "\n@hookimpl\ndef cmux_register_view_filters("
                        "register):\n    raise ValueError('no')\n")
        assert await host.reload("live") is False
        assert await plugin_version(host) == 1
        assert "keeping the previous version" in host.get("live").errors[-1].message
        path.write_text(textwrap.dedent(VERSION.format(version=4)).lstrip())
        assert await host.reload("live") is True
        assert await plugin_version(host) == 4
        await host.stop()

    run(main())


# -- the contract is documented and tested ----------------------------------------------------


def hook_signature(name: str) -> str:
    spec = getattr(hookspecs, name)
    return f"{name}({', '.join(inspect.signature(spec).parameters)})"


def test_every_hook_is_documented_with_its_signature() -> None:
    host_pm = PluginHost(Settings(), methods=MethodTable(), entry_points=False, watch=False).pm
    names = sorted(n for n in dir(host_pm.hook) if n.startswith("cmux_"))
    assert names == HOOKS
    headings = set(re.findall(r"^#{2,4} `?(cmux_\w+\(.*?\))`?\s*$", DOCS.read_text(), re.M))
    missing = [hook_signature(n) for n in names if hook_signature(n) not in headings]
    assert not missing, f"docs/plugins.md lacks sections headed {missing}"
    stale = {h for h in headings if h.split("(")[0] not in names}
    assert not stale, f"docs/plugins.md documents hooks that do not exist: {stale}"
    for name in names:
        doc = inspect.getdoc(getattr(hookspecs, name)) or ""
        assert len(doc.splitlines()) >= 3, f"{name} needs a contract docstring"


def test_docs_examples_are_the_tested_files() -> None:
    text = DOCS.read_text()
    blocks = re.findall(r"<!-- include: (\S+) -->\n```python\n(.*?)```\n", text, re.S)
    assert len(blocks) >= len(list(EXAMPLES.glob("*.py")))
    for rel, body in blocks:
        assert (ROOT / rel).read_text() == body, f"docs/plugins.md is out of date for {rel}"
    included = {Path(rel).name for rel, _ in blocks}
    assert included >= {p.name for p in EXAMPLES.glob("*.py")}


def test_every_hook_has_a_test() -> None:
    untested = sorted(set(HOOKS) - COVERED)
    assert not untested, f"hooks without a test: {untested}"

