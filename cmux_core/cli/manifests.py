"""Detection tools: ``cmux manifests list|check|test`` and ``cmux agent explain``.

``manifests list``, ``check`` and ``test`` work on files only and need no server. The
active manifests are the ones a server started now would load, read the way it reads
them (:class:`~cmux_core.detect.registry.ManifestRegistry`): the bundled directory, the
user's ``~/.config/cmux/manifests`` and each ``--manifests-dir``; manifests that plugins
contribute are known only to a running server (``cmux call server.agent_manifests``).
``agent explain TARGET`` asks the running server (``agent.explain``); with ``--file`` it
classifies a saved screen locally with the active manifest for ``--agent``.

Cases: next to ``<agent>.toml`` a manifest author keeps ``<agent>.cases.toml`` — an
array ``[[cases]]`` of screens with the state they must classify as — and/or a folder
``<agent>.cases/`` of ``<state>-<anything>.txt`` screen files. ``manifests test`` runs
them and also names the rules that no case selects.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmux_core.cli.common import (
    AddCommon,
    add_subcommand,
    add_subcommand_group,
    print_json,
    run_and_print,
    table,
)
from cmux_core.detect.engine import (
    FALLBACK_IDLE,
    Classification,
    ScreenInput,
    classify,
    explain,
    explain_unknown_agent,
)
from cmux_core.detect.manifest import (
    STATES,
    Manifest,
    ManifestError,
    bundled_manifests_dir,
    load_manifest,
)
from cmux_core.detect.registry import ManifestRegistry
from cmux_core.errors import CmuxError

_CASE_KEYS = frozenset({"name", "state", "rule", "skip_state_update", "visible_idle",
                        "visible_blocker", "visible_working", "title", "progress", "screen",
                        "file"})


@dataclass(frozen=True)
class Case:
    """One fixture screen and what classifying it must give.

    ``rule`` is the expected matched rule id (``""`` expects the no-rule fallback,
    ``None`` does not check); the ``visible_*``/``skip_state_update`` expectations are
    checked only when given.
    """

    name: str
    state: str
    screen: str
    title: str = ""
    progress: str = ""
    rule: str | None = None
    flags: tuple[tuple[str, bool], ...] = ()
    origin: str = ""

    def check(self, result: Classification) -> list[str]:
        """What differs from the expectation; empty when the case passes."""
        problems = []
        if result.state != self.state:
            problems.append(f"state {result.state}, expected {self.state}")
        if self.rule is not None and (result.matched_rule or "") != self.rule:
            problems.append(f"rule {result.matched_rule or '(none)'}, expected "
                            f"{self.rule or '(none)'}")
        for key, expected in self.flags:
            if getattr(result, key) != expected:
                problems.append(f"{key} {getattr(result, key)}, expected {expected}")
        return problems


def normalize_screen(text: str) -> str:
    """A screen as ``pane.read source=detection`` gives it: rows trimmed of trailing
    spaces, trailing blank rows dropped, ``\\n``-joined with a final ``\\n``."""
    rows = [row.rstrip() for row in text.replace("\r\n", "\n").split("\n")]
    while rows and not rows[-1]:
        rows.pop()
    return "\n".join(rows) + "\n" if rows else ""


def cases_for(manifest_path: Path) -> list[Case] | None:
    """The cases declared next to ``manifest_path``; None when it has none. Raises
    :class:`ManifestError` for a malformed cases file."""
    stem = manifest_path.name.removesuffix(".toml")
    case_table = manifest_path.with_name(f"{stem}.cases.toml")
    folder = manifest_path.with_name(f"{stem}.cases")
    if not case_table.is_file() and not folder.is_dir():
        return None
    cases: list[Case] = []
    if case_table.is_file():
        cases.extend(_load_case_table(case_table))
    if folder.is_dir():
        for path in sorted(folder.glob("*.txt")):
            state = path.name.split("-", 1)[0].removesuffix(".txt")
            if state not in STATES:
                raise ManifestError(f"case file name must start with a state ({', '.join(STATES)})"
                                    f" followed by '-': {path.name}", path=str(path))
            cases.append(Case(name=path.name, state=state,
                              screen=normalize_screen(path.read_text(encoding="utf-8")),
                              origin=str(path)))
    return cases


def _load_case_table(path: Path) -> list[Case]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ManifestError(f"cannot read cases: {exc}", path=str(path)) from None
    unknown = set(data) - {"cases"}
    raw_cases = data.get("cases")
    if unknown or not isinstance(raw_cases, list) or not raw_cases:
        raise ManifestError("a cases file holds one non-empty array of tables, [[cases]]",
                            path=str(path))
    cases = []
    for index, raw in enumerate(raw_cases):
        where = f"cases[{index}]"
        if not isinstance(raw, dict):
            raise ManifestError(f"{where}: not a table", path=str(path))
        bad = set(raw) - _CASE_KEYS
        if bad:
            raise ManifestError(f"{where}: unknown keys {sorted(bad)}", path=str(path))
        name = raw.get("name") or where
        state = raw.get("state")
        if state not in STATES:
            raise ManifestError(f"{name}: 'state' must be one of {', '.join(STATES)}",
                                path=str(path))
        if ("screen" in raw) == ("file" in raw):
            raise ManifestError(f"{name}: give exactly one of 'screen' or 'file'",
                                path=str(path))
        if "file" in raw:
            screen_path = path.parent / str(raw["file"])
            try:
                screen = screen_path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ManifestError(f"{name}: cannot read {screen_path}: {exc}",
                                    path=str(path)) from None
        else:
            screen = str(raw["screen"])
        flags = tuple((key, bool(raw[key])) for key in ("skip_state_update", "visible_idle",
                                                         "visible_blocker", "visible_working")
                      if key in raw)
        rule = raw.get("rule")
        cases.append(Case(name=str(name), state=state, screen=normalize_screen(screen),
                          title=str(raw.get("title", "")),
                          progress=str(raw.get("progress", "")),
                          rule=None if rule is None else str(rule), flags=flags,
                          origin=str(path)))
    return cases


def run_case(manifest: Manifest, case: Case) -> list[str]:
    """Classify the case's screen with ``manifest``; the problems found (empty = pass)."""
    return case.check(classify(manifest, ScreenInput(case.screen, case.title, case.progress)))


