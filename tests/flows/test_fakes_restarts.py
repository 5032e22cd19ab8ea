"""Restartable simulated components (tests/fakes/restarts.py, restart_faults.py): every component runs as a Deployment
whose pod the chaos area deletes; the component is down until its replacement is Ready, then starts anew from the API;
the ``restart_*`` faults act only once their component has restarted.

Most cases drive the controllers per API call with the downtime measured on a clock of their own; the last one runs
the suite's own restart code (suites/support/chaos/faults.py) against controllers reconciling in the background.
"""

from __future__ import annotations

import pytest

from kai_conformance.clusters.layout import GpuLayout, GpuNode
from kai_conformance.clusters.suite_stack import queue, stack_manifests, unlimited_resources
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.fixtures.workspace import prepare
from kai_conformance.suites.support import expectations as ex
from kai_conformance.suites.support.chaos import faults as chaos_faults
from kai_conformance.suites.support.components import Component, deployments_of, health
from kai_conformance.suites.support.snapshot import GPU_RESOURCE, gpus_of, is_bound, uid_of
from kai_conformance.suites.support.workloads import train_job
from tests.fakes.controllers import Faults, SimulatedControllers
from tests.fakes.kube import FakeKube
from tests.flows import COMBINATION, EXPECT, IMAGE, RUN

NS = "kc-restarts"
QUEUE = "q-restarts"
LAYOUT = GpuLayout((GpuNode("node-a", 4), GpuNode("node-b", 4)))
DOWNTIME = 1.0
#: image name → (namespace, Deployment) of every restartable component.
DEPLOYMENTS = {
    "scheduler": ("kai-scheduler", "kai-scheduler-default"),
    "binder": ("kai-scheduler", "binder"),
    "podgrouper": ("kai-scheduler", "pod-grouper"),
    "queuecontroller": ("kai-scheduler", "queue-controller"),
    "podgroupcontroller": ("kai-scheduler", "podgroup-controller"),
    "jobset": ("jobset-system", "jobset-controller-manager"),
    "trainer-controller-manager": ("kubeflow-system", "kubeflow-trainer-controller-manager"),
}


class Cluster:
    """Simulated controllers with restartable components, reconciling on every API call; the downtime passes on
    :attr:`now` (seconds), moved by :meth:`back`."""

    def __init__(self, faults: Faults | None = None, *, quota: int = -1, limit: int = -1) -> None:
        self.now = 0.0
        self.fake = FakeKube()
        for obj in stack_manifests(IMAGE):
            self.fake.apply(prepare(obj, RUN, "", ""))
        self.fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        resources = unlimited_resources()
        resources["gpu"] = {"quota": quota, "limit": limit, "overQuotaWeight": 1}
        self.fake.put(queue(QUEUE, resources=resources))
        self.sim = SimulatedControllers(self.fake, LAYOUT, COMBINATION.kai.version, faults or Faults())
        self.sim.restartable(DOWNTIME).install()
        self.sim.monotonic = lambda: self.now

    def settle(self) -> None:
        self.fake.list(kinds.POD, NS)  # an API call: the controllers reconcile before it

    def component_pod(self, component: str) -> dict:
        namespace, name = DEPLOYMENTS[component]
        (pod,) = self.fake.list(kinds.POD, namespace, labels={"app": name})
        return pod

    def deployment(self, component: str) -> dict:
        namespace, name = DEPLOYMENTS[component]
        return self.fake.get(kinds.DEPLOYMENT, name, namespace)

    def take_down(self, component: str) -> str:
        """Delete the component's pod as the suite does; returns the deleted pod's uid."""
        pod = self.component_pod(component)
        self.fake.delete(kinds.POD, pod["metadata"]["name"], pod["metadata"]["namespace"], allow_foreign=True)
        self.settle()
        return uid_of(pod)

    def back(self) -> None:
        self.now += DOWNTIME
        self.settle()

    def restart(self, component: str) -> None:
        self.take_down(component)
        self.back()

    def submit(self, name: str, pods: int, *, priority: str | None = None) -> None:
        tj = train_job(name, num_nodes=pods, gpus=1, queue=QUEUE, priority_class=priority,
                       annotations=EXPECT.kai.gang_annotations(pods) or None)  # fmt: skip
        tj["metadata"]["namespace"] = NS
        self.fake.put(tj)
        self.settle()

    def delete(self, name: str) -> None:
        self.fake.delete(kinds.TRAIN_JOB, name, NS, allow_foreign=True)
        self.settle()

    def bound(self, name: str) -> int:
        return sum(1 for p in self.pods(name) if is_bound(p) and p["status"].get("phase") == "Running")

    def pods(self, name: str) -> list[dict]:
        return [p for p in self.fake.list(kinds.POD, NS) if p["metadata"]["labels"].get(ex.JOBSET_NAME_LABEL) == name]

    def podgroups(self) -> list[dict]:
        return self.fake.list(kinds.POD_GROUP, NS)

    def evictions(self) -> list[dict]:
        return [e for e in self.fake.list(kinds.EVENT, NS) if e["reason"] == ex.EVICT_EVENT_REASON]


