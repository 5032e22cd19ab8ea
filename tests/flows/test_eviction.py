"""Evictions end the way a real kubelet ends them.

KAI evicts by deleting pods. On a real node the container gets SIGTERM; the phase of the deleted pod follows its
exit codes (all 0 → ``Succeeded``), and the Job controller counts a ``Succeeded`` pod as a completed index that it
never runs again. With the simulated kubelet and Job controller (tests/fakes/kubelet.py, job_controller.py) these
self-tests show that the old workload (``pause``, which exits 0 on SIGTERM) fails the eviction case with a message
that says why, and that the suite's workload (clusters/suite_stack.py ``WORKLOAD_COMMAND``) passes it; then the
kubelet's and the Job controller's rules one by one.

Reclaim across queues (tests/fakes/kai/fairness.py) evicts through the same ``_evict``, so its victims end the
same way, through the same kubelet and Job controller.
"""

from __future__ import annotations

import datetime as dt

import pytest

from kai_conformance.clusters.suite_stack import EVICTED_EXIT_CODE, WORKLOAD_COMMAND, pod_spec
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.waits import ConditionNotMet
from kai_conformance.suites import test_preemption
from kai_conformance.suites.support.observe import visibility
from kai_conformance.suites.support.snapshot import Snapshot, is_terminating
from tests.fakes.controllers import SimulatedControllers
from tests.fakes.job_controller import INDEX_FAILURE_COUNT, format_indexes, parse_indexes
from tests.fakes.kube import FakeKube
from tests.fakes.kubelet import SIGKILL_EXIT_CODE, exit_code_on_termination, phase_of
from tests.fakes.simulation import JOB_TRACKING_FINALIZER
from tests.flows import COMBINATION, IMAGE, LAYOUT, NAMESPACE, Harness

PAUSE = "registry.k8s.io/pause:3.10"
VICTIM_JOB = "victim-node-0"


def with_workload(h: Harness, image: str, command: list[str] | None) -> Harness:
    """Replace the suite runtime's container: another image, and its own entrypoint when ``command`` is None."""
    for runtime in h.fake.objects(kinds.CLUSTER_TRAINING_RUNTIME):
        for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
            for container in rjob["template"]["spec"]["template"]["spec"]["containers"]:
                container["image"] = image
                container.pop("command", None)
                if command is not None:
                    container["command"] = command
        h.fake.put(runtime)
    return h


def preempt(h: Harness) -> None:
    case = test_preemption.PREEMPTING[0]
    test_preemption.test_a_higher_priority_newcomer_evicts_the_whole_victim_gang(case, **h.args())


def victim_job(h: Harness) -> dict:
    return h.fake.get(kinds.JOB, VICTIM_JOB, NAMESPACE)


# --------------------------------------------------------------------------------------------- the eviction case
def test_with_pause_the_evicted_victim_completes_and_the_case_says_why(flow) -> None:
    h = with_workload(flow(), PAUSE, None)
    with pytest.raises(ConditionNotMet) as failure:
        preempt(h)
    message = str(failure.value)
    assert "victim's Jobs recreated its 12 pods, pending: not reached" in message
    assert (
        "0 of 12 pods exist; Job victim-node-0 is Complete (succeeded 12, failed 0, completedIndexes 0-11)" in message
    )
    assert "an evicted pod that ends Succeeded (its container exits 0 on SIGTERM, as pause does)" in message
    jobset = h.fake.get(kinds.JOB_SET, "victim", NAMESPACE)
    trainjob = h.fake.get(kinds.TRAIN_JOB, "victim", NAMESPACE)
    assert [c["type"] for c in jobset["status"]["conditions"]] == ["Completed"]
    assert [c["type"] for c in trainjob["status"]["conditions"]] == ["Complete"]


