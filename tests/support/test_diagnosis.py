"""The chain diagnosis, provenance and component health on hand-made objects: every finding is shown on a chain
broken at that link (the flows in flows/test_diagnosis.py show the same end to end)."""

from __future__ import annotations

from typing import Any

import pytest

from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.waits import ConditionNotMet, ConditionViolated
from kai_conformance.suites.support import components as comp
from kai_conformance.suites.support import diagnosis as dg
from kai_conformance.suites.support.diagnosis.provenance import JOBSETS, TRAINJOBS, Access, provenance
from kai_conformance.suites.support.expectations import PODGROUPER_USER
from kai_conformance.suites.support.snapshot import Snapshot, parse_time
from tests import builders as b
from tests.fakes.kube import FakeKube

T0 = parse_time(b.T0) or 0.0
RBAC_OK = {r: Access(r) for r in (TRAINJOBS, JOBSETS)}


def chain(
    pods: int = 2, *, made: int | None = None, grouped: bool = True, **pod_kwargs: Any
) -> tuple[dict, dict, dict, list[dict], dict]:
    """TrainJob → JobSet → Job → ``made`` pods (pending) → PodGroup (``grouped``)."""
    tj = b.trainjob()
    js = b.jobset(tj)
    job = b.job(js)
    pg = b.podgroup(js)
    made_pods = [b.pod(f"gang-{i}", owner=job, **pod_kwargs) for i in range(pods if made is None else made)]
    if grouped:
        made_pods = [b.grouped(p, pg, None) for p in made_pods]
    return tj, js, job, made_pods, pg


def facts(*objs: dict, podgroups: tuple = (), events: tuple = (), **kwargs: Any) -> dg.Facts:
    by_kind: dict[str, list[dict]] = {}
    for obj in objs:
        by_kind.setdefault(obj["kind"], []).append(obj)
    snap = Snapshot(
        taken_at=T0,
        pods=tuple(by_kind.get("Pod", [])),
        podgroups=tuple(podgroups),
        events=tuple(events),
        trainjobs=tuple(by_kind.get("TrainJob", [])),
        jobsets=tuple(by_kind.get("JobSet", [])),
        jobs=tuple(by_kind.get("Job", [])),
    )
    kwargs.setdefault("access", RBAC_OK)
    return dg.Facts(snap, **kwargs)


def bind_request(pod: dict, node: str = "node-a", **status: Any) -> dict:
    name = pod["metadata"]["name"]
    return {"apiVersion": "scheduling.run.ai/v1alpha2", "kind": "BindRequest",
            "metadata": {"name": name, "namespace": b.NS}, "spec": {"podName": name, "selectedNode": node},
            "status": status}  # fmt: skip


# ------------------------------------------------------------------------------------------- chain links
def test_a_missing_jobset_names_the_trainer_and_is_down_when_its_deployment_is() -> None:
    tj = b.trainjob()
    tj["status"] = {"conditions": [{"type": "Created", "status": "False", "reason": "JobSetFailed", "message": "x"}]}
    trainer = b.deployment(
        "kubeflow-trainer-controller-manager",
        "ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.3.0",
        available=False,
        namespace="kubeflow-system",
    )
    found = dg.diagnose(facts(tj, deployments=(trainer,)), "gang", 2)
    assert found.down
    assert found.broken is not None and found.broken.component is comp.TRAINER
    assert "no JobSet for TrainJob gang; TrainJob gang conditions: Created=False (JobSetFailed: x)" in found.text()
    assert "Deployment kubeflow-system/kubeflow-trainer-controller-manager not Available" in found.text()
    assert not dg.diagnose(facts(tj, deployments=()), "gang", 2).down, "no Deployment found: no claim it is down"


