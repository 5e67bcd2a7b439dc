"""The body of ``cmux-hook``: one agent hook payload in, a few ``pane.report_*`` calls out.

Imported by ``cmux-hook AGENT [ARG...]`` inside a cmux pane (``CMUX_SOCKET_PATH`` and
``CMUX_PANE_ID`` set), which calls :func:`main` with ``[AGENT, ARG...]``; ``python3 -I -S
cmux_hook.py AGENT [ARG...]`` does the same. The payload is the JSON object the agent
writes to the hook's stdin, or, when the last argument is a JSON object, that argument.

What each payload becomes is the agent's table below (``EVENTS``): a state (``working``,
``idle`` or ``blocked``), the session reference (id and transcript path), and metadata
tokens (``tool``, ``tool_input``, ``prompt``, ``model``). The reports use the source
``cmux:<agent>``, which the agent's integration declares with the ``shared`` authority: the
screen keeps the last word on ``blocked`` and on a turn that ended without a hook.

An agent waits for its hooks, so start-up is all that counts: only built-in C modules are
imported (``_json``, ``_socket``, ``_signal``; their Python wrappers pull in ``re`` and
``enum``, which would triple the start-up time). Whatever happens (no server, a bad
payload, a server that does not answer), the program exits 0 without output, at the latest
after ``DEADLINE_S``.
"""

from __future__ import annotations

import _json
import _signal
import _socket
import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs start-up time; annotations are never evaluated
    from collections.abc import Callable
    from typing import Any

    Payload = dict[str, Any]
    Report = dict[str, Any]

DEADLINE_S = 0.3
"""Hard limit on the run once the interpreter is up (an interval timer ends the process):
with start-up, well within the half second an agent may be kept waiting."""

CONNECT_TIMEOUT_S = 0.15
TOKEN_CHARS = 60
TOOL_INPUT_KEYS = ("command", "file_path", "path", "pattern", "url", "query", "description",
                   "prompt")

# A report (what one payload means) has optional keys ``state``, ``message``, ``session``
# (``(id, path, start_source)``: a session starts), ``ref`` (``(id, path)``: the session the
# state belongs to) and ``tokens`` (a token patch; ``None`` clears a token).


def short(value: Any, limit: int = TOKEN_CHARS) -> str | None:
    """One line of at most ``limit`` characters, or None for nothing worth showing."""
    if isinstance(value, list):
        value = " ".join(str(part) for part in value)
    if not isinstance(value, str):
        return None
    text = " ".join(value.split())
    if not text:
        return None
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tool_input(value: Any) -> str | None:
    """The part of a tool's input that says what it does (a command, a path, ...)."""
    if isinstance(value, dict):
        for key in TOOL_INPUT_KEYS:
            if value.get(key):
                return short(value[key])
        return None
    return short(value)


def session_of(p: Payload) -> tuple[Any, Any, Any]:
    return p.get("session_id"), p.get("transcript_path"), p.get("source")


def session_ref(p: Payload) -> tuple[Any, Any]:
    """The session a payload belongs to: every state report carries it, so the pane keeps
    its session reference whichever report it saw last."""
    props = p.get("properties")
    if isinstance(props, dict):  # OpenCode
        return props.get("sessionID"), None
    return p.get("session_id"), p.get("transcript_path")


# -- Claude Code, Codex and Qwen Code (the same hook payload shape) --------------------------


def claude_like(p: Payload) -> Report | None:
    event = p.get("hook_event_name")
    if p.get("agent_id"):
        return None  # a subagent's event: the main agent's state and tokens stay as they are
    if event == "SessionStart":
        tokens: dict[str, Any] = {"tool": None, "tool_input": None}
        if p.get("source") in ("startup", "clear"):
            tokens["prompt"] = None
        if short(p.get("model")):
            tokens["model"] = short(p.get("model"))
        return {"session": session_of(p), "tokens": tokens}
    if event == "UserPromptSubmit":
        tokens = {"tool": None, "tool_input": None}
        if short(p.get("prompt")):  # Qwen Code also submits tool results, with no prompt
            tokens["prompt"] = short(p.get("prompt"))
        if short(p.get("model")):
            tokens["model"] = short(p.get("model"))
        return {"state": "working", "tokens": tokens}
    if event == "PreToolUse":
        return {"state": "working", "tokens": {"tool": short(p.get("tool_name")),
                                               "tool_input": tool_input(p.get("tool_input"))}}
    if event in ("PostToolUse", "PostToolUseFailure", "PreCompact"):
        return {"state": "working", "tokens": {"tool": None, "tool_input": None}}
    if event == "PostCompact":  # /compact returns to the prompt; an automatic one goes on
        return {"state": "idle" if p.get("trigger") == "manual" else "working"}
    if event == "PermissionRequest":
        what = " ".join(filter(None, (short(p.get("tool_name")),
                                      tool_input(p.get("tool_input")))))
        return {"state": "blocked", "message": what or None}
    if event == "Notification":
        kind = p.get("notification_type")
        if kind in ("permission_prompt", "elicitation_dialog"):
            return {"state": "blocked", "message": short(p.get("message"))}
        if kind == "idle_prompt":
            return {"state": "idle"}
        return None
    if event in ("Stop", "StopFailure"):
        message = short(p.get("error")) if event == "StopFailure" else None
        return {"state": "idle", "message": message,
                "tokens": {"tool": None, "tool_input": None}}
    if event == "SessionEnd":
        return {"tokens": {"tool": None, "tool_input": None, "prompt": None}}
    return None


