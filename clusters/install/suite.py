"""The suite's own run-wide objects (``clusters/suite_stack.py``): applied after the stack, labelled
``scope=stack`` with the run id, and removed at the end of a run on an existing cluster.

Their creation is retried while Trainer's runtime webhook or KAI's queue webhook is not serving yet (both
known to be racy right after install); removal only ever touches objects carrying this run's label.
"""

from __future__ import annotations

from kai_conformance.clusters.suite_stack import stack_manifests
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import KubeApi, describe, kinds
from kai_conformance.fixtures.ownership import owned_selector, stamp
from kai_conformance.fixtures.waits import Observation, TimeoutPolicy, eventually

#: Removal order: a namespace the behaviour probe could not remove (with its workload), runtimes, the slices'
#: SchedulingShards (clusters/slices.py), then the queues (the probes' leaf queues and the parents; the cases' queues
#: are gone by then), and the RuntimeClass for fractional GPU pods when this run created it
#: (clusters/gpu_sharing.py).
REMOVAL_ORDER = (
    kinds.NAMESPACE, kinds.CLUSTER_TRAINING_RUNTIME, kinds.SCHEDULING_SHARD, kinds.QUEUE, kinds.RUNTIME_CLASS,
)  # fmt: skip


def apply_suite_objects(kube: KubeApi, run_id: str, image: str, timeouts: TimeoutPolicy) -> list[str]:
    return apply_stack_objects(kube, run_id, stack_manifests(image), timeouts)


def apply_stack_objects(kube: KubeApi, run_id: str, objects: list[dict], timeouts: TimeoutPolicy) -> list[str]:
    """Apply run-wide objects as this run's stack objects, retrying while a webhook is not serving yet; one that
    exists and is not the suite's is refused with the fix. Returns what was applied."""
    applied = []
    for obj in objects:
        stamped = stamp(obj, run_id)
        what = describe(kube.kind_of(stamped), stamped["metadata"]["name"], None)

        def attempt(stamped: dict = stamped, what: str = what) -> Observation:
            try:
                kube.apply(stamped)
            except errors.ForeignObject as exc:
                raise errors.UsageError(
                    f"{what} already exists on the cluster and is not the suite's (no "
                    f"app.kubernetes.io/managed-by=kai-conformance label); the suite never changes it. fix: remove "
                    "or rename it, or run against another cluster"
                ) from exc
            return Observation(True, f"{what} applied")

        # Transient answers (a webhook not serving yet: 5xx) are retried by eventually until the budget ends.
        eventually(attempt, what=f"apply {what}", timeout=timeouts("webhook"), failure=errors.WaitTimeout)
        applied.append(what)
    return applied


def remove_suite_objects(kube: KubeApi, run_id: str, timeouts: TimeoutPolicy) -> list[str]:
    """Delete this run's stack-scope objects and wait until they are gone; returns problems (empty when clean)."""
    selector = owned_selector(run_id, scope="stack")
    problems = []
    for kind in REMOVAL_ORDER:
        try:
            names = [o["metadata"]["name"] for o in kube.list(kind, labels=selector)]
        except errors.KindNotServed:
            continue

        def gone(kind=kind, names=names) -> Observation:
            left = []
            for name in names:
                current = kube.find(kind, name)
                if current is None:
                    continue
                if not current["metadata"].get("deletionTimestamp"):
                    try:
                        kube.delete(kind, name)
                    except errors.Forbidden as exc:  # a parent queue while a child still terminates
                        left.append(f"{name} (deletion refused: {exc.message})")
                        continue
                if kube.find(kind, name) is not None:
                    left.append(name)
            return Observation(not left, f"still present: {', '.join(left)}" if left else "gone")

        try:
            eventually(gone, what=f"removal of the suite's {kind.kind} objects", timeout=timeouts("cleanup"),
                       failure=errors.WaitTimeout)  # fmt: skip
        except errors.KubeError as exc:
            problems.append(f"{kind.kind}: {exc}")
        except errors.WaitTimeout as exc:
            problems.append(str(exc))
    return problems
