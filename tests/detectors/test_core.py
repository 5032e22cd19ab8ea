"""Every detector fires on a violating snapshot and passes on a conforming one, with a readable explanation."""

from __future__ import annotations

import pytest

from kai_conformance.fixtures.kube import AccessReview
from kai_conformance.suites.support.detectors.eviction import eviction_recorded, gang_undisturbed
from kai_conformance.suites.support.detectors.gang import (
    PartialGangWatch,
    bind_spread,
    gang_all_or_nothing,
    gang_fully_bound,
    nothing_bound,
    pods_gone,
    pods_marked_unschedulable,
    pods_running,
)
from kai_conformance.suites.support.detectors.labels import Arrival, arrivals_as_expected
from kai_conformance.suites.support.detectors.podgrouper import (
    access_granted,
    collected,
    ownership_chain,
    podgroup_shape,
    pods_annotated,
    pods_grouped,
    single_podgroup_owned_by_jobset,
    top_owner_is_jobset,
)
from kai_conformance.suites.support.detectors.queues import (
    podgroup_explains,
    podgroup_kept,
    podgroup_priority_class,
    podgroup_queue,
)
from kai_conformance.suites.support.detectors.verdict import Verdict, all_of, fires
from kai_conformance.suites.support.expectations import (
    EVICT_ACTION_ANNOTATION,
    JOBSET_API_VERSION,
    PODGROUPER_USER,
    TOP_OWNER_ANNOTATION,
    ReplicatedJob,
    kai_row,
)
from kai_conformance.suites.support.levels import arrival, arrivals
from kai_conformance.suites.support.observe import Timeline, visibility
from kai_conformance.suites.support.snapshot import Snapshot, parse_time
from tests import builders as b

T0 = parse_time(b.T0) or 0.0


def snap(*pods: dict, taken_at: float = T0, **others) -> Snapshot:
    return Snapshot(taken_at=taken_at, pods=tuple(pods), **{k: tuple(v) for k, v in others.items()})


# ------------------------------------------------------------------------------------------------------ gang
def test_gang_detector_names_bound_nodes_and_pending_pods_when_violated() -> None:
    verdict = gang_all_or_nothing(snap(*b.gang(4, bound=2)), 4)
    assert not verdict.ok
    assert verdict.explanation == "gang violated: 2 of 4 pods bound (node-a, node-b) while 2 pending"


def test_gang_detector_passes_all_bound_and_none_bound_and_counts_missing_pods() -> None:
    assert gang_all_or_nothing(snap(*b.gang(4, bound=4)), 4).ok
    none = gang_all_or_nothing(snap(*b.gang(3, bound=0)), 4)
    assert none.ok
    assert "1 not created yet" in none.explanation
    partial = gang_all_or_nothing(snap(*b.gang(3, bound=3)), 4)
    assert not partial.ok, "3 bound of a 4-pod gang whose 4th pod does not exist is a partial gang"
    assert "1 not created" in partial.explanation


def test_terminating_pods_do_not_count_toward_a_gang() -> None:
    pods = [*b.gang(2, bound=0), b.pod("old", node="node-a", terminating=True)]
    assert gang_all_or_nothing(snap(*pods), 2).ok


def test_gang_fully_bound_says_what_the_pending_pods_wait_for() -> None:
    assert gang_fully_bound(snap(*b.gang(3, bound=3)), 3).ok
    verdict = gang_fully_bound(snap(*b.gang(3, bound=1)), 3)
    assert not verdict.ok
    assert "1 of 3 pods bound" in verdict.explanation
    assert "PodScheduled=False/Unschedulable: Resources were found" in verdict.explanation


def test_gang_fully_bound_quotes_what_the_podgroup_says_when_events_were_read() -> None:
    js = b.jobset()
    pg = b.podgroup(js)
    not_ready = b.event(pg, "NotReady", "Job is not ready for scheduling. Waiting for 3 pods, currently 2 exist")
    verdict = gang_fully_bound(snap(*b.gang(2, bound=0), podgroups=[pg], events=[not_ready]), 3)
    assert not verdict.ok
    assert verdict.explanation.endswith(f"PodGroup {pg['metadata']['name']} says NotReady: {not_ready['message']}")


def test_nothing_bound_fires_on_any_bound_pod() -> None:
    assert nothing_bound(snap(*b.gang(3, bound=0)), 3).ok
    verdict = nothing_bound(snap(*b.gang(3, bound=1)), 3)
    assert not verdict.ok
    assert "1 of 3 pods bound (node-a)" in verdict.explanation