def test_the_first_missing_link_is_named() -> None:
    assert "TrainJob gang does not exist" in dg.diagnose(facts(), "gang", 1).text()
    tj = b.trainjob()
    js = b.jobset(tj)
    js["spec"] = {"replicatedJobs": [{"name": "node"}, {"name": "launcher"}]}
    job = _labelled(b.job(js), **{dg.REPLICATED_JOB_LABEL: "node"})
    found = dg.diagnose(facts(tj, js, job), "gang", 2)
    assert found.broken is not None and found.broken.component is comp.JOBSET
    assert "no Job yet for replicatedJob(s) launcher" in found.text()
    js["spec"]["replicatedJobs"][1]["dependsOn"] = [{"name": "node", "status": "Ready"}]
    waits = dg.diagnose(facts(tj, js, job), "gang", 2)
    assert "1 Job(s) (launcher waits for dependsOn)" in waits.chain
    assert waits.broken is not None and "only 0 of 2 pods exist" in waits.broken.text
    job["spec"] = {"suspend": True}
    js["spec"] = {}
    suspended = dg.diagnose(facts(tj, js, job), "gang", 2)
    assert "only 0 of 2 pods exist: Jobs gang-node-0 are suspended" in suspended.text()


def test_missing_pods_name_the_job_controller_without_calling_it_down() -> None:
    tj, js, job, pods, pg = chain(2, made=1)
    found = dg.diagnose(facts(tj, js, job, *pods, podgroups=(pg,)), "gang", 2)
    assert not found.down
    assert found.chain[-1] == "1 of 2 pods"
    assert "Job controller (kube-controller-manager)" in found.text()
    assert "only 1 of 2 pods exist" in found.text()


def test_a_completing_gang_is_not_blamed_on_the_job_controller() -> None:
    """Seen on real kind: the pods that ended Succeeded are not live, and the chain said "only 2 of 12 pods exist",
    blaming the Job controller for a workload that was completing."""
    tj, js, job, pods, pg = chain(2)
    pods[1]["status"] = {"phase": "Succeeded"}
    found = dg.diagnose(facts(tj, js, job, *pods, podgroups=(pg,)), "gang", 2)
    assert found.chain[-1] == "1 of 2 pods (1 more ended Succeeded)"
    assert found.broken is not None and found.broken.component is None
    assert "1 of 2 pods ended Succeeded: the workload is completing" in found.text()
    assert "Job controller" not in found.text()


def test_no_podgroup_while_the_podgrouper_may_not_read_jobsets_is_infrastructure() -> None:
    tj, js, job, pods, _ = chain(2, grouped=False)
    per_job = b.podgroup(job, name="pg-gang-node-0")
    pods = [b.grouped(p, per_job, None) for p in pods]
    denied = {TRAINJOBS: Access(TRAINJOBS), JOBSETS: Access(JOBSETS, ("get", "watch"))}
    found = dg.diagnose(facts(tj, js, job, *pods, podgroups=(per_job,), access=denied), "gang", 2)
    assert found.down and found.broken is not None and found.broken.component is comp.PODGROUPER
    text = found.text()
    assert "no PodGroup owned by JobSet gang; the pods point at pg-gang-node-0, owned by Job gang-node-0" in text
    assert "the owner walk stopped below the JobSet" in text
    assert f"the podgrouper ({PODGROUPER_USER}) may not get, watch jobsets.jobset.x-k8s.io" in text
    assert "fix: grant the podgrouper's ClusterRole" in text


def test_no_podgroup_says_when_the_pods_ask_for_another_scheduler() -> None:
    tj, js, job, pods, _ = chain(1, grouped=False)
    pods[0]["spec"]["schedulerName"] = "default-scheduler"
    found = dg.diagnose(facts(tj, js, job, *pods), "gang", 1)
    assert not found.down
    assert "the pods ask for schedulerName default-scheduler" in found.text()


def test_no_podgroup_quotes_the_podgroupers_warning_and_a_running_podgrouper_is_not_down() -> None:
    tj, js, job, pods, _ = chain(1, grouped=False)
    warning = b.event(pods[0], "PodGrouperWarning", "failed to get owner: jobsets.jobset.x-k8s.io is forbidden")
    podgrouper = b.deployment("pod-grouper", "ghcr.io/kai-scheduler/kai-scheduler/podgrouper:v0.17.0", available=True)
    found = dg.diagnose(facts(tj, js, job, *pods, events=(warning,), deployments=(podgrouper,)), "gang", 1)
    assert not found.down
    text = found.text()
    assert "no pod carries pod-group-name: the podgrouper has not grouped them" in text
    assert "PodGrouperWarning: failed to get owner" in text
    assert "Deployment kai-scheduler/pod-grouper Available (1/1 available)" in text


