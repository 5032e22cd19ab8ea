"""Podgrouper ownership: what KAI's podgrouper makes of a TrainJob, and who owns what.

KAI maps a TrainJob to its skip-top-owner grouper, which groups by the TrainJob's JobSet. Specification:

* Exactly one PodGroup per TrainJob, named ``pg-<jobset name>-<jobset uid>``, whose only ownerReference is the
  JobSet (not the TrainJob, a Job or a pod); its ``kai.scheduler/top-owner-metadata`` names the JobSet; the chain
  TrainJob → JobSet → Job → Pod holds by uid. The PodGroup carries what the TrainJob asks for: ``spec.queue`` from
  its ``kai.scheduler/queue`` label and ``spec.priorityClassName`` from its ``priorityClassName`` label (read
  through the TrainJob itself, skip-top-owner); a failure says where each value came from.
* The PodGroup's shape is the version's (expectation table): v0.16+ a root ``minSubGroup``, a SubGroup per
  replicatedJob and a leaf ``<replicatedJob>-replica-<i>`` with ``minMember`` = its pods; v0.13–v0.14 a flat
  ``minMember``; v0.15 ``minMember`` 1 unless ``kai.scheduler/batch-min-member``. Every pod points at its PodGroup
  and SubGroup. A runtime with two replicatedJobs still gives one PodGroup, with a SubGroup for each.
* Deleting the TrainJob removes its JobSet, Jobs, pods and PodGroup (Kubernetes garbage collection) within the
  ``gc`` budget.
* RBAC: the podgrouper's service account may get, list and watch TrainJobs and JobSets (SubjectAccessReview).
* Known upstream gap: a runtime using JobSet ``dependsOn`` stays unscheduled under the versions the expectation
  table names (KAI issue #1209): a strict xfail, so the suite reports when upstream fixes it.
* SubGroup floors (v0.16+; flat PodGroups have none, the case skips): no pod of a leaf SubGroup is bound while
  fewer than its ``minMember`` are, judged on every observation of the hold (``subgroup-floor``: below its floor
  for longer than a bind takes). The case: a runtime replicatedJob ``aux`` of 2 pods whose template annotation
  ``kai.scheduler/batch-min-member: "3"`` sets its leaf's floor above its pods, beside the trainer ``node``, under
  a TrainJob whose ``kai.scheduler/batch-min-member: "1"`` caps the root ``minSubGroup`` at 1: ``node`` is ready, so
  the PodGroup is, and ``aux``, first by name, must get none of its pods bound. A strict xfail on the releases the
  KAI row names (KAI PR #2096: a PodSet below its floor is handed the pods it has; up to v0.17.0 and on v0.16), so
  the suite reports the release that has the fix.
* Control: a plain ``batch/v1`` Job asking for kai-scheduler beside a suspended TrainJob: KAI's Job grouper gives
  the namespace's only PodGroup to the Job (``pg-<job>-<job uid>``, ``minMember`` 1, no SubGroups), and the
  ownership and shape detectors, judging it as the TrainJob's, fire naming the Job: proof that on this cluster
  they read the PodGroup's ownerReferences and spec. A second control holds an elastic SubGroup (2 pods, floor 1)
  at one bound pod by its queue's GPU limit: judged as if its floor were 2, ``subgroup-floor`` fires, and it holds
  for the real floor on the same observations (v0.16+).
"""

from __future__ import annotations

import pytest

from kai_conformance.fixtures.kube import KubeApi
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.fixtures.workspace import Workspace
from kai_conformance.reports.records import CaseRecorder
from kai_conformance.suites.support.cases.contract import param, require_gpus, skip_unless
from kai_conformance.suites.support.cases.control import JobPodGroupCase
from kai_conformance.suites.support.cases.podgrouper import (
    AUX_JOB,
    LAUNCHER_JOB,
    FloorHeldByLimitCase,
    PodGroupCase,
    PodSetFloorCase,
)
from kai_conformance.suites.support.confirm import confirm, confirm_fired
from kai_conformance.suites.support.detectors.gang import SubGroupFloorWatch
from kai_conformance.suites.support.detectors.podgrouper import (
    access_granted,
    collected,
    ownership_chain,
    podgroup_shape,
    pods_annotated,
    pods_grouped,
    single_podgroup_owned_by_jobset,
    top_owner_is_jobset,
)
from kai_conformance.suites.support.detectors.queues import podgroup_priority_class, podgroup_queue
from kai_conformance.suites.support.detectors.verdict import Verdict, all_of, fires
from kai_conformance.suites.support.expectations import PODGROUPER_USER, Expectations, PodGroupShape
from kai_conformance.suites.support.observe import Observer
from kai_conformance.suites.support.snapshot import Obj, Snapshot, labels_of, uid_of
from kai_conformance.suites.support.timing import settle