def test_pods_running_and_pods_gone() -> None:
    running = [b.pod("a", node="n", running=1), b.pod("b", node="n", running=2)]
    assert pods_running(snap(*running), 2).ok
    waiting = b.pod("c", node="n")
    waiting["status"]["containerStatuses"] = [{"state": {"waiting": {"reason": "ImagePullBackOff", "message": "no"}}}]
    verdict = pods_running(snap(running[0], waiting), 2)
    assert not verdict.ok
    assert "ImagePullBackOff" in verdict.explanation
    assert pods_gone(snap(b.pod("x", terminating=True))).ok
    assert not pods_gone(snap(b.pod("x"))).ok


def test_bind_spread_measures_the_podscheduled_transitions() -> None:
    pods = [b.pod("a", node="n", bound=0), b.pod("b", node="n", bound=2)]
    assert bind_spread(snap(*pods), limit=5).ok
    late = [*pods, b.pod("c", node="n", bound=9)]
    verdict = bind_spread(snap(*late), limit=5)
    assert not verdict.ok
    assert "within 9s" in verdict.explanation
    no_time = b.pod("d", node="n")
    no_time["status"]["conditions"] = []
    assert not bind_spread(snap(no_time), limit=5).ok
    assert not bind_spread(snap(), limit=5).ok


def test_pods_marked_unschedulable() -> None:
    assert pods_marked_unschedulable(snap(*b.gang(2, bound=0))).ok
    unmarked = b.pod("quiet")
    verdict = pods_marked_unschedulable(snap(*b.gang(1, bound=0), unmarked))
    assert not verdict.ok
    assert "quiet (no PodScheduled condition)" in verdict.explanation
    assert not pods_marked_unschedulable(snap()).ok


# ------------------------------------------------------------------------------------------------ PodGroup
def test_podgroup_explains_from_conditions_events_reasons_and_mentions() -> None:
    js = b.jobset()
    silent = b.podgroup(js)
    assert not podgroup_explains(snap(podgroups=[silent])).ok
    assert not podgroup_explains(snap()).ok

    missing = b.podgroup(js, conditions=[b.unschedulable_condition("QueueDoesNotExist", "Queue 'q9' does not exist")])
    assert podgroup_explains(snap(podgroups=[missing])).ok
    assert podgroup_explains(snap(podgroups=[missing]), ["QueueDoesNotExist"], "Queue 'q9' does not exist").ok
    wrong = podgroup_explains(snap(podgroups=[missing]), ["OverLimit"])
    assert not wrong.ok
    assert "no reason OverLimit" in wrong.explanation
    assert "QueueDoesNotExist" in wrong.explanation
    assert not podgroup_explains(snap(podgroups=[missing]), ["QueueDoesNotExist"], "Queue 'other'").ok

    by_event = b.event(silent, "Unschedulable", "OverLimit: q quota has reached the allowable limit of GPUs.")
    assert podgroup_explains(snap(podgroups=[silent], events=[by_event]), ["OverLimit"]).ok


def test_podgroup_queue_and_priority_class() -> None:
    pg = b.podgroup(b.jobset(), spec={"queue": "team", "priorityClassName": "build"})
    assert podgroup_queue(snap(podgroups=[pg]), "team").ok
    verdict = podgroup_queue(snap(podgroups=[pg]), "default-queue")
    assert not verdict.ok
    assert "spec.queue = 'team', expected 'default-queue'" in verdict.explanation
    assert podgroup_priority_class(snap(podgroups=[pg]), "build").ok
    assert not podgroup_priority_class(snap(podgroups=[pg]), "train").ok
    assert not podgroup_queue(snap(podgroups=[pg, pg]), "team").ok


def test_podgroup_kept_fires_on_a_replacement_naming_both_uids() -> None:
    before = b.podgroup(b.jobset(), spec={"queue": "team"})
    assert podgroup_kept(snap(podgroups=[before]), before).ok
    replacement = {**before, "metadata": {**before["metadata"], "uid": "new-uid"}}
    verdict = podgroup_kept(snap(podgroups=[replacement]), before)
    assert not verdict.ok and f"a replacement (uid new-uid, was {before['metadata']['uid']})" in verdict.explanation


