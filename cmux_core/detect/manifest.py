"""Detection manifests: parse, validate and compile the manifest TOML format.

The format is the herdr agent-detection manifest at engine version 3 (a herdr manifest
file loads unchanged and classifies as it would there) plus keys of our own:
``process_names``, the ``[resume]`` table whose ``argv`` restarts a recorded agent session
after a server restart, and the ``shape`` matcher, which references the shared screen
shapes of :mod:`cmux_core.detect.shapes` (a dialog as any agent draws it). Everything is
validated when a manifest is loaded and every regex is compiled then, so classifying a
screen never compiles or fails. Any problem raises :class:`ManifestError` naming the
file, the line and column (or the rule) and what is wrong.

Regexes are written in the Rust ``regex`` dialect and compiled by
:mod:`cmux_core.detect.pattern` (RE2: linear-time matching); one that does not compile,
or uses what the dialect lacks (look-around, backreferences), is an error naming the rule.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal, cast

from cmux_core.detect.pattern import Pattern, compile_pattern
from cmux_core.detect.shapes import SHAPES

AgentState = Literal["idle", "working", "blocked", "unknown"]
"""An agent's state, the one type for what a rule classifies, a hook reports and a terminal's
record holds (its public status adds ``done``: :data:`cmux_core.agents.record.AgentStatus`)."""

ENGINE_VERSION = 3
"""Highest ``min_engine_version`` a manifest may ask for."""

MAX_RULES = 128
MAX_DEPTH = 8
"""Deepest allowed nesting of ``all``/``any``/``not`` gates below a rule."""
MAX_GATES = 512
"""Nested gates in one manifest (rules themselves are not counted)."""
MAX_MATCHERS_PER_GATE = 32
"""``contains`` + ``regex`` + ``line_regex`` strings directly in one rule or gate."""
MAX_MATCHERS = 1024
"""``contains`` + ``regex`` + ``line_regex`` strings in one manifest."""
MAX_MATCHER_CHARS = 512
MAX_REGION_COUNT = 65535

STATES: tuple[AgentState, ...] = ("idle", "working", "blocked", "unknown")

_TOP_KEYS = frozenset({"id", "version", "min_engine_version", "updated_at", "aliases",
                       "process_names", "resume", "rules"})
_MATCHER_KEYS = ("contains", "regex", "line_regex", "shape", "all", "any", "not")
_RULE_KEYS = frozenset({"id", "state", "priority", "region", "visible_idle", "visible_blocker",
                        "visible_working", "skip_state_update", *_MATCHER_KEYS})

SIMPLE_REGIONS = frozenset({
    "whole_recent",
    "after_last_prompt_marker", "before_current_prompt_marker",
    "whole_recent_without_current_prompt_marker", "current_prompt_block_marker",
    "after_current_prompt_block_marker",
    "after_last_horizontal_rule", "prompt_box_body", "above_prompt_box",
    "last_non_empty_above_prompt_box",
    "osc_title", "osc_progress",
})
COUNTED_REGIONS = frozenset({"bottom_lines", "bottom_non_empty_lines", "top_non_empty_lines"})

_COUNTED_RE = re.compile(r"^([a-z_]+)\((.*)\)$", re.DOTALL)
_VERSION_RE = re.compile(r"^[0-9]+(\.[0-9]+)*$")
_TOML_POS_RE = re.compile(r"\(at line (\d+), column (\d+)\)")
_U64_MAX = 2**64 - 1
_I32 = (-(2**31), 2**31 - 1)
_U32_MAX = 2**32 - 1

MAX_RESUME_ARGS = 32
RESUME_PLACEHOLDERS = {"session_id": "id", "session_path": "path"}
"""Each placeholder a resume argv may hold and the kind of session reference it takes."""
_PLACEHOLDER_RE = re.compile(r"\{([^{}]*)\}")


class ManifestError(Exception):
    """A manifest that cannot be used; ``str()`` is ``file:line:col: rule "id": message``.

    ``line``/``column`` are 1-based and point at the offending key or table when the
    manifest came from text; ``rule_id`` names the rule when the problem is inside one.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 column: int | None = None, rule_id: str | None = None) -> None:
        self.message = message
        self.path = path
        self.line = line
        self.column = column
        self.rule_id = rule_id
        super().__init__(self.describe())

    def describe(self) -> str:
        where = self.path or "<manifest>"
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        rule = f" rule {self.rule_id!r}:" if self.rule_id is not None else ""
        return f"{where}:{rule} {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "column": self.column,
                "rule_id": self.rule_id, "message": self.message}


