"""The chaos ledger's invariants on hand-made watch timelines: each fires on a violating one and stays quiet on the
legitimate moves a mix makes (a pod being bound by the binder, the suite deleting or suspending, a JobSet restarting
a failed gang, a gang completing pod by pod, a reservation pod kept while its GPU group is used or removed within
the grace); fractional pods count their fraction against their queue."""

from __future__ import annotations

import copy
import itertools

from kai_conformance.suites.support.cases.chaos import ChaosMix, ChaosQueue, ChaosWorkload
from kai_conformance.suites.support.chaos.ledger import LEFTOVER_BINDREQUEST, ONE_PODGROUP, ChaosLedger
from kai_conformance.suites.support.chaos.sharing import LEFTOVER_RESERVATION, Asking, fitting_gangs_bound
from kai_conformance.suites.support.detectors.scale import QueueBounds
from kai_conformance.suites.support.expectations.sharing import GPU_GROUP_LABEL, RESERVATION_NAMESPACE
from tests import builders

GRACE, GC, RESERVED = 5.0, 20.0, 10.0


class Mix:
    """A mix's watch timeline told to a chaos ledger event by event (pods keep their uid across events)."""

    def __init__(self, *workloads: ChaosWorkload, quota: int = 8, limit: int = 8) -> None:
        mix = ChaosMix((ChaosQueue("q", quota, limit),), tuple(workloads), (), 16)
        self.ledger = ChaosLedger(mix, GRACE, GC, RESERVED)
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

    def bindrequest(self, pod: str, at: float, *, event: str = "ADDED", phase: str = "", group: str = "") -> dict:
        request = {"metadata": {"name": f"br-{pod}", "uid": f"br-{pod}"},
                   "spec": {"podName": pod, "selectedNode": "node-b", **({"selectedGPUGroups": [group]} if group else {})},
                   "status": {"phase": phase} if phase else {}}  # fmt: skip
        self.ledger.bindrequest(event, request, at)
        return request

    def share(self, name: str, group: str, at: float) -> None:
        """The binder's bind of a fractional pod: labelled with its GPU group, then bound."""
        self.pods[name]["metadata"].setdefault("labels", {})[GPU_GROUP_LABEL] = group
        self.bind(name, at)

    def reservation(self, group: str, at: float, *, event: str = "ADDED") -> None:
        pod = {"metadata": {"name": f"gpu-reservation-{group}", "namespace": RESERVATION_NAMESPACE,
                            "uid": f"reservation-{group}", "labels": {GPU_GROUP_LABEL: group}},
               "spec": {"nodeName": "node-a"}, "status": {"phase": "Running"}}  # fmt: skip
        self.ledger.reservation(event, pod, at)

    def verdicts(self, at: float) -> dict[str, bool]:
        return {name: v.ok for name, v in self.ledger.guard_verdicts(at).items()}


def gang(name: str = "w0", pods: int = 2, priority: str = "train") -> ChaosWorkload:
    return ChaosWorkload(name, pods, 1, "q", priority)


def halves(name: str = "w0", pods: int = 2, priority: str = "train") -> ChaosWorkload:
    return ChaosWorkload(name, pods, 0, "q", priority, fraction=0.5)


def shared(*workloads: ChaosWorkload, **kwargs) -> Mix:
    """A mix whose pods of half a GPU share GPU group g1 (one reservation pod), bound at 2 s."""
    mix = Mix(*(workloads or (halves(),)), **kwargs)
    for workload in mix.ledger.mix.workloads:
        mix.create(workload.name, 0)
        for index in range(workload.pods):
            mix.bindrequest(f"{workload.name}-{index}", 1, group="g1")
    mix.reservation("g1", 1)
    for workload in mix.ledger.mix.workloads:
        for index in range(workload.pods):
            mix.share(f"{workload.name}-{index}", "g1", 2)
            mix.bindrequest(f"{workload.name}-{index}", 2, event="MODIFIED", phase="Succeeded", group="g1")
    return mix


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