@pytest.mark.parametrize(
    ("image", "command", "exit_code"),
    [(IMAGE, WORKLOAD_COMMAND, EVICTED_EXIT_CODE), (IMAGE, ["sh", "-c", "sleep 3600"], SIGKILL_EXIT_CODE)],
    ids=["suite-workload-traps-sigterm", "shell-without-trap-is-sigkilled"],
)
def test_a_workload_that_ends_failed_returns_to_pending(flow, image: str, command: list[str], exit_code: int) -> None:
    h = with_workload(flow(), image, command)
    ended = watch_ended_pods(h.fake)
    preempt(h)
    assert h.verdicts()["eviction-event"]
    status = victim_job(h)["status"]
    assert (status["succeeded"], status.get("failed"), status["completedIndexes"]) == (0, 12, "")
    assert "conditions" not in status
    replacements = h.fake.objects(kinds.POD, NAMESPACE)
    waiting = [p for p in replacements if p["metadata"]["labels"].get("batch.kubernetes.io/job-name") == VICTIM_JOB]
    assert len(waiting) == 12
    assert {p["metadata"]["annotations"][INDEX_FAILURE_COUNT] for p in waiting} == {"1"}
    assert {p["spec"].get("nodeName") for p in waiting} == {None}
    assert len(ended) == 12, "every evicted pod was seen ended"
    assert {(p["status"]["phase"], code(p)) for p in ended.values()} == {("Failed", exit_code)}


def watch_ended_pods(fake: FakeKube) -> dict[str, dict]:
    """Deleted pods as the kubelet ended them (they are gone once counted), by uid."""
    ended: dict[str, dict] = {}
    store = fake.write  # what the simulated controllers write with

    def write(obj: dict) -> None:
        if obj["kind"] == "Pod" and is_terminating(obj) and obj["status"].get("phase") in ("Succeeded", "Failed"):
            ended[obj["metadata"]["uid"]] = obj
        store(obj)

    fake.write = write  # type: ignore[method-assign]
    return ended


def code(pod: dict) -> int:
    (status,) = pod["status"]["containerStatuses"]
    return status["state"]["terminated"]["exitCode"]


# --------------------------------------------------------------------------------------------------- the kubelet
@pytest.mark.parametrize(
    ("container", "exit_code"),
    [
        ({"image": IMAGE, "command": WORKLOAD_COMMAND}, EVICTED_EXIT_CODE),
        ({"image": PAUSE}, 0),
        ({"image": "registry.k8s.io/pause@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a"}, 0),
        ({"image": PAUSE, "command": ["/pause"]}, SIGKILL_EXIT_CODE),
        ({"image": IMAGE}, SIGKILL_EXIT_CODE),
        ({"image": IMAGE, "command": ["sh", "-c", "sleep 3600"]}, SIGKILL_EXIT_CODE),
    ],
    ids=["suite-workload", "pause", "pause-by-digest", "pause-with-a-command", "busybox-entrypoint", "shell-no-trap"],
)
def test_exit_code_follows_what_the_container_runs(container: dict, exit_code: int) -> None:
    assert exit_code_on_termination(container) == exit_code


def test_phase_of_a_deleted_pod_follows_its_exit_codes() -> None:
    assert phase_of([0]) == "Succeeded"
    assert phase_of([0, 0]) == "Succeeded"
    assert phase_of([EVICTED_EXIT_CODE]) == "Failed"
    assert phase_of([0, SIGKILL_EXIT_CODE]) == "Failed"


class Clock:
    def __init__(self) -> None:
        self.now = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.timezone.utc)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


def cluster(backoff: float = 0.0) -> tuple[FakeKube, SimulatedControllers, Clock]:
    clock = Clock()
    fake = FakeKube(clock=clock)
    sim = SimulatedControllers(fake, LAYOUT, COMBINATION.kai.version, pod_failure_backoff=backoff)
    return fake, sim, clock


def settle(sim: SimulatedControllers) -> None:
    for _ in range(10):
        if not any([sim.jobs(), sim.kubelet()]):
            return