@dataclass(frozen=True, slots=True)
class Region:
    """The slice of the input a rule looks at; ``name`` is the spelling in the manifest."""

    name: str
    kind: str
    count: int = 0


@dataclass(frozen=True, slots=True)
class Gate:
    """Matchers that must all hold: the body of a rule or of an ``all``/``any``/``not`` entry.

    ``contains`` keeps the needles as written; ``folded`` holds them lowercased for the
    case-insensitive substring test.
    """

    contains: tuple[str, ...] = ()
    folded: tuple[str, ...] = ()
    regex: tuple[Pattern, ...] = ()
    line_regex: tuple[Pattern, ...] = ()
    shape: tuple[str, ...] = ()
    """Names of :data:`~cmux_core.detect.shapes.SHAPES`, each found in the region."""
    all: tuple[Gate, ...] = ()
    any: tuple[Gate, ...] = ()
    not_: tuple[Gate, ...] = ()


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule: when its gate matches its region, the screen is in ``state``.

    ``state`` is ``None`` when the manifest leaves it out (the result is then ``unknown``).
    """

    id: str
    state: AgentState | None
    priority: int
    region: Region
    gate: Gate
    visible_idle: bool = False
    visible_blocker: bool = False
    visible_working: bool = False
    skip_state_update: bool = False
    line: int | None = None


def _largest_pattern(gate: Gate) -> int:
    sizes = [p.size for p in (*gate.regex, *gate.line_regex)]
    sizes += [_largest_pattern(g) for g in (*gate.all, *gate.any, *gate.not_)]
    return max(sizes, default=0)


@dataclass(frozen=True)
class Manifest:
    """A validated manifest with compiled rules, in file order.

    ``source`` says where it came from: a file path, ``bundled:<file>`` or
    ``plugin:<id>``. ``labels`` (id and aliases, lowercased) and ``process_names`` are
    what process identification matches a pane's foreground process against.
    """

    id: str
    aliases: tuple[str, ...]
    process_names: tuple[str, ...]
    rules: tuple[Rule, ...]
    source: str = "<string>"
    version: str | None = None
    min_engine_version: int | None = None
    updated_at: str | None = None
    resume: tuple[str, ...] = ()
    """The ``[resume] argv`` template (empty: the agent's sessions are not resumed)."""
    by_priority: tuple[Rule, ...] = field(init=False, repr=False, compare=False)
    """The rules from highest to lowest priority, file order among equals: the first that
    matches is the one classification selects."""
    regex_size: int = field(init=False, repr=False, compare=False)
    """The largest compiled program among the rules' regexes, in instructions: a search
    costs at worst about this many steps per byte of the screen."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_priority",
                           tuple(sorted(self.rules, key=lambda rule: -rule.priority)))
        object.__setattr__(self, "regex_size",
                           max((_largest_pattern(rule.gate) for rule in self.rules), default=0))

    @property
    def labels(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for name in (self.id, *self.aliases):
            seen[name.strip().lower()] = None
        return tuple(seen)

    def resume_argv(self, kind: str, value: str) -> list[str] | None:
        """The command that resumes the session ``value`` (a reference of ``kind``, ``id``
        or ``path``): the template with its placeholder filled in. None when the manifest
        has no template or its placeholder takes the other kind of reference."""
        if not self.resume:
            return None
        wanted = {RESUME_PLACEHOLDERS[m.group(1)]
                  for arg in self.resume for m in _PLACEHOLDER_RE.finditer(arg)}
        if wanted != {kind}:
            return None
        return [_PLACEHOLDER_RE.sub(lambda _m: value, arg) for arg in self.resume]

    @property
    def regions(self) -> tuple[Region, ...]:
        """Distinct regions the rules use, in first-use order."""
        return tuple(dict.fromkeys(rule.region for rule in self.rules))


BUNDLED_PACKAGE = "cmux_core._manifests"
"""The package holding the bundled manifests: the repository's top-level ``manifests/``,
mapped to this name in pyproject.toml and installed inside the wheel."""


def bundled_manifests_dir() -> Path:
    """The directory of the manifests shipped with cmux, found as :data:`BUNDLED_PACKAGE`
    (so one lookup serves a source checkout, an editable install and an installed wheel).

    Never raises: when the package is missing (an install that predates it) this returns
    the path it would have inside the wheel, which does not exist; the registry then
    logs that it found no bundled manifests there.
    """
    try:
        return Path(str(resources.files(BUNDLED_PACKAGE)))
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[1] / BUNDLED_PACKAGE.rpartition(".")[2]


def load_manifest(path: Path, *, source: str | None = None) -> Manifest:
    """Read, parse and validate one manifest file; raises :class:`ManifestError` (also when
    the file cannot be read or is not UTF-8)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"cannot read manifest: {exc}", path=str(path)) from None
    return parse_manifest(text, source=source or str(path), path=str(path))