def test_bind_requests_the_binder_left_alone_blame_the_binder() -> None:
    tj, js, job, pods, pg = chain(2)
    requests = (bind_request(pods[0], phase="Pending"), bind_request(pods[1]))
    found = dg.diagnose(facts(tj, js, job, *pods, podgroups=(pg,), bindrequests=requests), "gang", 2)
    assert found.down and found.broken is not None and found.broken.component is comp.BINDER
    assert "2 BindRequest(s) (1 Pending, 1 without a phase)" in found.text()
    assert "the scheduler chose node-a and nobody bound them" in found.text()


def test_a_failed_binding_quotes_the_binder_and_is_product_while_the_binder_runs() -> None:
    tj, js, job, pods, pg = chain(1)
    failed = bind_request(pods[0], phase="Failed", reason="node node-a not found", failedAttempts=3)
    binder = b.deployment("binder", "ghcr.io/kai-scheduler/kai-scheduler/binder:v0.17.0", available=True)
    found = dg.diagnose(
        facts(tj, js, job, *pods, podgroups=(pg,), bindrequests=(failed,), deployments=(binder,)), "gang", 1
    )
    assert not found.down
    assert "binding gang-0 failed after 3 attempt(s): node node-a not found" in found.text()


def test_a_scheduler_that_never_acted_is_down_only_when_its_deployment_says_so() -> None:
    tj, js, job, pods, pg = chain(2)
    objs = (tj, js, job, *pods)
    unknown = dg.diagnose(facts(*objs, podgroups=(pg,)), "gang", 2)
    assert not unknown.down
    assert "it has not acted on PodGroup pg-gang-" in unknown.text()
    assert "no Deployment runs an image named scheduler (health unknown)" in unknown.text()
    stopped = b.deployment(
        "kai-scheduler-default", "ghcr.io/kai-scheduler/kai-scheduler/scheduler:v0.17.0", available=True
    )
    stopped["spec"]["replicas"] = 0
    down = dg.diagnose(facts(*objs, podgroups=(pg,), deployments=(stopped,)), "gang", 2)
    assert down.down
    assert "Deployment kai-scheduler/kai-scheduler-default is scaled to 0 replicas" in down.text()


def test_the_schedulers_own_reasons_are_its_decision_not_a_broken_link() -> None:
    tj, js, job, pods, pg = chain(2, unschedulable="Resources were found for 0 pods")
    found = dg.diagnose(facts(tj, js, job, *pods, podgroups=(pg,)), "gang", 2)
    assert not found.down
    assert "KAI's decision: KAI scheduler" in found.text()
    assert "PodScheduled=False/Unschedulable: Resources were found for 0 pods" in found.text()
    tj, js, job, pods, pg = chain(2)
    not_ready = b.event(pg, "NotReady", "Job is not ready for scheduling. Waiting for 2 pods, currently 1 exist")
    waiting = dg.diagnose(facts(tj, js, job, *pods, podgroups=(pg,), events=(not_ready,)), "gang", 2)
    assert "KAI's decision: KAI scheduler" in waiting.text() and "Waiting for 2 pods" in waiting.text()


def test_a_whole_chain_has_no_broken_link() -> None:
    tj, js, job, pods, pg = chain(2, node="node-a")
    pg["spec"].update(queue="default-queue", priorityClassName="train")
    found = dg.diagnose(facts(tj, js, job, *pods, podgroups=(pg,)), "gang", 2)
    assert found.broken is None
    assert found.chain[-1] == "2 of 2 pods bound"
    assert "no broken link" in found.text()
    pg["spec"]["queue"] = "q"
    off = dg.diagnose(facts(tj, js, job, *pods, podgroups=(pg,)), "gang", 2).text()
    assert "every link is there, but the PodGroup does not carry what the chain asks for" in off
    assert "why: no object of the chain sets a queue, so KAI's default default-queue applies" in off


