"""Steps of the scale cases: watch a burst's namespace, submit the burst at once, wait until it settles while the
scale detectors judge every change, then judge the settled state, record the measurements and explain a failure.

Observation is by watch (:class:`~fixtures.kube.informer.Watchers`: a watch each of pods, PodGroups and BindRequests over
the case's namespace), never by polling the API: thousands of pods polled every 0.25 s would be the largest load on the API
server. The waits poll only the ledger in memory (:mod:`suites.support.scale.ledger`), so their progress lines and
timeouts are the suite's usual ones (:mod:`fixtures.waits`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.clusters.suite_stack import closed_to_workloads
from kai_conformance.fixtures import progress
from kai_conformance.fixtures.kube import KubeApi, WatchEvent, kinds
from kai_conformance.fixtures.kube.informer import Watchers
from kai_conformance.fixtures.waits import ConditionNotMet, ConditionViolated, Observation, TimeoutPolicy, eventually
from kai_conformance.fixtures.workspace import Workspace
from kai_conformance.reports.records import CaseRecorder
from kai_conformance.suites.support.cases.contract import Manifest
from kai_conformance.suites.support.cases.scale import BurstPlan
from kai_conformance.suites.support.detectors import scale as detect
from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.observe import Observer
from kai_conformance.suites.support.scale.ledger import BurstLedger
from kai_conformance.suites.support.snapshot import NAMED, gpus_of, node_of
from kai_conformance.suites.support.timing import settle

#: Create requests in flight at once: the burst reaches the API server within a second or two, as from a CI job
#: submitting many TrainJobs, without one client's connection pool queueing them.
SUBMITTERS = 8
#: Seconds a burst may take per pod at most, on top of the ``schedule`` budget (both scaled by ``--timeout-scale``):
#: Trainer, JobSet, the Job controller, the podgrouper, KAI and the binder each handle every pod of the burst. It is
#: a ceiling, not the expected pace: on the real controllers on 2 cores a burst of 1,382 pods made PodGroups at about
#: 1.2 gangs/s. What ends a burst that is stuck is :func:`stall_limit`.
SECONDS_PER_POD = 1.0
#: Seconds between two looks at the cluster's GPU room (:func:`wait_for_idle_gpus`): each lists every node and pod.
ROOM_INTERVAL = 2.0


def burst_timeout(timeouts: TimeoutPolicy, plan: BurstPlan) -> float:
    return timeouts("schedule") + plan.pods * SECONDS_PER_POD * timeouts.scale


def stall_limit(timeouts: TimeoutPolicy) -> float:
    """How long a burst that is not settled may go without any change (a pod, a PodGroup, a bind) before it is
    judged stuck: the ``schedule`` budget. A burst may take as long as it keeps progressing, up to
    :func:`burst_timeout`; its pace depends on the machine, a stall does not."""
    return timeouts("schedule")


def bind_allowance(timeouts: TimeoutPolicy) -> float:
    """How long a gang KAI placed whole may stay part bound while the binder binds the rest: as long as a burst may go
    without any change (:func:`stall_limit`). The binder binds pod by pod at its client rate (``--qps 20`` by
    default) behind every other gang KAI placed in the same session, so under a burst of thousands of pods a gang's
    binds spread over seconds; a binder that leaves a gang part bound for longer fails ``gang-never-partial``."""
    return stall_limit(timeouts)


class Burst:
    """One burst in one namespace: its ledger, fed by the namespace's watches, and the waits over it.

    Use as a context manager: the watches start (and have listed the empty namespace) before anything is submitted,
    and stop on exit, failure or not."""

    def __init__(self, kube: KubeApi, namespace: str, plan: BurstPlan, timeouts: TimeoutPolicy, *, kai: bool = True):
        self.kube, self.namespace, self.plan, self.timeouts, self.kai = kube, namespace, plan, timeouts, kai
        self.ledger = BurstLedger(plan, settle(timeouts), kai=kai, bind_allowance=bind_allowance(timeouts))
        self.lock = threading.Lock()
        self.watchers = Watchers(kube, namespace=namespace)
        self.settled_at: float | None = None

    def __enter__(self) -> Burst:
        self.watchers.watch(kinds.POD, self._handler(self.ledger.pod))
        if self.kai:
            self.watchers.watch(kinds.POD_GROUP, self._handler(self.ledger.podgroup))
            self.watchers.watch(kinds.BIND_REQUEST, self._handler(self.ledger.bindrequest))
        self.watchers.start()
        try:
            self.watchers.wait_synced(self.timeouts("api"))
        except BaseException:
            self.watchers.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.watchers.stop()

    def _handler(self, feed: Callable[[str, dict, float], None]) -> Callable[[WatchEvent, float], None]:
        def handle(event: WatchEvent, observed_at: float) -> None:
            with self.lock:
                feed(event.type, event.obj, observed_at)

        return handle

    # ------------------------------------------------------------------------------------------------ submit
    def submit(self, workspace: Workspace, trainjobs: Sequence[Manifest]) -> None:
        """Create every TrainJob at once (:data:`SUBMITTERS` requests in flight), noting when each was sent."""

        def create(trainjob: Manifest) -> None:
            with self.lock:
                self.ledger.submitted(trainjob["metadata"]["name"], time.time())
            workspace.apply(trainjob)

        started = time.monotonic()
        with ThreadPoolExecutor(SUBMITTERS, thread_name_prefix="burst-submit") as pool:
            for done in [pool.submit(create, trainjob) for trainjob in trainjobs]:
                done.result()  # the first failed create fails the case (an infrastructure error: the API refused)
        with self.lock:
            status = self.ledger.status()
        progress.report(f"submitted {len(trainjobs)} TrainJobs in {time.monotonic() - started:.1f}s; {status}")

    # ---------------------------------------------------------------------------------------------- waiting
    def until(self, check: Callable[[BurstLedger, float], Verdict], *, what: str, timeout: float,
              guarded: bool = True, confirm: Callable[[Verdict], Verdict] | None = None) -> Verdict:  # fmt: skip
        """Poll the ledger until ``check`` passes; with ``guarded`` the over-the-run detectors fail the wait at the
        first violation; ``confirm`` may overrule a passing check. A watch that stopped (Forbidden, the API gone) fails
        it as an infrastructure error."""
        last: list[Verdict] = []

        def probe():
            self.watchers.check()
            now = time.time()
            lagging = self._lagging_partial_gangs(now) if guarded else set()
            with self.lock:
                if guarded:
                    kept = self.ledger.guards(now, lagging=lagging)
                    if not kept.ok:
                        raise ConditionViolated(f"{what}: violated on the way: {kept}")
                verdict = check(self.ledger, now)
            if verdict.ok and confirm is not None:  # outside the lock: it may ask the API server
                verdict = confirm(verdict)
            last[:] = [verdict]
            return verdict.observation()

        eventually(probe, what=what, timeout=timeout)
        return last[0]

    def settle(self, what: str) -> Verdict:
        """Wait until every gang is complete and nothing has changed for the settle time; fail early once nothing
        has changed for :func:`stall_limit` while the burst is not settled."""
        quiet, stall = settle(self.timeouts), stall_limit(self.timeouts)

        def settled(ledger: BurstLedger, now: float) -> Verdict:
            verdict = ledger.settled(now, quiet)
            since = ledger.last_change
            if not verdict.ok and since is not None and now - since > stall:
                raise ConditionNotMet(
                    f"{what}: stuck, nothing changed for {now - since:.0f}s (a burst may take as long as it "
                    f"progresses; {stall:.0f}s without any change ends it): {verdict.explanation}; {ledger.status()}"
                )
            return verdict

        verdict = self.until(settled, what=what, timeout=self.timeout(), confirm=self._caught_up)
        self.settled_at = time.time()
        return verdict

    def _lagging_partial_gangs(self, now: float) -> set[str]:
        """The gangs partial past the grace whose watch events lag behind the cluster, by a list (outside the lock:
        it asks the API server). Listed only when a gang is overdue, so a healthy burst costs no list."""
        with self.lock:
            overdue = self.ledger.partial.overdue(now)
        if not overdue:
            return set()
        listed = self.kube.list(kinds.POD, self.namespace)
        requests = self.kube.list(kinds.BIND_REQUEST, self.namespace) if self.kai else None
        with self.lock:
            return self.ledger.lagging_gangs(overdue, listed, requests)

    def _caught_up(self, verdict: Verdict) -> Verdict:
        """Settled on the watches' view only once that view has caught up with a list of the cluster: a change the
        watch has not delivered yet (an eviction, a bind) would otherwise be judged as never having happened."""
        listed = self.kube.list(kinds.POD, self.namespace)
        with self.lock:
            lag = self.ledger.lags(listed)
        return Verdict(verdict.detector, False, f"the watches lag behind: {', '.join(lag[:5])}") if lag else verdict

    def timeout(self) -> float:
        return burst_timeout(self.timeouts, self.plan)

    def guards(self) -> dict[str, Verdict]:
        """The over-the-run detectors now, by name."""
        with self.lock:
            return self.ledger.guard_verdicts(time.time())

    # ---------------------------------------------------------------------------------------------- settled
    def fitting_gangs_bound(self, layout: GpuLayout) -> Verdict:
        """``fitting-gangs-bound`` on the GPUs idle now, cluster-wide (other namespaces' pods count)."""
        free = idle_gpus(self.kube, layout)
        with self.lock:
            return detect.fitting_gangs_bound(self.ledger.waiting(), free, self.ledger.held,
                                              self.ledger.held_non_preemptible, self.ledger.queues)  # fmt: skip

    def burst_bound(self) -> Verdict:
        with self.lock:
            waiting = [g.name for g in self.ledger.waiting()]
            return detect.burst_bound(self.ledger.whole_gangs(), len(self.ledger.gangs), waiting)

    def suspects(self) -> list[tuple[str, int]]:
        """The gangs a failure is most likely about, for the chain diagnosis: partial ones first, then waiting."""
        with self.lock:
            gangs = list(self.ledger.gangs.values())
        partial = [g for g in gangs if 0 < g.bound < g.plan.pods]
        waiting = [g for g in gangs if g.bound == 0]
        return [(g.plan.name, g.plan.pods) for g in (partial + waiting)[:NAMED]]

    # ---------------------------------------------------------------------------------------------- records
    def record(self, record: CaseRecorder, name: str, *, verdicts: bool = True) -> None:
        """The burst's measurements (whatever happened): per gang, per burst, and the GPUs held over time; with
        ``verdicts`` also the over-the-run detectors' verdicts."""
        if verdicts:
            for verdict in self.guards().values():
                record.verdict(verdict)
        with self.lock:
            record.burst(self.ledger.burst_times(name, self.settled_at), self.ledger.gang_times())
            record.series(f"GPUs held by {name}", self.ledger.held_over_time())
            status, events = self.ledger.status(), self.ledger.events
        record.note(f"{name}: {self.plan.describe()}; at the end {status}; {events:,} watch event(s) observed")


def idle_gpus(kube: KubeApi, layout: GpuLayout) -> dict[str, int]:
    """Free GPUs per GPU node: capacity less every pod on it that has not ended, being deleted or not (KAI counts
    a releasing pod's GPUs until it is gone), in any namespace. A node no workload pod may be placed on now
    (:func:`~clusters.suite_stack.closed_to_workloads`) has none: at 1,000 fake nodes on 2 cores kwok renewed their
    leases late and hundreds of them went NotReady for a while, and their GPUs are not KAI's to fill then."""
    return GpuRoom.of(kube, layout).free


@dataclass(frozen=True)
class GpuRoom:
    """The GPUs a burst may be given now: free GPUs per open GPU node, and the GPU nodes closed to workloads with why."""

    free: dict[str, int]
    closed: dict[str, str]

    @classmethod
    def of(cls, kube: KubeApi, layout: GpuLayout) -> GpuRoom:
        gpu_nodes = {node.name: node.gpus for node in layout.gpu_nodes}
        closed = {node["metadata"]["name"]: why for node in kube.list(kinds.NODE)
                  if node["metadata"]["name"] in gpu_nodes and (why := closed_to_workloads(node))}  # fmt: skip
        free = {name: gpus for name, gpus in gpu_nodes.items() if name not in closed}
        for pod in kube.list(kinds.POD, fields="spec.nodeName!="):
            node = node_of(pod)
            if node in free and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                free[node] -= gpus_of(pod)
        return cls(free, closed)

    def idle(self) -> int:
        return sum(self.free.values())

    def describe(self, layout: GpuLayout) -> str:
        """``5,516 of 8,012 idle; 312 GPU nodes closed to workloads (kc-kwok-0001: taint …, …)``."""
        said = f"{self.idle():,} of {layout.total:,} idle"
        if self.closed:
            named = ", ".join(f"{name}: {why}" for name, why in list(self.closed.items())[:NAMED])
            said += f"; {len(self.closed)} GPU node(s) closed to workloads ({named}" + (
                f" and {len(self.closed) - NAMED} more)" if len(self.closed) > NAMED else ")"
            )
        return said


def wait_for_idle_gpus(kube: KubeApi, layout: GpuLayout, wanted: int, timeouts: TimeoutPolicy) -> GpuRoom:
    """The GPU room once ``wanted`` GPUs are idle, or as it is after the ``ready`` budget (a look every
    :data:`ROOM_INTERVAL`). A burst sized for the empty cluster starts only once the cluster is empty enough: at 1,000
    fake nodes on real kind (2026-12-01) the filling burst, a minute after every fake node had reported Ready, found
    312 of them closed (NotReady or tainted by the node lifecycle controller: kwok renews their leases late) and
    skipped."""
    seen: list[GpuRoom] = []

    def probe() -> Observation:
        seen[:] = [GpuRoom.of(kube, layout)]
        return Observation(seen[0].idle() >= wanted, f"{wanted:,} wanted, {seen[0].describe(layout)}")

    with suppress(ConditionNotMet):  # not reached: the case says what it found, and skips
        eventually(probe, what=f"{wanted:,} idle GPUs for the burst", timeout=timeouts("ready"), interval=ROOM_INTERVAL)
    return seen[0]


@contextmanager
def diagnosed(burst: Burst, kube: KubeApi, namespace: str) -> Iterator[None]:
    """A product failure of a burst gets the chain diagnosis of the gangs it is most likely about (partial gangs
    first, then waiting ones): which link of TrainJob → … → bound pods is missing, and why."""
    try:
        yield
    except AssertionError as failure:
        suspects = burst.suspects()
        if not suspects:
            raise
        raise Observer(kube, namespace).explain(failure, suspects) from None
