"""Simulated controllers on :class:`~tests.fakes.kube.FakeKube`: Trainer, JobSet, the Job controller, KAI's
podgrouper and scheduler, and the default scheduler — reduced to what the suites observe.

They run as a FakeKube reactor: before every API call the suite makes, the controllers reconcile until nothing
changes, so a suite case runs end to end, offline, in milliseconds. The behaviour follows the upstream facts the
suites assert (skip-top-owner metadata merge, ``pg-<jobset>-<uid>`` owned by the JobSet, SubGroups, queue and
priority precedence, all-or-nothing gangs, whole-gang preemption with ``Evict`` events). :class:`Faults` switches
on misbehaviour, to show that a suite case then fails with a readable message.

A plain batch Job's pods are grouped too (one PodGroup per Job, minMember 1: KAI's Job grouper), and a Job counts
a pod that vanished as failed (or, with ``evicted_pods_succeed``, succeeded), as the readiness probe of
``clusters/install/behaviour.py`` observes on a real cluster.

Not simulated: reclaim across queues, Job back-off delays, events other than the ones the suites read.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from typing import Any

import yaml

from clusters.layout import GpuLayout
from clusters.suite_stack import KAI_SCHEDULER_NAME, TRAINER_ANCESTOR_LABEL
from fixtures import kinds
from fixtures.kinds import Kind
from suites.support import expectations as ex
from suites.support.snapshot import gpus_of, is_bound, is_terminating, labels_of, uid_of
from tests.fakes.kube import Call, FakeKube

Obj = dict[str, Any]
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


@dataclass
class Faults:
    """Misbehaviour to inject."""

    #: KAI binds whatever fits instead of all-or-nothing.
    partial_gangs: bool = False
    #: Trainer copies TrainJob labels onto the pod templates (it must not).
    trainer_copies_trainjob_labels: bool = False
    #: The podgrouper recomputes spec.queue on every reconcile (it must keep it).
    podgrouper_moves_queue: bool = False
    #: KAI's podgrouper does not run: no pod gets a PodGroup.
    podgrouper_down: bool = False
    #: KAI's binder does not run: the scheduler's BindRequests are never carried out.
    binder_down: bool = False
    #: The kubelet cannot start the workload image: bound pods stay Pending with a pull error.
    image_does_not_start: bool = False
    #: The workload image exits 0 on SIGTERM: a deleted (evicted) pod counts as succeeded, not failed.
    evicted_pods_succeed: bool = False


@dataclass
class SimulatedControllers:
    fake: FakeKube
    layout: GpuLayout
    kai_version: str = "v0.17.0"
    faults: Faults = field(default_factory=Faults)

    def __post_init__(self) -> None:
        self.row = ex.kai_row(self.kai_version)
        self._busy = False
        self._names = itertools.count(1)
        self._seen: dict[str, int] = {}  # PodGroup uid → order of creation (KAI considers older groups first)
        self._job_pods: dict[str, set[str]] = {}  # Job uid → names of the pods it had

    def install(self) -> SimulatedControllers:
        self.fake.reactors.append(self._react)
        return self

    def _react(self, fake: FakeKube, call: Call) -> None:
        if self._busy:
            return
        self._busy = True
        try:
            for _ in range(6):
                if not any([self.trainer(), self.jobsets(), self.jobs(), self.podgrouper(), self.scheduler()]):
                    break
        finally:
            self._busy = False

    # ------------------------------------------------------------------------------------------ store helpers
    def _all(self, kind: Kind, namespace: str | None = None) -> list[Obj]:
        return self.fake.objects(kind, namespace)

    def _find(self, kind: Kind, name: str, namespace: str | None) -> Obj | None:
        return next((o for o in self._all(kind, namespace) if o["metadata"]["name"] == name), None)

    def _owned(self, kind: Kind, owner: Obj) -> list[Obj]:
        uid = uid_of(owner)
        return [
            o for o in self._all(kind, owner["metadata"].get("namespace"))
            if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])
        ]  # fmt: skip

    def _owner(self, obj: Obj, kind: Kind) -> Obj | None:
        refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("kind") == kind.kind]
        if not refs:
            return None
        found = self._find(kind, refs[0]["name"], obj["metadata"].get("namespace"))
        return found if found is not None and uid_of(found) == refs[0]["uid"] else None

    @staticmethod
    def _ref(owner: Obj, controller: bool = True) -> Obj:
        meta = owner["metadata"]
        return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"],
                **({"controller": True, "blockOwnerDeletion": True} if controller else {})}  # fmt: skip

    def _now(self) -> str:
        return self.fake.clock().strftime("%Y-%m-%dT%H:%M:%SZ")

    # ------------------------------------------------------------------------------------------------ Trainer
    def trainer(self) -> bool:
        changed = False
        for tj in self._all(kinds.TRAIN_JOB):
            meta = tj["metadata"]
            suspended = bool(tj["spec"].get("suspend"))
            jobset = self._find(kinds.JOB_SET, meta["name"], meta["namespace"])
            if jobset is None:
                runtime = self._runtime_of(tj)
                if runtime is not None:
                    self.fake.put(self._jobset_for(tj, runtime))
                    changed = True
            elif bool(jobset["spec"].get("suspend")) != suspended:
                jobset["spec"]["suspend"] = suspended
                self.fake.put(jobset)
                changed = True
        return changed

    def _runtime_of(self, tj: Obj) -> Obj | None:
        ref = tj["spec"]["runtimeRef"]
        if ref.get("kind") == kinds.TRAINING_RUNTIME.kind:
            return self._find(kinds.TRAINING_RUNTIME, ref["name"], tj["metadata"]["namespace"])
        return self._find(kinds.CLUSTER_TRAINING_RUNTIME, ref["name"], None)

    def _jobset_for(self, tj: Obj, runtime: Obj) -> Obj:
        template = copy.deepcopy(runtime["spec"]["template"])
        meta = template.get("metadata") or {}
        labels, annotations = dict(meta.get("labels") or {}), dict(meta.get("annotations") or {})
        rjobs = template["spec"]["replicatedJobs"]
        for patch in tj["spec"].get("runtimePatches") or []:
            patched = patch["trainingRuntimeSpec"]["template"]
            labels.update((patched.get("metadata") or {}).get("labels") or {})
            annotations.update((patched.get("metadata") or {}).get("annotations") or {})
            for rjob_patch in (patched.get("spec") or {}).get("replicatedJobs") or []:
                rjob = next(r for r in rjobs if r["name"] == rjob_patch["name"])
                _merge_metadata(rjob["template"], rjob_patch["template"].get("metadata"))
                pod_patch = ((rjob_patch["template"].get("spec") or {}).get("template") or {}).get("metadata")
                _merge_metadata(rjob["template"]["spec"]["template"], pod_patch)
        trainer = tj["spec"].get("trainer") or {}
        for rjob in rjobs:
            pod_template = rjob["template"]["spec"]["template"]
            if self.faults.trainer_copies_trainjob_labels:
                _merge_metadata(pod_template, {"labels": labels_of(tj)})
            if (rjob["template"].get("metadata") or {}).get("labels", {}).get(TRAINER_ANCESTOR_LABEL) == "trainer":
                rjob["template"]["spec"]["parallelism"] = trainer.get("numNodes", 1)
                node = next(c for c in pod_template["spec"]["containers"] if c["name"] == "node")
                node["resources"] = copy.deepcopy(trainer.get("resourcesPerNode") or node.get("resources") or {})
        return {
            "apiVersion": ex.JOBSET_API_VERSION,
            "kind": "JobSet",
            "metadata": {"name": tj["metadata"]["name"], "namespace": tj["metadata"]["namespace"], "labels": labels,
                         "annotations": annotations, "ownerReferences": [self._ref(tj)]},
            "spec": {"replicatedJobs": rjobs, "suspend": bool(tj["spec"].get("suspend"))},
        }  # fmt: skip

    # ------------------------------------------------------------------------------------------------- JobSet
    def jobsets(self) -> bool:
        changed = False
        for js in self._all(kinds.JOB_SET):
            ns, suspended = js["metadata"]["namespace"], bool(js["spec"].get("suspend"))
            for rjob in js["spec"]["replicatedJobs"]:
                if not self._dependencies_ready(js, rjob):
                    continue
                for index in range(rjob.get("replicas", 1)):
                    name = f"{js['metadata']['name']}-{rjob['name']}-{index}"
                    job = self._find(kinds.JOB, name, ns)
                    if job is None:
                        self.fake.put(self._job_for(js, rjob, index, name))
                        changed = True
                    elif bool(job["spec"].get("suspend")) != suspended:
                        job["spec"]["suspend"] = suspended
                        self.fake.put(job)
                        changed = True
        return changed

    def _dependencies_ready(self, js: Obj, rjob: Obj) -> bool:
        for dependency in rjob.get("dependsOn") or []:
            jobs = [
                j
                for j in self._owned(kinds.JOB, js)
                if j["metadata"]["labels"].get(REPLICATED_JOB_LABEL) == dependency["name"]
            ]
            pods = [p for j in jobs for p in self._owned(kinds.POD, j) if not is_terminating(p)]
            if not jobs or not pods or not all(p["status"].get("phase") == "Running" for p in pods):
                return False
        return True

    def _job_for(self, js: Obj, rjob: Obj, index: int, name: str) -> Obj:
        own = dict(
            zip(ex.JOBSET_OWN_LABELS, (js["metadata"]["name"], uid_of(js), rjob["name"], str(index)), strict=True)
        )
        job_meta = rjob["template"].get("metadata") or {}
        pod_template = copy.deepcopy(rjob["template"]["spec"]["template"])
        _merge_metadata(pod_template, {"labels": own})
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": js["metadata"]["namespace"],
                         "labels": {**(job_meta.get("labels") or {}), **own},
                         "annotations": dict(job_meta.get("annotations") or {}), "ownerReferences": [self._ref(js)]},
            "spec": {"parallelism": rjob["template"]["spec"].get("parallelism", 1),
                     "suspend": bool(js["spec"].get("suspend")), "template": pod_template},
        }  # fmt: skip

    # ---------------------------------------------------------------------------------------- Job controller
    def jobs(self) -> bool:
        changed = False
        for job in self._all(kinds.JOB):
            changed |= self._count_gone(job)
            live = [p for p in self._owned(kinds.POD, job) if not is_terminating(p)]
            if job["spec"].get("suspend"):
                for pod in live:
                    self.fake._remove(kinds.POD, pod["metadata"]["namespace"], pod["metadata"]["name"])
                changed |= bool(live)
                continue
            present = {labels_of(p).get(INDEX_LABEL) for p in live}
            for index in range(job["spec"].get("parallelism", 1)):
                if str(index) not in present:
                    self.fake.put(self._pod_for(job, index))
                    changed = True
        return changed

    def _count_gone(self, job: Obj) -> bool:
        """A pod of the Job that vanished (deleted before it ended) counts as failed, as the Job controller does."""
        names = {p["metadata"]["name"] for p in self._owned(kinds.POD, job)}
        gone = self._job_pods.get(uid_of(job), set()) - names
        self._job_pods[uid_of(job)] = names
        if not gone or job["spec"].get("suspend"):  # suspending a Job removes its pods without counting them
            return False
        status = job.setdefault("status", {})
        key = "succeeded" if self.faults.evicted_pods_succeed else "failed"
        status[key] = status.get(key, 0) + len(gone)
        self.fake.put(job)
        return True

    def _pod_for(self, job: Obj, index: int) -> Obj:
        template = copy.deepcopy(job["spec"]["template"])
        meta = template.get("metadata") or {}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{job['metadata']['name']}-{index}-{next(self._names):05x}",
                         "namespace": job["metadata"]["namespace"],
                         "labels": {**(meta.get("labels") or {}), JOB_NAME_LABEL: job["metadata"]["name"],
                                    INDEX_LABEL: str(index)},
                         "annotations": dict(meta.get("annotations") or {}), "ownerReferences": [self._ref(job)]},
            "spec": template["spec"],
            "status": {"phase": "Pending"},
        }  # fmt: skip

    # ------------------------------------------------------------------------------------- KAI's podgrouper
    def podgrouper(self) -> bool:
        changed = False
        if self.faults.podgrouper_down:
            return False
        for pod in self._all(kinds.POD):
            if pod["spec"].get("schedulerName") != KAI_SCHEDULER_NAME or is_terminating(pod):
                continue
            job = self._owner(pod, kinds.JOB)
            jobset = job and self._owner(job, kinds.JOB_SET)
            if jobset is None:
                changed |= job is not None and self._group_job(pod, job)
                continue
            trainjob = self._owner(jobset, kinds.TRAIN_JOB)
            name = ex.POD_GROUP_NAME_FORMAT.format(jobset=jobset["metadata"]["name"], uid=uid_of(jobset))
            existing = self._find(kinds.POD_GROUP, name, pod["metadata"]["namespace"])
            wanted = self._podgroup_for(name, jobset, trainjob, pod)
            if existing is None:
                self.fake.put(wanted)
                changed = True
            elif self.faults.podgrouper_moves_queue and existing["spec"]["queue"] != wanted["spec"]["queue"]:
                existing["spec"]["queue"] = wanted["spec"]["queue"]
                self.fake.put(existing)
                changed = True
            subgroup = self.row.subgroup_of(job["metadata"]["labels"][REPLICATED_JOB_LABEL], 0)
            annotations, labels = (
                pod["metadata"].setdefault("annotations", {}),
                pod["metadata"].setdefault("labels", {}),
            )
            if annotations.get(ex.POD_GROUP_ANNOTATION) != name or (
                subgroup and labels.get(ex.SUBGROUP_LABEL) != subgroup
            ):
                annotations[ex.POD_GROUP_ANNOTATION] = name
                if subgroup:
                    labels[ex.SUBGROUP_LABEL] = subgroup
                self.fake.put(pod)
                changed = True
        return changed

    def _group_job(self, pod: Obj, job: Obj) -> bool:
        """A plain batch Job: one PodGroup ``pg-<job>-<uid>`` of minMember 1, queue from the Job's or the pod's label."""
        name, namespace = f"pg-{job['metadata']['name']}-{uid_of(job)}", pod["metadata"]["namespace"]
        changed = False
        if self._find(kinds.POD_GROUP, name, namespace) is None:
            queue = labels_of(job).get(ex.QUEUE_LABEL) or labels_of(pod).get(ex.QUEUE_LABEL) or ex.DEFAULT_QUEUE
            self.fake.put({
                "apiVersion": kinds.POD_GROUP.api_version, "kind": "PodGroup",
                "metadata": {"name": name, "namespace": namespace, "ownerReferences": [self._ref(job, controller=False)]},
                "spec": {"minMember": 1, "queue": queue, "priorityClassName": ex.DEFAULT_PRIORITY_CLASS}, "status": {},
            })  # fmt: skip
            changed = True
        annotations = pod["metadata"].setdefault("annotations", {})
        if annotations.get(ex.POD_GROUP_ANNOTATION) != name:
            annotations[ex.POD_GROUP_ANNOTATION] = name
            self.fake.put(pod)
            changed = True
        return changed

    def _podgroup_for(self, name: str, jobset: Obj, trainjob: Obj | None, pod: Obj) -> Obj:
        """Skip-top-owner: TrainJob metadata merged under the JobSet's, the JobSet as top owner (B1, B2)."""
        top_labels = {**labels_of(trainjob or {"metadata": {}}), **labels_of(jobset)}
        top_annotations = {**((trainjob or {}).get("metadata", {}).get("annotations") or {}),
                           **(jobset["metadata"].get("annotations") or {})}  # fmt: skip
        group, version = ex.JOBSET_API_VERSION.split("/")
        top_owner = yaml.safe_dump(
            {"name": jobset["metadata"]["name"], "uid": uid_of(jobset), "group": group, "version": version,
             "kind": "JobSet"}, sort_keys=False)  # fmt: skip
        queue = top_labels.get(ex.QUEUE_LABEL) or labels_of(pod).get(ex.QUEUE_LABEL) or ex.DEFAULT_QUEUE
        priority = top_labels.get(ex.PRIORITY_LABEL) or labels_of(pod).get(ex.PRIORITY_LABEL)
        rjobs = [ex.ReplicatedJob(r["name"], r["template"]["spec"].get("parallelism", 1), r.get("replicas", 1))
                 for r in jobset["spec"]["replicatedJobs"]]  # fmt: skip
        if self.row.podgroup_shape is ex.PodGroupShape.SUBGROUPS:
            subgroups: list[Obj] = []
            for r in rjobs:
                subgroups.append({"name": r.name, "minSubGroup": r.replicas})
                subgroups += [
                    {"name": f"{r.name}-replica-{i}", "parent": r.name, "minMember": r.pods} for i in range(r.replicas)
                ]
            shape: Obj = {"minSubGroup": len(rjobs), "subGroups": subgroups}
        else:
            shape = {"minMember": self.row.podgroup_spec(rjobs)["minMember"]}
        return {
            "apiVersion": kinds.POD_GROUP.api_version,
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": jobset["metadata"]["namespace"], "labels": top_labels,
                         "annotations": {ex.TOP_OWNER_ANNOTATION: top_owner, **top_annotations},
                         "ownerReferences": [self._ref(jobset, controller=False)]},
            "spec": {"queue": queue, "priorityClassName": priority or ex.DEFAULT_PRIORITY_CLASS, **shape},
            "status": {},
        }  # fmt: skip

    # --------------------------------------------------------------------------------------------- scheduling
    def _free(self) -> dict[str, int]:
        free = {n.name: n.gpus for n in self.layout.nodes}
        for pod in self._all(kinds.POD):
            if is_bound(pod) and not is_terminating(pod):
                free[pod["spec"]["nodeName"]] -= gpus_of(pod)
        return free

    def _place(self, pods: list[Obj], free: dict[str, int], whole: bool) -> dict[str, str] | None:
        """Pod name → node, first fit; None when ``whole`` and not every pod fits."""
        left, placed = dict(free), {}
        for pod in pods:
            node = next((n for n, gpus in sorted(left.items()) if gpus >= gpus_of(pod)), None)
            if node is None:
                if whole:
                    return None
                continue
            left[node] -= gpus_of(pod)
            placed[pod["metadata"]["name"]] = node
        return placed

    def _bind(self, pod: Obj, node: str) -> None:
        now = self._now()
        if self.faults.binder_down and pod["spec"].get("schedulerName") == KAI_SCHEDULER_NAME:
            if self._find(kinds.BIND_REQUEST, pod["metadata"]["name"], pod["metadata"]["namespace"]) is None:
                self.fake.put({
                    "apiVersion": kinds.BIND_REQUEST.api_version, "kind": "BindRequest",
                    "metadata": {"name": pod["metadata"]["name"], "namespace": pod["metadata"]["namespace"],
                                 "ownerReferences": [self._ref(pod)]},
                    "spec": {"podName": pod["metadata"]["name"], "selectedNode": node}, "status": {"phase": "Pending"},
                })  # fmt: skip
            return
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running",
                         "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now}],
                         "containerStatuses": [{"name": "node", "state": {"running": {"startedAt": now}}}]}  # fmt: skip
        if self.faults.image_does_not_start:
            pod["status"]["phase"] = "Pending"
            pod["status"]["containerStatuses"] = [{"name": "node", "state": {"waiting": {
                "reason": "ErrImagePull", "message": "failed to pull and unpack image: not found"}}}]  # fmt: skip
        self.fake.put(pod)

    def scheduler(self) -> bool:
        changed = False
        pending = [p for p in self._all(kinds.POD) if not is_bound(p) and not is_terminating(p)]
        default = [p for p in pending if p["spec"].get("schedulerName") != KAI_SCHEDULER_NAME]
        for name, node in (self._place(default, self._free(), whole=False) or {}).items():
            self._bind(next(p for p in default if p["metadata"]["name"] == name), node)
            changed = True
        for pg in sorted(self._all(kinds.POD_GROUP), key=lambda g: self._seen.setdefault(uid_of(g), len(self._seen))):
            changed |= self._schedule_group(pg)
        return changed

    def _members(self, pg: Obj) -> list[Obj]:
        name = pg["metadata"]["name"]
        return [p for p in self._all(kinds.POD, pg["metadata"]["namespace"])
                if (p["metadata"].get("annotations") or {}).get(ex.POD_GROUP_ANNOTATION) == name and not is_terminating(p)]  # fmt: skip

    def _gang_size(self, pg: Obj) -> int:
        spec = pg["spec"]
        if "minMember" in spec:
            return spec["minMember"]
        return sum(sg.get("minMember", 0) for sg in spec.get("subGroups") or [])

    def _schedule_group(self, pg: Obj) -> bool:
        members = self._members(pg)
        waiting = [p for p in members if not is_bound(p)]
        if not waiting or len(members) < self._gang_size(pg):
            return False
        queue = self._find(kinds.QUEUE, pg["spec"]["queue"], None)
        if queue is None:
            queue_name = pg["spec"]["queue"]
            return self._unschedulable(
                pg, waiting, ex.QUEUE_MISSING_REASON, ex.QUEUE_MISSING_MESSAGE.format(queue=queue_name)
            )
        over = self._over_limit(queue, sum(gpus_of(p) for p in waiting))
        if over:
            return self._unschedulable(pg, waiting, ex.OVER_LIMIT_REASON, over)
        whole = not self.faults.partial_gangs
        placement = self._place(waiting, self._free(), whole=whole) or self._preempt_for(pg, waiting, whole)
        if not placement:
            return self._unschedulable(
                pg,
                waiting,
                "PodSchedulingErrors",
                f"Resources were found for 0 pods while {len(waiting)} are required for gang scheduling",
            )
        for pod in waiting:
            if pod["metadata"]["name"] in placement:
                self._bind(pod, placement[pod["metadata"]["name"]])
        return True

    def _over_limit(self, queue: Obj | None, request: int) -> str | None:
        """KAI walks from the leaf up through its parents (capacity_policy.resultsOverLimit)."""
        while queue is not None:
            limit = queue["spec"]["resources"]["gpu"].get("limit", -1)
            used = sum(gpus_of(p) for p in self._queue_pods(queue["metadata"]["name"]))
            if limit != -1 and used + request > limit:
                display = queue["spec"].get("displayName") or queue["metadata"]["name"]
                return f"{display} quota has reached the allowable limit of GPUs. Limit is {limit} GPUs"
            parent = queue["spec"].get("parentQueue")
            queue = self._find(kinds.QUEUE, parent, None) if parent else None
        return None

    def _queue_pods(self, queue: str) -> list[Obj]:
        children = {q["metadata"]["name"] for q in self._all(kinds.QUEUE) if q["spec"].get("parentQueue") == queue}
        groups = [g for g in self._all(kinds.POD_GROUP) if g["spec"]["queue"] == queue]
        pods = [p for g in groups for p in self._members(g) if is_bound(p)]
        return pods + [p for child in children for p in self._queue_pods(child)]

    def _preempt_for(self, pg: Obj, waiting: list[Obj], whole: bool) -> dict[str, str] | None:
        """In-queue preemption: preemptible gangs of strictly lower priority are evicted whole (KAI §6)."""
        mine = ex.PRIORITY_CLASSES.get(pg["spec"]["priorityClassName"], (50, True))[0]
        victims = [g for g in self._all(kinds.POD_GROUP) if g["spec"]["queue"] == pg["spec"]["queue"]
                   and g is not pg and ex.PRIORITY_CLASSES.get(g["spec"]["priorityClassName"], (50, True))[1]
                   and ex.PRIORITY_CLASSES.get(g["spec"]["priorityClassName"], (50, True))[0] < mine]  # fmt: skip
        bound = [(g, p) for g in victims for p in self._members(g) if is_bound(p)]
        free = self._free()
        for _, pod in bound:
            free[pod["spec"]["nodeName"]] += gpus_of(pod)
        placement = self._place(waiting, free, whole)
        if not placement or not bound:
            return None
        for victim, pod in bound:
            self.fake._remove(kinds.POD, pod["metadata"]["namespace"], pod["metadata"]["name"])
            event = self.fake.record_event(
                victim,
                ex.EVICT_EVENT_REASON,
                f"Pod {pod['metadata']['namespace']}/{pod['metadata']['name']} was preempted by higher priority workload {pg['metadata']['namespace']}/{pg['metadata']['name']}",
            )
            event["metadata"]["annotations"] = {
                ex.EVICT_ACTION_ANNOTATION: "preempt",
                "num-evicted-pods": str(len(bound)),
            }
            self.fake.put(event)
        return placement

    def _unschedulable(self, pg: Obj, waiting: list[Obj], reason: str, message: str) -> bool:
        text = f"{reason}: {message}."
        changed = False
        for pod in waiting:
            condition = {"type": "PodScheduled", "status": "False", "reason": ex.UNSCHEDULABLE_REASON, "message": text}
            if (pod.get("status") or {}).get("conditions") != [condition]:
                pod["status"] = {"phase": "Pending", "conditions": [condition]}
                self.fake.put(pod)
                changed = True
        condition = {"type": ex.UNSCHEDULABLE_CONDITION, "nodePool": "default", "reason": ex.UNSCHEDULABLE_REASON,
                     "status": "True", "message": text, "reasons": [{"reason": reason, "message": message}]}  # fmt: skip
        if pg.get("status", {}).get("schedulingConditions") != [condition]:
            pg["status"] = {"schedulingConditions": [condition]}
            self.fake.put(pg)
            self.fake.record_event(pg, ex.UNSCHEDULABLE_REASON, text)
            changed = True
        return changed


def _merge_metadata(target: Obj, metadata: Obj | None) -> None:
    if not metadata:
        return
    meta = target.setdefault("metadata", {})
    for key in ("labels", "annotations"):
        if metadata.get(key):
            meta.setdefault(key, {}).update(metadata[key])
