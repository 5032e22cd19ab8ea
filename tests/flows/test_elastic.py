"""The elastic suite end to end on the simulated cluster (harness: tests/flows/__init__.py; the elastic behaviour of the
simulated KAI: tests/fakes/kai/elastic.py). Without a fault each case passes; a KAI that ignores the minimum, treats
an elastic gang as all-or-nothing, or evicts it whole fails the case naming what it saw; the control fires. Both
holds over the waiting surplus end on the simulated KAI's refusals, and last their wall time when its events are
throttled.
"""

from __future__ import annotations

import pytest

from kai_conformance.clusters.layout import GpuLayout, GpuNode
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.waits import ConditionNotMet, ConditionViolated, TimeoutPolicy
from kai_conformance.suites import test_elastic
from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.expectations.elastic import MinimumSource, elastic_row
from kai_conformance.suites.support.snapshot import is_bound
from tests.fakes.controllers import Faults
from tests.fakes.kai.elastic import KaiElastic
from tests.fakes.kai.scheduler import Kai
from tests.flows import NAMESPACE

START, PREEMPTION, CONTROL = test_elastic.START[0], test_elastic.PREEMPTION[0], test_elastic.CONTROL[0]
#: Small enough to keep the flows quick: elastic gangs of 6 pods with a minimum of 3.
SMALL = GpuLayout((GpuNode("kai-conformance-worker", 3), GpuNode("kai-conformance-worker2", 3)))


def bound_pods(h, workload: str) -> list[dict]:
    return [
        p for p in h.fake.objects(kinds.POD, NAMESPACE)
        if p["metadata"]["labels"].get("jobset.sigs.k8s.io/jobset-name") == workload and is_bound(p)
    ]  # fmt: skip


