"""The scale detectors and the burst ledger on hand-made watch timelines: each detector passes a conforming run and
fires on a violating one; the ledger counts binds, evictions and fill as the report needs them."""

from __future__ import annotations

import copy
import json

import pytest

from kai_conformance.reports import generate
from kai_conformance.reports.across_runs import compare
from kai_conformance.reports.model import RunRecords
from kai_conformance.reports.records import CaseRecord, CaseRecorder
from kai_conformance.reports.runinfo import RunInfo
from kai_conformance.reports.sections.metrics import collect
from kai_conformance.suites.support.cases.scale import BurstPlan, PlannedGang, PlannedQueue
from kai_conformance.suites.support.detectors import scale as detect
from kai_conformance.suites.support.scale.ledger import BurstLedger
from tests import builders

GRACE = 5.0
BIND_ALLOWANCE = 120.0


class Run:
    """A burst's watch timeline, told to a ledger event by event (pods keep their uid across events)."""

    def __init__(self, gangs: list[PlannedGang], queues: list[PlannedQueue], cluster: int = 64) -> None:
        self.plan = BurstPlan(tuple(gangs), tuple(queues), cluster)
        self.ledger = BurstLedger(self.plan, GRACE, bind_allowance=BIND_ALLOWANCE)
        self.pods: dict[str, dict] = {}
        self.requests: dict[str, dict] = {}

    def submit(self, at: float = 0.0) -> None:
        for gang in self.plan.gangs:
            self.ledger.submitted(gang.name, at)

    def create(self, gang: str, at: float, *, podgroup: bool = True) -> None:
        planned = next(g for g in self.plan.gangs if g.name == gang)
        for index in range(planned.pods):
            pod = builders.pod(f"{gang}-{index}", workload=gang, gpus=planned.gpus)
            pod["metadata"]["uid"] = f"{gang}-{index}-{len(self.pods)}"
            self.pods[f"{gang}-{index}"] = pod
            self.ledger.pod("ADDED", copy.deepcopy(pod), at)
        if podgroup:
            js = builders.jobset(name=gang)
            self.ledger.podgroup("ADDED", builders.podgroup(js), at)

    def bind(self, name: str, at: float, node: str = "node-a") -> None:
        self.pods[name]["spec"]["nodeName"] = node
        self.ledger.pod("MODIFIED", copy.deepcopy(self.pods[name]), at)

    def request(self, name: str, at: float, node: str = "node-a") -> None:
        """KAI's BindRequest for pod ``name`` (Pending: the binder has yet to bind it)."""
        request = {"apiVersion": "scheduling.run.ai/v1alpha2", "kind": "BindRequest",
                   "metadata": {"name": name, "namespace": "ns", "uid": f"br-{name}"},
                   "spec": {"podName": name, "selectedNode": node}, "status": {"phase": "Pending"}}  # fmt: skip
        self.requests[name] = request
        self.ledger.bindrequest("ADDED", copy.deepcopy(request), at)

    def request_all(self, gang: str, at: float) -> None:
        for name in [n for n in self.pods if n.startswith(f"{gang}-")]:
            self.request(name, at)

    def finish(self, name: str, phase: str, at: float) -> None:
        self.requests[name]["status"]["phase"] = phase
        self.ledger.bindrequest("MODIFIED", copy.deepcopy(self.requests[name]), at)

    def bind_all(self, gang: str, at: float, node: str = "node-a") -> None:
        for name in [n for n in self.pods if n.startswith(f"{gang}-")]:
            self.bind(name, at, node)

    def evict(self, name: str, at: float) -> None:
        self.pods[name]["metadata"]["deletionTimestamp"] = builders.at(30)
        self.ledger.pod("MODIFIED", copy.deepcopy(self.pods[name]), at)
        self.pods[name]["status"]["phase"] = "Failed"
        self.ledger.pod("MODIFIED", copy.deepcopy(self.pods[name]), at)
        self.ledger.pod("DELETED", copy.deepcopy(self.pods.pop(name)), at)


