"""What happens when a workload ends, per KAI and JobSet version (Trainer v2.2 and v2.3 alike), with the source of
every fact (upstream code read at the tag, in the bare copies of the repositories).

* **Trainer** (identical at v2.2.0 and v2.3.0): the TrainJob's terminal conditions are the JobSet's, renamed and
  with the JobSet's reason and message: ``Completed`` → ``Complete``, ``Failed`` → ``Failed``
  (pkg/runtime/framework/plugins/jobset/jobset.go ``Status``, l. 340–347 at v2.2.0, l. 450–457 at v2.3.0); once one
  is true Trainer stops reconciling the JobSet (``IsTrainJobFinished``). ``spec.suspend`` gives the condition
  ``Suspended`` True/``Suspended`` ("TrainJob is suspended"), and on resume False/``Resumed`` ("TrainJob is
  resumed") (pkg/controller/trainjob_controller.go ``setSuspendedCondition``).
* **JobSet** (pkg/controllers/failure_policy.go, jobset_controller.go at v0.11.1 and v0.12.0): without
  ``failurePolicy`` the first failed Job fails the JobSet (``FailedJobs``, "jobset failed due to one or more job
  failures (first failed job: <job>)"). With ``failurePolicy`` and no rule matching, the action is
  ``RestartJobSet``: while ``status.restartsCountTowardsMax < maxRestarts`` it adds one to ``status.restarts``,
  deletes the Jobs of the previous attempt (label ``jobset.sigs.k8s.io/restart-attempt`` below ``restarts``) with
  foreground propagation and recreates them under the same names; then ``Failed`` / ``ReachedMaxRestarts``
  ("jobset failed due to reaching max number of restarts (first failed job: <job>)"). The JobSet's uid, and so
  KAI's PodGroup ``pg-<jobset>-<uid>``, stays. Completion: ``Completed`` / ``AllJobsCompleted`` ("jobset completed
  successfully") once the success policy (``All``) is met. v0.12.0 adds the condition ``RestartingJobSet``: True at
  a restart, False (``JobsReady``) once every Job is ready again, False (``JobSetFailed`` / ``JobSetCompleted`` /
  ``JobSetSuspended``) at the end; a False condition is only ever an update of an existing one
  (``updateCondition``), so a JobSet that never restarted has none. v0.11.1 has no such condition.
* **Kubernetes Job** (pkg/controller/job/job_controller.go ``syncJob``): with a Job-wide ``backoffLimit`` the Job
  fails once more pods failed than the limit: ``FailureTarget`` (``BackoffLimitExceeded``, "Job has reached the
  specified backoff limit") first, its active pods are deleted, then ``Failed`` once none is left running
  (``delayTerminalCondition``).
* **KAI, once the gang's pods ended** (v0.16.8 = v0.17.0): the PodGroup stays (it is owned by the JobSet;
  neither the podgrouper nor the podgroup-controller deletes PodGroups, kai-scheduler.md §4.4) and holds nothing:
  the podgroup-controller counts no resources for terminal pods (pkg/podgroupcontroller/controllers/metadata/pod.go
  ``GetPodMetadata``: ``isTerminalPod``) and the queue-controller sums the Queue's ``status.allocated`` from its
  PodGroups' ``status.resourcesStatus`` (pkg/queuecontroller/controllers/resource_updater/resource_updater.go),
  recomputed on every PodGroup change (queue_controller.go ``enqueuePodGroup``). The scheduler's pod informer
  drops terminal pods (pkg/scheduler/cache/cache.go ``filterTerminalPods``), so their GPUs are free at once.
* **Stale-gang eviction** (pkg/scheduler/actions/stalegangeviction/stalegangeviction.go): a gang with some but
  fewer running pods than its minimum is evicted whole after the staleness grace (default 60 s,
  ``--default-staleness-grace-period``); ``IsStale`` spares a gang with a ``Succeeded`` pod
  (podgroup_info/job_info.go l. 433 at v0.16.8, l. 495 at v0.17.0). But from v0.16.2 and in v0.17.0 the scheduler's
  pod informer drops ``Succeeded`` pods at watch time (pkg/scheduler/cache/cache.go ``filterTerminalPods``, v0.16.8
  l. 80–106, v0.17.0 l. 81–107), so ``IsStale`` never sees one: a gang whose pods complete more than the grace apart
  is judged stale and its still-running pods are evicted (KAI issue #1968). PR #2012 (``main`` 57ec7ca8) keeps
  Succeeded pods visible; its backport #2022 (3767c11e) is on the ``v0.17`` branch, none on ``v0.16``; no tag
  contains either, so the first release with the fix is v0.17.1 **[inferred]** (its CHANGELOG could not be read;
  docs/research/upstream-facts.md §B10). v0.17.0 also reads a per-PodGroup grace, ``spec.stalenessGracePeriod``,
  which its podgrouper fills from the annotation ``kai.scheduler/staleness-grace-period`` on an owner or the pod
  (defaultgrouper ``calcStalenessGracePeriod``); v0.16.8 has neither.
"""

from __future__ import annotations

from dataclasses import dataclass

from kai_conformance.clusters.assumptions import release_key
from kai_conformance.suites.support.expectations.version_rows import row_for
from kai_conformance.suites.support.known_bugs import gap

