"""Proof by behaviour that KAI schedules on this cluster, and that an evicted workload pod ends Failed.

Deployments and image tags only suggest that a component runs; this probe shows it, whatever the install looks
like (operands as Deployments, as processes, another namespace). It runs once per run, after the stack is
installed or verified and the suite's run-wide objects exist:

1. a leaf queue under the suite's parent queue (KAI schedules only into leaf queues: kai-scheduler.md §2.2) and a
   namespace, both labelled as this run's stack objects (teardown of an existing cluster removes what the probe
   could not; the end-of-run leftovers check is about case objects);
2. a one-pod Indexed batch/v1 Job with the suite's pod template (:func:`clusters.suite_stack.replicated_job`:
   ``schedulerName: kai-scheduler``, the workload image, no GPU), routed to that queue by the
   ``kai.scheduler/queue`` label (KAI groups a batch Job's pods into one PodGroup, kai-scheduler.md §3.2, §4.5);
3. the Job controller creates the pod, KAI's podgrouper a PodGroup, KAI's scheduler a BindRequest and its binder
   the binding (``spec.nodeName``), the kubelet runs the pod;
4. the pod is deleted once, as KAI evicts a victim (a plain delete with the pod's own grace period, no Eviction
   API: kai-scheduler.md §6). It must end **Failed**, which the Job counts as failed (the probe takes whichever
   it sees first: the pod's phase, or the Job's count, which waits for the replacement's 10 s back-off). If it
   ends Succeeded, the workload image exited 0 on SIGTERM, and every eviction of a case (preempt, reclaim,
   consolidation) would complete the victim's Jobs instead of sending the victim back to pending;
5. everything is removed and waited for.

A stage that does not happen in its budget fails the run with what the component that owns it said and the fix.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kai_conformance.clusters.suite_stack import PARENT_QUEUE, queue, replicated_job
from kai_conformance.clusters.topology import NODE_POOL_LABEL
from kai_conformance.fixtures import errors, progress
from kai_conformance.fixtures.kube import KubeApi, kinds
from kai_conformance.fixtures.ownership import stamp
from kai_conformance.fixtures.waits import Observation, Probe, TimeoutPolicy, eventually

Obj = dict[str, Any]
#: The label KAI's podgrouper reads the queue from (Helm value ``podgrouper.queueLabelKey``, kai-scheduler.md §3.2).
QUEUE_LABEL = "kai.scheduler/queue"
POD_GROUP_ANNOTATION = "pod-group-name"
JOB_NAME = "kai-conformance-probe"
NAMESPACE_PREFIX = "kc-stack-probe-"
QUEUE_PREFIX = "kai-conformance-probe-"
#: What the probe records of its evicted pod, whichever it saw first: its phase, or the Job controller's count.
ENDED_FAILED = "ended Failed"
COUNTED_FAILED = "counted as failed by the Job controller"
#: Where to read about a workload image that exits 0 on SIGTERM.
WORKLOAD_IMAGE_DOC = "docs/suites.md"


#: No binder wrote anything on the BindRequest. Seen twice on kind (2026-11-27, KAI v0.17.0): the API server was
#: unreachable for minutes on 2 overloaded cores ("http2: client connection lost", "i/o timeout" in the binder's
#: log), and afterwards the binder ran Ready but never saw a new BindRequest ("event bookmark expired" once, then
#: nothing) until it was restarted.
STALE_BINDER_HINT = (
    "; a binder that runs but never touched the BindRequest may have stale watches after the API server was "
    "unreachable (its log shows `client connection lost`, `i/o timeout` or `event bookmark expired`): restart it "
    "(`kubectl -n <KAI namespace> rollout restart deploy/binder`)"
)


def probe_objects(
    namespace: str, queue_name: str, image: str, run_id: str, node_pool: str | None = None, parent: str = PARENT_QUEUE
) -> list[Obj]:
    """The probe's queue, namespace and Job, in creation order, labelled as this run's stack objects (the pod
    template too: the probe deletes the pod, and the suite only ever deletes what carries its label). With
    ``node_pool`` (a slice, clusters/slices.py) the queue and the Job carry KAI's node-pool label: the Job is the
    PodGroup's top owner, whose labels the PodGroup inherits."""
    # Exactly the suite's runtimes' Job shape (clusters.suite_stack.replicated_job: Indexed, restartPolicy Never,
    # their per-index limit), with no GPU and no trainer ancestor. The limit matters: while an index may still be
    # retried, the Job controller keeps a deleted pod's finalizer until the replacement exists (10 s back-off), and
    # the kubelet ends the pod meanwhile, so the Job counts what the container exited with. With a limit of 0 the
    # index fails at once and the deletion counts as a failure whatever the image does, which would hide the very
    # problem this stage looks for.
    job_template = replicated_job(JOB_NAME, image, ancestor=None, parallelism=1,
                                  pod_labels={QUEUE_LABEL: queue_name})["template"]  # fmt: skip
    job_template["spec"]["template"] = stamp(job_template["spec"]["template"], run_id)
    pool = {NODE_POOL_LABEL: node_pool} if node_pool else {}
    job = {
        "apiVersion": kinds.JOB.api_version,
        "kind": kinds.JOB.kind,
        "metadata": {"name": JOB_NAME, "namespace": namespace, "labels": {QUEUE_LABEL: queue_name, **pool}},
        "spec": job_template["spec"],
    }
    namespace_obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    leaf = queue(queue_name, parent=parent)
    if pool:
        leaf["metadata"]["labels"] = dict(pool)
    return [stamp(obj, run_id) for obj in (leaf, namespace_obj, job)]


