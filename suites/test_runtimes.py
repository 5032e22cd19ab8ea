"""Trainer's shipped runtimes under KAI: every ClusterTrainingRuntime the tested Trainer release ships, as shipped.

Specification:

* The runtimes are the tested Trainer's own ``manifests/base/runtimes/``, read when the first case runs from
  ``--trainer-runtimes=DIR|URL`` (default: the release's at its tag on GitHub; a Trainer PR gate passes its
  checkout's), never kept in this repository. v2.2.0 and v2.3.0 ship the same eight, one case each: torch,
  deepspeed, mlx, jax, xgboost and three torchtune runtimes; a case the source ships no runtime for skips, and a
  runtime it ships beyond them (no case) is named in every shipped case's notes. Runtimes that cannot be read
  fail every case of the area with one message naming ``--trainer-runtimes``. A case installs a namespaced
  ``TrainingRuntime`` copy in its namespace (nothing cluster-wide), with ``schedulerName: kai-scheduler`` in every pod template as the Trainer KAI guide says and the
  suite's workload in place of the framework's images; replicatedJobs, initializers, launcher, ``dependsOn`` and
  ``mlPolicy`` stay as shipped (``shipped_runtimes.CHANGES`` lists every change).
* A TrainJob on it, routed to the case's queue by its ``kai.scheduler/queue`` label and asking one GPU per node,
  gets one PodGroup owned by its JobSet, of the shape the KAI row builds from the runtime's replicatedJobs (v0.16+:
  a SubGroup per replicatedJob; v0.13–v0.14 a flat ``minMember`` over all of them; v0.15 the annotated gang),
  queued to the case's queue; the replicatedJobs JobSet creates at once bind whole, then the ones that
  ``dependsOn`` them (after their dependency is Ready, or Complete: an initializer's workload ends on its own).
* Known upstream gap: a runtime with ``dependsOn`` (v2.3 deepspeed and mlx: launcher on node Ready; torchtune:
  node on both initializers Complete) stays unscheduled where the KAI row has ``depends_on_gap`` (KAI #1209): a
  strict xfail. The documented workaround, ``kai.scheduler/batch-min-member`` on the TrainJob (it reaches the
  JobSet through skip-top-owner and caps the root ``minSubGroup`` at the replicatedJobs created at once; on flat
  rows it sets ``minMember`` to their pods), is proved by its own case on every row with the gap that honours the
  annotation; KAI v0.13 ignores it, so there it has no workaround.
* Each case notes runtime × KAI version → works / fails (issue) / works with workaround for the report's table
  (``reports/runtime_table.py``).
* Control: ``torch-distributed`` (one ``node`` replicatedJob) bound, judged as if it were a runtime with a second
  replicatedJob ``launcher``: the shape detector fires on its PodGroup (no ``launcher`` SubGroup, or the wrong
  ``minMember``) and the replicatedJob detector on the missing launcher pod, proof that both read this cluster's
  PodGroup and pods by replicatedJob.
"""

from __future__ import annotations

import pytest

from kai_conformance.fixtures.render import RenderContext
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.fixtures.workspace import Workspace
from kai_conformance.reports.records import CaseRecorder
from kai_conformance.suites.support.cases.contract import param, require_gpus
from kai_conformance.suites.support.cases.runtimes import (
    WORKAROUND_NOT_SEEN,
    WORKLOAD,
    Outcome,
    RuntimeCase,
    gap,
    outcome,
    workaround_unproven,
)
from kai_conformance.suites.support.detectors.podgrouper import podgroup_shape, single_podgroup_owned_by_jobset
from kai_conformance.suites.support.detectors.queues import podgroup_queue
from kai_conformance.suites.support.detectors.runtimes import replicated_jobs_bound
from kai_conformance.suites.support.detectors.verdict import all_of
from kai_conformance.suites.support.expectations import Expectations, ReplicatedJob
from kai_conformance.suites.support.observe import Observer
from kai_conformance.suites.support.shipped_runtimes import KNOWN, ShippedRuntime, source_of, uncovered

pytestmark = pytest.mark.runtimes

#: The runtimes Trainer's releases ship, one case each (a case skips where the tested source does not ship it).
RUNTIMES = list(KNOWN)
#: Runtimes whose initializers must end before the trainer starts: their workload ends by itself (real kubelets).
_ENDING = ("torchtune",)
CONTROL_RUNTIME = "torch-distributed"
CONTROL_EXTRA = "launcher"


def _marks(name: str) -> list[pytest.MarkDecorator]:
    return [pytest.mark.kubelet] if name.startswith(_ENDING) else []


SHIPPED = [pytest.param(RuntimeCase(n), id=n, marks=_marks(n)) for n in RUNTIMES]
WORKAROUND = [pytest.param(RuntimeCase(n, workaround=True), id=n, marks=_marks(n)) for n in RUNTIMES]


def shipped_runtime(case: RuntimeCase, ctx: RenderContext) -> ShippedRuntime:
    """The case's runtime as its source ships it; a skip when the source ships none of that name. Runtimes that
    cannot be read raise RuntimesUnavailable, reported as its message alone (it names --trainer-runtimes)."""
    rt = case.found(ctx)
    if rt is None:
        pytest.skip(f"{source_of(ctx)} ships no runtime {case.name}")
    return rt


