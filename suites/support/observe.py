"""Looking at a case's namespace through :class:`~fixtures.kube.KubeApi`: snapshots, timelines and waits.

:class:`Observer` takes :class:`~suites.support.snapshot.Snapshot` s of one namespace and feeds every one of them
into a :class:`Timeline` (per-pod created/bound/running/evicted times, for the report). Waits are the foundation's
``eventually``/``consistently`` over a detector: the probe snapshots, the detector judges, and a failure quotes
the detector's last explanation, followed by a chain diagnosis of the workloads it was about
(:mod:`suites.support.diagnosis`): which link of TrainJob → … → bound pods is broken, and, when that link is a
component that is down, a :class:`~fixtures.errors.ComponentDown` instead of a product failure.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import KubeApi, kinds
from kai_conformance.fixtures.waits import (
    POLL_INTERVAL,
    ConditionNotMet,
    ConditionViolated,
    Observation,
    RefusalRule,
    consistently,
    eventually,
)
from kai_conformance.reports.records import PodTimes
from kai_conformance.suites.support import diagnosis
from kai_conformance.suites.support.confirm import confirm_fired
from kai_conformance.suites.support.detectors.gang import gang_fully_bound
from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.expectations import KaiRow
from kai_conformance.suites.support.refusals import kai_refusals
from kai_conformance.suites.support.snapshot import (
    Snapshot,
    bound_at,
    is_terminating,
    name_of,
    node_of,
    parse_time,
    running_at,
    uid_of,
    workload_of,
)

Check = Callable[[Snapshot], Verdict]
TERMINAL_PHASES = ("Succeeded", "Failed")
#: Workloads a failure is about: (TrainJob name, pods).
About = Sequence[tuple[str, int]]


class _OutOfTime(Exception):
    """Internal: a :meth:`Observer.settle` wait ran out of time."""


class Timeline:
    """First-seen times per pod across every snapshot of a namespace.

    ``evicted`` is when the pod was seen terminating (its deletionTimestamp) or, failing that, the first snapshot
    in which it was gone: KAI evicts by deleting the pod, and the report wants to see that moment.
    """

    def __init__(self) -> None:
        self._pods: dict[str, PodTimes] = {}

    def observe(self, snap: Snapshot) -> None:
        present = set()
        for pod in snap.pods:
            uid = uid_of(pod)
            present.add(uid)
            times = self._pods.setdefault(uid, PodTimes(pod=name_of(pod), workload=workload_of(pod) or "-"))
            times.node = node_of(pod) or times.node
            times.created = times.created or parse_time(pod["metadata"].get("creationTimestamp"))
            times.bound = times.bound or bound_at(pod)
            times.running = times.running or running_at(pod)
            if is_terminating(pod):
                times.evicted = times.evicted or parse_time(pod["metadata"].get("deletionTimestamp"))
        for uid, times in self._pods.items():
            if uid not in present and times.evicted is None:
                times.evicted = snap.taken_at

    def workloads(self) -> list[str]:
        return sorted({t.workload for t in self._pods.values()})

    def pods(self, workload: str) -> list[PodTimes]:
        found = [t for t in self._pods.values() if t.workload == workload]
        return sorted(found, key=lambda t: (t.created or 0.0, t.pod))


class Observer:
    """Snapshots of one namespace. ``owners``/``events`` widen a snapshot beyond pods and PodGroups.

    Every workload asked for (:meth:`workload`) is remembered, so a failed wait over the whole namespace diagnoses
    each of them; a wait of one :class:`Workload` diagnoses that one. ``kai``: the KAI row the run assumes, so that a
    diagnosis says where that version's podgrouper reads a gang's floor (:mod:`suites.support.gang_floor`).
    """

    def __init__(
        self,
        kube: KubeApi,
        namespace: str,
        clock: Callable[[], float] = time.time,
        interval: float = POLL_INTERVAL,
        kai: KaiRow | None = None,
    ) -> None:
        self.kube, self.namespace, self.clock, self.interval, self.kai = kube, namespace, clock, interval, kai
        self.timeline = Timeline()
        self.workloads: dict[str, int] = {}
        #: Called with every snapshot taken, in order: a case that judges a whole episode (the lifecycle area) sees
        #: every observation, not only those of one wait.
        self.listeners: list[Callable[[Snapshot], None]] = []
        #: Queues (cluster-scoped, by name) every snapshot also reads, for their status; and whether it reads the
        #: namespace's BindRequests. Off unless a case asks: each costs requests on every poll.
        self.queues: tuple[str, ...] = ()
        self.bindrequests = False
        #: Elastic gangs' floors by TrainJob (:meth:`workload`); any other workload's floor is all its pods.
        self.minimums: dict[str, int] = {}

    def snapshot(self, *, events: bool = False, owners: bool = False) -> Snapshot:
        ns = self.namespace
        snap = Snapshot(
            taken_at=self.clock(),
            pods=tuple(self.kube.list(kinds.POD, ns)),
            podgroups=tuple(self.kube.list(kinds.POD_GROUP, ns)),
            events=tuple(self.kube.events(ns)) if events else (),
            trainjobs=tuple(self.kube.list(kinds.TRAIN_JOB, ns)) if owners else (),
            jobsets=tuple(self.kube.list(kinds.JOB_SET, ns)) if owners else (),
            jobs=tuple(self.kube.list(kinds.JOB, ns)) if owners else (),
            queues=tuple(q for q in (self.kube.find(kinds.QUEUE, name) for name in self.queues) if q is not None),
            bindrequests=tuple(self.kube.list(kinds.BIND_REQUEST, ns)) if self.bindrequests else (),
        )
        self.timeline.observe(snap)
        for listener in self.listeners:
            listener(snap)
        return snap

    def until(
        self,
        check: Check,
        *,
        what: str,
        timeout: float,
        failure: type[Exception] = ConditionNotMet,
        guard: Check | None = None,
        events: bool = False,
        owners: bool = False,
        about: About | None = None,
    ) -> tuple[Snapshot, Verdict]:
        """Poll until ``check`` passes; returns that snapshot and verdict. On timeout: the last explanation and the
        chain diagnosis of ``about`` (default: every workload asked for).

        ``guard`` is judged on every snapshot on the way; its first violation fails the wait at once.
        """
        last: list[tuple[Snapshot, Verdict]] = []
        probe = self._probe(check, guard, what, last, events, owners)
        try:
            eventually(probe, what=what, timeout=timeout, failure=failure, interval=self.interval)
        except (AssertionError, errors.WaitTimeout) as failed:
            raise self.explain(failed, about) from None
        return last[0]

    def settle(self, check: Check, *, what: str, timeout: float, **kwargs: Any) -> tuple[Snapshot, Verdict]:
        """Like :meth:`until`, but returns the last snapshot and verdict instead of raising when time runs out:
        for cases that record what they saw either way and then assert on the verdict."""
        last: list[tuple[Snapshot, Verdict]] = []

        def remember(snap: Snapshot) -> Verdict:
            verdict = check(snap)
            last[:] = [(snap, verdict)]
            return verdict

        try:
            return self.until(remember, what=what, timeout=timeout, failure=_OutOfTime, **kwargs)
        except _OutOfTime:
            return last[0]

    def holds(
        self,
        check: Check,
        *,
        what: str,
        hold: float,
        failure: type[Exception] = ConditionViolated,
        guard: Check | None = None,
        events: bool = False,
        owners: bool = False,
        about: About | None = None,
        refusals: RefusalRule | None = None,
        refused: str | None = None,
    ) -> tuple[Snapshot, Verdict]:
        """``check`` must pass in every snapshot for ``hold`` seconds; returns the last snapshot and verdict, whose
        explanation ends with how the hold ended. A violation carries the chain diagnosis of ``about`` (default:
        every workload asked for).

        With ``refusals``, the TrainJob ``refused`` is one KAI must refuse: the hold may end once KAI's own
        evidence (:mod:`suites.support.refusals`) shows it refused that workload often enough (the rule is in
        :mod:`fixtures.waits`); ``check`` is judged on every snapshot until then.
        """
        if refusals is not None and refused is None:
            raise ValueError(f"{what}: a hold that ends on KAI's refusals must name the TrainJob KAI refuses")
        last: list[tuple[Snapshot, Verdict]] = []
        probe = self._probe(check, guard, what, last, events or refused is not None, owners, refused)
        try:
            held = consistently(probe, what=what, hold=hold, failure=failure, interval=self.interval, refusals=refusals)
        except AssertionError as failed:
            raise self.explain(failed, about) from None
        snap, verdict = last[0]
        return snap, replace(verdict, explanation=f"{verdict.explanation}; {held.account()}")

    def explain(self, failure: BaseException, about: About | None = None) -> BaseException:
        """``failure`` with the chain diagnosis of ``about`` (default: every workload asked for) appended, or a
        :class:`~fixtures.errors.ComponentDown` when a component that is down kept the expected state away."""
        targets = list(self.workloads.items()) if about is None else list(about)
        if not targets:
            return failure
        return diagnosis.explain(
            self.kube,
            self.namespace,
            lambda: self.snapshot(events=True, owners=True),
            failure,
            targets,
            kai=self.kai,
            minimums=self.minimums,
        )

    def _probe(
        self,
        check: Check,
        guard: Check | None,
        what: str,
        last: list[tuple[Snapshot, Verdict]],
        events: bool,
        owners: bool,
        refused: str | None = None,
    ) -> Callable[[], Observation]:
        def probe() -> Observation:
            snap = self.snapshot(events=events, owners=owners)
            if guard is not None:
                kept = guard(snap)
                if not kept.ok:
                    raise ConditionViolated(f"{what}: violated on the way: {kept}")
            verdict = check(snap)
            last[:] = [(snap, verdict)]
            if refused is None:
                return verdict.observation()
            return replace(verdict.observation(), refusals=kai_refusals(snap.of(refused)))

        return probe

    def workload(self, name: str, size: int, *, minimum: int | None = None) -> Workload:
        """The TrainJob ``name`` of ``size`` pods, all placed together unless ``minimum`` (an elastic gang's floor)."""
        self.workloads[name] = size
        if minimum is not None:
            self.minimums[name] = minimum
        return Workload(self, name, size)


@dataclass
class Workload:
    """One TrainJob seen through an :class:`Observer`: checks get the snapshot narrowed to it."""

    observer: Observer
    name: str
    size: int

    def snapshot(self, **wider: bool) -> Snapshot:
        return self.observer.snapshot(**wider).of(self.name)

    def narrow(self, check: Check) -> Check:
        """``check`` judged on this workload's part of a namespace snapshot."""
        return lambda snap: check(snap.of(self.name))

    @property
    def about(self) -> About:
        return [(self.name, self.size)]

    def until(self, check: Check, *, what: str, timeout: float, **kwargs: Any) -> tuple[Snapshot, Verdict]:
        kwargs.setdefault("about", self.about)
        snap, verdict = self.observer.until(self.narrow(check), what=what, timeout=timeout, **kwargs)
        return snap.of(self.name), verdict

    def holds(self, check: Check, *, what: str, hold: float, **kwargs: Any) -> tuple[Snapshot, Verdict]:
        """:meth:`Observer.holds` on this workload; with ``refusals`` it is the workload KAI must refuse."""
        kwargs.setdefault("about", self.about)
        if kwargs.get("refusals") is not None:
            kwargs.setdefault("refused", self.name)
        snap, verdict = self.observer.holds(self.narrow(check), what=what, hold=hold, **kwargs)
        return snap.of(self.name), verdict

    def confirm(self, verdict: Verdict, message: str) -> None:
        """Assert a verdict about this workload; a failure carries its chain diagnosis (PodGroup provenance
        included): ``AssertionError("<message>: <verdict>")``."""
        if not verdict.ok:
            raise self.observer.explain(AssertionError(f"{message}: {verdict}"), self.about)

    def confirm_fired(self, verdict: Verdict, message: str, *, naming: Sequence[str] = ()) -> None:
        """A control about this workload: the detector must fire (naming each of ``naming``); a failure carries the
        workload's chain diagnosis (suites/support/confirm.py)."""
        confirm_fired(verdict, message, naming=naming, observer=self.observer, about=self.about)

    def settle(self, check: Check, *, what: str, timeout: float, **kwargs: Any) -> tuple[Snapshot, Verdict]:
        kwargs.setdefault("about", self.about)
        snap, verdict = self.observer.settle(self.narrow(check), what=what, timeout=timeout, **kwargs)
        return snap.of(self.name), verdict

    def bound(self, *, what: str, timeout: float, **kwargs: Any) -> tuple[Snapshot, Verdict]:
        """Wait until every pod of the workload is bound (events are fetched, so a failure quotes KAI's account)."""
        kwargs.setdefault("events", True)
        return self.until(lambda s: gang_fully_bound(s, self.size), what=what, timeout=timeout, **kwargs)

    def visible(self, timeout: float, *, kai: bool = True) -> Snapshot:
        """Wait until all its pods exist and (``kai``) KAI's podgrouper has made its PodGroup: from then on the
        scheduler sees the whole gang, so "never happens" holds may start."""
        snap, _ = self.until(
            lambda s: visibility(s, self.size, kai=kai),
            what=f"TrainJob {self.name}: {self.size} pod(s)" + (" and its PodGroup" if kai else "") + " created",
            timeout=timeout,
        )
        return snap


def visibility(snap: Snapshot, size: int, *, kai: bool = True) -> Verdict:
    """Have the controllers made the workload's pods (Trainer → JobSet → Job → Pod) and, with KAI, its PodGroup?"""
    pods = len(snap.live_pods)
    text = f"{pods} of {size} pods exist"
    if pods < size:
        why = finished_jobs(snap) or " (Trainer makes the JobSet, JobSet the Jobs, the Job controller the pods)"
        return Verdict("visible", False, text + why)
    if kai and snap.podgroup is None:
        found = f"{len(snap.podgroups)} PodGroups" if snap.podgroups else "no PodGroup yet"
        return Verdict(
            "visible", False, text + f"; {found} (KAI's podgrouper makes one per TrainJob from pods that ask for "
            "schedulerName kai-scheduler; see logs-kai-podgrouper.txt)"
        )  # fmt: skip
    return Verdict("visible", True, text + (f"; PodGroup {name_of(snap.podgroup)}" if kai and snap.podgroup else ""))


def finished_jobs(snap: Snapshot) -> str:
    """Why missing pods will not come back: the workload's pods that ended and its Jobs that finished (Jobs are
    in the snapshot when it was taken with ``owners=True``). A Job counts a pod that ended ``Succeeded`` as a
    completed index and never runs that index again, even when the pod was deleted (evicted)."""
    parts = []
    ended = Counter(p["status"]["phase"] for p in snap.pods if p.get("status", {}).get("phase") in TERMINAL_PHASES)
    if ended:
        parts.append(", ".join(f"{n} pod(s) ended {phase}" for phase, n in sorted(ended.items())))
    completed = False
    for job in snap.jobs:
        status = job.get("status") or {}
        done = [c["type"] for c in status.get("conditions") or [] if c.get("type") in ("Complete", "Failed")
                and c.get("status") == "True"]  # fmt: skip
        if done:
            completed |= done[0] == "Complete"
            parts.append(
                f"Job {name_of(job)} is {done[0]} (succeeded {status.get('succeeded', 0)}, failed "
                f"{status.get('failed', 0)}, completedIndexes {status.get('completedIndexes') or '-'})"
            )
    if not parts:
        return ""
    text = "; " + "; ".join(parts)
    if completed or ended.get("Succeeded"):
        text += (
            "; an evicted pod that ends Succeeded (its container exits 0 on SIGTERM, as pause does) completes its "
            "index and is never recreated: the workload must exit non-zero when evicted (docs/suites.md, The workload)"
        )
    return text
