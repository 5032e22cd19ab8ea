"""``reports compare BASE NEW`` on made-up runs: a regression past the threshold exits 1, an improvement and a
change within the threshold exit 0, the threshold and statistic options change the gate, throughput regresses
downwards, one-sided metrics are listed and not gated, and misuse ends in one clear message (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kai_conformance.reports import generate
from kai_conformance.reports.__main__ import main
from kai_conformance.reports.across_runs import compare
from kai_conformance.reports.model import RunRecords
from kai_conformance.reports.records import CaseRecord, PodTimes
from kai_conformance.reports.runinfo import RunInfo

T0 = 1_800_000_000.0


def run_dir(base: Path, name: str, slowdown: float, gangs: int = 10) -> Path:
    """A made-up run: ``gangs`` gangs of 4 whose time to schedule is 1..gangs seconds × ``slowdown``."""
    timelines = {}
    for index in range(gangs):
        start = T0 + 100 * index
        bound = start + (index + 1) * slowdown
        timelines[f"g{index}"] = [PodTimes(f"g{index}-{p}", f"g{index}", "n", start, bound) for p in range(4)]
    record = CaseRecord(nodeid="suites/test_gang.py::test_made_up", outcome="passed", run_id=name, timelines=timelines)
    directory = base / name
    generate.write_reports(directory, [RunRecords(RunInfo(run_id=name), [record])])
    return directory


def gate(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    status = main(["compare", *map(str, args)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_a_regression_past_the_threshold_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, slower = run_dir(tmp_path, "base", 1.0), run_dir(tmp_path, "slower", 1.5)
    status, out, _ = gate(capsys, base, slower)
    assert status == compare.REGRESSED
    assert "time_to_schedule [s]" in out and "1.50" in out and "REGRESSED" in out
    assert "REGRESSION (p50, p95 past 20% and 1 s): time_to_schedule p50 ×1.50" in out


def test_an_improvement_and_a_change_within_the_threshold_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = run_dir(tmp_path, "base", 1.0)
    for name, factor in (("faster", 0.5), ("a-bit-slower", 1.15)):
        status, out, _ = gate(capsys, base, run_dir(tmp_path, name, factor))
        assert status == compare.OK, out
        assert "no regression" in out and "REGRESSED" not in out


def test_the_threshold_option_moves_the_gate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, slower = run_dir(tmp_path, "base", 1.0), run_dir(tmp_path, "slower", 1.15)
    assert gate(capsys, base, slower, "--threshold", "0.1")[0] == compare.REGRESSED
    assert gate(capsys, base, slower / "summary.json", "--threshold", "0.5")[0] == compare.OK


def test_latencies_within_the_timestamp_resolution_do_not_regress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Sub-second gangs: ×1.5 is a ratio past 20 % but at most 0.5 s slower, below Kubernetes' 1 s timestamps.
    base, slower = run_dir(tmp_path, "base", 0.1), run_dir(tmp_path, "slower", 0.15)
    status, out, _ = gate(capsys, base, slower)
    assert status == compare.OK and "1.50" in out
    assert gate(capsys, base, slower, "--min-seconds", "0")[0] == compare.REGRESSED
    assert gate(capsys, base, slower, "--min-seconds", "-1")[0] == compare.USAGE


def test_only_the_chosen_statistics_and_metrics_are_gated(tmp_path: Path) -> None:
    base = compare.load_metrics(run_dir(tmp_path, "base", 1.0))
    new = json.loads(json.dumps(base))
    new["time_to_schedule"]["max"] *= 3  # one slow outlier: max moves, p50/p95 do not
    assert not compare.compare(base, new).regressions
    assert [(r.metric, r.statistic) for r in compare.compare(base, new, statistics=["max"]).regressions] == [
        ("time_to_schedule", "max")
    ]
    assert not compare.compare(base, new, statistics=["max"], only=["bind_spread"]).regressions


def test_lower_throughput_is_the_regression() -> None:
    base = {"bind_throughput": {"unit": "pods/s", "better": "higher", "p50": 10.0, "p95": 12.0}}
    slower = {"bind_throughput": {"unit": "pods/s", "better": "higher", "p50": 7.0, "p95": 12.0}}
    faster = {"bind_throughput": {"unit": "pods/s", "better": "higher", "p50": 30.0, "p95": 40.0}}
    assert [r.statistic for r in compare.compare(base, slower).regressions] == ["p50"]
    assert not compare.compare(base, faster).regressions


def test_one_sided_metrics_are_listed_not_gated(capsys: pytest.CaptureFixture[str]) -> None:
    base = {"a": {"better": "lower", "p50": 1.0, "p95": 1.0}, "old": {"better": "lower", "p50": 1.0}}
    new = {"a": {"better": "lower", "p50": 1.0, "p95": 1.0}, "fresh": {"better": "lower", "p50": 99.0}}
    comparison = compare.compare(base, new)
    assert comparison.only_base == ["old"] and comparison.only_new == ["fresh"] and not comparison.regressions
    text = compare.render(comparison)
    assert "only in base (not gated): old" in text and "only in new (not gated): fresh" in text


def test_misuse_ends_in_one_clear_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = run_dir(tmp_path, "base", 1.0)
    status, out, err = gate(capsys, base, tmp_path / "missing")
    assert status == compare.USAGE and out == ""
    assert err.strip().count("\n") == 0 and "missing is neither a report directory" in err and "Traceback" not in err

    empty = tmp_path / "empty"
    generate.write_reports(empty, [RunRecords(RunInfo(run_id="e"), [])])
    status, _, err = gate(capsys, base, empty)
    assert status == compare.USAGE and "no metric in common" in err

    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    status, _, err = gate(capsys, broken, base)
    assert status == compare.USAGE and "is not readable JSON" in err

    malformed = tmp_path / "malformed.json"
    malformed.write_text(json.dumps({"metrics": {"time_to_schedule": {"p50": "fast"}}}))
    status, _, err = gate(capsys, base, malformed)
    assert status == compare.USAGE and "'time_to_schedule' is malformed" in err

    status, _, err = gate(capsys, base, base, "--metric", "nonexistent")
    assert status == compare.USAGE and "no metric named nonexistent" in err

    status, _, err = gate(capsys, base, base, "--threshold", "-1")
    assert status == compare.USAGE and "negative" in err