def gangs(*shapes: tuple[int, int], queue: str = "q", priority: str = "train") -> list[PlannedGang]:
    return [PlannedGang(f"g{i}", pods, gpus, queue, priority) for i, (pods, gpus) in enumerate(shapes)]


QUEUE = PlannedQueue("q", quota=8, limit=8)


# ------------------------------------------------------------------------------------------- gang-never-partial
def test_partial_gangs_fires_only_after_the_grace_and_names_the_gang() -> None:
    watch = detect.PartialGangs(GRACE)
    watch.update("g0", 1, 4, at=10.0)
    assert watch.check(14.0).ok
    watch.update("g0", 2, 4, at=14.0)  # still partial: the clock runs from the first partial moment
    verdict = watch.check(15.5)
    assert not verdict.ok and verdict.detector == "gang-never-partial"
    assert "gang g0 partially bound (2 of 4 pods bound) for 5.5s" in verdict.explanation
    watch.update("g0", 4, 4, at=16.0)
    assert not watch.check(17.0).ok, "a violation that happened stays one"


def test_a_gang_bound_or_evicted_pod_by_pod_within_the_grace_is_never_partial() -> None:
    run = Run(gangs((4, 1)), [PlannedQueue("q", quota=-1, limit=-1)])
    run.submit()
    run.create("g0", 0.5)
    for index in range(4):
        run.bind(f"g0-{index}", 1.0 + index)
    for index in range(4):
        run.evict(f"g0-{index}", 10.0 + index)
    verdict = run.ledger.guards(20.0)
    assert verdict.ok, verdict
    assert "the longest 3.0s" in verdict.explanation


def test_the_ledger_fires_on_a_gang_left_partial_and_at_a_later_check_without_further_events() -> None:
    run = Run(gangs((4, 1), (2, 1)), [PlannedQueue("q", quota=-1, limit=-1)])
    run.submit()
    run.create("g0", 0.0)
    run.create("g1", 0.0)
    run.bind("g0-0", 1.0)
    run.bind("g0-1", 1.0)
    run.bind_all("g1", 2.0)
    assert run.ledger.guards(5.9).ok
    verdict = run.ledger.guards(6.5)
    assert not verdict.ok and "gang g0 partially bound (2 of 4 pods bound) for 5.5s" in verdict.explanation


def test_a_gang_kai_placed_whole_may_take_the_binders_pace_to_bind_but_not_a_stalled_binder() -> None:
    """Real kind, 300 fake nodes (2026-11-27): a 16-pod gang KAI placed whole took 5.1 s from its first bind to its
    last, the binder binding pod by pod behind every other gang. Its pods being bound (a Pending BindRequest each) make
    it *binding*: judged against the bind allowance from the binder's last bind, so a binder that binds nothing more
    for that long fires."""
    run = Run(gangs((4, 1)), [PlannedQueue("q", quota=-1, limit=-1)])
    run.submit()
    run.create("g0", 0.0)
    run.request_all("g0", 0.5)
    run.bind("g0-0", 1.0)
    run.bind("g0-1", 4.0)
    verdict = run.ledger.guards(30.0)
    assert verdict.ok, verdict
    run.bind("g0-2", 31.0)
    assert run.ledger.guards(31.0 + BIND_ALLOWANCE).ok
    verdict = run.ledger.guards(31.0 + BIND_ALLOWANCE + 1.5)
    assert not verdict.ok
    assert ("gang g0 partially bound (3 of 4 pods bound, the other 1 being bound) for 151.5s, more than the 120s the "
            "binder may go without binding any pod while a gang KAI placed whole is part bound (its last bind 121.5s "
            "ago)") in verdict.explanation  # fmt: skip