def run_case(
    case: RuntimeCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
    *,
    hold: float,
) -> None:
    """Install, create, check the PodGroup's owner, shape and queue, then the gang bound in JobSet's order."""
    rt = shipped_runtime(case, ctx)
    require_gpus(ctx.layout, 2)
    workspace.apply_all(case.manifests(ctx))
    rjobs = rt.replicated_jobs()
    first = {r.name: r.pods * r.replicas for r in rjobs if r.name in rt.up_front}
    later = {r.name: r.pods * r.replicas for r in rjobs if r.name not in rt.up_front}
    observer.workload(WORKLOAD, sum(first.values())).visible(timeouts("schedule"))
    expected = expect.kai.podgroup_spec(rjobs, case.min_member(ctx))
    queue = case.expected_queue(ctx)
    _, shaped = observer.until(
        lambda s: all_of(
            single_podgroup_owned_by_jobset(s),
            podgroup_shape(s.of(WORKLOAD), expected, expect.describe()),
            podgroup_queue(s.of(WORKLOAD), queue),
        ),
        what=f"[{expect.kai.name}] one PodGroup of {rt.name} ({rt.source}) shaped as "
        f"{expect.kai.podgroup_shape.value} over {', '.join(rt.replicated_job_names)}, queued to {queue}",
        timeout=timeouts("api"),
        owners=True,
    )
    record.verdict(shaped)
    # The hold bounds "never happens" (the gap); a gang KAI will place is placed well within it once visible.
    _, bound = observer.until(
        lambda s: replicated_jobs_bound(s.of(WORKLOAD), first),
        what=f"[{expect.kai.name}] {rt.name}: {', '.join(first)} bound whole",
        timeout=hold,
        events=True,
    )
    record.verdict(bound)
    if later:
        _, rest = observer.until(
            lambda s: replicated_jobs_bound(s.of(WORKLOAD), later),
            what=f"[{expect.kai.name}] {rt.name}: {', '.join(later)} created once "
            f"{', '.join(d['name'] for deps in rt.depends_on.values() for d in deps)} got there, and bound",
            timeout=timeouts("schedule"),
            events=True,
        )
        record.verdict(rest)


@pytest.mark.parametrize("case", SHIPPED)
def test_a_shipped_runtime_runs_under_kai(
    case: RuntimeCase,
    request: pytest.FixtureRequest,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """The runtime as shipped (plus schedulerName and the workload): one PodGroup of the row's shape on the case's
    queue, and every pod bound, dependent replicatedJobs after their dependency."""
    rt = shipped_runtime(case, ctx)
    predicted, why = outcome(expect.kai, rt)
    record.note(
        f"runtime {rt.name} ({rt.source} from {rt.origin}) under {expect.kai.name}: expected {predicted.value}"
        + (f" ({why})" if why else "")
    )
    extra = uncovered(rt.origin)
    if extra:
        record.note(f"{rt.origin} also ships {', '.join(extra)}: no case of this area runs them")
    known = gap(expect.kai, rt)
    if known:
        request.applymarker(pytest.mark.xfail(reason=f"{expect.kai.name}: {known}", raises=AssertionError, strict=True))
    run_case(case, ctx, workspace, observer, expect, timeouts, record, hold=timeouts.hold if known else
             timeouts("schedule"))  # fmt: skip


@pytest.mark.parametrize("case", WORKAROUND)
def test_a_depends_on_runtime_runs_with_the_workaround(
    request: pytest.FixtureRequest,
    case: RuntimeCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """Where the row has the dependsOn gap: with ``kai.scheduler/batch-min-member`` on the TrainJob the replicatedJobs
    created at once form the gang, bind, and the dependent ones follow."""
    rt = shipped_runtime(case, ctx)
    predicted, why = outcome(expect.kai, rt)
    if predicted is Outcome.WORKS:
        pytest.skip(f"{rt.name} runs as shipped under {expect.kai.name}: no workaround needed")
    if predicted is Outcome.FAILS:
        pytest.skip(f"{rt.name} under {expect.kai.name}: {why}")
    if workaround_unproven(expect.kai):
        request.applymarker(pytest.mark.xfail(reason=f"{expect.kai.name}: {WORKAROUND_NOT_SEEN}", strict=True))
    record.note(f"runtime {rt.name} ({rt.source}) under {expect.kai.name}: workaround {why}")
    run_case(case, ctx, workspace, observer, expect, timeouts, record, hold=timeouts("schedule"))


@pytest.mark.control
@pytest.mark.parametrize("case", [param(RuntimeCase(CONTROL_RUNTIME))])
def test_control_the_runtime_detectors_fire_on_a_missing_replicated_job(
    case: RuntimeCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
) -> None:
    """torch-distributed bound, judged as if its runtime had a ``launcher`` too: both detectors fire."""
    rt = shipped_runtime(case, ctx)
    require_gpus(ctx.layout, 2)
    workspace.apply_all(case.manifests(ctx))
    pods = rt.pods_of(rt.replicated_job_names)
    snap, _ = observer.workload(WORKLOAD, pods).bound(
        what=f"[{expect.kai.name}] {rt.name} bound", timeout=timeouts("schedule"), owners=True
    )
    pretended = [*rt.replicated_jobs(), ReplicatedJob(CONTROL_EXTRA, 1)]
    shape = podgroup_shape(snap, expect.kai.podgroup_spec(pretended, case.min_member(ctx)), expect.describe())
    record.verdict(shape, expect_violation=True)
    assert not shape.ok, (
        f"[{expect.kai.name}] the shape detector did not fire on {rt.name}'s PodGroup judged as one with a "
        f"{CONTROL_EXTRA} replicatedJob: {shape}"
    )
    missing = replicated_jobs_bound(snap, {CONTROL_EXTRA: 1})
    record.verdict(missing, expect_violation=True)
    assert not missing.ok, f"[{expect.kai.name}] no {CONTROL_EXTRA} pod exists, yet the detector passed: {missing}"