def prove_scheduling(
    kube: KubeApi,
    run_id: str,
    image: str,
    timeouts: TimeoutPolicy,
    suffix: str = "",
    *,
    node_pool: str | None = None,
    parent: str = PARENT_QUEUE,
) -> Obj:
    """Run the probe (module docstring); returns what it saw, for ``ClusterState.stack['behaviour']``."""
    suffix = suffix or secrets.token_hex(3)
    probe = _Probe(kube, NAMESPACE_PREFIX + suffix, QUEUE_PREFIX + suffix, image, timeouts)
    where = f" in node pool {node_pool}" if node_pool else ""
    progress.report(
        f"KAI behaviour probe{where}: Job {probe.namespace}/{JOB_NAME} in queue {probe.queue} (schedulerName "
        f"kai-scheduler, no GPU): PodGroup, binding, Running, then one eviction"
    )
    try:
        for obj in probe_objects(probe.namespace, probe.queue, image, run_id, node_pool, parent):
            kube.apply(obj)
        result = probe.run()
    finally:
        left = probe.remove()
        if left:
            progress.report(f"KAI behaviour probe: could not remove everything it made: {left}")
    result["removed"] = f"not everything: {left}" if left else "everything"
    result["seconds"]["removed"] = probe.seconds["removed"]
    progress.report(
        f"KAI behaviour probe passed in {result['seconds']['evicted']:.1f}s: PodGroup {result['podgroup']}, bound "
        f"to {result['node']}, Running; the evicted pod {result['evicted_pod']}"
    )
    return result


