"""The behaviour probe: a workload KAI groups, binds and runs, whose evicted pod must end Failed. It passes on a
working stack whatever its Deployments, and each stage that does not happen fails naming the component that owns
it, what that component said, and the fix; whatever the outcome, what the probe made is removed."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kai_conformance.clusters.install.behaviour import (
    COUNTED_FAILED,
    ENDED_FAILED,
    JOB_NAME,
    NAMESPACE_PREFIX,
    QUEUE_LABEL,
    QUEUE_PREFIX,
    probe_objects,
    prove_scheduling,
)
from kai_conformance.clusters.install.suite import apply_suite_objects, remove_suite_objects
from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.clusters.suite_stack import KAI_SCHEDULER_NAME, PARENT_QUEUE, WORKLOAD_BACKOFF_LIMIT_PER_INDEX
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.ownership import MANAGED_BY, RUN_LABEL, SCOPE_LABEL, SUITE
from kai_conformance.fixtures.plugin.options import CATALOG
from kai_conformance.fixtures.removal import cancellation
from kai_conformance.fixtures.waits import TimeoutPolicy
from tests import crd_schemas
from tests.fakes.controllers import Faults, SimulatedControllers
from tests.fakes.installation import SimulatedStack
from tests.fakes.kube import FakeKube

pytestmark = pytest.mark.usefixtures("fast_polling")

IMAGE = "registry.k8s.io/pause:3.10"
RUN = "run-1"
TIMEOUTS = TimeoutPolicy(scale=0.01)
#: Every stage that never happens gives up after a few polls.
EXPIRING = TimeoutPolicy(scale=0.002)


def stack_with(fake: FakeKube, faults: Faults | None = None) -> SimulatedStack:
    """A cluster whose three components run as plain processes (no Deployment at all), plus the suite's objects."""
    stack = SimulatedStack(fake, faults=faults or Faults())
    stack.run_as_processes("kai", "jobset", "trainer")
    apply_suite_objects(fake, RUN, IMAGE, TIMEOUTS)
    return stack


def probe_left(fake: FakeKube) -> list[str]:
    namespaces = [n["metadata"]["name"] for n in fake.objects(kinds.NAMESPACE)]
    queues = [q["metadata"]["name"] for q in fake.objects(kinds.QUEUE)]
    return [n for n in namespaces if n.startswith(NAMESPACE_PREFIX)] + [q for q in queues if q.startswith(QUEUE_PREFIX)]


def failure_of(fake: FakeKube, timeouts: TimeoutPolicy = EXPIRING) -> str:
    with pytest.raises(errors.InfrastructureError) as caught:
        prove_scheduling(fake, RUN, IMAGE, timeouts, suffix="abc123")
    assert probe_left(fake) == []  # a failed probe still removes what it made
    return str(caught.value)


def test_a_working_stack_without_any_deployment_passes_every_stage(fake: FakeKube) -> None:
    stack_with(fake)
    applied: list[dict] = []
    fake.reactors.append(lambda f, call: applied.append(call.detail) if call.operation == "apply" else None)
    result = prove_scheduling(fake, RUN, IMAGE, TIMEOUTS, suffix="abc123")
    assert fake.objects(kinds.DEPLOYMENT) == []
    assert {k: result[k] for k in ("namespace", "queue", "job", "node", "evicted_pod", "removed")} == {
        "namespace": "kc-stack-probe-abc123", "queue": "kai-conformance-probe-abc123", "job": JOB_NAME,
        "node": "kc-test-worker", "evicted_pod": result["evicted_pod"], "removed": "everything",
    }  # fmt: skip
    # whichever comes first: the Job's count, or the pod's own phase
    assert result["evicted_pod"] in (ENDED_FAILED, COUNTED_FAILED)
    assert result["podgroup"].startswith(f"pg-{JOB_NAME}-")
    assert list(result["seconds"]) == ["pod", "podgroup", "bound", "running", "evicted", "removed"]
    queue, namespace, job = [d for d in applied if d["kind"] in ("Queue", "Namespace", "Job")]
    assert queue["spec"]["parentQueue"] == PARENT_QUEUE  # a leaf: KAI schedules only into leaf queues
    template = job["spec"]["template"]
    assert (job["spec"]["completionMode"], job["spec"]["backoffLimitPerIndex"]) == (
        "Indexed",
        WORKLOAD_BACKOFF_LIMIT_PER_INDEX,
    )
    assert template["spec"]["schedulerName"] == KAI_SCHEDULER_NAME
    assert "nvidia.com/gpu" not in str(template["spec"]["containers"])
    assert (
        job["metadata"]["labels"][QUEUE_LABEL]
        == template["metadata"]["labels"][QUEUE_LABEL]
        == queue["metadata"]["name"]
    )
    for obj in (queue, namespace, job, template):  # the run's stack objects: never counted as a case's leftovers
        labels = obj["metadata"]["labels"]
        assert (labels[MANAGED_BY], labels[RUN_LABEL], labels[SCOPE_LABEL]) == (SUITE, RUN, "stack")
    assert [c.kind for c in fake.operations("delete")] == ["Pod", "Job", "Namespace", "Queue"]  # one eviction
    assert probe_left(fake) == []
    assert fake.objects(kinds.POD_GROUP) == [] and fake.objects(kinds.JOB) == []


