"""Running a plugin in a process of its own (``isolation = "process"``), from the server's side.

A :class:`ProcessWorker` is the worker of a plugin version whose code runs in a child
process (:mod:`cmux_core.plugin_host.child`, started with this interpreter). Its
:meth:`~ProcessWorker.load` starts the process, has it import the plugin, and returns a
stand-in module: one hookimpl per hookimpl of the plugin, with the same names, argument names
and marker options, so the host registers, checks, orders and calls it like any module.
Contribution hookimpls of the stand-in replay what the plugin registered in its process
(manifests, methods, integrations) through the host's own ``register``; the others, and the
method handlers and integration callables it registers, are coroutines that send the call
over the pipe and wait for the answer. They run on the worker's own loop like any plugin
coroutine, so the time budget, faults and blocking work as for a plugin in a thread, and no
plugin code runs in the server's process at all: a C call holding the interpreter lock holds
only the plugin's own.

The worker counts as :attr:`~ProcessWorker.stuck` while a call the host stopped waiting for is
still unanswered; closing a stuck worker kills its process at once, closing any other lets
the process end (it exits when the pipe closes) and kills it two seconds later if it has not.
A process that ends while its worker serves is reported to ``on_exit`` with how it ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import itertools
import keyword
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cmux_core import hookspecs
from cmux_core.errors import CmuxError
from cmux_core.plugin_host import wire
from cmux_core.plugin_host.loader import PluginSource, source_digest
from cmux_core.plugin_host.record import PluginWorker
from cmux_core.plugin_host.registry import CONTRIBUTION_HOOKS

__all__ = ["ProcessWorker"]

log = logging.getLogger(__name__)

EXIT_GRACE_S = 2.0
"""Seconds a process that is not stuck gets to exit after its pipe closes."""


class ProcessGone(Exception):
    """The plugin's process ended (or its pipe broke) before it answered."""