def test_a_gang_part_bound_for_minutes_while_the_binder_binds_other_gangs_is_not_partial() -> None:
    """Real kind, 1,000 fake nodes (2026-11-27): the binder bound 2–5 pods/s of 3,384, every gang's in one queue, and a
    16-pod gang KAI placed whole stayed part bound for minutes. As long as the binder binds, that is its pace."""
    run = Run(gangs((4, 1), (64, 1)), [PlannedQueue("q", quota=-1, limit=-1)], cluster=128)
    run.submit()
    run.create("g0", 0.0)
    run.create("g1", 0.0)
    run.request_all("g0", 0.5)
    run.request_all("g1", 0.5)
    run.bind("g0-0", 1.0)
    for index in range(64):
        run.bind(f"g1-{index}", 2.0 + 5 * index)  # one bind every 5 s, for 320 s
    assert run.ledger.guards(320.0).ok
    for index in range(1, 4):
        run.bind(f"g0-{index}", 330.0)
    verdict = run.ledger.guards(400.0)
    assert verdict.ok and "the longest 329.0s" in verdict.explanation, verdict


def test_a_gang_binding_within_the_allowance_never_fires_and_its_moment_is_counted() -> None:
    run = Run(gangs((4, 1)), [PlannedQueue("q", quota=-1, limit=-1)])
    run.submit()
    run.create("g0", 0.0)
    run.request_all("g0", 0.5)
    for index in range(4):
        run.bind(f"g0-{index}", 1.0 + 3 * index)  # 9 s from the first bind to the last
    verdict = run.ledger.guards(60.0)
    assert verdict.ok and "the longest 9.0s" in verdict.explanation, verdict


@pytest.mark.parametrize("how", ["no-bindrequest", "bindrequest-failed", "bindrequest-deleted"])
def test_pods_of_a_part_bound_gang_that_nothing_is_binding_fire_after_the_grace(how: str) -> None:
    """Only a BindRequest the binder has not finished makes a pod *being bound*: without one, after a Failed one or
    once it is gone, the gang is partial and gets the grace, not the allowance."""
    run = Run(gangs((4, 1)), [PlannedQueue("q", quota=-1, limit=-1)])
    run.submit()
    run.create("g0", 0.0)
    for index in range(2):
        run.request(f"g0-{index}", 0.5)
        run.bind(f"g0-{index}", 1.0)
    if how != "no-bindrequest":
        run.request_all("g0", 1.0)
        for index in (2, 3):
            if how == "bindrequest-failed":
                run.finish(f"g0-{index}", "Failed", 2.0)
            else:
                run.ledger.bindrequest("DELETED", copy.deepcopy(run.requests[f"g0-{index}"]), 2.0)
    verdict = run.ledger.guards(6.5)
    assert not verdict.ok  # partial since its first pod was placed: the BindRequest at 0.5 s
    assert (
        "gang g0 partially bound (2 of 4 pods bound) for 6.0s, more than the 5s a gang may take" in verdict.explanation
    )


def test_kai_placing_part_of_a_gang_fires_even_before_any_pod_is_bound() -> None:
    run = Run(gangs((4, 1)), [PlannedQueue("q", quota=-1, limit=-1)])
    run.submit()
    run.create("g0", 0.0)
    run.request("g0-0", 1.0)
    run.request("g0-1", 1.0)
    assert run.ledger.guards(5.9).ok
    verdict = run.ledger.guards(6.5)
    assert not verdict.ok and "(0 of 4 pods bound, 2 being bound) for 5.5s" in verdict.explanation


def test_a_gang_placed_whole_with_no_pod_bound_yet_is_not_partial() -> None:
    """Nothing of it runs: a binder that binds nothing at all is a stalled burst, which the stall limit ends."""
    run = Run(gangs((4, 1)), [PlannedQueue("q", quota=-1, limit=-1)])
    run.submit()
    run.create("g0", 0.0)
    run.request_all("g0", 1.0)
    verdict = run.ledger.guards(BIND_ALLOWANCE * 2)
    assert verdict.ok and "the longest 0.0s; 0 partial now" in verdict.explanation, verdict