def test_no_pod_names_the_job_controller(fake: FakeKube) -> None:
    apply_suite_objects(fake, RUN, IMAGE, TIMEOUTS)  # no controller runs on this cluster
    message = failure_of(fake)
    assert message.startswith(f"the Job controller (kube-controller-manager) created no pod for the probe Job "
                              f"kc-stack-probe-abc123/{JOB_NAME}")  # fmt: skip
    assert "fix: check kube-controller-manager, and any admission webhook that refuses pods" in message


def test_no_podgroup_names_the_podgrouper(fake: FakeKube) -> None:
    stack_with(fake, Faults(podgrouper_down=True))
    message = failure_of(fake)
    assert message.startswith("KAI podgrouper made no PodGroup for the probe pod kc-stack-probe-abc123/")
    assert "fix: check that KAI's podgrouper runs" in message
    assert "ClusterRole kai-podgrouper" in message


def test_unschedulable_names_the_scheduler_and_quotes_it(fake: FakeKube) -> None:
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    SimulatedControllers(fake, GpuLayout(())).install()  # KAI runs, but there is no node to place anything on
    apply_suite_objects(fake, RUN, IMAGE, TIMEOUTS)
    message = failure_of(fake)
    assert message.startswith("KAI scheduler did not schedule the probe pod kc-stack-probe-abc123/")
    assert (
        "and made no BindRequest; KAI said: pod Unschedulable: PodSchedulingErrors: Resources were found for 0 pods"
        in message
    )
    assert "PodGroup Unschedulable: PodSchedulingErrors" in message
    assert "fix: check that KAI's scheduler runs" in message
    assert "a node has cpu 10m, memory 16Mi free for the probe" in message


def test_a_bind_request_never_carried_out_names_the_binder(fake: FakeKube) -> None:
    stack_with(fake, Faults(binder_down=True))
    message = failure_of(fake)
    assert message.startswith("KAI binder did not bind the probe pod kc-stack-probe-abc123/")
    assert "the scheduler chose node kc-test-worker (BindRequest " in message
    assert "phase unset" in message  # nobody ever wrote a status: no binder picked it up
    assert "fix: check that KAI's binder runs" in message
    assert "may have stale watches after the API server was unreachable" in message
    assert message.endswith("restart it (`kubectl -n <KAI namespace> rollout restart deploy/binder`)")


def test_a_bound_pod_that_never_runs_names_the_kubelet_and_the_image(fake: FakeKube) -> None:
    stack_with(fake, Faults(image_does_not_start=True))
    message = failure_of(fake)
    assert message.startswith("the kubelet on node kc-test-worker did not run the probe pod")
    assert "(KAI bound it): container node waiting ErrImagePull: failed to pull and unpack image" in message
    assert f"fix: the workload image {IMAGE} must be pullable by the nodes or loaded on them" in message
    assert "--workload-image" in message


def test_an_evicted_pod_counted_as_succeeded_stops_the_run_with_the_fix(fake: FakeKube) -> None:
    stack_with(fake, Faults(evicted_pods_succeed=True))
    message = failure_of(fake, TIMEOUTS)
    assert message.startswith("an evicted workload pod ends Succeeded on this cluster: the probe pod")
    assert f"The workload image {IMAGE} exits 0 on SIGTERM" in message
    assert "fix: pass --workload-image with an image that has a POSIX sh (see docs/suites.md)" in message


def with_upstream_backoff(stack: SimulatedStack) -> SimulatedStack:
    """The Job controller's real back-off (10 s) before it replaces, and only then counts, a deleted pod of an
    index that may still be retried; the fake's clock does not reach it during the probe."""
    stack.workloads.pod_failure_backoff = 10.0
    return stack


def test_an_evicted_pod_that_ended_failed_passes_before_the_job_counts_it(fake: FakeKube) -> None:
    with_upstream_backoff(stack_with(fake))
    result = prove_scheduling(fake, RUN, IMAGE, EXPIRING, suffix="abc123")  # would time out waiting for a count
    assert result["evicted_pod"] == ENDED_FAILED


