"""Simulated controllers on :class:`~tests.fakes.kube.FakeKube`: Trainer, JobSet, the Job controller, KAI's
podgrouper and scheduler, and the default scheduler — reduced to what the suites observe.

They run as a FakeKube reactor: before every API call the suite makes, the controllers reconcile until nothing
changes, so a suite case runs end to end, offline, in milliseconds. The behaviour follows the upstream facts the
suites assert (skip-top-owner metadata merge, ``pg-<jobset>-<uid>`` owned by the JobSet, SubGroups, queue and
priority precedence, all-or-nothing gangs, whole-gang preemption with ``Evict`` events). :class:`Faults` switches
on misbehaviour, to show that a suite case then fails with a readable message. Each controller lives in its own
module (``trainer_jobset``, ``job_controller``, ``kai``, ``binder``) over the shared ground of ``simulation``;
``stack`` publishes what the stack looks like from outside (component Deployments, the podgrouper's RBAC).

Not simulated: reclaim across queues, Job back-off delays, events other than the ones the suites read.
"""

from __future__ import annotations

from tests.fakes import stack
from tests.fakes.binder import Binder
from tests.fakes.job_controller import JobController
from tests.fakes.kai import Kai
from tests.fakes.kube import Call, FakeKube
from tests.fakes.simulation import Faults, Simulation
from tests.fakes.trainer_jobset import TrainerAndJobSet

__all__ = ["Faults", "SimulatedControllers"]


class SimulatedControllers(TrainerAndJobSet, JobController, Binder, Kai, Simulation):
    def __post_init__(self) -> None:
        super().__post_init__()
        self._busy = False

    def install(self) -> SimulatedControllers:
        stack.publish(self.fake, self.faults, self.kai_version)
        self.fake.reactors.append(self._react)
        return self

    def _react(self, fake: FakeKube, call: Call) -> None:
        if self._busy:
            return
        self._busy = True
        try:
            for _ in range(6):
                if not any(
                    [self.trainer(), self.jobsets(), self.jobs(), self.podgrouper(), self.scheduler(), self.binder()]
                ):
                    break
        finally:
            self._busy = False