def test_a_gang_whose_failed_pod_awaits_its_job_controller_is_not_judged_as_fitting() -> None:
    """Seen on the real controllers: a "fails" workload's pod ended after the mix settled and before the judgement,
    and the Job re-created it only after its backoff; its gang, short of a pod, is not KAI's to place."""
    mix = Mix(gang("w0", pods=1), gang("w1", pods=1))
    for name in ("w0", "w1"):
        mix.create(name, 0)
    queues = {"q": QueueBounds("q", 8, 8)}
    assert [a.name for a in mix.ledger.asking()] == ["w0", "w1"]
    assert not fitting_gangs_bound(mix.ledger.asking(), {"a": 4}, {"q": 0.0}, {}, queues).ok, "both fit and wait"
    mix.bind("w0-0", 1)
    mix.end("w0-0", "Failed", 11)
    mix.delete("w0-0", 12)
    assert [a.name for a in mix.ledger.asking()] == ["w1"], "w0 waits on its Job's backoff, w1 on KAI"
    assert [w.name for w in mix.ledger.waiting()] == ["w1"]
    mix.create("w0", 30)
    assert [a.name for a in mix.ledger.asking()] == ["w0", "w1"], "re-created, it is KAI's to place again"


def test_a_deleted_gangs_pods_count_in_no_queue_once_its_podgroup_is_gone_as_kai_counts_them() -> None:
    """Seen on the real controllers: the suite deleted a non-preemptible gang, its PodGroup went before its pods,
    and KAI bound another non-preemptible gang into the quota the still-bound pods had filled."""
    mix = Mix(gang("w0", pods=4, priority="build"), gang("w1", pods=4, priority="build"), quota=4)
    mix.create("w0", 0)
    for index in range(4):
        mix.bind(f"w0-{index}", 1)
    mix.create("w1", 2)
    kept = copy.deepcopy(mix)
    mix.ledger.released("w0", 3, how="deleted")
    podgroup = builders.podgroup(builders.jobset(name="w0"))
    (podgroup["metadata"]["uid"],) = mix.ledger.state["w0"].podgroups
    mix.ledger.podgroup("DELETED", podgroup, 3.1)
    for index in range(4):
        mix.bind(f"w1-{index}", 3.2)
    assert mix.verdicts(3.3)["non-preemptible-in-quota"], "w0 is in no queue of KAI's any more"
    assert mix.ledger.amounts(non_preemptible=True) == {"q": 4}
    kept.ledger.released("w0", 3, how="deleted")  # its PodGroup still there: KAI still counts w0
    for index in range(4):
        kept.bind(f"w1-{index}", 3.2)
    verdict = kept.ledger.guard_verdicts(3.3)["non-preemptible-in-quota"]
    assert not verdict.ok and "q runs 5 non-preemptible GPUs, quota 4" in verdict.explanation


def test_quiet_after_is_the_first_change_followed_by_the_quiet_time_before_the_next_step() -> None:
    mix = Mix(gang())
    mix.ledger.changes = [10.0, 11.0, 12.5, 30.0]
    assert mix.ledger.quiet_after(10.0, 5.0, until=40.0) == 12.5
    assert mix.ledger.quiet_after(10.0, 5.0, until=15.0) is None
    excerpt = Mix(gang())
    excerpt.create("w0", 0)
    assert any("w0" in line and "PodGroup" in line for line in excerpt.ledger.excerpt({"w0"}, 0.0, 5.0))


# ------------------------------------------------------------------------------------------------ GPU sharing
def test_a_reservation_pod_left_after_its_gpu_groups_pods_fires_after_the_grace_not_one_removed_in_time() -> None:
    mix = shared()
    mix.delete("w0-0", 10)
    mix.delete("w0-1", 10)
    assert mix.verdicts(10 + RESERVED - 1)[LEFTOVER_RESERVATION]
    removed = copy.deepcopy(mix)
    removed.reservation("g1", 10 + RESERVED - 1, event="DELETED")
    assert removed.verdicts(10 + RESERVED * 5)[LEFTOVER_RESERVATION]
    verdict = mix.ledger.guard_verdicts(10 + RESERVED + 1)[LEFTOVER_RESERVATION]
    assert not verdict.ok and "gpu-reservation-g1 of GPU group g1 on node-a, used by w0" in verdict.explanation
    assert any("reservation pod gpu-reservation-g1 of GPU group g1 created" in line
               for line in mix.ledger.excerpt({"w0"}, None, 0))  # fmt: skip


