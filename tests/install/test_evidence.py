"""Deployments as optional evidence: found in any namespace by upstream's labels or image names (never by fixed
names), and a version *detected* only from an image tag that names it; otherwise *declared* by the run."""

from __future__ import annotations

import logging

import pytest

from kai_conformance.clusters.install.common import running_images
from kai_conformance.clusters.install.evidence import (
    SIGNATURES,
    canonical_repository,
    establish_version,
    find_deployments,
    image_tag,
    repository,
)
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.configuration.resolution import version_origins
from tests.fakes.installation import deployment
from tests.fakes.kube import FakeKube

KNOWN = ("v0.17.0", "v0.16.8")


@pytest.mark.parametrize(
    ("component", "image", "labels"),
    [
        ("kai", "ghcr.io/kai-scheduler/kai-scheduler/scheduler:v0.17.0", None),
        ("kai", "ghcr.io/nvidia/kai-scheduler/podgrouper:v0.13.0", None),  # the registry of older releases
        ("kai", "mirror.example:5000/kai-scheduler/binder:v0.17.0-fips", None),
        ("kai", "localhost/pr/binder:pr-1", {"app.kubernetes.io/managed-by": "kai-operator"}),  # operand, PR image
        ("kai", "localhost/pr/operator:pr-1", {"app": "kai-operator"}),  # the chart's operator
        ("jobset", "registry.k8s.io/jobset/jobset:v0.12.0", None),
        ("jobset", "localhost/jobset-pr:dev", {"app.kubernetes.io/name": "jobset"}),
        ("trainer", "ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.3.0", None),
        ("trainer", "docker.io/kubeflow/trainer-controller-manager:v2.3.0", None),
        ("trainer", "localhost/t:pr", {"app.kubernetes.io/name": "trainer", "app.kubernetes.io/component": "manager"}),
    ],
)
def test_upstream_labels_and_images_are_recognised(component: str, image: str, labels: dict | None) -> None:
    found = deployment("anything", "any-namespace", image, labels)
    assert [name for name, signature in SIGNATURES.items() if signature.matches(found)] == [component]


@pytest.mark.parametrize(
    ("image", "labels"),
    [
        ("registry.k8s.io/pause:3.10", None),
        ("ghcr.io/other-project/scheduler:v0.17.0", None),  # a KAI image name outside a kai-scheduler path
        ("quay.io/x/jobset:v0.12.0", None),  # JobSet's name outside a jobset path
        ("ghcr.io/x/web:1", {"app.kubernetes.io/name": "trainer"}),  # trainer, but not its manager
        ("ghcr.io/x/web:1", {"app.kubernetes.io/managed-by": "helm"}),
    ],
)
def test_other_deployments_are_not_taken_for_a_component(image: str, labels: dict | None) -> None:
    other = deployment("kai-scheduler-default", "kai-scheduler", image, labels)  # a familiar name is no evidence
    assert [name for name, signature in SIGNATURES.items() if signature.matches(other)] == []


def test_image_references() -> None:
    assert image_tag("ghcr.io/kai-scheduler/kai-scheduler/operator:v0.17.0@sha256:00") == "v0.17.0"
    assert image_tag("localhost:5000/operator") == ""
    assert repository("localhost:5000/kai-scheduler/scheduler:pr-1") == "localhost:5000/kai-scheduler/scheduler"
    assert repository("pause") == "pause"
    assert canonical_repository("nginx:1.27") == "docker.io/library/nginx"
    assert (
        canonical_repository("kubeflow/trainer-controller-manager:v2.3.0")
        == "docker.io/kubeflow/trainer-controller-manager"
    )
    assert canonical_repository("localhost/kai/binder:pr") == "localhost/kai/binder"


def test_in_a_shared_namespace_only_the_components_images_are_recorded(fake: FakeKube) -> None:
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}})
    for name, image in (("trainer", "kubeflow/trainer-controller-manager:v2.3.0"), ("dns", "coredns/coredns:1.11")):
        fake.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "kube-system"},
                  "status": {"containerStatuses": [{"image": f"docker.io/{image}", "imageID": f"sha-{name}"}]}})  # fmt: skip
    assert running_images(fake, ["kube-system"], of=["kubeflow/trainer-controller-manager:v2.3.0"]) == {
        "docker.io/kubeflow/trainer-controller-manager:v2.3.0": "sha-trainer"
    }
    assert len(running_images(fake, ["kube-system"])) == 2