def test_single_podgroup_owned_by_jobset() -> None:
    js = b.jobset(b.trainjob())
    good = b.podgroup(js)
    assert single_podgroup_owned_by_jobset(snap(podgroups=[good], jobsets=[js])).ok
    renamed = b.podgroup(js, name="pg-gang-wrong")
    assert "expected pg-gang-" in single_podgroup_owned_by_jobset(snap(podgroups=[renamed], jobsets=[js])).explanation
    by_trainjob = b.podgroup(js, owners=[b.ref(b.trainjob())])
    verdict = single_podgroup_owned_by_jobset(snap(podgroups=[by_trainjob], jobsets=[js]))
    assert not verdict.ok
    assert "ownerReferences [TrainJob/gang" in verdict.explanation
    two_owners = b.podgroup(js, owners=[b.ref(js, controller=False), b.ref(b.trainjob())])
    assert not single_podgroup_owned_by_jobset(snap(podgroups=[two_owners], jobsets=[js])).ok
    assert not single_podgroup_owned_by_jobset(snap(podgroups=[good, renamed], jobsets=[js])).ok
    assert not single_podgroup_owned_by_jobset(snap(podgroups=[good])).ok


def test_top_owner_metadata_names_the_jobset() -> None:
    js = b.jobset()
    group, version = JOBSET_API_VERSION.split("/")
    text = f"name: gang\nuid: {js['metadata']['uid']}\ngroup: {group}\nversion: {version}\nkind: JobSet\n"
    good = b.podgroup(js, annotations={TOP_OWNER_ANNOTATION: text})
    assert top_owner_is_jobset(snap(podgroups=[good], jobsets=[js])).ok
    trainjob_text = text.replace("kind: JobSet", "kind: TrainJob")
    bad = b.podgroup(js, annotations={TOP_OWNER_ANNOTATION: trainjob_text})
    assert (
        "kind: expected 'JobSet', got 'TrainJob'"
        in top_owner_is_jobset(snap(podgroups=[bad], jobsets=[js])).explanation
    )
    assert not top_owner_is_jobset(snap(podgroups=[b.podgroup(js)], jobsets=[js])).ok
    garbled = b.podgroup(js, annotations={TOP_OWNER_ANNOTATION: "{not: [yaml"})
    assert not top_owner_is_jobset(snap(podgroups=[garbled], jobsets=[js])).ok


def test_ownership_chain_links_by_uid() -> None:
    tj = b.trainjob()
    js = b.jobset(tj)
    job = b.job(js)
    pods = [b.pod("p0", owner=job), b.pod("p1", owner=job)]
    assert ownership_chain(snap(*pods, trainjobs=[tj], jobsets=[js], jobs=[job])).ok
    stranger = b.trainjob()
    orphan_js = b.jobset(stranger)
    verdict = ownership_chain(snap(*pods, trainjobs=[tj], jobsets=[orphan_js], jobs=[job]))
    assert not verdict.ok
    assert "JobSet gang is not owned by TrainJob gang" in verdict.explanation
    foreign_pod = b.pod("p2", owner=b.job(b.jobset()))
    assert (
        "pod p2 is not owned"
        in ownership_chain(snap(foreign_pod, trainjobs=[tj], jobsets=[js], jobs=[job])).explanation
    )
    assert "no Job" in ownership_chain(snap(trainjobs=[tj], jobsets=[js])).explanation
    assert not ownership_chain(snap()).ok


def test_podgroup_shape_against_the_expectation_row() -> None:
    js = b.jobset()
    row = kai_row("v0.17.0")
    expected = row.podgroup_spec([ReplicatedJob("node", 2)])
    subgroups = [{"name": "node", "minSubGroup": 1}, {"name": "node-replica-0", "parent": "node", "minMember": 2}]
    good = b.podgroup(js, spec={"minSubGroup": 1, "subGroups": subgroups})
    assert podgroup_shape(snap(podgroups=[good]), expected, row.name).ok
    flat = b.podgroup(js, spec={"minMember": 2})
    verdict = podgroup_shape(snap(podgroups=[flat]), expected, row.name)
    assert not verdict.ok
    assert "differs from KAI v0.17" in verdict.explanation