def manifest_paths(paths: Iterable[Path]) -> list[Path]:
    """Manifest files named by ``paths``: files as given, directories' ``*.toml`` files
    except ``*.cases.toml``."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(p for p in sorted(path.glob("*.toml"))
                         if not p.name.endswith(".cases.toml"))
        else:
            found.append(path)
    return found


# ---------------------------------------------------------------------------------------------
# cmux manifests


def active_registry(manifests_dirs: Sequence[Path] = ()) -> ManifestRegistry:
    """The manifests a server started now would load (plugins' aside), read once.

    ``manifests_dirs`` come after the configured ones, like ``serve --manifests-dir``.
    Raises :class:`~cmux_core.config.ConfigError` for an unusable ``config.toml``.
    """
    from cmux_core.config_file import load_settings

    settings = load_settings()
    settings.manifests_dirs.extend(manifests_dirs)
    return ManifestRegistry(settings, watch=False)


def active_directories(registry: ManifestRegistry) -> list[Path]:
    """The registry's manifest directories that exist, lowest precedence first; a
    ``--manifests-dir`` that is not a directory is an error."""
    found = []
    for source in registry.sources:
        if source.directory is None:
            continue
        if source.directory.is_dir():
            found.append(source.directory)
        elif source.kind == "manifests_dir":
            raise CmuxError("invalid_params", f"manifests directory {source.directory} "
                            "is not a directory")
    return found


def add_manifest_commands(subparsers: Any, add_common: AddCommon) -> None:
    """Add ``cmux manifests list|check|test`` to the ``cmux`` parser's subparsers."""
    sub = add_subcommand_group(subparsers, "manifests", add_common,
                               help="list, validate and test agent-detection manifests "
                               "(offline)",
                               description="List, validate and test agent-detection "
                               "manifests; no server needed.")

    p = add_subcommand(sub, "list", add_common, cmd_list,
                       help="the active manifests: agent, version, rules, source",
                       description="List the manifests a server started now would use "
                       "for each agent: the bundled ones, ~/.config/cmux/manifests and "
                       "each --manifests-dir, a later source above an earlier one.")
    _add_manifests_dir(p)

    p = add_subcommand(sub, "check", add_common, cmd_check,
                       help="validate manifest files; errors as file:line:col",
                       description="Validate manifest files. Without PATH, every file of "
                       "the active manifest directories: the bundled one, "
                       "~/.config/cmux/manifests and each --manifests-dir.")
    p.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                   help="manifest file or directory of manifests (default: the active "
                        "manifest directories)")
    _add_manifests_dir(p)

    p = add_subcommand(sub, "test", add_common, cmd_test,
                       help="run the cases declared next to each manifest",
                       description="Run the cases declared next to each manifest "
                       "(NAME.cases.toml, NAME.cases/) and name the rules no case selects.")
    p.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                   help="manifest files or directories (default: the bundled manifests)")
    p.add_argument("--verbose", "-v", action="store_true", help="list passing cases too")

    p = sub.add_parser("schema", help="print the JSON Schema of the manifest format",
                       description="Print the JSON Schema of a manifest file, for editors; "
                       "cmux manifests check checks more (regexes, regions, limits).")
    p.set_defaults(func=cmd_schema)