# -- Gemini CLI -------------------------------------------------------------------------------


def gemini(p: Payload) -> Report | None:
    event = p.get("hook_event_name")
    if event == "SessionStart":
        tokens: dict[str, Any] = {"tool": None, "tool_input": None, "prompt": None}
        return {"session": session_of(p), "tokens": tokens}
    if event == "BeforeAgent":
        return {"state": "working", "tokens": {"prompt": short(p.get("prompt")),
                                               "tool": None, "tool_input": None}}
    if event == "BeforeTool":
        return {"state": "working", "tokens": {"tool": short(p.get("tool_name")),
                                               "tool_input": tool_input(p.get("tool_input"))}}
    if event in ("AfterTool", "PreCompress"):
        return {"state": "working", "tokens": {"tool": None, "tool_input": None}}
    if event == "BeforeModel":
        request = p.get("llm_request")
        model = short(request.get("model")) if isinstance(request, dict) else None
        return {"tokens": {"model": model}} if model else None
    if event == "Notification":
        if p.get("notification_type") == "ToolPermission":
            return {"state": "blocked", "message": short(p.get("message"))}
        return None
    if event == "AfterAgent":
        return {"state": "idle", "tokens": {"tool": None, "tool_input": None}}
    if event == "SessionEnd":
        return {"tokens": {"tool": None, "tool_input": None, "prompt": None}}
    return None


# -- OpenCode (what hooks/opencode/cmux.js forwards: {"type": ..., "properties": {...}}) -----


def opencode(p: Payload) -> Report | None:
    kind = p.get("type")
    props = p.get("properties")
    props = props if isinstance(props, dict) else {}
    if kind == "session.created":
        info = props.get("info")
        if isinstance(info, dict) and not info.get("parentID"):
            return {"session": (info.get("id"), None, "startup"),
                    "tokens": {"tool": None, "tool_input": None, "prompt": None}}
        return None
    if kind == "session.status":
        status = props.get("status")
        status_type = status.get("type") if isinstance(status, dict) else None
        if status_type in ("busy", "retry"):
            return {"state": "working"}
        if status_type == "idle":
            return {"state": "idle", "tokens": {"tool": None, "tool_input": None}}
        return None
    if kind == "session.idle":
        return {"state": "idle", "tokens": {"tool": None, "tool_input": None}}
    if kind in ("permission.asked", "permission.updated"):
        patterns = props.get("patterns")
        pattern = patterns[0] if isinstance(patterns, list) and patterns else None
        what = " ".join(filter(None, (short(props.get("permission")) or short(props.get("type")),
                                      short(pattern) or short(props.get("title")))))
        return {"state": "blocked", "message": what or None}
    if kind == "permission.replied":
        return {"state": "working"}
    if kind == "tool.execute.before":
        return {"state": "working", "tokens": {"tool": short(props.get("tool")),
                                               "tool_input": tool_input(props.get("args"))}}
    if kind == "tool.execute.after":
        return {"tokens": {"tool": None, "tool_input": None}}
    if kind == "chat.message":
        tokens: dict[str, Any] = {"prompt": short(props.get("text"))}
        if short(props.get("model")):
            tokens["model"] = short(props.get("model"))
        return {"state": "working", "tokens": tokens}
    return None


# -- GitHub Copilot CLI -----------------------------------------------------------------------


def copilot(p: Payload) -> Report | None:
    """Hooks installed under Claude Code's event names get Claude Code's payload shape, but
    ``PermissionRequest`` comes in Copilot's own camelCase shape and ``Notification`` names
    its session ``sessionId``."""
    if p.get("hookName") == "permissionRequest":
        p = {"hook_event_name": "PermissionRequest", "session_id": p.get("sessionId"),
             "tool_name": p.get("toolName"), "tool_input": p.get("toolInput")}
    elif "session_id" not in p and "sessionId" in p:
        p = dict(p, session_id=p["sessionId"])
    report = claude_like(p)
    if report is not None:
        report.setdefault("ref", session_ref(p))
    return report


EVENTS: dict[str, Callable[[Payload], Report | None]] = {  # agent label → its table
    "claude": claude_like, "codex": claude_like, "qwen": claude_like, "gemini": gemini,
    "opencode": opencode, "copilot": copilot}


# -- JSON on the C accelerator alone ---------------------------------------------------------


