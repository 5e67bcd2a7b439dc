"""Whether Codex will run the cmux hooks: its hook trust, read and never written.

Codex runs a hook from ``config.toml`` only once the user has trusted that exact definition
(``/hooks`` in Codex, or its start-up "Hooks need review" prompt). It records the decision
in the same ``config.toml``, one table per hook handler::

    [hooks.state."<config.toml path>:<event>:<group index>:<handler index>"]
    trusted_hash = "sha256:..."    # Codex's hash of the definition the user trusted
    enabled = false                # once switched off under /hooks (true when back on)

``<event>`` is the snake-case event name (``session_start``) and the indices are the
handler's position in ``[[hooks.<Event>]]`` / ``[[hooks.<Event>.hooks]]``, so a hook
inserted before ours moves ours to a key nobody trusted. The hash is Codex's own digest of
its normalised hook definition; this module never computes or writes one. It reads the
table (:func:`recorded_trust`) and, where a ``codex`` executable is found, asks Codex
itself through ``codex app-server``'s ``hooks/list`` (:func:`codex_trust`), the only
reader that can tell a trusted hook from one changed since it was trusted.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cmux_core.plugin_host import hook_kit

AGENT = "codex"
ASK_TIMEOUT = 5.0
"""Seconds :func:`codex_trust` waits for Codex's answer before giving up."""

RANK = ("trusted", "managed", "recorded", "untrusted", "modified", "disabled")
"""Per-event states, least to most in need of the user (an event takes its worst handler's)."""


def event_label(event: str) -> str:
    """Codex's snake-case name of a hook event in state keys: ``SessionStart`` ->
    ``session_start``."""
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower()
                   for i, c in enumerate(event))


def _worst(states: Sequence[str]) -> str:
    return max(states, key=RANK.index)


def _positions(doc: Any, events: Sequence[str]) -> dict[str, list[tuple[str, int, int]]]:
    """Per event of ``events``, Codex's label and (group, handler) index of each handler of
    ours in ``doc``'s ``[hooks]``."""
    hooks = doc.get("hooks") if isinstance(doc, Mapping) else None
    found: dict[str, list[tuple[str, int, int]]] = {}
    if not isinstance(hooks, Mapping):
        return found
    for event in events:
        groups = hooks.get(event)
        if not isinstance(groups, list):
            continue
        for g, group in enumerate(groups):
            for h, handler in enumerate(hook_kit.handlers(group)):
                if hook_kit.is_our_hook(handler, AGENT):
                    found.setdefault(event, []).append((event_label(event), g, h))
    return found


def _same_file(path: str | Path) -> str:
    """``path`` made comparable: absolute, symbolic links resolved."""
    return os.path.realpath(os.path.abspath(path))


def our_hook_keys(doc: Any, config: Path, events: Sequence[str]) -> dict[str, list[str]]:
    """The state key Codex gives each of our handlers, per event of ``events`` that runs one."""
    return {event: [f"{config}:{label}:{g}:{h}" for label, g, h in places]
            for event, places in _positions(doc, events).items()}


def _state_entries(doc: Any, config: Path) -> dict[tuple[str, int, int], Any]:
    """``[hooks.state]`` tables of hooks in ``config``, by (label, group, handler); a key
    naming the file by another spelling of its path counts too."""
    hooks = doc.get("hooks") if isinstance(doc, Mapping) else None
    state = hooks.get("state") if isinstance(hooks, Mapping) else None
    entries: dict[tuple[str, int, int], Any] = {}
    if not isinstance(state, Mapping):
        return entries
    target = _same_file(config)
    for key, entry in state.items():
        parts = str(key).rsplit(":", 3)
        if (len(parts) == 4 and parts[2].isdigit() and parts[3].isdigit()
                and _same_file(parts[0]) == target):
            entries[(parts[1], int(parts[2]), int(parts[3]))] = entry
    return entries


def recorded_trust(doc: Any, config: Path, events: Sequence[str]) -> dict[str, str]:
    """Per event that runs our hook, what ``[hooks.state]`` records for our handlers:
    ``recorded`` (a trusted hash for each: trusted, unless the hook changed since),
    ``untrusted`` (no hash: Codex will not run it) or ``disabled`` (switched off)."""
    entries = _state_entries(doc, config)
    result: dict[str, str] = {}
    for event, places in _positions(doc, events).items():
        states = []
        for place in places:
            entry = entries.get(place)
            if not isinstance(entry, Mapping):
                states.append("untrusted")
            elif entry.get("enabled") is False:
                states.append("disabled")
            elif isinstance(entry.get("trusted_hash"), str) and entry["trusted_hash"]:
                states.append("recorded")
            else:
                states.append("untrusted")
        result[event] = _worst(states)
    return result


