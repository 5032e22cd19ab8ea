"""The per-version expectation table: every behaviour that differs by KAI, Trainer or JobSet version, written once.

A case never branches on a version string; it asks the row of the version under test (``expect.kai``,
``expect.trainer``, ``expect.jobset``) and names the rows it assumed (``expect.describe()``) in its record and in
its assertion messages. Rows are keyed by minor version (``v0.16.8`` → ``v0.16``); a version without a row is a
:class:`UnknownVersion` error naming the known rows, never a silent default.

Every fact below cites its source: ``docs/research/upstream-facts.md`` (§A Trainer, §B KAI, §C JobSet),
``../shared/reference/kai-scheduler.md`` (KAI §n) / ``trainer-jobset.md`` (TJ §n), or upstream code read at the tag.
Facts that hold for every row (names, keys, messages) are module constants. Known upstream bugs, per release and per
read branch head (``main``, ``master``), are one table of their own: :mod:`suites.support.known_bugs`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from kai_conformance.clusters.assumptions import release_key
from kai_conformance.clusters.catalog import Combination
from kai_conformance.fixtures.matching import ABSENT, Contains, predicate

# UnknownVersion and minor stay part of this table's interface: cases and self-tests name them from here.
from kai_conformance.suites.support.expectations.version_rows import UnknownVersion, minor, row_for  # noqa: F401
from kai_conformance.suites.support.known_bugs import gap

if TYPE_CHECKING:  # area tables that import this module's helpers; their rows are reached through Expectations
    from kai_conformance.suites.support.expectations.consolidation import ConsolidationRow
    from kai_conformance.suites.support.expectations.elastic import ElasticRow
    from kai_conformance.suites.support.expectations.fairness import FairShareRow
    from kai_conformance.suites.support.expectations.lifecycle import LifecycleRows
    from kai_conformance.suites.support.expectations.sharing import SharingRow
    from kai_conformance.suites.support.expectations.topology import TopologyRow

# ------------------------------------------------------------------------------------------ constant facts
#: KAI's release namespace and the podgrouper's service account (B6; KAI §4.6).
KAI_NAMESPACE = "kai-scheduler"
PODGROUPER_USER = f"system:serviceaccount:{KAI_NAMESPACE}:pod-grouper"
#: Label on the top owner or pod naming the queue; annotations are ignored (KAI §3.1, §3.2).
QUEUE_LABEL = "kai.scheduler/queue"
#: Queue used when no owner or pod names one (KAI §3.2 ``constants.DefaultQueueName``).
DEFAULT_QUEUE = "default-queue"
#: Label on the top owner or pod overriding the PodGroup's priority class (KAI §3.3, B3).
PRIORITY_LABEL = "priorityClassName"
#: Priority class a TrainJob gets without override (B3: ``constants.TrainPriorityClass``).
DEFAULT_PRIORITY_CLASS = "train"
#: Chart-installed priority classes: name → (value, preemptible) (KAI §3.3; threshold: priority < 100 preemptible).
PRIORITY_CLASSES = {
    "train": (50, True),
    "build-preemptible": (75, True),
    "build": (100, False),
    "inference": (125, False),
}
#: Annotation overriding the gang size on a JobSet (reaches it from the TrainJob through skip-top-owner, B1).
MIN_MEMBER_ANNOTATION = "kai.scheduler/batch-min-member"
#: What the podgrouper writes on every pod it groups (KAI §3.1, §4.1 step 5).
POD_GROUP_ANNOTATION = "pod-group-name"
SUBGROUP_LABEL = "kai.scheduler/subgroup-name"
#: PodGroup annotation describing the grouped owner, a YAML document (B2).
TOP_OWNER_ANNOTATION = "kai.scheduler/top-owner-metadata"
#: ``pg-<jobset name>-<jobset uid>`` (KAI §4.3 ``jobSetPodGroupNameFormat``; the JobSet's uid, not the TrainJob's).
POD_GROUP_NAME_FORMAT = "pg-{jobset}-{uid}"
#: PodGroup scheduling condition and reasons (KAI §2.3, §5; B4).
UNSCHEDULABLE_CONDITION = "UnschedulableOnNodePool"
UNSCHEDULABLE_REASON = "Unschedulable"
QUEUE_MISSING_REASON = "QueueDoesNotExist"
OVER_LIMIT_REASON = "OverLimit"
#: Event the scheduler writes on a victim's PodGroup, one per evicted pod, and its annotations (B5).
EVICT_EVENT_REASON = "Evict"
EVICT_ACTION_ANNOTATION = "evictor-action-type"
#: Event on a PodGroup whose pods do not all exist yet (KAI §5 readiness gate).
NOT_READY_EVENT_REASON = "NotReady"
#: Warning event the podgrouper writes on a pod it could not group (KAI §3.1, §4.1 step 6).
PODGROUPER_WARNING_REASON = "PodGrouperWarning"
#: BindRequest phases the binder writes (KAI §2.4; pkg/binder/controllers/bindrequest_controller.go UpdateStatus):
#: a request without a phase (or ``Pending``) has not been acted on yet.
BIND_SUCCEEDED = "Succeeded"
BIND_FAILED = "Failed"
#: JobSet's own labels on every Job and Pod it creates (TJ §6.1); the JobSet object itself does not carry them.
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOBSET_OWN_LABELS = (
    JOBSET_NAME_LABEL,
    "jobset.sigs.k8s.io/jobset-uid",
    "jobset.sigs.k8s.io/replicatedjob-name",
    "jobset.sigs.k8s.io/job-index",
)
#: The JobSet-embedded Job and pod group/version/kind (TJ §6; KAI §10 ownerReferences).
JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"


class PodGroupShape(Enum):
    #: v0.16+: one PodGroup per JobSet, root minSubGroup, a parent SubGroup per replicatedJob and a leaf per replica.
    SUBGROUPS = "SubGroups"
    #: v0.13–v0.15: one flat PodGroup (AnyOrder, the JobSet webhook default) with a minMember.
    FLAT = "flat"


class FlatMinMember(Enum):
    #: v0.13–v0.14: Σ replicas × min(parallelism, completions) over the replicatedJobs (KAI §1.3).
    SUM_OF_REPLICATED_JOBS = "sum of replicatedJobs"
    #: v0.15: 1 unless ``kai.scheduler/batch-min-member`` (KAI §1.3, CHANGELOG v0.15.0 "Breaking").
    ONE = "1"


@dataclass(frozen=True)
class ReplicatedJob:
    """What the PodGroup shape depends on: a replicatedJob's name, replicas and pods per Job (parallelism)."""

    name: str
    pods: int
    replicas: int = 1


