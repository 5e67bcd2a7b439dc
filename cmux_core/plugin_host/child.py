"""A plugin's process of its own: ``python -m cmux_core.plugin_host.child --fd N ...``.

The server (:mod:`cmux_core.plugin_host.process`) starts one per plugin whose isolation is
``process`` and talks to it over the inherited socket ``--fd`` in :mod:`wire
<cmux_core.plugin_host.wire>` frames. Messages from the server:

* ``{"op": "load", "id", "source"}``: import the plugin, find its hookimpls and run its
  contribution hooks into plain data; the answer lists the hooks (name, argument names,
  marker options), the module's doc and version, and per contribution hook what it
  registered or how it failed. Registrations that are callables the server would have to run
  in its own process (view sorts, view filters, graphics sources) are refused there with
  :class:`~cmux_core.hookspecs.RegistrationError`.
* ``{"op": "call", "id", "kind": "hook"|"method"|"integration", ...}``: run one hookimpl,
  method handler or integration callable and answer ``{"op": "result", "id", "ok", ...}``.
  Plain functions run in order on one worker thread, coroutines on this process's event
  loop, as in the server.
* ``{"op": "reply", "id", ...}``: the answer to a ``call.request`` this process asked for
  with ``{"op": "request", "id", "call", "method", "params"}``.

The process exits when the socket closes, and the kernel kills it when the server's thread
that started it ends (``PR_SET_PDEATHSIG``), even while it is stuck in a C call.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import ctypes
import functools
import inspect
import itertools
import logging
import os
import signal
import socket
import sys
import threading
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pluggy
from pydantic import ValidationError

from cmux_core import hookspecs
from cmux_core.errors import CmuxError, InvalidParams
from cmux_core.hookspecs import Params, RegistrationError
from cmux_core.plugin_host import wire
from cmux_core.plugin_host.loader import PluginSource, import_source
from cmux_core.plugin_host.registry import CONTRIBUTION_HOOKS

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_READ_ONLY = ("data", "report", "tokens")
_NOT_ACROSS = ("is a callable the server would run for every {what}; it cannot be called in "
               "a process of its own. Run this plugin with isolation = \"thread\" to register "
               "it")


class ChildCall:
    """The :class:`~cmux_core.hookspecs.PluginCall` a method handler gets in the process."""

    def __init__(self, child: Child, call_id: int, info: Mapping[str, Any]) -> None:
        self._child = child
        self._call_id = call_id
        self.plugin_id = child.plugin_id
        self.client_id: str | None = info.get("client_id")
        self.request_id: Any = info.get("request_id")
        self.method = str(info.get("method") or "")

    async def request(self, method: str, params: Mapping[str, Any] | None = None
                      ) -> dict[str, Any]:
        return await self._child.request(self._call_id, method, dict(params or {}))

    def request_blocking(self, method: str, params: Mapping[str, Any] | None = None, *,
                         timeout: float = 30.0) -> dict[str, Any]:
        loop = self._child.loop
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            raise RuntimeError("request_blocking called on the plugin's loop; await request()")
        return asyncio.run_coroutine_threadsafe(self.request(method, params), loop
                                                ).result(timeout)


class Registrations:
    """The ``register`` callbacks of the process: each records plain data for the server,
    which checks names and duplicates itself when it replays them."""

    def __init__(self, child: Child, hook: str) -> None:
        self.child = child
        self.items: list[dict[str, Any]] = []
        self.closed = False
        by_hook: dict[str, Callable[..., None]] = {
            "cmux_register_manifests": self.manifest,
            "cmux_register_integrations": self.integration,
            "cmux_register_view_sorts": functools.partial(self.refuse, "view sort", "key",
                                                          "row of an agent view"),
            "cmux_register_view_filters": functools.partial(
                self.refuse, "view filter", "predicate", "row of an agent view"),
            "cmux_register_graphics_sources": functools.partial(
                self.refuse, "graphics source", "open", "frame of a pane's graphics"),
            "cmux_register_methods": self.method,
        }
        self.register = by_hook[hook]

    def _open(self) -> None:
        if self.closed:
            raise RegistrationError("register called after the hook returned")

    def manifest(self, manifest: Any, /) -> None:
        self._open()
        if isinstance(manifest, Path):
            self.items.append({"kind": "manifest", "path": str(manifest.resolve())})
        elif isinstance(manifest, str | Mapping):
            self.items.append({"kind": "manifest", "value": manifest})
        else:
            raise RegistrationError("a manifest is TOML text, a Path or a mapping, "
                                    f"not {type(manifest).__name__}")

    def integration(self, name: str, *, install: Callable[..., Any],
                    uninstall: Callable[..., Any], status: Callable[[], Any],
                    **fields: Any) -> None:
        self._open()
        callables = {"install": install, "uninstall": uninstall, "status": status}
        for action, fn in callables.items():
            if not callable(fn):
                raise RegistrationError(f"{action} must be callable, not {type(fn).__name__}")
        self.child.integrations[str(name)] = callables
        self.items.append({"kind": "integration", "name": name, "fields": fields,
                           "accepts": {a: _accepted(fn) for a, fn in callables.items()}})

    def method(self, name: str, handler: Callable[..., Any], *,
               params: type[Params] | None = None, doc: str = "") -> None:
        self._open()
        if not callable(handler):
            raise RegistrationError(f"handler must be callable, not {type(handler).__name__}")
        if params is not None and not (isinstance(params, type) and issubclass(params, Params)):
            raise RegistrationError("params must be a cmux_core.hookspecs.Params subclass")
        self.child.methods[str(name)] = (handler, params)
        self.items.append({"kind": "method", "name": name,
                           "doc": doc or (inspect.getdoc(handler) or "").strip()})

    def refuse(self, what: str, part: str, per: str, name: str, *args: Any,
               **kwargs: Any) -> None:
        raise RegistrationError(f"{what} {name!r}: its {part} "
                                + _NOT_ACROSS.format(what=per))


def _accepted(fn: Callable[..., Any]) -> list[str] | None:
    """The keywords ``fn`` accepts (None: ``**kwargs``), as the server's integrations read."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    names: list[str] = []
    for param in parameters:
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            return None
        if param.kind in (inspect.Parameter.KEYWORD_ONLY,
                          inspect.Parameter.POSITIONAL_OR_KEYWORD):
            names.append(param.name)
    return names


