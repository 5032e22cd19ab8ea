"""The GPU-sharing suite end to end on the simulated cluster (tests/flows/__init__.py; simulated admission, scheduler and
binder for fractions: tests/fakes/kai/sharing.py; the reservation pods answered by the suite's own fake device layer,
clusters/gpu_sharing.py)."""

from __future__ import annotations

import pytest
from _pytest.outcomes import Skipped

from kai_conformance.clusters.catalog import Catalog
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.waits import ConditionViolated
from kai_conformance.suites import test_sharing
from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.expectations.sharing import RESERVATION_NAMESPACE, RESERVED_GPU_ANNOTATION
from kai_conformance.suites.support.gpu_sharing import SharingSupport
from tests import crd_schemas
from tests.fakes.kai.sharing import SharingFaults

CATALOG = Catalog.load()

ON = SharingSupport(True, "Config kai-config spec.admission.gpuSharing = true", "nvidia", True, "binpack")


def args(h, support: SharingSupport = ON) -> dict:
    return {**h.args(), "sharing": support}


def reservation_pods(h) -> list[dict]:
    return h.fake.objects(kinds.POD, RESERVATION_NAMESPACE)


def test_two_half_gpu_pods_share_one_device_on_one_reservation(flow) -> None:
    h = flow()
    test_sharing.test_two_half_gpu_pods_share_one_device(test_sharing.SHARING[0], **args(h))
    verdicts = {v.detector: v for v in h.record.record.verdicts}
    assert all(v.ok for v in verdicts.values()), verdicts
    assert "portion 0.50" in verdicts["fraction-bindrequests"].explanation
    assert "share one device" in verdicts["one-device"].explanation
    assert "RuntimeClass nvidia" in verdicts["runtime-class"].explanation
    (reservation,) = reservation_pods(h)
    assert reservation["metadata"]["annotations"][RESERVED_GPU_ANNOTATION].startswith("GPU-kai-conformance-")
    requests = h.fake.objects(kinds.BIND_REQUEST)
    assert {r["spec"]["receivedResourceType"] for r in requests} == {"Fraction"}
    assert len({r["spec"]["selectedGPUGroups"][0] for r in requests}) == 1


def test_sharing_cases_skip_with_the_reason_and_the_kai_set_value_when_sharing_is_off(flow) -> None:
    h = flow()
    off = SharingSupport(False, "Config kai-config spec.admission.gpuSharing = false")
    for test, case in (
        (test_sharing.test_two_half_gpu_pods_share_one_device, test_sharing.SHARING[0]),
        (
            test_sharing.test_a_fractional_gang_waits_whole_and_binds_whole_once_unblocked,
            test_sharing.BEHIND_A_BLOCKER[0],
        ),
        (
            test_sharing.test_control_the_one_device_detector_fires_on_fractions_too_big_to_share,
            test_sharing.CONTROL[0],
        ),
    ):
        with pytest.raises(Skipped, match=r"GPU sharing is off on this cluster \(Config kai-config spec.admission"
                           r".gpuSharing = false\): install KAI with --kai-set global.gpuSharing=true"):  # fmt: skip
            test(case, **args(h, off))
    assert h.fake.objects(kinds.TRAIN_JOB) == [], "a skipped case creates nothing"


def test_a_missing_runtime_class_skips_naming_it(flow) -> None:
    h = flow()
    missing = SharingSupport(True, "kai-config", "nvidia", False, "binpack")
    with pytest.raises(Skipped, match=r"RuntimeClass nvidia, which KAI's admission sets on every fractional pod, "
                       "does not exist on this cluster"):  # fmt: skip
        test_sharing.test_two_half_gpu_pods_share_one_device(test_sharing.SHARING[0], **args(h, missing))


def test_the_share_case_skips_under_gpu_spread_saying_which_strategy(flow) -> None:
    h = flow()
    spread = SharingSupport(True, "kai-config", "nvidia", True, "spread", "SchedulingShard default = spread")
    with pytest.raises(Skipped, match=r"GPU placement strategy is spread \(SchedulingShard default = spread\); only "):
        test_sharing.test_two_half_gpu_pods_share_one_device(test_sharing.SHARING[0], **args(h, spread))


