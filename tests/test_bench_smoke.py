"""The bench harness runs end to end against a real server, in a tiny form.

Only that every cmux half completes and returns well-formed figures is checked;
nothing here asserts on timing.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# bench/ sits next to tests/ and is not an installed package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import cases, context, mcp, memory, paired, scale, startup
from bench.cmux import CmuxSide
from bench.report import Row, table


@pytest.fixture(scope="module")
def side() -> Iterator[CmuxSide]:
    """One server for the module: starting one takes longer than all the halves here."""
    with CmuxSide("auto") as s:
        yield s


def test_ingest_and_round_trips(side: CmuxSide) -> None:
    assert cases.ingest_cmux(side, 1000, timeout=30) > 0
    pane = cases.cat_pane(side)
    assert len(cases.round_trip_cmux(side, pane, range(2))) == 2
    assert len(cases.round_trip_cmux(side, pane, range(2, 4), poll=True)) == 2
    assert side.backend in ("ghostty", "pyte")


def test_pings(side: CmuxSide) -> None:
    conn = side.connect()
    try:
        assert cases.pings_cmux(conn, 10, pipelined=False) > 0
        assert cases.pings_cmux(conn, 250, pipelined=True) > 0
        assert conn.call("ping") is not None
    finally:
        conn.close()


def test_startup_runs_each_command(side: CmuxSide) -> None:
    times = startup.startup_times(side.server.socket_path, 1)
    assert sorted(times) == ["help", "ping", "tmux"]
    assert all(len(t) == 1 and t[0] > 0 for t in times.values())


def test_idle_cpu_and_rss(side: CmuxSide) -> None:
    assert cases.idle_cpu_cmux(side, 3, 0.05, settle=0.0) >= 0
    assert all(rss > 0 for rss in cases.rss_cmux(side, 1, 50))


def test_flood_finishes_and_probes_do_not_fail(side: CmuxSide) -> None:
    flood = cases.flood_cmux(side, 20_000, timeout=30)
    assert flood.seconds is not None
    assert flood.failures == []


def test_scale_and_idle_wakeups(side: CmuxSide, tmp_path: Path) -> None:
    sizes = scale.ScaleSizes(panes=4, streaming=1, rate=10_000, settle=0.0)
    result = scale.scale_cmux(side, sizes, 0.3, tmp_path)
    assert result.detections and result.pings
    assert result.failures == []
    total, threads, cpu = scale.idle_cmux(side, 1, 0.2, settle=0.0)
    assert total >= 0 and cpu >= 0 and "main" in threads


def test_mcp_tool_calls_and_direct_calls(side: CmuxSide) -> None:
    times = mcp.measure(side, 2)
    assert len(times["direct"]) == len(times["mcp"]) == 2
    assert all(t > 0 for t in times["direct"] + times["mcp"])


def test_table_reads_ratios_by_direction() -> None:
    rows = [Row("a", "lower wins", 1.0, 2.0, "lower"),
            Row("b", "higher wins", 1.0, 4.0, "higher", note="a note"),
            Row("c", "no tmux figure", 1.0, None, "lower")]
    assert [r.reading() for r in rows] == ["cmux 2.0x better", "tmux 4.0x better", "n/a"]
    text = table(rows)
    assert "lower wins" in text
    assert "* higher wins: a note" in text
    assert context.percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert context.percentile([3.0, 1.0, 2.0], 100) == 3.0


def test_memory_reads_the_servers_steady_rss(side: CmuxSide) -> None:
    assert memory.memory_cmux(side, 2) > 1 << 20


def test_a_run_counts_its_servers_cpu_seconds(side: CmuxSide) -> None:
    conn = side.connect()
    try:
        rate, cpu = paired.with_cpu(side.pid, lambda: cases.pings_cmux(conn, 2000, False))
    finally:
        conn.close()
    assert rate > 0
    assert cpu > 0, "2,000 pings took no server CPU time: the reading is not the server's"


def test_paired_rows_report_medians_of_the_runs_and_their_cpu() -> None:
    cmux = paired.Runs()
    for value, cpu in [(1.0, 0.5), (3.0, 0.1), (2.0, 0.2)]:
        cmux.add(value, cpu)
    row = paired.paired_row("k", "a figure", cmux, paired.Runs([4.0, 4.0, 4.0], [1.0] * 3),
                            "lower", scale=1000)
    assert (row.cmux, row.tmux, row.ratio) == (2000.0, 4000.0, 0.5)
    assert (row.cmux_cpu, row.tmux_cpu, row.cpu_ratio, row.runs) == (0.2, 1.0, 0.2, 3)
    data = row.as_json()
    assert data["cmux_cpu_s"] == 0.2 and data["cpu_ratio"] == 0.2 and data["runs"] == 3
    assert data["detail"]["cmux_runs"] == [1.0, 3.0, 2.0]
    text = table([row])
    assert "cpu-s cmux" in text.splitlines()[0]
    assert text.splitlines()[2].split()[-3:] == ["0.20", "1.00", "0.20"]
    no_cpu = paired.paired_row("m", "memory", paired.Runs([5.0]), paired.Runs([1.0]), "lower")
    assert no_cpu.cmux_cpu is None and no_cpu.cpu_ratio is None and no_cpu.runs == 1


@pytest.mark.skipif(shutil.which("tmux") is None, reason="the compared cases need tmux")
def test_compared_cases_alternate_repeat_runs_of_each_side(tmp_path: Path) -> None:
    sizes = dataclasses.replace(context.QUICK, pings=20, pipelined_pings=200, round_trips=3)
    ctx = context.Context(sizes, "auto", tmp_path, repeat=2)
    rows = cases.case_pings(ctx) + cases.case_roundtrip(ctx)
    for row in rows:
        assert row.runs == 2, row.key
        assert len(row.detail["cmux_runs"]) == len(row.detail["tmux_runs"]) == 2
        assert row.cmux_cpu is not None and row.tmux_cpu is not None
        assert row.ratio is not None