# ---------------------------------------------------------------------------------- product or infrastructure
def _down() -> dg.Diagnosis:
    return dg.Diagnosis("gang", ("TrainJob gang",), dg.Finding(comp.BINDER, "nobody bound them", down=True))


@pytest.mark.parametrize("failure", [ConditionNotMet("wait"), errors.WaitTimeout("wait")])
def test_an_expected_state_that_never_came_because_a_component_is_down_is_infrastructure(failure) -> None:
    raised = dg.explained(failure, [_down()])
    assert isinstance(raised, errors.ComponentDown) and not isinstance(raised, AssertionError)
    assert raised.component == "KAI binder"
    assert str(raised).startswith("KAI binder is down or cannot act, so the behaviour under test was not observed")


@pytest.mark.parametrize("failure", [ConditionViolated("hold"), AssertionError("verdict")])
def test_a_violation_or_a_verdict_stays_a_product_failure_with_the_diagnosis(failure) -> None:
    raised = dg.explained(failure, [_down()])
    assert type(raised) is type(failure)
    assert "broken link: KAI binder" in str(raised)


def test_a_diagnosis_that_cannot_be_made_never_hides_the_failure() -> None:
    class Broken:
        def list(self, *args: Any, **kwargs: Any) -> list:
            raise RuntimeError("boom")

    def unreachable() -> Snapshot:
        raise errors.Unreachable("list pods", 0, "Unreachable", "connection refused")

    raised = dg.explain(Broken(), b.NS, lambda: Snapshot(taken_at=T0), ConditionNotMet("wait"), [("gang", 2)])  # type: ignore[arg-type]
    assert isinstance(raised, ConditionNotMet)
    assert str(raised) == "wait\n(no chain diagnosis: RuntimeError: boom)"
    raised = dg.explain(FakeKube(), b.NS, unreachable, ConditionNotMet("wait"), [("gang", 2)])
    assert isinstance(raised, ConditionNotMet)
    assert "(no chain diagnosis: Unreachable: list pods: connection refused)" in str(raised)


def test_gather_reads_through_the_api_and_says_what_it_could_not_read() -> None:
    fake = FakeKube()
    fake.unserve(kinds.BIND_REQUEST)
    fake.allow(PODGROUPER_USER, "get", "trainjobs", "trainer.kubeflow.org")
    fake.put({"apiVersion": "kai.scheduler/v1", "kind": "Config", "metadata": {"name": "kai-config"},
              "spec": {"global": {"queueLabelKey": "runai/queue"}}})  # fmt: skip
    found = dg.gather(fake, b.NS, Snapshot(taken_at=T0))
    assert found.bindrequests is None
    assert found.unread[0].startswith("BindRequests (")
    assert found.deployments == ()
    assert found.access is not None and found.access[TRAINJOBS].denied == ("list", "watch")
    assert found.queue_label_key == "runai/queue"


# ----------------------------------------------------------------------------------------------- provenance
def _labelled(obj: dict, **labels: str) -> dict:
    obj["metadata"].setdefault("labels", {}).update(labels)
    return obj


def test_provenance_names_a_lower_source_ranked_above_the_trainjob() -> None:
    tj, js, job, pods, pg = chain(1)
    _labelled(tj, **{"kai.scheduler/queue": "team"})
    _labelled(pods[0], **{"kai.scheduler/queue": "pods"})
    pg["spec"].update(queue="pods", priorityClassName="build")
    pods[0]["spec"]["priorityClassName"] = "build"
    snap = facts(tj, js, job, *pods, podgroups=(pg,)).snap.of("gang")
    found = provenance(snap, Access(TRAINJOBS))
    assert found is not None and not found.as_asked
    text = "\n".join(found.lines())
    assert "queue pods from the pods' label kai.scheduler/queue, but the chain asks for team" in text
    assert "why: the podgrouper ranked the pods' label kai.scheduler/queue above the TrainJob's label" in text
    assert "priority class build from the pods' spec.priorityClassName" in text
    assert "the podgrouper may get, list, watch trainjobs.trainer.kubeflow.org" in text