def parse_manifest(text: str, *, source: str = "<string>", path: str | None = None) -> Manifest:
    """Parse and validate manifest TOML ``text``. ``path`` (default: ``source``) is the
    file name errors report."""
    where = path if path is not None else source
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        pos = _TOML_POS_RE.search(message)
        line = column = None
        if pos:
            line, column = int(pos.group(1)), int(pos.group(2))
            message = message[:pos.start()].rstrip()
        elif message.endswith("(at end of document)"):
            rows = text.split("\n")
            line, column = len(rows), len(rows[-1]) + 1
            message = message.removesuffix("(at end of document)").rstrip()
        raise ManifestError(f"invalid TOML: {message}", path=where, line=line,
                            column=column) from None
    return _Builder(data, source=source, path=where, text=text).build()


def manifest_from_data(data: Mapping[str, Any], *, source: str) -> Manifest:
    """Validate an already parsed manifest table (a plugin's mapping); errors carry no
    line numbers."""
    return _Builder(dict(data), source=source, path=source, text=None).build()


class _Locator:
    """Finds where a key or rule sits in the manifest text, for error positions."""

    _HEADER = re.compile(r"^[ \t]*\[")
    _RULES = re.compile(r"^[ \t]*\[\[[ \t]*rules[ \t]*\]\]")

    def __init__(self, text: str | None) -> None:
        self.lines = text.splitlines() if text is not None else []
        self.rule_lines = [i for i, line in enumerate(self.lines) if self._RULES.match(line)]

    def _key(self, key: str, start: int, stop: int) -> tuple[int, int] | None:
        pattern = re.compile(rf"^([ \t]*)(?:{re.escape(key)}|\"{re.escape(key)}\")[ \t]*=")
        for i in range(start, min(stop, len(self.lines))):
            m = pattern.match(self.lines[i])
            if m:
                return i + 1, len(m.group(1)) + 1
        return None

    def top(self, key: str | None) -> tuple[int | None, int | None]:
        if not self.lines:
            return None, None
        stop = next((i for i, line in enumerate(self.lines) if self._HEADER.match(line)),
                    len(self.lines))
        pos = self._key(key, 0, stop) if key else None
        if pos is None and key == "rules" and self.rule_lines:
            return self.rule_lines[0] + 1, 1
        if pos is None and key == "resume":
            header = re.compile(r"^[ \t]*\[[ \t]*resume[ \t]*\]")
            pos = next(((i + 1, 1) for i, line in enumerate(self.lines) if header.match(line)),
                       None)
        return pos if pos else (None, None)

    def rule(self, index: int, key: str | None, rule_id: str | None,
             rule_count: int) -> tuple[int | None, int | None]:
        """Position of ``key`` in rule ``index`` (or of the rule); ``[[rules]]`` headers are
        trusted only when there is one per rule, else the rule's ``id`` line is searched."""
        if not self.lines:
            return None, None
        if index < len(self.rule_lines) and len(self.rule_lines) == rule_count:
            start = self.rule_lines[index]
            stop = next((i for i in range(start + 1, len(self.lines))
                         if self._RULES.match(self.lines[i])), len(self.lines))
            if key:
                pos = self._key(key, start + 1, stop)
                if pos:
                    return pos
            return start + 1, 1
        if rule_id is not None:
            quoted = re.compile(r"\bid\s*=\s*(['\"])" + re.escape(rule_id) + r"\1")
            for i, line in enumerate(self.lines):
                m = quoted.search(line)
                if m:
                    return i + 1, m.start() + 1
        return None, None


