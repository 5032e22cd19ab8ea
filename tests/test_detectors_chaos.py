"""The chaos ledger's invariants on hand-made watch timelines: each fires on a violating one and stays quiet on the
legitimate moves a mix makes (a pod being bound by the binder, the suite deleting or suspending, a JobSet restarting
a failed gang, a gang completing pod by pod)."""

from __future__ import annotations

import copy
import itertools

from kai_conformance.suites.support.cases.chaos import ChaosMix, ChaosQueue, ChaosWorkload
from kai_conformance.suites.support.chaos_ledger import LEFTOVER_BINDREQUEST, ONE_PODGROUP, ChaosLedger
from tests import builders

GRACE, GC = 5.0, 20.0


class Mix:
    """A mix's watch timeline told to a chaos ledger event by event (pods keep their uid across events)."""

    def __init__(self, *workloads: ChaosWorkload, quota: int = 8) -> None:
        mix = ChaosMix((ChaosQueue("q", quota, 8),), tuple(workloads), (), 16)
        self.ledger = ChaosLedger(mix, GRACE, GC)
        self.pods: dict[str, dict] = {}
        self.uids = itertools.count()

    def create(self, gang: str, at: float) -> None:
        workload = self.ledger.mix.workload(gang)
        self.ledger.submitted(gang, at)
        for index in range(workload.pods):
            pod = builders.pod(f"{gang}-{index}", workload=gang, gpus=workload.gpus)
            pod["metadata"]["uid"] = f"{gang}-{index}-{next(self.uids)}"
            self.pods[f"{gang}-{index}"] = pod
            self.ledger.pod("ADDED", copy.deepcopy(pod), at)
        self.ledger.podgroup("ADDED", builders.podgroup(builders.jobset(name=gang)), at)

    def bind(self, name: str, at: float) -> None:
        self.pods[name]["spec"]["nodeName"] = "node-a"
        self.ledger.pod("MODIFIED", copy.deepcopy(self.pods[name]), at)

    def end(self, name: str, phase: str, at: float) -> None:
        self.pods[name]["status"]["phase"] = phase
        self.ledger.pod("MODIFIED", copy.deepcopy(self.pods[name]), at)

    def delete(self, name: str, at: float) -> None:
        self.pods[name]["metadata"]["deletionTimestamp"] = builders.at(30)
        self.ledger.pod("MODIFIED", copy.deepcopy(self.pods[name]), at)
        self.ledger.pod("DELETED", copy.deepcopy(self.pods.pop(name)), at)

    def bindrequest(self, pod: str, at: float, *, event: str = "ADDED", phase: str = "") -> dict:
        request = {"metadata": {"name": f"br-{pod}", "uid": f"br-{pod}"},
                   "spec": {"podName": pod, "selectedNode": "node-b"}, "status": {"phase": phase} if phase else {}}  # fmt: skip
        self.ledger.bindrequest(event, request, at)
        return request

    def verdicts(self, at: float) -> dict[str, bool]:
        return {name: v.ok for name, v in self.ledger.guard_verdicts(at).items()}


def gang(name: str = "w0", pods: int = 2, priority: str = "train") -> ChaosWorkload:
    return ChaosWorkload(name, pods, 1, "q", priority)


def test_a_pod_the_binder_is_still_binding_counts_as_placed_but_a_half_bound_gang_fires() -> None:
    binding = Mix(gang())
    binding.create("w0", 0)
    binding.bind("w0-0", 1)
    binding.bindrequest("w0-1", 1)
    assert binding.verdicts(1 + GRACE + 10)["gang-never-partial"], "the binder's pace is not a gang violation"

    half = Mix(gang())
    half.create("w0", 0)
    half.bind("w0-0", 1)
    assert not half.verdicts(1 + GRACE + 1)["gang-never-partial"]
    assert (
        "gang w0 partially bound (1 of 2 pods bound)"
        in half.ledger.guard_verdicts(20)["gang-never-partial"].explanation
    )


def test_a_finished_bindrequest_no_longer_counts_as_placing_its_pod() -> None:
    mix = Mix(gang())
    mix.create("w0", 0)
    mix.bind("w0-0", 1)
    mix.bindrequest("w0-1", 1, phase="Failed")
    assert not mix.verdicts(1 + GRACE + 1)["gang-never-partial"]


def test_a_gang_completing_or_failing_pod_by_pod_is_leaving_not_partial() -> None:
    mix = Mix(gang(pods=3))
    mix.create("w0", 0)
    for name in ("w0-0", "w0-1", "w0-2"):
        mix.bind(name, 1)
    mix.end("w0-0", "Succeeded", 10)
    assert mix.verdicts(10 + GRACE * 3)["gang-never-partial"]


