#!/usr/bin/env python3
"""A scripted stand-in for the model APIs of the coding-agent CLIs recorded in ``agents/``.

Usage: ``fake_api.py [SCENARIO]`` — listens on a free port on 127.0.0.1, prints
``PORT <n>`` on stdout, then serves until killed. Each request is logged as one
JSON line to ``/tmp/cmux-capture/fake_api.log``.

Speaks three wire formats, each streamed the way its CLI expects:

* Anthropic Messages (``POST /v1/messages``, SSE when ``stream`` is true);
* OpenAI Responses (``POST /v1/responses``, SSE) and Chat Completions
  (``POST /v1/chat/completions``, SSE when ``stream`` is true; the shell tool
  call fills whatever the offered tool's schema asks for);
* Gemini (``POST /v1beta/models/<model>:streamGenerateContent?alt=sse``,
  ``:generateContent``, ``:countTokens``).

What the model "does" depends on the newest user text of a request that offers
tools (requests without tools — titles, summaries, quota probes — get a short
answer at once):

* a tool result in the newest turn → a short final answer ("Done.");
* ``slowly`` in the text → a long answer that starts after 4 s and then streams
  one word every 0.4 s, so the CLI shows its working indicator for minutes;
* ``please run`` in the text → a shell tool call (``touch approved.txt``, or the
  command written in backquotes after it: ``please run `sleep 30` ``), so the CLI
  asks for permission;
* ``at length`` in the text → an answer of :data:`LONG_LINES` lines at once, so the
  screen fills with output above the prompt;
* Anthropic only: ``please ask`` → an ``AskUserQuestion`` call (a question form),
  ``please write`` → a ``Write`` of ``notes.txt`` in the recording's work directory (a
  file permission) and ``please plan`` → an ``ExitPlanMode`` call (a plan to approve);
  OpenAI Responses: ``please ask`` → a ``request_user_input`` call
  when the CLI offers it; otherwise those get a one-line answer;
* anything else → a one-line answer, so the CLI goes idle.

It is also an HTTPS proxy for a CLI that checks it can reach its vendor before a sign-in
(``HTTPS_PROXY=http://127.0.0.1:<n>`` with certificate checks off): a ``CONNECT`` tunnel
ends in TLS here, with a throwaway self-signed certificate, and the requests inside are
answered as the plain ones are, so a connectivity check reads 200.

``SCENARIO`` is recorded in the log; behaviour follows the prompts above, except
that the ``text-tools`` scenario is for CLIs that offer the model no tools (Aider):
every Chat Completions request is answered as if it offered a shell tool, and the
"tool call" is a fenced ``bash`` block in the answer text.
"""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import count
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

LOG = Path("/tmp/cmux-capture/fake_api.log")
SLOW_WORDS = 400
SLOW_DELAY = 0.4
SLOW_FIRST = 4.0
COMMAND = "touch approved.txt"
COMMAND_REASON = "Create the file approved.txt"
LONG_LINES = 60
WRITE_PATH = "/tmp/cmux-capture/work/notes.txt"
QUESTION = {"questions": [{
    "question": "Which database should the service use?", "header": "Database",
    "multiSelect": False,
    "options": [{"label": "PostgreSQL", "description": "A server, for many writers"},
                {"label": "SQLite", "description": "A file, for one writer"}]}]}
_BACKQUOTED = re.compile(r"please run `([^`]+)`", re.IGNORECASE)
ids = count(1)
scenario = "default"


# --------------------------------------------------------------------------------------------
# Deciding what the model does


