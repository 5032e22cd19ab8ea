"""Lifecycle detectors: how a workload ends (TrainJob and JobSet conditions, pod exits), what KAI releases when it
does (the Queue's ``status.allocated``, the PodGroup), who takes the GPUs, and what a deletion leaves.

Most of them judge an *episode*: every snapshot a case took, in order (:class:`suites.support.lifecycle.Episode`),
so that "the queue released its GPUs within a few periods", "no pod was ever evicted while completing" or "every
attempt was bound whole" are read from all observations, not from one sample. Facts and sources:
:mod:`suites.support.expectations.lifecycle`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from kai_conformance.clusters.layout import GPU_RESOURCE
from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.expectations import EVICT_ACTION_ANNOTATION, EVICT_EVENT_REASON
from kai_conformance.suites.support.expectations.lifecycle import (
    JOBSET_RESTARTING,
    REACHED_MAX_RESTARTS,
    RESTART_ATTEMPT_LABEL,
    RESTARTING_ENDED_BY_FAILURE,
    RESUMED_REASON,
    STALE_GANG_ACTION,
    SUSPENDED_REASON,
    TRAINJOB_COMPLETE,
    TRAINJOB_FAILED,
    TRAINJOB_SUSPENDED,
    LifecycleJobSetRow,
)
from kai_conformance.suites.support.snapshot import (
    Obj,
    Snapshot,
    annotations_of,
    is_terminating,
    labels_of,
    name_list,
    name_of,
    node_summary,
    uid_of,
)

Episode = Sequence[Snapshot]
#: The completion index of a pod of an Indexed Job (label and annotation, set by the Job controller).
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
TERMINAL = ("Succeeded", "Failed")


# ---------------------------------------------------------------------------------------------------- readings
def quantity(text: object) -> float:
    """A Kubernetes quantity of GPUs as a number: ``2``, ``500m``, ``1.5``; absent = 0."""
    value = str(text or "0")
    return float(value[:-1]) / 1000 if value.endswith("m") else float(value)


def queue_gpus(snap: Snapshot, queue: str) -> float | None:
    """The GPUs the Queue ``queue`` says it has allocated (``status.allocated``), None when not in the snapshot."""
    found = next((q for q in snap.queues if name_of(q) == queue), None)
    if found is None:
        return None
    return quantity(((found.get("status") or {}).get("allocated") or {}).get(GPU_RESOURCE))


def podgroup_gpus(podgroup: Obj) -> float:
    """The GPUs a PodGroup says it holds (``status.resourcesStatus.allocated``, written by KAI's podgroup-controller)."""
    resources = ((podgroup.get("status") or {}).get("resourcesStatus") or {}).get("allocated") or {}
    return quantity(resources.get(GPU_RESOURCE))


def phase_of(pod: Obj) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


def exit_codes(pod: Obj) -> list[int]:
    return [
        ((s.get("state") or {}).get("terminated") or {}).get("exitCode", -1)
        for s in (pod.get("status") or {}).get("containerStatuses") or []
    ]


def ending(pod: Obj) -> str:
    """``index 0 Succeeded (exit 0)``: how a pod ended, by its completion index."""
    codes = ", ".join(str(c) for c in exit_codes(pod)) or "?"
    return f"index {labels_of(pod).get(INDEX_LABEL, '?')} {phase_of(pod)} (exit {codes})"


def condition_of(obj: Obj | None, kind: str) -> Obj | None:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def conditions_text(obj: Obj | None) -> str:
    found = ((obj or {}).get("status") or {}).get("conditions") or []
    return ", ".join(f"{c.get('type')}={c.get('status')} ({c.get('reason', '')})" for c in found) or "no conditions"


def attempt_of(pod: Obj) -> int:
    return int(labels_of(pod).get(RESTART_ATTEMPT_LABEL, "0"))


# ------------------------------------------------------------------------------------------- one snapshot
def trainjob_ended(snap: Snapshot, kind: str, reason: str | None = None) -> Verdict:
    """The TrainJob's condition ``kind`` (Complete | Failed) is True, with ``reason`` when given, and the other
    terminal condition is not (the snapshot must be taken with owners)."""
    detector = f"trainjob-{kind.lower()}"
    trainjob = snap.trainjobs[0] if snap.trainjobs else None
    if trainjob is None:
        return Verdict(detector, False, f"no TrainJob {snap.workload} in the snapshot")
    other = TRAINJOB_FAILED if kind == TRAINJOB_COMPLETE else TRAINJOB_COMPLETE
    found, opposite = condition_of(trainjob, kind), condition_of(trainjob, other)
    text = f"TrainJob {name_of(trainjob)}: {conditions_text(trainjob)}"
    if opposite is not None and opposite.get("status") == "True":
        return Verdict(detector, False, f"{text}: {other}, not {kind}")
    if found is None or found.get("status") != "True":
        return Verdict(detector, False, f"{text}: not {kind} yet")
    if reason is not None and found.get("reason") != reason:
        return Verdict(detector, False, f"{text}: {kind} for {found.get('reason')!r}, expected {reason!r}")
    return Verdict(detector, True, f"{text}: {found.get('message', '')}".rstrip(": "))


def pods_ended(snap: Snapshot, size: int, phase: str, exit_code: int) -> Verdict:
    """Every one of the gang's ``size`` pods ended ``phase`` with ``exit_code`` (the workload's own exit)."""
    ended = [p for p in snap.pods if phase_of(p) in TERMINAL]
    wrong = [p for p in ended if phase_of(p) != phase or any(c != exit_code for c in exit_codes(p))]
    if len(ended) < size or wrong:
        described = name_list(sorted(snap.pods, key=name_of), ending)
        return Verdict("pods-ended", False, f"expected {size} pods ended {phase} (exit {exit_code}); seen: {described}")
    return Verdict("pods-ended", True, f"all {size} pods ended {phase} (exit {exit_code})")


def trainjob_suspended(snap: Snapshot, suspended: bool) -> Verdict:
    """Trainer's ``Suspended`` condition: True/``Suspended`` while suspended, False/``Resumed`` once resumed."""
    trainjob = snap.trainjobs[0] if snap.trainjobs else None
    found = condition_of(trainjob, TRAINJOB_SUSPENDED)
    want = ("True", SUSPENDED_REASON) if suspended else ("False", RESUMED_REASON)
    seen = (found or {}).get("status"), (found or {}).get("reason")
    text = f"TrainJob {snap.workload}: {conditions_text(trainjob)}"
    return Verdict("trainjob-suspended", seen == want, f"{text}; expected {TRAINJOB_SUSPENDED}={want[0]} ({want[1]})")


def jobset_restarts(snap: Snapshot, max_restarts: int, row: LifecycleJobSetRow) -> Verdict:
    """The JobSet restarted ``max_restarts`` times, then failed with ``ReachedMaxRestarts``, and (rows that have it)
    its ``RestartingJobSet`` condition ended False/``JobSetFailed``; rows without the condition show none."""
    jobset = snap.jobsets[0] if snap.jobsets else None
    if jobset is None:
        return Verdict("jobset-restarts", False, f"no JobSet {snap.workload} in the snapshot")
    restarts = (jobset.get("status") or {}).get("restarts", 0)
    problems = [] if restarts == max_restarts else [f"status.restarts {restarts}, expected {max_restarts}"]
    ended = trainjob_ended(snap, TRAINJOB_FAILED, REACHED_MAX_RESTARTS)
    problems += [] if ended.ok else [ended.explanation]
    restarting = condition_of(jobset, JOBSET_RESTARTING)
    if row.restarting_condition:
        got = (restarting or {}).get("status"), (restarting or {}).get("reason")
        if got != ("False", RESTARTING_ENDED_BY_FAILURE):
            problems.append(f"{JOBSET_RESTARTING} {got}, expected ('False', {RESTARTING_ENDED_BY_FAILURE!r})")
    elif restarting is not None:
        problems.append(f"{JOBSET_RESTARTING} present, which {row.name} does not have")
    text = f"JobSet {name_of(jobset)}: restarts {restarts}; {conditions_text(jobset)}"
    return Verdict("jobset-restarts", not problems, "; ".join(problems) + f" ({text})" if problems else text)


def queue_holds(snap: Snapshot, queue: str, gpus: float) -> Verdict:
    """The Queue's ``status.allocated`` shows at least ``gpus`` GPUs (KAI's queue-controller has caught up with a
    gang that was just bound, before the case ends it)."""
    held = queue_gpus(snap, queue)
    shown = "not read" if held is None else f"{held:g}"
    return Verdict(
        "queue-holds", held is not None and held >= gpus, f"queue {queue} allocated {shown} of {gpus:g} GPU(s)"
    )


def nothing_left(snap: Snapshot, workload: str, pod_names: Iterable[str] = ()) -> Verdict:
    """Nothing of the deleted TrainJob ``workload`` is left: no TrainJob, JobSet, Job, pod (in any phase), PodGroup
    or BindRequest (``snap``: the namespace, taken with owners and BindRequests). BindRequests are named after their
    pod and owned by it: those of ``pod_names`` (every pod the episode saw) or of a pod named after the TrainJob."""
    part, names = snap.of(workload), set(pod_names)
    requests = [
        b for b in snap.bindrequests
        if (pod := str((b.get("spec") or {}).get("podName", ""))) in names or pod.startswith(f"{workload}-")
    ]  # fmt: skip
    left = [
        f"{kind} {name_list(objs)}"
        for kind, objs in (
            ("TrainJob", list(part.trainjobs)),
            ("JobSet", list(part.jobsets)),
            ("Job", list(part.jobs)),
            ("pod", list(part.pods)),
            ("PodGroup", list(part.podgroups)),
            ("BindRequest", requests),
        )
        if objs
    ]
    if left:
        return Verdict("nothing-left", False, f"left behind by TrainJob {workload}: " + "; ".join(left))
    return Verdict("nothing-left", True, f"no TrainJob, JobSet, Job, pod, PodGroup or BindRequest of {workload} left")


# ------------------------------------------------------------------------------------------------ episodes
def _bound_whole_at(episode: Episode, workload: str, size: int) -> Snapshot | None:
    return next((s for s in episode if len(s.of(workload).bound_pods) >= size), None)


def _ended_at(episode: Episode, workload: str) -> int | None:
    """Index of the first snapshot of the episode's last stretch in which ``workload`` has no live pod (its end:
    a restart or a resume in between starts a new stretch), None while it still has one."""
    ended = None
    for index in range(len(episode) - 1, -1, -1):
        if episode[index].of(workload).live_pods:
            break
        ended = index
    return ended


def queue_released(episode: Episode, queue: str, workload: str, size: int, gpus: float, grace: float) -> Verdict:
    """While the gang was bound whole its Queue showed its ``gpus`` in ``status.allocated``; once its last pod had
    ended (no live pod left, for good: the last stretch of the episode), the Queue showed none within ``grace``."""
    end = _ended_at(episode, workload)
    if end is None:
        live = episode[-1].of(workload).live_pods if episode else []
        return Verdict("queue-released", False, f"{workload} still has {len(live)} live pod(s): {name_list(live)}")
    before = episode[:end]
    held = [s for s in before if len(s.of(workload).bound_pods) >= size and (queue_gpus(s, queue) or 0) >= gpus]
    if not held:
        most = max((queue_gpus(s, queue) or 0 for s in before), default=0)
        return Verdict(
            "queue-released",
            False,
            f"queue {queue} never showed the {gpus:g} GPUs of {workload} in status.allocated while it was bound "
            f"(at most {most:g}); KAI's queue-controller sums them from the PodGroups' status.resourcesStatus",
        )
    ended = episode[end]
    known = [(s, g) for s in episode[end:] if (g := queue_gpus(s, queue)) is not None]
    released = next((s for s, g in known if g == 0), None)
    if released is None:
        last, still = known[-1] if known else (episode[-1], None)
        return Verdict(
            "queue-released",
            False,
            f"queue {queue} still holds {'?' if still is None else f'{still:g}'} GPU(s) "
            f"{last.taken_at - ended.taken_at:.1f}s after the last pod of {workload} ended (allowed {grace:g}s)",
        )
    delay = released.taken_at - ended.taken_at
    text = (
        f"queue {queue} held {gpus:g} GPUs while {workload} ran and none {delay:.1f}s after its last pod ended "
        f"(allowed {grace:g}s)"
    )
    return Verdict("queue-released", delay <= grace, text)


def podgroup_kept(episode: Episode, workload: str, kept: bool) -> Verdict:
    """After the gang ended, its PodGroup (the one seen while it ran) is still there when the row says so, and
    holds no GPU (``status.resourcesStatus.allocated``)."""
    seen = next((s.of(workload).podgroup for s in episode if s.of(workload).podgroup is not None), None)
    if seen is None:
        return Verdict("podgroup-after-end", False, f"no PodGroup of {workload} was ever seen")
    last = episode[-1].of(workload)
    if last.live_pods:
        return Verdict("podgroup-after-end", False, f"{workload} still has {len(last.live_pods)} live pod(s)")
    now = next((g for g in last.podgroups if uid_of(g) == uid_of(seen)), None)
    if now is None:
        text = f"PodGroup {name_of(seen)} is gone after {workload} ended"
        return Verdict(
            "podgroup-after-end", not kept, text + ("" if not kept else ", but it is kept until its JobSet goes")
        )
    if not kept:
        return Verdict("podgroup-after-end", False, f"PodGroup {name_of(now)} is still there after {workload} ended")
    held = podgroup_gpus(now)
    text = f"PodGroup {name_of(now)} kept after {workload} ended, holding {held:g} GPU(s) (status.resourcesStatus)"
    return Verdict("podgroup-after-end", held == 0, text)


def completing_gang_spared(episode: Episode, workload: str) -> Verdict:
    """No pod of the gang was evicted while the gang was completing: none seen deleted before it ended, each
    completion index ran once and ended Succeeded (exit 0), and no ``Evict`` event of action
    ``stalegangeviction`` was written on its PodGroup (the snapshots that read events)."""
    pods: dict[str, Obj] = {}
    evicted: dict[str, Obj] = {}
    stale_events: dict[str, Obj] = {}
    for snap in episode:
        part = snap.of(workload)
        for pod in part.pods:
            pods[uid_of(pod)] = pod
            if is_terminating(pod) and phase_of(pod) not in TERMINAL:
                evicted[uid_of(pod)] = pod
        for event in part.events:
            if event.get("reason") == EVICT_EVENT_REASON and (
                annotations_of(event).get(EVICT_ACTION_ANNOTATION) == STALE_GANG_ACTION
            ):
                stale_events[uid_of(event) or event.get("message", "")] = event
    per_index: dict[str, list[Obj]] = defaultdict(list)
    for pod in pods.values():
        per_index[labels_of(pod).get(INDEX_LABEL, "?")].append(pod)
    problems = []
    if evicted:
        problems.append(f"evicted while running: {name_list(list(evicted.values()))}")
    if stale_events:
        problems.append(
            f"{len(stale_events)} Evict event(s) of {STALE_GANG_ACTION}: {next(iter(stale_events.values())).get('message', '')}"
        )
    rerun = sorted(ix for ix, found in per_index.items() if len(found) > 1)
    if rerun:
        problems.append(f"indexes run more than once (a pod replaced): {', '.join(rerun)}")
    wrong = [
        p for p in pods.values() if phase_of(p) in TERMINAL and (phase_of(p) != "Succeeded" or exit_codes(p) != [0])
    ]
    if wrong:
        problems.append(f"ended otherwise than Succeeded (exit 0): {name_list(wrong, ending)}")
    if problems:
        return Verdict("completing-gang-spared", False, f"{workload}: " + "; ".join(problems))
    return Verdict(
        "completing-gang-spared", True, f"all {len(pods)} pods of {workload} ran to their own end; none evicted"
    )


def took_freed_gpus(episode: Episode, waiting: str, holder: str, size: int, holder_size: int) -> Verdict:
    """The gang ``waiting`` existed whole while ``holder`` still held all its GPUs, bound no pod as long as it did
    (once the holder's pods start ending, what they free is free), and was then bound whole (a partial moment is the
    gang detectors' business)."""
    waited = False
    for snap in episode:
        held, taken = snap.of(holder).bound_pods, snap.of(waiting).bound_pods
        if len(held) >= holder_size and taken:
            return Verdict(
                "took-the-freed-gpus",
                False,
                f"{waiting} had {len(taken)} pod(s) bound ({node_summary(taken)}) while {holder} still held all its "
                f"{len(held)} ({node_summary(held)})",
            )
        waited |= len(held) >= holder_size and len(snap.of(waiting).live_pods) >= size
    whole = _bound_whole_at(episode, waiting, size)
    if not waited:
        return Verdict("took-the-freed-gpus", False, f"{waiting} never waited whole while {holder} ran whole")
    if whole is None:
        bound = len(episode[-1].of(waiting).bound_pods) if episode else 0
        return Verdict("took-the-freed-gpus", False, f"{waiting}: {bound} of {size} pods bound after {holder} ended")
    taken = whole.of(waiting).bound_pods
    return Verdict(
        "took-the-freed-gpus", True, f"{waiting} waited whole, then took freed GPUs whole ({node_summary(taken)})"
    )


def restarted_whole(episode: Episode, workload: str, size: int, attempts: int) -> Verdict:
    """Each of the ``attempts`` runs of the gang (JobSet's restart attempts, by the pods' ``restart-attempt``
    label) was bound whole at some observation, and no observation had pods of two attempts bound at once."""
    most: dict[int, int] = defaultdict(int)
    for snap in episode:
        by_attempt: dict[int, list[Obj]] = defaultdict(list)
        for pod in snap.of(workload).bound_pods:
            by_attempt[attempt_of(pod)].append(pod)
        if len(by_attempt) > 1:
            mixed = ", ".join(f"attempt {a}: {name_list(p)}" for a, p in sorted(by_attempt.items()))
            return Verdict("restarted-whole", False, f"{workload} had pods of two attempts bound at once ({mixed})")
        for attempt, pods in by_attempt.items():
            most[attempt] = max(most[attempt], len(pods))
    runs = "; ".join(f"attempt {a}: at most {most.get(a, 0)} of {size} bound" for a in range(attempts))
    whole = all(most.get(a, 0) >= size for a in range(attempts))
    return Verdict("restarted-whole", whole, f"{workload}: {runs}")