def test_two_halves_on_two_devices_fail_naming_both_groups(flow) -> None:
    h = flow(SharingFaults(fractions_never_share=True))
    with pytest.raises(AssertionError, match=r"\[one-device\] VIOLATED: the 2 bound pods of TrainJob fractions are "
                       r"on 2 device\(s\): fractions-node-0-0-\w+ on kai-conformance-worker GPU group gpu-group-\d+"):  # fmt: skip
        test_sharing.test_two_half_gpu_pods_share_one_device(test_sharing.SHARING[0], **args(h))


def test_unanswered_reservation_pods_are_reported_as_the_binder_not_acting(flow) -> None:
    h = flow(SharingFaults(reservations_unanswered=True))
    with pytest.raises(errors.ComponentDown, match="KAI binder"):
        test_sharing.test_two_half_gpu_pods_share_one_device(test_sharing.SHARING[0], **args(h))
    (reservation,) = reservation_pods(h)
    assert RESERVED_GPU_ANNOTATION not in (reservation["metadata"].get("annotations") or {})
    (note,) = [n for n in h.record.record.notes if n.startswith("reservation pods")]
    assert "(Running): no run.ai/reserve_for_gpu_index yet; the binder waits 40 s for that answer" in note


def test_a_fractional_gang_waits_whole_behind_a_blocker_and_binds_whole_after(flow) -> None:
    h = flow()
    case = test_sharing.BEHIND_A_BLOCKER[0]
    test_sharing.test_a_fractional_gang_waits_whole_and_binds_whole_once_unblocked(case, **args(h))
    verdicts = h.verdicts()
    assert verdicts["runtime-class"], "v0.17: whole-GPU pods get no RuntimeClass"
    assert verdicts["fraction-bindrequests"]
    held = next(v for v in h.record.record.verdicts if v.detector.startswith("gang-held"))
    assert held.ok and "none of the 3 pods bound" in held.explanation
    assert len(reservation_pods(h)) == 2  # three halves: two on one GPU, one on another


def test_a_fractional_gang_placed_partly_fails_the_hold(flow) -> None:
    h = flow(SharingFaults(partial_fraction_gangs=True))
    with pytest.raises(ConditionViolated, match=r"fractional gang of 3 held back while one GPU is free"):
        test_sharing.test_a_fractional_gang_waits_whole_and_binds_whole_once_unblocked(
            test_sharing.BEHIND_A_BLOCKER[0], **args(h)
        )


def test_the_control_sees_the_one_device_detector_fire_on_two_fractions_too_big_to_share(flow) -> None:
    h = flow()
    test_sharing.test_control_the_one_device_detector_fires_on_fractions_too_big_to_share(
        test_sharing.CONTROL[0], **args(h)
    )
    (control,) = [v for v in h.record.record.verdicts if v.expect_violation]
    assert control.detector == "one-device" and not control.ok and control.as_expected
    assert "on 2 device(s)" in control.explanation
    assert len(reservation_pods(h)) == 2


def test_the_control_fails_when_the_detector_is_blind(flow, monkeypatch) -> None:
    monkeypatch.setattr(test_sharing, "one_device", lambda *a, **k: Verdict("one-device", True, "nothing"))
    h = flow()
    with pytest.raises(AssertionError, match=r"the one-device detector did not fire on two pods of 0\.6 GPU"):
        test_sharing.test_control_the_one_device_detector_fires_on_fractions_too_big_to_share(
            test_sharing.CONTROL[0], **args(h)
        )


@pytest.mark.parametrize("combination", CATALOG.combinations, ids=lambda c: c.name)
def test_the_bindrequests_the_detectors_read_follow_the_upstream_schema(flow, combination, schema_root) -> None:
    """receivedResourceType, receivedGPU {count, portion} and selectedGPUGroups as the BindRequest CRD of every
    supported KAI version defines them (the simulated scheduler writes what KAI's cache.go writes)."""
    h = flow()
    test_sharing.test_two_half_gpu_pods_share_one_device(test_sharing.SHARING[0], **args(h))
    schemas = crd_schemas.schemas_for(combination, schema_root)
    requests = h.fake.objects(kinds.BIND_REQUEST)
    assert requests and all(schemas.covers(r) for r in requests)
    assert [p for r in requests for p in schemas.problems(r)] == []
    wrong = {**requests[0], "spec": {**requests[0]["spec"], "receivedGPU": {"count": "1", "portion": 0.5}}}
    assert len(schemas.problems(wrong)) == 2  # the schema can fail: count is an integer, portion a string