def test_a_bindrequest_seen_before_its_pod_counts_once_the_pod_is_seen() -> None:
    """The pods and the BindRequests come by two watches, in no order between them."""
    run = Run(gangs((2, 1)), [PlannedQueue("q", quota=-1, limit=-1)])
    run.submit()
    planned = run.plan.gangs[0]
    first = builders.pod("g0-0", workload="g0", gpus=planned.gpus)
    first["metadata"]["uid"] = "g0-0-uid"
    run.pods["g0-0"] = first
    run.ledger.pod("ADDED", copy.deepcopy(first), 0.0)
    run.request("g0-0", 0.5)
    run.request("g0-1", 0.5)  # its pod is not seen yet
    run.bind("g0-0", 1.0)
    second = builders.pod("g0-1", workload="g0", gpus=planned.gpus)
    second["metadata"]["uid"] = "g0-1-uid"
    run.pods["g0-1"] = second
    run.ledger.pod("ADDED", copy.deepcopy(second), 1.2)
    assert run.ledger.guards(30.0).ok


def test_a_binding_gang_whose_bindrequests_the_watch_has_not_delivered_lags() -> None:
    """A list of the BindRequests decides too: a gang whose pods the watch of BindRequests has not told of yet is
    not judged on the grace until that watch catches up."""
    run = Run(gangs((2, 1), (2, 1)), [PlannedQueue("q", quota=-1, limit=-1)])
    run.submit()
    run.create("g0", 0.0)
    run.create("g1", 0.0)
    run.bind("g0-0", 1.0)  # no BindRequest delivered yet for either gang
    run.bind("g1-0", 1.0)
    listed = copy.deepcopy(list(run.pods.values()))
    requests = [{"metadata": {"name": n, "uid": f"br-{n}"}, "spec": {"podName": n}, "status": {"phase": "Pending"}}
                for n in ("g0-1",)]  # fmt: skip
    overdue = run.ledger.partial.overdue(10.0)
    assert overdue == ["g0", "g1"]
    assert run.ledger.lagging_gangs(overdue, listed, requests) == {"g0"}
    assert run.ledger.lagging_gangs(overdue, listed, None) == set()


# ---------------------------------------------------------------------------------------------- queue bounds
def test_a_partial_gang_whose_watch_lags_is_judged_only_once_a_list_agrees_it_is_partial() -> None:
    """On a busy machine the watch events that complete a gang can be read well after the one that made it partial:
    the gang looks partial past the grace though the cluster bound it whole at once. A list of the cluster decides:
    a gang it shows otherwise than the watches did is not judged yet; one it shows as partial fires, as before."""
    run = Run(gangs((4, 1), (2, 1)), [PlannedQueue("q", quota=-1, limit=-1)])
    run.submit()
    run.create("g0", 0.0)
    run.create("g1", 0.0)
    run.bind("g0-0", 1.0)  # the watches told of one bind of g0 ...
    run.bind("g1-0", 1.0)  # ... and of one of g1
    listed = copy.deepcopy(list(run.pods.values()))
    for pod in listed:
        if pod["metadata"]["name"].startswith("g0-"):
            pod["spec"]["nodeName"] = "node-a"  # ... but the cluster has all of g0 bound: its events are not read yet
    overdue = run.ledger.partial.overdue(10.0)
    assert overdue == ["g0", "g1"]
    lagging = run.ledger.lagging_gangs(overdue, listed)
    assert lagging == {"g0"}  # g1 is listed exactly as the watches told it: really partial
    verdicts = run.ledger.guard_verdicts(10.0, lagging=lagging)
    assert not verdicts["gang-never-partial"].ok
    assert "gang g1 partially bound (1 of 2 pods bound) for 9.0s" in verdicts["gang-never-partial"].explanation
    lagging_only = Run(gangs((4, 1)), [PlannedQueue("q", quota=-1, limit=-1)])
    lagging_only.submit()
    lagging_only.create("g0", 0.0)
    lagging_only.bind("g0-0", 1.0)
    assert lagging_only.ledger.guards(10.0, lagging={"g0"}).ok  # not judged while its view lags
    assert not lagging_only.ledger.guards(10.5).ok  # the list agreed (nothing lags): it fires