def test_the_trainjob_carries_the_minimum_on_the_replicated_job_template_and_the_podgroup_on_its_leaf(flow) -> None:
    h = flow()
    h.workspace.apply_all(CONTROL.manifests(h.ctx))
    trainjob = h.fake.find(kinds.TRAIN_JOB, "elastic", NAMESPACE)
    (patch,) = trainjob["spec"]["runtimePatches"]
    (rjob,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert (rjob["name"], rjob["template"]["metadata"]["annotations"]) == (
        "node",
        {"kai.scheduler/batch-min-member": "2"},
    )
    # A TrainJob annotation would only cap the root minSubGroup (computePodGroupMinSubGroup): none is set.
    assert "kai.scheduler/batch-min-member" not in trainjob["metadata"]["annotations"]
    (pg,) = h.fake.objects(kinds.POD_GROUP, NAMESPACE)
    leaf = next(g for g in pg["spec"]["subGroups"] if g["name"] == "node-replica-0")
    assert (leaf["minMember"], pg["spec"]["minSubGroup"]) == (2, 1)


@pytest.mark.parametrize(
    ("minor", "source"),
    [("v0.13.0", MinimumSource.IGNORED), ("v0.14.7", MinimumSource.JOBSET_ANNOTATION),
     ("v0.15.3", MinimumSource.JOBSET_ANNOTATION), ("v0.16.8", MinimumSource.REPLICATED_JOB_TEMPLATE),
     ("v0.17.0", MinimumSource.REPLICATED_JOB_TEMPLATE)],
)  # fmt: skip
def test_the_elastic_row_of_each_kai_version_says_where_the_minimum_is_read(minor, source) -> None:
    row = elastic_row(minor)
    assert row.source is source
    assert row.supported is (source is not MinimumSource.IGNORED)
    flat = {"spec": {"minMember": 3}}
    tree = {"spec": {"minSubGroup": 1, "subGroups": [{"name": "node"}, {"name": "node-replica-0", "minMember": 2}]}}
    if source is MinimumSource.REPLICATED_JOB_TEMPLATE:
        assert (row.minimum_in(tree), row.minimum_in(flat), row.field()) == (
            2, None, "spec.subGroups[node-replica-0].minMember")  # fmt: skip
        assert set(row.trainjob_settings(2)) == {"runtime_patches"}
    else:
        assert (row.minimum_in(flat), row.field()) == (3, "spec.minMember")
        assert row.trainjob_settings(2) == {"annotations": {"kai.scheduler/batch-min-member": "2"}}


def test_an_elastic_gang_starts_with_its_minimum_and_grows_once_the_blocker_is_gone(flow) -> None:
    h = flow(layout=SMALL)
    test_elastic.test_an_elastic_gang_starts_with_its_minimum_and_grows_when_gpus_free_up(START, **h.args())
    assert h.verdicts() == {
        "elastic-podgroup": True, "elastic-size": True, "elastic-size+gang-bound": True, "gang-bound": True,
        "elastic-never-below-minimum": True,
    }  # fmt: skip
    started = next(v for v in h.record.record.verdicts if v.detector == "elastic-size")
    assert started.explanation.startswith("3 of 6 pods bound") and "3 pending" in started.explanation
    assert len(bound_pods(h, "elastic")) == 6
    assert h.fake.find(kinds.TRAIN_JOB, "blocker", NAMESPACE) is None


def test_a_podgrouper_ignoring_the_template_annotation_fails_naming_the_field(flow, monkeypatch) -> None:
    monkeypatch.setattr(KaiElastic, "_podgroup_for", Kai._podgroup_for)
    h = flow(layout=SMALL)
    with pytest.raises(AssertionError) as failure:
        test_elastic.test_an_elastic_gang_starts_with_its_minimum_and_grows_when_gpus_free_up(START, **h.args())
    message = str(failure.value)
    assert message.startswith("[KAI v0.17] the PodGroup of elastic does not carry its minimum")
    assert "spec.subGroups[node-replica-0].minMember = 6 for 6 pods, expected 3" in message


def test_a_kai_treating_the_elastic_gang_as_all_or_nothing_fails_waiting_for_the_minimum(flow, monkeypatch) -> None:
    monkeypatch.setattr(KaiElastic, "_to_allocate", Kai._to_allocate)
    h = flow(layout=SMALL)
    with pytest.raises(ConditionNotMet) as failure:
        test_elastic.test_an_elastic_gang_starts_with_its_minimum_and_grows_when_gpus_free_up(START, **h.args())
    message = str(failure.value)
    assert message.startswith("[KAI v0.17] the elastic gang's minimum of 3 bound, its 3 surplus pending")
    assert "elastic-size: 0 of 6 pods bound (-), 6 pending; expected 3 bound and 3 pending" in message


def test_a_higher_priority_gang_takes_only_the_surplus(flow) -> None:
    h = flow(layout=SMALL)
    test_elastic.test_a_higher_priority_gang_takes_only_the_surplus_of_an_elastic_gang(PREEMPTION, **h.args())
    verdicts = {v.detector: v for v in h.record.record.verdicts}
    assert all(v.ok for v in verdicts.values()), verdicts
    assert verdicts["surplus-first"].explanation == (
        "3 of the 6 pods bound before still bound (minimum 3): lost 3, within the surplus of 3"
    )
    assert "(preempt)" in verdicts["eviction-event"].explanation
    assert len(bound_pods(h, "elastic")) == 3 and len(bound_pods(h, "newcomer")) == 3


def test_a_kai_evicting_the_elastic_gang_whole_fails_on_the_way(flow, monkeypatch) -> None:
    monkeypatch.setattr(KaiElastic, "_preempt_for", Kai._preempt_for)
    h = flow(layout=SMALL)
    with pytest.raises(ConditionViolated) as failure:
        test_elastic.test_a_higher_priority_gang_takes_only_the_surplus_of_an_elastic_gang(PREEMPTION, **h.args())
    message = str(failure.value)
    assert message.startswith("[KAI v0.17, preempt] newcomer bound on the 3 GPUs of the elastic gang's surplus: ")
    assert "violated on the way" in message
    assert "only 0 of the 6 pods bound before still bound, below the minimum 3: lost 6" in message


def test_the_elastic_control_sees_the_detector_fire_against_a_larger_minimum(flow) -> None:
    h = flow()
    test_elastic.test_control_the_elastic_detector_fires_on_a_gang_judged_against_a_larger_minimum(CONTROL, **h.args())
    fired = [v for v in h.record.record.verdicts if v.expect_violation]
    assert [(v.detector, v.ok, v.as_expected) for v in fired] == [("elastic-minimum", False, True)]
    assert fired[0].explanation.startswith("2 of 4 pods bound") and "below the gang's minimum 4" in fired[0].explanation
    assert h.verdicts()["elastic-minimum"] is True  # the last verdict of that detector: the real minimum holds
    pending = [p for p in h.fake.objects(kinds.POD, NAMESPACE) if not is_bound(p)]
    assert all("OverLimit" in p["status"]["conditions"][0]["message"] for p in pending) and len(pending) == 2


def test_the_elastic_control_fails_when_the_detector_is_blind(flow, monkeypatch) -> None:
    monkeypatch.setattr(
        test_elastic, "elastic_minimum_held", lambda *a, **k: Verdict("elastic-minimum", True, "nothing to report")
    )
    h = flow()
    with pytest.raises(AssertionError, match=r"the elastic detector did not fire on a gang of 4 pods bound at 2"):
        test_elastic.test_control_the_elastic_detector_fires_on_a_gang_judged_against_a_larger_minimum(
            CONTROL, **h.args()
        )


# ------------------------------------------------------------------------------------- holds on KAI's refusals
#: A hold of several looks of the simulated cluster on the waits' simulated clock (0.9 s, a 0.3 s minimum), as in
#: tests/flows/test_holds.py.
HOLDING = TimeoutPolicy(scale=0.06)


@pytest.mark.parametrize(
    "run",
    [
        lambda h: test_elastic.test_an_elastic_gang_starts_with_its_minimum_and_grows_when_gpus_free_up(
            START, **h.args()
        ),
        lambda h: test_elastic.test_a_higher_priority_gang_takes_only_the_surplus_of_an_elastic_gang(
            PREEMPTION, **h.args()
        ),
    ],
    ids=["at-its-minimum-behind-the-blocker", "keeps-its-minimum-after-the-eviction"],
)
@pytest.mark.usefixtures("simulated_waits")
def test_the_elastic_holds_end_on_kais_refusals_of_the_surplus(flow, run) -> None:
    h = flow(layout=SMALL)
    h.timeouts = HOLDING
    run(h)
    (verdict,) = [v for v in h.record.record.verdicts if "held " in v.explanation]  # the case's one hold
    assert (
        "ended after the scheduler refused the workload" in verdict.explanation and "(needs 3)" in verdict.explanation
    )


def test_with_kai_events_throttled_an_elastic_hold_lasts_its_wall_time_and_says_so(flow) -> None:
    h = flow(Faults(kai_events_throttled=True), layout=SMALL)
    test_elastic.test_an_elastic_gang_starts_with_its_minimum_and_grows_when_gpus_free_up(START, **h.args())
    verdict = next(v for v in h.record.record.verdicts if "held " in v.explanation)
    assert "so the wall-clock hold applied" in verdict.explanation
