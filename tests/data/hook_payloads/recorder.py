#!/usr/bin/env python3
"""Append one hook invocation to ``$HOOK_LOG`` as a JSON line: argv, stdin, and the env
an integration may read. Installed by ``record.py`` as every hook of the agent recorded."""

import json
import os
import sys
import time

ENV_KEYS = ("CMUX_ENV", "CMUX_SOCKET_PATH", "CMUX_PANE_ID", "CLAUDE_PROJECT_DIR",
            "CLAUDE_CODE_ENTRYPOINT", "GEMINI_PROJECT_DIR", "GEMINI_SESSION_ID", "GEMINI_CWD",
            "CODEX_HOME", "CODEX_THREAD_ID", "CODEX_SESSION_ID")

stdin = "" if sys.stdin.isatty() else sys.stdin.read()
try:
    payload = json.loads(stdin) if stdin.strip() else None
except ValueError:
    payload = None
entry = {"time": time.time(), "argv": sys.argv[1:], "stdin": stdin, "payload": payload,
         "env": {k: os.environ[k] for k in ENV_KEYS if k in os.environ}}
with open(os.environ["HOOK_LOG"], "a", encoding="utf-8") as log:
    log.write(json.dumps(entry) + "\n")