def ready(pod: dict) -> bool:
    conditions = pod["status"].get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def available(deployment: dict) -> bool:
    return any(c["type"] == "Available" and c["status"] == "True" for c in deployment["status"]["conditions"])


# ------------------------------------------------------------------------------------------------ the components
def test_every_component_runs_as_a_deployment_with_a_ready_pod_on_no_node() -> None:
    cluster = Cluster()
    deployments = cluster.fake.list(kinds.DEPLOYMENT)
    for image, (namespace, name) in DEPLOYMENTS.items():
        (found,) = deployments_of(Component(image, (image,), "runs"), deployments)
        assert (found["metadata"]["namespace"], found["metadata"]["name"]) == (namespace, name)
        assert found["spec"]["selector"]["matchLabels"] == {"app": name}
        assert health(Component(image, (image,), "runs"), deployments).up
        pod = cluster.component_pod(image)
        assert ready(pod) and pod["status"]["phase"] == "Running"
        assert "nodeName" not in pod["spec"] and gpus_of(pod) == 0
    images = {c["image"] for d in deployments for c in d["spec"]["template"]["spec"]["containers"]}
    assert {f"ghcr.io/kai-scheduler/kai-scheduler/binder:{COMBINATION.kai.version}",
            "registry.k8s.io/jobset/jobset:v0.12.0",
            "ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.3.0"} <= images  # fmt: skip
    cluster.submit("a", 2)
    assert cluster.bound("a") == 2, "the component pods are not the simulated cluster's to place"


def test_without_restartable_the_controllers_run_no_component_pod() -> None:
    fake = FakeKube()
    SimulatedControllers(fake, LAYOUT, COMBINATION.kai.version).install()
    fake.list(kinds.POD)
    assert fake.objects(kinds.POD) == []


@pytest.mark.parametrize("component", list(DEPLOYMENTS))
def test_a_deleted_component_is_down_until_its_replacement_is_ready(component: str) -> None:
    cluster = Cluster()
    old = cluster.take_down(component)
    replacement = cluster.component_pod(component)
    deployment = cluster.deployment(component)
    assert not cluster.sim.component_up(component) and cluster.sim.restart_count(component) == 0
    assert uid_of(replacement) != old and not ready(replacement) and replacement["status"]["phase"] == "Pending"
    assert not available(deployment) and deployment["status"]["availableReplicas"] == 0
    cluster.now += DOWNTIME / 2
    cluster.settle()
    assert not cluster.sim.component_up(component) and not available(cluster.deployment(component))
    cluster.back()
    back = cluster.component_pod(component)
    assert uid_of(back) == uid_of(replacement) and ready(back) and back["status"]["phase"] == "Running"
    assert available(cluster.deployment(component)) and cluster.deployment(component)["status"]["availableReplicas"]
    assert cluster.sim.component_up(component) and cluster.sim.restart_count(component) == 1


def test_a_replacement_deleted_before_it_is_ready_starts_the_downtime_again() -> None:
    cluster = Cluster()
    cluster.take_down("binder")
    cluster.now += DOWNTIME * 0.8
    second = cluster.take_down("binder")
    cluster.now += DOWNTIME * 0.8
    cluster.settle()
    assert not cluster.sim.component_up("binder")
    cluster.back()
    assert cluster.sim.component_up("binder") and uid_of(cluster.component_pod("binder")) != second


def stage(cluster: Cluster) -> str:
    """How far workload ``a`` got along its chain."""
    if cluster.fake.find(kinds.JOB_SET, "a", NS) is None:
        return "no JobSet"
    if not cluster.fake.list(kinds.JOB, NS):
        return "no Job"
    if not cluster.podgroups():
        return "no PodGroup"
    requests = cluster.fake.list(kinds.BIND_REQUEST, NS)
    if not requests:
        return "no BindRequest"
    if cluster.bound("a") < 2:
        return f"bound {cluster.bound('a')}"
    (pg,) = cluster.podgroups()
    if GPU_RESOURCE not in ((pg.get("status") or {}).get("resourcesStatus") or {}).get("allocated", {}):
        return "PodGroup status not written"
    if GPU_RESOURCE not in (cluster.fake.get(kinds.QUEUE, QUEUE).get("status") or {}).get("allocated", {}):
        return "Queue status not written"
    return "done"