class ProcessWorker(PluginWorker):
    """One plugin version's process, and the threads that run its stand-in coroutines.

    ``on_exit(description)`` is called on the server loop when the process ends unasked.
    Create, load and close on the server loop.
    """

    ABANDONED = "its process was killed"
    RETIRED = "killed a plugin process stuck in a call past its budget"
    STUCK = "its process is stuck in an earlier call"

    def __init__(self, name: str, plugin_id: str, *, on_exit: Callable[[str], None]) -> None:
        super().__init__(name)
        self.plugin_id = plugin_id
        self._on_exit = on_exit
        self._server_loop = asyncio.get_running_loop()
        self._proc: subprocess.Popen[bytes] | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, tuple[asyncio.Future[Any], Any]] = {}
        self._overdue: set[int] = set()
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        self.exited: str | None = None
        """How the process ended (``exit status 1``, ``killed by SIGKILL``), once it has."""
        self._fault: str | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self.exited is None else None

    # -- starting and loading ---------------------------------------------------------------

    async def load(self, source: PluginSource, serving: object | None, serving_digest: str
                   ) -> tuple[object, str]:
        """Start the process, import ``source`` in it and return the stand-in module and the
        source's digest; raises what the import raised (as a
        :class:`~cmux_core.plugin_host.wire.RemoteError` named after it). ``serving`` (the
        stand-in in use, with ``serving_digest``) is returned, and no process started, when
        the code is unchanged; an entry point is never loaded twice."""
        if serving is not None:
            digest = source_digest(source)
            if source.kind == "entry_point" or digest == serving_digest:
                return serving, digest
        await self._spawn()
        reply = await self._remote({"op": "load", "source": _source_wire(source)}, None)
        module = self._stand_in(reply)
        if source.path is not None and source.kind == "file":
            module.__file__ = str(source.path)
        return module, str(reply.get("digest") or "")

    async def _spawn(self) -> None:
        ours, theirs = socket.socketpair()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "cmux_core.plugin_host.child", "--fd",
                 str(theirs.fileno()), "--parent", str(os.getpid()),
                 "--plugin", self.plugin_id],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=_stderr(),
                start_new_session=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        reader, self._writer = await asyncio.open_unix_connection(sock=ours)
        self._track(self._read(reader))
        proc = self._proc
        threading.Thread(target=self._wait, args=(proc,), name=f"{self.plugin_id}-reaper",
                         daemon=True).start()

    def _track(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- calls ------------------------------------------------------------------------------

    async def call(self, message: dict[str, Any], context: Any = None) -> Any:
        """Send one call and return its answer, from any loop (the stand-ins run on the
        plugin's own); cancelling it leaves the call :attr:`stuck` until answered."""
        if asyncio.get_running_loop() is self._server_loop:
            return await self._remote(message, context)
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(
            self._remote(message, context), self._server_loop))

    async def _remote(self, message: dict[str, Any], context: Any) -> Any:
        if self.exited is not None or self._writer is None or self._closing:
            raise ProcessGone(f"the plugin's process {self.exited or 'is closed'}")
        call_id = next(self._ids)
        future: asyncio.Future[Any] = self._server_loop.create_future()
        self._pending[call_id] = (future, context)
        try:
            self._writer.write(wire.encode({**message, "id": call_id}))
            return await future
        except asyncio.CancelledError:
            if future.cancelled() or not future.done():  # no answer came: it is overdue
                self._overdue.add(call_id)
            raise
        finally:
            self._pending.pop(call_id, None)

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                header = await reader.readexactly(wire.HEADER_SIZE)
                message = wire.decode(await reader.readexactly(wire.frame_length(header)))
                if message.get("op") == "request":
                    self._track(self._answer_request(message))
                else:
                    self._settle(message)
        except wire.FrameError as exc:
            self._fault = f"it sent a bad message ({exc})"
            self._kill()
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        # The pipe closes as the process ends: give its exit status a moment to arrive, so
        # the calls it leaves unanswered can say how it ended.
        for _ in range(50):
            if self.exited is not None or self._closing:
                break
            await asyncio.sleep(0.02)
        self._fail_pending()

    def _settle(self, message: Mapping[str, Any]) -> None:
        call_id = message.get("id")
        if not isinstance(call_id, int):
            return
        self._overdue.discard(call_id)
        entry = self._pending.get(call_id)
        if entry is None or entry[0].done():
            return
        if message.get("ok"):
            entry[0].set_result(message.get("result"))
        else:
            entry[0].set_exception(wire.exception_of(message.get("error") or {}))

    async def _answer_request(self, message: Mapping[str, Any]) -> None:
        """Answer a ``call.request`` the plugin made while handling a method call."""
        entry = self._pending.get(message.get("call"))  # type: ignore[arg-type]
        reply: dict[str, Any] = {"op": "reply", "id": message.get("id")}
        try:
            if entry is None or entry[1] is None:
                raise CmuxError("not_supported", "call.request is only answered while the "
                                "method call that made it runs")
            result = await entry[1].request(str(message.get("method")),
                                            message.get("params") or {})
            reply.update(ok=True, result=result)
        except Exception as exc:
            reply.update(ok=False, error=wire.error_of(exc))
        if self._writer is not None and not self._writer.is_closing():
            self._writer.write(wire.encode(reply))

    def _fail_pending(self) -> None:
        for future, _ in list(self._pending.values()):
            if not future.done():
                future.set_exception(ProcessGone(
                    f"the plugin's process {self.exited or 'closed its pipe'}"))

    # -- the end ----------------------------------------------------------------------------

    def _wait(self, proc: subprocess.Popen[bytes]) -> None:
        code = proc.wait()
        with contextlib.suppress(RuntimeError):  # the server loop is gone
            self._server_loop.call_soon_threadsafe(self._ended, code)

    def _ended(self, code: int) -> None:
        how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        if -code in (signal.SIGKILL, signal.SIGTERM) and self._fault is None:
            how = f"was {how}"
        else:
            how = f"ended ({how})"
        self.exited = f"{how}{'; ' + self._fault if self._fault else ''}"
        self._overdue.clear()
        self._fail_pending()
        if not self._closing:
            log.warning("plugin %s: its process %s", self.plugin_id, self.exited,
                        extra={"cmux_plugin": self.plugin_id})
            self._on_exit(self.exited)

    @property
    def stuck(self) -> bool:
        return bool(self._overdue) or super().stuck

    async def hung(self, grace: float) -> bool:
        await asyncio.sleep(grace)
        return self.stuck

    def close(self) -> None:
        """Close the pipe; kill the process now when :attr:`stuck`, else after
        :data:`EXIT_GRACE_S` if it has not ended. Idempotent."""
        stuck = self.stuck
        super().close()
        if self._closing:
            return
        self._closing = True
        if self._writer is not None:
            self._writer.close()
        if stuck:
            self._kill()
        elif self._proc is not None:
            timer = threading.Timer(EXIT_GRACE_S, self._kill)
            timer.daemon = True
            timer.start()

    def _kill(self) -> None:
        proc = self._proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, OSError):
                proc.kill()

    # -- the stand-in module ----------------------------------------------------------------

    def _stand_in(self, reply: Mapping[str, Any]) -> types.ModuleType:
        module = types.ModuleType(f"_cmux_plugin_{self.plugin_id.replace('-', '_')}")
        module.__doc__ = reply.get("doc")
        module.__dict__["__version__"] = reply.get("version") or ""
        contributions = reply.get("contributions") or {}
        for hook in reply.get("hooks") or ():
            name, argnames = str(hook["name"]), [str(a) for a in hook.get("argnames") or ()]
            opts = hook.get("opts") or {}
            if opts.get("wrapper") or opts.get("hookwrapper"):
                # never called: the host refuses wrappers, as it does in a thread
                fn = _function(name, argnames, lambda _kwargs: None, kind="generator")
            elif name in CONTRIBUTION_HOOKS:
                fn = _function(name, argnames, functools.partial(
                    self._replay, contributions.get(name)), kind="sync")
            else:
                fn = _function(name, argnames, functools.partial(self._hook, name))
            setattr(module, name, hookspecs.hookimpl(
                fn, hookwrapper=bool(opts.get("hookwrapper")), wrapper=bool(opts.get("wrapper")),
                tryfirst=bool(opts.get("tryfirst")), trylast=bool(opts.get("trylast"))))
        return module

    async def _hook(self, hook: str, kwargs: dict[str, Any]) -> Any:
        return await self.call({"op": "call", "kind": "hook", "name": hook, "kwargs": kwargs})

    def _replay(self, contribution: Mapping[str, Any] | None, kwargs: dict[str, Any]) -> None:
        """Register what the plugin registered in its process, through the host's own
        ``register`` (which checks names and duplicates); raise what its hook raised."""
        if contribution is None:
            return
        if not contribution.get("ok"):
            raise wire.exception_of(contribution.get("error") or {})
        register = kwargs.get("register")
        if register is None:
            return
        for item in contribution.get("items") or ():
            kind = item.get("kind")
            if kind == "manifest":
                register(Path(item["path"]) if "path" in item else item.get("value"))
            elif kind == "method":
                register(item["name"], self._method(str(item["name"])), doc=item.get("doc", ""))
            elif kind == "integration":
                name = str(item["name"])
                accepts = item.get("accepts") or {}
                register(name, **{action: self._integration(name, action, accepts.get(action))
                                  for action in ("install", "uninstall", "status")},
                         **(item.get("fields") or {}))

    def _method(self, name: str) -> Callable[..., Any]:
        async def handler(call: hookspecs.PluginCall, params: Any) -> Any:
            info = {"client_id": call.client_id, "request_id": call.request_id,
                    "method": call.method}
            return await self.call({"op": "call", "kind": "method", "name": name,
                                    "params": params, "call": info}, call)
        return handler

    def _integration(self, name: str, action: str, accepts: list[str] | None
                     ) -> Callable[..., Any]:
        async def run(**kwargs: Any) -> Any:
            return wire.file_change(await self.call({
                "op": "call", "kind": "integration", "name": name, "action": action,
                "kwargs": kwargs}))
        kind = inspect.Parameter.KEYWORD_ONLY
        run.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD)] if accepts is None
            else [inspect.Parameter(a, kind, default=None) for a in accepts if a.isidentifier()])
        return run