class _Decoding:
    """The settings ``_json.make_scanner`` reads (those of ``json.loads`` with no options)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float


_scan = _json.make_scanner(_Decoding())


def loads(text: str) -> Any:
    """Parse one JSON document; ``ValueError`` for anything else."""
    text = text.strip()
    try:
        value, end = _scan(text, 0)
    except StopIteration as exc:
        raise ValueError(f"not JSON at {exc.value}") from None
    if end != len(text):
        raise ValueError(f"extra data at {end}")
    return value


def dumps(value: Any) -> str:
    """JSON text of str, int, bool, None, dict and list values (all a request holds)."""
    if isinstance(value, str):
        return _json.encode_basestring_ascii(value)
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, dict):
        return "{" + ",".join(f"{dumps(str(k))}:{dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    raise TypeError(f"cannot send {type(value).__name__}")


# -- the calls --------------------------------------------------------------------------------


def requests(agent: str, pane: str, report: Report, seq: int,
             surface: str | None = None) -> list[dict[str, Any]]:
    """The socket requests for one report, each with its own increasing ``seq``; with
    ``surface`` (``$CMUX_SURFACE_ID``) they land on that terminal of the pane."""
    source = f"cmux:{agent}"
    base = {"pane_id": pane, "source": source, "agent": agent}
    if surface:
        base["surface_id"] = surface
    out: list[dict[str, Any]] = []
    session = report.get("session")
    sid = path = None
    if session:
        sid, path, start = session
        sid = sid if isinstance(sid, str) and sid else None
        path = path if isinstance(path, str) and path.startswith("/") else None
        if sid or path:
            params = dict(base, seq=seq)
            if sid:
                params["agent_session_id"] = sid
            if path:
                params["agent_session_path"] = path
            if isinstance(start, str) and start:
                params["session_start_source"] = start
            out.append({"method": "pane.report_agent_session", "params": params})
    if report.get("state"):
        params = dict(base, state=report["state"], seq=seq + 1)
        if report.get("message"):
            params["message"] = report["message"]
        ref_id, ref_path = report.get("ref") or (None, None)
        if isinstance(ref_id, str) and ref_id:
            params["agent_session_id"] = ref_id
        if isinstance(ref_path, str) and ref_path.startswith("/"):
            params["agent_session_path"] = ref_path
        out.append({"method": "pane.report_agent", "params": params})
    if report.get("tokens"):
        out.append({"method": "pane.report_metadata",
                    "params": dict(base, tokens=report["tokens"], seq=seq + 2)})
    return [dict(r, id=n) for n, r in enumerate(out, 1)]


def call(path: str, lines: list[dict[str, Any]]) -> None:
    """Send every request on one connection and read the replies (the deadline bounds it)."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)
        sock.connect(path)
        sock.settimeout(max(0.01, DEADLINE_S - (time.monotonic() - START)))
        sock.sendall("".join(dumps(line) + "\n" for line in lines).encode())
        got = b""
        while got.count(b"\n") < len(lines):
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
    finally:
        sock.close()
    log_errors(got)


def log_errors(replies: bytes) -> None:
    """With ``CMUX_HOOK_LOG`` set, append every error reply there (for hook authors)."""
    target = os.environ.get("CMUX_HOOK_LOG")
    if not target:
        return
    errors = [line for line in replies.decode(errors="replace").splitlines()
              if '"ok": false' in line or '"ok":false' in line]
    if errors:
        with open(target, "a", encoding="utf-8") as out:
            out.write("".join(line + "\n" for line in errors))


def payload_of(argv: list[str]) -> Payload | None:
    if len(argv) > 1 and argv[-1].lstrip().startswith("{"):
        text = argv[-1]
    elif sys.stdin is None or sys.stdin.isatty():
        return None
    else:
        text = sys.stdin.buffer.read().decode("utf-8", "replace")
    data = loads(text)
    return data if isinstance(data, dict) else None


def run(argv: list[str]) -> None:
    socket_path = os.environ.get("CMUX_SOCKET_PATH")
    pane = os.environ.get("CMUX_PANE_ID")
    if not socket_path or not pane or not argv or argv[0] not in EVENTS:
        return
    agent = argv[0]
    payload = payload_of(argv)
    if payload is None:
        return
    report = EVENTS[agent](payload)
    if not report:
        return
    report.setdefault("ref", session_ref(payload))
    lines = requests(agent, pane, report, time.time_ns() // 1000,
                     os.environ.get("CMUX_SURFACE_ID"))
    if lines:
        call(socket_path, lines)


def _give_up(_signum: int, _frame: Any) -> None:
    os._exit(0)


START = time.monotonic()


def main(argv: list[str]) -> None:
    """Report what ``argv`` (``[AGENT, ARG...]``) and stdin say, then end the process."""
    _signal.signal(_signal.SIGALRM, _give_up)
    _signal.setitimer(_signal.ITIMER_REAL, DEADLINE_S)
    try:
        run(argv)
    except BaseException as exc:  # never fail the agent, whatever went wrong
        target = os.environ.get("CMUX_HOOK_LOG")
        if target:
            try:
                with open(target, "a", encoding="utf-8") as out:
                    out.write(f"cmux-hook: {type(exc).__name__}: {exc}\n")
            except OSError:
                pass
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