@pytest.mark.parametrize(
    ("component", "stops_at"),
    [("trainer-controller-manager", "no JobSet"), ("jobset", "no Job"), ("podgrouper", "no PodGroup"),
     ("scheduler", "no BindRequest"), ("binder", "bound 0"), ("podgroupcontroller", "PodGroup status not written"),
     ("queuecontroller", "Queue status not written")],
)  # fmt: skip
def test_a_component_that_is_down_does_nothing_and_catches_up_once_back(component: str, stops_at: str) -> None:
    cluster = Cluster()
    cluster.take_down(component)
    cluster.submit("a", 2)
    cluster.settle()
    assert stage(cluster) == stops_at
    cluster.back()
    assert stage(cluster) == "done"


@pytest.mark.parametrize(
    ("component", "kind", "webhook"),
    [("queuecontroller", "Queue", "queue-validation.kai.scheduler"),
     ("trainer-controller-manager", "TrainJob", "validator.trainjob.trainer.kubeflow.org")],
)  # fmt: skip
def test_a_webhook_a_down_component_serves_refuses_writes_until_it_is_back(component: str, kind: str,
                                                                           webhook: str) -> None:  # fmt: skip
    cluster = Cluster()
    obj = queue("q-down", resources=unlimited_resources()) if kind == "Queue" else train_job(
        "down", num_nodes=1, gpus=1, queue=QUEUE)  # fmt: skip
    obj = prepare(obj, RUN, "", NS if kind == "TrainJob" else "")
    cluster.take_down(component)
    with pytest.raises(errors.ServerError, match=f'failed calling webhook "{webhook}".*connection refused') as refused:
        cluster.fake.apply(obj)
    assert refused.value.transient, "the suite's waits retry it"
    cluster.back()
    assert cluster.fake.apply(obj)["kind"] == kind


def test_a_restarted_scheduler_rebuilds_its_state_from_the_api_and_only_its_own() -> None:
    cluster = Cluster()
    cluster.submit("a", 2)
    cluster.submit("b", 2)
    sim = cluster.sim
    by_creation = [uid_of(g) for g in sorted(cluster.podgroups(), key=lambda g: g["metadata"]["creationTimestamp"])]
    sim._seen = {"gone": 0, **{uid: i + 1 for i, uid in enumerate(reversed(by_creation))}}
    sim._stale_since["gone"] = 1.0
    sim._scheduled_before.clear()
    cluster.restart("binder")
    assert "gone" in sim._seen and sim._stale_since == {"gone": 1.0}, "the binder's restart leaves KAI's state"
    cluster.restart("scheduler")
    assert list(sim._seen) == by_creation and sim._stale_since == {}
    assert sim._scheduled_before == set(by_creation)


# ----------------------------------------------------------------------------------------------- restart faults
def test_after_the_schedulers_restart_it_binds_big_gangs_one_pod_short() -> None:
    cluster = Cluster(Faults(restart_breaks_gangs_of=2))
    cluster.submit("a", 2)
    cluster.restart("binder")
    cluster.submit("b", 2)
    assert (cluster.bound("a"), cluster.bound("b")) == (2, 2)
    cluster.restart("scheduler")
    cluster.submit("c", 2)
    cluster.submit("d", 1)
    cluster.settle()
    assert (cluster.bound("a"), cluster.bound("b"), cluster.bound("c"), cluster.bound("d")) == (2, 2, 1, 1)


def test_after_the_schedulers_restart_it_ignores_queue_limits() -> None:
    cluster = Cluster(Faults(restart_ignores_queue_limits=True), limit=2)
    cluster.submit("a", 2)
    cluster.submit("b", 1)
    cluster.restart("podgrouper")
    assert (cluster.bound("a"), cluster.bound("b")) == (2, 0)
    cluster.restart("scheduler")
    assert cluster.bound("b") == 1


def test_after_each_schedulers_restart_it_evicts_one_running_non_preemptible_gang() -> None:
    cluster = Cluster(Faults(restart_evicts_non_preemptible=True), quota=4)
    cluster.submit("a", 2, priority="build")
    cluster.submit("b", 2)
    cluster.restart("binder")
    assert (cluster.bound("a"), cluster.bound("b"), cluster.evictions()) == (2, 2, [])
    cluster.restart("scheduler")
    evicted = cluster.evictions()
    jobset = cluster.fake.get(kinds.JOB_SET, "a", NS)
    assert len(evicted) == 2 and {e["involvedObject"]["name"] for e in evicted} == {f"pg-a-{uid_of(jobset)}"}
    assert all("restarted scheduler" in e["message"] for e in evicted)
    assert cluster.bound("a") == 2, "the Job controller replaced the evicted pods, KAI placed them again"
    cluster.settle()
    assert len(cluster.evictions()) == 2, "one gang per restart"
    cluster.restart("scheduler")
    assert len(cluster.evictions()) == 4


