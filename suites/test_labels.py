"""Runtime label propagation: which labels and annotations arrive at each level TrainJob → JobSet → Job → Pod,
and at KAI's PodGroup.

Specification (the table is ``ARRIVALS`` in suites/support/expectations/__init__.py; every (source, key, level) is recorded
so the report shows source × level):

* Runtime JobSet-template metadata and ``runtimePatches`` JobSet metadata (Trainer ≥ v2.2) arrive at the JobSet
  and, through KAI's top owner, at the PodGroup; never at Jobs or pods.
* Runtime and ``runtimePatches`` replicatedJob-template metadata arrive at the Jobs only.
* Runtime and ``runtimePatches`` pod-template metadata arrive at the pods only.
* TrainJob metadata arrives at the PodGroup (KAI reads the TrainJob) but at no JobSet, Job or pod: it must not
  arrive at the pods.
* The controllers' own marks: ``schedulerName`` from the runtime pod template on every pod; JobSet's own labels on
  Jobs and pods; KAI's pod annotation ``pod-group-name`` and, with SubGroups (v0.16+), label
  ``kai.scheduler/subgroup-name``.
* A ``priorityClassName`` label on the TrainJob, the runtime's JobSet template or the pod template reaches
  ``PodGroup.spec.priorityClassName``; without one it is ``train``.
* Control: the runtime pod-template label of the table, claimed at the Job (where JobSet never copies pod-template
  metadata) instead of the Pod, makes the propagation detector fire for exactly those two levels: proof that on
  this cluster it sees a label that is there and misses one that is not.

A failed verdict says which queue, priority class and labels the PodGroup got and from which object, and whether
the podgrouper may read TrainJobs (suites/support/diagnosis/provenance.py).
"""

from __future__ import annotations

import pytest

from kai_conformance.clusters.suite_stack import KAI_SCHEDULER_NAME
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.fixtures.workspace import Workspace
from kai_conformance.reports.records import CaseRecorder
from kai_conformance.suites.support.cases.contract import param, require_gpus, skip_unless
from kai_conformance.suites.support.cases.control import MisplacedLabelCase
from kai_conformance.suites.support.cases.labels import ControllerMarksCase, PriorityCase, PropagationCase
from kai_conformance.suites.support.confirm import confirm, confirm_fired
from kai_conformance.suites.support.detectors.labels import Arrival, arrivals_as_expected, fired_at_levels
from kai_conformance.suites.support.detectors.podgrouper import pods_annotated
from kai_conformance.suites.support.detectors.queues import podgroup_priority_class
from kai_conformance.suites.support.expectations import (
    ARRIVALS,
    JOBSET_OWN_LABELS,
    PATCH_SOURCES,
    POD_GROUP_ANNOTATION,
    PRIORITY_LABEL,
    SUBGROUP_LABEL,
    Expectations,
)
from kai_conformance.suites.support.levels import arrival, arrivals
from kai_conformance.suites.support.observe import Observer, Workload
from kai_conformance.suites.support.snapshot import Snapshot, name_of

pytestmark = pytest.mark.labels

SOURCES = [PropagationCase(source) for source in ARRIVALS]
PRIORITY_SOURCES = [
    PriorityCase(s) for s in ("trainjob-label", "runtime-jobset-template", "runtime-pod-template", "none")
]
CONTROL = [MisplacedLabelCase("runtime-pod-template", claimed=frozenset({"Job"}))]