def _texts(value: Any) -> Iterator[str]:
    """Every string found under a ``text`` key (or a bare string) of a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)
    elif isinstance(value, dict):
        for key in ("text", "content", "parts"):
            if key in value:
                yield from _texts(value[key])


def decide(last_turn: Any, has_tools: bool, tool_result: bool) -> str:
    """``final``, ``slow``, ``tool`` or ``answer`` for the newest turn of a request."""
    if not has_tools:
        return "answer"
    if tool_result:
        return "final"
    text = " ".join(_texts(last_turn)).lower()
    if "slowly" in text:
        return "slow"
    if "at length" in text:
        return "long"
    if "please ask" in text:
        return "ask"
    if "please write" in text:
        return "write"
    if "please plan" in text:
        return "plan"
    if "please run" in text:
        return "tool"
    return "answer"


def requested_command(last_turn: Any) -> str:
    """The command a ``please run `...` `` prompt names, else :data:`COMMAND`."""
    found = _BACKQUOTED.search(" ".join(_texts(last_turn)))
    return found.group(1) if found else COMMAND


def words(action: str) -> list[str]:
    if action == "slow":
        return [f"word{i} " for i in range(SLOW_WORDS)]
    if action == "long":
        # One piece: CLIs that redraw their whole answer per piece stay small to record.
        return ["".join(f"Line {i} of a long answer about the project layout.\n\n"
                        for i in range(1, LONG_LINES + 1))]
    if action == "final":
        return ["Done. ", "The ", "file ", "was ", "created."]
    return ["Hello! ", "This ", "is ", "a ", "scripted ", "answer."]


def stream(action: str) -> Iterator[str]:
    """The answer's words, each after its delay; a slow answer first "thinks" for a while."""
    for i, word in enumerate(words(action)):
        if action != "slow":
            time.sleep(0.02)
        else:
            time.sleep(SLOW_FIRST if i == 0 else SLOW_DELAY)
        yield word


# --------------------------------------------------------------------------------------------
# Wire formats


def anthropic(body: dict[str, Any]) -> tuple[str, Iterator[tuple[str | None, dict[str, Any]]]]:
    # Newer clients append "system" messages after the user turn; the user turn decides.
    users = [m for m in body.get("messages", []) if isinstance(m, dict) and m.get("role") == "user"]
    last = users[-1] if users else {}
    content = last.get("content")
    tool_result = isinstance(content, list) and any(
        isinstance(c, dict) and c.get("type") == "tool_result" for c in content)
    tools = [t.get("name") for t in body.get("tools", []) if isinstance(t, dict)]
    action = decide(last, "Bash" in tools, tool_result)
    command = requested_command(last)
    calls = {"tool": ("Bash", {"command": command, "description": COMMAND_REASON}),
             "ask": ("AskUserQuestion", QUESTION),
             "write": ("Write", {"file_path": WRITE_PATH, "content": "notes\n"}),
             "plan": ("ExitPlanMode", {"plan": "1. Add a failing test\n2. Fix the parser"})}
    model = body.get("model", "claude-sonnet-4-5")

    def events() -> Iterator[tuple[str | None, dict[str, Any]]]:
        yield "message_start", {"type": "message_start", "message": {
            "id": f"msg_{next(ids)}", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 25, "output_tokens": 1, "cache_read_input_tokens": 0,
                      "cache_creation_input_tokens": 0}}}
        yield "content_block_start", {"type": "content_block_start", "index": 0,
                                      "content_block": {"type": "text", "text": ""}}
        for word in (["I'll create the file. "] if action in calls else stream(action)):
            yield "content_block_delta", {"type": "content_block_delta", "index": 0,
                                          "delta": {"type": "text_delta", "text": word}}
        yield "content_block_stop", {"type": "content_block_stop", "index": 0}
        stop = "end_turn"
        if action in calls:
            stop = "tool_use"
            name, tool_input = calls[action]
            yield "content_block_start", {"type": "content_block_start", "index": 1,
                                          "content_block": {"type": "tool_use",
                                                            "id": f"toolu_{next(ids):04d}",
                                                            "name": name, "input": {}}}
            arguments = json.dumps(tool_input)
            yield "content_block_delta", {"type": "content_block_delta", "index": 1,
                                          "delta": {"type": "input_json_delta",
                                                    "partial_json": arguments}}
            yield "content_block_stop", {"type": "content_block_stop", "index": 1}
        yield "message_delta", {"type": "message_delta",
                                "delta": {"stop_reason": stop, "stop_sequence": None},
                                "usage": {"output_tokens": 12}}
        yield "message_stop", {"type": "message_stop"}

    return action, events()


def anthropic_message(body: dict[str, Any]) -> dict[str, Any]:
    """The non-streaming reply: the streamed events folded into one message."""
    _, events = anthropic(body)
    message: dict[str, Any] = {}
    blocks: list[dict[str, Any]] = []
    for _, event in events:
        kind = event["type"]
        if kind == "message_start":
            message = event["message"]
        elif kind == "content_block_start":
            blocks.append(dict(event["content_block"]))
        elif kind == "content_block_delta" and event["delta"]["type"] == "text_delta":
            blocks[-1]["text"] += event["delta"]["text"]
        elif kind == "content_block_delta":
            blocks[-1]["input"] = json.loads(event["delta"]["partial_json"])
        elif kind == "message_delta":
            message.update(event["delta"])
    message["content"] = blocks
    return message