def _function(name: str, argnames: list[str], body: Callable[[dict[str, Any]], Any], *,
              kind: str = "async") -> Callable[..., Any]:
    """A function called ``name`` taking ``argnames`` (pluggy reads a function's code for
    them) that passes them to ``body`` as one dict."""
    for arg in argnames:
        if not arg.isidentifier() or keyword.iskeyword(arg) or arg.startswith("_"):
            raise ValueError(f"{name}: argument name {arg!r} cannot be forwarded")
    if not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"hook name {name!r} cannot be forwarded")
    params = ", ".join(argnames)
    packed = ", ".join(f"{a!r}: {a}" for a in argnames)
    source = {
        "async": f"async def {name}({params}):\n    return await _body({{{packed}}})\n",
        "sync": f"def {name}({params}):\n    return _body({{{packed}}})\n",
        "generator": f"def {name}({params}):\n    yield _body({{{packed}}})\n",
    }[kind]
    namespace: dict[str, Any] = {"_body": body}
    exec(compile(source, f"<plugin process stand-in {name}>", "exec"), namespace)
    fn: Callable[..., Any] = namespace[name]
    return fn


def _source_wire(source: PluginSource) -> dict[str, Any]:
    return {"plugin_id": source.plugin_id, "kind": source.kind, "origin": source.origin,
            "path": str(source.path) if source.path else None, "entry": source.entry,
            "root": str(source.root) if source.root else None, "dist_name": source.dist_name,
            "version": source.version, "link": str(source.link) if source.link else None}


def _stderr() -> int | None:
    """Where the plugin's own output goes: the server's standard error (the pipe is not
    its standard output, so a ``print`` cannot break it)."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return subprocess.DEVNULL