class Child:
    """One plugin, served over ``sock`` until it closes."""

    def __init__(self, sock: socket.socket, plugin_id: str) -> None:
        self.sock = sock
        self.plugin_id = plugin_id
        self.loop = asyncio.new_event_loop()
        self.sync = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="plugin")
        self.impls: dict[str, pluggy.HookImpl] = {}
        self.methods: dict[str, tuple[Callable[..., Any], type[Params] | None]] = {}
        self.integrations: dict[str, dict[str, Callable[..., Any]]] = {}
        self._send_lock = threading.Lock()
        self._requests: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._calls: dict[int, ChildCall] = {}
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()

    def serve(self) -> None:
        threading.Thread(target=self._read, name="plugin-pipe", daemon=True).start()
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def _read(self) -> None:
        try:
            while (message := wire.read_frame(self.sock)) is not None:
                self.loop.call_soon_threadsafe(self._dispatch, message)
        except (OSError, wire.FrameError) as exc:
            log.warning("the pipe to the server failed: %s", exc)
        os._exit(0)  # the server is gone or let this process go

    def send(self, message: Mapping[str, Any]) -> None:
        try:
            frame = wire.encode(message)
        except (TypeError, ValueError) as exc:
            frame = wire.encode({"op": "result", "id": message.get("id"), "ok": False,
                                 "error": wire.error_of(exc)})
        with self._send_lock:
            self.sock.sendall(frame)

    def _dispatch(self, message: dict[str, Any]) -> None:
        op = message.get("op")
        if op == "reply":
            future = self._requests.pop(int(message.get("id") or 0), None)
            if future is not None and not future.done():
                future.set_result(message)
            return
        task = self.loop.create_task(self._answer(message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, message: dict[str, Any]) -> None:
        call_id = int(message.get("id") or 0)
        try:
            if message.get("op") == "load":
                source = message.get("source") or {}
                result = await self.loop.run_in_executor(self.sync, self._load, source)
            else:
                result = await self._call(call_id, message)
        except Exception as exc:
            self.send({"op": "result", "id": call_id, "ok": False, "error": wire.error_of(exc)})
            return
        finally:
            self._calls.pop(call_id, None)
        self.send({"op": "result", "id": call_id, "ok": True, "result": result})

    async def _call(self, call_id: int, message: Mapping[str, Any]) -> Any:
        fn, args, kwargs = self._target(call_id, message)
        if inspect.iscoroutinefunction(fn):
            return await fn(*args, **kwargs)
        result = await self.loop.run_in_executor(self.sync,
                                                 functools.partial(fn, *args, **kwargs))
        return await result if inspect.isawaitable(result) else result

    def _target(self, call_id: int, message: Mapping[str, Any]
                ) -> tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]:
        kind, name = message.get("kind"), str(message.get("name"))
        if kind == "hook":
            kwargs = dict(message.get("kwargs") or {})
            if isinstance(kwargs.get("state_dir"), str):
                kwargs["state_dir"] = Path(kwargs["state_dir"])
            for key in _READ_ONLY:
                if isinstance(kwargs.get(key), dict):
                    kwargs[key] = types.MappingProxyType(kwargs[key])
            return self.impls[name].function, (), kwargs
        if kind == "method":
            handler, model = self.methods[name]
            raw = dict(message.get("params") or {})
            try:
                params: Any = model.model_validate(raw) if model is not None else raw
            except ValidationError as exc:
                first = exc.errors()[0]
                raise InvalidParams(".".join(map(str, first["loc"])) or "params",
                                    first["msg"]) from None
            context = self._calls[call_id] = ChildCall(self, call_id, message.get("call") or {})
            return handler, (context, params), {}
        if kind == "integration":
            action = str(message.get("action"))
            return self.integrations[name][action], (), dict(message.get("kwargs") or {})
        raise CmuxError("internal_error", f"unknown call kind {kind!r}")

    async def request(self, call_id: int, method: str, params: dict[str, Any]
                      ) -> dict[str, Any]:
        request_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = self.loop.create_future()
        self._requests[request_id] = future
        self.send({"op": "request", "id": request_id, "call": call_id, "method": method,
                   "params": params})
        answer = await future
        if not answer.get("ok"):
            raise wire.exception_of(answer.get("error") or {})
        result: dict[str, Any] = answer.get("result") or {}
        return result

    # -- loading ----------------------------------------------------------------------------

    def _load(self, source: Mapping[str, Any]) -> dict[str, Any]:
        module, digest = import_source(_source(source), None, "")
        # No hookspecs here: the server checks the hookimpls (names, arguments, wrappers)
        # on the stand-in it builds from this answer, with the same messages as in a thread.
        pm = pluggy.PluginManager(hookspecs.PROJECT)
        pm.register(module, name=self.plugin_id)
        hooks = []
        for caller in pm.get_hookcallers(module) or ():
            for impl in caller.get_hookimpls():
                if impl.plugin is module:
                    self.impls[caller.name] = impl
                    opts = impl.opts
                    hooks.append({"name": caller.name, "argnames": list(impl.argnames),
                                  "opts": {k: bool(opts.get(k)) for k in (
                                      "wrapper", "hookwrapper", "tryfirst", "trylast")}})
        contributions = {hook: self._contribute(hook, self.impls[hook])
                         for hook in CONTRIBUTION_HOOKS if hook in self.impls}
        return {"hooks": hooks, "digest": digest, "contributions": contributions,
                "doc": getattr(module, "__doc__", None) if isinstance(
                    getattr(module, "__doc__", None), str) else None,
                "version": str(getattr(module, "__version__", "") or "")}

    def _contribute(self, hook: str, impl: pluggy.HookImpl) -> dict[str, Any]:
        registrations = Registrations(self, hook)
        try:
            kwargs = {"register": registrations.register} if "register" in impl.argnames else {}
            result = impl.function(**kwargs)
            if inspect.isawaitable(result):
                awaitable = result

                async def settle() -> Any:
                    return await awaitable
                asyncio.run_coroutine_threadsafe(settle(), self.loop).result()
        except Exception as exc:
            return {"ok": False, "error": wire.error_of(exc)}
        finally:
            registrations.closed = True
        return {"ok": True, "items": registrations.items}


def _source(wire_source: Mapping[str, Any]) -> PluginSource:
    def path(key: str) -> Path | None:
        value = wire_source.get(key)
        return Path(value) if isinstance(value, str) and value else None

    source = PluginSource(
        str(wire_source["plugin_id"]), wire_source["kind"], str(wire_source.get("origin", "")),
        path=path("path"), entry=wire_source.get("entry"), root=path("root"),
        dist_name=wire_source.get("dist_name"), version=str(wire_source.get("version", "")),
        link=path("link"))
    if source.kind == "entry_point":
        import importlib.metadata

        found = importlib.metadata.entry_points(group="cmux", name=source.plugin_id)
        source.entry_point = next(iter(found), None)
        if source.entry_point is None:
            raise LookupError(f"entry point {source.plugin_id} is not installed")
    return source


def _die_with_parent(parent: int) -> None:
    """Have the kernel kill this process when the server's thread that started it ends."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the server ended before the line above
        os._exit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cmux_core.plugin_host.child")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--plugin", required=True)
    args = parser.parse_args(argv)
    _die_with_parent(args.parent)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format=f"plugin {args.plugin} (pid {os.getpid()}): %(message)s")
    Child(socket.socket(fileno=args.fd), args.plugin).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