@dataclass
class _Probe:
    kube: KubeApi
    namespace: str
    queue: str
    image: str
    timeouts: TimeoutPolicy
    started: float = field(default_factory=time.monotonic)
    seconds: dict[str, float] = field(default_factory=dict)

    def run(self) -> Obj:
        pod = self._created()
        podgroup = self._grouped(pod)
        pod = self._bound(pod, podgroup)
        self._running(pod)
        evicted = self._evicted(pod)
        return {
            "namespace": self.namespace, "queue": self.queue, "job": JOB_NAME, "pod": pod["metadata"]["name"],
            "podgroup": podgroup["metadata"]["name"], "node": pod["spec"]["nodeName"],
            "evicted_pod": evicted, "seconds": dict(self.seconds),
        }  # fmt: skip

    # ------------------------------------------------------------------------------------------------ stages
    def _wait(self, stage: str, probe: Probe, budget: str, failure: Callable[[float], Exception]) -> Observation:
        """``eventually`` under ``budget``; on timeout raise ``failure(budget seconds)``, which names the component
        that owns the stage, what it said, and the fix."""
        try:
            found = eventually(probe, what=f"KAI behaviour probe: {stage}", timeout=self.timeouts(budget),
                               failure=errors.WaitTimeout)  # fmt: skip
        except errors.WaitTimeout:
            raise failure(self.timeouts(budget)) from None
        self.seconds[stage] = round(time.monotonic() - self.started, 1)
        return found

    def _pods(self) -> list[Obj]:
        return [p for p in self.kube.list(kinds.POD, self.namespace) if not p["metadata"].get("deletionTimestamp")]

    def _created(self) -> Obj:
        def created() -> Observation:
            pods = self._pods()
            return Observation(bool(pods), f"{len(pods)} pod(s)", actual=pods[0] if pods else None)

        def failure(limit: float) -> errors.InfrastructureError:
            return errors.InfrastructureError(
                f"the Job controller (kube-controller-manager) created no pod for the probe Job "
                f"{self.namespace}/{JOB_NAME} within {limit:.0f}s; the Job's events: {self._events(kinds.JOB, JOB_NAME)}. "
                "fix: check kube-controller-manager, and any admission webhook that refuses pods (a FailedCreate "
                "event names it)"
            )

        return self._wait("pod", created, "api", failure).actual

    def _grouped(self, pod: Obj) -> Obj:
        name = pod["metadata"]["name"]

        def grouped() -> Observation:
            groups = self.kube.list(kinds.POD_GROUP, self.namespace)
            return Observation(bool(groups), f"{len(groups)} PodGroup(s)", actual=groups[0] if groups else None)

        def failure(limit: float) -> errors.InfrastructureError:
            return errors.InfrastructureError(
                f"KAI podgrouper made no PodGroup for the probe pod {self.namespace}/{name} (schedulerName "
                f"kai-scheduler, owned by Job {JOB_NAME}) within {limit:.0f}s; the pod's events: "
                f"{self._events(kinds.POD, name)}. fix: check that KAI's podgrouper runs and what it logs (`kubectl "
                "logs deploy/pod-grouper -n <KAI namespace>` where it is a Deployment), and that its RBAC lets it "
                "read batch Jobs and pods and create PodGroups (ClusterRole kai-podgrouper)"
            )

        return self._wait("podgroup", grouped, "api", failure).actual

    def _bound(self, pod: Obj, podgroup: Obj) -> Obj:
        name = pod["metadata"]["name"]

        def bound() -> Observation:
            current = self.kube.find(kinds.POD, name, self.namespace)
            node = ((current or {}).get("spec") or {}).get("nodeName")
            return Observation(bool(node), f"bound to {node}" if node else "not bound", actual=current)

        def failure(limit: float) -> errors.InfrastructureError:
            current = self.kube.find(kinds.POD, name, self.namespace) or pod
            requests = self._bind_requests(name)
            if requests:
                request = requests[0]
                status = request.get("status") or {}
                untouched = not status.get("phase") and not status.get("failedAttempts")
                return errors.InfrastructureError(
                    f"KAI binder did not bind the probe pod {self.namespace}/{name} within {limit:.0f}s: the scheduler "
                    f"chose node {request.get('spec', {}).get('selectedNode', '?')} (BindRequest "
                    f"{request['metadata']['name']}: phase {status.get('phase', 'unset')}, reason "
                    f"{status.get('reason') or 'none'}, {status.get('failedAttempts', 0)} failed attempts) but the "
                    "pod has no spec.nodeName. fix: check that KAI's binder runs and what it logs (`kubectl logs "
                    "deploy/binder -n <KAI namespace>` where it is a Deployment) and its RBAC (pods/binding)"
                    + (STALE_BINDER_HINT if untouched else "")
                )
            group = self.kube.find(kinds.POD_GROUP, podgroup["metadata"]["name"], self.namespace) or podgroup
            return errors.InfrastructureError(
                f"KAI scheduler did not schedule the probe pod {self.namespace}/{name} (PodGroup "
                f"{podgroup['metadata']['name']}, queue {self.queue}) within {limit:.0f}s and made no BindRequest; "
                f"KAI said: {_scheduling_said(current, group)}. fix: check that KAI's scheduler runs and what it "
                "logs (`kubectl logs deploy/kai-scheduler-default -n <KAI namespace>` where it is a Deployment), "
                f"and that a node has {_requests(current)} free for the probe"
            )

        return self._wait("bound", bound, "schedule", failure).actual

    def _running(self, pod: Obj) -> None:
        name, node = pod["metadata"]["name"], pod["spec"]["nodeName"]

        def running() -> Observation:
            current = self.kube.get(kinds.POD, name, self.namespace)
            phase = (current.get("status") or {}).get("phase", "Pending")
            if phase in ("Succeeded", "Failed"):
                raise errors.InfrastructureError(
                    f"the probe pod {self.namespace}/{name} ended {phase} at once ({_containers(current)}) instead of "
                    f"staying Running: the workload image {self.image} must run until it is stopped. fix: pass "
                    f"--workload-image with such an image (see {WORKLOAD_IMAGE_DOC})"
                )
            return Observation(phase == "Running", f"{phase}: {_containers(current)}", actual=current)

        def failure(limit: float) -> errors.InfrastructureError:
            current = self.kube.find(kinds.POD, name, self.namespace) or pod
            return errors.InfrastructureError(
                f"the kubelet on node {node} did not run the probe pod {self.namespace}/{name} within {limit:.0f}s "
                f"(KAI bound it): {_containers(current)}. fix: the workload image {self.image} must be pullable by "
                f"the nodes or loaded on them; pass --workload-image with one that is (`kubectl describe pod -n "
                f"{self.namespace} {name}`)"
            )

        self._wait("running", running, "running", failure)

    def _evicted(self, pod: Obj) -> str:
        name = pod["metadata"]["name"]
        self.kube.delete(kinds.POD, name, self.namespace)  # as KAI's evictor does (default_evictor.go)

        def counted() -> Observation:
            status = self.kube.get(kinds.JOB, JOB_NAME, self.namespace).get("status") or {}
            if status.get("failed"):
                return Observation(True, _job_counts(status), actual=(True, COUNTED_FAILED))
            if status.get("succeeded") or status.get("completedIndexes"):
                said = f"was counted as succeeded by the Job controller ({_job_counts(status)})"
                return Observation(True, _job_counts(status), actual=(False, said))
            # The Job controller counts a pod by its phase (job_controller.go ``isPodFailed``: phase Failed, or
            # deleted before Succeeded) but, while the index may be retried, only once the replacement exists,
            # after its 10 s back-off. The ended pod's phase is the same fact that much earlier.
            phase = ((self.kube.find(kinds.POD, name, self.namespace) or {}).get("status") or {}).get("phase")
            if phase in ("Failed", "Succeeded"):
                return Observation(True, f"the pod ended {phase}", actual=(phase == "Failed", f"ended {phase}"))
            return Observation(False, f"{_job_counts(status)}; the pod: {phase or 'gone'}")

        def failure(limit: float) -> errors.InfrastructureError:
            job = self.kube.find(kinds.JOB, JOB_NAME, self.namespace) or {}
            counts = _job_counts(job.get("status") or {})
            current = self.kube.find(kinds.POD, name, self.namespace)
            if current is not None:  # the link that broke: the kubelet never ended the deleted pod
                return errors.InfrastructureError(
                    f"the kubelet on node {pod['spec']['nodeName']} did not end the deleted probe pod "
                    f"{self.namespace}/{name} within {limit:.0f}s ({_containers(current)}; the Job: {counts}). fix: "
                    f"check that kubelet; the workload image {self.image} must stop on SIGTERM (see "
                    f"{WORKLOAD_IMAGE_DOC}), and a finalizer other than the Job's may hold the pod"
                )
            return errors.InfrastructureError(
                f"the Job controller (kube-controller-manager) did not count the deleted probe pod {self.namespace}/"
                f"{name} within {limit:.0f}s: the pod is gone, the Job says {counts}. fix: check "
                "kube-controller-manager (its logs about Job kai-conformance-probe)"
            )

        failed, said = self._wait("evicted", counted, "evict", failure).actual
        if not failed:
            raise errors.InfrastructureError(
                f"an evicted workload pod ends Succeeded on this cluster: the probe pod {self.namespace}/{name}, "
                f"deleted as KAI deletes the pods it evicts, {said}. The "
                f"workload image {self.image} exits 0 on SIGTERM, so every KAI eviction (preempt, reclaim, "
                "consolidation) would complete the victim's Jobs instead of sending the victim back to pending, and "
                f"the preemption cases would judge a completed workload. fix: pass --workload-image with an image "
                f"that has a POSIX sh (see {WORKLOAD_IMAGE_DOC})"
            )
        return said

    # ------------------------------------------------------------------------------------------------ removal
    def remove(self) -> str:
        """Delete the Job (its pods with it), the namespace, then the queue, and wait until all are gone; returns
        what is left ("" when nothing). Never raises for what it could not remove: a failed probe's own error matters
        more. Interrupted while it waits (Ctrl-C, SIGTERM, or the main thread's interrupt in a probe's own thread),
        it still asks for every later removal, without waiting, then lets the interrupt go on: a namespace already
        going would otherwise leave its queue behind, which no teardown of this run looks for."""
        steps = (
            (kinds.JOB, JOB_NAME, self.namespace),
            (kinds.NAMESPACE, self.namespace, None),
            (kinds.QUEUE, self.queue, None),  # after its workload's PodGroup went with the namespace
        )
        left = []
        interrupted: KeyboardInterrupt | None = None
        for kind, name, namespace in steps:
            try:
                self._remove(kind, name, namespace, wait=interrupted is None)
            except (errors.KubeError, errors.WaitTimeout) as exc:
                left.append(str(exc))
            except KeyboardInterrupt as exc:
                interrupted = exc
        self.seconds["removed"] = round(time.monotonic() - self.started, 1)
        if interrupted is not None:
            raise interrupted
        return "; ".join(left)

    def _remove(self, kind: kinds.Kind, name: str, namespace: str | None, *, wait: bool) -> None:
        # Background: batch/v1 Jobs otherwise orphan their pods (the API's legacy default for Jobs).
        self.kube.delete(kind, name, namespace, propagation="Background")
        if not wait:
            return

        def gone() -> Observation:
            present = self.kube.find(kind, name, namespace) is not None
            return Observation(not present, "still present" if present else "gone")

        eventually(gone, what=f"removal of the probe's {kind.kind} {name}", timeout=self.timeouts("cleanup"),
                   failure=errors.WaitTimeout)  # fmt: skip

    # ------------------------------------------------------------------------------------------------ reading
    def _events(self, kind: kinds.Kind, name: str) -> str:
        obj = self.kube.find(kind, name, self.namespace)
        if obj is None:
            return "none (the object is gone)"
        said = [
            f"{e.get('reason', '')}: {e.get('message', '')}" for e in self.kube.events(self.namespace, involving=obj)
        ]
        return "; ".join(said[-5:]) or "none"

    def _bind_requests(self, pod: str) -> list[Obj]:
        try:
            found = self.kube.list(kinds.BIND_REQUEST, self.namespace)
        except errors.KubeError:
            return []
        return [b for b in found if (b.get("spec") or {}).get("podName") == pod]


