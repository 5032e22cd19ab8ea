"""Simulated Job controller for the suite's Jobs: Indexed, ``restartPolicy: Never``, ``backoffLimitPerIndex``.

What it keeps of pkg/controller/job (job_controller.go, indexed_job_utils.go, backoff_utils.go):

* One pod per index, created with the tracking finalizer ``batch.kubernetes.io/job-tracking``; the finalizer is
  removed once the pod is counted (``trackJobStatusAndRemoveFinalizers``).
* A ``Succeeded`` pod completes its index (``status.succeeded``, ``completedIndexes``); a completed index is never
  run again. Once every index completed, the Job is ``Complete``.
* A pod is *failed* when ``Failed``, or when it is being deleted and not ``Succeeded`` (``isPodFailed`` under the
  default ``podReplacementPolicy: TerminatingOrFailed``; pkg/apis/batch/v1/defaults.go picks ``Failed`` only with a
  ``podFailurePolicy``). Its finalizer stays until a replacement exists, so the replacement can inherit the index's
  failure count (``canRemoveFinalizer`` / ``getPodsWithDelayedDeletionPerIndex``); then ``status.failed`` counts it.
* An index whose pod a kubelet is still ending is not replaced yet: a kubelet ends a deleted pod within seconds
  (the grace period, at least 2 s), sooner than the back-off below lets a replacement in (10 s at least), so on a
  real cluster the old pod is always terminal first. The simulation keeps that order whatever the back-off.
* The replacement comes :attr:`~tests.fakes.simulation.Simulation.pod_failure_backoff` × 2^(failures−1) after the
  failure (capped at 10 min; ``getRemainingTimePerIndex``), with ``batch.kubernetes.io/job-index-failure-count``.
  An index whose failures exceed ``backoffLimitPerIndex`` is failed (``failedIndexes``) and the Job with it.
* Suspending a Job deletes its active pods (finalizer first, as ``deleteJobPods`` does); they count for nothing.
* A Job-wide ``backoffLimit`` (no per-index limit): once more pods failed than the limit (default 6), the Job gets
  ``FailureTarget`` (``BackoffLimitExceeded``, "Job has reached the specified backoff limit"), its active pods are
  deleted (``deleteActivePods``, finalizers kept until counted), and ``Failed`` with the same reason follows once no
  pod is left running or terminating (``delayTerminalCondition``, Kubernetes 1.31 and later). Its failed pods are
  counted at once: only a per-index limit keeps them for their replacement.
* Every container of an Indexed Job's pods gets ``JOB_COMPLETION_INDEX`` from the pod's completion-index label
  (``addCompletionIndexEnvVariable``, label fieldRef with ``PodIndexLabel``), and the pod the index as annotation too.
* A Job being deleted (the JobSet deletes a previous attempt's Jobs with foreground propagation) creates no pod; the
  finalizers of its pods that ended or are being deleted are removed (what ``trackJobStatusAndRemoveFinalizers``
  does for a removed Job).

Hence the trap an evicted pod can fall into: deleted, it is *failed* only until the kubelet ends it; if its
containers exit 0 it turns ``Succeeded`` before the back-off lets a replacement in, and its index is complete.
"""

from __future__ import annotations

from kai_conformance.clusters.suite_stack import COMPLETION_INDEX_ENV
from kai_conformance.fixtures.kube import kinds
from kai_conformance.suites.support.snapshot import is_bound, is_terminating, labels_of, parse_time
from tests.fakes.kube import clone
from tests.fakes.simulation import INDEX_LABEL, JOB_NAME_LABEL, JOB_TRACKING_FINALIZER, Obj, Simulation

INDEX_FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"
#: pkg/controller/job/job_controller.go ``MaxJobPodFailureBackOff``.
MAX_POD_FAILURE_BACKOFF = 600.0


def index_of(pod: Obj) -> int:
    return int(labels_of(pod)[INDEX_LABEL])


def failure_count(pod: Obj) -> int:
    return int((pod["metadata"].get("annotations") or {}).get(INDEX_FAILURE_COUNT, "0"))


