"""Simulated controllers on :class:`~tests.fakes.kube.FakeKube`: Trainer, JobSet, the Job controller, KAI's
podgrouper and scheduler, the default scheduler and the kubelet — reduced to what the suites observe.

They run as a FakeKube reactor: before every API call the suite makes, the controllers reconcile until nothing
changes, so a suite case runs end to end, offline, in milliseconds. A case that observes by watch (the scale bursts)
makes no API call while it waits: for it they reconcile in a thread of their own (:meth:`run_in_background`). The behaviour follows the upstream facts the
suites assert (skip-top-owner metadata merge, ``pg-<jobset>-<uid>`` owned by the JobSet, SubGroups, queue and
priority precedence, all-or-nothing gangs, whole-gang preemption with ``Evict`` events; elastic gangs and the
placement strategy in ``kai.elastic`` and ``kai.placement``). :class:`Faults` switches
on misbehaviour, to show that a suite case then fails with a readable message. Each controller lives in its own
module (``trainer_jobset``, ``job_controller``, ``kai.scheduler``, ``binder``, ``kubelet``; the areas ``kai.topology`` and
``kai.sharing`` as mixins over ``kai.scheduler`` and ``binder``) over the shared ground of
``simulation``; ``stack`` publishes what the stack looks like from outside (component Deployments, the
podgrouper's RBAC).

The kubelet runs right after the scheduler, so a pod is Running as soon as it is bound; an evicted pod ends
``Succeeded`` or ``Failed`` by its exit codes before the Job controller replaces it (on a real cluster the kubelet
ends a deleted pod within seconds, the Job controller replaces it 10 s later at the earliest).

KAI's areas beyond the core live in mixins placed before :class:`Kai`, in the order of KAI's evicting actions
(``kai.consolidation``: consolidation, min-runtime, preemption delay; ``kai.fairness``: fair share and reclaim
across sibling queues), each overriding the core's named extension points.

What ends a workload (its own exit, a JobSet restart, suspension) and what KAI then releases (PodGroup and Queue
status, stale-gang eviction) are ``kubelet``, ``job_controller``, ``jobset_lifecycle`` and ``kai.lifecycle``.

Restartable components (opt in: :meth:`SimulatedControllers.restartable`): every component as a Deployment with a
pod the suite may delete, down until its replacement is Ready, then rebuilt from the API (``restarts``); the
``restart_*`` faults that act only after a restart are ``restart_faults``.

Not simulated: events other than the ones the suites read, image pulls.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection

from tests.fakes import stack
from tests.fakes.binder import Binder
from tests.fakes.job_controller import JobController
from tests.fakes.kai.consolidation import KaiConsolidation
from tests.fakes.kai.elastic import KaiElastic
from tests.fakes.kai.fairness import KaiFairness
from tests.fakes.kai.lifecycle import KaiLifecycle
from tests.fakes.kai.placement import KaiPlacement
from tests.fakes.kai.scheduler import Kai
from tests.fakes.kai.sharing import KaiSharing
from tests.fakes.kai.topology import KaiTopology
from tests.fakes.kube import Call, FakeKube
from tests.fakes.kubelet import Kubelet
from tests.fakes.restart_faults import RestartFaults
from tests.fakes.restarts import DEFAULT_DOWNTIME
from tests.fakes.simulation import (
    BINDER,
    JOBSET_CONTROLLER,
    PODGROUPER,
    SCHEDULER,
    TRAINER_CONTROLLER,
    Faults,
    Simulation,
)
from tests.fakes.trainer_jobset import TrainerAndJobSet

__all__ = ["Faults", "SimulatedControllers"]

#: Rounds of every controller per API call: enough for TrainJob → JobSet → Job → Pod → PodGroup → bound → Running,
#: and for eviction → ended → counted → replaced, in one call.
RECONCILE_ROUNDS = 10


class SimulatedControllers(
    RestartFaults,
    TrainerAndJobSet,
    JobController,
    KaiSharing,
    KaiTopology,
    Binder,
    KaiElastic,
    KaiPlacement,
    KaiConsolidation,
    KaiFairness,
    KaiLifecycle,
    Kai,
    Kubelet,
    Simulation,
):
    def __post_init__(self) -> None:
        super().__post_init__()
        self._busy = False

    def install(self, *, publish: bool = True) -> SimulatedControllers:
        """Start reconciling on every API call; ``publish`` also puts up KAI's Deployments and RBAC (tests/fakes/stack.py)
        — off where the caller models the installation itself (tests/fakes/installation.py)."""
        if publish:
            stack.publish(self.fake, self.faults, self.kai_version)
        self.fake.reactors.append(self._react)
        return self

    def restartable(self, downtime: float = DEFAULT_DOWNTIME) -> SimulatedControllers:
        """Run every component as a Deployment with one pod, to be restarted by deleting it (tests/fakes/restarts.py):
        KAI's five in ``kai-scheduler``, JobSet's in ``jobset-system``, Trainer's in ``kubeflow-system``. A deleted
        component is down for ``downtime`` seconds of the wall clock, then back with a new pod and what it keeps in
        memory rebuilt. Off by default: its pods would outlive a flow's workloads (the background thread's stop and
        :meth:`remove_components` take them away)."""
        self._publish_components(downtime)
        return self

    def run_in_background(
        self, *, publish: bool = True, busy: float = 0.02, idle: float = 0.005, catch_up: bool | Collection[str] = False
    ) -> Callable[[], None]:
        """Reconcile in a thread of its own, round after round, as real controllers do, instead of before every API
        call: for cases that observe by watch (scale bursts), which make no API call while they wait. Each round is
        one pass of every controller (one KAI scheduling cycle) under the API server's lock; ``busy`` seconds pass
        after a round that changed something (the suite's requests get in, and a burst of them meets the next round
        together, as API requests meet a controller's work queue), ``idle`` after one that changed nothing. Returns
        the function that stops the thread (and takes the pods of :meth:`restartable` components away).

        ``catch_up``: the controllers also reconcile until nothing changes before every API call of the suite, as
        :meth:`install` makes them, so each call meets a cluster that has done everything its earlier writes asked,
        however far the thread fell behind on a busy machine (a chaos mix deleting a TrainJob a moment after its
        arrival deletes a bound gang, not one the thread never got to). A collection of operations (``("list",)``)
        catches up before those only: a burst's writes still meet the thread's rounds together, and whatever the suite
        lists to judge a settled state is what the controllers leave once they have nothing left to do."""
        if publish:
            stack.publish(self.fake, self.faults, self.kai_version)
        if catch_up:
            only = None if catch_up is True else frozenset(catch_up)

            def react(fake: FakeKube, call: Call) -> None:
                if only is None or call.operation in only:
                    self._react(fake, call)

            self.fake.reactors.append(react)
        stopping = threading.Event()

        def loop() -> None:
            while not stopping.is_set():
                with self.fake.lock:  # what the suite's threads change, they change by API calls, seen by caches
                    changed = self._round()
                stopping.wait(busy if changed else idle)  # let the suite's threads in between rounds

        thread = threading.Thread(target=loop, name="simulated-controllers", daemon=True)
        thread.start()

        def stop() -> None:
            stopping.set()
            thread.join(30)
            self.remove_components()

        return stop

    def _react(self, fake: FakeKube, call: Call) -> None:
        if self._busy:
            return
        self._busy = True
        try:
            for _ in range(RECONCILE_ROUNDS):
                if not self._round():
                    break
        finally:
            self._busy = False

    def _round(self) -> bool:
        """One pass of every controller that is up; whether any changed something. The podgroup- and
        queue-controller share ``kai_status``, which asks for each."""
        changed = self._components_round()
        steps = ((TRAINER_CONTROLLER, self.trainer), (JOBSET_CONTROLLER, self.jobsets), (None, self.jobs),
                 (PODGROUPER, self.podgrouper), (None, self.default_scheduler), (SCHEDULER, self.scheduler),
                 (BINDER, self.binder), (None, self.kubelet), (None, self.kai_status))  # fmt: skip
        return any([step() for component, step in steps if component is None or self._acts(component)]) or changed
