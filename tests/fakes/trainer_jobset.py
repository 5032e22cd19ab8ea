"""Simulated Trainer and JobSet controllers: TrainJob → JobSet (runtime template, runtime patches, numNodes and
resourcesPerNode on the trainer ancestor), JobSet → one Job per replicatedJob replica, honouring dependsOn and suspend.
"""

from __future__ import annotations

from kai_conformance.clusters.suite_stack import TRAINER_ANCESTOR_LABEL
from kai_conformance.fixtures import kinds
from kai_conformance.suites.support import expectations as ex
from kai_conformance.suites.support.snapshot import is_terminating, labels_of, uid_of
from tests.fakes.kube import clone
from tests.fakes.simulation import REPLICATED_JOB_LABEL, Obj, Simulation, merge_metadata


class TrainerAndJobSet(Simulation):
    # ------------------------------------------------------------------------------------------------ Trainer
    def trainer(self) -> bool:
        changed = False
        for tj in self._all(kinds.TRAIN_JOB):
            meta = tj["metadata"]
            suspended = bool(tj["spec"].get("suspend"))
            jobset = self._peek(kinds.JOB_SET, meta["name"], meta["namespace"])
            if jobset is None:
                runtime = self._runtime_of(tj)
                if runtime is not None:
                    self.fake.write(self._jobset_for(tj, runtime))
                    changed = True
            elif bool(jobset["spec"].get("suspend")) != suspended:
                jobset = self._find(kinds.JOB_SET, meta["name"], meta["namespace"])
                jobset["spec"]["suspend"] = suspended
                self.fake.write(jobset)
                changed = True
            else:
                changed |= self._trainjob_finished(tj, jobset)
        return changed

    def _trainjob_finished(self, tj: Obj, jobset: Obj) -> bool:
        """A finished JobSet finishes its TrainJob (``Completed`` → ``Complete``, ``Failed`` → ``Failed``)."""
        ended = true_conditions(jobset)
        for jobset_type, trainjob_type in (("Completed", "Complete"), ("Failed", "Failed")):
            if jobset_type in ended:
                return self._add_terminal_condition(tj, trainjob_type, f"JobSet{jobset_type}")
        return False

    def _add_terminal_condition(self, obj: Obj, condition: str, reason: str) -> bool:
        """Add the terminal condition ``condition`` once."""
        if condition in true_conditions(obj):
            return False
        obj.setdefault("status", {}).setdefault("conditions", []).append(
            {"type": condition, "status": "True", "reason": reason, "lastTransitionTime": self._now()}
        )
        self.fake.write(obj)
        return True

    def _runtime_of(self, tj: Obj) -> Obj | None:
        ref = tj["spec"]["runtimeRef"]
        if ref.get("kind") == kinds.TRAINING_RUNTIME.kind:
            return self._find(kinds.TRAINING_RUNTIME, ref["name"], tj["metadata"]["namespace"])
        return self._find(kinds.CLUSTER_TRAINING_RUNTIME, ref["name"], None)

    def _jobset_for(self, tj: Obj, runtime: Obj) -> Obj:
        template = clone(runtime["spec"]["template"])
        meta = template.get("metadata") or {}
        labels, annotations = dict(meta.get("labels") or {}), dict(meta.get("annotations") or {})
        rjobs = template["spec"]["replicatedJobs"]
        for patch in tj["spec"].get("runtimePatches") or []:
            patched = patch["trainingRuntimeSpec"]["template"]
            labels.update((patched.get("metadata") or {}).get("labels") or {})
            annotations.update((patched.get("metadata") or {}).get("annotations") or {})
            for rjob_patch in (patched.get("spec") or {}).get("replicatedJobs") or []:
                rjob = next(r for r in rjobs if r["name"] == rjob_patch["name"])
                merge_metadata(rjob["template"], rjob_patch["template"].get("metadata"))
                pod_patch = ((rjob_patch["template"].get("spec") or {}).get("template") or {}).get("metadata")
                merge_metadata(rjob["template"]["spec"]["template"], pod_patch)
        trainer = tj["spec"].get("trainer") or {}
        for rjob in rjobs:
            pod_template = rjob["template"]["spec"]["template"]
            if self.faults.trainer_copies_trainjob_labels:
                merge_metadata(pod_template, {"labels": labels_of(tj)})
            job_spec = rjob["template"]["spec"]
            if (rjob["template"].get("metadata") or {}).get("labels", {}).get(TRAINER_ANCESTOR_LABEL) == "trainer":
                job_spec["parallelism"] = trainer.get("numNodes", 1)
            # Trainer sets parallelism = completions on every replicatedJob (upstream-facts A3).
            job_spec.setdefault("parallelism", 1)
            job_spec["completions"] = job_spec["parallelism"]
            if (rjob["template"].get("metadata") or {}).get("labels", {}).get(TRAINER_ANCESTOR_LABEL) == "trainer":
                node = next(c for c in pod_template["spec"]["containers"] if c["name"] == "node")
                node["resources"] = clone(trainer.get("resourcesPerNode") or node.get("resources") or {})
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
            changed |= self._jobset_finished(js)
            ns, suspended = js["metadata"]["namespace"], bool(js["spec"].get("suspend"))
            for rjob in js["spec"]["replicatedJobs"]:
                if not self._dependencies_ready(js, rjob):
                    continue
                for index in range(rjob.get("replicas", 1)):
                    name = f"{js['metadata']['name']}-{rjob['name']}-{index}"
                    job = self._peek(kinds.JOB, name, ns)
                    if job is None:
                        self.fake.write(self._job_for(js, rjob, index, name))
                        changed = True
                    elif bool(job["spec"].get("suspend")) != suspended:
                        job = self._find(kinds.JOB, name, ns)
                        job["spec"]["suspend"] = suspended
                        self.fake.write(job)
                        changed = True
        return changed

    def _jobset_finished(self, js: Obj) -> bool:
        """JobSet's defaults: ``Completed`` once all its Jobs are ``Complete`` (success policy ``All``), ``Failed``
        as soon as one Job failed (failure policy without restarts)."""
        jobs = self._owned(kinds.JOB, js)
        ended = [true_conditions(j) for j in jobs]
        if any("Failed" in e for e in ended):
            return self._add_terminal_condition(js, "Failed", "FailedJobs")
        expected = sum(r.get("replicas", 1) for r in js["spec"]["replicatedJobs"])
        if len(jobs) == expected and all("Complete" in e for e in ended):
            return self._add_terminal_condition(js, "Completed", "AllJobsCompleted")
        return False

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
        pod_template = clone(rjob["template"]["spec"]["template"])
        merge_metadata(pod_template, {"labels": own})
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": js["metadata"]["namespace"],
                         "labels": {**(job_meta.get("labels") or {}), **own},
                         "annotations": dict(job_meta.get("annotations") or {}), "ownerReferences": [self._ref(js)]},
            # The Job template's own fields (completionMode, backoffLimitPerIndex, ...) are copied as JobSet does.
            "spec": {**clone(rjob["template"]["spec"]),
                     "parallelism": rjob["template"]["spec"].get("parallelism", 1),
                     "suspend": bool(js["spec"].get("suspend")), "template": pod_template},
        }  # fmt: skip


def true_conditions(obj: Obj) -> set[str]:
    return {c["type"] for c in (obj.get("status") or {}).get("conditions") or [] if c.get("status") == "True"}