pytestmark = pytest.mark.podgrouper

#: A non-default, preemptible class: the PodGroup must get it from the TrainJob, and binding stays within quota rules.
OWNED_PRIORITY = "build-preemptible"
OWNERSHIP = [PodGroupCase(pods=1, priority_class=OWNED_PRIORITY), PodGroupCase(pods=2, priority_class=OWNED_PRIORITY)]
SHAPES = [PodGroupCase(pods=2), PodGroupCase(pods=2, extra=AUX_JOB)]
#: (API group, resource) the podgrouper walks through for a TrainJob pod (KAI §4.6).
READ_VERBS = ("get", "list", "watch")
OWNERS_READ = [("trainer.kubeflow.org", "trainjobs"), ("jobset.x-k8s.io", "jobsets")]
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
CONTROL = [JobPodGroupCase()]
FLOORS = [PodSetFloorCase()]
FLOOR_CONTROL = [FloorHeldByLimitCase()]


@pytest.mark.parametrize("case", [param(c) for c in OWNERSHIP])
def test_one_podgroup_per_trainjob_owned_by_its_jobset(
    case: PodGroupCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """One PodGroup pg-<jobset>-<uid>, owned only by the JobSet, carrying the TrainJob's queue and priority class;
    TrainJob → JobSet → Job → Pod by uid."""
    require_gpus(ctx.layout, case.pods)
    workspace.apply_all(case.manifests(ctx))
    job = observer.workload("owned", case.total_pods)
    job.visible(timeouts("schedule"))
    queue, priority = case.expected_queue(ctx), case.expected_priority_class
    _, verdict = observer.until(
        lambda s: all_of(
            single_podgroup_owned_by_jobset(s),
            ownership_chain(s.of("owned")),
            top_owner_is_jobset(s.of("owned")),
            podgroup_queue(s.of("owned"), queue),
            podgroup_priority_class(s.of("owned"), priority),
        ),
        what=f"[{expect.kai.name}] one PodGroup owned by TrainJob owned's JobSet, carrying queue {queue} and "
        f"priority class {priority}, and the owner chain by uid",
        timeout=timeouts("api"),
        owners=True,
    )
    record.verdict(verdict)


@pytest.mark.parametrize("case", [param(c) for c in SHAPES])
def test_the_podgroup_has_the_shape_of_its_version(
    case: PodGroupCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """The PodGroup spec is the expectation row's, every pod is in its SubGroup, and the whole gang binds."""
    require_gpus(ctx.layout, case.pods)
    workspace.apply_all(case.manifests(ctx))
    job = observer.workload("owned", case.total_pods)
    job.visible(timeouts("schedule"))
    expected = expect.kai.podgroup_spec(case.replicated_jobs)

    def subgroup_of(pod: Obj) -> str | None:
        return expect.kai.subgroup_of(labels_of(pod).get(REPLICATED_JOB_LABEL, "?"))

    _, shaped = observer.until(
        lambda s: all_of(
            single_podgroup_owned_by_jobset(s),
            podgroup_shape(s.of("owned"), expected, expect.describe()),
            pods_grouped(s.of("owned"), subgroup_of),
        ),
        what=f"[{expect.kai.name}] PodGroup of {case.id} shaped as {expect.kai.podgroup_shape.value}",
        timeout=timeouts("api"),
        owners=True,
    )
    record.verdict(shaped)
    _, bound = job.bound(
        what=f"[{expect.kai.name}] all {case.total_pods} pods of {case.id} bound",
        timeout=timeouts("schedule"),
    )
    record.verdict(bound)


@pytest.mark.parametrize("case", [param(PodGroupCase(pods=2))])
def test_deleting_the_trainjob_collects_everything(
    case: PodGroupCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """Deleting the TrainJob removes its JobSet, Jobs, pods and PodGroup through garbage collection."""
    require_gpus(ctx.layout, case.pods)
    objs = workspace.apply_all(case.manifests(ctx))
    job = observer.workload("owned", case.total_pods)
    job.visible(timeouts("schedule"))
    job.bound(what="TrainJob owned bound", timeout=timeouts("schedule"))

    workspace.delete(objs[-1])
    before = observer.clock()
    _, gone = job.until(
        collected,
        what=f"[{expect.kai.name}] JobSet, Jobs, pods and PodGroup of the deleted TrainJob collected",
        timeout=timeouts("gc"),
        owners=True,
    )
    record.verdict(gone)
    record.note(f"garbage collection after the TrainJob was gone took {observer.clock() - before:.1f}s")


@pytest.mark.parametrize(("group", "resource"), OWNERS_READ, ids=[r for _, r in OWNERS_READ])
def test_the_podgrouper_may_read_the_owner_chain(
    group: str, resource: str, kube: KubeApi, expect: Expectations, record: CaseRecorder
) -> None:
    """SubjectAccessReview: the podgrouper's service account may get, list and watch the resource cluster-wide."""
    answers = [
        (verb, f"{resource}.{group}", kube.access_review(PODGROUPER_USER, verb, resource, group)) for verb in READ_VERBS
    ]
    verdict = access_granted(PODGROUPER_USER, answers)
    record.verdict(verdict)
    confirm(verdict, f"[{expect.kai.name}] the podgrouper may not read {resource}.{group}: without it its owner walk "
            "stops early (no TrainJob labels reach the PodGroup, or no gang at all; kai-scheduler.md §4.6)")  # fmt: skip


@pytest.mark.parametrize("case", [param(PodGroupCase(pods=2, extra=LAUNCHER_JOB))])
def test_a_depends_on_runtime_is_scheduled(
    case: PodGroupCase,
    request: pytest.FixtureRequest,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """A launcher that dependsOn the node replicatedJob being Ready: the nodes bind, then the launcher."""
    if expect.kai.depends_on_gap:
        request.applymarker(
            pytest.mark.xfail(
                reason=f"{expect.kai.name}: {expect.kai.depends_on_gap}", raises=AssertionError, strict=True
            )
        )
    require_gpus(ctx.layout, case.pods)
    workspace.apply_all(case.manifests(ctx))
    nodes = observer.workload("owned", case.pods)
    nodes.visible(timeouts("schedule"))
    # The hold bounds "never happens"; a gang KAI will place is placed well within it once visible.
    _, bound = nodes.bound(
        what=f"[{expect.kai.name}] the {case.pods} node pods bound before the launcher exists",
        timeout=timeouts.hold,
    )
    record.verdict(bound)
    _, everything = observer.workload("owned", case.total_pods).bound(
        what=f"[{expect.kai.name}] the launcher created once the nodes are Ready, and bound",
        timeout=timeouts("schedule"),
    )
    record.verdict(everything)


@pytest.mark.parametrize("case", [param(c) for c in FLOORS])
def test_no_subgroup_is_bound_below_its_floor(
    case: PodSetFloorCase,
    request: pytest.FixtureRequest,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """``aux`` (2 pods, floor 3) beside a ready ``node`` under a root minSubGroup of 1: no pod of a SubGroup is bound
    while fewer than its floor are (KAI PR #2096), on any observation of the hold."""
    require_subgroups(expect)
    gap = expect.kai.podset_floor_gap(ctx.combination.kai.version)
    if gap:
        request.applymarker(pytest.mark.xfail(reason=f"{expect.kai.name}: {gap}", raises=AssertionError, strict=True))
    require_gpus(ctx.layout, case.gpus)
    workspace.apply_all(case.manifests(ctx))
    job = observer.workload(case.workload, case.total_pods)
    job.visible(timeouts("schedule"))
    # Without these floors on the PodGroup the hold below would prove nothing.
    expected = expect.kai.podgroup_spec(case.floors, min_member=case.root_cap)
    _, shaped = job.until(
        lambda s: podgroup_shape(s, expected, expect.describe()),
        what=f"[{expect.kai.name}] PodGroup of {case.workload} with root minSubGroup {case.root_cap} and "
        f"{AUX_JOB}'s floor {case.aux_floor}",
        timeout=timeouts("api"),
    )
    record.verdict(shaped)
    # The full hold, not one ended on KAI's refusals: a KAI with the bug binds aux at once, and the watch needs its
    # grace past that to tell a SubGroup left below its floor from one being bound pod by pod.
    watch = SubGroupFloorWatch(settle(timeouts))
    _, held = job.holds(
        watch.observe,
        what=f"[{expect.kai.name}] no SubGroup of {case.workload} bound below its floor",
        hold=timeouts.hold,
    )
    record.verdict(held)


@pytest.mark.control
@pytest.mark.parametrize("case", [param(c) for c in FLOOR_CONTROL])
def test_control_the_subgroup_floor_detector_fires_on_a_subgroup_judged_against_a_higher_floor(
    case: FloorHeldByLimitCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """KAI binds an elastic SubGroup's floor up to its queue's limit; judged as if every pod were its floor, the
    SubGroup-floor detector fires once that lasts longer than a bind takes, and it holds for the real floor."""
    require_subgroups(expect)
    require_gpus(ctx.layout, case.floor)
    leaf = expect.kai.subgroup_of("node") or "node-replica-0"
    workspace.apply_all(case.manifests(ctx))
    job = observer.workload(case.workload, case.pods, minimum=case.floor)
    job.visible(timeouts("schedule"))
    grace = settle(timeouts)
    judged, own = SubGroupFloorWatch(grace, {leaf: case.pods}), SubGroupFloorWatch(grace)
    seen: list[Verdict] = []

    def judged_fires(snap: Snapshot) -> Verdict:
        seen[:] = [judged.observe(snap)]
        return fires(seen[0])

    snap, _ = job.until(
        judged_fires,
        what=f"[{expect.kai.name}] {case.workload} held at {case.floor} of {case.pods} bound pods by its queue's "
        f"limit for longer than {grace:.0f}s",
        timeout=timeouts("schedule") + grace,
        guard=job.narrow(own.observe),
    )
    record.verdict(seen[0], expect_violation=True)
    job.confirm_fired(seen[0], f"[{expect.kai.name}] the SubGroup-floor detector did not fire", naming=[leaf])
    kept = own.observe(snap)
    record.verdict(kept)
    job.confirm(kept, f"[{expect.kai.name}] the SubGroup-floor detector fires on a SubGroup at its own floor")


def require_subgroups(expect: Expectations) -> None:
    skip_unless(
        expect.kai.podgroup_shape is PodGroupShape.SUBGROUPS,
        f"[{expect.kai.name}] flat PodGroups: no SubGroup floor to judge (v0.16+ gives each replicatedJob's "
        "replica a SubGroup with its own minMember)",
    )


@pytest.mark.control
@pytest.mark.parametrize("case", [param(c) for c in CONTROL])
def test_control_the_ownership_detectors_fire_on_a_podgroup_owned_by_a_job(
    case: JobPodGroupCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """The only PodGroup beside a TrainJob's JobSet is a batch/v1 Job's: the ownership detector fires naming the Job
    as its owner, and the shape detector fires on its flat ``minMember`` 1."""
    workspace.apply_all(case.manifests(ctx))
    snap, _ = observer.until(
        lambda s: all_of(jobset_made(s), pods_annotated(s)),
        what=f"TrainJob {case.trainjob_name}'s JobSet made and Job {case.job_name}'s pods grouped by KAI",
        timeout=timeouts("schedule"),
        owners=True,
    )
    job = next(j for j in snap.jobs if j["metadata"]["name"] == case.job_name)
    owner = single_podgroup_owned_by_jobset(snap)
    record.verdict(owner, expect_violation=True)
    confirm_fired(owner, f"[{expect.kai.name}] the podgrouper ownership detector did not fire on a PodGroup owned by "
                  f"Job {case.job_name} (uid {uid_of(job)}), naming it", naming=[uid_of(job)], observer=observer)  # fmt: skip
    shape = podgroup_shape(snap, expect.kai.podgroup_spec(case.trainjob_shape), expect.describe())
    record.verdict(shape, expect_violation=True)
    # its PodGroup is pg-<job>-<job uid>: a shape verdict without the uid judged another PodGroup
    confirm_fired(shape, f"[{expect.kai.name}] the podgroup shape detector did not fire on Job {case.job_name}'s "
                  f"PodGroup (minMember 1, no SubGroups), judged as a TrainJob's of {case.pods} pods",
                  naming=[uid_of(job)], observer=observer)  # fmt: skip


def jobset_made(snap: Snapshot) -> Verdict:
    """Trainer has made the TrainJob's JobSet (a suspended TrainJob gets one too, without pods)."""
    return Verdict("jobset-made", len(snap.jobsets) == 1, f"{len(snap.jobsets)} JobSet(s) in the namespace")