@dataclass(frozen=True)
class KaiRow:
    minor: str
    podgroup_shape: PodGroupShape
    #: How a flat PodGroup sizes its gang without annotation (None for SubGroup rows).
    flat_min_member: FlatMinMember | None
    #: Honours ``kai.scheduler/batch-min-member`` on the JobSet (v0.14.1+ per KAI §1.2 c586e27a; v0.16+ caps the root).
    min_member_annotation: bool
    #: Known upstream gap for runtimes using JobSet ``dependsOn``: the gang waits for pods that are not created yet.
    depends_on_gap: str | None
    notes: str = ""
    #: Why the scheduler binds the pods of a SubGroup below its floor (KAI PR #2096), or None where it never does.
    podset_below_floor_bound: str | None = None
    #: The first patch release of the minor with PR #2096, or None where no release of it has the fix.
    podset_floor_fixed_in: str | None = None

    @property
    def name(self) -> str:
        return f"KAI {self.minor}"

    @property
    def gang_by_default(self) -> bool:
        """Does a TrainJob get an all-or-nothing gang without any annotation?"""
        return self.podgroup_shape is PodGroupShape.SUBGROUPS or (
            self.flat_min_member is FlatMinMember.SUM_OF_REPLICATED_JOBS
        )

    def gang_annotations(self, pods: int) -> dict[str, str]:
        """Annotations a TrainJob needs so that all ``pods`` form one gang (only v0.15 needs one)."""
        return {} if self.gang_by_default else {MIN_MEMBER_ANNOTATION: str(pods)}

    def podset_floor_gap(self, version: str) -> str | None:
        """The PR #2096 gap of ``version`` (a patch release of this minor), or None where it has the fix. A build
        that is no release has it as the known-bugs table says: the read ``main`` and ``v0.17`` of 2026-08-07 still
        have it (the fix came later), an unread build counts as newer than every release
        (suites/support/known_bugs.py; docs/research/upstream-facts.md §B10)."""
        if release_key(version) is None:
            return gap("KAI PR #2096", version)
        fixed = self.podset_floor_fixed_in
        first, release = release_key(fixed) if fixed else None, release_key(version)
        if self.podset_below_floor_bound is None or (first and (release is None or release >= first)):
            return None
        return self.podset_below_floor_bound + (f" (first fixed in {fixed} [inferred])" if fixed else "")

    def subgroup_of(self, replicated_job: str, job_index: int = 0) -> str | None:
        """The SubGroup a pod of ``replicated_job`` lands in (``<rjob>-replica-<i>``), or None for flat rows."""
        if self.podgroup_shape is not PodGroupShape.SUBGROUPS:
            return None
        return f"{replicated_job}-replica-{job_index}"

    def podgroup_spec(self, replicated_jobs: Sequence[ReplicatedJob], min_member: int | None = None) -> dict[str, Any]:
        """The PodGroup ``spec`` this row predicts (a partial object for :mod:`fixtures.matching`).

        ``replicated_jobs`` in JobSet order, AnyOrder startup (the JobSet webhook's default, §C);
        ``min_member`` = a ``kai.scheduler/batch-min-member`` annotation on the TrainJob, if any.
        """
        if self.podgroup_shape is PodGroupShape.SUBGROUPS:
            # KAI §4.3: root minSubGroup = annotation capped at len(rjobs), else len(rjobs) for AnyOrder.
            root = len(replicated_jobs) if min_member is None else min(min_member, len(replicated_jobs))
            subgroups: list[dict[str, Any]] = []
            for rjob in replicated_jobs:
                subgroups.append({"name": rjob.name, "minSubGroup": rjob.replicas, "minMember": ABSENT})
                subgroups += [
                    {"name": f"{rjob.name}-replica-{i}", "parent": rjob.name, "minMember": rjob.pods}
                    for i in range(rjob.replicas)
                ]
            return {"minSubGroup": root, "minMember": ABSENT, "subGroups": Contains(*subgroups)}
        if min_member is not None and self.min_member_annotation:
            flat = min_member
        elif self.flat_min_member is FlatMinMember.ONE:
            flat = 1
        else:
            flat = sum(r.pods * r.replicas for r in replicated_jobs)
        return {"minMember": flat, "minSubGroup": ABSENT, "subGroups": _no_subgroups}