def cmd_schema(args: argparse.Namespace) -> int:
    from cmux_core.detect.manifest_schema import manifest_schema

    print_json(manifest_schema())
    return 0


def _add_manifests_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--manifests-dir", action="append", type=Path, default=[],
                        metavar="DIR", help="a manifests directory above the others, as "
                        "for cmux serve (repeatable)")


def cmd_list(args: argparse.Namespace) -> int:
    registry = active_registry(args.manifests_dir)
    active_directories(registry)
    asyncio.run(registry.reload("cli"))
    rows: list[dict[str, Any]] = []
    for label in registry.labels():
        entry = registry.entry(label)
        assert entry is not None and entry.manifest is not None
        m = entry.manifest
        rows.append({"agent": label, "id": m.id, "aliases": list(m.aliases),
                     "process_names": list(m.process_names), "version": m.version,
                     "updated_at": m.updated_at, "min_engine_version": m.min_engine_version,
                     "rules": len(m.rules), "source_kind": entry.source.kind,
                     "path": str(entry.path), "warning": registry.warning(label)})
    invalid = [{"path": f["file"], "error": f["error"]}
               for f in registry.status()["files"] if not f["valid"]]
    if args.json:
        print_json({"type": "manifest_list", "manifests": rows, "invalid": invalid})
        return 0
    table(rows, [("AGENT", "agent"), ("VERSION", lambda r: r["version"] or "-"),
                 ("RULES", "rules"), ("SOURCE", "source_kind"), ("PATH", "path")])
    for row in rows:
        if row["warning"]:
            print(f"warning: {row['agent']}: {row['warning']}", file=sys.stderr)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    if args.paths and args.manifests_dir:
        raise CmuxError("invalid_params", "give PATHs or --manifests-dir, not both")
    paths = args.paths or active_directories(active_registry(args.manifests_dir))
    results: list[dict[str, Any]] = []
    for path in manifest_paths(paths):
        try:
            manifest = load_manifest(path)
        except ManifestError as exc:
            results.append({"path": str(path), "ok": False, "error": exc.to_dict()})
            if not args.json:
                print(f"error: {exc}", file=sys.stderr)
            continue
        results.append({"path": str(path), "ok": True, "id": manifest.id,
                        "rules": len(manifest.rules)})
        if not args.json:
            print(f"ok: {path} ({manifest.id}, {len(manifest.rules)} rules)")
    if not results:
        raise CmuxError("invalid_params", "no manifest files found")
    if args.json:
        print_json(results)
    return 0 if all(r["ok"] for r in results) else 1