def responses(body: dict[str, Any]) -> tuple[str, Iterator[tuple[str | None, dict[str, Any]]]]:
    items = body.get("input", [])
    last = items[-1] if items else {}
    tool_result = isinstance(last, dict) and last.get("type") == "function_call_output"
    users = [i for i in items if isinstance(i, dict) and i.get("role") == "user"]
    tools = [t.get("name") for t in body.get("tools", []) if isinstance(t, dict)]
    shell = next((t for t in ("shell_command", "shell", "exec_command") if t in tools), None)
    action = decide(users[-1] if users else {}, shell is not None, tool_result)
    if action == "ask" and "request_user_input" in tools:
        action = "tool"
        shell = "request_user_input"
    command = requested_command(users[-1] if users else {})
    response_id = f"resp_{next(ids)}"

    def events() -> Iterator[tuple[str | None, dict[str, Any]]]:
        yield "response.created", {"type": "response.created",
                                   "response": {"id": response_id, "status": "in_progress"}}
        if action == "tool":
            if shell == "request_user_input":
                asked = {k: v for k, v in QUESTION["questions"][0].items() if k != "multiSelect"}
                arguments: dict[str, Any] = {"questions": [asked | {"id": "database"}]}
            elif shell == "shell":
                arguments = {"command": ["bash", "-lc", command]}
            elif shell == "exec_command":
                arguments = {"cmd": command}
            else:
                arguments = {"command": command}
            if shell != "request_user_input":
                arguments |= {"sandbox_permissions": "require_escalated",
                              "justification": COMMAND_REASON}
            item = {"type": "function_call", "id": f"fc_{next(ids)}",
                    "call_id": f"call_{next(ids)}", "name": shell,
                    "arguments": json.dumps(arguments), "status": "completed"}
            yield "response.output_item.added", {"type": "response.output_item.added",
                                                 "output_index": 0, "item": item}
            yield "response.output_item.done", {"type": "response.output_item.done",
                                                "output_index": 0, "item": item}
        else:
            item_id = f"msg_{next(ids)}"
            yield "response.output_item.added", {
                "type": "response.output_item.added", "output_index": 0,
                "item": {"type": "message", "id": item_id, "role": "assistant",
                         "status": "in_progress", "content": []}}
            text = ""
            for word in stream(action):
                text += word
                yield "response.output_text.delta", {
                    "type": "response.output_text.delta", "item_id": item_id,
                    "output_index": 0, "content_index": 0, "delta": word}
            yield "response.output_item.done", {
                "type": "response.output_item.done", "output_index": 0,
                "item": {"type": "message", "id": item_id, "role": "assistant",
                         "status": "completed",
                         "content": [{"type": "output_text", "text": text, "annotations": []}]}}
        yield "response.completed", {"type": "response.completed", "response": {
            "id": response_id, "status": "completed",
            "usage": {"input_tokens": 25, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": 12, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": 37}}}

    return action, events()


SHELL_TOOLS = ("run_shell_command", "bash", "Bash", "shell", "execute_command",
               "run_terminal_cmd", "shell_command")
"""Names under which a CLI offers its shell tool over Chat Completions, first match wins."""


