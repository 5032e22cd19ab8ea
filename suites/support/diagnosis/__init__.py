"""Chain diagnosis: when a wait about a workload fails, look one level down the chain and name the broken link.

A TrainJob becomes bound pods through a chain of components, each acting on what the one before made
(kai-scheduler.md §4, §2.4, §5)::

    TrainJob →(Trainer) JobSet →(JobSet) Jobs →(Job controller) pods →(KAI podgrouper) PodGroup
      →(KAI scheduler) BindRequests, or PodScheduled=False and a PodGroup condition →(KAI binder) bound pods

:func:`diagnose` walks it for one workload and stops at the first link that is missing, saying who should have
made it and what that component's Deployment says (:mod:`suites.support.components`); the finding at each link is
made in :mod:`suites.support.diagnosis.links`. Once the PodGroup exists it also says which queue and priority class it
got and from which object (:mod:`suites.support.diagnosis.provenance`), and, when the PodGroup's gang floor is below the gang or
part of the gang is bound, whose fault that is: the podgrouper's or the scheduler's (:mod:`suites.support.gang_floor`).

Product or infrastructure: a failure stays a product failure (an ``AssertionError``) unless the broken link is a
component that is down or cannot act —

* its Deployment is found and not Available;
* the binder left BindRequests unhandled (no phase, or ``Pending``) at the end of the wait: the scheduler decided
  and nobody bound;
* there is no PodGroup for the JobSet while the podgrouper's service account may not read Jobs or JobSets or
  create PodGroups (SubjectAccessReview): its owner walk cannot reach the JobSet.

Then a wait whose expected state never came (``ConditionNotMet``, ``WaitTimeout``) is raised as
:class:`~fixtures.errors.ComponentDown`, naming the component and where to look. A violation (``ConditionViolated``:
something that must never happen did happen) stays a product failure whatever the diagnosis says, because a
component that does not act cannot make a forbidden thing happen; the diagnosis is appended to its message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import KubeApi, kinds
from kai_conformance.fixtures.waits import ConditionNotMet
from kai_conformance.suites.support.components import (
    JOB_CONTROLLER,
    JOBSET,
    NODE_LIFECYCLE,
    TRAINER,
    WITH_DEPLOYMENTS,
    deployments_of,
)
from kai_conformance.suites.support.diagnosis.links import (
    DECIDED,
    Facts,
    Finding,
    absent,
    conditions,
    no_podgroup,
    scheduling,
)
from kai_conformance.suites.support.diagnosis.provenance import (
    PODGROUPER_NEEDS,
    TRAINJOBS,
    Access,
    Provenance,
    provenance,
)
from kai_conformance.suites.support.expectations import PODGROUPER_USER, QUEUE_LABEL, KaiRow
from kai_conformance.suites.support.gang_floor import culprit
from kai_conformance.suites.support.snapshot import Obj, Snapshot, labels_of, name_list, name_of

# Facts, Finding and DECIDED stay part of this module's interface (cases and self-tests name them from here).
__all__ = ["DECIDED", "Diagnosis", "Facts", "Finding", "diagnose", "explain", "explained", "gather", "review"]

REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
T = TypeVar("T")


# ------------------------------------------------------------------------------------------------ reading
def review(kube: KubeApi, resource: str, verbs: Sequence[str]) -> Access:
    """SubjectAccessReviews through the API layer: which of ``verbs`` the podgrouper may not do on ``resource``."""
    plural, _, group = resource.partition(".")
    group = "" if group == "core" else group
    try:
        denied = tuple(v for v in verbs if not kube.access_review(PODGROUPER_USER, v, plural, group).allowed)
    except errors.KubeError as exc:
        return Access(resource, unknown=str(exc))
    return Access(resource, denied)


def gather(kube: KubeApi, namespace: str, snap: Snapshot) -> Facts:
    """Read what :func:`diagnose` needs beyond ``snap`` (a namespace snapshot with owners and events)."""
    unread: list[str] = []

    def attempt(what: str, read: Callable[[], T]) -> T | None:
        try:
            return read()
        except errors.KubeError as exc:
            unread.append(f"{what} ({exc})")
            return None

    bindrequests = attempt("BindRequests", lambda: tuple(kube.list(kinds.BIND_REQUEST, namespace)))
    deployments = attempt("Deployments", lambda: tuple(kube.list(kinds.DEPLOYMENT)))
    access = {resource: review(kube, resource, verbs) for resource, verbs in PODGROUPER_NEEDS.items()}
    try:  # KAI's operator Config may be absent (KAI without its operator); then the default key applies
        configs = kube.list(kinds.KAI_CONFIG)
    except errors.KubeError:
        configs = []
    keys = [((c.get("spec") or {}).get("global") or {}).get("queueLabelKey") for c in configs]
    key = next((k for k in keys if k), QUEUE_LABEL)
    pods = attempt("the components' pods", lambda: component_pods(kube, deployments or ()))
    return Facts(snap, bindrequests, deployments, access, key, tuple(unread), pods)


def component_pods(kube: KubeApi, deployments: Sequence[Obj]) -> tuple[Obj, ...]:
    """The pods in the namespaces of the components' Deployments (a few, never a case's thousands)."""
    namespaces = sorted({d["metadata"]["namespace"] for c in WITH_DEPLOYMENTS for d in deployments_of(c, deployments)})
    return tuple(pod for namespace in namespaces for pod in kube.list(kinds.POD, namespace))


# ------------------------------------------------------------------------------------------------ the walk
@dataclass(frozen=True)
class Diagnosis:
    workload: str
    chain: tuple[str, ...]
    broken: Finding | None
    provenance: Provenance | None = None
    unread: tuple[str, ...] = ()
    #: The gang floor's culprit (:func:`~suites.support.gang_floor.culprit`): a PodGroup whose floor is below the
    #: gang (the podgrouper, or the TrainJob), or a right floor with part of the gang bound (the scheduler).
    gang: Finding | None = None

    @property
    def down(self) -> bool:
        return self.broken is not None and self.broken.down

    def text(self) -> str:
        lines = [f"diagnosis of TrainJob {self.workload}: " + " → ".join(self.chain)]
        got = [f"  {line}" for line in (self.provenance.lines() if self.provenance else [])]
        gang = [f"  {self.gang}"] if self.gang is not None else []
        if self.broken is not None:
            lines += [f"  {self.broken}", *gang, *got]
        elif self.provenance is not None and not self.provenance.as_asked:
            lines += ["  every link is there, but the PodGroup does not carry what the chain asks for:", *got, *gang]
        elif gang:
            lines += ["  every link is there, but the gang is one object away from right:", *gang, *got]
        else:
            lines += ["  no broken link: every step of the chain is there", *got]
        if self.broken and self.broken.fix:
            lines.append(f"  fix: {self.broken.fix}")
        if self.unread:
            lines.append(f"  could not read: {'; '.join(self.unread)}")
        return "\n".join(lines)


def diagnose(
    facts: Facts, workload: str, size: int, *, kai: KaiRow | None = None, minimum: int | None = None
) -> Diagnosis:
    """Walk the chain of ``workload`` (``size`` pods) in ``facts`` and stop at the first broken link. ``kai``: the
    KAI row the run assumes (it says where that version's podgrouper reads the gang floor); ``minimum``: the floor of
    an elastic gang (default: every pod, ``size``)."""
    snap = facts.snap.of(workload)
    chain: list[str] = []

    def stop(finding: Finding | None, prov: Provenance | None = None, gang: Finding | None = None) -> Diagnosis:
        return Diagnosis(workload, tuple(chain), finding, prov, facts.unread, gang)

    trainjob = snap.trainjobs[0] if snap.trainjobs else None
    if trainjob is None:
        return stop(Finding(None, f"TrainJob {workload} does not exist (deleted, or never created)"))
    evicted = node_evictions(facts.snap, workload)
    if evicted:  # before the walk: what follows (pods made again, a gang part bound) is the eviction's doing
        chain.append(f"TrainJob {workload}")
        return stop(Finding(
            NODE_LIFECYCLE,
            f"{len(evicted)} pod(s) of the gang evicted from a NotReady node ({NODE_EVICTION}: "
            f"{'; '.join(evicted[:3])}{' …' if len(evicted) > 3 else ''}): a node failure broke the gang, not KAI",
            down=True,
            fix="keep the nodes Ready: kwok's fake nodes go NotReady when kwok renews their leases late (fewer fake "
            "nodes, or more cores); the suite's workload pods tolerate a NotReady node since the 1,000-node run",
        ))  # fmt: skip
    chain.append(f"TrainJob {workload}" + (" (suspended)" if (trainjob.get("spec") or {}).get("suspend") else ""))
    if not snap.jobsets:
        return stop(absent(TRAINER, facts, f"no JobSet for TrainJob {workload}", conditions(trainjob)))
    jobset = snap.jobsets[0]
    chain.append(f"JobSet {name_of(jobset)}")
    made = {labels_of(j).get(REPLICATED_JOB_LABEL) for j in snap.jobs}
    unmade = [r for r in (jobset.get("spec") or {}).get("replicatedJobs") or [] if r.get("name") not in made]
    # A replicatedJob with dependsOn is created only once its dependencies are Ready/Complete (JobSet): not a break.
    waiting = [r for r in unmade if r.get("dependsOn")]
    missing = [r for r in unmade if not r.get("dependsOn")]
    chain.append(f"{len(snap.jobs)} Job(s)")
    if waiting:
        chain[-1] += " (" + ", ".join(f"{r.get('name')} waits for dependsOn" for r in waiting) + ")"
    if not snap.jobs or missing:
        names = ", ".join(str(r.get("name")) for r in missing) or "any"
        return stop(absent(JOBSET, facts, f"no Job yet for replicatedJob(s) {names}", conditions(jobset)))
    live = snap.live_pods
    succeeded = [p for p in snap.pods if (p.get("status") or {}).get("phase") == "Succeeded"]
    chain.append(f"{len(live)} of {size} pods" + (f" ({len(succeeded)} more ended Succeeded)" if succeeded else ""))
    if len(live) < size and len(live) + len(succeeded) >= size:
        return stop(Finding(None, f"{len(succeeded)} of {size} pods ended Succeeded: the workload is completing"))
    if len(live) < size:
        suspended = [j for j in snap.jobs if (j.get("spec") or {}).get("suspend")]
        if suspended:
            return stop(
                Finding(None, f"only {len(live)} of {size} pods exist: Jobs {name_list(suspended)} are suspended")
            )
        detail = "".join(conditions(j) for j in snap.jobs)
        return stop(absent(JOB_CONTROLLER, facts, f"only {len(live)} of {size} pods exist", detail))
    pg = snap.podgroup
    if pg is None:
        return stop(no_podgroup(facts, snap, workload))
    prov = provenance(snap, (facts.access or {}).get(TRAINJOBS), facts.queue_label_key)
    chain.append(f"PodGroup {name_of(pg)}")
    return stop(scheduling(facts, snap, pg, chain), prov, culprit(snap, size, kai, minimum, facts.bindrequests or ()))


#: The event kube-controller-manager's taint eviction controller writes on a pod it deletes from a node tainted
#: NoExecute (``node.kubernetes.io/not-ready`` or ``unreachable`` past the pod's tolerationSeconds): "Marking for
#: deletion Pod <ns>/<name>" (k8s.io/kubernetes pkg/controller/tainteviction, v1.34).
NODE_EVICTION = "TaintManagerEviction"


def node_evictions(namespace: Snapshot, workload: str) -> list[str]:
    """``pod g0017-node-0-1-qmqkb at 04:36:37``: the workload's pods the taint eviction controller deleted, read
    from the whole namespace's events (the pods themselves are gone, and their replacements carry other uids)."""
    return [
        f"pod {(e.get('involvedObject') or {}).get('name')} at {e.get('lastTimestamp') or e.get('eventTime') or '?'}"
        for e in namespace.events
        if e.get("reason") == NODE_EVICTION
        and (e.get("involvedObject") or {}).get("kind") == "Pod"
        and str((e.get("involvedObject") or {}).get("name", "")).startswith(f"{workload}-")
    ]


# --------------------------------------------------------------------------------------------- explaining
def _with_text(failure: BaseException, text: str) -> BaseException:
    message = f"{failure}\n{text}"
    try:
        return type(failure)(message)
    except TypeError:  # an exception type with another constructor: keep the family
        return AssertionError(message) if isinstance(failure, AssertionError) else errors.InfrastructureError(message)


def explained(failure: BaseException, diagnoses: Sequence[Diagnosis]) -> BaseException:
    """``failure`` with the diagnoses appended; a :class:`ComponentDown` when an expected state never came because a
    component is down or cannot act (see the module docstring)."""
    if not diagnoses:
        return failure
    text = "\n".join(d.text() for d in diagnoses)
    down = next((d for d in diagnoses if d.down), None)
    evicted = next((d for d in diagnoses if d.broken is not None and d.broken.component is NODE_LIFECYCLE), None)
    if evicted is not None and evicted.broken is not None:
        # A violation too: a gang a node failure broke says nothing of KAI, whoever else the run suspects.
        return errors.ComponentDown(
            f"the node lifecycle controller evicted pods KAI had placed, so the behaviour under test was not "
            f"observed: {evicted.broken.text}\nwhile judging: {failure}\n{text}",
            component=NODE_LIFECYCLE.name,
        )
    if down is not None and isinstance(failure, (ConditionNotMet, errors.WaitTimeout)) and down.broken is not None:
        component = down.broken.component
        name = component.name if component else "a component"
        return errors.ComponentDown(
            f"{name} is down or cannot act, so the behaviour under test was not observed: {down.broken.text}\n"
            f"while waiting for: {failure}\n{text}",
            component=name,
        )
    return _with_text(failure, text)


def explain(
    kube: KubeApi,
    namespace: str,
    look: Callable[[], Snapshot],
    failure: BaseException,
    about: Sequence[tuple[str, int]],
    *,
    kai: KaiRow | None = None,
    minimums: Mapping[str, int] | None = None,
) -> BaseException:
    """Diagnose every workload in ``about`` (name, pods) from a fresh look at the namespace (``look``: a snapshot
    with owners and events) and return the failure to raise instead of ``failure``. ``kai`` and ``minimums`` (elastic
    gangs' floors by name) go to :func:`diagnose`. A diagnosis never hides the failure it explains: if it cannot be
    made, the failure says so and keeps its type."""
    try:
        facts = gather(kube, namespace, look())
        floors = minimums or {}
        return explained(
            failure, [diagnose(facts, name, size, kai=kai, minimum=floors.get(name)) for name, size in about]
        )
    except Exception as exc:  # whatever broke the diagnosis (the API included), the original failure must surface
        return _with_text(failure, f"(no chain diagnosis: {type(exc).__name__}: {exc})")
