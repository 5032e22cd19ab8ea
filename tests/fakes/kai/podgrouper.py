"""Simulated KAI Scheduler's podgrouper: skip-top-owner PodGroups named ``pg-<jobset>-<uid>``, owned by the JobSet,
queue and priority precedence, SubGroups per version (a parent per replicatedJob and a leaf per replica, each pod
labelled with its leaf); a bare batch/v1 Job's flat PodGroup. Area mixins (the other modules of ``tests/fakes/kai/``) add to what it writes
through :meth:`KaiPodgrouper._decorate_podgroup`; ``elastic`` reads ``kai.scheduler/batch-min-member`` where
the version reads it.
"""

from __future__ import annotations

import yaml

from kai_conformance.clusters.suite_stack import KAI_SCHEDULER_NAME
from kai_conformance.fixtures.kube import kinds
from kai_conformance.suites.support import expectations as ex
from kai_conformance.suites.support.snapshot import is_terminating, labels_of, uid_of
from tests.fakes.simulation import REPLICATED_JOB_LABEL, Obj, Simulation

#: JobSet's label on a Job (and its pods) naming its replica of the replicatedJob (TJ §6.1).
JOB_INDEX_LABEL = ex.JOBSET_OWN_LABELS[3]


class KaiPodgrouper(Simulation):
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
                changed |= job is not None and self._group_by_job(job, pod)
                continue
            # Without TrainJob RBAC the owner walk stops at the JobSet (KAI §4.6): no TrainJob metadata is merged.
            trainjob = None if self.faults.podgrouper_without_trainjob_rbac else self._owner(jobset, kinds.TRAIN_JOB)
            name = ex.POD_GROUP_NAME_FORMAT.format(jobset=jobset["metadata"]["name"], uid=uid_of(jobset))
            if self._peek(kinds.POD_GROUP, name, pod["metadata"]["namespace"]) is None:
                self.fake.write(self._broken_floor(self._podgroup_for(name, jobset, trainjob, pod)))
                changed = True
            elif self.faults.podgrouper_moves_queue:
                wanted = self._podgroup_for(name, jobset, trainjob, pod)
                existing = self._find(kinds.POD_GROUP, name, pod["metadata"]["namespace"])
                if existing["spec"]["queue"] != wanted["spec"]["queue"]:
                    existing["spec"]["queue"] = wanted["spec"]["queue"]
                    self.fake.write(existing)
                    changed = True
            job_labels = job["metadata"]["labels"]
            subgroup = self.row.subgroup_of(job_labels[REPLICATED_JOB_LABEL], int(job_labels.get(JOB_INDEX_LABEL, 0)))
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
                self.fake.write(pod)
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
        key = self.faults.podgrouper_queue_label or ex.QUEUE_LABEL
        queue = top_labels.get(key) or labels_of(pod).get(key) or ex.DEFAULT_QUEUE
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
        return self._decorate_podgroup({
            "apiVersion": kinds.POD_GROUP.api_version,
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": jobset["metadata"]["namespace"], "labels": top_labels,
                         "annotations": {ex.TOP_OWNER_ANNOTATION: top_owner, **top_annotations},
                         "ownerReferences": [self._ref(jobset, controller=False)]},
            "spec": {"queue": queue, "priorityClassName": priority or ex.DEFAULT_PRIORITY_CLASS, **shape},
            "status": {},
        }, jobset, top_annotations)  # fmt: skip

    def _broken_floor(self, pg: Obj) -> Obj:
        """``Faults.podgrouper_gang_floor``: that floor instead of the chain's, in every leaf SubGroup or the flat spec."""
        floor = self.faults.podgrouper_gang_floor
        for holder in [pg["spec"], *(pg["spec"].get("subGroups") or [])] if floor is not None else []:
            if "minMember" in holder:
                holder["minMember"] = floor
        return pg

    def _decorate_podgroup(self, pg: Obj, jobset: Obj, top_annotations: dict[str, str]) -> Obj:
        """Extension point for area mixins (tests/fakes/kai/*.py): more of what the podgrouper writes."""
        return pg

    def _group_by_job(self, job: Obj, pod: Obj) -> bool:
        """K8sJobGrouper for a Job without owner (hub.go: batch/v1 Job): one flat PodGroup ``pg-<job>-<job uid>``
        owned by the Job, ``minMember`` from ``kai.scheduler/batch-min-member`` or 1 (job_grouper.go, v0.16/v0.17)."""
        if job["metadata"].get("ownerReferences"):
            return False
        name = ex.POD_GROUP_NAME_FORMAT.format(jobset=job["metadata"]["name"], uid=uid_of(job))
        changed = False
        if self._find(kinds.POD_GROUP, name, job["metadata"]["namespace"]) is None:
            top_owner = yaml.safe_dump({"name": job["metadata"]["name"], "uid": uid_of(job), "group": "batch",
                                        "version": "v1", "kind": "Job"}, sort_keys=False)  # fmt: skip
            annotations = job["metadata"].get("annotations") or {}
            queue = labels_of(job).get(ex.QUEUE_LABEL) or labels_of(pod).get(ex.QUEUE_LABEL) or ex.DEFAULT_QUEUE
            self.fake.write({
                "apiVersion": kinds.POD_GROUP.api_version,
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": job["metadata"]["namespace"], "labels": labels_of(job),
                             "annotations": {ex.TOP_OWNER_ANNOTATION: top_owner, **annotations},
                             "ownerReferences": [self._ref(job, controller=False)]},
                "spec": {"queue": queue, "priorityClassName": ex.DEFAULT_PRIORITY_CLASS,
                         "minMember": int(annotations.get(ex.MIN_MEMBER_ANNOTATION, 1))},
                "status": {},
            })  # fmt: skip
            changed = True
        pod_annotations = pod["metadata"].setdefault("annotations", {})
        if pod_annotations.get(ex.POD_GROUP_ANNOTATION) != name:
            pod_annotations[ex.POD_GROUP_ANNOTATION] = name
            self.fake.write(pod)
            changed = True
        return changed