def test_pods_annotated_and_grouped() -> None:
    js = b.jobset()
    pg = b.podgroup(js)
    pods = [b.grouped(b.pod(f"p{i}"), pg, "node-replica-0") for i in range(2)]
    assert pods_annotated(snap(*pods)).ok
    assert pods_grouped(snap(*pods, podgroups=[pg]), lambda _p: "node-replica-0").ok
    flat_expected = pods_grouped(snap(*pods, podgroups=[pg]), lambda _p: None)
    assert not flat_expected.ok
    assert "kai.scheduler/subgroup-name='node-replica-0', expected None" in flat_expected.explanation
    ungrouped = b.pod("lost")
    assert not pods_annotated(snap(*pods, ungrouped)).ok
    assert not pods_annotated(snap()).ok
    assert not pods_grouped(snap(ungrouped, podgroups=[pg]), lambda _p: None).ok


# ---------------------------------------------------------------------------------------- eviction, GC, time
def test_eviction_recorded_needs_the_action() -> None:
    pg = b.podgroup(b.jobset())
    preempt = b.event(
        pg, "Evict", "Pod ns/p was preempted by higher priority workload ns/pg-x", {EVICT_ACTION_ANNOTATION: "preempt"}
    )
    assert eviction_recorded(snap(podgroups=[pg], events=[preempt]), "preempt").ok
    verdict = eviction_recorded(snap(podgroups=[pg], events=[preempt]), "reclaim")
    assert not verdict.ok
    assert "Evict actions seen: preempt" in verdict.explanation
    assert not eviction_recorded(snap(podgroups=[pg]), "preempt").ok


def test_gang_undisturbed_fires_when_an_original_pod_is_replaced() -> None:
    pods = b.gang(2, bound=2)
    original = frozenset(p["metadata"]["uid"] for p in pods)
    assert gang_undisturbed(snap(*pods), original).ok
    replacement = b.pod("gang-new", node="node-a")
    verdict = gang_undisturbed(snap(pods[0], replacement), original)
    assert not verdict.ok
    assert "1 of 2 original pods are no longer bound; replacements: gang-new" in verdict.explanation


def test_collected_lists_what_is_left() -> None:
    assert collected(snap()).ok
    js = b.jobset()
    verdict = collected(snap(b.pod("p"), jobsets=[js], podgroups=[b.podgroup(js)]))
    assert not verdict.ok
    assert "JobSet gang" in verdict.explanation
    assert "Pod p" in verdict.explanation


def watch_over(history: list, size: int, grace: float):
    """The watch's verdict after the last snapshot, or at the first violation."""
    watch = PartialGangWatch(size, grace)
    verdict = None
    for observed in history:
        verdict = watch.observe(observed)
        if not verdict.ok:
            break
    return verdict


def test_partial_gang_watch_tolerates_a_moment_but_not_a_persistent_partial_gang() -> None:
    whole, partial, none = b.gang(4, bound=4), b.gang(4, bound=2), b.gang(4, bound=0)
    brief = [snap(*whole, taken_at=T0), snap(*partial, taken_at=T0 + 1), snap(*none, taken_at=T0 + 2)]
    verdict = watch_over(brief, 4, grace=5)
    assert verdict.ok
    assert "longest partial moment at most 1.0s" in verdict.explanation
    stuck = [snap(*partial, taken_at=T0 + t) for t in range(8)]
    verdict = watch_over(stuck, 4, grace=5)
    assert not verdict.ok
    assert "gang violated: 2 of 4 pods bound" in verdict.explanation
    assert "for 6.0s" in verdict.explanation


def test_a_gang_whose_pods_complete_one_by_one_is_completing_not_partial() -> None:
    """Seen on real kind under load: the 12 pods of a completing gang ended over more than the grace (their
    containers had started seconds apart), and the rest looked like a partially bound gang."""
    running = b.gang(4, bound=4)
    completing = [*running[:2], *(dict(p, status={"phase": "Succeeded"}) for p in running[2:])]
    assert watch_over([snap(*completing, taken_at=T0 + t) for t in range(8)], 4, grace=5).ok
    gone = running[:2]  # the same two pods bound, the other two deleted before they ended: still a partial gang
    assert not watch_over([snap(*gone, taken_at=T0 + t) for t in range(8)], 4, grace=5).ok