def test_a_deleted_pod_the_kubelet_never_ends_names_the_kubelet(fake: FakeKube, monkeypatch) -> None:
    from tests.fakes.kubelet import Kubelet

    stack_with(fake)
    monkeypatch.setattr(Kubelet, "_kill", lambda self, pod: False)
    message = failure_of(fake)
    assert message.startswith("the kubelet on node kc-test-worker did not end the deleted probe pod")
    assert "container node running" in message and "the Job: active=" in message
    assert f"the workload image {IMAGE} must stop on SIGTERM" in message


def test_a_pod_gone_without_a_count_names_the_job_controller(fake: FakeKube, monkeypatch) -> None:
    """A pod removed before it had a terminal phase (a force delete, a kwok delete stage) leaves the Job's count as
    the only evidence: the Job controller that never counts it is the link named."""
    from tests.fakes.kubelet import Kubelet

    stack_with(fake)

    def removed_at_once(self, pod) -> bool:
        self.fake._remove(kinds.POD, pod["metadata"]["namespace"], pod["metadata"]["name"])
        return True

    monkeypatch.setattr(Kubelet, "_kill", removed_at_once)  # past the Job's tracking finalizer: it never counts it
    message = failure_of(fake)
    assert message.startswith("the Job controller (kube-controller-manager) did not count the deleted probe pod")
    assert "the pod is gone, the Job says active=1, failed=0, succeeded=0" in message  # its replacement


def test_a_container_that_exits_at_once_fails_without_waiting(fake: FakeKube) -> None:
    stack_with(fake)

    def exit_at_once(f: FakeKube, call) -> None:
        for pod in f.objects(kinds.POD):
            if pod["spec"].get("nodeName") and pod["status"].get("phase") == "Running":
                pod["status"] = {"phase": "Succeeded", "containerStatuses": [
                    {"name": "node", "state": {"terminated": {"reason": "Completed", "exitCode": 0}}}]}  # fmt: skip
                f.put(pod)

    fake.reactors.append(exit_at_once)
    message = failure_of(fake, TimeoutPolicy(scale=10))  # would wait minutes if it waited
    assert "ended Succeeded at once (container node terminated Completed, exit code 0)" in message
    assert "must run until it is stopped" in message


def test_what_cannot_be_removed_is_reported_not_raised(fake: FakeKube) -> None:
    stack_with(fake)
    fake.fail("delete", 403, kind="Namespace", message="namespaces is forbidden")
    result = prove_scheduling(fake, RUN, IMAGE, EXPIRING, suffix="abc123")
    assert result["removed"].startswith("not everything: delete Namespace kc-stack-probe-abc123 → 403")
    assert probe_left(fake) == ["kc-stack-probe-abc123"]
    assert remove_suite_objects(fake, RUN, TIMEOUTS) == []  # teardown of an existing cluster takes what was left
    assert probe_left(fake) == []


def test_an_interrupt_while_the_namespace_goes_still_removes_the_queue(fake: FakeKube) -> None:
    """SIGTERM reached a stuck probe while it waited for its namespace to go: the namespace went later by itself,
    but the queue was never asked for and stayed on the cluster (seen on real kind). Every removal is asked for
    before the interrupt goes on."""
    stack_with(fake)
    interrupt = threading.Event()
    namespace = NAMESPACE_PREFIX + "abc123"

    def interrupted_once_the_namespace_goes(f: FakeKube, call) -> None:
        if (call.operation, call.kind, call.name) == ("delete", "Namespace", namespace):
            interrupt.set()  # the main thread's SIGTERM: this probe's next look, at its namespace, is interrupted

    fake.reactors.append(interrupted_once_the_namespace_goes)
    cancellation.cancel_on(interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            prove_scheduling(fake, RUN, IMAGE, TIMEOUTS, suffix="abc123")
    finally:
        cancellation.cancel_on()
    assert fake.find(kinds.QUEUE, QUEUE_PREFIX + "abc123") is None


def test_the_probe_objects_pass_the_upstream_schemas_of_every_combination(schema_root: Path) -> None:
    objects = probe_objects("kc-stack-probe-abc123", "kai-conformance-probe-abc123", IMAGE, RUN)
    for combination in CATALOG.combinations:
        schemas = crd_schemas.schemas_for(combination, schema_root)
        for obj in objects:
            assert crd_schemas.metadata_problems(obj) + crd_schemas.core_problems(obj) == []
            assert not schemas.covers(obj) or schemas.problems(obj) == [], (combination.name, obj["kind"])
        assert schemas.covers(objects[0])  # the queue is checked against KAI's Queue schema
