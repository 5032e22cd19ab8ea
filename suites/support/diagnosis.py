"""Chain diagnosis: when a wait about a workload fails, look one level down the chain and name the broken link.

A TrainJob becomes bound pods through a chain of components, each acting on what the one before made
(kai-scheduler.md §4, §2.4, §5)::

    TrainJob →(Trainer) JobSet →(JobSet) Jobs →(Job controller) pods →(KAI podgrouper) PodGroup
      →(KAI scheduler) BindRequests, or PodScheduled=False and a PodGroup condition →(KAI binder) bound pods

:func:`diagnose` walks it for one workload and stops at the first link that is missing, saying who should have
made it and what that component's Deployment says (:mod:`suites.support.components`). Once the PodGroup exists it
also says which queue and priority class it got and from which object (:mod:`suites.support.provenance`).

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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kai_conformance.clusters.suite_stack import KAI_SCHEDULER_NAME
from kai_conformance.fixtures import errors, kinds
from kai_conformance.fixtures.kube import KubeApi, event_time
from kai_conformance.fixtures.waits import ConditionNotMet
from kai_conformance.suites.support.components import (
    BINDER,
    JOB_CONTROLLER,
    JOBSET,
    PODGROUPER,
    SCHEDULER,
    TRAINER,
    Component,
    health,
)
from kai_conformance.suites.support.detectors.queues import podgroup_explains
from kai_conformance.suites.support.expectations import (
    BIND_FAILED,
    BIND_SUCCEEDED,
    NOT_READY_EVENT_REASON,
    POD_GROUP_ANNOTATION,
    PODGROUPER_USER,
    PODGROUPER_WARNING_REASON,
    QUEUE_LABEL,
)
from kai_conformance.suites.support.provenance import (
    JOBS,
    JOBSETS,
    PODGROUPER_NEEDS,
    PODGROUPS,
    TRAINJOBS,
    Access,
    Provenance,
    provenance,
)
from kai_conformance.suites.support.snapshot import (
    NAMED,
    Obj,
    Snapshot,
    labels_of,
    name_list,
    name_of,
    owner_refs,
    pending_reason,
    scheduled_condition,
)

REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
DECIDED = "KAI's decision"
T = TypeVar("T")


# ------------------------------------------------------------------------------------------------ facts
@dataclass(frozen=True)
class Facts:
    """What a diagnosis reads, once, when a wait has failed: the namespace (owners and events included) and the
    cluster-wide facts about the components. ``None``: could not be read (``unread`` says why)."""

    snap: Snapshot
    bindrequests: tuple[Obj, ...] | None = ()
    deployments: tuple[Obj, ...] | None = ()
    access: dict[str, Access] | None = None
    queue_label_key: str = QUEUE_LABEL
    unread: tuple[str, ...] = ()


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
    return Facts(snap, bindrequests, deployments, access, key, tuple(unread))


# ------------------------------------------------------------------------------------------------ findings
@dataclass(frozen=True)
class Finding:
    """The broken link: who should have acted (``component``, None when no component is to blame) and what is
    missing. ``down``: the component is down or cannot act (an infrastructure failure)."""

    component: Component | None
    text: str
    down: bool = False
    fix: str = ""
    #: How the finding is introduced: a link nobody made, or the scheduler's own decision not to place the pods
    #: (the behaviour under test, with KAI's reason).
    heading: str = "broken link"

    def __str__(self) -> str:
        who = f"{self.component.name} ({self.component.acts}): " if self.component else ""
        return f"{self.heading}: {who}{self.text}"


@dataclass(frozen=True)
class Diagnosis:
    workload: str
    chain: tuple[str, ...]
    broken: Finding | None
    provenance: Provenance | None = None
    unread: tuple[str, ...] = ()

    @property
    def down(self) -> bool:
        return self.broken is not None and self.broken.down

    def text(self) -> str:
        lines = [f"diagnosis of TrainJob {self.workload}: " + " → ".join(self.chain)]
        if self.broken is not None:
            lines.append(f"  {self.broken}")
        elif self.provenance is not None and not self.provenance.as_asked:
            lines.append("  every link is there, but the PodGroup does not carry what the chain asks for:")
        else:
            lines.append("  no broken link: every step of the chain is there")
        lines += [f"  {line}" for line in (self.provenance.lines() if self.provenance else [])]
        if self.broken and self.broken.fix:
            lines.append(f"  fix: {self.broken.fix}")
        if self.unread:
            lines.append(f"  could not read: {'; '.join(self.unread)}")
        return "\n".join(lines)


def _conditions(obj: Obj) -> str:
    found = [
        f"{c.get('type')}={c.get('status')}"
        + (f" ({c.get('reason')}: {c.get('message', '')})" if c.get("reason") else "")
        for c in (obj.get("status") or {}).get("conditions") or []
    ]
    return f"{obj.get('kind')} {name_of(obj)} conditions: {'; '.join(found[:NAMED])}; " if found else ""


def _look(component: Component, *also: str) -> str:
    log = [f"its log ({component.log} in the case's diagnostics)"] if component.log else []
    return f"check the {component.name}: " + ", ".join([*also, *log])


def _absent(component: Component, facts: Facts, what: str, detail: str = "") -> Finding:
    """``what`` is missing and ``component`` should have made it: down when its Deployment is not Available."""
    state = health(component, facts.deployments)
    return Finding(component, f"{what}; {detail}{state.text}", down=state.up is False, fix=_look(component))


def _no_podgroup(facts: Facts, snap: Snapshot, workload: str) -> Finding:
    pods = snap.live_pods
    foreign = sorted({p["spec"].get("schedulerName") or "default-scheduler" for p in pods} - {KAI_SCHEDULER_NAME})
    if foreign:
        return Finding(
            None,
            f"no PodGroup: the pods ask for schedulerName {', '.join(foreign)}, and KAI's podgrouper only groups pods "
            f"asking for {KAI_SCHEDULER_NAME} (kai-scheduler.md §3.5)",
            fix="the runtime's pod template must set schedulerName: kai-scheduler",
        )
    if len(snap.podgroups) > 1:
        return Finding(
            PODGROUPER, f"{len(snap.podgroups)} PodGroups are owned by JobSet {workload}: {name_list(snap.podgroups)}"
        )
    named = {(p["metadata"].get("annotations") or {}).get(POD_GROUP_ANNOTATION) for p in pods} - {None}
    elsewhere = [g for g in facts.snap.podgroups if name_of(g) in named]
    parts = [f"no PodGroup owned by JobSet {workload}"]
    if elsewhere:
        owners = ", ".join(f"{r.get('kind')} {r.get('name')}" for g in elsewhere for r in owner_refs(g)) or "nothing"
        parts.append(
            f"the pods point at {name_list(elsewhere)}, owned by {owners}: the owner walk stopped below the JobSet"
        )
    elif named:
        parts.append(f"the pods point at {', '.join(sorted(n for n in named if n))}, which does not exist")
    else:
        parts.append(f"no pod carries {POD_GROUP_ANNOTATION}: the podgrouper has not grouped them")
    warnings = [e for e in snap.events if e.get("reason") == PODGROUPER_WARNING_REASON]
    if warnings:
        parts.append(f"{PODGROUPER_WARNING_REASON}: {max(warnings, key=event_time).get('message', '')}")
    blocked = [a for r in (JOBS, JOBSETS, PODGROUPS) if (a := (facts.access or {}).get(r)) and a.granted is False]
    parts += [str(a) for a in blocked]
    state = health(PODGROUPER, facts.deployments)
    parts.append(state.text)
    fix = (
        f"grant the podgrouper's ClusterRole what KAI's chart grants (kai-scheduler.md §4.6), bound to {PODGROUPER_USER}"
        if blocked
        else _look(PODGROUPER, "its Deployment's pods and events")
    )
    return Finding(PODGROUPER, "; ".join(parts), down=bool(blocked) or state.up is False, fix=fix)


def _phase(request: Obj) -> str:
    return (request.get("status") or {}).get("phase") or "without a phase"


def _acted(request: Obj) -> bool:
    """Has the binder acted on the request (it writes Succeeded or Failed; ``Pending`` or nothing: not yet)?"""
    return _phase(request) in (BIND_SUCCEEDED, BIND_FAILED)


def _scheduling(facts: Facts, snap: Snapshot, pg: Obj, chain: list[str]) -> Finding | None:
    """The pods are grouped: did the scheduler decide (BindRequests, or a reason not to) and did the binder bind?"""
    pending = snap.pending_pods
    requests = {r["spec"].get("podName"): r for r in facts.bindrequests or ()}
    mine = [requests[name_of(p)] for p in snap.live_pods if name_of(p) in requests]
    if facts.bindrequests is None:
        chain.append("BindRequests not read")
    elif mine:
        phases: dict[str, int] = {}
        for request in mine:
            phases[_phase(request)] = phases.get(_phase(request), 0) + 1
        chain.append(f"{len(mine)} BindRequest(s) (" + ", ".join(f"{n} {p}" for p, n in sorted(phases.items())) + ")")
    chain.append(f"{len(snap.bound_pods)} of {len(snap.live_pods)} pods bound")
    if not pending:
        return None
    stuck = [(p, requests[name_of(p)]) for p in pending if name_of(p) in requests and not _acted(requests[name_of(p)])]
    if stuck:
        nodes = sorted({r["spec"].get("selectedNode", "?") for _, r in stuck})
        return Finding(
            BINDER,
            f"{len(stuck)} BindRequest(s) for {name_list([p for p, _ in stuck])} {_phase(stuck[0][1])}: the scheduler "
            f"chose {', '.join(nodes)} and nobody bound them; {health(BINDER, facts.deployments).text}",
            down=True,
            fix=_look(BINDER, "its Deployment's pods and events", "its RBAC for pods/binding"),
        )
    failed = [
        (p, requests[name_of(p)])
        for p in pending
        if name_of(p) in requests and _phase(requests[name_of(p)]) == BIND_FAILED
    ]
    if failed:
        status = failed[0][1].get("status") or {}
        state = health(BINDER, facts.deployments)
        return Finding(
            BINDER,
            f"binding {name_list([p for p, _ in failed])} failed after {status.get('failedAttempts', 0)} attempt(s): "
            f"{status.get('reason', 'no reason given')}; {state.text}",
            down=state.up is False,
            fix=_look(BINDER, "the pods' BindingError events"),
        )
    held = [p for p in pending if (scheduled_condition(p) or {}).get("status") == "False"]
    says = podgroup_explains(snap)
    if held or says.ok:
        reason = pending_reason(held[0]) if held else "no pod condition"
        told = f"; {says.explanation}" if says.ok else ""
        return Finding(
            SCHEDULER,
            f"it did not place {len(pending)} pod(s): {name_list(held or pending)} {reason}{told}",
            heading=DECIDED,
        )
    not_ready = snap.events_for(pg, NOT_READY_EVENT_REASON)
    if not_ready:
        message = max(not_ready, key=event_time).get("message", "")
        return Finding(SCHEDULER, f"it waits for the gang's pods: {message}", heading=DECIDED)
    state = health(SCHEDULER, facts.deployments)
    return Finding(
        SCHEDULER,
        f"it has not acted on PodGroup {name_of(pg)}: no BindRequest, no PodScheduled condition on "
        f"{name_list(pending)}, no scheduling condition or event on the PodGroup; {state.text}",
        down=state.up is False,
        fix=_look(SCHEDULER, "is it running for the default shard, and its Deployment's pods and events"),
    )


def diagnose(facts: Facts, workload: str, size: int) -> Diagnosis:
    """Walk the chain of ``workload`` (``size`` pods) in ``facts`` and stop at the first broken link."""
    snap = facts.snap.of(workload)
    chain: list[str] = []

    def stop(finding: Finding | None, prov: Provenance | None = None) -> Diagnosis:
        return Diagnosis(workload, tuple(chain), finding, prov, facts.unread)

    trainjob = snap.trainjobs[0] if snap.trainjobs else None
    if trainjob is None:
        return stop(Finding(None, f"TrainJob {workload} does not exist (deleted, or never created)"))
    chain.append(f"TrainJob {workload}" + (" (suspended)" if (trainjob.get("spec") or {}).get("suspend") else ""))
    if not snap.jobsets:
        return stop(_absent(TRAINER, facts, f"no JobSet for TrainJob {workload}", _conditions(trainjob)))
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
        return stop(_absent(JOBSET, facts, f"no Job yet for replicatedJob(s) {names}", _conditions(jobset)))
    live = snap.live_pods
    chain.append(f"{len(live)} of {size} pods")
    if len(live) < size:
        suspended = [j for j in snap.jobs if (j.get("spec") or {}).get("suspend")]
        if suspended:
            return stop(
                Finding(None, f"only {len(live)} of {size} pods exist: Jobs {name_list(suspended)} are suspended")
            )
        detail = "".join(_conditions(j) for j in snap.jobs)
        return stop(_absent(JOB_CONTROLLER, facts, f"only {len(live)} of {size} pods exist", detail))
    pg = snap.podgroup
    if pg is None:
        return stop(_no_podgroup(facts, snap, workload))
    prov = provenance(snap, (facts.access or {}).get(TRAINJOBS), facts.queue_label_key)
    chain.append(f"PodGroup {name_of(pg)}")
    return stop(_scheduling(facts, snap, pg, chain), prov)


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
) -> BaseException:
    """Diagnose every workload in ``about`` (name, pods) from a fresh look at the namespace (``look``: a snapshot
    with owners and events) and return the failure to raise instead of ``failure``. A diagnosis never hides the
    failure it explains: if it cannot be made, the failure says so and keeps its type."""
    try:
        facts = gather(kube, namespace, look())
        return explained(failure, [diagnose(facts, name, size) for name, size in about])
    except Exception as exc:  # whatever broke the diagnosis (the API included), the original failure must surface
        return _with_text(failure, f"(no chain diagnosis: {type(exc).__name__}: {exc})")
