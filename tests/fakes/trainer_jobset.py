"""Simulated Trainer and JobSet controllers: TrainJob → JobSet (runtime template, runtime patches, numNodes,
resourcesPerNode and env on the trainer ancestor), JobSet → one Job per replicatedJob replica, honouring dependsOn and
suspend; how a JobSet ends or restarts is tests/fakes/jobset_lifecycle.py.

Trainer's status (pkg/controller/trainjob_controller.go and pkg/runtime/framework/plugins/jobset/jobset.go
``Status``, v2.2.0 = v2.3.0): ``Suspended`` True/``Suspended`` while ``spec.suspend``, False/``Resumed`` after;
the JobSet's ``Completed`` and ``Failed`` become the TrainJob's ``Complete`` and ``Failed`` with the JobSet's reason
and message (``meta.SetStatusCondition``); a finished TrainJob's JobSet is no longer changed
(``IsTrainJobFinished``). Where the Trainer version has Trainer #3779 / #3737 (suites/support/known_bugs.py:
v2.0.0–v2.3.0), every reconcile first removes the ``Failed`` condition (``removeFailedCondition``) and puts it back
from the JobSet's status: once the failed JobSet is gone the TrainJob looks unfinished and a new JobSet is made.
"""

from __future__ import annotations

from kai_conformance.clusters.suite_stack import TRAINER_ANCESTOR_LABEL
from kai_conformance.fixtures.kube import kinds
from kai_conformance.suites.support import expectations as ex
from kai_conformance.suites.support.expectations.lifecycle import RESTART_ATTEMPT_LABEL
from kai_conformance.suites.support.known_bugs import BY_KEY
from kai_conformance.suites.support.snapshot import is_terminating, labels_of, uid_of
from tests.fakes.jobset_lifecycle import JobSetLifecycle, true_conditions
from tests.fakes.kube import clone
from tests.fakes.simulation import REPLICATED_JOB_LABEL, Obj, merge_metadata

#: Trainer's messages for its ``Suspended`` condition (pkg/constants/constants.go).
SUSPENDED = ("True", "Suspended", "TrainJob is suspended")
RESUMED = ("False", "Resumed", "TrainJob is resumed")


