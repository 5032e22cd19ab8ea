"""The chaos run's search without a cluster: what the strategies draw, the search from a seed, shrinking a
50-workload mix to what the violation needs, the budget, the reproducer file and the options."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kai_conformance.clusters.layout import GpuLayout, GpuNode
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.configuration.chaos_options import parse_duration
from kai_conformance.suites.support.cases.chaos import ENDINGS, ChaosMix, ChaosQueue, ChaosWorkload, Fault
from kai_conformance.suites.support.chaos.faults import DEFAULT_COMPONENTS, parse_components
from kai_conformance.suites.support.chaos.mix import mixes
from kai_conformance.suites.support.chaos.run import Outcome, renamed, steps
from kai_conformance.suites.support.chaos.search import Campaign, load_reproducer, reproducer, write_reproducer
from kai_conformance.suites.support.chaos.sharing import FRACTIONS
from kai_conformance.suites.support.detectors.verdict import Verdict

LAYOUT = GpuLayout(tuple(GpuNode(f"node-{i}", 4) for i in range(4)))
COMPONENTS = ("scheduler", "binder", "podgrouper", "queuecontroller")


@settings(max_examples=60, deadline=None, database=None)
@given(mixes(LAYOUT, COMPONENTS, horizon=60, max_workloads=10))
def test_every_drawn_mix_fits_the_cluster_and_restarts_every_component(mix: ChaosMix) -> None:
    assert {f.component for f in mix.faults} >= set(COMPONENTS)
    assert all(0 <= f.at <= 60 for f in mix.faults) and len(mix.workloads) <= 10
    roles = {q.role for q in mix.queues}
    for w in mix.workloads:
        assert w.pods * w.gpus <= LAYOUT.total and w.gpus in (1, 4) and w.queue in roles and w.ending in ENDINGS
        assert w.gpus == 1 or w.pods <= 4
        assert 0 <= w.arrive <= 30 and (w.resume_after is None or w.ending == "suspended")
    assert ChaosMix.from_data(mix.to_data()) == mix


@settings(max_examples=30, deadline=None, database=None)
@given(mixes(LAYOUT, COMPONENTS, horizon=60, max_workloads=10, fractions=FRACTIONS))
def test_where_gpus_are_shared_a_workload_may_ask_a_fraction_and_fits_as_1_gpu_pods(mix: ChaosMix) -> None:
    for w in mix.workloads:
        assert (w.gpus, w.fraction in FRACTIONS) == (0, True) or (w.fraction == 0 and w.gpus in (1, 4))
        assert w.pods * max(w.gpus, 1) <= LAYOUT.total and w.pods <= 4
    assert ChaosMix.from_data(mix.to_data()) == mix


def test_a_shrunk_fractional_workload_stays_fractional_only_when_the_violation_needs_it() -> None:
    shared = ChaosWorkload("w01", 3, 0, "q0", fraction=0.5)
    mix = ChaosMix((ChaosQueue("q0", 4),), (ChaosWorkload("w00", 1, 1, "q0"), shared), (Fault("binder", 3),), 16)

    def violates(needs_sharing: bool):
        def run(m: ChaosMix, attempt: int) -> Outcome:
            bad = any(w.pods >= 3 and (w.fraction or not needs_sharing) for w in m.workloads)
            return Outcome(m, {"no-leftover-reservation": Verdict("no-leftover-reservation", not bad, "left")})

        return run

    kept = Campaign(violates(needs_sharing=True), seed=5, budget=60)
    assert kept.shrink(kept.attempt(mix)).mix.workloads == (shared,)
    whole = Campaign(violates(needs_sharing=False), seed=5, budget=60)
    assert whole.shrink(whole.attempt(mix)).mix.workloads == (ChaosWorkload("w01", 3, 1, "q0"),)
    assert "3×0.5 GPU" in shared.describe() and "(1 fractional)" in mix.describe()


def needle(mix: ChaosMix, attempt: int) -> Outcome:
    """A simulated cluster whose KAI breaks a gang only for a whole-node gang of 3+ pods in a mix that restarts the
    scheduler: what a violation needs is one workload of the mix."""
    bad = any(w.pods >= 3 and w.gpus == 4 for w in mix.workloads) and any(
        f.component == "scheduler" for f in mix.faults
    )
    return Outcome(mix, {"gang-never-partial": Verdict("gang-never-partial", not bad, "partial" if bad else "ok"),
                         "queue-limit": Verdict("queue-limit", True, "ok")})  # fmt: skip


def fifty() -> ChaosMix:
    workloads = [ChaosWorkload(f"w{i:02d}", 1 + i % 2, 1, "q0", arrive=float(i % 30)) for i in range(50)]
    workloads[37] = ChaosWorkload("w37", 3, 4, "q1", "build", arrive=12.0)
    return ChaosMix((ChaosQueue("q0", 4), ChaosQueue("q1", 8)), tuple(workloads),
                    (Fault("binder", 3), Fault("scheduler", 20)), LAYOUT.total, 99)  # fmt: skip


def test_the_search_finds_a_violating_mix_from_the_seed_and_the_same_seed_draws_the_same_mixes() -> None:
    first = Campaign(needle, seed=11, budget=60)
    found = first.search(mixes(LAYOUT, COMPONENTS, max_workloads=20))
    assert found is not None and found.violated
    again = Campaign(needle, seed=11, budget=60)
    assert again.search(mixes(LAYOUT, COMPONENTS, max_workloads=20)).mix == found.mix
    assert [o.mix for o in again.outcomes] == [o.mix for o in first.outcomes]


def test_shrinking_reduces_a_50_workload_mix_to_the_one_workload_the_violation_needs() -> None:
    campaign = Campaign(needle, seed=5, budget=60)
    original = campaign.attempt(fifty())
    smallest = campaign.shrink(original)
    assert [w.name for w in smallest.mix.workloads] == ["w37"]
    assert [q.role for q in smallest.mix.queues] == ["q1"] and smallest.violated
    assert campaign.shrink_runs >= 1 and len({len(o.mix.workloads) for o in campaign.outcomes}) > 2


def test_the_budget_ends_search_and_shrink_and_no_mix_runs_twice() -> None:
    ticks = iter(range(1000))
    campaign = Campaign(needle, seed=3, budget=4, clock=lambda: float(next(ticks)))
    assert campaign.search(mixes(LAYOUT, ("binder",))) is None, "no mix restarts the scheduler: nothing violates"
    assert 1 <= len(campaign.outcomes) <= 4
    calls: list[ChaosMix] = []
    counting = Campaign(lambda m, a: calls.append(m) or needle(m, a), seed=3, budget=60)
    counting.attempt(fifty())
    counting.attempt(fifty())
    assert len(calls) == 1


def test_a_reproducer_is_written_whole_and_read_back_and_a_bad_file_is_one_clear_error(tmp_path) -> None:
    outcome = needle(fifty(), 1)
    data = reproducer(outcome, seed=99, versions={"kai": "v0.17.0"}, original=None)
    path = write_reproducer(data, tmp_path / "chaos")
    mix, read = load_reproducer(path)
    assert mix == outcome.mix and read["violations"] == {"gang-never-partial": "partial"} and read["seed"] == 99
    (tmp_path / "bad.yaml").write_text("format: something-else\n")
    with pytest.raises(errors.UsageError, match=r"--chaos-replay .*bad.yaml: not a chaos reproducer"):
        load_reproducer(tmp_path / "bad.yaml")
    data["mix"]["workloads"][0]["colour"] = "red"
    (tmp_path / "unknown.yaml").write_text(__import__("yaml").safe_dump(data))
    with pytest.raises(errors.UsageError, match="unknown field"):
        load_reproducer(tmp_path / "unknown.yaml")


def test_steps_run_in_time_order_under_the_attempts_own_names() -> None:
    mix = ChaosMix((ChaosQueue("q0", 4),), (ChaosWorkload("w00", 1, 1, "q0", arrive=5, ending="suspended", after=5,
                   resume_after=3), ChaosWorkload("w01", 1, 1, "q0", ending="deleted", after=10)),
                   (Fault("scheduler", 10),), 16)  # fmt: skip
    planned = [(t, what, getattr(w, "name", getattr(w, "component", ""))) for t, _, what, w in steps(renamed(mix, 2))]
    assert planned == [(0.0, "arrive", "m2-w01"), (5.0, "arrive", "m2-w00"), (10.0, "suspend", "m2-w00"),
                       (10.0, "delete", "m2-w01"), (10.0, "restart", "scheduler"), (13.0, "resume", "m2-w00")]  # fmt: skip
    assert renamed(mix, 2).workloads[0].queue == "m2-q0"


@settings(database=None)
@given(st.sampled_from(["90s", "10m", "1h", "600", " 2.5m "]))
def test_budgets_read_as_durations(text: str) -> None:
    assert parse_duration(text) in (90, 600, 3600, 150)


def test_bad_options_are_usage_errors_naming_the_fix() -> None:
    with pytest.raises(errors.UsageError, match="positive duration such as 90s"):
        parse_duration("ten minutes")
    with pytest.raises(errors.UsageError, match=r"unknown component.*kubelet; known: scheduler"):
        parse_components("scheduler,kubelet")
    assert parse_components(None) == DEFAULT_COMPONENTS and parse_components("binder, binder") == ("binder",)


def test_no_mix_starts_unless_the_longest_so_far_still_fits_the_budget_left() -> None:
    now = [0.0]
    campaign = Campaign(needle, seed=1, budget=100, clock=lambda: now[0])
    campaign.outcomes.append(dataclasses.replace(needle(fifty(), 1), seconds=60.0))
    now[0] = 39.0
    assert not campaign.spent()
    now[0] = 41.0
    assert campaign.spent(), "a 60 s mix started at 41 s would end past the 100 s budget"


def test_a_near_copy_of_a_mix_that_ran_is_passed_over_while_the_strategy_draws_others() -> None:
    """Two descriptions, each drawn with many quotas: each runs once, then the budget goes to what is left."""
    one = ChaosMix((ChaosQueue("q0", 4),), (ChaosWorkload("w00", 2, 1, "q0"),), (Fault("binder", 0),), 16)
    two = ChaosMix((ChaosQueue("q0", 4),), (ChaosWorkload("w00", 3, 1, "q0"),), (Fault("binder", 0),), 16)
    drawn = st.tuples(st.sampled_from([one, two]), st.integers(0, 10_000)).map(
        lambda picked: dataclasses.replace(picked[0], queues=(ChaosQueue("q0", picked[1]),))
    )
    ticks = iter(range(100_000))
    campaign = Campaign(needle, seed=7, budget=400, clock=lambda: float(next(ticks)))
    assert campaign.search(drawn) is None
    described = [o.mix.describe() for o in campaign.outcomes]
    assert sorted(set(described[:2])) == sorted({one.describe(), two.describe()}), described
    assert campaign.near_copies_skipped >= 100, "near-copies passed over while the two descriptions were new"
    assert len(campaign.outcomes) > 2, "with nothing new left to draw, near-copies run after all: the budget is spent"