@pytest.mark.parametrize("case", [param(c) for c in SOURCES])
def test_metadata_arrives_only_where_the_chain_copies_it(
    case: PropagationCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """A label and an annotation set at one source are found exactly at the levels the table names."""
    require_gpus(ctx.layout, 1)
    skip_unless(
        case.source not in PATCH_SOURCES or expect.trainer.runtime_patches,
        f"{expect.trainer.name} has no spec.runtimePatches",
    )
    workspace.apply_all(case.manifests(ctx))
    job, snap = grouped(observer, "labels", 1, timeouts)
    expected = ARRIVALS[case.source]
    found = arrivals(snap, case.source, case.key, expected) + arrivals(
        snap, case.source, case.key, expected, annotation=True
    )
    assert_arrivals(job, found, record, expect)


@pytest.mark.parametrize("case", [param(ControllerMarksCase())])
def test_the_controllers_mark_jobs_and_pods(
    case: ControllerMarksCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """schedulerName reaches every pod, JobSet labels its Jobs and pods, KAI annotates and labels every pod."""
    require_gpus(ctx.layout, case.pods)
    workspace.apply_all(case.manifests(ctx))
    job, snap = grouped(observer, "marks", case.pods, timeouts)
    found = [scheduler_name_arrival(snap)]
    for key in JOBSET_OWN_LABELS:
        found += arrivals(snap, "jobset-controller", key, frozenset({"Job", "Pod"}), levels=("Job", "Pod"))
    pg = snap.podgroup
    found.append(
        arrival(snap, "kai-podgrouper", POD_GROUP_ANNOTATION, "Pod", True, value=pg and name_of(pg), annotation=True)
    )
    subgroup = expect.kai.subgroup_of("node")
    found.append(arrival(snap, "kai-podgrouper", SUBGROUP_LABEL, "Pod", subgroup is not None, value=subgroup))
    assert_arrivals(job, found, record, expect)


@pytest.mark.parametrize("case", [param(c) for c in PRIORITY_SOURCES])
def test_a_priority_class_label_reaches_the_podgroup(
    case: PriorityCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """``priorityClassName`` labelled at the source (or none) decides PodGroup.spec.priorityClassName."""
    require_gpus(ctx.layout, 1)
    workspace.apply_all(case.manifests(ctx))
    job = observer.workload("prio", 1)
    job.visible(timeouts("schedule"))
    _, verdict = job.settle(
        lambda s: podgroup_priority_class(s, case.expected),
        what=f"[{expect.kai.name}] PodGroup priority class {case.expected} from {case.source}",
        timeout=timeouts("api"),
    )
    record.verdict(verdict)
    record.label(
        case.source, f"label {PRIORITY_LABEL}", "PodGroup.spec.priorityClassName", expected=True, observed=verdict.ok
    )
    job.confirm(verdict, f"[{expect.kai.name}] PodGroup priority class from {case.source}")


@pytest.mark.control
@pytest.mark.parametrize("case", [param(c) for c in CONTROL])
def test_control_the_propagation_detector_fires_on_a_label_claimed_at_the_wrong_level(
    case: MisplacedLabelCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """A label set in the runtime's pod template, claimed at the Job instead of the Pod: the propagation detector
    fires for the Job (claimed, absent) and the Pod (disclaimed, present), and for no other level."""
    require_gpus(ctx.layout, 1)
    workspace.apply_all(case.manifests(ctx))
    _, snap = grouped(observer, "labels", 1, timeouts)
    # Not recorded as label observations: the report's source × level table shows what the table claims.
    found = arrivals(snap, case.source, case.key, case.claimed)
    verdict = arrivals_as_expected(found)
    record.verdict(verdict, expect_violation=True)
    confirm_fired(verdict, f"[{expect.describe()}] the label detector did not fire on a label claimed where the chain "
                  f"does not put it ({case.key} from {case.source} claimed at {sorted(case.claimed)})",
                  observer=observer)  # fmt: skip
    fired_at = {a.level for a in found if a.expected != a.observed}
    levels = fired_at_levels(fired_at, case.misjudged_levels)
    confirm(levels, f"[{expect.describe()}] the label detector fired elsewhere than at the misjudged levels "
            f"({verdict})", observer=observer)  # fmt: skip


# ------------------------------------------------------------------------------------------------- shared steps
def grouped(observer: Observer, workload: str, pods: int, timeouts: TimeoutPolicy) -> tuple[Workload, Snapshot]:
    """The workload once KAI has grouped it (PodGroup made, every pod annotated), and a snapshot with its owners."""
    job = observer.workload(workload, pods)
    job.visible(timeouts("schedule"))
    job.until(
        pods_annotated, what=f"KAI's podgrouper to annotate the pods of TrainJob {workload}", timeout=timeouts("api")
    )
    return job, job.snapshot(owners=True)


def scheduler_name_arrival(snap: Snapshot) -> Arrival:
    pods = snap.live_pods
    observed = bool(pods) and all(p["spec"].get("schedulerName") == KAI_SCHEDULER_NAME for p in pods)
    return Arrival("runtime-pod-template", f"spec.schedulerName={KAI_SCHEDULER_NAME}", "Pod", True, observed)


def assert_arrivals(job: Workload, found: list[Arrival], record: CaseRecorder, expect: Expectations) -> None:
    for a in found:
        record.label(a.source, a.key, a.level, expected=a.expected, observed=a.observed)
    verdict = arrivals_as_expected(found)
    record.verdict(verdict)
    job.confirm(verdict, f"[{expect.describe()}] labels and annotations of TrainJob {job.name}")