def _function_tools(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The Chat Completions ``tools`` of a request by name, each with its JSON-schema parameters."""
    found: dict[str, dict[str, Any]] = {}
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and isinstance(tool.get("function"), dict):
            function = tool["function"]
            found[str(function.get("name"))] = function.get("parameters") or {}
    return found


def shell_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments for a shell tool call that fill ``schema``'s command, description and requireds."""
    properties = schema.get("properties") or {}
    arguments: dict[str, Any] = {}
    for name, prop in properties.items():
        kind = prop.get("type") if isinstance(prop, dict) else None
        if name in ("command", "cmd"):
            arguments[name] = ["bash", "-lc", COMMAND] if kind == "array" else COMMAND
        elif name in ("description", "justification", "reason", "explanation"):
            arguments[name] = COMMAND_REASON
        elif name in schema.get("required", []):
            arguments[name] = {"boolean": False, "number": 30000, "integer": 30000,
                               "array": [], "object": {}}.get(str(kind), "")
    return arguments


def chat_completions(body: dict[str, Any]) -> tuple[str, Iterator[tuple[str | None,
                                                                      dict[str, Any]]]]:
    messages = body.get("messages", [])
    last = messages[-1] if messages else {}
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    tools = _function_tools(body)
    shell = next((name for name in SHELL_TOOLS if name in tools), None)
    text_tools = scenario == "text-tools"
    action = decide(users[-1] if users else {}, bool(tools) or text_tools,
                    isinstance(last, dict) and last.get("role") == "tool")
    if action == "tool" and shell is None and not text_tools:
        action = "answer"
    model = body.get("model", "fake")

    def chunk(chunk_id: str, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
        return {"id": chunk_id, "object": "chat.completion.chunk", "created": int(time.time()),
                "model": model, "choices": [{"index": 0, "delta": delta,
                                             "finish_reason": finish}]}

    def events() -> Iterator[tuple[str | None, dict[str, Any]]]:
        chunk_id = f"chatcmpl-{next(ids)}"
        yield None, chunk(chunk_id, {"role": "assistant", "content": ""}, None)
        if action == "tool" and shell is not None:
            arguments = json.dumps(shell_arguments(tools[shell]))
            call = {"index": 0, "id": f"call_{next(ids)}", "type": "function",
                    "function": {"name": shell, "arguments": arguments}}
            yield None, chunk(chunk_id, {"tool_calls": [call]}, None)
            finish = "tool_calls"
        else:
            fenced = [f"{COMMAND_REASON}:\n\n", "```bash\n", f"{COMMAND}\n", "```\n"]
            for word in fenced if action == "tool" else stream(action):
                yield None, chunk(chunk_id, {"content": word}, None)
            finish = "stop"
        last_chunk = chunk(chunk_id, {}, finish)
        last_chunk["usage"] = {"prompt_tokens": 25, "completion_tokens": 12, "total_tokens": 37}
        yield None, last_chunk

    return action, events()


def chat_completion(body: dict[str, Any]) -> dict[str, Any]:
    """The non-streaming reply: the streamed chunks folded into one completion."""
    _, events = chat_completions(body)
    message: dict[str, Any] = {"role": "assistant", "content": ""}
    completion: dict[str, Any] = {}
    for _, event in events:
        completion = event
        delta = event["choices"][0]["delta"]
        message["content"] += delta.get("content", "")
        if "tool_calls" in delta:
            message["tool_calls"] = [{k: v for k, v in call.items() if k != "index"}
                                     for call in delta["tool_calls"]]
    completion["object"] = "chat.completion"
    completion["choices"] = [{"index": 0, "message": message,
                              "finish_reason": completion["choices"][0]["finish_reason"]}]
    return completion


def gemini(body: dict[str, Any]) -> tuple[str, Iterator[tuple[str | None, dict[str, Any]]]]:
    contents = body.get("contents", [])
    last = contents[-1] if contents else {}
    parts = last.get("parts", []) if isinstance(last, dict) else []
    tool_result = any(isinstance(p, dict) and "functionResponse" in p for p in parts)
    declared = [f.get("name") for t in body.get("tools", []) if isinstance(t, dict)
                for f in t.get("functionDeclarations", []) if isinstance(f, dict)]
    action = decide(last, "run_shell_command" in declared, tool_result)
    wants_json = "json" in str(body.get("generationConfig", {}).get("responseMimeType", ""))
    usage = {"promptTokenCount": 25, "candidatesTokenCount": 12, "totalTokenCount": 37}

    def chunk(part: dict[str, Any], finish: bool) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [part]}, "index": 0}
        if finish:
            candidate["finishReason"] = "STOP"
        return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": "fake"}

    def events() -> Iterator[tuple[str | None, dict[str, Any]]]:
        if wants_json:
            text = json.dumps({"next_speaker": "user", "reasoning": "The answer is complete."})
            yield None, chunk({"text": text}, True)
            return
        if action == "tool":
            yield None, chunk({"functionCall": {"name": "run_shell_command", "args": {
                "command": requested_command(last), "description": COMMAND_REASON}}}, True)
            return
        for word in stream(action):
            yield None, chunk({"text": word}, False)
        yield None, chunk({"text": ""}, True)

    return action, events()


