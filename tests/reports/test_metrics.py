"""Performance metrics from the records' pod timelines: each definition measures what its docstring says and
skips gangs without the needed times; nearest-rank percentiles; the numbers reach summary.json, summary.md and
report.html (a latency CDF and a latency-by-gang-size plot, inline SVG)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kai_conformance.reports import generate
from kai_conformance.reports.model import RunRecords
from kai_conformance.reports.records import CaseRecord, PodTimes
from kai_conformance.reports.runinfo import RunInfo
from kai_conformance.reports.sections import metrics, perfplots, plot

T0 = 1_800_000_000.0
SVG = "{http://www.w3.org/2000/svg}"


def gang(name: str, created: list[float], bound: list[float | None], running: list[float | None] | None = None):
    running = running or [None] * len(created)
    return [
        PodTimes(f"{name}-{i}", name, "n", T0 + c, None if b is None else T0 + b, None if r is None else T0 + r)
        for i, (c, b, r) in enumerate(zip(created, bound, running, strict=True))
    ]


PLACED = gang("placed", [0.0, 0.5], [2.0, 3.0], [4.0, 6.0])
PARTIAL = gang("partial", [0.0, 0.0, 0.0], [1.0, None, None])
BIG = gang("big", [10.0] * 4, [11.0, 11.0, 12.0, 15.0])


def record(run_id: str = "r1", **timelines) -> CaseRecord:
    return CaseRecord(nodeid=f"suites/test_gang.py::test_x[{run_id}]", outcome="passed", run_id=run_id,
                      timelines=timelines)  # fmt: skip


def by_name(found: list[metrics.Metric]) -> dict[str, metrics.Metric]:
    return {m.name: m for m in found}


def test_nearest_rank_percentile() -> None:
    values = [15.0, 20.0, 35.0, 40.0, 50.0]  # the textbook example: p30 = 20, p40 = 20, p50 = 35, p100 = 50
    assert [metrics.percentile(values, p) for p in (5, 30, 40, 50, 100)] == [15.0, 20.0, 20.0, 35.0, 50.0]
    hundred = [float(v) for v in range(1, 101)]
    assert metrics.statistics(hundred) == {"count": 100, "p50": 50.0, "p95": 95.0, "p99": 99.0, "max": 100.0}
    assert metrics.percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        metrics.percentile([], 50)


def test_per_gang_metrics_follow_their_definitions_and_skip_gangs_without_the_times() -> None:
    found = by_name(metrics.collect([[record(placed=PLACED, partial=PARTIAL, big=BIG)]]))
    assert found["time_to_schedule"].values == [3.0, 5.0]  # placed: 0 → 3; big: 10 → 15; partial skipped
    assert found["bind_spread"].values == [1.0, 4.0]
    assert found["time_to_running"].values == [6.0]  # only `placed` recorded Running times
    assert found["time_to_schedule"].by_gang_size == {2: [3.0], 4: [5.0]}
    assert found["time_to_schedule"].unit == "s" and found["time_to_schedule"].better == metrics.LOWER


def test_bind_throughput_is_one_sample_per_run() -> None:
    # r1: binds at 2, 3, 1 (partial's bound pod), 11, 11, 12, 15 → 7 pods over 14 s; r2: 2 pods over 1 s.
    found = by_name(
        metrics.collect([[record("r1", placed=PLACED, partial=PARTIAL, big=BIG)], [record("r2", p=PLACED)]])
    )
    throughput = found["bind_throughput"]
    assert throughput.values == [0.5, 2.0] and throughput.unit == "pods/s" and throughput.better == metrics.HIGHER
    assert all(s.gang_size is None for s in throughput.samples)
    assert "bind_throughput" not in by_name(metrics.collect([[record(one=gang("one", [0.0], [1.0]))]]))


def test_no_timelines_no_metrics() -> None:
    assert metrics.collect([[record()]]) == []
    assert perfplots.latency_cdf([]) == "" and perfplots.latency_by_gang_size([]) == ""


def test_cdf_is_a_staircase_to_one() -> None:
    assert perfplots.cdf_points([2.0, 1.0]) == [(1.0, 0.0), (1.0, 0.5), (2.0, 0.5), (2.0, 1.0)]


def test_reports_carry_the_metrics_and_plots(tmp_path: Path) -> None:
    run = RunRecords(RunInfo(run_id="r1"), [record(placed=PLACED, partial=PARTIAL, big=BIG)])
    written = generate.write_reports(tmp_path, [run])
    summary = json.loads(written.json.read_text())["metrics"]
    assert summary["time_to_schedule"] == {
        "unit": "s", "better": "lower", "description": summary["time_to_schedule"]["description"],
        "count": 2, "p50": 3.0, "p95": 5.0, "p99": 5.0, "max": 5.0,
        "by_gang_size": {"2": {"count": 1, "p50": 3.0, "p95": 3.0, "p99": 3.0, "max": 3.0},
                         "4": {"count": 1, "p50": 5.0, "p95": 5.0, "p99": 5.0, "max": 5.0}},
    }  # fmt: skip
    assert "| time_to_schedule | s | 2 | 3 | 5 | 5 | 5 |" in written.markdown.read_text()
    html = written.html.read_text()
    assert 'id="performance"' in html and 'aria-label="latency CDF' in html
    assert 'aria-label="latency by gang size' in html


def test_by_gang_size_plot_places_points_at_their_size() -> None:
    found = metrics.collect([[record(placed=PLACED, big=BIG)]])
    svg = ET.fromstring(perfplots.latency_by_gang_size(found))
    assert not list(svg.iter(f"{SVG}polyline"))  # points only
    labels = [t.text for t in svg.iter(f"{SVG}text")]
    assert "4" in labels and "5" in labels and "6 s" in labels  # the axis reaches past the largest gang
    assert "0.5" not in labels  # whole gang sizes only


def test_empty_run_has_no_performance_section(tmp_path: Path) -> None:
    written = generate.write_reports(tmp_path, [RunRecords(RunInfo(run_id="r1"), [record()])])
    assert json.loads(written.json.read_text())["metrics"] == {}
    assert 'id="performance"' not in written.html.read_text()
    assert "### Performance" not in written.markdown.read_text()


def test_the_cdf_axis_starts_at_zero_latency() -> None:
    found = metrics.collect([[record(big=BIG)]])  # time to schedule 5 s, bind spread 4 s: no sample near 0
    svg = ET.fromstring(perfplots.latency_cdf(found))
    lines = list(svg.iter(f"{SVG}polyline"))
    first_x = [float(line.get("points", "").split()[0].split(",")[0]) for line in lines]
    assert len(lines) == 2 and all(x > plot.LEFT + 100 for x in first_x)
    assert "0 s" in [t.text for t in svg.iter(f"{SVG}text")]