def cmd_test(args: argparse.Namespace) -> int:
    paths = manifest_paths(args.paths or [bundled_manifests_dir()])
    if not paths:
        raise CmuxError("invalid_params", "no manifest files found")
    report: list[dict[str, Any]] = []
    for path in paths:
        report.append(_test_one(path))
    failed = any(not entry["ok"] for entry in report)
    if args.json:
        print_json(report)
        return 1 if failed else 0
    for entry in report:
        if "error" in entry:
            print(f"error: {entry['error']}")
            continue
        if entry["cases"] is None:
            print(f"{entry['path']}: no cases")
            continue
        passed = sum(1 for case in entry["cases"] if case["ok"])
        print(f"{entry['path']}: {passed}/{len(entry['cases'])} cases pass")
        for case in entry["cases"]:
            if not case["ok"]:
                print(f"  FAIL {case['name']}: {'; '.join(case['problems'])}")
            elif args.verbose:
                print(f"  ok   {case['name']}")
        if entry["uncovered_rules"]:
            print(f"  rules no case selects: {', '.join(entry['uncovered_rules'])}")
    return 1 if failed else 0


def _test_one(path: Path) -> dict[str, Any]:
    entry: dict[str, Any] = {"path": str(path), "ok": True, "cases": None,
                             "uncovered_rules": []}
    try:
        manifest = load_manifest(path)
        cases = cases_for(path)
    except ManifestError as exc:
        return {**entry, "ok": False, "error": str(exc)}
    if cases is None:
        return entry
    selected: set[str] = set()
    results = []
    for case in cases:
        result = classify(manifest, ScreenInput(case.screen, case.title, case.progress))
        problems = case.check(result)
        if result.matched_rule:
            selected.add(result.matched_rule)
        results.append({"name": case.name, "ok": not problems, "problems": problems,
                        "state": result.state, "matched_rule": result.matched_rule})
    entry["cases"] = results
    entry["ok"] = all(r["ok"] for r in results)
    entry["uncovered_rules"] = [rule.id for rule in manifest.rules if rule.id not in selected]
    return entry


# ---------------------------------------------------------------------------------------------
# cmux agent explain


def add_explain_command(agent_subparsers: Any, add_common: AddCommon) -> None:
    """Add ``explain`` to the ``cmux agent`` group's subparsers."""
    p = agent_subparsers.add_parser(
        "explain", help="why an agent pane has its state: every rule and its evidence",
        description="Online: cmux agent explain TARGET. Offline: cmux agent explain "
        "--file SCREEN --agent NAME [--title T] [--progress P] [--manifest PATH].")
    add_common(p)
    p.add_argument("target", nargs="?", help="agent or pane target (online)")
    p.add_argument("--file", type=Path, help="classify this saved screen locally")
    p.add_argument("--agent", help="agent label for --file (id, alias or process name)")
    p.add_argument("--title", default="", help="OSC title for --file")
    p.add_argument("--progress", default="", help="OSC 9 progress payload for --file")
    p.add_argument("--manifest", type=Path, help="manifest file for --file")
    p.add_argument("--verbose", "-v", action="store_true", help="show every rule's evidence")
    p.add_argument("--last-mismatch", action="store_true",
                   help="online: the last screen the rules read otherwise while a hook said "
                   "blocked, with the screen")
    p.set_defaults(func=cmd_explain)


