"""GPU-sharing detectors: what KAI's BindRequests say about fractional pods, whether pods share one device, and
which RuntimeClass the pods got (facts: suites/support/expectations/sharing.py).

BindRequests are named after their pods (KAI §2.4); the case reads them with the snapshot it judges.
"""

from __future__ import annotations

from collections.abc import Iterable

from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.expectations.sharing import FRACTION, GPU_GROUP_LABEL
from kai_conformance.suites.support.snapshot import Obj, Snapshot, labels_of, name_list, name_of, node_of


def _requests_by_pod(requests: Iterable[Obj]) -> dict[str, Obj]:
    return {(r.get("spec") or {}).get("podName", name_of(r)): r for r in requests}


def _groups(request: Obj) -> tuple[str, ...]:
    return tuple((request.get("spec") or {}).get("selectedGPUGroups") or ())


def fractional_bind_requests(snap: Snapshot, requests: Iterable[Obj], portion: str) -> Verdict:
    """Each bound pod's BindRequest says ``Fraction``, one device, ``portion`` of it, and names its GPU group."""
    by_pod = _requests_by_pod(requests)
    bound = snap.bound_pods
    if not bound:
        return Verdict("fraction-bindrequests", False, f"no pod of {snap.what} is bound")
    wrong = []
    for pod in bound:
        request = by_pod.get(name_of(pod))
        if request is None:
            wrong.append(f"{name_of(pod)}: no BindRequest")
            continue
        spec = request.get("spec") or {}
        got = spec.get("receivedGPU") or {}
        seen = (spec.get("receivedResourceType"), got.get("count"), got.get("portion"), len(_groups(request)))
        if seen != (FRACTION, 1, portion, 1):
            wrong.append(
                f"{name_of(pod)}: receivedResourceType {seen[0]!r}, receivedGPU count {seen[1]!r} portion "
                f"{seen[2]!r}, {seen[3]} GPU group(s)"
            )
    if wrong:
        return Verdict(
            "fraction-bindrequests",
            False,
            f"{len(wrong)} of {len(bound)} BindRequests do not say {FRACTION} × 1 device × {portion}: "
            + name_list(wrong, str),
        )
    return Verdict(
        "fraction-bindrequests", True, f"all {len(bound)} BindRequests say {FRACTION}, 1 device, portion {portion}"
    )


def one_device(snap: Snapshot, requests: Iterable[Obj]) -> Verdict:
    """Every bound pod of the workload is on the same node and the same GPU group (device): by its BindRequest's
    ``selectedGPUGroups`` and, once the binder labelled it, the pod's ``runai-gpu-group``."""
    by_pod = _requests_by_pod(requests)
    bound = snap.bound_pods
    if not bound:
        return Verdict("one-device", False, f"no pod of {snap.what} is bound")
    placed: dict[tuple[str | None, tuple[str, ...]], list[str]] = {}
    disagree = []
    for pod in bound:
        groups = _groups(by_pod.get(name_of(pod)) or {})
        label = labels_of(pod).get(GPU_GROUP_LABEL)
        if label is not None and (label,) != groups:
            disagree.append(f"{name_of(pod)} labelled {GPU_GROUP_LABEL}={label} but its BindRequest says {groups}")
        placed.setdefault((node_of(pod), groups), []).append(name_of(pod))
    shown = "; ".join(
        f"{', '.join(pods)} on {node} GPU group {'+'.join(groups) or 'none'}" for (node, groups), pods in placed.items()
    )
    shared = len(placed) == 1 and len(next(iter(placed))[1]) == 1 and not disagree
    if shared:
        return Verdict("one-device", True, f"all {len(bound)} bound pods share one device: {shown}")
    text = f"the {len(bound)} bound pods of {snap.what} are on {len(placed)} device(s): {shown}"
    return Verdict("one-device", False, text + (f"; {'; '.join(disagree)}" if disagree else ""))


def runtime_class(snap: Snapshot, expected: str | None) -> Verdict:
    """Every live pod has ``spec.runtimeClassName`` = ``expected`` (None: no RuntimeClass at all)."""
    pods = snap.live_pods
    if not pods:
        return Verdict("runtime-class", False, f"no live pod of {snap.what}")
    wrong = [p for p in pods if (p.get("spec") or {}).get("runtimeClassName") != expected]
    want = expected or "none"
    if wrong:
        return Verdict(
            "runtime-class",
            False,
            f"{len(wrong)} of {len(pods)} pods of {snap.what} do not have RuntimeClass {want}: "
            + name_list(wrong, lambda p: f"{name_of(p)} ({(p.get('spec') or {}).get('runtimeClassName') or 'none'})"),
        )
    return Verdict("runtime-class", True, f"all {len(pods)} pods of {snap.what} have RuntimeClass {want}")