def test_a_reservation_pod_kept_while_a_pod_or_an_unfinished_bindrequest_uses_its_group_is_legitimate() -> None:
    one_left = shared()
    one_left.delete("w0-0", 10)
    assert one_left.verdicts(10 + RESERVED * 5)[LEFTOVER_RESERVATION], "w0-1 still runs on the shared GPU"

    binding = Mix(halves(pods=1))
    binding.create("w0", 0)
    binding.bindrequest("w0-0", 1, group="g1")
    binding.reservation("g1", 1)  # the binder waits for the reservation's answer: the BindRequest is not finished
    assert binding.verdicts(1 + RESERVED * 5)[LEFTOVER_RESERVATION]
    binding.bindrequest("w0-0", 60, event="MODIFIED", phase="Failed", group="g1")  # rolled back: nothing uses g1
    assert binding.verdicts(60 + RESERVED - 1)[LEFTOVER_RESERVATION]
    assert not binding.verdicts(60 + RESERVED + 1)[LEFTOVER_RESERVATION]

    ended = shared()
    ended.end("w0-0", "Succeeded", 10)
    ended.end("w0-1", "Succeeded", 10)  # KAI's binder syncs the group on the pod's completion, not its deletion
    assert not ended.verdicts(10 + RESERVED + 1)[LEFTOVER_RESERVATION]
    assert LEFTOVER_RESERVATION not in Mix(gang()).verdicts(100), "judged only in a mix with fractional workloads"


def test_no_reservation_is_judged_while_the_binder_is_down_and_its_grace_restarts_when_it_is_back() -> None:
    mix = shared()
    mix.ledger.restarting("binder", 9)
    mix.delete("w0-0", 10)
    mix.delete("w0-1", 10)
    assert mix.verdicts(10 + RESERVED * 5)[LEFTOVER_RESERVATION], "the binder is down"
    mix.ledger.back("binder", 70)
    assert mix.verdicts(70 + RESERVED - 1)[LEFTOVER_RESERVATION], "its start-up sync has the grace"
    assert not mix.verdicts(70 + RESERVED + 1)[LEFTOVER_RESERVATION]


def test_fractional_pods_count_their_fraction_against_the_queue_and_are_placed_like_any_pod() -> None:
    within = shared(halves("w0", priority="build"), quota=1, limit=1)
    assert within.verdicts(3)["queue-limit"] and within.verdicts(3)["non-preemptible-in-quota"]
    assert within.ledger.amounts() == {"q": 1.0} == within.ledger.amounts(non_preemptible=True)
    assert "q 1/1" in within.ledger.guard_verdicts(3)["queue-limit"].explanation

    over = shared(halves("w0", priority="build"), halves("w1", pods=1, priority="build"), quota=1, limit=1)
    verdicts = over.ledger.guard_verdicts(3)
    assert not verdicts["queue-limit"].ok and "q holds 1.5 GPUs, limit 1" in verdicts["queue-limit"].explanation
    assert "q runs 1.5 non-preemptible GPUs, quota 1" in verdicts["non-preemptible-in-quota"].explanation
    over.delete("w1-0", 4)
    assert over.ledger.amounts() == {"q": 1.0}, "a fraction leaves with its pod"

    placing = Mix(halves())
    placing.create("w0", 0)
    placing.share("w0-0", "g1", 1)
    placing.bindrequest("w0-1", 1, group="g1")  # the binder waits for the reservation's answer
    assert placing.verdicts(1 + GRACE * 3)["gang-never-partial"]


def test_a_waiting_gang_fits_as_kai_counts_fractions_free_gpus_and_limits() -> None:
    queues = {"q": QueueBounds("q", 0, 2)}
    halves_of = [Asking("w1", 3, 0.5, "q", True)]
    fits = fitting_gangs_bound(halves_of, {"a": 2}, {"q": 0.0}, {}, queues)
    assert not fits.ok and "w1 (3×0.5 GPU, queue q: room for 4 such pods)" in fits.explanation, "2 GPUs hold 3 halves"
    assert fitting_gangs_bound(halves_of, {"a": 1}, {"q": 0.0}, {}, queues).ok, "one GPU holds two halves"
    assert fitting_gangs_bound(halves_of, {"a": 2}, {"q": 1.0}, {}, queues).ok, "1 + 1.5 GPUs pass the limit of 2"
    whole = [Asking("w2", 1, 1.0, "q", True)]
    assert fitting_gangs_bound(whole, {"a": 4}, {"q": 1.5}, {}, queues).ok, "fractions held count: 2.5 > 2"
    verdict = fitting_gangs_bound(whole, {"a": 4}, {"q": 1.0}, {}, queues)
    assert not verdict.ok and "w2 (1×1 GPU, queue q: room for 4 such pods)" in verdict.explanation