def bare_pod(name: str, *, node: str | None, finalizers: list[str] | None = None, grace: int = 0, **container) -> dict:
    spec = pod_spec(IMAGE, scheduler_name=None)
    spec["terminationGracePeriodSeconds"] = grace
    spec["containers"][0].update(container)
    if node:
        spec["nodeName"] = node
    meta = {"name": name, "namespace": "ns", **({"finalizers": finalizers} if finalizers else {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Pending"}}


def test_the_kubelet_runs_a_bound_pod_and_ends_it_by_exit_code_once_nothing_holds_it() -> None:
    fake, sim, _ = cluster()
    fake.put(bare_pod("p", node="worker", finalizers=["example.com/hold"]))
    fake.put(bare_pod("unbound", node=None))
    sim.kubelet()
    running = fake.get(kinds.POD, "p", "ns")
    assert running["status"]["phase"] == "Running"
    assert running["status"]["containerStatuses"][0]["state"]["running"]["startedAt"] == "2026-11-23T12:00:00Z"
    assert fake.get(kinds.POD, "unbound", "ns")["status"]["phase"] == "Pending", "no node, no kubelet"

    sim._api_delete(running)
    sim.kubelet()
    ended = fake.get(kinds.POD, "p", "ns")
    assert ended["status"]["phase"] == "Failed"
    assert ended["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == EVICTED_EXIT_CODE
    assert ended["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] == "Error"
    ended["metadata"]["finalizers"] = []
    fake.put(ended)
    sim.kubelet()
    assert fake.find(kinds.POD, "p", "ns") is None, "the kubelet's final delete once no finalizer holds it"


def test_deleting_a_pod_follows_the_api_server() -> None:
    fake, sim, _ = cluster()
    fake.put(bare_pod("unbound", node=None, finalizers=None, grace=30))
    fake.put(bare_pod("graceful", node="worker", grace=30, image=PAUSE, command=None))
    fake.put(bare_pod("held", node="worker", finalizers=[JOB_TRACKING_FINALIZER]))
    fake.put(bare_pod("free", node="worker"))
    for name in ("unbound", "graceful", "held", "free"):
        sim._api_delete(fake.get(kinds.POD, name, "ns"))
    assert fake.find(kinds.POD, "unbound", "ns") is None, "no node: grace 0, gone at once"
    assert fake.find(kinds.POD, "free", "ns") is None, "grace 0 and no finalizer: gone at once"
    graceful = fake.get(kinds.POD, "graceful", "ns")
    assert graceful["metadata"]["deletionGracePeriodSeconds"] == 30
    held = fake.get(kinds.POD, "held", "ns")
    assert held["metadata"]["deletionGracePeriodSeconds"] == 0
    sim.kubelet()
    assert fake.find(kinds.POD, "graceful", "ns") is None, "pause ended Succeeded, then the kubelet removed it"
    assert fake.get(kinds.POD, "held", "ns")["status"]["phase"] == "Failed"
    sim._drop_finalizer(fake.get(kinds.POD, "held", "ns"), JOB_TRACKING_FINALIZER)
    assert fake.find(kinds.POD, "held", "ns") is None, "grace 0: gone with its last finalizer"


# -------------------------------------------------------------------------------------------- the Job controller
def indexed_job(completions: int = 3, limit: int = 2, *, image: str = IMAGE, command: list[str] | None = None) -> dict:
    spec = pod_spec(image, scheduler_name=None, restart_policy="Never")
    spec["containers"][0].pop("command")
    if command is not None:
        spec["containers"][0]["command"] = command
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ns"},
            "spec": {"completionMode": "Indexed", "completions": completions, "parallelism": completions,
                     "backoffLimitPerIndex": limit, "template": {"spec": spec}}}  # fmt: skip


def pods_by_index(fake: FakeKube) -> dict[int, list[dict]]:
    found: dict[int, list[dict]] = {}
    for pod in fake.objects(kinds.POD, "ns"):
        found.setdefault(int(pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]), []).append(pod)
    return found


def bind_all(fake: FakeKube) -> None:
    for pod in fake.objects(kinds.POD, "ns"):
        if not pod["spec"].get("nodeName"):
            pod["spec"]["nodeName"] = "worker"
            fake.put(pod)


def evict(fake: FakeKube, sim: SimulatedControllers, index: int) -> None:
    (pod,) = [p for p in pods_by_index(fake)[index] if not is_terminating(p)]
    sim._api_delete(pod)


def test_a_job_makes_one_tracked_pod_per_index() -> None:
    fake, sim, _ = cluster()
    fake.put(indexed_job())
    settle(sim)
    pods = pods_by_index(fake)
    assert sorted(pods) == [0, 1, 2]
    assert all(p["metadata"]["finalizers"] == [JOB_TRACKING_FINALIZER] for (p,) in pods.values())
    assert {p["metadata"]["annotations"][INDEX_FAILURE_COUNT] for (p,) in pods.values()} == {"0"}


def test_a_succeeded_index_is_never_run_again() -> None:
    fake, sim, _ = cluster()
    fake.put(indexed_job(image=PAUSE))  # pause: exits 0 on SIGTERM
    settle(sim)
    bind_all(fake)
    settle(sim)
    evict(fake, sim, 1)
    settle(sim)
    status = fake.get(kinds.JOB, "j", "ns")["status"]
    assert (status["succeeded"], status.get("failed", 0), status["completedIndexes"]) == (1, 0, "1")
    assert sorted(pods_by_index(fake)) == [0, 2], "index 1 completed: no replacement, the ended pod is gone"
    for index in (0, 2):
        evict(fake, sim, index)
    settle(sim)
    job = fake.get(kinds.JOB, "j", "ns")
    assert job["status"]["completedIndexes"] == "0-2"
    assert [c["type"] for c in job["status"]["conditions"]] == ["Complete"]
    assert fake.objects(kinds.POD, "ns") == []


def test_a_failed_index_is_replaced_after_its_backoff_and_fails_past_its_limit() -> None:
    fake, sim, clock = cluster(backoff=10.0)
    fake.put(indexed_job(limit=1, command=WORKLOAD_COMMAND))
    settle(sim)
    bind_all(fake)
    settle(sim)
    evict(fake, sim, 0)
    settle(sim)
    (old,) = pods_by_index(fake)[0]
    assert old["status"]["phase"] == "Failed"
    assert old["metadata"]["finalizers"] == [JOB_TRACKING_FINALIZER], "kept for its replacement's failure count"
    clock.advance(9)
    settle(sim)
    assert len(pods_by_index(fake)[0]) == 1, "10 s back-off after a first failure"
    clock.advance(1)
    settle(sim)
    (replacement,) = pods_by_index(fake)[0]
    assert replacement["metadata"]["uid"] != old["metadata"]["uid"]
    assert replacement["metadata"]["annotations"][INDEX_FAILURE_COUNT] == "1"
    assert replacement["status"]["phase"] == "Pending"
    assert fake.get(kinds.JOB, "j", "ns")["status"]["failed"] == 1

    bind_all(fake)
    settle(sim)
    evict(fake, sim, 0)
    clock.advance(60)
    settle(sim)
    job = fake.get(kinds.JOB, "j", "ns")
    assert job["status"]["failedIndexes"] == "0", "a second failure is past backoffLimitPerIndex 1"
    assert job["status"]["failed"] == 2
    assert sorted(pods_by_index(fake)) == [1, 2], "a failed index is not replaced"


def test_the_backoff_doubles_per_failure_of_the_index() -> None:
    fake, sim, clock = cluster(backoff=10.0)
    fake.put(indexed_job(completions=1, limit=5, command=WORKLOAD_COMMAND))
    waits = []
    settle(sim)
    for _ in range(3):
        bind_all(fake)
        settle(sim)
        evict(fake, sim, 0)
        settle(sim)
        for waited in range(0, 120, 5):
            if any(p["status"]["phase"] == "Pending" for p in pods_by_index(fake)[0]):
                waits.append(waited)
                break
            clock.advance(5)
            settle(sim)
    assert waits == [10, 20, 40]


def test_index_sets_print_as_the_job_status_does() -> None:
    assert format_indexes({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"
    assert format_indexes(set()) == ""
    assert parse_indexes("0-2,5,7-8") == {0, 1, 2, 5, 7, 8}
    assert parse_indexes(None) == set()


def test_visibility_names_ended_pods_and_finished_jobs_and_stays_quiet_otherwise() -> None:
    pod = bare_pod("victim-node-0-0", node="worker")
    pod["status"] = {"phase": "Succeeded"}
    ended = visibility(Snapshot(taken_at=0.0, pods=(pod,)), 2)
    assert not ended.ok
    assert ended.explanation.startswith("0 of 2 pods exist; 1 pod(s) ended Succeeded; an evicted pod that ends")
    job = {"metadata": {"name": "victim-node-0"}, "status": {"failed": 2, "failedIndexes": "0-1", "conditions": [
        {"type": "Failed", "status": "True"}]}}  # fmt: skip
    failed = visibility(Snapshot(taken_at=0.0, jobs=(job,)), 2)
    assert failed.explanation == (
        "0 of 2 pods exist; Job victim-node-0 is Failed (succeeded 0, failed 2, completedIndexes -)"
    )
    assert "Trainer makes the JobSet" in visibility(Snapshot(taken_at=0.0), 2).explanation
