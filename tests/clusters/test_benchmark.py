"""scripts/benchmark/overhead.py measures what it claims: per-case overhead that never waits out a poll, and waits
that react within one poll interval (here shortened to 10 ms). The figures themselves are the benchmark's (measured
by the script, written down in docs/performance.md); here what makes them what they are is counted, not timed, so a
busy machine cannot fail it: the sleeps the code under measurement asks for."""

from __future__ import annotations

import time

import pytest

from kai_conformance.fixtures import waits
from scripts.benchmark import overhead

pytestmark = pytest.mark.usefixtures("fast_polling")


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every ``time.sleep`` asked for from now on (a wait's poll is one: tenacity sleeps through ``time.sleep``)."""
    asked: list[float] = []
    real_sleep = time.sleep

    def counted(seconds: float) -> None:
        asked.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", counted)
    return asked


def test_a_cases_fixtures_and_scheduling_guard_never_wait_out_a_poll(sleeps: list[float]) -> None:
    # A wasted poll in teardown (one more look after a sleep) would add a poll interval to every case.
    overhead.case_fixture_cost(20)
    assert sleeps == [], "a case's fixtures slept: one of their waits did not see its state at the first look"
    overhead.scheduling_guard_cost(20)
    assert sleeps == [], "the scheduling guard slept: a lock or a GPU check polled"


def test_a_wait_reacts_within_one_poll_interval(sleeps: list[float]) -> None:
    samples = overhead.wait_reaction_latency(3)
    assert len(samples) == 3 and all(sample >= 0 for sample in samples)
    # Each poll asks for the shortened interval: a wait that ignored it would sleep the default 250 ms.
    assert sleeps and set(sleeps) == {waits.POLL_INTERVAL}, sleeps


def test_the_benchmark_reports_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    figures = overhead.run(cases=3, trials=1)
    assert set(figures) == {"case_fixtures", "scheduling_guard", "wait_reaction"}
    assert all(set(figure) == {"mean_ms", "p95_ms", "max_ms"} for figure in figures.values())
    assert overhead.main(["--cases", "3", "--trials", "1"]) == 0
    assert "wait reaction latency (poll 0.01 s; target <= 500 ms)" in capsys.readouterr().out