class _Builder:
    def __init__(self, data: dict[str, Any], *, source: str, path: str | None,
                 text: str | None) -> None:
        self.data = data
        self.source = source
        self.path = path
        self.locator = _Locator(text)
        self.gates = 0
        self.matchers = 0
        self.min_engine: int | None = None
        self.rule_count = 0

    def fail(self, message: str, *, key: str | None = None, rule: int | None = None,
             rule_id: str | None = None) -> ManifestError:
        if rule is None:
            line, column = self.locator.top(key)
        else:
            line, column = self.locator.rule(rule, key, rule_id, self.rule_count)
        return ManifestError(message, path=self.path, line=line, column=column, rule_id=rule_id)

    def build(self) -> Manifest:
        data = self.data
        for key in data:
            if key not in _TOP_KEYS:
                raise self.fail(f"unknown key {key!r} (expected one of: "
                                f"{', '.join(sorted(_TOP_KEYS))})", key=key)
        ident = data.get("id")
        if not isinstance(ident, str) or not ident.strip():
            raise self.fail("'id' is required and must be a non-blank string", key="id")
        version = data.get("version")
        if version is not None and not (isinstance(version, str) and _valid_version(version)):
            raise self.fail("'version' must be a dotted numeric string such as "
                            "\"2026.08.04.1\"", key="version")
        engine = data.get("min_engine_version")
        if engine is not None:
            if not _is_int(engine) or not 0 <= engine <= _U32_MAX:
                raise self.fail("'min_engine_version' must be a non-negative integer",
                                key="min_engine_version")
            if engine > ENGINE_VERSION:
                raise self.fail(f"'min_engine_version' {engine} is newer than this engine "
                                f"(version {ENGINE_VERSION})", key="min_engine_version")
            self.min_engine = engine
        updated = data.get("updated_at")
        if updated is not None and not isinstance(updated, str):
            raise self.fail("'updated_at' must be a string", key="updated_at")
        aliases = self.names("aliases")
        process_names = self.names("process_names")
        resume = self.resume()
        raw_rules = data.get("rules")
        if not isinstance(raw_rules, list) or not all(isinstance(r, dict) for r in raw_rules):
            raise self.fail("'rules' must be an array of tables ([[rules]])", key="rules")
        self.rule_count = len(raw_rules)
        if not 1 <= len(raw_rules) <= MAX_RULES:
            raise self.fail(f"a manifest needs 1 to {MAX_RULES} rules, not {len(raw_rules)}",
                            key="rules")
        rules = tuple(self.rule(index, raw) for index, raw in enumerate(raw_rules))
        if self.gates > MAX_GATES:
            raise self.fail(f"too many nested gates: {self.gates} (at most {MAX_GATES})",
                            key="rules")
        if self.matchers > MAX_MATCHERS:
            raise self.fail(f"too many matchers: {self.matchers} (at most {MAX_MATCHERS})",
                            key="rules")
        return Manifest(id=ident.strip(), aliases=aliases, process_names=process_names,
                        rules=rules, source=self.source, version=version,
                        min_engine_version=engine, updated_at=updated, resume=resume)

    def resume(self) -> tuple[str, ...]:
        """Check the ``[resume]`` table: ``argv``, 1 to 32 non-blank strings, the first a
        program name, holding placeholders of one kind (``{session_id}`` or
        ``{session_path}``) and no other braces."""
        table = self.data.get("resume")
        if table is None:
            return ()
        if not isinstance(table, dict):
            raise self.fail("'resume' must be a table ([resume] with argv = [...])",
                            key="resume")
        for key in table:
            if key != "argv":
                raise self.fail(f"unknown key {key!r} in [resume] (expected: argv)",
                                key="resume")
        argv = table.get("argv")
        if (not isinstance(argv, list) or not 1 <= len(argv) <= MAX_RESUME_ARGS
                or not all(isinstance(a, str) and a.strip() and "\0" not in a for a in argv)):
            raise self.fail(f"[resume] argv must be an array of 1 to {MAX_RESUME_ARGS} "
                            "non-blank strings", key="resume")
        kinds: set[str] = set()
        for i, arg in enumerate(argv):
            for m in _PLACEHOLDER_RE.finditer(arg):
                if m.group(1) not in RESUME_PLACEHOLDERS:
                    raise self.fail(f"[resume] argv[{i}]: unknown placeholder {m.group(0)!r} "
                                    "(use {session_id} or {session_path})", key="resume")
                if i == 0:
                    raise self.fail("[resume] argv[0] is the program and cannot hold a "
                                    "placeholder", key="resume")
                kinds.add(RESUME_PLACEHOLDERS[m.group(1)])
            if "{" in _PLACEHOLDER_RE.sub("", arg) or "}" in _PLACEHOLDER_RE.sub("", arg):
                raise self.fail(f"[resume] argv[{i}]: a brace outside a placeholder",
                                key="resume")
        if len(kinds) != 1:
            raise self.fail("[resume] argv needs a placeholder, and only one kind of them: "
                            "{session_id} or {session_path}", key="resume")
        return tuple(argv)

    def names(self, key: str) -> tuple[str, ...]:
        value = self.data.get(key, [])
        if not isinstance(value, list) or not all(
                isinstance(v, str) and v.strip() for v in value):
            raise self.fail(f"{key!r} must be an array of non-blank strings", key=key)
        return tuple(v.strip() for v in value)

    def rule(self, index: int, raw: dict[str, Any]) -> Rule:
        rid = raw.get("id")
        label = rid if isinstance(rid, str) and rid.strip() else None

        def fail(message: str, key: str | None = None) -> ManifestError:
            where = "" if label is not None else f"rules[{index}]: "
            return self.fail(where + message, key=key, rule=index, rule_id=label)

        for key in raw:
            if key not in _RULE_KEYS:
                raise fail(f"unknown key {key!r} (expected one of: "
                           f"{', '.join(sorted(_RULE_KEYS))})", key)
        if label is None:
            raise fail("'id' is required and must be a non-blank string", "id")
        state = raw.get("state")
        if state is not None and state not in STATES:
            raise fail(f"'state' must be one of {', '.join(STATES)}, not {state!r}", "state")
        priority = raw.get("priority", 0)
        if not _is_int(priority) or not _I32[0] <= priority <= _I32[1]:
            raise fail("'priority' must be a 32-bit integer", "priority")
        flags: dict[str, bool] = {}
        for key in ("visible_idle", "visible_blocker", "visible_working", "skip_state_update"):
            value = raw.get(key, False)
            if not isinstance(value, bool):
                raise fail(f"{key!r} must be true or false", key)
            flags[key] = value
        if flags["skip_state_update"]:
            if state != "unknown":
                raise fail("'skip_state_update' requires state = \"unknown\"",
                           "skip_state_update")
            if flags["visible_idle"] or flags["visible_blocker"] or flags["visible_working"]:
                raise fail("'skip_state_update' cannot be combined with visible_* flags",
                           "skip_state_update")
        region_raw = raw.get("region", "whole_recent")
        if not isinstance(region_raw, str):
            raise fail("'region' must be a string", "region")
        try:
            region = parse_region(region_raw, min_engine_version=self.min_engine)
        except ValueError as exc:
            raise fail(str(exc), "region") from None
        try:
            gate = self.gate(raw, depth=0, where="")
        except _GateError as exc:
            raise fail(exc.message, exc.key) from None
        line = self.locator.rule(index, None, label, self.rule_count)[0]
        return Rule(id=label, state=cast("AgentState | None", state), priority=priority,
                    region=region, gate=gate, line=line, **flags)

    def gate(self, raw: dict[str, Any], *, depth: int, where: str,
             negative: bool = False) -> Gate:
        if depth > MAX_DEPTH:
            raise _GateError(f"{where.rstrip('.')}: gates nest deeper than {MAX_DEPTH} levels",
                             None)
        if depth:
            for key in raw:
                if key not in _MATCHER_KEYS:
                    raise _GateError(f"{where}{key}: unknown key in gate {key!r} (a gate has "
                                     f"only {', '.join(_MATCHER_KEYS)})", None)
        strings: dict[str, tuple[str, ...]] = {}
        for key in ("contains", "regex", "line_regex"):
            value = raw.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise _GateError(f"{where}{key}: must be an array of strings", key)
            for v in value:
                if len(v) > MAX_MATCHER_CHARS:
                    raise _GateError(f"{where}{key}: matcher longer than {MAX_MATCHER_CHARS} "
                                     f"characters ({len(v)})", key)
            strings[key] = tuple(value)
        shape = raw.get("shape", [])
        if not isinstance(shape, list) or not all(v in SHAPES for v in shape):
            raise _GateError(f"{where}shape: must be an array of shape names "
                             f"({', '.join(SHAPES)})", "shape")
        nested: dict[str, tuple[dict[str, Any], ...]] = {}
        for key in ("all", "any", "not"):
            value = raw.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
                raise _GateError(f"{where}{key}: must be an array of inline tables", key)
            nested[key] = tuple(value)
        direct = sum(len(v) for v in strings.values())
        if direct > MAX_MATCHERS_PER_GATE:
            raise _GateError(f"{where.rstrip('.') or 'rule'}: {direct} matchers in one gate "
                             f"(at most {MAX_MATCHERS_PER_GATE})", None)
        positive = bool(strings["contains"] or strings["regex"] or strings["line_regex"]
                        or shape or nested["all"] or nested["any"])
        if negative:
            if not positive and not nested["not"]:
                raise _GateError(f"{where.rstrip('.')}: a 'not' gate needs at least one "
                                 "matcher", None)
        elif not positive:
            what = where.rstrip(".") or "rule"
            raise _GateError(f"{what}: needs at least one positive matcher (contains, regex, "
                             "line_regex, shape, all or any); 'not' alone never matches anything",
                             None)
        self.matchers += direct
        compiled: dict[str, tuple[Pattern, ...]] = {}
        for key in ("regex", "line_regex"):
            patterns = []
            for source in strings[key]:
                try:
                    patterns.append(compile_pattern(source, lines=key == "line_regex"))
                except ValueError as exc:
                    raise _GateError(f"{where}{key}: invalid regex {source!r}: {exc}",
                                     key) from None
            compiled[key] = tuple(patterns)
        children: dict[str, tuple[Gate, ...]] = {}
        for key in ("all", "any", "not"):
            self.gates += len(nested[key])
            children[key] = tuple(
                self.gate(sub, depth=depth + 1, where=f"{where}{key}[{i}].",
                          negative=key == "not")
                for i, sub in enumerate(nested[key]))
        contains = strings["contains"]
        return Gate(contains=contains, folded=tuple(s.lower() for s in contains),
                    regex=compiled["regex"], line_regex=compiled["line_regex"],
                    shape=tuple(shape), all=children["all"], any=children["any"],
                    not_=children["not"])


