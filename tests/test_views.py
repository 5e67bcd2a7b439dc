"""Agent views: the filter and sort grammar (pure), and agent.view.* through a real server."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest
from conftest import Api
from hypothesis import given, settings
from hypothesis import strategies as st

from cmux_core.agents.views import (
    MISSING,
    InvalidAgentView,
    PluginRef,
    ViewBook,
    ViewContext,
    parse_view,
    project,
)
from cmux_core.errors import CmuxError
from cmux_core.events import Event, EventHub
from cmux_core.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[1]
VIEWS_PLUGIN = ROOT / "plugins" / "cmux-views"


def row(pane: str, status: str = "idle", *, ws: str = "w1", tab: str = "w1:t1",
        agent: str | None = "claude", seen: bool = True, seq: int = 0,
        tokens: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"terminal_id": f"term_{pane}", "pane_id": pane, "workspace_id": ws,
                           "tab_id": tab, "agent_status": status, "focused": False,
                           "revision": 0, "seen": seen, "state_change_seq": seq, **extra}
    if agent is not None:
        out["agent"] = agent
    if tokens:
        out["tokens"] = tokens
    return out


ROWS = [
    row("w1:p1", "working", seq=5, tokens={"branch": "main"}),
    row("w1:p2", "blocked", seq=7, agent="codex"),
    row("w1:p3", "idle", agent=None),
    row("w2:p1", "done", ws="w2", tab="w2:t1", seen=False, seq=3, tokens={"branch": "fix"}),
    row("w2:p2", "idle", ws="w2", tab="w2:t1", seq=9, agent="pi"),
]
CTX = ViewContext("w2", "w2:t1", {"w1": 0, "w2": 1}, {"w1:t1": 1, "w2:t1": 1},
                  {"w1:p1": 1, "w1:p2": 2, "w1:p3": 3, "w2:p1": 1, "w2:p2": 2})


def panes(filter: Any = None, sort: Any = None, rows: list[dict[str, Any]] = ROWS,
          ctx: ViewContext = CTX, plugin_values: Any = None) -> list[str]:
    view = parse_view("test", None, filter, sort)
    return [r["pane_id"] for r in project(view, rows, ctx, plugin_values)]


# -- filters ----------------------------------------------------------------------------------


def test_no_view_keeps_every_row_in_order() -> None:
    assert [r["pane_id"] for r in project(None, ROWS, CTX)] == [r["pane_id"] for r in ROWS]
    assert panes() == [r["pane_id"] for r in ROWS]


@pytest.mark.parametrize(("filter", "expected"), [
    ({"op": "eq", "field": "status", "value": "blocked"}, ["w1:p2"]),
    ({"op": "in", "field": "status", "values": ["blocked", "done"]}, ["w1:p2", "w2:p1"]),
    ({"op": "eq", "field": "agent", "value": "claude"}, ["w1:p1", "w2:p1"]),
    ({"op": "exists", "field": "agent"}, ["w1:p1", "w1:p2", "w2:p1", "w2:p2"]),
    ({"op": "not", "filter": {"op": "exists", "field": "agent"}}, ["w1:p3"]),
    ({"op": "eq", "field": "seen", "value": False}, ["w2:p1"]),
    ({"op": "eq", "field": "state_change_seq", "value": 7}, ["w1:p2"]),
    ({"op": "exists", "field": "state_change_seq"}, ["w1:p1", "w1:p2", "w2:p1", "w2:p2"]),
    ({"op": "eq", "field": {"token": "branch"}, "value": "fix"}, ["w2:p1"]),
    ({"op": "exists", "field": {"token": "branch"}}, ["w1:p1", "w2:p1"]),
    ({"op": "eq", "field": "workspace_id", "value": {"context": "current_workspace_id"}},
     ["w2:p1", "w2:p2"]),
    ({"op": "in", "field": "tab_id", "values": [{"context": "current_tab_id"}, "w1:t9"]},
     ["w2:p1", "w2:p2"]),
    ({"op": "eq", "field": "pane_id", "value": "w1:p3"}, ["w1:p3"]),
    ({"op": "all", "filters": [{"op": "eq", "field": "workspace_id", "value": "w1"},
                               {"op": "exists", "field": "agent"}]}, ["w1:p1", "w1:p2"]),
    ({"op": "any", "filters": [{"op": "eq", "field": "status", "value": "working"},
                               {"op": "eq", "field": "agent", "value": "pi"}]},
     ["w1:p1", "w2:p2"]),
])
def test_filters(filter: dict[str, Any], expected: list[str]) -> None:
    assert panes(filter) == expected


def test_missing_fields_never_equal_and_not_keeps_them() -> None:
    # w1:p3 has no agent: eq on agent never matches it, even against a missing-looking value
    assert "w1:p3" not in panes({"op": "eq", "field": "agent", "value": ""})
    assert "w1:p3" in panes({"op": "not", "filter": {"op": "eq", "field": "agent",
                                                      "value": "claude"}})
    # state_change_seq 0 means "never changed": missing, so not equal to 0
    assert panes({"op": "eq", "field": "state_change_seq", "value": 0}) == []


def test_unresolvable_context_is_missing() -> None:
    flt = {"op": "eq", "field": "workspace_id", "value": {"context": "current_workspace_id"}}
    assert panes(flt, ctx=ViewContext()) == []
    assert panes({"op": "not", "filter": flt}, ctx=ViewContext()) == [r["pane_id"] for r in ROWS]


def test_eq_compares_types_strictly() -> None:
    rows = [row("w1:p1", seq=1), row("w1:p2", seq=2, tokens={"n": "1"})]
    assert panes({"op": "eq", "field": "state_change_seq", "value": 1}, rows=rows) == ["w1:p1"]
    assert panes({"op": "eq", "field": {"token": "n"}, "value": "1"}, rows=rows) == ["w1:p2"]
    # a token holding a string never equals a number-looking field value of another type
    assert panes({"op": "eq", "field": "seen", "value": True}, rows=rows) == ["w1:p1", "w1:p2"]


# -- sorts ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("sort", "expected"), [
    ([{"field": "attention", "order": "desc"}], ["w1:p2", "w2:p1", "w1:p1", "w1:p3", "w2:p2"]),
    ([{"field": "attention"}], ["w1:p3", "w2:p2", "w1:p1", "w2:p1", "w1:p2"]),
    ([{"field": "status"}], ["w1:p2", "w2:p1", "w1:p3", "w2:p2", "w1:p1"]),
    ([{"field": "agent"}], ["w1:p1", "w2:p1", "w1:p2", "w2:p2", "w1:p3"]),
    ([{"field": "agent", "order": "desc"}], ["w2:p2", "w1:p2", "w1:p1", "w2:p1", "w1:p3"]),
    ([{"field": "state_change_seq", "order": "desc"}],
     ["w2:p2", "w1:p2", "w1:p1", "w2:p1", "w1:p3"]),
    ([{"field": "state_change_seq"}], ["w2:p1", "w1:p1", "w1:p2", "w2:p2", "w1:p3"]),
    ([{"field": "seen"}], ["w2:p1", "w1:p1", "w1:p2", "w1:p3", "w2:p2"]),
    ([{"field": {"token": "branch"}, "order": "desc"}],
     ["w1:p1", "w2:p1", "w1:p2", "w1:p3", "w2:p2"]),
    ([{"field": "workspace_order", "order": "desc"}, {"field": "pane_order", "order": "desc"}],
     ["w2:p2", "w2:p1", "w1:p3", "w1:p2", "w1:p1"]),
    ([{"field": "tab_order"}, {"field": "attention", "order": "desc"}],
     ["w1:p2", "w2:p1", "w1:p1", "w1:p3", "w2:p2"]),
])
def test_sorts(sort: list[dict[str, Any]], expected: list[str]) -> None:
    assert panes(sort=sort) == expected


def test_missing_sort_values_go_last_both_ways() -> None:
    for order in ("asc", "desc"):
        got = panes(sort=[{"field": "agent", "order": order}])
        assert got[-1] == "w1:p3"
    got = panes(sort=[{"field": "pane_order"}], ctx=ViewContext(pane_order={"w2:p2": 1}))
    assert got == ["w2:p2", "w1:p1", "w1:p2", "w1:p3", "w2:p1"]


def test_filter_then_sort() -> None:
    got = panes({"op": "exists", "field": "state_change_seq"},
                [{"field": "state_change_seq", "order": "desc"}])
    assert got == ["w2:p2", "w1:p2", "w1:p1", "w2:p1"]


statuses = st.sampled_from(["idle", "working", "blocked", "done", "unknown"])
agents = st.one_of(st.none(), st.sampled_from(["a", "b", "c"]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(statuses, agents), max_size=12),
       st.sampled_from(["agent", "status", "attention"]), st.booleans())
def test_sort_is_stable_ordered_and_missing_last(items: list[tuple[str, str | None]],
                                                 fld: str, desc: bool) -> None:
    rows = [row(f"w1:p{i + 1}", status, agent=agent) for i, (status, agent) in
            enumerate(items)]
    view = parse_view("p", None, None, [{"field": fld, "order": "desc" if desc else "asc"}])
    out = project(view, rows, CTX)
    assert sorted(r["pane_id"] for r in out) == sorted(r["pane_id"] for r in rows)

    def key(r: dict[str, Any]) -> Any:
        if fld == "agent":
            return r.get("agent", MISSING)
        if fld == "status":
            return r["agent_status"]
        return {"blocked": 4, "done": 3, "working": 2, "idle": 1, "unknown": 0}[
            r["agent_status"]]

    keys = [key(dict(r)) for r in out]
    present = [k for k in keys if k is not MISSING]
    assert keys[:len(present)] == present  # every missing value after every present one
    assert present == sorted(present, reverse=desc)
    position = {r["pane_id"]: i for i, r in enumerate(rows)}
    for a, b in itertools.pairwise(out):
        if key(dict(a)) == key(dict(b)):
            assert position[a["pane_id"]] < position[b["pane_id"]]  # stable


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(statuses, agents), max_size=10),
       st.lists(statuses, min_size=1, max_size=3))
def test_a_filter_and_its_negation_partition_the_rows(items: list[tuple[str, str | None]],
                                                      wanted: list[str]) -> None:
    rows = [row(f"w1:p{i + 1}", s, agent=a) for i, (s, a) in enumerate(items)]
    flt = {"op": "any", "filters": [{"op": "in", "field": "status", "values": wanted},
                                    {"op": "eq", "field": "agent", "value": "a"}]}
    kept = panes(flt, rows=rows)
    dropped = panes({"op": "not", "filter": flt}, rows=rows)
    assert sorted(kept + dropped) == sorted(r["pane_id"] for r in rows)
    assert not set(kept) & set(dropped)


# -- plugin sorts and filters in the pure evaluation -----------------------------------------


def test_plugin_values_drive_filters_and_sorts() -> None:
    ref_f, ref_s = PluginRef("p", "keep"), PluginRef("p", "rank")
    values = {("filter", ref_f): [True, True, False, True, True],
              ("sort", ref_s): [3, MISSING, 1, 2, 0]}
    got = panes({"plugin": "p/keep"}, [{"field": {"plugin": "p/rank"}}], plugin_values=values)
    assert got == ["w2:p2", "w2:p1", "w1:p1", "w1:p2"]
    # values that do not compare with each other still give an order, not an error
    values = {("sort", ref_s): [3, "x", 1, None, 2.5]}
    assert len(panes(sort=[{"field": {"plugin": "p/rank"}}], plugin_values=values)) == 5
    # a predicate the host could not run filters every row out
    assert panes({"plugin": "p/keep"}) == []


# -- validation -------------------------------------------------------------------------------


def deep(n: int) -> dict[str, Any]:
    node: dict[str, Any] = {"op": "exists", "field": "agent"}
    for _ in range(n - 1):
        node = {"op": "not", "filter": node}
    return node


@pytest.mark.parametrize(("kwargs", "path"), [
    ({"source": ""}, "source"),
    ({"source": "has space"}, "source"),
    ({"source": "x" * 121}, "source"),
    ({"source": "plugin:-bad"}, "source"),
    ({"label": "   "}, "label"),
    ({"label": "x" * 33}, "label"),
    ({"filter": []}, "filter"),
    ({"filter": {"op": "xor"}}, "filter.op"),
    ({"filter": {"field": "agent"}}, "filter.op"),
    ({"filter": {"op": "all", "filters": []}}, "filter.filters"),
    ({"filter": {"op": "any", "filters": [{"op": "eq", "field": "status", "value": "busy"}]}},
     "filter.filters[0].value"),
    ({"filter": {"op": "not"}}, "filter.filter"),
    ({"filter": {"op": "eq", "field": "nope", "value": "x"}}, "filter.field"),
    ({"filter": {"op": "eq", "field": {"token": "bad name"}, "value": "x"}},
     "filter.field.token"),
    ({"filter": {"op": "eq", "field": {"token": "x" * 33}, "value": "x"}},
     "filter.field.token"),
    ({"filter": {"op": "eq", "field": "seen", "value": "yes"}}, "filter.value"),
    ({"filter": {"op": "eq", "field": "state_change_seq", "value": -1}}, "filter.value"),
    ({"filter": {"op": "eq", "field": "state_change_seq", "value": True}}, "filter.value"),
    ({"filter": {"op": "eq", "field": "agent", "value": 3}}, "filter.value"),
    ({"filter": {"op": "eq", "field": "agent", "value": 1.5}}, "filter.value"),
    ({"filter": {"op": "eq", "field": "tab_id", "value": {"context": "current_workspace_id"}}},
     "filter.value"),
    ({"filter": {"op": "eq", "field": "agent", "value": {"context": "current_tab_id"}}},
     "filter.value"),
    ({"filter": {"op": "eq", "field": "agent", "value": {"context": "elsewhere"}}},
     "filter.value"),
    ({"filter": {"op": "eq", "field": "agent"}}, "filter.value"),
    ({"filter": {"op": "in", "field": "agent", "values": []}}, "filter.values"),
    ({"filter": {"op": "in", "field": "agent", "values": ["a"] * 33}}, "filter.values"),
    ({"filter": {"op": "in", "field": "seen", "values": [True, "x"]}}, "filter.values[1]"),
    ({"filter": {"plugin": "no-slash"}}, "filter.plugin"),
    ({"filter": {"plugin": "p/Upper"}}, "filter.plugin"),
    ({"filter": deep(9)}, "filter" + ".filter" * 8),
    ({"filter": {"op": "any", "filters": [{"op": "exists", "field": "agent"}] * 64}},
     "filter.filters[63]"),
    ({"sort": {"field": "agent"}}, "sort"),
    ({"sort": [{"field": "agent"}] * 9}, "sort"),
    ({"sort": [{"order": "asc"}]}, "sort[0]"),
    ({"sort": [{"field": "agent", "order": "up"}]}, "sort[0].order"),
    ({"sort": [{"field": "pane_id"}]}, "sort[0].field"),
    ({"sort": [{"field": {"token": ""}}]}, "sort[0].field.token"),
    ({"sort": [{"field": {"plugin": "x"}}]}, "sort[0].field.plugin"),
])
def test_invalid_views_name_the_path(kwargs: dict[str, Any], path: str) -> None:
    args = {"source": "s", **kwargs}
    with pytest.raises(InvalidAgentView) as info:
        parse_view(args["source"], args.get("label"), args.get("filter"), args.get("sort"))
    assert info.value.code == "invalid_agent_view"
    assert info.value.path == path, info.value.message


def test_limits_are_inclusive_and_labels_are_cleaned() -> None:
    view = parse_view("  plugin:cmux-views ", " needs\x1b me\n", deep(8),
                      [{"field": "agent"}] * 8)
    assert view.source == "plugin:cmux-views" and view.plugin_id == "cmux-views"
    assert view.label == "needs me"
    parse_view("s", None, {"op": "any", "filters": [{"op": "exists", "field": "agent"}] * 63})
    parse_view("s", None, {"op": "in", "field": "agent", "values": ["a"] * 32})
    assert parse_view("s").to_wire() == {"type": "agent_view", "active": True, "source": "s"}


# -- views per client, without a socket --------------------------------------------------------


def test_connection_views_end_with_the_connection_named_views_stay() -> None:
    async def scenario() -> None:
        events = EventHub()
        published: list[Any] = []
        events.observe(Event, published.append)
        book = ViewBook(events)
        # Any object can key a connection's view; the socket server passes its connection.
        first, second = object(), object()
        book.set(first, parse_view("a"))
        book.set(second, parse_view("b"))
        book.set("sidebar", parse_view("plugin:p", "mine"))
        assert len(book) == 3
        book.connection_closed(first)
        assert book.get(first) is None and book.get(second) is not None
        book.connection_closed(second)
        assert book.get(second) is None
        assert book.get("sidebar") is not None
        # only named clients are announced; a plugin being disabled ends the views it owns
        assert [(e.kind, e.client_id, e.view is not None) for e in published] == [
            ("agent_view_changed", "sidebar", True)]
        book.plugin_unloaded("p", "replaced")
        assert book.get("sidebar") is not None
        book.plugin_unloaded("p", "disabled")
        assert book.get("sidebar") is None
        assert published[-1].client_id == "sidebar" and published[-1].view is None

    asyncio.run(scenario())


# -- through a real server ------------------------------------------------------------------


def report(api: Api, pane: str, state: str, **kw: Any) -> None:
    api("pane.report_agent", {"pane_id": pane, "source": "custom:views", "agent": "claude",
                              "state": state, **kw})


@pytest.fixture
def fleet(api: Api) -> dict[str, str]:
    """Four reported agents: working and blocked in view, done and idle in a second,
    unfocused workspace."""
    first = api.focused_pane()
    second = api.run(["sleep", "600"])
    ws = api("workspace.create", {"label": "back"})
    third = str(ws["root_pane"]["pane_id"])
    fourth = str(api("pane.split", {"pane_id": third})["pane"]["pane_id"])
    report(api, first, "working")
    report(api, second, "blocked")
    report(api, third, "working")
    report(api, third, "idle")
    api("pane.report_agent", {"pane_id": fourth, "source": "custom:views", "agent": "pi",
                              "state": "idle"})
    agents = {a["pane_id"]: a["agent_status"] for a in api("agent.list")["agents"]}
    assert agents == {first: "working", second: "blocked", third: "done", fourth: "idle"}
    return {"working": first, "blocked": second, "done": third, "idle": fourth}


def listed(conn: Any, view: Any = True) -> list[str]:
    return [a["pane_id"] for a in conn("agent.list", {"view": view})["agents"]]


def test_views_of_several_clients_do_not_touch_each_other(
        api: Api, cmux_server: ServerProcess, fleet: dict[str, str]) -> None:
    natural = listed(api, None)
    other = Api(cmux_server)
    try:
        assert api("agent.view.set", {"source": "me", "label": "waiting", "filter": {
            "op": "in", "field": "status", "values": ["blocked", "done"]}}) == {
            "type": "agent_view", "active": True, "source": "me", "label": "waiting"}
        other("agent.view.set", {"source": "them", "sort": [{"field": "attention",
                                                             "order": "desc"}]})
        api("agent.view.set", {"source": "side", "client_id": "sidebar",
                               "filter": {"op": "eq", "field": "agent", "value": "pi"}})
        assert listed(api) == [fleet["blocked"], fleet["done"]]
        assert listed(other) == [fleet[s] for s in ("blocked", "done", "working", "idle")]
        assert listed(other, "sidebar") == listed(api, "sidebar") == [fleet["idle"]]
        assert listed(api, False) == listed(other, None) == natural
        assert listed(api, "nobody") == natural

        assert api("agent.view.clear") == {"type": "agent_view", "active": False}
        assert listed(api) == natural
        assert other("agent.view.get")["source"] == "them"
        assert other("agent.view.get", {"client_id": "sidebar"})["filter"]["value"] == "pi"
    finally:
        other.close()


def test_set_replaces_atomically_and_clear_follows_the_source(api: Api,
                                                              fleet: dict[str, str]) -> None:
    api("agent.view.set", {"source": "one", "filter": {"op": "eq", "field": "status",
                                                       "value": "blocked"}})
    error = api.error("agent.view.set", {"source": "two", "sort": [{"field": "nope"}]})
    assert error["code"] == "invalid_agent_view" and error["data"]["path"] == "sort[0].field"
    assert api("agent.view.get")["source"] == "one"
    assert listed(api) == [fleet["blocked"]]

    still = api("agent.view.clear", {"source": "other"})
    assert still == {"type": "agent_view", "active": True, "source": "one"}
    assert api.error("agent.view.clear", {"source": "bad source"})["code"] == \
        "invalid_agent_view"
    assert api("agent.view.clear", {"source": " one "})["active"] is False
    assert api("agent.view.clear", {"source": "one"}) == {"type": "agent_view",
                                                          "active": False}
    assert api.error("agent.view.set", {"source": "x", "client_id": "no spaces"})["code"] == \
        "invalid_params"


def test_context_values_follow_the_active_workspace(api: Api, fleet: dict[str, str]) -> None:
    api("agent.view.set", {"source": "here", "filter": {
        "op": "eq", "field": "workspace_id", "value": {"context": "current_workspace_id"}}})
    assert listed(api) == [fleet["working"], fleet["blocked"]]
    api("workspace.focus", {"workspace_id": "w2"})
    assert listed(api) == [fleet["done"], fleet["idle"]]


def test_plugin_sorts_filters_and_owned_views(api: Api, fleet: dict[str, str]) -> None:
    linked = api("plugin.link", {"path": str(VIEWS_PLUGIN)})
    assert linked["plugin"]["plugin_id"] == "cmux-views"
    api("agent.view.set", {"source": "plugin:cmux-views", "label": "needs me",
                           "filter": {"plugin": "cmux-views/waiting"},
                           "sort": [{"field": {"plugin": "cmux-views/longest-wait"}}]})
    # blocked was reported before done finished, so it has waited longest
    assert listed(api) == [fleet["blocked"], fleet["done"]]
    api("agent.view.set", {"source": "mine", "client_id": "triage",
                           "sort": [{"field": {"plugin": "cmux-views/triage"}}]})
    assert listed(api, "triage") == [fleet[s] for s in ("blocked", "done", "working", "idle")]

    error = api.error("agent.view.set", {"source": "x", "sort": [
        {"field": "attention"}, {"field": {"plugin": "cmux-views/nope"}}]})
    assert error["code"] == "invalid_agent_view"
    assert error["data"]["path"] == "sort[1].field.plugin"

    api("plugin.disable", {"plugin_id": "cmux-views"})
    # the view the plugin owned ended; the named view that only used its sort stays, and its
    # plugin key now counts as missing, leaving natural order
    assert api("agent.view.get") == {"type": "agent_view", "active": False}
    assert api("agent.view.get", {"client_id": "triage"})["active"] is True
    assert listed(api, "triage") == listed(api, None)
    assert api.error("agent.view.set", {"source": "plugin:cmux-views"})["code"] == \
        "plugin_disabled"
    assert api.error("agent.view.set", {"source": "x", "filter": {
        "plugin": "cmux-views/waiting"}})["code"] == "plugin_disabled"

    api("plugin.enable", {"plugin_id": "cmux-views"})
    api("agent.view.set", {"source": "plugin:cmux-views"})
    api("plugin.unlink", {"plugin_id": "cmux-views"})
    assert api("agent.view.get")["active"] is False
    assert api.error("agent.view.set", {"source": "plugin:cmux-views"})["code"] == \
        "plugin_not_found"
    assert api.error("agent.view.set", {"source": "plugin:elsewhere"})["code"] == \
        "plugin_not_found"


FAILING_PLUGIN = '''
from cmux_core.hookspecs import hookimpl


def broken_key(row):
    raise RuntimeError("no key for " + row["pane_id"])


@hookimpl
def cmux_register_view_sorts(register):
    register("broken", broken_key)


@hookimpl
def cmux_register_view_filters(register):
    register("only-pi", lambda row: row.get("agent") == "pi")
'''


def test_a_failing_plugin_key_is_missing_not_an_error(api: Api, tmp_path: Path,
                                                      fleet: dict[str, str]) -> None:
    path = tmp_path / "viewfail.py"
    path.write_text(FAILING_PLUGIN)
    api("plugin.link", {"path": str(path)})
    api("agent.view.set", {"source": "x", "sort": [{"field": {"plugin": "viewfail/broken"}}],
                           "filter": {"op": "not", "filter": {"plugin": "viewfail/only-pi"}}})
    assert listed(api) == [fleet[s] for s in ("working", "blocked", "done")]
    plugin = api("plugin.list", {"plugin_id": "viewfail"})["plugins"][0]
    assert plugin["status"] == "loaded"
    assert any("no key for" in e["message"] for e in plugin["errors"])


def test_agent_list_without_view_is_unchanged_by_views(api: Api, fleet: dict[str, str]) -> None:
    before = api("agent.list")
    api("agent.view.set", {"source": "x", "filter": {"op": "eq", "field": "status",
                                                     "value": "idle"}})
    assert api("agent.list") == before
    assert listed(api) == [fleet["idle"]]


def test_view_errors_are_cmux_errors() -> None:
    with pytest.raises(CmuxError) as info:
        parse_view("s", None, {"op": "eq", "field": "status", "value": "waiting"})
    assert info.value.to_wire()["data"] == {"path": "filter.value"}
