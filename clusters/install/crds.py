"""Does the cluster serve the APIs the suite speaks? Each component's CustomResourceDefinitions must exist, be
Established, and serve the version of :mod:`fixtures.kube.kinds` (what every case reads and writes).

Every supported combination's CRDs serve exactly these versions (upstream CRDs at each tag: Queue
``scheduling.run.ai/v2``, PodGroup ``v2alpha2``, BindRequest ``v1alpha2``, JobSet ``jobset.x-k8s.io/v1alpha2``,
TrainJob and (Cluster)TrainingRuntime ``trainer.kubeflow.org/v1alpha1``; checked against the schemas by
``tests/install/test_crds.py``). Reading CRDs needs cluster-wide ``get`` on them; a user without it still gets an
answer from API discovery, which every user may read, and the record says which way it was checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kai_conformance.fixtures import errors, progress
from kai_conformance.fixtures.kube import KubeApi, api_views, kinds
from kai_conformance.fixtures.kube.kinds import Kind
from kai_conformance.fixtures.waits import Observation, TimeoutPolicy, eventually

#: The kinds of each component the suite uses, at the versions it uses them.
SUITE_KINDS: dict[str, tuple[Kind, ...]] = {
    "kai": (kinds.QUEUE, kinds.POD_GROUP, kinds.BIND_REQUEST),
    "jobset": (kinds.JOB_SET,),
    "trainer": (kinds.TRAIN_JOB, kinds.TRAINING_RUNTIME, kinds.CLUSTER_TRAINING_RUNTIME),
}


def crd_name(kind: Kind) -> str:
    return kind.resource  # ``queues.scheduling.run.ai``: a CRD is named plural.group


def _served_versions(obj: Mapping[str, Any]) -> list[str]:
    crd = api_views.crd(obj)
    return [v["name"] for v in crd.get("spec", {}).get("versions", []) if v.get("served")]


def _established(obj: Mapping[str, Any]) -> tuple[bool, str]:
    crd = api_views.crd(obj)
    for condition in crd.get("status", {}).get("conditions", []) or []:
        if condition.get("type") == "Established":
            return condition.get("status") == "True", condition.get("message", "")
    return False, "no Established condition yet"


def check_crds(kube: KubeApi, component: str, label: str, timeouts: TimeoutPolicy, fix: str) -> str:
    """Every CRD of ``component`` exists, serves the suite's version and is Established; returns how it was
    checked. A missing CRD or an unserved version fails at once, naming ``label`` and ``fix``; only a CRD that
    is not Established yet (it was just applied) is waited for."""
    wanted = SUITE_KINDS[component]
    try:
        found = {kind: kube.find(kinds.CRD, crd_name(kind)) for kind in wanted}
    except errors.Forbidden as exc:
        return _by_discovery(kube, wanted, label, fix, exc)
    present = {kind: crd for kind, crd in found.items() if crd is not None}
    missing = [f"{crd_name(k)} ({k.kind})" for k in found if k not in present]
    if missing:
        raise errors.InfrastructureError(
            f"{label} is not installed: CustomResourceDefinition {', '.join(missing)} missing. fix: {fix}"
        )
    unserved = [
        f"{crd_name(k)} serves {', '.join(_served_versions(crd)) or 'no version'}, not {k.version}"
        for k, crd in present.items()
        if k.version not in _served_versions(crd)
    ]
    if unserved:
        raise errors.InfrastructureError(
            f"{label} does not serve the API the suite speaks: {'; '.join(unserved)}. fix: install the {label} "
            "release of the selected combination, or select the combination the cluster runs (--versions)"
        )

    def established() -> Observation:
        pending = []
        for kind in wanted:
            ok, why = _established(kube.get(kinds.CRD, crd_name(kind)))
            if not ok:
                pending.append(f"{crd_name(kind)} ({why})" if why else crd_name(kind))
        return Observation(not pending, f"not Established: {', '.join(pending)}" if pending else "Established")

    eventually(established, what=f"{label} CRDs to be Established", timeout=timeouts("api"),
               failure=errors.WaitTimeout, fix=f"`kubectl describe crd` shows why; {fix}")  # fmt: skip
    return "served: " + ", ".join(f"{k.kind} {k.api_version}" for k in wanted)


def _by_discovery(kube: KubeApi, wanted: tuple[Kind, ...], label: str, fix: str, denied: errors.KubeError) -> str:
    """Reading CRDs is forbidden: ask API discovery instead (no RBAC needed), and say so."""
    progress.report(f"{label}: cannot read CustomResourceDefinitions ({denied.message}); checking by API discovery")
    unserved = []
    for kind in wanted:
        try:
            kube.discover(kind)
        except errors.KindNotServed:
            unserved.append(str(kind))
    if unserved:
        raise errors.InfrastructureError(
            f"{label} is not installed: API discovery does not list {', '.join(unserved)} (its CRD is missing or "
            f"serves another version; reading CRDs is forbidden to this user: {denied.message}). fix: {fix}"
        )
    return "served by API discovery (reading CustomResourceDefinitions is forbidden): " + ", ".join(
        f"{k.kind} {k.api_version}" for k in wanted
    )