def test_the_suite_deleting_or_suspending_and_a_jobset_restart_are_not_evictions_but_kai_deleting_is() -> None:
    for released in ("deleted", "suspended", "restart"):
        mix = Mix(gang(priority="build"))
        mix.create("w0", 0)
        mix.bind("w0-0", 1)
        mix.bind("w0-1", 1)
        if released == "restart":
            mix.end("w0-0", "Failed", 5)
        else:
            mix.ledger.released("w0", 5, how=released)
        mix.delete("w0-0", 6)
        mix.delete("w0-1", 6)
        assert mix.verdicts(7)["non-preemptible-never-evicted"], released

    evicted = Mix(gang(priority="build"))
    evicted.create("w0", 0)
    evicted.bind("w0-0", 1)
    evicted.bind("w0-1", 1)
    evicted.delete("w0-0", 6)
    evicted.delete("w0-1", 6)
    assert not evicted.verdicts(7)["non-preemptible-never-evicted"]


def test_after_a_jobset_restart_kai_evicting_the_new_pods_of_a_non_preemptible_gang_fires() -> None:
    mix = Mix(gang(priority="build"))
    mix.create("w0", 0)
    mix.bind("w0-0", 1)
    mix.bind("w0-1", 1)
    mix.end("w0-0", "Failed", 5)
    mix.delete("w0-0", 6)
    mix.delete("w0-1", 6)  # the JobSet restarts the gang: not an eviction
    assert mix.verdicts(7)["non-preemptible-never-evicted"]
    mix.create("w0", 8)  # the next attempt's pods (new uids)
    mix.bind("w0-0", 9)
    mix.bind("w0-1", 9)
    mix.delete("w0-1", 12)
    verdict = mix.ledger.guard_verdicts(13)["non-preemptible-never-evicted"]
    assert not verdict.ok and "w0" in verdict.explanation


def test_two_podgroups_for_one_trainjob_fire_at_once_and_a_replaced_one_does_not() -> None:
    replaced = Mix(gang())
    replaced.create("w0", 0)
    old = next(iter(replaced.ledger.state["w0"].podgroups))
    gone = {**builders.podgroup(builders.jobset(name="w0")), "metadata": {"name": "pg-old", "uid": old,
            "ownerReferences": [{"kind": "JobSet", "name": "w0"}]}}  # fmt: skip
    replaced.ledger.podgroup("DELETED", gone, 3)
    replaced.ledger.podgroup("ADDED", builders.podgroup(builders.jobset(name="w0")), 3)
    assert replaced.verdicts(4)[ONE_PODGROUP]

    duplicated = Mix(gang())
    duplicated.create("w0", 0)
    duplicated.ledger.podgroup("ADDED", builders.podgroup(builders.jobset(name="w0")), 3)
    verdict = duplicated.ledger.guard_verdicts(4)[ONE_PODGROUP]
    assert not verdict.ok and "TrainJob w0 has 2 PodGroups at once" in verdict.explanation


def test_a_bindrequest_outliving_its_pod_fires_after_the_gc_grace_and_one_collected_in_time_does_not() -> None:
    mix = Mix(gang(pods=1))
    mix.create("w0", 0)
    request = mix.bindrequest("w0-0", 1, phase="Succeeded")
    mix.bind("w0-0", 1)
    mix.delete("w0-0", 10)
    assert mix.verdicts(10 + GC - 1)[LEFTOVER_BINDREQUEST]
    collected = copy.deepcopy(mix)
    collected.ledger.bindrequest("DELETED", request, 12)
    assert collected.verdicts(10 + GC + 5)[LEFTOVER_BINDREQUEST]
    verdict = mix.ledger.guard_verdicts(10 + GC + 1)[LEFTOVER_BINDREQUEST]
    assert not verdict.ok and "left for pods that are gone (w0-0)" in verdict.explanation


def test_settled_needs_only_active_workloads_complete_and_waiting_lists_only_them() -> None:
    mix = Mix(gang("w0"), gang("w1"), gang("w2"))
    mix.create("w0", 0)
    mix.ledger.submitted("w1", 0)
    mix.ledger.released("w1", 1, how="deleted")
    mix.ledger.trainjob("MODIFIED", {"metadata": {"name": "w2"}, "status": {"conditions": [
        {"type": "Complete", "status": "True"}]}}, 1)  # fmt: skip
    mix.ledger.submitted("w2", 0)
    assert not mix.ledger.active("w2") and not mix.ledger.active("w1")
    assert mix.ledger.settled(1 + GRACE, GRACE).ok
    assert [w.name for w in mix.ledger.waiting()] == ["w0"]


def test_quiet_after_is_the_first_change_followed_by_the_quiet_time_before_the_next_step() -> None:
    mix = Mix(gang())
    mix.ledger.changes = [10.0, 11.0, 12.5, 30.0]
    assert mix.ledger.quiet_after(10.0, 5.0, until=40.0) == 12.5
    assert mix.ledger.quiet_after(10.0, 5.0, until=15.0) is None
    excerpt = Mix(gang())
    excerpt.create("w0", 0)
    assert any("w0" in line and "PodGroup" in line for line in excerpt.ledger.excerpt({"w0"}, 0.0, 5.0))
