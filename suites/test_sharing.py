"""GPU sharing: TrainJob pods asking for half a GPU share one device, and a fractional gang is all-or-nothing.

Only where the stack runs GPU sharing (Helm ``global.gpuSharing=true``, read from KAI's operator Config or the
admission's arguments, never assumed); elsewhere every case skips with that reason and the ``--kai-set`` value that
turns it on. Each pod carries ``gpu-fraction`` on its template (through a ``runtimePatches`` entry) and asks for no
whole GPU; KAI's admission gives it ``runtimeClassName: nvidia``, which the suite creates on kind (handler ``runc``)
and an existing cluster must have. Facts per version: suites/support/expectations/sharing.py. Specification:

* Two pods of ``0.5`` GPU form one gang: both are bound and run, each with the admission's RuntimeClass; each
  BindRequest says ``receivedResourceType: Fraction``, ``receivedGPU {count: 1, portion: "0.50"}`` and one GPU group,
  and both name the same node and group (one device; the binder labels both pods ``runai-gpu-group`` with it). Needs
  KAI's default GPU placement (binpack); another strategy skips, saying so.
* A gang of three ``0.5`` pods behind a blocker that leaves one GPU free (two of them would fit it) binds no pod for
  the whole hold, then all three together once the blocker is deleted. The blocker's whole-GPU pods carry the
  admission's RuntimeClass only in rows that put it on every GPU pod (v0.13–v0.15), none from v0.16.
* Control: two pods of ``0.6`` GPU cannot share a device; they are bound to two, and the one-device detector fires:
  proof that it reads the devices KAI chose on this cluster.

On kind the binder's reservation pods (one per shared GPU, in ``kai-resource-reservation``) wait for a GPU id that
only a real device answers; the suite answers for its fake GPUs while a case runs (clusters/gpu_sharing.py).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import pytest

from kai_conformance.clusters.state import ClusterState
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import KubeApi, kinds
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.fixtures.workspace import Workspace
from kai_conformance.reports.records import CaseRecorder
from kai_conformance.suites.support.cases.contract import param, require_gpus, skip_unless
from kai_conformance.suites.support.cases.sharing import FractionCase, FractionGangBehindBlocker
from kai_conformance.suites.support.detectors.gang import (
    gang_fully_bound,
    nothing_bound,
    pods_running,
)
from kai_conformance.suites.support.detectors.sharing import fractional_bind_requests, one_device, runtime_class
from kai_conformance.suites.support.detectors.verdict import all_of
from kai_conformance.suites.support.expectations import Expectations
from kai_conformance.suites.support.expectations.sharing import RESERVATION_NAMESPACE
from kai_conformance.suites.support.gpu_sharing import (
    SharingSupport,
    answering_reservations,
    describe_reservations,
    read_sharing_support,
)
from kai_conformance.suites.support.observe import Observer, Workload
from kai_conformance.suites.support.snapshot import Obj
from kai_conformance.suites.support.steps import never_partial_for_long

pytestmark = pytest.mark.sharing

SHARING = [FractionCase(2, "0.5")]
BEHIND_A_BLOCKER = [FractionGangBehindBlocker(3, "0.5")]
CONTROL = [FractionCase(2, "0.6")]


@pytest.fixture
def sharing(kube: KubeApi, cluster: ClusterState, record: CaseRecorder) -> Iterator[SharingSupport]:
    """What the cluster says about GPU sharing. On kind, while the case runs, the suite answers the binder's
    reservation pods for its fake GPUs (clusters/gpu_sharing.py)."""
    from kai_conformance.fixtures.kube.http import ClusterKube

    support = read_sharing_support(kube)
    record.note(support.describe())
    client = functools.partial(ClusterKube, cluster.kubeconfig, cluster.context)
    with answering_reservations(support, cluster.provider, client) as answers:
        yield support
    if answers is not None:
        record.note(answers.describe())


@pytest.mark.parametrize("case", [param(c) for c in SHARING])
def test_two_half_gpu_pods_share_one_device(
    case: FractionCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
    sharing: SharingSupport,
) -> None:
    """Both pods bound and running with the admission's RuntimeClass; their BindRequests say Fraction × 0.50 on
    one GPU group of one node."""
    fractions_share_one_device(case, ctx, workspace, observer, expect, timeouts, record, sharing)


@pytest.mark.parametrize("case", [param(c) for c in BEHIND_A_BLOCKER])
def test_a_fractional_gang_waits_whole_and_binds_whole_once_unblocked(
    case: FractionGangBehindBlocker,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
    sharing: SharingSupport,
) -> None:
    """One GPU free, a gang of three halves: nothing bound while the blocker runs; all three once it is gone."""
    require_sharing(sharing)
    require_gpus(ctx.layout, case.devices() + 1)
    row = f"[{expect.sharing.name}]"
    workspace.apply(case.queue(ctx))
    blocker_job = workspace.apply(case.blocker(ctx))
    blocker_pods = case.blocker_pods(ctx.layout)
    blocker = observer.workload("blocker", blocker_pods)
    blocker.visible(timeouts("schedule"))
    blocker_snap, _ = blocker.bound(
        what=f"[{expect.kai.name}] the blocker's {blocker_pods} whole-GPU pods bound", timeout=timeouts("schedule")
    )
    whole_class = sharing.runtime_class if expect.sharing.runtime_class_on_whole_gpu_pods else None
    whole = runtime_class(blocker_snap, whole_class or None)
    record.verdict(whole)
    blocker.confirm(whole, f"{row} RuntimeClass on {expect.sharing.runtime_class_pods}")

    workspace.apply(case.gang(ctx))
    gang = observer.workload("gang", case.pods)
    gang.visible(timeouts("schedule"))
    _, held = observer.holds(
        lambda s: all_of(nothing_bound(s.of("gang"), case.pods), gang_fully_bound(s.of("blocker"), blocker_pods)),
        what=f"{row} fractional gang of {case.pods} held back while one GPU is free",
        hold=timeouts.hold,
        refusals=timeouts.refusals,
        refused=gang.name,
    )
    record.verdict(held)

    workspace.delete(blocker_job)
    gang = bound_fractions(observer, "gang", case.pods, timeouts, record, expect)
    snap = gang.snapshot()
    fractions = fractional_bind_requests(snap, bind_requests(observer), case.portion)
    record.verdict(fractions)
    gang.confirm(fractions, f"{row} the fractional gang once unblocked")


@pytest.mark.control
@pytest.mark.parametrize("case", [param(c) for c in CONTROL])
def test_control_the_one_device_detector_fires_on_fractions_too_big_to_share(
    case: FractionCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
    sharing: SharingSupport,
) -> None:
    """Two pods of 0.6 GPU are bound to two devices; the one-device detector fires."""
    require_sharing(sharing)
    require_gpus(ctx.layout, case.devices)
    workspace.apply_all(case.manifests(ctx))
    gang = bound_fractions(observer, case.workload, case.pods, timeouts, record, expect)
    verdict = one_device(gang.snapshot(), bind_requests(observer))
    record.verdict(verdict, expect_violation=True)
    gang.confirm_fired(verdict, f"the one-device detector did not fire on two pods of {case.fraction} GPU")


# ------------------------------------------------------------------------------------------------- shared steps
def require_sharing(sharing: SharingSupport) -> None:
    reason = sharing.unavailable()
    skip_unless(reason is None, reason or "")


def bind_requests(observer: Observer) -> list[Obj]:
    return observer.kube.list(kinds.BIND_REQUEST, observer.namespace)


def bound_fractions(
    observer: Observer, name: str, pods: int, timeouts: TimeoutPolicy, record: CaseRecorder, expect: Expectations
) -> Workload:
    """Wait until KAI sees the fractional gang and binds all of it (never partially for longer than a bind takes)."""
    gang = observer.workload(name, pods)
    gang.visible(timeouts("schedule"))
    try:
        _, bound = gang.bound(
            what=f"[{expect.sharing.name}] all {pods} fractional pods of TrainJob {name} bound",
            timeout=timeouts("schedule"),
            guard=never_partial_for_long(gang, timeouts),
        )
    except Exception:  # the binder waits on its reservation pods: say where they are
        record.note(describe_reservations(observer.kube.list(kinds.POD, RESERVATION_NAMESPACE)))
        raise
    record.verdict(bound)
    return gang


def fractions_share_one_device(
    case: FractionCase,
    ctx: RenderContext,
    workspace: Workspace,
    observer: Observer,
    expect: Expectations,
    timeouts: TimeoutPolicy,
    record: CaseRecorder,
    sharing: SharingSupport,
) -> None:
    """The fractional pods of ``case`` bound and running with the admission's RuntimeClass; their BindRequests say
    Fraction × the portion on one GPU group of one node (also the AI conformance ``gpu_sharing`` case)."""
    require_sharing(sharing)
    skip_unless(sharing.unshared_devices() is None, sharing.unshared_devices() or "")
    require_gpus(ctx.layout, case.devices)
    workspace.apply_all(case.manifests(ctx))
    gang = bound_fractions(observer, case.workload, case.pods, timeouts, record, expect)
    row = f"[{expect.sharing.name}]"
    snap, running = gang.until(
        lambda s: pods_running(s, case.pods),
        what=f"the {case.pods} fractional pods of TrainJob {gang.name} running",
        timeout=timeouts("running"),
        failure=errors.WaitTimeout,
    )
    record.verdict(running)
    requests = bind_requests(observer)
    for verdict in (
        runtime_class(snap, sharing.runtime_class or None),
        fractional_bind_requests(snap, requests, case.portion),
        one_device(snap, requests),
    ):
        record.verdict(verdict)
        gang.confirm(verdict, f"{row} {case.pods} pods of {case.fraction} GPU")