def test_queue_limits_and_non_preemptible_quota_fire_naming_the_queue() -> None:
    bounds = [detect.QueueBounds("a", quota=4, limit=8), detect.QueueBounds("b", quota=-1, limit=-1)]
    assert detect.queue_limits({"a": 8, "b": 100}, bounds).ok
    over = detect.queue_limits({"a": 9}, bounds)
    assert not over.ok and "a holds 9 GPUs, limit 8" in over.explanation
    assert detect.non_preemptible_quota({"a": 4}, bounds).ok
    assert not detect.non_preemptible_quota({"a": 5}, bounds).ok


def test_the_ledger_keeps_the_first_limit_violation_after_the_queue_drops_below() -> None:
    run = Run(gangs((4, 2), (2, 1)), [QUEUE])
    run.submit()
    run.create("g0", 0.0)
    run.create("g1", 0.0)
    run.bind_all("g0", 1.0)  # 8 GPUs: at the limit
    assert run.ledger.guards(1.0).ok
    run.bind_all("g1", 2.0)  # 10 GPUs: over it
    for index in range(2):
        run.evict(f"g1-{index}", 2.5)
    verdict = run.ledger.guards(3.0)
    assert not verdict.ok and "q holds 9 GPUs, limit 8" in verdict.explanation


def test_non_preemptible_over_quota_and_evicted_fire_while_preemptible_evictions_are_only_counted() -> None:
    train = gangs((2, 1), queue="q", priority="train")
    build = [PlannedGang("b0", 4, 1, "q", "build"), PlannedGang("b1", 6, 1, "q", "build")]
    run = Run(train + build, [PlannedQueue("q", quota=8, limit=-1)])
    run.submit()
    for gang in ("g0", "b0", "b1"):
        run.create(gang, 0.0)
    run.bind_all("g0", 1.0)
    run.evict("g0-0", 2.0)
    run.evict("g0-1", 2.0)
    run.bind_all("b0", 3.0)
    assert run.ledger.guards(3.0).ok, "a preemptible gang may be evicted"
    assert run.ledger.gangs["g0"].times.evicted_pods == 2
    run.bind_all("b1", 4.0)  # up to 10 non-preemptible GPUs in a queue whose quota is 8
    quota = run.ledger.guards(4.0)
    assert not quota.ok and "q runs 9 non-preemptible GPUs, quota 8" in quota.explanation, "the first moment over"
    run.evict("b0-0", 5.0)
    evicted = run.ledger.guards(5.0)
    assert "non-preemptible gang(s) evicted: b0 (1 pod(s))" in evicted.explanation


# ------------------------------------------------------------------------------------------------- once settled
def test_fits_counts_per_node_room_the_queue_limit_and_the_non_preemptible_quota() -> None:
    queues = {"q": detect.QueueBounds("q", quota=4, limit=12)}
    free = {f"n{i}": 1 for i in range(8)}  # 8 idle GPUs, one per node
    spread = detect.Waiting("w", 1, 8, "q", preemptible=True)
    ones = detect.Waiting("o", 8, 1, "q", preemptible=True)
    assert not detect.fits(spread, free, {}, {}, queues), "no node has 8 GPUs free"
    assert detect.fits(ones, free, {}, {}, queues)
    assert not detect.fits(ones, free, {"q": 5}, {}, queues), "over the queue's limit"
    build = detect.Waiting("b", 2, 1, "q", preemptible=False)
    assert detect.fits(build, free, {"q": 5}, {"q": 2}, queues)
    assert not detect.fits(build, free, {"q": 5}, {"q": 3}, queues), "non-preemptible over quota"