@predicate("no SubGroups (absent or empty)")
def _no_subgroups(value: Any) -> bool:
    return not value


@dataclass(frozen=True)
class TrainerRow:
    minor: str
    #: How ``spec.trainer.resourcesPerNode`` reaches container ``node`` (A1): v2.2 replaces the runtime's resources
    #: wholesale, v2.3 merges key by key. Cases therefore always pass complete resources.
    resources_per_node: str
    #: ``spec.runtimePatches`` exists (v2.2.0 #3309 replaced podTemplateOverrides, TJ §1.1).
    runtime_patches: bool

    @property
    def name(self) -> str:
        return f"Trainer {self.minor}"


@dataclass(frozen=True)
class JobSetRow:
    minor: str

    @property
    def name(self) -> str:
        return f"JobSet {self.minor}"


_DEPENDS_ON_GAP = (
    "KAI issue #1209: the podgrouper ignores JobSet dependsOn, so the gang also counts the dependent "
    "replicatedJob whose pods are only created later; the PodGroup stays NotReady and nothing is scheduled"
)

#: KAI PR #2096 (no issue; upstream-facts §B10): from v0.13.0 to v0.17.0 a PodSet below its floor is handed the
#: tasks it has (``collectTasksFromPodSet``, ``allocation_info.go`` 116–123 at v0.15.3–v0.17.0; inside
#: ``GetTasksToAllocate`` at v0.13.0 and v0.14.7). The allocate action's readiness guard counts the root's ready
#: members only, so under a root ``minSubGroup`` below the number of SubGroups such a PodSet passes it, and while
#: nothing is placed the gang phase takes the first SubGroups by name. Fixed on ``main`` (b1a4be07) and ``v0.17``
#: (backport #2152, after v0.17.1: #2132); the backports to v0.9, v0.12, v0.14 failed, none to v0.16 was seen.
_PODSET_BELOW_FLOOR = (
    "KAI PR #2096: a PodSet below its floor (minAvailable) is still handed the tasks it has, and the allocate "
    "action's readiness guard counts only the root's ready members, so under a root minSubGroup below the number "
    "of SubGroups the pods of a SubGroup that cannot reach its floor are bound (then evicted as stale)"
)