def test_deployments_are_found_in_any_namespace_sorted(fake: FakeKube) -> None:
    fake.put(deployment("sched", "gpu-platform", "ghcr.io/kai-scheduler/kai-scheduler/scheduler:v0.17.0"))
    fake.put(deployment("grouper", "ai-ops", "ghcr.io/kai-scheduler/kai-scheduler/podgrouper:v0.17.0"))
    fake.put(deployment("web", "default", "nginx:1.27"))
    found = find_deployments(fake, "kai", "KAI Scheduler")
    assert found.refs == [("ai-ops", "grouper"), ("gpu-platform", "sched")]
    assert found.images == {
        "ghcr.io/kai-scheduler/kai-scheduler/podgrouper:v0.17.0": ("ai-ops", "grouper"),
        "ghcr.io/kai-scheduler/kai-scheduler/scheduler:v0.17.0": ("gpu-platform", "sched"),
    }
    assert find_deployments(fake, "trainer", "Kubeflow Trainer").refs == []


def test_deployments_that_may_not_be_listed_are_no_evidence(fake: FakeKube, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "kai_conformance")
    fake.fail("list", 403, kind="Deployment", message="deployments.apps is forbidden")
    found = find_deployments(fake, "kai", "KAI Scheduler")
    assert (found.refs, found.note) == ([], "Deployments not searched: listing them is forbidden "
                                            "(deployments.apps is forbidden)")  # fmt: skip
    assert "the stack is judged by behaviour alone" in caplog.text


def test_a_version_is_detected_only_from_an_image_that_names_it() -> None:
    images = {
        "mirror/kai-scheduler/scheduler:v0.17.0-fips": ("gpu", "s"),
        "mirror/kai-scheduler/binder:v0.17.0": ("gpu", "b"),
    }
    assert establish_version("KAI Scheduler", "--kai-version", "v0.17.0", "--kai-version v0.17.0", images, KNOWN) == {
        "version": "v0.17.0", "version_source": "detected",
        "established": "detected from image mirror/kai-scheduler/scheduler:v0.17.0-fips of Deployment gpu/s",
    }  # fmt: skip


def test_without_an_image_naming_it_the_version_is_declared() -> None:
    declared = establish_version("KAI Scheduler", "--kai-version", "v0.17.0", "--versions kai-v0.17.0+trainer-v2.3.0",
                                 {}, KNOWN)  # fmt: skip
    assert declared == {"version": "v0.17.0", "version_source": "declared",
                        "established": "declared by --versions kai-v0.17.0+trainer-v2.3.0"}  # fmt: skip
    placeholders = {"registry.k8s.io/pause:3.10": ("k", "binder"), "x/kai-scheduler/scheduler:pr-9": ("k", "s")}
    found = establish_version("KAI Scheduler", "--kai-version", "v0.17.0", "--kai-version v0.17.0", placeholders, KNOWN)
    assert found["version_source"] == "declared"
    assert found["established"] == (
        "declared by --kai-version v0.17.0; the image tags found (3.10, pr-9) name no known version"
    )


def test_an_image_naming_another_known_version_is_a_usage_error() -> None:
    with pytest.raises(errors.UsageError, match=r"the cluster runs KAI Scheduler v0.16.8 but this run expects v0.17.0; "
                       r"pass --kai-version v0.16.8"):  # fmt: skip
        establish_version("KAI Scheduler", "--kai-version", "v0.17.0", "x", {"a/kai-scheduler/binder:v0.16.8": ("n", "b")},
                          KNOWN)  # fmt: skip


def test_what_declared_each_version_is_named() -> None:
    assert version_origins(
        "kai-v0.16.8+trainer-v2.2.0", {"kai": None, "trainer": None, "jobset": None}
    ) == dict.fromkeys(("kai", "trainer", "jobset"), "--versions kai-v0.16.8+trainer-v2.2.0")
    default = "the default combination kai-v0.17.0+trainer-v2.3.0 (clusters/versions.yaml)"
    assert version_origins(None, {"kai": "v0.16.8", "trainer": "v2.2.0", "jobset": None}) == {
        "kai": "--kai-version v0.16.8", "trainer": "--trainer-version v2.2.0",
        "jobset": "--trainer-version v2.2.0 (the JobSet release it ships)",
    }  # fmt: skip
    assert version_origins(None, {"kai": None, "trainer": None, "jobset": "v0.11.1"}) == {
        "kai": default, "trainer": "--jobset-version v0.11.1 (the Trainer release that ships it)",
        "jobset": "--jobset-version v0.11.1",
    }  # fmt: skip