def _scheduling_said(pod: Obj, podgroup: Obj) -> str:
    """KAI's own words on why a pod is not placed: the pod's PodScheduled condition and the PodGroup's conditions."""
    said = [
        f"pod {c.get('reason', '')}: {c.get('message', '').rstrip('.')}"
        for c in (pod.get("status") or {}).get("conditions") or []
        if c.get("type") == "PodScheduled" and c.get("status") == "False"
    ]
    said += [
        f"PodGroup {c.get('reason', '')}: {c.get('message', '').rstrip('.')}"
        for c in (podgroup.get("status") or {}).get("schedulingConditions") or []
    ]
    return "; ".join(said) or "nothing (no PodScheduled condition on the pod, no scheduling condition on the PodGroup)"


def _requests(pod: Obj) -> str:
    """``cpu 10m, memory 16Mi``: what the probe pod asks of a node."""
    requests: dict[str, str] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        requests.update((container.get("resources") or {}).get("requests") or {})
    return ", ".join(f"{name} {value}" for name, value in requests.items()) or "room"


def _containers(pod: Obj) -> str:
    """``container node: waiting ErrImagePull (…)`` for each container, or the phase when none reported yet."""
    states = []
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        for state, detail in (status.get("state") or {}).items():
            reason = detail.get("reason") or ""
            extra = f", exit code {detail['exitCode']}" if "exitCode" in detail else ""
            message = f": {detail['message']}" if detail.get("message") else ""
            states.append(f"container {status.get('name', '?')} {state} {reason}{extra}{message}".rstrip())
    return "; ".join(states) or f"phase {(pod.get('status') or {}).get('phase', 'Pending')}, no container status yet"


def _job_counts(status: Obj) -> str:
    return ", ".join(f"{key}={status.get(key, 0)}" for key in ("active", "failed", "succeeded"))