def test_fitting_gangs_bound_fires_on_an_idle_gpu_a_waiting_gang_could_use() -> None:
    queues = {"q": detect.QueueBounds("q", quota=-1, limit=-1)}
    waiting = [detect.Waiting("big", 16, 1, "q", True), detect.Waiting("small", 2, 1, "q", True)]
    verdict = detect.fitting_gangs_bound(waiting, {"n0": 3, "n1": 0}, {}, {}, queues)
    assert not verdict.ok and "small (2×1 GPU, queue q: room for 3 such pods)" in verdict.explanation
    assert "the others do not: big (16×1 GPU, queue q): the idle GPUs hold 3 of its 16 pods of 1 GPU" in (
        verdict.explanation
    )
    assert detect.fitting_gangs_bound(waiting[:1], {"n0": 3}, {}, {}, queues).ok


def test_a_hold_of_fitting_gangs_bound_names_why_each_waiting_gang_does_not_fit() -> None:
    """A reader can check the judgement: each waiting gang with its queue's limit, its quota and the idle GPUs."""
    queues = {"q": detect.QueueBounds("q", quota=2, limit=6)}
    waiting = [detect.Waiting("over-limit", 2, 1, "q", True), detect.Waiting("build", 1, 1, "q", False),
               detect.Waiting("wide", 1, 4, "q", True)]  # fmt: skip
    verdict = detect.fitting_gangs_bound(waiting, {"n0": 3, "n1": 0}, {"q": 5}, {"q": 2}, queues)
    assert verdict.ok and not verdict.vacuous
    assert verdict.explanation == (
        "none of the 3 waiting gang(s) fits the 3 idle GPUs (n0 3) within its queue's limit and quota: "
        "over-limit (2×1 GPU, queue q): queue q holds 5 + 2 asked > limit 6; "
        "build (1×1 GPU, queue q, non-preemptible): non-preemptible: queue q runs 2 non-preemptible + 1 asked > quota 2; "
        "wide (1×4 GPU, queue q): queue q holds 5 + 4 asked > limit 6; the idle GPUs hold 0 of its 1 pods of 4 GPU"
    )


def test_fitting_gangs_bound_with_no_gang_waiting_holds_vacuously_and_says_so() -> None:
    verdict = detect.fitting_gangs_bound([], {"n0": 12}, {}, {}, {})
    assert verdict.ok and verdict.vacuous
    assert verdict.explanation.startswith("held vacuously, no placeable gang waited to be judged; 12 idle GPUs")
    assert str(verdict).startswith("[fitting-gangs-bound] ok (vacuous): held vacuously")
    waiting = [detect.Waiting("w", 1, 1, "q", True)]
    assert not detect.fitting_gangs_bound(waiting, {"n0": 12}, {}, {}, {}).ok  # the control: one gang, judged
    assert not detect.burst_bound(3, 4, ["g3"]).ok and detect.burst_bound(4, 4, []).ok


def test_settled_needs_every_gang_complete_with_its_podgroup_and_a_quiet_time() -> None:
    run = Run(gangs((2, 1), (2, 1)), [PlannedQueue("q", quota=-1, limit=-1)])
    run.submit(0.0)
    run.create("g0", 0.1)
    run.create("g1", 0.2, podgroup=False)
    not_yet = run.ledger.settled(10.0, quiet=1.0)
    assert not not_yet.ok and "g1 (2 of 2 pods, no PodGroup)" in not_yet.explanation
    run.ledger.podgroup("ADDED", builders.podgroup(builders.jobset(name="g1")), 0.3)
    run.bind_all("g0", 1.0)
    assert not run.ledger.settled(1.5, quiet=1.0).ok
    settled = run.ledger.settled(2.1, quiet=1.0)
    assert settled.ok and "2 of 4 pods bound, 1 of 2 gangs whole" in settled.explanation
    run.evict("g0-0", 3.0)
    assert "1 gang(s) not complete" in run.ledger.settled(9.0, quiet=1.0).explanation


