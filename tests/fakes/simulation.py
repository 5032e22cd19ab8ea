"""The shared ground of the simulated controllers: the injected faults, the store helpers every controller uses
to read and write :class:`~tests.fakes.kube.FakeKube`, and the state they share (the KAI expectation row, pod name
counter, PodGroup creation order). Each controller is a mixin over :class:`Simulation` in its own module;
:class:`tests.fakes.controllers.SimulatedControllers` composes them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from clusters.layout import GpuLayout
from fixtures.kinds import Kind
from suites.support import expectations as ex
from suites.support.snapshot import uid_of
from tests.fakes.kube import FakeKube

Obj = dict[str, Any]
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


@dataclass
class Faults:
    """Misbehaviour to inject."""

    #: KAI binds whatever fits instead of all-or-nothing.
    partial_gangs: bool = False
    #: Trainer copies TrainJob labels onto the pod templates (it must not).
    trainer_copies_trainjob_labels: bool = False
    #: The podgrouper recomputes spec.queue on every reconcile (it must keep it).
    podgrouper_moves_queue: bool = False
    #: The podgrouper's ClusterRole lacks ``trainjobs``: its owner walk stops at the JobSet (KAI §4.6), so the
    #: queue and priority come only from JobSet and pod labels, and SubjectAccessReviews deny the verbs.
    podgrouper_without_trainjob_rbac: bool = False
    #: The podgrouper reads the queue from this label key instead of ``kai.scheduler/queue``.
    podgrouper_queue_label: str | None = None
    #: KAI's binder does not run: the BindRequests the scheduler creates stay without a phase, no pod is bound,
    #: and the binder's Deployment is not Available.
    binder_down: bool = False


@dataclass
class Simulation:
    fake: FakeKube
    layout: GpuLayout
    kai_version: str = "v0.17.0"
    faults: Faults = field(default_factory=Faults)

    def __post_init__(self) -> None:
        self.row = ex.kai_row(self.kai_version)
        self._names = itertools.count(1)
        self._seen: dict[str, int] = {}  # PodGroup uid → order of creation (KAI considers older groups first)

    # ------------------------------------------------------------------------------------------ store helpers
    def _all(self, kind: Kind, namespace: str | None = None) -> list[Obj]:
        return self.fake.objects(kind, namespace)

    def _find(self, kind: Kind, name: str, namespace: str | None) -> Obj | None:
        return next((o for o in self._all(kind, namespace) if o["metadata"]["name"] == name), None)

    def _owned(self, kind: Kind, owner: Obj) -> list[Obj]:
        uid = uid_of(owner)
        return [
            o for o in self._all(kind, owner["metadata"].get("namespace"))
            if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])
        ]  # fmt: skip

    def _owner(self, obj: Obj, kind: Kind) -> Obj | None:
        refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("kind") == kind.kind]
        if not refs:
            return None
        found = self._find(kind, refs[0]["name"], obj["metadata"].get("namespace"))
        return found if found is not None and uid_of(found) == refs[0]["uid"] else None

    @staticmethod
    def _ref(owner: Obj, controller: bool = True) -> Obj:
        meta = owner["metadata"]
        return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"],
                **({"controller": True, "blockOwnerDeletion": True} if controller else {})}  # fmt: skip

    def _now(self) -> str:
        return self.fake.clock().strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_metadata(target: Obj, metadata: Obj | None) -> None:
    if not metadata:
        return
    meta = target.setdefault("metadata", {})
    for key in ("labels", "annotations"):
        if metadata.get(key):
            meta.setdefault(key, {}).update(metadata[key])
