"""The shared ground of the simulated controllers: the injected faults, the store helpers every controller uses
to read and write :class:`~tests.fakes.kube.FakeKube`, and the state they share (the KAI expectation row, pod name
counter, PodGroup creation order). Each controller is a mixin over :class:`Simulation` in its own module;
:class:`tests.fakes.controllers.SimulatedControllers` composes them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.kube.kinds import Kind
from kai_conformance.suites.support import expectations as ex
from kai_conformance.suites.support.snapshot import uid_of
from tests.fakes.kube import FakeKube, clone

Obj = dict[str, Any]
#: What the Job controller puts on every pod it creates and removes once it has counted the pod.
JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
#: Kubernetes' default ``terminationGracePeriodSeconds`` (pkg/apis/core/v1/defaults.go).
DEFAULT_GRACE_SECONDS = 30
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
#: The stack's components, by the image name their Deployments run (suites/support/components.py): what
#: tests/fakes/restarts.py takes down while their pod is replaced.
SCHEDULER, BINDER, PODGROUPER = "scheduler", "binder", "podgrouper"
QUEUE_CONTROLLER, PODGROUP_CONTROLLER = "queuecontroller", "podgroupcontroller"
JOBSET_CONTROLLER, TRAINER_CONTROLLER = "jobset", "trainer-controller-manager"
#: On the pods of the stack's own components (tests/fakes/restarts.py): no simulated controller places or runs them.
STACK_POD_LABEL = "sim.kai-conformance.io/component"


@dataclass
class Faults:
    """Misbehaviour to inject."""

    #: KAI binds whatever fits instead of all-or-nothing.
    partial_gangs: bool = False
    #: Trainer copies TrainJob labels onto the pod templates (it must not).
    trainer_copies_trainjob_labels: bool = False
    #: The podgrouper recomputes spec.queue on every reconcile (it must keep it).
    podgrouper_moves_queue: bool = False
    #: KAI's podgrouper does not run: no pod gets a PodGroup.
    podgrouper_down: bool = False
    #: The kubelet cannot start the workload image: bound pods stay Pending with a pull error.
    image_does_not_start: bool = False
    #: The workload image exits 0 on SIGTERM (as ``pause`` does): an evicted pod ends Succeeded, not Failed.
    evicted_pods_succeed: bool = False
    #: The podgrouper's ClusterRole lacks ``trainjobs``: its owner walk stops at the JobSet (KAI §4.6), so the
    #: queue and priority come only from JobSet and pod labels, and SubjectAccessReviews deny the verbs.
    podgrouper_without_trainjob_rbac: bool = False
    #: The podgrouper reads the queue from this label key instead of ``kai.scheduler/queue``.
    podgrouper_queue_label: str | None = None
    #: The podgrouper writes this gang floor (every leaf SubGroup's ``minMember``, or the flat ``spec.minMember``)
    #: instead of the one the chain asks for: below the gang's size, KAI binds part of the gang.
    podgrouper_gang_floor: int | None = None
    #: KAI's binder does not run: the BindRequests the scheduler creates stay without a phase, no pod is bound,
    #: and the binder's Deployment is not Available.
    binder_down: bool = False
    #: KAI's event recorder sends no more repeats of an event (client-go's spam filter: 25 per object, then one
    #: every 5 minutes): the ``Unschedulable`` count of a refused PodGroup stops rising.
    kai_events_throttled: bool = False
    #: KAI considers only the first N PodGroups (in creation order) in every cycle; the rest wait, GPUs idle or not.
    scheduler_considers_only: int | None = None
    #: KAI keeps the GPUs of pods that ended or were deleted: its podgroup-controller never lowers a PodGroup's
    #: ``status.resourcesStatus`` (so the Queue's ``status.allocated`` never drops) and its scheduler never frees the
    #: GPUs of an ended pod (tests/fakes/kai/lifecycle.py).
    ended_pods_hold_gpus: bool = False
    #: KAI's stale-gang eviction does not see Succeeded pods (KAI #1968), whatever the version's row says.
    stale_eviction_of_completing_gangs: bool = False
    #: KAI binds a PodGroup it placed before (its pods recreated by a JobSet restart or a resume) one pod short.
    regrouped_gang_bound_one_short: bool = False
    #: KAI's BindRequests lose their ownerReference to the pod: garbage collection leaves them behind.
    bindrequests_without_owner: bool = False
    #: JobSet's webhook refuses Trainer's apply of a suspend or resume (Trainer #3008): the JobSet never follows,
    #: and Trainer records ``TrainJobResourcesCreationFailed`` on the TrainJob.
    jobset_webhook_refuses_suspend: bool = False

    # Misbehaviour after a restart (tests/fakes/restarts.py): each acts only once its component has restarted in the
    # run (its pod deleted and replaced), so a mix without that restart passes.
    #: After the scheduler's restart, KAI binds every gang of at least this many pods one pod short.
    restart_breaks_gangs_of: int | None = None
    #: After the scheduler's restart, KAI ignores the queues' GPU limits.
    restart_ignores_queue_limits: bool = False
    #: After each restart of the scheduler, KAI evicts the pods of one running non-preemptible gang within quota.
    restart_evicts_non_preemptible: bool = False
    #: After the podgrouper's restart, it makes a second PodGroup (another name, the same JobSet owning it) for
    #: every gang it had grouped before.
    restart_duplicates_podgroups: bool = False
    #: After the binder's restart, the BindRequests it finishes lose their ownerReference to the pod: garbage
    #: collection leaves them behind when the pod goes.
    restart_leaks_bindrequests: bool = False
    #: After the scheduler's restart, KAI never schedules again.
    restart_stalls_scheduler: bool = False


@dataclass
class Simulation:
    fake: FakeKube
    layout: GpuLayout
    kai_version: str = "v0.17.0"
    faults: Faults = field(default_factory=Faults)
    #: The Trainer version the simulated Trainer behaves as (the suite's default combination's).
    trainer_version: str = "v2.3.0"
    #: Seconds the Job controller waits before it replaces the first failed pod of an index (doubling with each
    #: further failure of that index). Upstream: 10 s (pkg/controller/job/job_controller.go
    #: ``DefaultJobPodFailureBackOff``); 0 keeps flows instant. Measured on the FakeKube clock.
    pod_failure_backoff: float = 0.0

    def __post_init__(self) -> None:
        self.row = ex.kai_row(self.kai_version)
        self._names = itertools.count(1)
        self._seen: dict[str, int] = {}  # PodGroup uid → order of creation (KAI considers older groups first)
        self._cache: dict[str, tuple[Any, Any]] = {}  # key → (stamp, what was derived)
        self._copied: dict[str, dict[tuple[str | None, str], Obj]] = {}  # the last copy of each object, per kind

    # ------------------------------------------------------------------------------------------ store helpers
    def _all(self, kind: Kind, namespace: str | None = None) -> list[Obj]:
        """Copies of the stored objects, shared by every reader until the store changes (see :meth:`_derived`)."""
        return list(self._derived(f"all:{kind.kind}:{namespace}", lambda: self._copies(kind, namespace), (kind,)))

    def _copies(self, kind: Kind, namespace: str | None) -> list[Obj]:
        """What ``fake.objects`` returns (copies in key order), reusing the copy made last time of every object that
        still equals its stored self: comparing is several times cheaper than copying, and a burst rewrites a few
        of a thousand pods between two listings."""
        return [self._copy(kind, stored) for stored in self.fake.stored(kind, namespace)]

    def _copy(self, kind: Kind, stored: Obj) -> Obj:
        """A copy of a stored object: the one made last time while it still equals the stored one, else a new one."""
        copies = self._copied.setdefault(kind.kind, {})
        key = (stored["metadata"].get("namespace"), stored["metadata"]["name"])
        kept = copies.get(key)
        if kept is None or kept != stored:
            kept = copies[key] = clone(stored)
        return kept

    def _find(self, kind: Kind, name: str, namespace: str | None) -> Obj | None:
        if namespace is not None or not kind.namespaced:  # one object by its key: no listing (controllers ask often)
            listed = self._listed(kind)
            if listed is not None:  # the shared copy of a listing still current
                return listed.get((namespace if kind.namespaced else None, name))
            found = self.fake.store.get(self.fake._key(kind, namespace, name))
            return self._copy(kind, found) if found is not None else None
        return next((o for o in self._all(kind, namespace) if o["metadata"]["name"] == name), None)

    def _listed(self, kind: Kind) -> dict[tuple[str | None, str], Obj] | None:
        """The objects of a current :meth:`_all` of ``kind`` by (namespace, name), or None when there is none (then
        one object is cheaper to copy than the whole kind)."""
        stamp = self._stamp((kind,))
        listing = self._cache.get(f"all:{kind.kind}:None")
        if listing is None or listing[0][1:] != stamp[1:]:
            return None  # the kind was written since: copying the one asked for is cheaper
        if listing[0] != stamp:  # only API calls since: list again, reusing the copies still equal to the store
            listing = (stamp, self._all(kind))
        return self._derived(f"listed:{kind.kind}", lambda: {
            (o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in listing[1]}, (kind,))  # fmt: skip

    def _owned(self, kind: Kind, owner: Obj) -> list[Obj]:
        """The objects of ``kind`` that ``owner`` owns, in store order: copies of only those (the Job controller asks
        for each Job's pods right after creating another Job's)."""

        owned = [
            (o["metadata"].get("namespace"), o["metadata"]["name"]) for o in self.fake.owned_by(kind, uid_of(owner))
        ]
        listed = self._listed(kind)
        if listed is not None:
            return [listed[key] for key in owned]
        return [self._copy(kind, self.fake.store[self.fake._key(kind, namespace, name)]) for namespace, name in owned]

    def _stamp(self, depends: tuple[Kind, ...] | None) -> Any:
        if depends is None:
            return self.fake.generation
        return (self.fake.call_generation, *(self.fake.kind_generation(kind) for kind in depends))

    def _derived(self, key: str, build: Callable[[], Any], depends: tuple[Kind, ...] | None = None) -> Any:
        """What ``build`` derives from the store, kept while the store is unchanged: ``depends`` names the kinds it
        reads (then it is kept until an API call or a write of one of them; ``FakeKube.kind_generation``), else
        until any change (``FakeKube.generation``). The controllers ask for the same pods many times per API call.
        Objects handed out are shared until the next write, and every controller writes a change to one at once
        (``put``), which starts a new generation."""
        stamp = self._stamp(depends)
        cached = self._cache.get(key)
        if cached is None or cached[0] != stamp:
            cached = (stamp, build())
            self._cache[key] = cached
        return cached[1]

    def _peek(self, kind: Kind, name: str, namespace: str | None) -> Obj | None:
        """The stored object itself, to read only (change a :meth:`_find` copy and ``put`` it instead)."""
        return self.fake.store.get(self.fake._key(kind, namespace, name))

    def _owner(self, obj: Obj, kind: Kind) -> Obj | None:
        """The owner of ``kind`` (the stored object: read it only)."""
        refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("kind") == kind.kind]
        if not refs:
            return None
        found = self._peek(kind, refs[0]["name"], obj["metadata"].get("namespace"))
        return found if found is not None and uid_of(found) == refs[0]["uid"] else None

    @staticmethod
    def _ref(owner: Obj, controller: bool = True) -> Obj:
        meta = owner["metadata"]
        return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"],
                **({"controller": True, "blockOwnerDeletion": True} if controller else {})}  # fmt: skip

    def _now(self) -> str:
        return self.fake.clock().strftime("%Y-%m-%dT%H:%M:%SZ")

    # ------------------------------------------------------------------------------------ the stack's components
    def _acts(self, component: str) -> bool:
        """Whether ``component`` (its image name) does its work this round: always, unless tests/fakes/restarts.py
        has it down while its pod is replaced, or a fault stalls it."""
        return True

    def _restarted(self, component: str) -> bool:
        """Whether ``component`` has restarted in this run (the ``restart_*`` faults act only after)."""
        return False

    def _forget(self, component: str) -> None:
        """``component`` restarted: it drops what it kept in memory and rebuilds it from the API, as the real one does
        on start. Each mixin forgets its own; the informer caches here serve every component, so they all go. The
        scheduler lists the PodGroups again, oldest first (by creation, then by name)."""
        self._cache.clear()
        self._copied.clear()
        if component == SCHEDULER:
            groups = sorted(self.fake.stored(kinds.POD_GROUP),
                            key=lambda g: (g["metadata"].get("creationTimestamp") or "", g["metadata"]["name"]))  # fmt: skip
            self._seen = {uid_of(g): order for order, g in enumerate(groups)}

    @staticmethod
    def _stack_pod(pod: Obj) -> bool:
        return STACK_POD_LABEL in (pod["metadata"].get("labels") or {})

    # ---------------------------------------------------------------------------------- API server semantics
    def _api_delete(self, pod: Obj) -> None:
        """DELETE of a pod as the API server does it: a pod that is on a node and not finished is deleted
        gracefully with its ``terminationGracePeriodSeconds`` (pkg/registry/core/pod/strategy.go
        ``CheckGracefulDelete``; no node or a terminal phase → 0); a graceful deletion or a finalizer keeps the
        object, with ``deletionTimestamp`` set, until the kubelet and the finalizers' owners are done
        (apiserver registry/generic/registry/store.go); otherwise it is gone at once."""
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            return
        grace = pod["spec"].get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)
        if not pod["spec"].get("nodeName") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            grace = 0
        if not grace and not meta.get("finalizers"):
            self.fake._remove(kinds.POD, meta["namespace"], meta["name"])
            return
        meta["deletionTimestamp"] = self._now()
        meta["deletionGracePeriodSeconds"] = grace
        self.fake.write(pod)

    def _drop_finalizer(self, pod: Obj, finalizer: str) -> None:
        """Remove one finalizer; a pod deleted with grace 0 that is left with none is gone at once (the store's
        ``ShouldDeleteDuringUpdate``), a graceful one stays until the kubelet's final delete."""
        meta = pod["metadata"]
        meta["finalizers"] = [f for f in meta.get("finalizers") or [] if f != finalizer]
        if not meta["finalizers"]:
            del meta["finalizers"]
            if meta.get("deletionTimestamp") and not meta.get("deletionGracePeriodSeconds"):
                self.fake._remove(kinds.POD, meta["namespace"], meta["name"])
                return
        self.fake.write(pod)


def merge_metadata(target: Obj, metadata: Obj | None) -> None:
    if not metadata:
        return
    meta = target.setdefault("metadata", {})
    for key in ("labels", "annotations"):
        if metadata.get(key):
            meta.setdefault(key, {}).update(metadata[key])
