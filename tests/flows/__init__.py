"""The harness of the flow self-tests: suite cases driven end to end against FakeKube with simulated controllers
(tests/fakes/controllers.py). The ``flow`` fixture (tests/conftest.py) builds one simulated cluster per call.

Each flow calls a real suite test function with a real Workspace, Observer and record, so it proves the
choreography (what is applied when, what is waited for) and, with a fault injected, that the failure a user would
see names what went wrong. Waits poll every millisecond under a tiny timeout scale.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from kai_conformance.clusters.catalog import Catalog
from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.clusters.suite_stack import stack_manifests
from kai_conformance.clusters.topology import load_topology
from kai_conformance.fixtures import waits
from kai_conformance.fixtures import workspace as workspace_module
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.removal import cleanup
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.fixtures.waits import TimeoutPolicy
from kai_conformance.fixtures.workspace import Workspace, prepare
from kai_conformance.reports.records import CaseRecord, CaseRecorder
from kai_conformance.suites.support.expectations import Expectations, expectations_for
from kai_conformance.suites.support.observe import Observer
from tests.fakes.controllers import Faults, SimulatedControllers
from tests.fakes.kube import FakeKube

CATALOG = Catalog.load()
COMBINATION = CATALOG.combination(CATALOG.defaults["combination"])
LAYOUT = load_topology("pr-gate").layout("kai-conformance")
IMAGE = CATALOG.defaults["workload_image"]
RUN = "flow"
NAMESPACE = "kc-flow"
EXPECT = expectations_for(COMBINATION)


class StepClock:
    """Cluster time that moves only when the observer looks: each snapshot starts ``step`` seconds after the last.

    Windows of tens of seconds (min-runtime, preemption delay) pass in a few dozen snapshots, and the simulated
    cluster never changes between a snapshot's start (its ``taken_at``) and its last API call, as a real one barely
    does in the milliseconds a snapshot takes: whatever the machine's load, a check timed on ``taken_at`` sees what
    the cluster did at that time. Given to FakeKube (timestamps, the controllers' decisions: ``clock``) and to the
    observer (``tick``)."""

    def __init__(self, step: float) -> None:
        self.step, self.now = step, dt.datetime.now(dt.timezone.utc)

    def __call__(self) -> dt.datetime:
        return self.now

    def tick(self) -> float:
        self.now += dt.timedelta(seconds=self.step)
        return self.now.timestamp()


@dataclass
class Harness:
    fake: FakeKube
    workspace: Workspace
    ctx: RenderContext
    observer: Observer
    expect: Expectations
    timeouts: TimeoutPolicy
    record: CaseRecorder
    controllers: SimulatedControllers | None = None

    def args(self) -> dict:
        """The fixtures a suite test takes, by name."""
        return {"ctx": self.ctx, "workspace": self.workspace, "observer": self.observer, "expect": self.expect,
                "timeouts": self.timeouts, "record": self.record}  # fmt: skip

    def verdicts(self) -> dict[str, bool]:
        return {v.detector: v.ok for v in self.record.record.verdicts}


def flow_fixture(fast_timeouts: TimeoutPolicy, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Harness]]:
    """Builds a cluster of simulated controllers; at the end the workspace must clean up everything it made."""
    made: list[tuple[Harness, cleanup.CleanupStack]] = []
    # The simulated cluster answers at once: let the workspace's removal waits poll as fast as the observer's.
    monkeypatch.setattr(workspace_module, "eventually", functools.partial(waits.eventually, interval=0.001))

    def make(
        faults: Faults | None = None,
        layout: GpuLayout = LAYOUT,
        clock: StepClock | None = None,
        *,
        background: bool = False,
        timeouts: TimeoutPolicy | None = None,
        restartable: float | None = None,
        catch_up: bool | tuple[str, ...] = False,
    ) -> Harness:
        """``clock``: cluster time for the controllers and the observer (default: the wall clock). ``background``:
        the controllers reconcile in a thread of their own instead of before every API call, for cases that observe
        by watch; ``timeouts``: the policy of that harness (default: the fast one); ``restartable``: the components
        run as Deployments whose deleted pods come back after that many seconds (tests/fakes/restarts.py); ``catch_up``:
        the background controllers also catch up before each API call (:meth:`SimulatedControllers.run_in_background`)."""
        fake = FakeKube(clock=clock) if clock else FakeKube()
        for obj in stack_manifests(IMAGE):
            fake.apply(prepare(obj, RUN, "", ""))
        controllers = SimulatedControllers(fake, layout, COMBINATION.kai.version, faults or Faults())
        if restartable is not None:  # the components as Deployments whose pods a chaos run deletes
            controllers.restartable(restartable)
        if background:
            stops.append(controllers.run_in_background(catch_up=catch_up))
        else:
            controllers.install()
        policy = timeouts or fast_timeouts
        stack = cleanup.open_stack("flow")
        workspace = Workspace(fake, RUN, "suites/test_flow.py::case", NAMESPACE, policy, stack)
        workspace.create_namespace()
        harness = Harness(
            fake,
            workspace,
            RenderContext(NAMESPACE, COMBINATION, layout, RUN, IMAGE),
            Observer(fake, NAMESPACE, interval=0.001, kai=EXPECT.kai, **({"clock": clock.tick} if clock else {})),
            EXPECT,
            policy,
            CaseRecorder(CaseRecord(nodeid="flow")),
            controllers,
        )
        made.append((harness, stack))
        return harness

    stops: list[Callable[[], None]] = []
    yield make
    for stop in stops:
        stop()
    for harness, stack in made:
        assert cleanup.close_stack(stack) == []
        assert harness.fake.objects(kinds.NAMESPACE) == []
        assert [q["metadata"]["name"] for q in harness.fake.objects(kinds.QUEUE)] == ["kai-conformance"]
        assert harness.fake.objects(kinds.POD) == []