# ------------------------------------------------------------------------------------------- constant facts
#: TrainJob condition types and the reasons Trainer copies from the JobSet (or sets itself for suspend).
TRAINJOB_COMPLETE = "Complete"
TRAINJOB_FAILED = "Failed"
TRAINJOB_SUSPENDED = "Suspended"
SUSPENDED_REASON = "Suspended"
RESUMED_REASON = "Resumed"
#: JobSet reasons (pkg/constants/constants.go, v0.11.1 and v0.12.0).
ALL_JOBS_COMPLETED = "AllJobsCompleted"
FAILED_JOBS = "FailedJobs"
REACHED_MAX_RESTARTS = "ReachedMaxRestarts"
#: JobSet's condition during a restart (v0.12.0 only) and the reason it ends with when the JobSet fails.
JOBSET_RESTARTING = "RestartingJobSet"
RESTARTING_ENDED_BY_FAILURE = "JobSetFailed"
#: Label (and annotation) JobSet puts on every Job and pod: the JobSet's ``status.restarts`` when it made them.
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
#: ``evictor-action-type`` of the stale-gang eviction's Evict events (framework/interface.go).
STALE_GANG_ACTION = "stalegangeviction"
#: Pod (or owner) annotation the v0.17 podgrouper turns into ``PodGroup.spec.stalenessGracePeriod``.
STALENESS_GRACE_ANNOTATION = "kai.scheduler/staleness-grace-period"
#: The scheduler's default staleness grace (cmd/scheduler/app/options/options.go, v0.16.8 and v0.17.0).
DEFAULT_STALENESS_GRACE = 60


@dataclass(frozen=True)
class LifecycleKaiRow:
    minor: str
    #: The PodGroup outlives its gang's pods (until the JobSet is deleted), holding no resources.
    podgroup_kept: bool
    #: The podgrouper fills ``spec.stalenessGracePeriod`` from :data:`STALENESS_GRACE_ANNOTATION`.
    staleness_grace_annotation: bool
    #: Why stale-gang eviction takes a gang whose pods complete one by one (KAI #1968), or None where it spares it.
    completing_gang_evicted: str | None
    #: The first patch release of the minor with the fix (PR #2012), or None where no release of it has the fix.
    completing_gang_fixed_in: str | None = None
    #: What about this row is not established from source, or None.
    to_confirm: str | None = None

    @property
    def name(self) -> str:
        return f"KAI {self.minor} lifecycle"

    def completing_gang_gap(self, version: str) -> str | None:
        """The stale-gang gap of the patch release ``version`` of this minor (None: it spares completing gangs). A
        build that is no release (``main``, a PR's) has it as the known-bugs table says: the read branch heads carry
        the fix (suites/support/known_bugs.py), an unread build counts as newer than every release."""
        if release_key(version) is None:
            return gap("KAI #1968", version)
        fixed = self.completing_gang_fixed_in
        first, release = release_key(fixed) if fixed else None, release_key(version)
        if self.completing_gang_evicted is None or (first and (release is None or release >= first)):
            return None
        return self.completing_gang_evicted + (f" ({self.to_confirm})" if self.to_confirm else "")


@dataclass(frozen=True)
class LifecycleJobSetRow:
    minor: str
    #: The JobSet has the ``RestartingJobSet`` condition (v0.12.0 ``JobSetRestarting``).
    restarting_condition: bool

    @property
    def name(self) -> str:
        return f"JobSet {self.minor} lifecycle"


@dataclass(frozen=True)
class LifecycleRows:
    """The rows one run assumes: the KAI version's and the JobSet version's."""

    kai: LifecycleKaiRow
    jobset: LifecycleJobSetRow

    @property
    def name(self) -> str:
        return f"{self.kai.name} · {self.jobset.name}"


_STALE_COMPLETING = (
    "KAI #1968: the scheduler's pod informer drops Succeeded pods (pkg/scheduler/cache/cache.go filterTerminalPods, "
    "from v0.16.2 and in v0.17.0), so IsStale never sees the completed ones: a gang whose pods complete more than the "
    "staleness grace apart is judged stale and its running pods are evicted (fixed by PR #2012)"
)

KAI_LIFECYCLE_ROWS: dict[str, LifecycleKaiRow] = {
    row.minor: row
    for row in (
        LifecycleKaiRow("v0.16", True, False, _STALE_COMPLETING),  # no v0.16 backport of #2012 seen
        LifecycleKaiRow(
            "v0.17", True, True, _STALE_COMPLETING, "v0.17.1",
            "first release with the fix inferred: the v0.17 branch carries the backport #2022, v0.17.1's CHANGELOG "
            "could not be read (docs/research/upstream-facts.md §B10)",
        ),
    )
}  # fmt: skip
JOBSET_LIFECYCLE_ROWS: dict[str, LifecycleJobSetRow] = {
    row.minor: row for row in (LifecycleJobSetRow("v0.11", False), LifecycleJobSetRow("v0.12", True))
}


def lifecycle_rows(kai_version: str, jobset_version: str) -> LifecycleRows:
    source = "suites/support/expectations/lifecycle.py"
    return LifecycleRows(
        row_for(KAI_LIFECYCLE_ROWS, "KAI lifecycle", kai_version, source),
        row_for(JOBSET_LIFECYCLE_ROWS, "JobSet lifecycle", jobset_version, source),
    )