def gemini_folded(body: dict[str, Any]) -> dict[str, Any]:
    _, events = gemini(body)
    parts: list[dict[str, Any]] = []
    last: dict[str, Any] = {}
    for _, event in events:
        last = event
        parts.extend(event["candidates"][0]["content"]["parts"])
    text = "".join(p.get("text", "") for p in parts)
    folded = [p for p in parts if "text" not in p] or [{"text": text}]
    last["candidates"][0]["content"]["parts"] = folded
    last["candidates"][0]["finishReason"] = "STOP"
    return last


# --------------------------------------------------------------------------------------------
# HTTP


@cache
def tls_context() -> ssl.SSLContext:
    """A server context with a self-signed certificate made for this run (its files are
    removed once loaded)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory(prefix="fake-api-tls-") as folder:
        key, cert = Path(folder) / "key.pem", Path(folder) / "cert.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days",
                        "1", "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
                       check=True, capture_output=True)
        context.load_cert_chain(cert, key)
    return context


class Handler(BaseHTTPRequestHandler):
    """One request; SSE bodies are written as they are produced and end with the connection."""

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _log(self, body: Any, action: str = "") -> None:
        tools = body.get("tools") if isinstance(body, dict) else None
        names = [t.get("name") or (t.get("function") or {}).get("name")
                 or [f.get("name") for f in t.get("functionDeclarations", [])]
                 for t in tools if isinstance(t, dict)] if isinstance(tools, list) else None
        entry = {"time": time.time(), "scenario": scenario, "method": self.command,
                 "path": self.path, "action": action,
                 "tools": names,
                 "body": json.dumps(body)[:3000], "tail": json.dumps(body)[-6000:]}
        with LOG.open("a") as f:
            f.write(json.dumps(entry) + "\n")

    def _json(self, status: int, value: Any) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events: Iterator[tuple[str | None, dict[str, Any]]], done: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        try:
            for name, data in events:
                line = f"event: {name}\n" if name else ""
                self.wfile.write(f"{line}data: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
            if done:
                self.wfile.write(b"data: [DONE]\n\n")
        except (BrokenPipeError, ConnectionResetError):
            return

    def do_GET(self) -> None:
        self._log({})
        path = urlsplit(self.path).path
        if path.endswith("/models"):
            self._json(200, {"object": "list", "data": [], "models": []})
        else:
            self._json(200, {})

    def do_CONNECT(self) -> None:
        """A proxy tunnel: TLS ends here, and its requests are served as plain ones."""
        self._log({})
        self.send_response(200, "Connection Established")
        self.end_headers()
        self.close_connection = True
        try:
            tunnel = tls_context().wrap_socket(self.connection, server_side=True)
        except (ssl.SSLError, OSError):
            return
        Handler(tunnel, self.client_address, self.server)

    def do_HEAD(self) -> None:
        self._log({})
        self.send_response(200)
        self.end_headers()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        path = urlsplit(self.path).path
        if path.endswith("/messages/count_tokens"):
            self._log(body)
            self._json(200, {"input_tokens": 25})
        elif path.endswith("/messages"):
            action, events = anthropic(body)
            self._log(body, action)
            if body.get("stream"):
                self._sse(events, done=False)
            else:
                self._json(200, anthropic_message(body))
        elif path.endswith("/responses"):
            action, events = responses(body)
            self._log(body, action)
            self._sse(events, done=False)
        elif path.endswith("/chat/completions"):
            action, events = chat_completions(body)
            self._log(body, action)
            if body.get("stream"):
                self._sse(events, done=True)
            else:
                self._json(200, chat_completion(body))
        elif path.endswith(":countTokens"):
            self._log(body)
            self._json(200, {"totalTokens": 25})
        elif path.endswith(":streamGenerateContent"):
            action, events = gemini(body)
            self._log(body, action)
            self._sse(events, done=False)
        elif path.endswith(":generateContent"):
            action, _ = gemini(body)
            self._log(body, action)
            self._json(200, gemini_folded(body))
        else:
            self._log(body, "unknown")
            self._json(404, {"error": {"message": f"no route for {path}"}})


def main() -> None:
    global scenario
    scenario = sys.argv[1] if len(sys.argv) > 1 else "default"
    LOG.parent.mkdir(parents=True, exist_ok=True)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