def is_finished(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_active(pod: Obj) -> bool:
    return not is_terminating(pod) and not is_finished(pod)


def is_failed(pod: Obj) -> bool:
    """``isPodFailed`` with ``podReplacementPolicy: TerminatingOrFailed``."""
    phase = (pod.get("status") or {}).get("phase")
    return phase == "Failed" or (is_terminating(pod) and phase != "Succeeded")


def format_indexes(indexes: set[int]) -> str:
    """``{0, 1, 2, 5}`` → ``0-2,5`` (the form of ``completedIndexes`` and ``failedIndexes``)."""
    parts: list[str] = []
    for ix in sorted(indexes):
        if parts and int(parts[-1].rsplit("-", 1)[-1]) == ix - 1:
            parts[-1] = f"{parts[-1].split('-')[0]}-{ix}"
        else:
            parts.append(str(ix))
    return ",".join(parts)


def parse_indexes(text: str | None) -> set[int]:
    found: set[int] = set()
    for part in filter(None, (text or "").split(",")):
        first, _, last = part.partition("-")
        found.update(range(int(first), int(last or first) + 1))
    return found


def backoff_seconds(base: float, failures: int) -> float:
    return min(base * 2 ** max(failures - 1, 0), MAX_POD_FAILURE_BACKOFF)


def finished_at(pod: Obj) -> float | None:
    """When the pod failed: its containers' end, else its deletion (``getFinishedTime``)."""
    ends = [
        parse_time(((s.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        for s in (pod.get("status") or {}).get("containerStatuses") or []
    ]
    ends = [e for e in ends if e is not None]
    return max(ends) if ends else parse_time(pod["metadata"].get("deletionTimestamp"))


class JobController(Simulation):
    def jobs(self) -> bool:
        changed = False
        for job in self._all(kinds.JOB):
            pods = self._owned(kinds.POD, job)
            if job["metadata"].get("deletionTimestamp"):
                for pod in pods:
                    if is_finished(pod) or is_terminating(pod):
                        self._drop_finalizer(pod, JOB_TRACKING_FINALIZER)
                        changed = True
                continue
            if job["spec"].get("suspend"):
                for pod in filter(is_active, pods):
                    self._drop_finalizer(pod, JOB_TRACKING_FINALIZER)
                    self._api_delete(self._find(kinds.POD, pod["metadata"]["name"], pod["metadata"]["namespace"]))
                    changed = True
                continue
            changed |= self._track(job, pods)
        return changed

    # ------------------------------------------------------------------------------------------------ status
    def _track(self, job: Obj, pods: list[Obj]) -> bool:
        before = clone(job.get("status") or {})
        status = job.setdefault("status", {})
        completions = job["spec"].get("completions", job["spec"].get("parallelism", 1))
        limit = job["spec"].get("backoffLimitPerIndex")
        succeeded = parse_indexes(status.get("completedIndexes"))
        failed_indexes = parse_indexes(status.get("failedIndexes"))
        finished = self._condition(job) is not None
        counted = [p for p in pods if JOB_TRACKING_FINALIZER in (p["metadata"].get("finalizers") or [])]
        for pod in counted:
            if is_failed(pod) and limit is not None and failure_count(pod) + 1 > limit:
                failed_indexes.add(index_of(pod))
        # Only a per-index limit keeps a failed pod until its replacement (getPodsWithDelayedDeletionPerIndex).
        waiting = self._awaiting_replacement(pods, succeeded | failed_indexes) if limit is not None else {}
        kept = {p["metadata"]["uid"] for p in waiting.values()}
        changed = False
        for pod in counted:
            if (pod.get("status") or {}).get("phase") == "Succeeded":
                if index_of(pod) not in failed_indexes:
                    succeeded.add(index_of(pod))
            elif is_failed(pod) or finished:
                if pod["metadata"]["uid"] in kept and not finished:
                    continue  # kept until its replacement exists, which inherits its failure count
                status["failed"] = status.get("failed", 0) + 1
            else:
                continue
            self._drop_finalizer(pod, JOB_TRACKING_FINALIZER)
            changed = True
        status["succeeded"] = len(succeeded)
        status["completedIndexes"] = format_indexes(succeeded)
        if limit is not None:
            status["failedIndexes"] = format_indexes(failed_indexes)
        status["active"] = sum(1 for p in pods if is_active(p))
        target = self._failure_target(job, limit)
        if not finished and target is not None:
            for pod in filter(is_active, pods):  # deleteActivePods: counted as failed once terminating (above)
                self._api_delete(self._find(kinds.POD, pod["metadata"]["name"], pod["metadata"]["namespace"]))
                changed = True
            if not any(is_active(p) or is_terminating(p) for p in pods):
                self._finish_job(job, "Failed", target["reason"], target["message"])
        elif not finished:
            if len(succeeded) >= completions:
                self._finish_job(job, "Complete", "CompletionsReached", "Reached expected number of succeeded pods")
            elif failed_indexes and len(succeeded | failed_indexes) >= completions:
                self._finish_job(job, "Failed", "FailedIndexes", "Job has failed indexes")
            else:
                changed |= self._replace(job, pods, succeeded | failed_indexes, completions, waiting)
        if status != before:
            self.fake.write(job)
            changed = True
        return changed

    @staticmethod
    def _condition(job: Obj) -> str | None:
        for condition in (job.get("status") or {}).get("conditions") or []:
            if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
                return condition["type"]
        return None

    def _failure_target(self, job: Obj, per_index_limit: int | None) -> Obj | None:
        """The Job's ``FailureTarget`` condition, added when a Job-wide ``backoffLimit`` is exceeded."""
        status = job["status"]
        for condition in status.get("conditions") or []:
            if condition.get("type") == "FailureTarget" and condition.get("status") == "True":
                return condition
        if per_index_limit is not None or status.get("failed", 0) <= job["spec"].get("backoffLimit", 6):
            return None
        target = {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded",
                  "message": "Job has reached the specified backoff limit", "lastTransitionTime": self._now()}  # fmt: skip
        status.setdefault("conditions", []).append(target)
        return target

    def _finish_job(self, job: Obj, kind: str, reason: str, message: str) -> None:
        now = self._now()
        job["status"].setdefault("conditions", []).append(
            {"type": kind, "status": "True", "reason": reason, "message": message, "lastTransitionTime": now}
        )
        if kind == "Complete":
            job["status"]["completionTime"] = now

    # ---------------------------------------------------------------------------------------------- creation
    @staticmethod
    def _awaiting_replacement(pods: list[Obj], done: set[int]) -> dict[int, Obj]:
        """Per index without an active pod, the newest failed pod still holding its finalizer."""
        active = {index_of(p) for p in pods if is_active(p)}
        latest: dict[int, Obj] = {}
        for pod in pods:
            ix = index_of(pod)
            if ix in done or ix in active or not is_failed(pod):
                continue
            if JOB_TRACKING_FINALIZER not in (pod["metadata"].get("finalizers") or []):
                continue
            if ix not in latest or failure_count(pod) >= failure_count(latest[ix]):
                latest[ix] = pod
        return latest

    def _replace(self, job: Obj, pods: list[Obj], done: set[int], completions: int, failed: dict[int, Obj]) -> bool:
        active = {index_of(p) for p in pods if is_active(p)}
        now = self.fake.clock().timestamp()
        created = False
        for ix in range(min(completions, job["spec"].get("parallelism", completions))):
            if ix in done or ix in active:
                continue
            previous = failed.get(ix)
            failures = failure_count(previous) + 1 if previous is not None else 0
            if previous is not None and is_bound(previous) and not is_finished(previous):
                continue  # a kubelet is ending it: seconds on a real node, less than any back-off (10 s)
            if previous is not None:
                failed_at = finished_at(previous) or now
                if now < failed_at + backoff_seconds(self.pod_failure_backoff, failures):
                    continue  # the per-index back-off has not passed yet
            self.fake.write(self._pod_for(job, ix, failures))
            created = True
        return created

    def _pod_for(self, job: Obj, index: int, failures: int) -> Obj:
        template = clone(job["spec"]["template"])
        meta = template.get("metadata") or {}
        annotations = dict(meta.get("annotations") or {})
        if job["spec"].get("backoffLimitPerIndex") is not None:
            annotations[INDEX_FAILURE_COUNT] = str(failures)
        if job["spec"].get("completionMode") == "Indexed" or self._owner(job, kinds.JOB_SET) is not None:
            annotations[INDEX_LABEL] = str(index)  # JobSet's webhook makes every Job Indexed
            for container in template["spec"]["containers"]:
                if not any(v.get("name") == COMPLETION_INDEX_ENV for v in container.get("env") or []):
                    container.setdefault("env", []).append({"name": COMPLETION_INDEX_ENV, "valueFrom": {
                        "fieldRef": {"fieldPath": f"metadata.labels['{INDEX_LABEL}']"}}})  # fmt: skip
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{job['metadata']['name']}-{index}-{next(self._names):05x}",
                         "namespace": job["metadata"]["namespace"],
                         "labels": {**(meta.get("labels") or {}), JOB_NAME_LABEL: job["metadata"]["name"],
                                    INDEX_LABEL: str(index)},
                         "annotations": annotations, "ownerReferences": [self._ref(job)],
                         "finalizers": [JOB_TRACKING_FINALIZER]},
            "spec": template["spec"],
            "status": {"phase": "Pending"},
        }  # fmt: skip