def test_provenance_of_a_value_no_object_carries_and_of_unknown_access() -> None:
    tj, js, job, pods, pg = chain(1)
    pg["spec"].update(queue="elsewhere", priorityClassName="train")
    snap = facts(tj, js, job, *pods, podgroups=(pg,)).snap.of("gang")
    found = provenance(snap, Access(TRAINJOBS, unknown="403 Forbidden"))
    assert found is not None
    text = "\n".join(found.lines())
    assert (
        "queue elsewhere from no object of the chain (none carries that value), but the chain asks for default-queue"
        in text
    )
    _labelled(tj, **{"kai.scheduler/queue": "second"})
    relabelled = provenance(facts(tj, js, job, *pods, podgroups=(pg,)).snap.of("gang"), Access(TRAINJOBS))
    assert relabelled is not None
    assert "why: no object of the chain carries that queue now: KAI keeps a PodGroup's queue from its creation" in (
        "\n".join(relabelled.lines())
    )
    assert (
        "priority class train from KAI's default (no priority class set on the JobSet, the TrainJob or the pods)"
        in text
    )
    assert "whether the podgrouper may read trainjobs.trainer.kubeflow.org is unknown (403 Forbidden)" in text


# ------------------------------------------------------------------------------------------------ components
@pytest.mark.parametrize(
    ("image", "name"),
    [
        ("ghcr.io/kai-scheduler/kai-scheduler/binder:v0.17.0", "binder"),
        ("localhost:5000/kai/podgrouper@sha256:abc", "podgrouper"),
        ("scheduler", "scheduler"),
    ],
)
def test_a_component_is_recognised_by_its_image_name(image: str, name: str) -> None:
    assert comp.image_name(image) == name


def test_component_health_from_its_deployments() -> None:
    binder = b.deployment("binder", "ghcr.io/kai-scheduler/kai-scheduler/binder:v0.17.0", available=True)
    other = b.deployment("binder-ish", "ghcr.io/x/kube-binder:v1", available=False)
    assert comp.health(comp.BINDER, [binder, other]).up is True
    assert comp.health(comp.BINDER, [other]).up is None
    assert comp.health(comp.BINDER, None).text == "KAI binder: Deployments could not be read"
    unready = b.deployment("binder", "ghcr.io/kai-scheduler/kai-scheduler/binder:v0.17.0", available=True)
    del unready["status"]["conditions"]
    unready["status"]["availableReplicas"] = 0
    assert comp.health(comp.BINDER, [unready]) == comp.Health(
        comp.BINDER, False, "Deployment kai-scheduler/binder: 0/1 available"
    )
    assert comp.health(comp.JOB_CONTROLLER, []).up is None


BINDER_IMAGE = "ghcr.io/kai-scheduler/kai-scheduler/binder:v0.17.0"


def component_pod(name: str, image: str, *, last: str | None = None, now: str | None = None, memory: str = "200Mi",
                  restarts: int = 4) -> dict:  # fmt: skip
    def state(reason: str | None) -> dict:
        return {"terminated": {"reason": reason, "exitCode": 137}} if reason else {"running": {}}

    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "kai-scheduler"},
            "spec": {"containers": [{"name": "binder", "image": image,
                                     "resources": {"limits": {"memory": memory}}}]},
            "status": {"containerStatuses": [{"name": "binder", "image": image, "restartCount": restarts,
                                              "lastState": state(last), "state": state(now)}]}}  # fmt: skip


def test_a_component_the_kernel_killed_for_memory_is_named_with_its_limit_and_fix_even_when_available() -> None:
    binder = b.deployment("binder", BINDER_IMAGE, available=True)
    killed = component_pod("binder-7c9", BINDER_IMAGE, last="OOMKilled")
    health = comp.health(comp.BINDER, [binder], [killed])
    assert health.up is True
    assert health.text == (
        "Deployment kai-scheduler/binder Available (1/1 available); pod kai-scheduler/binder-7c9 killed for memory "
        "(OOMKilled; 4 restarts; memory limit 200Mi): raise kai-config spec.binder.service.resources.limits.memory "
        "(on kind with fake nodes the suite raises it: --kai-sizing auto)"
    )
    dying = component_pod("binder-7c9", BINDER_IMAGE, now="OOMKilled", memory="")
    assert "OOMKilled; 4 restarts; memory limit none" in comp.health(comp.BINDER, [binder], [dying]).text
    other_reason = component_pod("binder-7c9", BINDER_IMAGE, last="Error")
    other_component = component_pod("pod-grouper-1", "ghcr.io/kai-scheduler/kai-scheduler/podgrouper:v0.17.0",
                                    last="OOMKilled")  # fmt: skip
    for pods in ([other_reason], [other_component], []):
        assert (
            comp.health(comp.BINDER, [binder], pods).text == "Deployment kai-scheduler/binder Available (1/1 available)"
        )


