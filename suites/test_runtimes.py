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
  rows it sets ``minMember`` to their pods), has its own case on every row with the gap that honours the
  annotation. On the SubGroup rows (v0.16, v0.17) KAI's scheduler stops it for every such runtime Trainer ships
  (``cases.runtimes.workaround_gap``, upstream-facts §B10): deepspeed and mlx at the first wait (the cap of 1 is
  spent on ``launcher``, first by name and without pods), torchtune at the second (the initializers bind, then
  their Succeeded pods stop counting toward the cap and the PodGroup stays NotReady). The case is a strict xfail
  at exactly that wait: the waits before it must pass, and the dependent pods must exist before the last one is
  judged. KAI v0.13 ignores the annotation, so there it has no workaround.
* A runtime whose pods mount a volume of its ``volumeClaimPolicies`` (torchtune's ``initializer``) needs a cluster
  that provisions it: a case that expects those pods to bind skips when no StorageClass would serve the claim, and
  any case skips when KAI placed the pods (the claim has a selected node) but the claim stayed unbound, naming the
  claim, its provisioner and its last event: the pods cannot bind there, whatever KAI does (on kind the default
  StorageClass is served by local-path-provisioner, whose image must be pullable). It skips as soon as the claim
  is still unbound an ``api`` budget (30 s) into the wait (``ClaimsProvisioned``), not at the wait's end.
* Each case notes runtime × KAI version → works / fails (issue) / works with workaround for the report's table
  (``reports/sections/runtime_table.py``).
* Control: ``torch-distributed`` (one ``node`` replicatedJob) bound, judged as if it were a runtime with a second
  replicatedJob ``launcher``: the shape detector fires on its PodGroup (no ``launcher`` SubGroup, or the wrong
  ``minMember``) and the replicatedJob detector on the missing launcher pod, proof that both read this cluster's
  PodGroup and pods by replicatedJob.
"""

from __future__ import annotations

import time

import pytest

from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import KubeApi, kinds
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.fixtures.workspace import Workspace
from kai_conformance.reports.records import RUNTIME_NOT_JUDGED, CaseRecorder
from kai_conformance.suites.support.cases.contract import param, require_gpus
from kai_conformance.suites.support.cases.runtimes import (
    WORKLOAD,
    Outcome,
    RuntimeCase,
    Step,
    gap,
    outcome,
    workaround_gap,
    workaround_min_member,
)
from kai_conformance.suites.support.confirm import confirm_fired
from kai_conformance.suites.support.detectors.podgrouper import podgroup_shape, single_podgroup_owned_by_jobset
from kai_conformance.suites.support.detectors.queues import podgroup_queue
from kai_conformance.suites.support.detectors.runtimes import REPLICATED_JOB_LABEL, replicated_jobs_bound
from kai_conformance.suites.support.detectors.verdict import Verdict, all_of
from kai_conformance.suites.support.expectations import MIN_MEMBER_ANNOTATION, Expectations, ReplicatedJob
from kai_conformance.suites.support.observe import Observer
from kai_conformance.suites.support.shipped_runtimes import KNOWN, ShippedRuntime, source_of, uncovered
from kai_conformance.suites.support.snapshot import Snapshot, labels_of

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


#: The claims a runtime's ``volumeClaimPolicies`` make (JobSet names each ``<template>-<jobset>``) and where they are
#: provisioned; fixtures.kube.kinds has neither kind, only this area's torchtune copies use them.
PVC = kinds.Kind("v1", "PersistentVolumeClaim", "persistentvolumeclaims", True)
STORAGE_CLASS = kinds.Kind("storage.k8s.io/v1", "StorageClass", "storageclasses", False)
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
#: Set on a WaitForFirstConsumer claim when a binder binds its pod to a node (the volume binding plugin KAI's binder
#: runs, PreBind): from then on only the provisioner stands between the pod and its node.
SELECTED_NODE = "volume.kubernetes.io/selected-node"
PROVISIONER = "volume.kubernetes.io/storage-provisioner"
STORAGE_FIX = "run the area where the claim's StorageClass provisions volumes (kind: local-path-provisioner running)"


def claim_templates(rt: ShippedRuntime) -> list[dict]:
    """The PersistentVolumeClaim templates of the runtime's ``volumeClaimPolicies``, as shipped."""
    policies = rt.obj["spec"]["template"]["spec"].get("volumeClaimPolicies") or []
    return [t for policy in policies for t in policy.get("templates") or []]


def missing_storage_class(kube: KubeApi, rt: ShippedRuntime) -> str | None:
    """Why no StorageClass of this cluster would provision a claim of ``rt`` (its own, or the default one), or None."""
    templates = claim_templates(rt)
    if not templates:
        return None
    classes = kube.list(STORAGE_CLASS)
    names = {c["metadata"]["name"] for c in classes}
    default = [
        c["metadata"]["name"] for c in classes if (c["metadata"].get("annotations") or {}).get(DEFAULT_CLASS) == "true"
    ]
    for template in templates:
        wanted = (template.get("spec") or {}).get("storageClassName")
        claim = template["metadata"]["name"]
        if wanted is None and not default:
            return f"claim {claim} of {rt.name} asks for the default StorageClass and this cluster has none"
        if wanted and wanted not in names:
            return f"claim {claim} of {rt.name} asks for StorageClass {wanted}, which this cluster has not"
    return None


def unprovisioned_claim(kube: KubeApi, namespace: str) -> str | None:
    """A claim of the namespace still unbound although a binder placed its pod (it has a selected node): the
    provisioner, not the scheduler, keeps that pod off its node. None when there is none."""
    for claim in kube.list(PVC, namespace):
        annotations = claim["metadata"].get("annotations") or {}
        node = annotations.get(SELECTED_NODE)
        phase = (claim.get("status") or {}).get("phase", "Pending")
        if not node or phase == "Bound":
            continue
        events = kube.events(namespace, involving=claim)
        said = f': "{events[-1].get("message", "")}"' if events else ""
        return (
            f"PersistentVolumeClaim {claim['metadata']['name']} is {phase} although its pod was placed on {node}: "
            f"StorageClass {claim['spec'].get('storageClassName') or '(default)'}, provisioner "
            f"{annotations.get(PROVISIONER, 'unknown')}{said}"
        )
    return None


class ClaimsProvisioned:
    """A guard for the wait on a runtime's pods: fails once a claim whose pod was placed is still unbound ``grace``
    seconds into the wait (a provisioner that works binds it within seconds: kind's local-path-provisioner runs a
    helper pod that makes a directory), so the case skips then instead of at the end of the wait (120 s per
    torchtune runtime on a cluster without a provisioner, measured). Asks the API at most every ``every`` seconds."""

    def __init__(self, kube: KubeApi, namespace: str, grace: float, every: float = 5.0, clock=time.monotonic) -> None:
        self.kube, self.namespace, self.grace, self.every, self.clock = kube, namespace, grace, every, clock
        self.started, self.asked = clock(), float("-inf")

    def __call__(self, snap: Snapshot) -> Verdict:
        now = self.clock()
        if now - self.started < self.grace or now - self.asked < self.every:
            return Verdict("claims-provisioned", True, "not judged yet")
        self.asked = now
        unbound = unprovisioned_claim(self.kube, self.namespace)
        return Verdict("claims-provisioned", unbound is None, unbound or "every claim of a placed pod is bound")


def replicated_jobs_created(snap: Snapshot, wanted: dict[str, int]) -> Verdict:
    """Every replicatedJob of ``wanted`` (name → pods) has that many live pods: JobSet released their dependsOn."""
    short = []
    for name, pods in wanted.items():
        live = [p for p in snap.live_pods if labels_of(p).get(REPLICATED_JOB_LABEL) == name]
        if len(live) < pods:
            short.append(f"{name}: {len(live)} of {pods} pods exist")
    if short:
        return Verdict("replicated-jobs-created", False, "; ".join(short))
    return Verdict("replicated-jobs-created", True, f"the pods of {', '.join(wanted)} exist")


def expect_gap_at(request: pytest.FixtureRequest, step: Step, stop: Step | None, reason: str) -> None:
    """From here on, the case is the strict xfail of ``reason`` when ``step`` is where the gap stops it: a wait
    before it that fails is a plain failure (pytest reads an xfail mark added during the call when the item had
    none before it: _pytest/skipping.py ``pytest_runtest_call``)."""
    if stop is step:
        request.applymarker(pytest.mark.xfail(reason=reason, raises=AssertionError, strict=True))


def run_case(
    case: RuntimeCase,
    ctx: RenderContext,
    request: pytest.FixtureRequest,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
    *,
    stop: Step | None = None,
    reason: str = "",
) -> None:
    """Install, create, check the PodGroup's owner, shape and queue, then the gang bound in JobSet's order.

    ``stop``: the wait a known gap stops (``reason``), a strict xfail from there on; a wait it stops is held for
    ``timeouts.hold`` once what it judges exists (it bounds "never happens"), the others have the schedule budget.
    """
    rt = shipped_runtime(case, ctx)
    require_gpus(ctx.layout, 2)
    if stop is not Step.FIRST:  # its pods are to bind: they need the volumes they mount
        missing = missing_storage_class(workspace.kube, rt)
        if missing:
            pytest.skip(f"{missing}: its pods cannot bind on this cluster, {RUNTIME_NOT_JUDGED}; {STORAGE_FIX}")
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
    # The PodGroup is the one the gap's reason speaks of (a workaround's cap reached it): from here on the gap shows.
    expect_gap_at(request, Step.FIRST, stop, reason)
    # The hold bounds "never happens" (the gap); a gang KAI will place is placed well within it once visible.
    claims = ClaimsProvisioned(workspace.kube, workspace.namespace, timeouts("api")) if claim_templates(rt) else None
    try:
        _, bound = observer.until(
            lambda s: replicated_jobs_bound(s.of(WORKLOAD), first),
            what=f"[{expect.kai.name}] {rt.name}: {', '.join(first)} bound whole",
            timeout=timeouts.hold if stop is Step.FIRST else timeouts("schedule"),
            events=True,
            guard=claims,
        )
    except (AssertionError, errors.InfrastructureError):
        unbound = unprovisioned_claim(workspace.kube, workspace.namespace) if claim_templates(rt) else None
        if unbound:  # the provisioner, not KAI, keeps the pods off their nodes: no verdict either way
            pytest.skip(f"{rt.name}: {unbound}; its pods cannot bind here, {RUNTIME_NOT_JUDGED}; {STORAGE_FIX}")
        raise
    record.verdict(bound)
    if later:
        awaited = ", ".join(
            f"{d['name']} {d.get('status', '')}".strip() for deps in rt.depends_on.values() for d in deps
        )
        _, created = observer.until(
            lambda s: replicated_jobs_created(s.of(WORKLOAD), later),
            what=f"[{expect.kai.name}] {rt.name}: {', '.join(later)} created by JobSet once {awaited}",
            timeout=timeouts("schedule"),
            events=True,
        )
        record.verdict(created)
        expect_gap_at(request, Step.LATER, stop, reason)
        _, rest = observer.until(
            lambda s: replicated_jobs_bound(s.of(WORKLOAD), later),
            what=f"[{expect.kai.name}] {rt.name}: {', '.join(later)} bound",
            timeout=timeouts.hold if stop is Step.LATER else timeouts("schedule"),
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
    run_case(case, ctx, request, workspace, observer, expect, timeouts, record,
             stop=Step.FIRST if known else None, reason=f"{expect.kai.name}: {known}")  # fmt: skip


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
    """Where the row has the dependsOn gap and honours ``kai.scheduler/batch-min-member``: with it on the TrainJob
    the replicatedJobs created at once form the gang and bind, and the dependent ones follow; or, where KAI's
    scheduler stops the workaround (:func:`~suites.support.cases.runtimes.workaround_gap`), the strict xfail of the
    wait it stops, every wait before it passing."""
    rt = shipped_runtime(case, ctx)
    if not gap(expect.kai, rt):
        pytest.skip(f"{rt.name} runs as shipped under {expect.kai.name}: no workaround needed")
    value = workaround_min_member(expect.kai, rt)
    if value is None:
        pytest.skip(f"{rt.name} under {expect.kai.name}: {outcome(expect.kai, rt)[1]}")
    stops = workaround_gap(expect.kai, rt)
    predicted = Outcome.WORKAROUND if stops is None else Outcome.FAILS
    record.note(
        f'runtime {rt.name} ({rt.source}) under {expect.kai.name} with {MIN_MEMBER_ANNOTATION}: "{value}": expected '
        + (f"{predicted.value}" if stops is None else f"to stop at {stops.step.value}: {stops.reason}")
    )
    run_case(case, ctx, request, workspace, observer, expect, timeouts, record,
             stop=stops.step if stops else None, reason=f"{expect.kai.name}: {stops.reason}" if stops else "")  # fmt: skip


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
    confirm_fired(shape, f"[{expect.kai.name}] the shape detector did not fire on {rt.name}'s PodGroup judged as one "
                  f"with a {CONTROL_EXTRA} replicatedJob", observer=observer)  # fmt: skip
    missing = replicated_jobs_bound(snap, {CONTROL_EXTRA: 1})
    record.verdict(missing, expect_violation=True)
    confirm_fired(missing, f"[{expect.kai.name}] no {CONTROL_EXTRA} pod exists, yet the detector passed",
                  observer=observer)  # fmt: skip
