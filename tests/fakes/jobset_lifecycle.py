"""Simulated JobSet controller, the part that ends a JobSet or restarts it (facts and sources:
suites/support/expectations/lifecycle.py; pkg/controllers/jobset_controller.go ``Reconcile`` and
pkg/controllers/failure_policy.go at v0.11.1 and v0.12.0), before the JobSet creates its missing Jobs:

* Jobs whose ``jobset.sigs.k8s.io/restart-attempt`` label is below ``status.restarts`` belong to a previous attempt
  (``getChildJobs``): they are deleted with foreground propagation (``deleteJobs``), which the garbage collector
  carries out here: the Job gets a ``deletionTimestamp`` and the ``foregroundDeletion`` finalizer, its pods are
  deleted (API-server semantics: a running pod terminates first, tests/fakes/kubelet.py), and the Job goes once it
  owns no pod. The JobSet recreates a Job only once no Job of that name is left (``shouldCreateJob``), under the
  new attempt's label.
* A finished JobSet deletes its active Jobs the same way and does nothing else.
* A failed Job of the current attempt: without ``failurePolicy``, ``Failed``/``FailedJobs``; with one (rules are not
  modelled: the default action ``RestartJobSet``), ``restarts`` and ``restartsCountTowardsMax`` + 1 and a
  ``Restarting`` Warning event, or ``Failed``/``ReachedMaxRestarts`` once ``restartsCountTowardsMax`` has reached
  ``maxRestarts``. Messages name the first failed Job.
* Every Job of the current attempt ``Complete`` (success policy ``All``): ``Completed``/``AllJobsCompleted``.
* A finished JobSet with ``ttlSecondsAfterFinished`` is deleted (background propagation) once that many seconds have
  passed since its ``Completed`` or ``Failed`` condition (pkg/controllers/ttl_after_finished.go).
* v0.12 (``RestartingJobSet``): True at a restart (``DefaultFailurePolicy``), False once every Job is ready again
  (``JobsReady``: each Job's pods running), False at the end (``JobSetFailed``, ``JobSetCompleted``) or when
  suspended (``JobSetSuspended``); False only ever updates an existing condition (``updateCondition``). v0.11 has
  none. ``Suspended`` True (``SuspendedJobs``) while suspended, False (``ResumeJobs``) after (both versions).

The JobSet version is :attr:`JobSetLifecycle.jobset_version` (default: the suite's default combination's).
"""

from __future__ import annotations

from kai_conformance.fixtures.kube import kinds
from kai_conformance.suites.support.expectations.lifecycle import (
    ALL_JOBS_COMPLETED,
    FAILED_JOBS,
    JOBSET_LIFECYCLE_ROWS,
    JOBSET_RESTARTING,
    REACHED_MAX_RESTARTS,
    RESTART_ATTEMPT_LABEL,
    RESTARTING_ENDED_BY_FAILURE,
)
from kai_conformance.suites.support.expectations.version_rows import minor
from kai_conformance.suites.support.snapshot import is_running, labels_of, parse_time
from tests.fakes.simulation import Obj, Simulation

FOREGROUND_FINALIZER = "foregroundDeletion"
MESSAGES = {
    FAILED_JOBS: "jobset failed due to one or more job failures",
    REACHED_MAX_RESTARTS: "jobset failed due to reaching max number of restarts",
    ALL_JOBS_COMPLETED: "jobset completed successfully",
}


def true_conditions(obj: Obj) -> set[str]:
    return {c["type"] for c in (obj.get("status") or {}).get("conditions") or [] if c.get("status") == "True"}


def attempt(job: Obj) -> int:
    return int(labels_of(job).get(RESTART_ATTEMPT_LABEL, "0"))


