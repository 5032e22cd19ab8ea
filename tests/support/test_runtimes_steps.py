"""The runtime area's steps offline: where a known gap's strict xfail begins (only from the wait it stops, a wait
before it failing plainly, as pytest reads a mark added during the call), the check that JobSet released a
dependsOn, and the volume checks that turn "the cluster cannot provision the runtime's claim" into a skip naming
it instead of a verdict on KAI."""

from __future__ import annotations

import copy
import datetime as dt
from pathlib import Path

import pytest

from kai_conformance.suites import test_runtimes as tr
from kai_conformance.suites.support import shipped_runtimes as sr
from kai_conformance.suites.support.cases.runtimes import Step
from kai_conformance.suites.support.detectors.runtimes import REPLICATED_JOB_LABEL
from kai_conformance.suites.support.snapshot import Snapshot
from tests import builders as b
from tests.fakes.kube import FakeKube

pytest_plugins = ["pytester"]

NS = "kc-ns"


#: The tests' own runtime of torchtune's v2.3.0 shape (not a copy of the upstream file, which the shared copy lacks):
#: initializers and a node that mount the claim ``initializer`` of the JobSet's volumeClaimPolicies.
TUNE = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "torchtune-llama3.2-1b"},
    "spec": {"template": {"spec": {
        "volumeClaimPolicies": [{"templates": [{"metadata": {"name": "initializer"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "20Gi"}}}}]}],
        "replicatedJobs": [{"name": "dataset-initializer", "template": {"spec": {"template": {"spec": {
            "containers": [{"name": "dataset-initializer", "image": "example.org/x:1"}]}}}}}],
    }}},
}  # fmt: skip


def _tune() -> sr.ShippedRuntime:
    return sr.ShippedRuntime("tests", sr.RUNTIMES_PATH + "torchtune/llama3_2/llama3_2_1B.yaml", copy.deepcopy(TUNE))


# ----------------------------------------------------------------------------------------------- dependsOn released
def _pods(**per_rjob: int) -> Snapshot:
    pods = [
        b.pod(f"{name}-{i}", labels={REPLICATED_JOB_LABEL: name})
        for name, count in per_rjob.items()
        for i in range(count)
    ]
    return Snapshot(taken_at=0.0, pods=tuple(pods))


def test_the_created_check_fires_until_every_dependent_pod_exists() -> None:
    missing = tr.replicated_jobs_created(_pods(**{"dataset-initializer": 1, "node": 1}), {"node": 2})
    assert not missing.ok and missing.explanation == "node: 1 of 2 pods exist"
    none = tr.replicated_jobs_created(_pods(**{"model-initializer": 1}), {"node": 2, "launcher": 1})
    assert not none.ok and none.explanation == "node: 0 of 2 pods exist; launcher: 0 of 1 pods exist"
    created = tr.replicated_jobs_created(_pods(node=2), {"node": 2})
    assert created.ok and created.detector == "replicated-jobs-created"


# ---------------------------------------------------------------------------------------------------- xfail steps
class Request:
    def __init__(self) -> None:
        self.markers: list[pytest.MarkDecorator] = []

    def applymarker(self, marker: pytest.MarkDecorator) -> None:
        self.markers.append(marker)


def test_the_strict_xfail_is_applied_only_at_the_step_the_gap_stops() -> None:
    request = Request()
    tr.expect_gap_at(request, Step.FIRST, Step.LATER, "why")  # type: ignore[arg-type]
    tr.expect_gap_at(request, Step.LATER, None, "why")  # type: ignore[arg-type]
    assert request.markers == []
    tr.expect_gap_at(request, Step.LATER, Step.LATER, "KAI v0.17: why")  # type: ignore[arg-type]
    (marker,) = request.markers
    assert marker.name == "xfail" and marker.kwargs == {"reason": "KAI v0.17: why", "raises": AssertionError,
                                                        "strict": True}  # fmt: skip


STEPS = """
import pytest
from kai_conformance.suites.support.cases.runtimes import Step
from kai_conformance.suites.test_runtimes import expect_gap_at

def test_fails_before_the_step(request):
    assert False, "the first wait"
    expect_gap_at(request, Step.LATER, Step.LATER, "gap")

def test_fails_at_the_step(request):
    expect_gap_at(request, Step.LATER, Step.LATER, "gap")
    assert False, "the later wait"

def test_passes_at_the_step(request):
    expect_gap_at(request, Step.LATER, Step.LATER, "gap")

def test_infrastructure_at_the_step(request):
    expect_gap_at(request, Step.LATER, Step.LATER, "gap")
    raise RuntimeError("a component is down")
"""