# ----------------------------------------------------------------------------------------------- measurements
def test_gang_and_burst_times_feed_the_scale_metrics() -> None:
    run = Run(gangs((2, 1), (4, 2)), [PlannedQueue("q", quota=-1, limit=-1)], cluster=16)
    run.submit(100.0)
    run.create("g0", 100.5)
    run.create("g1", 101.0)
    run.bind("g0-0", 102.0)
    run.bind("g0-1", 102.5)
    run.bind_all("g1", 104.0)
    run.evict("g0-0", 105.0)
    run.create("g0", 106.0, podgroup=False)  # the Job recreates the index (as a new pod)
    run.bind("g0-0", 107.0)
    record = CaseRecord(nodeid="suites/test_scale.py::case")
    CaseRecorder(record).burst(run.ledger.burst_times("burst", settled=110.0), run.ledger.gang_times())
    again = CaseRecord.from_json(record.to_json())
    metrics = {m.name: m for m in collect([[again]])}
    assert metrics["scale_time_to_podgroup"].values == [0.5, 1.0]
    assert metrics["scale_time_to_bound"].by_gang_size == {2: [2.5], 4: [4.0]}
    assert metrics["scale_bind_spread"].values == [0.5, 0.0]
    burst = again.bursts[0]
    assert (burst.binds, burst.evicted_pods, burst.evicted_gangs, burst.held_gpus) == (7, 1, 1, 10)
    assert metrics["scale_time_to_fill"].values == [4.0], "10 GPUs held first at 104 s"
    assert metrics["scale_bind_throughput"].values == [pytest.approx(7 / 7.0)]
    assert metrics["scale_evictions"].values == [1.0]


def test_held_over_time_is_thinned_for_the_report_and_keeps_the_last_point() -> None:
    run = Run(gangs(*[(1, 1)] * 50), [PlannedQueue("q", quota=-1, limit=-1)])
    for index in range(50):
        run.create(f"g{index}", float(index))
        run.bind_all(f"g{index}", float(index))
    thinned = run.ledger.held_over_time(points=10)
    assert len(thinned) == 11 and thinned[-1] == (49.0, 50.0)


def test_the_reports_and_compare_carry_the_scale_metrics(tmp_path) -> None:
    """A burst's record flows into summary.json, the Markdown table, the HTML plots, and ``reports compare``."""

    def written(slowdown: float, directory):
        run = Run(gangs((2, 1), (4, 2), (16, 1)), [PlannedQueue("q", quota=-1, limit=-1)], cluster=64)
        run.submit(100.0)
        for index, gang in enumerate(("g0", "g1", "g2")):
            run.create(gang, 100.5 + index)
            run.bind_all(gang, 102.0 + index * slowdown)
        record = CaseRecord(nodeid="suites/test_scale.py::test_burst[case]", area="scale", run_id="r1")
        recorder = CaseRecorder(record)
        recorder.burst(run.ledger.burst_times("burst", settled=120.0), run.ledger.gang_times())
        recorder.series("GPUs held by burst", run.ledger.held_over_time())
        return generate.write_reports(directory, [RunRecords(RunInfo(run_id="r1"), [record])])

    base = written(1.0, tmp_path / "base")
    summary = json.loads(base.json.read_text())["metrics"]
    assert summary["scale_time_to_bound"]["count"] == 3 and set(summary["scale_time_to_bound"]["by_gang_size"]) == {
        "2", "4", "16"}  # fmt: skip
    assert summary["scale_bind_throughput"]["better"] == "higher" and summary["scale_evictions"]["max"] == 0
    assert "| scale_time_to_fill | s | 1 |" in base.markdown.read_text()
    assert 'aria-label="latency by gang size' in base.html.read_text()
    slower = written(4.0, tmp_path / "new")
    result = compare.compare(compare.load_metrics(base.json), compare.load_metrics(slower.json))
    assert {row.metric for row in result.regressions} >= {"scale_time_to_bound", "scale_time_to_fill"}
