"""scripts/benchmark.py measures what it claims: per-case overhead well below one poll interval, and wait
reaction bounded by the poll interval (here shortened to 10 ms)."""

from __future__ import annotations

import pytest

from scripts import benchmark

pytestmark = pytest.mark.usefixtures("fast_polling")


def test_benchmark_figures(capsys: pytest.CaptureFixture[str]) -> None:
    figures = benchmark.run(cases=20, trials=3)
    assert set(figures) == {"case_fixtures", "scheduling_guard", "wait_reaction"}
    # A wasted poll in teardown (10 ms here) would show: the fixtures cost well under a millisecond each.
    assert figures["case_fixtures"]["mean_ms"] < 5
    assert figures["scheduling_guard"]["mean_ms"] < 5
    assert 0 < figures["wait_reaction"]["max_ms"] < 10 + 40  # one poll plus scheduling noise
    assert benchmark.main(["--cases", "3", "--trials", "1"]) == 0
    assert "wait reaction latency (poll 0.01 s; target <= 500 ms)" in capsys.readouterr().out