class JobSetLifecycle(Simulation):
    jobset_version = "v0.12.0"

    def _jobset_lifecycle(self, js: Obj) -> tuple[bool, bool]:
        """Ends, restarts and deletes what the JobSet's state asks for; (whether anything changed, whether the JobSet
        goes on to create and suspend or resume its Jobs)."""
        status = js.setdefault("status", {})
        before = repr(status)
        jobs = self._owned(kinds.JOB, js)
        changed = self._finish_foreground(jobs)
        current = [j for j in jobs if attempt(j) >= status.get("restarts", 0)]
        previous = [j for j in jobs if attempt(j) < status.get("restarts", 0)]
        ended = {"Completed", "Failed"} & true_conditions(js)
        if ended and self._ttl_expired(js):
            self.fake._remove(kinds.JOB_SET, js["metadata"]["namespace"], js["metadata"]["name"])
            return True, False
        for job in previous + (
            [j for j in current if not ({"Complete", "Failed"} & true_conditions(j))] if ended else []
        ):
            changed |= self._delete_foreground(job)
        proceed = not ended
        if proceed:
            restarting = JOBSET_LIFECYCLE_ROWS[minor(self.jobset_version)].restarting_condition
            if restarting and not js["spec"].get("suspend") and self._jobset_jobs_ready(js, current):
                self._set_jobset_condition(js, JOBSET_RESTARTING, "False", "JobsReady", "all jobs are ready")
            failed = [j for j in current if "Failed" in true_conditions(j)]
            if failed:
                self._apply_failure_policy(js, failed[0]["metadata"]["name"], restarting)
                proceed = False
            elif (
                self._jobset_jobs_expected(js)
                and all("Complete" in true_conditions(j) for j in current)
                and len(current) == self._jobset_jobs_expected(js)
            ):
                self._set_jobset_condition(js, "Completed", "True", ALL_JOBS_COMPLETED, MESSAGES[ALL_JOBS_COMPLETED])
                if restarting:
                    self._set_jobset_condition(
                        js, JOBSET_RESTARTING, "False", "JobSetCompleted", MESSAGES[ALL_JOBS_COMPLETED]
                    )
                proceed = False
            elif js["spec"].get("suspend"):
                self._set_jobset_condition(js, "Suspended", "True", "SuspendedJobs", "jobset is suspended")
                if restarting:
                    self._set_jobset_condition(js, JOBSET_RESTARTING, "False", "JobSetSuspended", "jobset is suspended")
            else:
                self._set_jobset_condition(js, "Suspended", "False", "ResumeJobs", "jobset is resumed")
        if repr(status) != before:
            self.fake.write(js)
            changed = True
        return changed, proceed

    def _ttl_expired(self, js: Obj) -> bool:
        ttl = js["spec"].get("ttlSecondsAfterFinished")
        if ttl is None:
            return False
        ended_at = [parse_time(c.get("lastTransitionTime")) for c in js["status"].get("conditions") or []
                    if c.get("type") in ("Completed", "Failed") and c.get("status") == "True"]  # fmt: skip
        first = min((t for t in ended_at if t is not None), default=None)
        return first is not None and self.fake.clock().timestamp() >= first + ttl

    def _apply_failure_policy(self, js: Obj, first_failed: str, restarting: bool) -> None:
        status, policy = js["status"], js["spec"].get("failurePolicy")
        if policy is None:
            return self._fail_jobset(js, FAILED_JOBS, first_failed, restarting)
        if status.get("restartsCountTowardsMax", 0) >= policy.get("maxRestarts", 0):
            return self._fail_jobset(js, REACHED_MAX_RESTARTS, first_failed, restarting)
        status["restarts"] = status.get("restarts", 0) + 1
        status["restartsCountTowardsMax"] = status.get("restartsCountTowardsMax", 0) + 1
        message = f"applying RestartJobSet failure policy action (first failed job: {first_failed})"
        if restarting:
            self._set_jobset_condition(js, JOBSET_RESTARTING, "True", "DefaultFailurePolicy", message)
        self.fake.record_event(js, "RestartJobSetFailurePolicyAction", message, "Warning")
        return None

    def _fail_jobset(self, js: Obj, reason: str, first_failed: str, restarting: bool) -> None:
        self._set_jobset_condition(
            js, "Failed", "True", reason, f"{MESSAGES[reason]} (first failed job: {first_failed})"
        )
        js["status"]["terminalState"] = "Failed"
        if restarting:
            self._set_jobset_condition(js, JOBSET_RESTARTING, "False", RESTARTING_ENDED_BY_FAILURE, "jobset failed")

    def _set_jobset_condition(self, js: Obj, kind: str, value: str, reason: str, message: str) -> None:
        """``updateCondition``: a changed status or reason replaces the condition; a False one is never added."""
        conditions = js["status"].setdefault("conditions", [])
        for index, found in enumerate(conditions):
            if found.get("type") == kind:
                if (found.get("status"), found.get("reason"), found.get("message")) != (value, reason, message):
                    stamp = self._now() if found.get("status") != value else found.get("lastTransitionTime")
                    conditions[index] = {"type": kind, "status": value, "reason": reason, "message": message,
                                         "lastTransitionTime": stamp}  # fmt: skip
                return
        if value == "True":
            conditions.append({"type": kind, "status": value, "reason": reason, "message": message,
                               "lastTransitionTime": self._now()})  # fmt: skip

    @staticmethod
    def _jobset_jobs_expected(js: Obj) -> int:
        return sum(r.get("replicas", 1) for r in js["spec"]["replicatedJobs"])

    def _jobset_jobs_ready(self, js: Obj, jobs: list[Obj]) -> bool:
        """Every Job of the attempt exists and runs all its pods (``allJobsReady``: ready + succeeded per Job)."""
        if len(jobs) < self._jobset_jobs_expected(js):
            return False
        for job in jobs:
            pods = [p for p in self._owned(kinds.POD, job) if is_running(p)]
            if len(pods) < job["spec"].get("parallelism", 1):
                return False
        return True

    def _delete_foreground(self, job: Obj) -> bool:
        """DELETE with ``propagationPolicy: Foreground``: the Job stays, finalized, until its pods are gone."""
        meta = job["metadata"]
        if meta.get("deletionTimestamp"):
            return False
        meta["deletionTimestamp"] = self._now()
        meta["finalizers"] = [*(meta.get("finalizers") or []), FOREGROUND_FINALIZER]
        self.fake.write(job)
        for pod in self._owned(kinds.POD, job):
            self._api_delete(self._find(kinds.POD, pod["metadata"]["name"], pod["metadata"]["namespace"]))
        return True

    def _finish_foreground(self, jobs: list[Obj]) -> bool:
        """The garbage collector's part: a Job deleted in the foreground goes once it owns no pod."""
        changed = False
        for job in jobs:
            if job["metadata"].get("deletionTimestamp") and not self.fake.owned_by(kinds.POD, job["metadata"]["uid"]):
                self.fake._remove(kinds.JOB, job["metadata"]["namespace"], job["metadata"]["name"])
                changed = True
        return changed
