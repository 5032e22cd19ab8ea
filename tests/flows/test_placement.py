"""The placement suite end to end on the simulated cluster (harness: tests/flows/__init__.py; the strategy of the simulated KAI:
tests/fakes/kai/placement.py, chosen by the simulated default SchedulingShard). The case of the active strategy passes,
the other one skips naming the setting that turns it on, a scheduler that ignores the setting fails the case, the
control fires under either strategy; and the install path carries ``--kai-set scheduler.placementStrategy``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kai_conformance.clusters.install import kai
from kai_conformance.clusters.layout import GpuLayout, GpuNode
from kai_conformance.fixtures.configuration.settings import InstallSources
from kai_conformance.fixtures.kube import kinds
from kai_conformance.suites import test_placement
from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.placement_setting import active_placement
from tests.fakes.commands import tools_on_path
from tests.fakes.installation import SimulatedStack, install_context, make_settings
from tests.fakes.kai.placement import KaiPlacement
from tests.fakes.kube import FakeKube
from tests.fakes.stack import default_shard

BINPACK_CASE, SPREAD_CASE = test_placement.STRATEGY_CASES
CONTROL = test_placement.CONTROL[0]
#: Three nodes of two GPUs keep the flows quick: three small TrainJobs, binpack 2 + 1, spread 1 + 1 + 1.
SMALL = GpuLayout(
    tuple(GpuNode(name, 2) for name in ("kai-conformance-worker", "kai-conformance-worker2", "kai-conformance-worker3"))
)


def run_case(h, case) -> None:
    test_placement.test_small_trainjobs_are_placed_as_the_active_strategy_says(case, kube=h.fake, **h.args())


def run_control(h) -> None:
    test_placement.test_control_the_placement_detector_fires_on_placements_judged_against_the_other_strategy(
        CONTROL, kube=h.fake, **h.args()
    )


def set_strategy(h, strategy: str | None) -> None:
    h.fake.put(default_shard(strategy))


def test_binpack_fills_one_node_before_the_next(flow) -> None:
    h = flow(layout=SMALL)  # the simulated chart's default shard: binpack
    run_case(h, BINPACK_CASE)
    verdicts = {v.detector: v for v in h.record.record.verdicts}
    assert all(v.ok for v in verdicts.values())
    assert verdicts["placement-binpack"].explanation == (
        "all 3 pods placed on the node with the fewest free GPUs (most allocated) among those with room "
        "(kai-conformance-worker×2, kai-conformance-worker2×1)"
    )
    assert "on 2 node(s)" in verdicts["placement-nodes-binpack"].explanation
    assert any("SchedulingShard default spec.placementStrategy.gpu = binpack" in note for note in h.record.record.notes)


def test_spread_puts_one_pod_on_each_node_first(flow) -> None:
    h = flow(layout=SMALL)
    set_strategy(h, "spread")
    run_case(h, SPREAD_CASE)
    verdicts = {v.detector: v for v in h.record.record.verdicts}
    assert all(v.ok for v in verdicts.values())
    assert "(kai-conformance-worker×1, kai-conformance-worker2×1, kai-conformance-worker3×1)" in (
        verdicts["placement-spread"].explanation
    )


def test_the_case_of_the_strategy_not_in_force_skips_naming_the_setting_that_turns_it_on(flow) -> None:
    h = flow(layout=SMALL)
    with pytest.raises(pytest.skip.Exception) as skipped:
        run_case(h, SPREAD_CASE)
    assert str(skipped.value) == (
        "the cluster places GPU pods by binpack (SchedulingShard default spec.placementStrategy.gpu = binpack); this "
        "case needs spread: install KAI with --kai-set scheduler.placementStrategy=spread (with --install always on an "
        "existing cluster)"
    )
    assert h.fake.objects(kinds.TRAIN_JOB, "kc-flow") == []  # nothing was created


def test_an_unset_strategy_is_read_as_binpack_and_a_missing_shard_skips_both(flow) -> None:
    h = flow(layout=SMALL)
    set_strategy(h, None)
    assert active_placement(h.fake).describe() == (
        "binpack (SchedulingShard default spec.placementStrategy.gpu unset, which KAI defaults to binpack)"
    )
    h.fake._remove(kinds.SCHEDULING_SHARD, None, "default")
    for case in (BINPACK_CASE, CONTROL):
        with pytest.raises(pytest.skip.Exception, match="the placement strategy cannot be read: 0 SchedulingShards"):
            run_control(h) if case is CONTROL else run_case(h, case)


def test_a_scheduler_ignoring_the_shard_fails_the_spread_case_naming_the_misplaced_pod(flow, monkeypatch) -> None:
    monkeypatch.setattr(KaiPlacement, "gpu_strategy", lambda self: "binpack")
    h = flow(layout=SMALL)
    set_strategy(h, "spread")
    with pytest.raises(AssertionError) as failure:
        run_case(h, SPREAD_CASE)
    message = str(failure.value)
    assert message.startswith("[KAI v0.17, spread] the small TrainJobs were not placed as spread says: ")
    assert "small-1 on kai-conformance-worker (free before: kai-conformance-worker 1/2" in message
    assert "spread picks kai-conformance-worker2 or kai-conformance-worker3" in message


@pytest.mark.parametrize("strategy", ["binpack", "spread"])
def test_the_placement_control_fires_against_the_other_strategy(flow, strategy: str) -> None:
    h = flow(layout=SMALL)
    set_strategy(h, strategy)
    run_control(h)
    fired = [v for v in h.record.record.verdicts if v.expect_violation]
    other = "spread" if strategy == "binpack" else "binpack"
    assert [(v.detector, v.ok, v.as_expected) for v in fired] == [(f"placement-{other}", False, True)]
    assert h.verdicts()[f"placement-{strategy}"] is True


def test_the_placement_control_fails_when_the_detector_is_blind(flow, monkeypatch) -> None:
    monkeypatch.setattr(test_placement, "placements_follow", lambda s, steps: Verdict(f"placement-{s}", True, "ok"))
    h = flow(layout=SMALL)
    with pytest.raises(AssertionError, match="the placement detector did not fire on placements made under binpack"):
        run_control(h)


@pytest.mark.parametrize(
    ("kai_set", "expected"), [((), "binpack"), (("scheduler.placementStrategy=spread",), "spread")]
)
def test_kai_set_reaches_the_default_shard_through_the_install(
    fake: FakeKube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kai_set: tuple[str, ...], expected: str
) -> None:
    tools_on_path(tmp_path / "bin", monkeypatch)
    stack = SimulatedStack(fake)
    settings = make_settings(tmp_path, sources=InstallSources(kai_set=kai_set))
    kai.install(install_context(settings, stack))
    (command,) = stack.runner.commands("helm", "upgrade")
    assert ("--set" in command) is bool(kai_set)
    assert active_placement(fake).gpu == expected
