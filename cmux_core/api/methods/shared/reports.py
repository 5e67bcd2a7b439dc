"""Validation of what hooks report about panes and workspaces: sources, tokens, lifetimes,
texts.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from cmux_core.api.methods.shared.waiting import STATUS_NAMES
from cmux_core.errors import CmuxError

SOURCE_RE = re.compile(r"[A-Za-z0-9:._-]+")


TOKEN_KEY_RE = re.compile(r"[A-Za-z0-9_-]{1,32}")


MAX_SOURCE_CHARS = 80


MAX_TOKENS_PER_REPORT = 16


MAX_TEXT_CHARS = 80


MAX_CUSTOM_STATUS_CHARS = 32


MAX_ANCESTRY = 32
"""How many processes up its parent chain a reporting process is followed to its terminal."""


MAX_TTL_MS = 86_400_000


MAX_SESSION_ID_BYTES = 512


MAX_SESSION_PATH_BYTES = 4096


START_SOURCES = frozenset({"startup", "resume", "clear", "compact", "new", "fork", "launch"})


def clean_text(value: str, limit: int) -> str:
    """Trim, drop control characters, keep the first ``limit`` characters, trim again."""
    kept = "".join(ch for ch in value.strip() if unicodedata.category(ch) != "Cc")
    return kept[:limit].strip()


def check_source(value: str | None, field: str = "source") -> str:
    source = (value or "").strip()
    if not source:
        raise CmuxError("invalid_metadata_source", "metadata source must not be empty",
                        {"field": field})
    if len(source) > MAX_SOURCE_CHARS:
        raise CmuxError("invalid_metadata_source",
                        f"metadata source must be {MAX_SOURCE_CHARS} characters or fewer",
                        {"field": field})
    if not SOURCE_RE.fullmatch(source):
        raise CmuxError("invalid_metadata_source",
                        "metadata source may contain only ASCII letters, digits, colon, dot, "
                        "underscore, and hyphen", {"field": field})
    return source


def check_tokens(tokens: dict[str, Any] | None) -> dict[str, str | None]:
    """Validated, normalised token patch; an emptied value clears its key."""
    out: dict[str, str | None] = {}
    if not tokens:
        return out
    if len(tokens) > MAX_TOKENS_PER_REPORT:
        raise CmuxError("invalid_metadata_tokens",
                        f"a report may set at most {MAX_TOKENS_PER_REPORT} tokens",
                        {"reason": "too_many_tokens"})
    for key, value in tokens.items():
        if not TOKEN_KEY_RE.fullmatch(key):
            raise CmuxError("invalid_metadata_tokens",
                            f"token name {key!r} must be 1-32 ASCII letters, digits, "
                            "underscores or hyphens", {"token": key})
        if value is not None and not isinstance(value, str):
            raise CmuxError("invalid_metadata_tokens",
                            f"token {key} must be a string or null", {"token": key})
        out[key] = (clean_text(value, MAX_TEXT_CHARS) or None) if value is not None else None
    return out


def check_ttl(ttl_ms: int | None) -> float | None:
    if ttl_ms is None:
        return None
    if not 1 <= ttl_ms <= MAX_TTL_MS:
        raise CmuxError("invalid_metadata_ttl",
                        f"ttl_ms must be between 1 and {MAX_TTL_MS} milliseconds")
    return ttl_ms / 1000


def check_state_labels(labels: dict[str, Any] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw, value in (labels or {}).items():
        key = raw.strip().lower()
        if key not in STATUS_NAMES:
            raise CmuxError("invalid_state_label", f"unknown state label: {raw}")
        if not isinstance(value, str):
            raise CmuxError("invalid_state_label", f"state label {raw} must be a string")
        text = clean_text(value, MAX_TEXT_CHARS)
        if text:
            out[key] = text
    return out