class _GateError(Exception):
    def __init__(self, message: str, key: str | None) -> None:
        super().__init__(message)
        self.message = message
        self.key = key


def parse_region(name: str, *, min_engine_version: int | None = None) -> Region:
    """Parse a region spelling (``whole_recent``, ``bottom_lines(20)``, ...); raises
    ``ValueError`` naming what is wrong."""
    spec = name.strip()
    if spec in SIMPLE_REGIONS:
        return Region(spec, spec)
    m = _COUNTED_RE.match(spec)
    if m is None or m.group(1) not in COUNTED_REGIONS:
        raise ValueError(f"unknown region {name!r}")
    kind, digits = m.group(1), m.group(2)
    if kind == "top_non_empty_lines":
        if min_engine_version is not None and min_engine_version < 3:
            raise ValueError("region top_non_empty_lines(N) needs min_engine_version >= 3")
        if not re.fullmatch(r"[1-9][0-9]*", digits) or int(digits) > MAX_REGION_COUNT:
            raise ValueError(f"region {name!r}: the count must be a whole number from 1 to "
                             f"{MAX_REGION_COUNT} without leading zeros")
    elif not re.fullmatch(r"\+?[0-9]+", digits) or int(digits) > _U64_MAX:
        raise ValueError(f"region {name!r}: the count must be a non-negative whole number")
    return Region(spec, kind, int(digits))


def compare_versions(a: str, b: str) -> int:
    """-1, 0 or 1 comparing dotted numeric versions segment-wise (trailing zeros ignored)."""
    pa = [int(s) for s in a.split(".")]
    pb = [int(s) for s in b.split(".")]
    while pa and pa[-1] == 0:
        pa.pop()
    while pb and pb[-1] == 0:
        pb.pop()
    return (pa > pb) - (pa < pb)


def _valid_version(version: str) -> bool:
    return bool(_VERSION_RE.match(version)) and all(
        int(s) <= _U64_MAX for s in version.split("."))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