def test_a_stalled_binding_names_the_binders_oom_kills() -> None:
    tj, js, job, pods, pg = chain(2)
    requests = (bind_request(pods[0], phase="Pending"), bind_request(pods[1]))
    binder = b.deployment("binder", BINDER_IMAGE, available=True)
    gathered = facts(tj, js, job, *pods, podgroups=(pg,), bindrequests=requests, deployments=(binder,),
                     component_pods=(component_pod("binder-7c9", BINDER_IMAGE, last="OOMKilled"),))  # fmt: skip
    found = dg.diagnose(gathered, "gang", 2)
    assert found.broken is not None and found.broken.component is comp.BINDER
    assert "killed for memory (OOMKilled; 4 restarts; memory limit 200Mi)" in found.text()


def test_gather_reads_the_pods_of_the_components_namespaces_only() -> None:
    fake = FakeKube()
    fake.put(b.deployment("binder", BINDER_IMAGE, available=True))
    fake.put(component_pod("binder-7c9", BINDER_IMAGE, last="OOMKilled"))
    fake.put({**component_pod("gang-0", "busybox"), "metadata": {"name": "gang-0", "namespace": b.NS}})
    found = dg.gather(fake, b.NS, Snapshot(taken_at=T0))
    assert [p["metadata"]["name"] for p in found.component_pods or ()] == ["binder-7c9"]


def evicted_gang() -> tuple[dg.Facts, dict]:
    """A gang of 2 KAI bound whole; kube-controller-manager then evicted one pod from a NotReady node and its Job made
    it again (another uid, not bound): 1 of 2 bound, the evicted pod gone but for its event."""
    tj, js, job, _, pg = chain(2)
    pods = [b.grouped(b.pod("gang-0", owner=job, node="kc-kwok-0001", bound=1), pg, None),
            b.grouped(b.pod("gang-1", owner=job), pg, None)]  # fmt: skip
    evicted = b.pod("gang-1-old", owner=job, node="kc-kwok-0002", bound=1)
    eviction = b.event(evicted, "TaintManagerEviction", f"Marking for deletion Pod {b.NS}/gang-1-old")
    requests = (bind_request(pods[0], phase="Succeeded"),)
    return facts(tj, js, job, *pods, podgroups=(pg,), events=(eviction,), bindrequests=requests), tj


def test_a_gang_a_node_failure_broke_is_blamed_on_the_node_lifecycle_not_on_kai() -> None:
    gathered, tj = evicted_gang()
    found = dg.diagnose(gathered, tj["metadata"]["name"], 2)
    assert found.broken is not None and found.broken.component is comp.NODE_LIFECYCLE and found.down
    assert "1 pod(s) of the gang evicted from a NotReady node (TaintManagerEviction: pod gang-1-old at" in found.text()
    assert found.gang is None and "placed part of a gang" not in found.text()


@pytest.mark.parametrize("failure", [ConditionViolated("gang-never-partial"), ConditionNotMet("settled")])
def test_a_violation_a_node_failure_caused_is_infrastructure_not_a_product_failure(failure) -> None:
    gathered, tj = evicted_gang()
    raised = dg.explained(failure, [_down_free(), dg.diagnose(gathered, tj["metadata"]["name"], 2)])
    assert isinstance(raised, errors.ComponentDown) and not isinstance(raised, AssertionError)
    assert raised.component == "node lifecycle controller (kube-controller-manager)"
    assert str(raised).startswith("the node lifecycle controller evicted pods KAI had placed")


def _down_free() -> dg.Diagnosis:
    return dg.Diagnosis("other", ("TrainJob other",), None)
