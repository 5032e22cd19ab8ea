"""What GPU sharing needs on fake GPUs and how the suite reads the stack's setting: the admission's RuntimeClass
(created as a stack object, never over someone else's), the reservation pods the suite answers for its fake GPUs,
and ``SharingSupport`` read from kai-config or the admission's arguments, with a skip reason naming the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from kai_conformance.clusters import gpu_sharing
from kai_conformance.clusters.install import kai
from kai_conformance.clusters.install.suite import remove_suite_objects
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.configuration.settings import InstallSources
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.ownership import MANAGED_BY, SCOPE_LABEL
from kai_conformance.fixtures.waits import Observation, TimeoutPolicy, eventually
from kai_conformance.suites.support.expectations.sharing import (
    GPU_SHARING_SETTING,
    RESERVATION_NAMESPACE,
    RESERVED_GPU_ANNOTATION,
)
from kai_conformance.suites.support.gpu_sharing import (
    SharingSupport,
    answering_reservations,
    describe_reservations,
    read_sharing_support,
    sharing_support,
)
from kai_conformance.suites.support.placement_setting import ActivePlacement
from tests.builders import deployment
from tests.fakes.installation import SimulatedStack, install_context, make_settings
from tests.fakes.kube import FakeKube

TIMEOUTS = TimeoutPolicy(scale=0.01)
BINPACK = ActivePlacement("binpack", "SchedulingShard default spec.placementStrategy.gpu unset")


def config(**admission) -> dict:
    return {"apiVersion": "kai.scheduler/v1", "kind": "Config", "metadata": {"name": "kai-config"},
            "spec": {"admission": admission}}  # fmt: skip


def reservation_pod(name: str, node: str | None, gpu: str | None = None, created: str = "2026-11-21T12:00:00Z"):
    meta = {"name": name, "namespace": RESERVATION_NAMESPACE, "creationTimestamp": created,
            "labels": {"app": RESERVATION_NAMESPACE, "runai-gpu-group": name}}  # fmt: skip
    if gpu:
        meta["annotations"] = {RESERVED_GPU_ANNOTATION: gpu}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [], "nodeName": node}}


# ------------------------------------------------------------------------------------------------ RuntimeClass
def test_the_admissions_runtime_class_comes_from_kai_config_else_its_default() -> None:
    assert gpu_sharing.fraction_runtime_class([]) == "nvidia"
    assert gpu_sharing.fraction_runtime_class([config(gpuSharing=True)]) == "nvidia"
    assert gpu_sharing.fraction_runtime_class([config(gpuFractionRuntimeClassName="fake")]) == "fake"
    assert gpu_sharing.fraction_runtime_class([config(gpuPodRuntimeClassName="old")]) == "old"  # v0.13–v0.15 field
    both = config(gpuFractionRuntimeClassName="new", gpuPodRuntimeClassName="old")
    assert gpu_sharing.fraction_runtime_class([both]) == "new"  # v0.16+: the fraction field wins
    assert gpu_sharing.fraction_runtime_class([config(gpuFractionRuntimeClassName="")]) == ""  # injection off


def test_the_runtime_class_is_created_as_the_runs_stack_object_and_removed_with_them(fake: FakeKube) -> None:
    created = gpu_sharing.ensure_fraction_runtime_class(fake, "run-1")
    assert created == ["RuntimeClass nvidia (handler runc, for KAI's fractional GPU pods on fake GPUs)"]
    stored = fake.get(kinds.RUNTIME_CLASS, "nvidia")
    assert stored["handler"] == "runc"
    assert stored["metadata"]["labels"][MANAGED_BY] == "kai-conformance"
    assert stored["metadata"]["labels"][SCOPE_LABEL] == "stack"
    assert gpu_sharing.ensure_fraction_runtime_class(fake, "run-2") == []  # exists: left as it is
    assert remove_suite_objects(fake, "run-2", TIMEOUTS) == [] and fake.find(kinds.RUNTIME_CLASS, "nvidia")
    assert remove_suite_objects(fake, "run-1", TIMEOUTS) == []
    assert fake.find(kinds.RUNTIME_CLASS, "nvidia") is None


def test_someone_elses_runtime_class_is_never_touched_and_an_empty_setting_needs_none(fake: FakeKube) -> None:
    fake.put({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"},
              "handler": "nvidia"})  # fmt: skip
    assert gpu_sharing.ensure_fraction_runtime_class(fake, "run-1") == []
    assert fake.get(kinds.RUNTIME_CLASS, "nvidia")["handler"] == "nvidia"
    other = FakeKube()
    other.put(config(gpuFractionRuntimeClassName=""))
    assert gpu_sharing.ensure_fraction_runtime_class(other, "run-1") == []
    assert other.objects(kinds.RUNTIME_CLASS) == []


def test_fake_gpu_nodes_are_the_ones_kais_operator_recognises(fake: FakeKube) -> None:
    fake.put({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "real", "labels": {}}})
    assert not gpu_sharing.has_fake_gpu_nodes(fake)
    fake.put({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "w", "labels": {"run.ai/fake.gpu": "true"}}})
    assert gpu_sharing.has_fake_gpu_nodes(fake)


# ------------------------------------------------------------------------------------------- reservation pods
def test_each_unanswered_reservation_pod_gets_a_gpu_of_its_node_no_other_holds(fake: FakeKube) -> None:
    fake.put(reservation_pod("held", "w1", gpu=gpu_sharing.fake_gpu_id("w1", 0)))
    fake.put(reservation_pod("first", "w1", created="2026-11-21T12:00:01Z"))
    fake.put(reservation_pod("second", "w1", created="2026-11-21T12:00:02Z"))
    fake.put(reservation_pod("elsewhere", "w2"))
    fake.put(reservation_pod("unplaced", None))
    answered = gpu_sharing.answer_reservations(fake)
    assert answered == [
        "elsewhere on w2: GPU-kai-conformance-w2-0",
        "first on w1: GPU-kai-conformance-w1-1",
        "second on w1: GPU-kai-conformance-w1-2",
    ]
    gpus = {p["metadata"]["name"]: (p["metadata"].get("annotations") or {}).get(RESERVED_GPU_ANNOTATION)
            for p in fake.objects(kinds.POD, RESERVATION_NAMESPACE)}  # fmt: skip
    assert gpus["unplaced"] is None and gpus["held"] == "GPU-kai-conformance-w1-0"
    assert gpu_sharing.answer_reservations(fake) == []  # nothing left to answer


def test_the_reservation_pods_are_kais_so_only_the_answer_patches_them(fake: FakeKube) -> None:
    fake.put(reservation_pod("first", "w1"))
    with pytest.raises(errors.ForeignObject):  # the API layer's guard: not the suite's object
        fake.patch(kinds.POD, "first", {"metadata": {"annotations": {"x": "y"}}}, namespace=RESERVATION_NAMESPACE)
    assert gpu_sharing.answer_reservations(fake) == ["first on w1: GPU-kai-conformance-w1-0"]


def test_the_answers_run_on_a_thread_while_the_case_runs(fake: FakeKube) -> None:
    with gpu_sharing.ReservationAnswers(fake, interval=0.005) as answers:
        fake.put(reservation_pod("late", "w1"))

        def answered() -> Observation:
            pod = fake.get(kinds.POD, "late", RESERVATION_NAMESPACE)
            gpu = (pod["metadata"].get("annotations") or {}).get(RESERVED_GPU_ANNOTATION)
            return Observation(gpu is not None, str(gpu))

        eventually(answered, what="the reservation pod answered", timeout=5, interval=0.005)
    assert answers.describe() == (
        "the suite answered 1 reservation pod(s) for its fake GPUs: late on w1: GPU-kai-conformance-w1-0"
    )


def test_a_reservation_image_that_cannot_be_pulled_is_said_in_the_note(fake: FakeKube) -> None:
    """Real kind, offline: KAI v0.17.0's binder gave its reservation pods the image `ubuntu` on fake-GPU nodes and
    they sat in ErrImagePull; the cases passed (the suite answers), and the report now says why."""
    stuck = reservation_pod("stuck", "w1")
    stuck["spec"]["containers"] = [{"name": "resource-reservation", "image": "ubuntu"}]
    stuck["status"] = {"containerStatuses": [{"name": "resource-reservation", "image": "ubuntu",
                                              "state": {"waiting": {"reason": "ErrImagePull"}}}]}  # fmt: skip
    fake.put(stuck)
    with gpu_sharing.ReservationAnswers(fake, interval=0.005) as answers:
        eventually(lambda: Observation(bool(answers.answered), "answered"), what="answered", timeout=5, interval=0.005)
    note = answers.describe()
    assert "The reservation pods' image could not be pulled: ubuntu (ErrImagePull)" in note
    assert "the verdict does not depend on them" in note
    assert gpu_sharing.unpulled_images([reservation_pod("fine", "w1")]) == set()


def test_an_api_error_is_remembered_and_retried(fake: FakeKube) -> None:
    fake.fail("list", 500, kind="Pod", times=1, message="etcd is busy")
    fake.put(reservation_pod("late", "w1"))
    with gpu_sharing.ReservationAnswers(fake, interval=0.005) as answers:
        eventually(
            lambda: Observation(bool(answers.answered), "answered"), what="answered after the error", timeout=5,
            interval=0.005,
        )  # fmt: skip
    assert "etcd is busy" in (answers.last_error or "")


# -------------------------------------------------------------------------------------------------- the setting
def test_sharing_is_read_from_kai_config_and_every_missing_piece_names_its_fix() -> None:
    on = sharing_support([config(gpuSharing=True)], [], ["nvidia"], ActivePlacement("binpack", "shard default"))
    assert (on.enabled, on.runtime_class, on.runtime_class_exists, on.gpu_placement) == (
        True,
        "nvidia",
        True,
        "binpack",
    )
    assert on.unavailable() is None and on.unshared_devices() is None
    off = sharing_support([config()], [], ["nvidia"], BINPACK)
    assert off.unavailable() == (
        "GPU sharing is off on this cluster (Config kai-config spec.admission.gpuSharing = false): install KAI with "
        f"--kai-set {GPU_SHARING_SETTING} (on kind, or with --install always)"
    )
    missing = sharing_support([config(gpuSharing=True)], [], [], ActivePlacement(None, "no SchedulingShard served"))
    assert "RuntimeClass nvidia, which KAI's admission sets on every fractional pod, does not exist" in (
        missing.unavailable() or ""
    )
    assert "GPU placement strategy is not readable (no SchedulingShard served)" in (missing.unshared_devices() or "")
    spread = sharing_support([config(gpuSharing=True)], [], None, ActivePlacement("spread", "shard default = spread"))
    assert spread.unavailable() is None  # RuntimeClasses not readable: the pods will tell
    assert "placement strategy is spread" in (spread.unshared_devices() or "")
    assert "GPU sharing on" in on.describe() and "GPU placement binpack" in on.describe()


def test_without_kai_config_the_admission_deployments_arguments_decide() -> None:
    admission = deployment("admission", "ghcr.io/kai-scheduler/kai-scheduler/admission:v0.17.0", available=True)
    args = admission["spec"]["template"]["spec"]["containers"][0]
    args["args"] = ["--gpu-sharing-enabled=true", "--gpu-fraction-runtime-class-name", "fake-nvidia"]
    support = sharing_support(None, [admission], ["fake-nvidia"], BINPACK)
    assert (support.enabled, support.runtime_class, support.runtime_class_exists) == (True, "fake-nvidia", True)
    assert "Deployment kai-scheduler/admission args: --gpu-sharing-enabled =true" in support.evidence
    args["args"] = []
    assert sharing_support([], [admission], [], BINPACK).enabled is False
    unknown = sharing_support(None, [], None, BINPACK)
    assert unknown.enabled is None
    assert (unknown.unavailable() or "").startswith("cannot tell whether GPU sharing is on (no kai-config and no ")


def test_read_from_a_cluster_that_serves_neither_config_nor_shards(fake: FakeKube) -> None:
    fake.unserve(kinds.KAI_CONFIG)
    fake.unserve(kinds.SCHEDULING_SHARD)
    support = read_sharing_support(fake)
    assert support.enabled is None and support.gpu_placement is None and support.runtime_class_exists is False
    fake.serve(kinds.KAI_CONFIG)
    fake.put(config(gpuSharing=True))
    assert read_sharing_support(fake).enabled is True


def test_kai_set_turns_sharing_on_in_the_helm_install(fake: FakeKube, tmp_path: Path, monkeypatch) -> None:
    from tests.fakes.commands import tools_on_path

    tools_on_path(tmp_path / "bin", monkeypatch)
    settings = make_settings(tmp_path, sources=InstallSources(kai_set=(GPU_SHARING_SETTING,)))
    args = kai.overrides(install_context(settings, SimulatedStack(fake)))
    assert args == ["--set", "global.gpuSharing=true"]


def test_the_answers_run_only_for_the_suites_own_fake_gpus_with_sharing_on(fake: FakeKube) -> None:
    on = SharingSupport(True, "kai-config")
    closed = []

    class Client(FakeKube):
        def close(self) -> None:
            closed.append(True)

    for support, provider in ((on, "existing"), (SharingSupport(False, "kai-config"), "kind")):
        with answering_reservations(support, provider, lambda: pytest.fail("no client for that")) as answers:
            assert answers is None
    with answering_reservations(on, "kind", Client) as answers:
        assert isinstance(answers, gpu_sharing.ReservationAnswers)
    assert closed == [True]


def test_the_reservation_note_says_which_gpu_each_got_and_who_answers_the_others() -> None:
    assert describe_reservations([]).startswith("no reservation pod in kai-resource-reservation")
    answered = describe_reservations([reservation_pod("a", "w1", gpu="GPU-1")])
    assert answered == "reservation pods in kai-resource-reservation: a on w1 (?): GPU GPU-1"
    waiting = describe_reservations([reservation_pod("b", "w1")])
    assert "b on w1 (?): no run.ai/reserve_for_gpu_index yet; the binder waits 40 s" in waiting