class TrainerAndJobSet(JobSetLifecycle):
    #: Whether Trainer removes a TrainJob's Failed condition at every reconcile (Trainer #3779, #3737); None: as the
    #: known-bugs table says of the Trainer version. A flow sets it to show a Trainer with the bug where it is fixed.
    removes_failed_condition: bool | None = None

    # ------------------------------------------------------------------------------------------------ Trainer
    def trainer(self) -> bool:
        changed = False
        for tj in self._all(kinds.TRAIN_JOB):
            meta = tj["metadata"]
            suspended = bool(tj["spec"].get("suspend"))
            jobset = self._peek(kinds.JOB_SET, meta["name"], meta["namespace"])
            if jobset is None and "Failed" in true_conditions(tj) and self._removes_failed_condition:
                tj["status"]["conditions"] = [c for c in tj["status"]["conditions"] if c["type"] != "Failed"]
                self.fake.write(tj)
                changed = True
            finished = bool({"Complete", "Failed"} & true_conditions(tj))
            if jobset is None and not finished:
                runtime = self._runtime_of(tj)
                if runtime is not None:
                    jobset = self._jobset_for(tj, runtime)
                    self.fake.write(jobset)
                    changed = True
            elif jobset is not None and not finished and bool(jobset["spec"].get("suspend")) != suspended:
                if self.faults.jobset_webhook_refuses_suspend:
                    changed |= self._refused_apply(tj)
                    continue
                jobset = self._find(kinds.JOB_SET, meta["name"], meta["namespace"])
                jobset["spec"]["suspend"] = suspended
                self.fake.write(jobset)
                changed = True
            changed |= self._trainjob_status(tj, jobset)
        return changed

    def _refused_apply(self, tj: Obj) -> bool:
        """Trainer's event for an apply JobSet's webhook refused (trainjob_controller.go Reconcile), once."""
        text = (
            'TrainJob resources reconciliation failed: admission webhook "vjobset.kb.io" denied the request: '
            "spec.replicatedJobs: Invalid value: []v1alpha2.ReplicatedJob(nil): field is immutable"
        )
        if any(e["message"] == text and e["involvedObject"]["uid"] == uid_of(tj) for e in self._all(kinds.EVENT)):
            return False
        self.fake.record_event(tj, "TrainJobResourcesCreationFailed", text, "Warning")
        return True

    @property
    def _removes_failed_condition(self) -> bool:
        if self.removes_failed_condition is not None:
            return self.removes_failed_condition
        return bool(BY_KEY["Trainer #3779"].affects(self.trainer_version))

    def _trainjob_status(self, tj: Obj, jobset: Obj | None) -> bool:
        """``setSuspendedCondition``, then the JobSet's terminal conditions (module docstring)."""
        conditions = [dict(c) for c in (tj.get("status") or {}).get("conditions") or []]
        before = repr(conditions)
        suspended = next((c for c in conditions if c["type"] == "Suspended"), None)
        if tj["spec"].get("suspend"):
            self._set_trainjob_condition(conditions, "Suspended", *SUSPENDED)
        elif suspended is not None and suspended.get("status") == "True":
            self._set_trainjob_condition(conditions, "Suspended", *RESUMED)
        for jobset_type, trainjob_type in (("Completed", "Complete"), ("Failed", "Failed")):
            found = next((c for c in ((jobset or {}).get("status") or {}).get("conditions") or []
                          if c.get("type") == jobset_type and c.get("status") == "True"), None)  # fmt: skip
            if found is not None:
                self._set_trainjob_condition(
                    conditions, trainjob_type, "True", found.get("reason", ""), found.get("message", "")
                )
        if repr(conditions) == before:
            return False
        tj.setdefault("status", {})["conditions"] = conditions
        self.fake.write(tj)
        return True

    def _set_trainjob_condition(self, conditions: list[Obj], kind: str, value: str, reason: str, message: str) -> None:
        """``meta.SetStatusCondition``: the transition time moves only when the status does."""
        found = next((c for c in conditions if c["type"] == kind), None)
        if found is None:
            conditions.append({"type": kind, "status": value, "reason": reason, "message": message,
                               "lastTransitionTime": self._now()})  # fmt: skip
        elif (found.get("status"), found.get("reason"), found.get("message")) != (value, reason, message):
            if found.get("status") != value:
                found["lastTransitionTime"] = self._now()
            found.update(status=value, reason=reason, message=message)

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
                # builder.go Trainer: apply.UpsertEnvVars(node.Env, trainJob.Spec.Trainer.Env...) (by name)
                env = [
                    v for v in node.get("env") or [] if v["name"] not in {e["name"] for e in trainer.get("env") or []}
                ]
                if trainer.get("env"):
                    node["env"] = env + clone(trainer["env"])
        return {
            "apiVersion": ex.JOBSET_API_VERSION,
            "kind": "JobSet",
            "metadata": {"name": tj["metadata"]["name"], "namespace": tj["metadata"]["namespace"], "labels": labels,
                         "annotations": annotations, "ownerReferences": [self._ref(tj)]},
            # The runtime's whole JobSetSpec (failurePolicy, successPolicy, ...) with Trainer's changes (TJ §2.2).
            "spec": {**template["spec"], "replicatedJobs": rjobs, "suspend": bool(tj["spec"].get("suspend"))},
        }  # fmt: skip

    # ------------------------------------------------------------------------------------------------- JobSet
    def jobsets(self) -> bool:
        changed = False
        for js in self._all(kinds.JOB_SET):
            step, proceed = self._jobset_lifecycle(js)
            changed |= step
            if not proceed:
                continue
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
                    elif not job["metadata"].get("deletionTimestamp") and (
                        bool(job["spec"].get("suspend")) != suspended
                    ):
                        job = self._find(kinds.JOB, name, ns)
                        job["spec"]["suspend"] = suspended
                        self.fake.write(job)
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
        # labelAndAnnotateObject: the attempt as label and annotation, on the Job and its pod template
        own[RESTART_ATTEMPT_LABEL] = str((js.get("status") or {}).get("restarts", 0))
        job_meta = rjob["template"].get("metadata") or {}
        pod_template = clone(rjob["template"]["spec"]["template"])
        merge_metadata(
            pod_template, {"labels": own, "annotations": {RESTART_ATTEMPT_LABEL: own[RESTART_ATTEMPT_LABEL]}}
        )
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