KAI_ROWS: dict[str, KaiRow] = {
    row.minor: row
    for row in (
        KaiRow("v0.13", PodGroupShape.FLAT, FlatMinMember.SUM_OF_REPLICATED_JOBS, False,
               _DEPENDS_ON_GAP + " [inferred for flat PodGroups: minMember sums every replicatedJob]",
               "first release grouping JobSet and TrainJob (PRs #784, #1020)", _PODSET_BELOW_FLOOR),
        KaiRow("v0.14", PodGroupShape.FLAT, FlatMinMember.SUM_OF_REPLICATED_JOBS, True,
               _DEPENDS_ON_GAP + " [inferred for flat PodGroups: minMember sums every replicatedJob]",
               "LTS; from v0.14.1 honours kai.scheduler/batch-min-member on the JobSet (c586e27a)",
               _PODSET_BELOW_FLOOR),
        KaiRow("v0.15", PodGroupShape.FLAT, FlatMinMember.ONE, True, None,
               "JobSet PodGroups default to minMember 1 (no gang) unless kai.scheduler/batch-min-member (EOL)",
               _PODSET_BELOW_FLOOR),
        KaiRow("v0.16", PodGroupShape.SUBGROUPS, None, True, _DEPENDS_ON_GAP,
               "LTS; one PodGroup per JobSet with a SubGroup per replicatedJob and per replica (#1617)",
               _PODSET_BELOW_FLOOR),  # no v0.16 backport of #2096 seen
        KaiRow("v0.17", PodGroupShape.SUBGROUPS, None, True, _DEPENDS_ON_GAP,
               "clears UnschedulableOnNodePool once scheduled; stamps kai.scheduler/last-eviction-timestamp",
               _PODSET_BELOW_FLOOR, "v0.17.2"),
    )
}  # fmt: skip

TRAINER_ROWS: dict[str, TrainerRow] = {
    row.minor: row
    for row in (
        TrainerRow("v2.2", "replaced wholesale", True),
        TrainerRow("v2.3", "merged per key", True),
    )
}

JOBSET_ROWS: dict[str, JobSetRow] = {row.minor: row for row in (JobSetRow("v0.11"), JobSetRow("v0.12"))}


def _lookup(table: Mapping[str, Any], component: str, version: str) -> Any:
    return row_for(table, component, version, "suites/support/expectations/__init__.py")


def kai_row(version: str) -> KaiRow:
    return _lookup(KAI_ROWS, "KAI", version)


def trainer_row(version: str) -> TrainerRow:
    return _lookup(TRAINER_ROWS, "Trainer", version)


def jobset_row(version: str) -> JobSetRow:
    return _lookup(JOBSET_ROWS, "JobSet", version)


