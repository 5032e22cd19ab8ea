"""The CRD check: each component's CRDs exist, are Established and serve the versions the suite speaks, which
every supported combination's upstream CRDs do; without the right to read CRDs, API discovery answers instead."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kai_conformance.clusters.install.crds import SUITE_KINDS, check_crds
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.plugin.options import CATALOG
from kai_conformance.fixtures.waits import TimeoutPolicy
from tests import crd_schemas
from tests.fakes.installation import crd
from tests.fakes.kube import FakeKube

pytestmark = pytest.mark.usefixtures("fast_polling")

TIMEOUTS = TimeoutPolicy(scale=0.002)
FIX = "install it"


def established(obj: dict) -> dict:
    obj["status"]["conditions"] = [{"type": "Established", "status": "True"}]
    return obj


def put_crds(fake: FakeKube, component: str) -> None:
    for kind in SUITE_KINDS[component]:
        fake.put(established(crd(kind)))


@pytest.mark.parametrize("combination", CATALOG.combinations, ids=lambda c: c.name)
def test_every_supported_combination_serves_the_suites_versions(combination, schema_root: Path) -> None:
    for component in (combination.kai, combination.trainer, combination.jobset):
        schemas = crd_schemas.SchemaSet.load([schema_root / component.crds])
        for kind in SUITE_KINDS[component.name]:
            assert schemas.covers({"apiVersion": kind.api_version, "kind": kind.kind}), (component, kind)


def test_served_and_established_crds_pass(fake: FakeKube) -> None:
    put_crds(fake, "trainer")
    assert check_crds(fake, "trainer", "Kubeflow Trainer", TIMEOUTS, FIX) == (
        "served: TrainJob trainer.kubeflow.org/v1alpha1, TrainingRuntime trainer.kubeflow.org/v1alpha1, "
        "ClusterTrainingRuntime trainer.kubeflow.org/v1alpha1"
    )


def test_a_missing_crd_names_the_component_and_the_fix(fake: FakeKube) -> None:
    put_crds(fake, "kai")
    fake.store.pop(("apiextensions.k8s.io/v1", "CustomResourceDefinition", None, "bindrequests.scheduling.run.ai"))
    with pytest.raises(errors.InfrastructureError, match=r"^KAI Scheduler is not installed: CustomResourceDefinition "
                       r"bindrequests.scheduling.run.ai \(BindRequest\) missing. fix: install it$"):  # fmt: skip
        check_crds(fake, "kai", "KAI Scheduler", TIMEOUTS, FIX)


def test_a_crd_of_another_version_is_named_with_what_it_serves(fake: FakeKube) -> None:
    put_crds(fake, "kai")
    fake.put(established(crd(kinds.QUEUE, versions=("v2alpha9",))))
    with pytest.raises(errors.InfrastructureError, match=r"KAI Scheduler does not serve the API the suite speaks: "
                       r"queues.scheduling.run.ai serves v2alpha9, not v2. fix: install the KAI Scheduler release of "
                       r"the selected combination"):  # fmt: skip
        check_crds(fake, "kai", "KAI Scheduler", TIMEOUTS, FIX)


def test_a_crd_never_established_times_out_with_its_reason(fake: FakeKube) -> None:
    put_crds(fake, "jobset")
    stuck = crd(kinds.JOB_SET)
    stuck["status"]["conditions"] = [{"type": "Established", "status": "False", "message": "names conflict"}]
    fake.put(stuck)
    with pytest.raises(errors.WaitTimeout) as caught:
        check_crds(fake, "jobset", "JobSet", TIMEOUTS, FIX)
    assert "not Established: jobsets.jobset.x-k8s.io (names conflict)" in str(caught.value)
    assert "fix: `kubectl describe crd` shows why; install it" in str(caught.value)


def test_without_the_right_to_read_crds_discovery_answers(fake: FakeKube, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "kai_conformance")
    fake.fail(
        "get", 403, kind="CustomResourceDefinition", times=10**6, message="customresourcedefinitions is forbidden"
    )
    assert check_crds(fake, "jobset", "JobSet", TIMEOUTS, FIX).startswith(
        "served by API discovery (reading CustomResourceDefinitions is forbidden): JobSet jobset.x-k8s.io/v1alpha2"
    )
    assert "JobSet: cannot read CustomResourceDefinitions (customresourcedefinitions is forbidden)" in caplog.text
    fake.unserve(kinds.JOB_SET)
    with pytest.raises(errors.InfrastructureError, match=r"JobSet is not installed: API discovery does not list "
                       r"JobSet \(jobset.x-k8s.io/v1alpha2\)"):  # fmt: skip
        check_crds(fake, "jobset", "JobSet", TIMEOUTS, FIX)