def trust_from_hooks_list(result: Any, config: Path, events: Sequence[str]) -> dict[str, str]:
    """Per event, Codex's verdict on our handlers from a ``hooks/list`` result: its
    ``trustStatus`` (``trusted``, ``untrusted``, ``modified``, ``managed``), or
    ``disabled`` for a hook switched off. Only user hooks from ``config`` count."""
    names = {event[:1].lower() + event[1:]: event for event in events}
    target = _same_file(config)
    found: dict[str, list[str]] = {}
    entries = result.get("data") if isinstance(result, Mapping) else None
    for entry in entries if isinstance(entries, list) else []:
        hooks = entry.get("hooks") if isinstance(entry, Mapping) else None
        for hook in hooks if isinstance(hooks, list) else []:
            if (not isinstance(hook, Mapping) or not isinstance(hook.get("sourcePath"), str)
                    or _same_file(hook["sourcePath"]) != target):
                continue
            event = names.get(str(hook.get("eventName")))
            if event is None or not hook_kit.is_our_hook(hook, AGENT):
                continue
            status = str(hook.get("trustStatus"))
            if status not in RANK:
                status = "untrusted"
            found.setdefault(event, []).append(
                "disabled" if hook.get("enabled") is False else status)
    return {event: _worst(states) for event, states in found.items()}


def codex_trust(config: Path, events: Sequence[str], *, codex: str | None = None,
                timeout: float = ASK_TIMEOUT) -> dict[str, str] | None:
    """Codex's own per-event verdict on our hooks (see :func:`trust_from_hooks_list`),
    asked of ``codex app-server`` over stdio; ``None`` when no ``codex`` is on ``PATH``, or
    it fails or does not answer within ``timeout`` seconds. ``codex`` overrides the
    executable. The app server reads the same ``CODEX_HOME`` as the agent."""
    executable = codex or shutil.which("codex")
    if executable is None:
        return None
    try:
        proc = subprocess.Popen([executable, "app-server"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                cwd=config.parent if config.parent.is_dir() else None,
                                start_new_session=True)
    except OSError:
        return None
    try:
        deadline = time.monotonic() + timeout
        reader = _Lines(proc, deadline)
        _send(proc, {"id": 1, "method": "initialize",
                     "params": {"clientInfo": {"name": "cmux", "version": "0"}}})
        if reader.reply(1) is None:
            return None
        _send(proc, {"method": "initialized"})
        _send(proc, {"id": 2, "method": "hooks/list",
                     "params": {"cwds": [str(config.parent)]}})
        reply = reader.reply(2)
        if reply is None or "result" not in reply:
            return None
        return trust_from_hooks_list(reply["result"], config, events)
    except (OSError, ValueError):
        return None
    finally:
        _stop(proc)


def _send(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    # the app server was started in a session of its own: end its whole process group
    # (``codex`` on PATH is often a node wrapper around the native binary)
    for sig, wait in ((signal.SIGTERM, 1.0), (signal.SIGKILL, None)):
        if proc.poll() is not None:
            break
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue


class _Lines:
    """JSON lines from the app server's stdout, read without blocking past ``deadline``."""

    def __init__(self, proc: subprocess.Popen[bytes], deadline: float) -> None:
        assert proc.stdout is not None
        self.fd = proc.stdout.fileno()
        self.deadline = deadline
        self.buffer = b""

    def reply(self, request_id: int) -> dict[str, Any] | None:
        """The reply to ``request_id`` (notifications in between are skipped); ``None`` at
        the deadline or end of output."""
        while True:
            line = self._line()
            if line is None:
                return None
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict) and message.get("id") == request_id:
                return message

    def _line(self) -> bytes | None:
        while b"\n" not in self.buffer:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line


def trust_status(doc: Any, config: Path, events: Sequence[str], *,
                 codex: str | None = None) -> dict[str, Any]:
    """What ``status()`` says of trust: ``trusted`` (true: Codex runs every cmux hook;
    false: it skips at least one; ``null``: every hook has a recorded trust but Codex could
    not be asked whether the hooks changed since), ``trust`` (per event) and
    ``trust_checked_by`` (``codex`` or ``config``)."""
    recorded = recorded_trust(doc, config, events)
    asked = None
    if recorded and "untrusted" not in recorded.values():
        asked = codex_trust(config, events, codex=codex)
    if asked is not None and set(asked) == set(recorded):
        trust, checked_by = asked, "codex"
    else:
        trust, checked_by = recorded, "config"
    states = set(trust.values())
    trusted: bool | None
    if not trust or states & {"untrusted", "modified", "disabled"}:
        trusted = False
    elif "recorded" in states:
        trusted = None
    else:
        trusted = True
    return {"trusted": trusted, "trust": {e: trust[e] for e in events if e in trust},
            "trust_checked_by": checked_by}