@dataclass(frozen=True)
class Expectations:
    """The rows a run assumes, one per component; ``assumptions`` names each version the tables do not know and
    the known version whose rows it takes (clusters/assumptions.py)."""

    kai: KaiRow
    trainer: TrainerRow
    jobset: JobSetRow
    assumptions: tuple[str, ...] = ()

    @property
    def topology(self) -> TopologyRow:
        """The topology-aware placement row of the KAI version (suites/support/expectations/topology.py)."""
        from kai_conformance.suites.support.expectations.topology import topology_row

        return topology_row(self.kai.minor)

    @property
    def sharing(self) -> SharingRow:
        """The GPU-sharing row of the KAI version (suites/support/expectations/sharing.py)."""
        from kai_conformance.suites.support.expectations.sharing import sharing_row

        return sharing_row(self.kai.minor)

    @property
    def elastic(self) -> ElasticRow:
        """The elastic-gang row of the KAI version (:mod:`suites.support.expectations.elastic`)."""
        from kai_conformance.suites.support.expectations.elastic import elastic_row

        return elastic_row(self.kai.minor)

    @property
    def fairness(self) -> FairShareRow:
        """The fair-share row of the KAI version (suites/support/expectations/fairness.py)."""
        from kai_conformance.suites.support.expectations.fairness import fair_share_row

        return fair_share_row(self.kai.minor)

    @property
    def consolidation(self) -> ConsolidationRow:
        """The consolidation and eviction-protection row of the KAI version (expectations/consolidation.py)."""
        from kai_conformance.suites.support.expectations.consolidation import consolidation_row

        return consolidation_row(self.kai.minor)

    @property
    def lifecycle(self) -> LifecycleRows:
        """What ending workloads do under the KAI and JobSet versions (suites/support/expectations/lifecycle.py)."""
        from kai_conformance.suites.support.expectations.lifecycle import lifecycle_rows

        return lifecycle_rows(self.kai.minor, self.jobset.minor)

    def describe(self) -> str:
        """Names the rows, e.g. ``KAI v0.17 (SubGroups PodGroup) · Trainer v2.3 (...) · JobSet v0.12``."""
        gang = self.kai.podgroup_shape.value + " PodGroup"
        if self.kai.podgroup_shape is PodGroupShape.FLAT:
            gang += f", minMember = {self.kai.flat_min_member.value}"  # type: ignore[union-attr]
        described = (
            f"{self.kai.name} ({gang}) · {self.trainer.name} (resourcesPerNode {self.trainer.resources_per_node}) "
            f"· {self.jobset.name}"
        )
        return described + "".join(f" [{ASSUMED_MARK}: {a}]" for a in self.assumptions)


#: What marks a case's expectations as taken from another version's rows (reports read it).
ASSUMED_MARK = "assumed"


def expectations_for(combination: Combination, kubernetes_assumption: str | None = None) -> Expectations:
    """The rows of the combination's versions, or of the known versions an unknown one assumes."""
    return Expectations(
        kai_row(combination.kai.expectations_version),
        trainer_row(combination.trainer.expectations_version),
        jobset_row(combination.jobset.expectations_version),
        tuple(combination.assumptions) + ((kubernetes_assumption,) if kubernetes_assumption else ()),
    )


# ------------------------------------------------------------------------------------------ label propagation
#: The objects a label or annotation can arrive at, in creation order.
LEVELS = ("TrainJob", "JobSet", "Job", "Pod", "PodGroup")
#: Where metadata placed at each source arrives. Trainer copies only runtime and runtimePatches template metadata
#: (TJ §3.2, §3.5: never TrainJob metadata); JobSet copies the Job template's metadata onto Jobs and the pod
#: template's onto pods, never its own (TJ §6.1); KAI's PodGroup carries the labels and annotations of the JobSet
#: merged with the TrainJob's (skip-top-owner, B1). The same for every row: Trainer v2.2–v2.3, KAI v0.13–v0.17.
ARRIVALS: dict[str, frozenset[str]] = {
    "runtime-jobset-template": frozenset({"JobSet", "PodGroup"}),
    "runtime-job-template": frozenset({"Job"}),
    "runtime-pod-template": frozenset({"Pod"}),
    "patch-jobset-template": frozenset({"JobSet", "PodGroup"}),
    "patch-job-template": frozenset({"Job"}),
    "patch-pod-template": frozenset({"Pod"}),
    "trainjob-metadata": frozenset({"TrainJob", "PodGroup"}),
}
#: Sources that only exist where the Trainer row has ``runtime_patches``.
PATCH_SOURCES = frozenset(s for s in ARRIVALS if s.startswith("patch-"))
#: Which queue label wins for ``PodGroup.spec.queue``: the JobSet's own (from the runtime) beats the TrainJob's
#: (skip-top-owner copies TrainJob keys only where the JobSet has none, B1), which beats the pod's; no label at all
#: means ``default-queue`` (KAI §3.2 ``CalcPodGroupQueue``, TJ §3.5). The same for every row.
QUEUE_LABEL_PRECEDENCE = ("runtime-jobset-template", "trainjob-metadata", "runtime-pod-template")
#: Sources whose labels the PodGroup copies (the merged top owner's), in the same precedence.
PODGROUP_LABEL_SOURCES = ("runtime-jobset-template", "trainjob-metadata")
#: KAI's message for a PodGroup naming a queue that does not exist (B4), v0.13–v0.17.
QUEUE_MISSING_MESSAGE = "Queue '{queue}' does not exist"