# ----------------------------------------------------------------------------------------- labels and RBAC
def test_arrivals_frame_found_to_catch_the_violation() -> None:
    tj, key = b.trainjob(), "label.kai-conformance.io/x"
    tj["metadata"]["labels"] = {key: "set"}
    marked, plain = b.pod("a", labels={key: "set"}), b.pod("b")
    s = snap(marked, plain, trainjobs=[tj])
    assert arrival(s, "src", key, "TrainJob", True).observed
    assert not arrival(s, "src", key, "Pod", True).observed, "only some pods carry it: it did not arrive"
    assert arrival(s, "src", key, "Pod", False).observed, "any pod carrying it counts where it must be absent"
    assert not arrival(s, "src", key, "Job", True).observed, "an empty level is not an arrival"
    assert len(arrivals(s, "src", key, frozenset({"TrainJob"}))) == 5


def test_arrivals_as_expected_lists_each_wrong_level() -> None:
    good = [Arrival("trainjob-metadata", "label k", "Pod", False, False)]
    assert arrivals_as_expected(good).ok
    wrong = [*good, Arrival("trainjob-metadata", "label k", "JobSet", False, True)]
    verdict = arrivals_as_expected(wrong)
    assert not verdict.ok
    assert "label k from trainjob-metadata at JobSet: expected absent, found present" in verdict.explanation
    assert not arrivals_as_expected([]).ok


def test_access_granted_names_each_denied_verb() -> None:
    allowed, denied = AccessReview(True, "rbac"), AccessReview(False, "no rule")
    assert access_granted(PODGROUPER_USER, [("get", "jobsets", allowed)]).ok
    verdict = access_granted(PODGROUPER_USER, [("get", "jobsets", allowed), ("watch", "jobsets", denied)])
    assert not verdict.ok
    assert "may not: watch jobsets (no rule)" in verdict.explanation
    assert not access_granted(PODGROUPER_USER, []).ok


# ---------------------------------------------------------------------------------------------- composition
def test_all_of_fires_if_any_fires_and_fires_inverts() -> None:
    ok, bad = Verdict("a", True, "fine"), Verdict("b", False, "broken")
    assert all_of(ok, ok).ok
    combined = all_of(ok, bad)
    assert not combined.ok
    assert combined.explanation == "[b] VIOLATED: broken"
    assert fires(bad).ok
    assert not fires(ok).ok
    assert bad.observation().summary == "b: broken"


def test_visibility_waits_for_every_pod_and_the_podgroup() -> None:
    js = b.jobset()
    pods = b.gang(2, bound=0)
    assert not visibility(snap(pods[0]), 2).ok
    no_group = visibility(snap(*pods), 2)
    assert not no_group.ok
    assert "podgrouper" in no_group.explanation
    assert visibility(snap(*pods), 2, kai=False).ok
    assert visibility(snap(*pods, podgroups=[b.podgroup(js)]), 2).ok


def test_snapshot_narrows_to_one_workload() -> None:
    js = b.jobset(name="gang")
    other_js = b.jobset(name="blocker")
    pg, other_pg = b.podgroup(js), b.podgroup(other_js)
    s = snap(*b.gang(2, 0), *b.gang(3, 3, workload="blocker"), podgroups=[pg, other_pg], jobsets=[js, other_js],
             events=[b.event(pg, "Unschedulable", "x"), b.event(other_pg, "Evict", "y")])  # fmt: skip
    gang = s.of("gang")
    assert [p["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] for p in gang.pods] == ["gang", "gang"]
    assert gang.podgroup is pg
    assert [e["reason"] for e in gang.events] == ["Unschedulable"]
    assert s.workloads() == ["blocker", "gang"]


def test_timeline_records_created_bound_running_and_evicted() -> None:
    timeline = Timeline()
    first = b.pod("p", node="node-a", bound=2, running=3)
    timeline.observe(snap(first, taken_at=T0 + 4))
    timeline.observe(snap(taken_at=T0 + 9))
    (times,) = timeline.pods("gang")
    assert (times.created, times.bound, times.running, times.evicted) == (T0, T0 + 2, T0 + 3, T0 + 9)
    assert times.node == "node-a"
    terminating = b.pod("q", workload="other", terminating=True)
    timeline.observe(snap(terminating, taken_at=T0 + 40))
    assert timeline.pods("other")[0].evicted == T0 + 30
    assert timeline.workloads() == ["gang", "other"]


@pytest.mark.parametrize("value", ["2026-11-21T12:00:00Z", "2026-11-21T12:00:00.5+00:00"])
def test_parse_time_accepts_api_timestamps(value: str) -> None:
    assert parse_time(value) is not None
    assert parse_time(None) is None