def test_pytest_reads_the_mark_added_during_the_call(pytester: pytest.Pytester) -> None:
    """The runtime cases add their strict xfail mid-call (``expect_gap_at``): pytest must judge the rest of the call
    by it and what came before without it, a strict XPASS failing and a non-assertion error staying an error."""
    pytester.makeini("[pytest]\naddopts = -p no:pytest-kind-ng\n")
    pytester.makepyfile(test_steps=STEPS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rfxX")
    result.assert_outcomes(failed=3, xfailed=1)
    result.stdout.fnmatch_lines([
        "FAILED test_steps.py::test_fails_before_the_step - AssertionError: the first*",
        "FAILED test_steps.py::test_passes_at_the_step - [[]XPASS(strict)[]] gap",
        "FAILED test_steps.py::test_infrastructure_at_the_step - RuntimeError*",
        "XFAIL test_steps.py::test_fails_at_the_step - gap",
    ])  # fmt: skip


# ---------------------------------------------------------------------------------------------------------- volumes
def _class(name: str, *, default: bool) -> dict:
    annotations = {tr.DEFAULT_CLASS: "true"} if default else {}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "provisioner": "rancher.io/local-path",
            "metadata": {"name": name, "uid": f"uid-{name}", "annotations": annotations}}  # fmt: skip


def _storage(fake: FakeKube, *classes: dict) -> FakeKube:
    fake.serve(tr.STORAGE_CLASS)
    fake.serve(tr.PVC)
    for obj in classes:
        fake.put(obj)
    return fake


def test_a_claim_without_a_storage_class_to_serve_it_is_named(fake: FakeKube) -> None:
    tune = _tune()
    assert [t["metadata"]["name"] for t in tr.claim_templates(tune)] == ["initializer"]
    _storage(fake)
    assert tr.missing_storage_class(fake, tune) == (
        "claim initializer of torchtune-llama3.2-1b asks for the default StorageClass and this cluster has none"
    )
    fake.put(_class("standard", default=False))
    assert "has none" in (tr.missing_storage_class(fake, tune) or "")  # a class, but not the default one
    fake.put(_class("standard", default=True))
    assert tr.missing_storage_class(fake, tune) is None
    named = copy.deepcopy(tune.obj)
    named["spec"]["template"]["spec"]["volumeClaimPolicies"][0]["templates"][0]["spec"]["storageClassName"] = "fast"
    assert tr.missing_storage_class(fake, sr.ShippedRuntime(tune.origin, tune.source, named)) == (
        "claim initializer of torchtune-llama3.2-1b asks for StorageClass fast, which this cluster has not"
    )


def test_a_runtime_without_claims_reads_no_storage(fake: FakeKube, upstream_runtimes: Path) -> None:
    torch = sr.runtime(str(upstream_runtimes), "torch-distributed")
    assert tr.claim_templates(torch) == []
    assert tr.missing_storage_class(fake, torch) is None  # StorageClass not even served: never asked


def _claim(*, node: str | None, phase: str = "Pending") -> dict:
    annotations = {tr.PROVISIONER: "rancher.io/local-path", **({tr.SELECTED_NODE: node} if node else {})}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "initializer-shipped", "namespace": NS, "uid": "uid-claim", "annotations": annotations},
            "spec": {"storageClassName": "standard", "accessModes": ["ReadWriteOnce"]},
            "status": {"phase": phase}}  # fmt: skip


def test_a_claim_placed_but_never_provisioned_is_named_with_its_last_event() -> None:
    now = [dt.datetime(2026, 11, 24, 11, 18, 55, tzinfo=dt.timezone.utc)]
    fake = _storage(FakeKube(clock=lambda: now[0]))
    assert tr.unprovisioned_claim(fake, NS) is None
    claim = fake.put(_claim(node=None))
    fake.record_event(claim, "WaitForFirstConsumer", "waiting for first consumer to be created before binding")
    assert tr.unprovisioned_claim(fake, NS) is None  # no pod placed yet: the scheduler's business, not storage's
    claim = fake.put(_claim(node="kc-worker2"))
    now[0] += dt.timedelta(seconds=100)
    fake.record_event(claim, "ExternalProvisioning", "Waiting for a volume to be created by 'rancher.io/local-path'")
    assert tr.unprovisioned_claim(fake, NS) == (
        "PersistentVolumeClaim initializer-shipped is Pending although its pod was placed on kc-worker2: StorageClass "
        "standard, provisioner rancher.io/local-path: \"Waiting for a volume to be created by 'rancher.io/local-path'\""
    )
    fake.put(_claim(node="kc-worker2", phase="Bound"))
    assert tr.unprovisioned_claim(fake, NS) is None


def test_the_claims_guard_ends_the_wait_once_a_placed_pods_claim_outlives_the_grace_asking_the_api_sparingly() -> None:
    now = [0.0]
    fake = _storage(FakeKube())
    guard = tr.ClaimsProvisioned(fake, NS, grace=30.0, every=5.0, clock=lambda: now[0])
    fake.put(_claim(node="kc-worker2"))
    now[0] = 29.0
    assert guard(None).ok, "within the grace a provisioner may still be at work"  # type: ignore[arg-type]
    now[0] = 31.0
    verdict = guard(None)  # type: ignore[arg-type]
    assert not verdict.ok and "PersistentVolumeClaim initializer-shipped is Pending" in verdict.explanation
    fake.put(_claim(node="kc-worker2", phase="Bound"))
    now[0] = 33.0
    assert guard(None).explanation == "not judged yet", "asked again only 5 s later"  # type: ignore[arg-type]
    now[0] = 36.5
    verdict = guard(None)  # type: ignore[arg-type]
    assert verdict.ok and verdict.explanation == "every claim of a placed pod is bound"