def test_after_the_podgroupers_restart_it_makes_a_second_podgroup_per_gang() -> None:
    cluster = Cluster(Faults(restart_duplicates_podgroups=True))
    cluster.submit("a", 2)
    cluster.restart("scheduler")
    assert len(cluster.podgroups()) == 1
    cluster.restart("podgrouper")
    jobset = cluster.fake.get(kinds.JOB_SET, "a", NS)
    groups = cluster.podgroups()
    assert sorted(g["metadata"]["name"] for g in groups) == [f"pg-a-{uid_of(jobset)}", f"pg-a-{uid_of(jobset)}-r1"]
    assert all(r["uid"] == uid_of(jobset) for g in groups for r in g["metadata"]["ownerReferences"])
    cluster.submit("b", 1)
    assert len(cluster.podgroups()) == 3, "a gang grouped after the restart gets one"


def test_after_the_binders_restart_its_bindrequests_outlive_their_pods() -> None:
    cluster = Cluster(Faults(restart_leaks_bindrequests=True))
    cluster.submit("a", 2)
    cluster.restart("scheduler")
    cluster.delete("a")
    assert cluster.fake.list(kinds.BIND_REQUEST, NS) == []
    cluster.restart("binder")
    cluster.submit("b", 2)
    requests = cluster.fake.list(kinds.BIND_REQUEST, NS)
    assert cluster.bound("b") == 2 and len(requests) == 2
    assert all(not r["metadata"].get("ownerReferences") and r["status"]["phase"] == "Succeeded" for r in requests)
    cluster.delete("b")
    assert cluster.pods("b") == [] and len(cluster.fake.list(kinds.BIND_REQUEST, NS)) == 2


def test_after_the_schedulers_restart_it_never_places_again() -> None:
    cluster = Cluster(Faults(restart_stalls_scheduler=True))
    cluster.submit("a", 2)
    cluster.restart("binder")
    assert cluster.bound("a") == 2
    cluster.restart("scheduler")
    cluster.submit("b", 2)
    cluster.back()
    assert cluster.bound("b") == 0 and len(cluster.podgroups()) == 2 and cluster.sim.component_up("scheduler")


# ------------------------------------------------------------------------------------ the suite's restart code
def test_the_suites_restarter_restarts_every_component_in_the_background(fast_polling) -> None:
    fake = FakeKube()
    for obj in stack_manifests(IMAGE):
        fake.apply(prepare(obj, RUN, "", ""))
    sim = SimulatedControllers(fake, LAYOUT, COMBINATION.kai.version).restartable(0.02)
    stop = sim.run_in_background()
    try:
        restarter = chaos_faults.Restarter(fake, TimeoutPolicy(scale=0.01))
        assert set(restarter.available(tuple(chaos_faults.COMPONENTS))) == set(chaos_faults.COMPONENTS)
        for name, (image,) in chaos_faults.COMPONENTS.items():
            restart = restarter.restart(name)
            namespace, deployment = DEPLOYMENTS[image]
            assert restart.error == "" and restart.ready_at is not None, restart.describe()
            assert restart.replaced and restart.replaced[0].startswith(f"{namespace}/{deployment}-")
            assert sim.restart_count(image) == 1
    finally:
        stop()
    assert fake.objects(kinds.POD) == [], "stopping the controllers takes the component pods away"


def test_a_restart_command_wins_over_stand_in_deployments(tmp_path) -> None:
    """Controllers run as host processes keep stand-in Deployments for the stack check: the command restarts them,
    the stand-ins' pods are left alone."""
    fake = FakeKube()
    for obj in stack_manifests(IMAGE):
        fake.apply(prepare(obj, RUN, "", ""))
    log = tmp_path / "restarted"
    restarter = chaos_faults.Restarter(fake, TimeoutPolicy(scale=0.01), f"sh -c 'echo {{component}} >> {log}'")
    assert restarter.available(("scheduler",)) == {"scheduler": f"by command: sh -c 'echo {{component}} >> {log}'"}
    restart = restarter.restart("scheduler")
    assert restart.error == "" and restart.replaced == [] and restart.ready_at is not None
    assert log.read_text() == "scheduler\n"
    failing = chaos_faults.Restarter(fake, TimeoutPolicy(scale=0.01), "false").restart("binder")
    assert failing.ready_at is None and "exit status 1" in failing.error
