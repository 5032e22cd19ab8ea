"""One chaos mix on the cluster: its queues, its TrainJobs arriving and ending on time, the restarts at their
moments, every change judged by the chaos ledger (suites/support/chaos/ledger.py) from watches, then the settle,
the convergence check, the removal and the leftovers check. The result is an :class:`Outcome`, never an exception:
the search (suites/support/chaos/search.py) decides what a violation means.

Times of the mix are seconds from its start, multiplied by ``--timeout-scale`` like every wait. Between two steps
the run holds until the next step's moment while the ledger's invariants are judged; a violation ends the mix at
once (the reproducer needs its moment, not more of the run).

Each mix runs under its own names (``m<attempt>-<workload>``, queues ``m<attempt>-<queue>``), so one mix's objects
never meet the next one's, and is removed before the next begins. A mix with fractional workloads also watches KAI's
reservation namespace (the binder's reservation pods: ``no-leftover-reservation``) and tells the ledger when the
binder goes down and comes back; the reservation pods' answers on fake GPUs run for the whole case
(suites/test_chaos.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.fixtures import errors, progress
from kai_conformance.fixtures.kube import KubeApi, WatchEvent, kinds
from kai_conformance.fixtures.kube.informer import Watchers
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.fixtures.waits import ConditionNotMet, ConditionViolated, Observation, TimeoutPolicy, eventually
from kai_conformance.fixtures.workspace import Workspace
from kai_conformance.suites.support.cases.chaos import ChaosMix, ChaosQueue, ChaosWorkload, Fault
from kai_conformance.suites.support.chaos import sharing as chaos_sharing
from kai_conformance.suites.support.chaos.faults import Restart, Restarter
from kai_conformance.suites.support.chaos.ledger import ChaosLedger
from kai_conformance.suites.support.detectors.verdict import Verdict
from kai_conformance.suites.support.expectations.sharing import RESERVATION_NAMESPACE
from kai_conformance.suites.support.lifecycle import suspend
from kai_conformance.suites.support.observe import Observer
from kai_conformance.suites.support.scale import idle_gpus
from kai_conformance.suites.support.timing import settle

T = TypeVar("T")
#: Seconds of the timeline shown either side of a violation in a reproducer (scaled).
EXCERPT_WINDOW = 30.0
CONVERGED = "fitting-gangs-bound"


@dataclass
class RestartTiming:
    fault: Fault
    restart: Restart | None
    #: Seconds from the restart until nothing changed for the settle time (the cluster converged), or None when the
    #: next step of the mix came first.
    converged_seconds: float | None = None

    def describe(self) -> str:
        back = self.restart.describe() if self.restart else f"{self.fault.component}: not run"
        converged = (f"converged {self.converged_seconds:.1f}s after the restart" if self.converged_seconds is not None
                     else "still changing at the next step")  # fmt: skip
        return f"{self.fault.describe()}: {back}; {converged}"


@dataclass
class Outcome:
    mix: ChaosMix
    verdicts: dict[str, Verdict]
    restarts: list[RestartTiming] = field(default_factory=list)
    excerpt: list[str] = field(default_factory=list)
    status: str = ""
    seconds: float = 0.0
    #: The seconds into the mix of its first violation.
    violated_at: float | None = None
    #: On a violation, the chain diagnosis of the gangs it names, read before the mix was removed: which link of
    #: TrainJob → … → bound pods broke, and which component should have made it.
    diagnosis: str = ""

    @property
    def violations(self) -> dict[str, Verdict]:
        return {name: v for name, v in self.verdicts.items() if not v.ok}

    @property
    def violated(self) -> bool:
        return bool(self.violations)

    def summary(self) -> str:
        if not self.violated:
            empty = [name for name, v in self.verdicts.items() if v.vacuous]
            return f"every invariant held ({self.status})" + (f"; vacuously: {', '.join(empty)}" if empty else "")
        return "; ".join(f"{name}: {v.explanation}" for name, v in self.violations.items())


def renamed(mix: ChaosMix, attempt: int) -> ChaosMix:
    """The mix under the names of one attempt (module docstring)."""
    prefix = f"m{attempt}-"
    queues = tuple(dataclasses.replace(q, role=prefix + q.role) for q in mix.queues)
    workloads = tuple(dataclasses.replace(w, name=prefix + w.name, queue=prefix + w.queue) for w in mix.workloads)
    return dataclasses.replace(mix, queues=queues, workloads=workloads)


def steps(mix: ChaosMix) -> list[tuple[float, int, str, ChaosWorkload | Fault]]:
    """(moment, order, what, whom) in the order the run takes them; at one moment: arrivals, actions, faults."""
    planned: list[tuple[float, int, str, ChaosWorkload | Fault]] = []
    for w in mix.workloads:
        planned.append((w.arrive, 0, "arrive", w))
        if w.acted_at is not None:
            planned.append((w.acted_at, 1, "delete" if w.ending == "deleted" else "suspend", w))
        if w.resumed_at is not None:
            planned.append((w.resumed_at, 2, "resume", w))
    planned += [(f.at, 3, "restart", f) for f in mix.faults]
    return sorted(planned, key=lambda s: (s[0], s[1]))


class Feeds:
    """The watches of one mix, started, checked and stopped together: its namespace's kinds and, for a mix with
    fractional workloads, the pods of KAI's reservation namespace."""

    def __init__(self, *watchers: Watchers) -> None:
        self.watchers = watchers

    def start(self) -> None:
        for w in self.watchers:
            w.start()

    def wait_synced(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for w in self.watchers:
            w.wait_synced(max(deadline - time.monotonic(), 0.0))

    def check(self) -> None:
        for w in self.watchers:
            w.check()

    def stop(self) -> None:
        for w in self.watchers:
            w.stop()


class MixRunner:
    def __init__(self, kube: KubeApi, ctx: RenderContext, workspace: Workspace, timeouts: TimeoutPolicy,
                 restarter: Restarter, layout: GpuLayout) -> None:  # fmt: skip
        self.kube, self.ctx, self.workspace, self.timeouts = kube, ctx, workspace, timeouts
        self.restarter, self.layout = restarter, layout
        self.quiet = settle(timeouts)

    def run(self, mix: ChaosMix, attempt: int) -> Outcome:
        executed = renamed(mix, attempt)
        started = time.monotonic()
        progress.report(f"chaos mix {attempt}: {mix.describe()}")
        ledger = ChaosLedger(executed, self.quiet, self.timeouts("gc"), self.timeouts("api"))
        # Reentrant: a restart that is already over calls back into the ledger from the step that started it.
        lock = threading.RLock()
        queues = [self._applied(q) for q in executed.queue_manifests(self.ctx)]
        for runtime in executed.runtime_manifests(self.ctx):
            self._applied(runtime)
        trainjobs: dict[str, dict] = {}
        restarts: list[tuple[Fault, float, Future[Restart]]] = []
        mine = Watchers(self.kube, namespace=self.ctx.namespace)
        for kind, feed in ((kinds.POD, ledger.pod), (kinds.POD_GROUP, ledger.podgroup),
                           (kinds.BIND_REQUEST, ledger.bindrequest), (kinds.TRAIN_JOB, ledger.trainjob)):  # fmt: skip
            mine.watch(kind, _fed(feed, lock))
        watchers = Feeds(mine)
        if executed.fractional:
            reserved = Watchers(self.kube, namespace=RESERVATION_NAMESPACE)
            reserved.watch(kinds.POD, _fed(ledger.reservation, lock))
            watchers = Feeds(mine, reserved)
        begin = time.time()
        pool = ThreadPoolExecutor(4, thread_name_prefix="chaos-restart")
        try:
            watchers.start()
            watchers.wait_synced(self.timeouts("api"))
            begin = time.time()
            with lock:
                ledger.started(begin)
            self._drive(executed, ledger, lock, watchers, trainjobs, restarts, pool, begin)
            with lock:
                verdicts = ledger.guard_verdicts(time.time())
            if all(v.ok for v in verdicts.values()):
                verdicts[CONVERGED] = self._converged(ledger, lock)
            timings = self._timings(ledger, lock, restarts)
            with lock:
                status = ledger.status()  # as the mix ended, before its removal
            diagnosis = self._diagnosis(ledger, lock, verdicts)
            self._remove(ledger, lock, watchers, trainjobs)
            with lock:
                verdicts.update({k: v for k, v in ledger.guard_verdicts(time.time()).items() if not v.ok})
        finally:
            pool.shutdown(wait=True)
            watchers.stop()
            for queue in reversed(queues):
                self.workspace.delete(queue)
        outcome = self._outcome(mix, ledger, verdicts, timings, begin, time.monotonic() - started)
        outcome.status, outcome.diagnosis = status, diagnosis
        progress.report(f"chaos mix {attempt}: {outcome.summary()}")
        return outcome

    def _drive(self, mix: ChaosMix, ledger: ChaosLedger, lock: threading.RLock, watchers: Feeds,
               trainjobs: dict[str, dict], restarts: list[tuple[Fault, float, Future[Restart]]],
               pool: ThreadPoolExecutor, begin: float) -> None:  # fmt: skip
        """Every step at its moment, then the settle; a violation or a mix that does not settle ends it early."""
        try:
            for moment, _, what, whom in steps(mix):
                self._hold_until(begin + moment * self.timeouts.scale, ledger, lock, watchers)
                now = time.time()
                if isinstance(whom, Fault):
                    with lock:
                        ledger.note(now, "", f"restart {whom.component}")
                        ledger.restarting(whom.component, now)
                    # Begun here, waited for in the pool: the next step meets the component restarting.
                    done = pool.submit(self.restarter.begin(whom.component))
                    done.add_done_callback(_told_back(ledger, lock))
                    restarts.append((whom, now, done))
                else:
                    with lock:
                        self._act(what, whom, ledger, now, trainjobs)
            self._settle(ledger, lock, watchers, restarts)
        except ConditionViolated:
            pass  # the ledger keeps the violation; the mix ends here
        except ConditionNotMet as stuck:
            ledger.note(time.time(), "", f"did not settle: {str(stuck).splitlines()[0]}")

    def _outcome(self, mix: ChaosMix, ledger: ChaosLedger, verdicts: dict[str, Verdict],
                 timings: list[RestartTiming], begin: float, seconds: float) -> Outcome:  # fmt: skip
        broken = {k: v for k, v in verdicts.items() if not v.ok}
        moments = [ledger.violated_at[k] for k in broken if k in ledger.violated_at]
        at = min(moments) if moments else None
        named = {g for g in ledger.gangs for v in broken.values() if g in v.explanation}
        window = EXCERPT_WINDOW * self.timeouts.scale
        excerpt = ledger.excerpt(named, at, window, origin=begin, scale=self.timeouts.scale) if broken else []
        violated_at = None if at is None else (at - begin) / self.timeouts.scale
        return Outcome(mix, verdicts, timings, excerpt, ledger.status(), seconds, violated_at)

    # ------------------------------------------------------------------------------------------------ steps
    def _act(self, what: str, workload: ChaosWorkload, ledger: ChaosLedger, now: float,
             trainjobs: dict[str, dict]) -> None:  # fmt: skip
        namespace, name = self.ctx.namespace, workload.name
        act = f"{what} TrainJob {name}"
        try:
            if what == "arrive":
                ledger.submitted(name, now)
                trainjob = ledger.mix.trainjob(self.ctx, workload, self.timeouts.scale)
                trainjobs[name] = self._through_webhooks(act, lambda: self.workspace.apply(trainjob))
            elif what == "delete":
                ledger.released(name, now, how="deleted by the suite")
                self._through_webhooks(act, lambda: self.kube.delete(kinds.TRAIN_JOB, name, namespace))
            elif what == "suspend":
                ledger.released(name, now, how="suspended by the suite")
                self._through_webhooks(act, lambda: suspend(self.kube, namespace, name, True))
            elif what == "resume":
                ledger.resumed(name, now)
                self._through_webhooks(act, lambda: suspend(self.kube, namespace, name, False))
        except (errors.NotFound, errors.Invalid, errors.Conflict, errors.Forbidden) as refused:
            ledger.note(now, name, f"{what} refused by the API server: {refused}")

    def _diagnosis(self, ledger: ChaosLedger, lock: threading.RLock, verdicts: dict[str, Verdict]) -> str:
        """The chain diagnosis of the gangs a violation names (the scale area's, :func:`suites.support.scale.
        diagnosed`), while their objects still exist; empty when nothing is violated or no gang is named."""
        broken = [v for v in verdicts.values() if not v.ok]
        with lock:
            about = [(name, gang.plan.pods) for name, gang in ledger.gangs.items()
                     if any(name in v.explanation for v in broken)]  # fmt: skip
        if not about:
            return ""
        explained = Observer(self.kube, self.ctx.namespace).explain(AssertionError("chain diagnosis"), about)
        return str(explained).removeprefix("chain diagnosis").strip()

    def _applied(self, obj: dict) -> dict:
        return self._through_webhooks(
            f"apply {obj['kind']} {obj['metadata']['name']}", lambda: self.workspace.apply(obj)
        )

    def _through_webhooks(self, what: str, call: Callable[[], T]) -> T:
        """``call``, retried while the API server answers that a webhook does not serve (5xx, refused): a restarted
        component serves its webhook a moment after its pod is Ready (seen on real kind: the queue-controller serves
        KAI's Queue validation), and the mix must not fail on what it restarted itself."""
        done: list[T] = []

        def attempt() -> Observation:
            done[:] = [call()]
            return Observation(True, f"{what}: done")

        eventually(attempt, what=what, timeout=self.timeouts("webhook"), failure=errors.WaitTimeout)
        return done[0]

    def _hold_until(self, moment: float, ledger: ChaosLedger, lock: threading.RLock, watchers: Feeds) -> None:
        """Judge the invariants until ``moment`` (the next step's): a violation ends the hold at once."""

        def probe() -> Observation:
            watchers.check()
            now = time.time()
            with lock:
                broken = [v for v in ledger.guard_verdicts(now).values() if not v.ok]
                status = ledger.status()
            if broken:
                raise ConditionViolated(f"chaos invariant violated: {broken[0]}")
            return Observation(now >= moment, f"{max(moment - now, 0):.1f}s to the next step; {status}")

        if moment > time.time():
            eventually(probe, what="the next step of the mix", timeout=moment - time.time() + self.timeouts("api"),
                       interval=min(0.5, max(self.quiet / 10, 0.001)))  # fmt: skip

    def _settle(self, ledger: ChaosLedger, lock: threading.RLock, watchers: Feeds,
                restarts: list[tuple[Fault, float, Future[Restart]]]) -> None:  # fmt: skip
        """After the last step: every restart back, then every active gang complete and quiet for the settle time."""
        for _, _, done in restarts:
            done.result()

        def probe() -> Observation:
            watchers.check()
            now = time.time()
            with lock:
                broken = [v for v in ledger.guard_verdicts(now).values() if not v.ok]
                if broken:
                    raise ConditionViolated(f"chaos invariant violated: {broken[0]}")
                verdict = ledger.settled(now, self.quiet)
            if not verdict.ok:
                return Observation(False, verdict.explanation)
            listed = self.kube.list(kinds.POD, self.ctx.namespace)
            with lock:  # settled on the watches' view: once that view has caught up with the cluster
                lag = ledger.lags(listed)
            return Observation(not lag, f"{verdict.explanation}; the watches lag behind: {', '.join(lag[:5])}"
                               if lag else verdict.explanation)  # fmt: skip

        eventually(probe, what="the mix settled after its last step", timeout=self.timeouts("schedule"),
                   interval=min(0.5, max(self.quiet / 10, 0.001)))  # fmt: skip

    def _converged(self, ledger: ChaosLedger, lock: threading.RLock) -> Verdict:
        """``fitting-gangs-bound`` once settled: no active gang waits while the idle GPUs would hold it."""
        free = idle_gpus(self.kube, self.layout)
        with lock:
            return chaos_sharing.fitting_gangs_bound(ledger.asking(), free, ledger.amounts(),
                                                     ledger.amounts(non_preemptible=True), ledger.queues)  # fmt: skip

    def _timings(self, ledger: ChaosLedger, lock: threading.RLock,
                 restarts: list[tuple[Fault, float, Future[Restart]]]) -> list[RestartTiming]:  # fmt: skip
        timings = []
        moments = sorted(at for _, at, _ in restarts)
        for fault, at, done in restarts:
            restart = done.result() if done.done() else None
            later = [m for m in moments if m > at]
            start = restart.ready_at if restart and restart.ready_at else at
            with lock:
                quiet = ledger.quiet_after(start, self.quiet, later[0] if later else time.time())
            timings.append(RestartTiming(fault, restart, None if quiet is None else quiet - at))
        for fault in ledger.mix.faults:
            if not any(t.fault is fault for t in timings):
                timings.append(RestartTiming(fault, None))
        return timings

    def _remove(self, ledger: ChaosLedger, lock: threading.RLock, watchers: Feeds, trainjobs: dict[str, dict]) -> None:
        """Delete the mix's TrainJobs, then wait until their pods are gone and no BindRequest or reservation pod of
        theirs is left, judging ``no-leftover-bindrequest`` and ``no-leftover-reservation`` all the while (either
        outliving its pod past its grace fires it)."""
        for name in trainjobs:
            self.kube.delete(kinds.TRAIN_JOB, name, self.ctx.namespace)
            with lock:
                ledger.released(name, time.time(), how="removed at the end of the mix")

        def probe() -> Observation:
            watchers.check()
            now = time.time()
            with lock:
                for leftover in (ledger.leftover_bindrequests(now), ledger.reservations.verdict(now)):
                    if not leftover.ok:
                        raise ConditionViolated(str(leftover))
                pods, requests = len(ledger.live_pods), len(ledger.bindrequests)
                reserved = len(ledger.reservations.left())
            return Observation(pods == requests == reserved == 0, f"{pods} pod(s), {requests} BindRequest(s), "
                               f"{reserved} reservation pod(s) left")  # fmt: skip

        # Three times the longer of the two graces it judges (gc: BindRequests; api: reservation pods), so a leftover
        # is judged past its grace, with room for a busy machine, before the wait gives up; 1.5 × gc alone was no
        # longer than the reservation pods' grace where gc is set short.
        longest = max(self.timeouts("gc"), self.timeouts("api"))
        with contextlib.suppress(ConditionViolated):  # recorded in the ledger
            eventually(probe, what="the mix's pods, BindRequests and reservation pods gone", timeout=3 * longest,
                       interval=min(0.5, max(self.quiet / 10, 0.001)))  # fmt: skip


def _told_back(ledger: ChaosLedger, lock: threading.RLock) -> Callable[[Future[Restart]], None]:
    def told(done: Future[Restart]) -> None:
        restart = None if done.cancelled() or done.exception() is not None else done.result()
        if restart is not None and restart.ready_at is not None:
            with lock:
                ledger.back(restart.component, restart.ready_at)

    return told


def _fed(feed, lock: threading.RLock):
    def handle(event: WatchEvent, observed_at: float) -> None:
        with lock:
            feed(event.type, event.obj, observed_at)

    return handle


__all__ = ["ChaosQueue", "MixRunner", "Outcome", "RestartTiming", "renamed", "steps"]
