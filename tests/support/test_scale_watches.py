"""What a scale burst watches in its namespace (suites/support/scale/__init__.py ``Burst``): pods, PodGroups and
BindRequests, each fed to the ledger, and a list of both pods and BindRequests when an overdue gang is judged."""

from __future__ import annotations

import pytest

from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.waits import Observation, TimeoutPolicy, eventually
from kai_conformance.suites.support import scale
from kai_conformance.suites.support.cases.scale import BurstPlan, PlannedGang, PlannedQueue
from tests import builders
from tests.fakes.kube import FakeKube

TIMEOUTS = TimeoutPolicy(scale=0.1)
PLAN = BurstPlan((PlannedGang("g0", 2, 1, "q", "train"),), (PlannedQueue("q", quota=-1, limit=-1),), 16)


def bindrequest(pod: str, phase: str = "Pending") -> dict:
    return {
        "apiVersion": kinds.BIND_REQUEST.api_version, "kind": kinds.BIND_REQUEST.kind,
        "metadata": {"name": f"{pod}-request", "namespace": builders.NS},
        "spec": {"podName": pod, "selectedNode": "node-a"}, "status": {"phase": phase},
    }  # fmt: skip


def test_a_kai_burst_feeds_its_namespaces_bindrequests_to_the_ledger_and_a_gang_being_bound_is_not_partial(
    fake: FakeKube,
) -> None:
    with scale.Burst(fake, builders.NS, PLAN, TIMEOUTS) as burst:
        fake.put(builders.pod("g0-0", workload="g0", node="node-a"))
        fake.put(builders.pod("g0-1", workload="g0"))
        fake.put(bindrequest("g0-1"))

        def seen() -> Observation:
            with burst.lock:
                return Observation("g0-1" in burst.ledger.requested and burst.ledger.gangs["g0"].bound == 1, "")

        eventually(seen, what="the ledger to have the pods and the BindRequest", timeout=5)
        with burst.lock:
            assert burst.ledger.partial.binding == {"g0"}
            allowance = burst.ledger.partial.bind_allowance
        assert allowance == scale.bind_allowance(TIMEOUTS) == TIMEOUTS("schedule")
        assert burst.guards()["gang-never-partial"].ok


def test_a_burst_of_the_default_scheduler_watches_no_bindrequest(fake: FakeKube) -> None:
    with scale.Burst(fake, builders.NS, PLAN, TIMEOUTS, kai=False) as burst:
        burst.watchers[kinds.POD]
        with pytest.raises(KeyError):
            burst.watchers[kinds.BIND_REQUEST]