def cmd_explain(args: argparse.Namespace) -> int:
    if args.file is None:
        if not args.target:
            raise CmuxError("invalid_params", "give a TARGET, or --file with --agent")
        if args.last_mismatch:
            return run_and_print(args, "agent.explain", {"target": args.target},
                                 lambda result: _render_mismatch(result["explain"]))
        return run_and_print(args, "agent.explain", {"target": args.target},
                             lambda result: _render_explain(result.get("explain", result),
                                                            args.verbose, saved=False))
    try:
        screen = normalize_screen(args.file.read_text(encoding="utf-8", errors="replace"))
    except OSError as exc:
        raise CmuxError("invalid_params", f"cannot read {args.file}: {exc}") from None
    if args.manifest is not None:
        try:
            manifest: Manifest | None = load_manifest(args.manifest)
        except ManifestError as exc:
            raise CmuxError("invalid_manifest", str(exc)) from None
    elif args.agent:
        manifest = find_manifest(args.agent)
    else:
        raise CmuxError("invalid_params", "--file needs --agent NAME or --manifest PATH")
    if manifest is None:
        result = explain_unknown_agent(args.agent)
    else:
        result = explain(manifest, ScreenInput(screen, args.title, args.progress))
    if args.json:
        print_json({"type": "agent_explain", "explain": result})
    else:
        _render_explain(result, args.verbose)
    return 0


def find_manifest(label: str) -> Manifest | None:
    """The active manifest for ``label`` (an agent id, alias or process name), as a
    server started now would pick it; None when no manifest names it."""
    registry = active_registry()
    asyncio.run(registry.reload("cli"))
    return registry.get(label)


def _render_mismatch(result: dict[str, Any]) -> None:
    found = result.get("last_mismatch")
    if not found:
        print(f"agent: {result.get('agent')}  no mismatch: no hook said blocked while the "
              "screen read otherwise")
        return
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(found["at"]))
    print(f"agent: {found['agent']}  at {when}: hook said {found['hook_state']}, screen read "
          f"{found['screen_state']} (rule {found['matched_rule']})")
    print(found["screen"], end="")


def _render_explain(result: dict[str, Any], verbose: bool, *, saved: bool = True) -> None:
    """Print ``result``; ``saved``: of a saved screen (``--file``), not a live pane, whose
    state is the one the server publishes."""
    rule = result.get("matched_rule")
    state = result.get("state")
    if saved and result.get("fallback_reason") == FALLBACK_IDLE:
        # A saved screen: no rule matched, and a server publishes the idle fallback only
        # for an agent one of whose screen rules has matched since it started.
        state = "unknown (idle only once a screen rule of the agent has matched)"
    print(f"agent: {result.get('agent')}  state: {state}")
    if rule:
        print(f"matched rule: {rule['id']} (priority {rule['priority']}, region "
              f"{rule['region']})")
    for key in ("fallback_reason", "skipped_update_reason", "warning",
                "screen_detection_skip_reason"):
        if result.get(key):
            print(f"{key.replace('_', ' ')}: {result[key]}")
    visible = [k.removeprefix("visible_") for k in ("visible_idle", "visible_blocker",
                                                    "visible_working") if result.get(k)]
    if visible:
        print(f"visible evidence: {', '.join(visible)}")
    ignored = result.get("last_ignored_report")
    if ignored:
        print(f"last ignored report: {ignored['method']} from source {ignored['source']!r}"
              f" (agent {ignored['agent']!r}): {ignored['reason']}")
    if result.get("manifest_source"):
        version = result.get("manifest_version")
        print(f"manifest: {result['manifest_source']}" + (f" (version {version})"
                                                          if version else ""))
    rules = result.get("evaluated_rules") or []
    if rules:
        print("rules (file order):")
    for entry in rules:
        mark = "match" if entry["matched"] else "  -  "
        print(f"  {mark}  {entry['id']}  [{entry['state']}, priority {entry['priority']}, "
              f"{entry['region']}]")
        if verbose:
            evidence = entry["evidence"]
            for kind in ("contains", "regex", "line_regex"):
                for item in evidence[kind]:
                    ok = "yes" if item["matched"] else "no "
                    print(f"         {kind} {ok} {item['value']!r}")
            counts = ", ".join(f"{k.removesuffix('_count')} {evidence[k]}"
                               for k in ("all_count", "any_count", "not_count")
                               if evidence[k])
            if counts:
                print(f"         nested gates: {counts}")
            print(f"         region ({evidence['region_bytes']} bytes): "
                  f"{evidence['region_preview']!r}")
