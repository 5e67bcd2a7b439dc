"""The JSON Schema of the manifest TOML format, for editors (``cmux manifests schema``).

It takes the states, regions and limits from the loader (:mod:`cmux_core.detect.manifest`);
tests check that its keys are the loader's and that every bundled manifest passes. The
loader checks more than a schema can say (every regex compiles in the Rust dialect,
``skip_state_update`` needs ``state = "unknown"``, region arguments, nesting depth and
matcher counts): ``cmux manifests check`` is the full check.
"""

from __future__ import annotations

from typing import Any

from cmux_core.detect import manifest as m
from cmux_core.detect.shapes import SHAPES

SCHEMA_ID = "https://json-schema.org/draft/2020-12/schema"


def _strings(description: str, *, max_length: int | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "string"}
    if max_length is not None:
        item["maxLength"] = max_length
    return {"type": "array", "items": item, "description": description}


def _gate_keys() -> dict[str, Any]:
    """The matcher keys a rule and each nested gate hold."""
    gates = {"type": "array", "items": {"$ref": "#/$defs/gate"}}
    return {
        "contains": _strings("substrings, matched without regard to case",
                             max_length=m.MAX_MATCHER_CHARS),
        "regex": _strings("regexes (Rust dialect) matched against the region",
                          max_length=m.MAX_MATCHER_CHARS),
        "line_regex": _strings("regexes (Rust dialect) matched against each line",
                               max_length=m.MAX_MATCHER_CHARS),
        "shape": {"type": "array", "items": {"enum": sorted(SHAPES)},
                  "description": "screen shapes every agent's dialogs share (a cursor on "
                                 "one of several options, an input box, a notice)"},
        "all": {**gates, "description": "every gate matches"},
        "any": {**gates, "description": "at least one gate matches"},
        "not": {**gates, "description": "no gate matches"},
    }


def _region() -> dict[str, Any]:
    counted = "|".join(sorted(m.COUNTED_REGIONS))
    return {"type": "string", "default": "whole_recent",
            "description": "the text the rule looks at",
            "anyOf": [{"enum": sorted(m.SIMPLE_REGIONS)},
                      {"pattern": rf"^({counted})\(.*\)$"}]}


def _rule() -> dict[str, Any]:
    flags = {key: {"type": "boolean", "default": False} for key in
             ("visible_idle", "visible_blocker", "visible_working", "skip_state_update")}
    return {
        "type": "object", "additionalProperties": False, "required": ["id"],
        "properties": {
            "id": {"type": "string", "minLength": 1, "description": "the rule's name"},
            "state": {"enum": list(m.STATES), "description": "the state a match classifies"},
            "priority": {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1,
                         "default": 0, "description": "higher rules are tried first"},
            "region": _region(),
            **flags,
            **_gate_keys(),
        },
    }


def manifest_schema() -> dict[str, Any]:
    """The JSON Schema of one manifest file."""
    names = {"type": "array", "items": {"type": "string", "minLength": 1}}
    top: dict[str, Any] = {
        "id": {"type": "string", "minLength": 1, "description": "the agent's id"},
        "version": {"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)*$",
                    "description": "dotted numbers, e.g. 2026.08.04.1"},
        "min_engine_version": {"type": "integer", "minimum": 0,
                               "maximum": m.ENGINE_VERSION},
        "updated_at": {"type": "string"},
        "aliases": {**names, "description": "other names of the agent"},
        "process_names": {**names, "description": "process names that identify the agent"},
        "resume": {"type": "object", "additionalProperties": False, "required": ["argv"],
                   "description": "how to resume a recorded session after a restart",
                   "properties": {"argv": {
                       "type": "array", "minItems": 1, "maxItems": m.MAX_RESUME_ARGS,
                       "items": {"type": "string", "minLength": 1},
                       "description": "the program and its arguments, with {session_id} or "
                                      "{session_path}"}}},
        "rules": {"type": "array", "minItems": 1, "maxItems": m.MAX_RULES,
                  "items": {"$ref": "#/$defs/rule"}},
    }
    return {
        "$schema": SCHEMA_ID, "title": "cmux agent-detection manifest", "type": "object",
        "additionalProperties": False, "required": ["id", "rules"], "properties": top,
        "$defs": {"rule": _rule(),
                  "gate": {"type": "object", "additionalProperties": False,
                           "properties": _gate_keys()}},
    }
