"""The lifecycle detectors pass a conforming episode and fire on a violating one, with readable explanations; the
expectation rows cover every catalogued version; the workload's lifetime contract (``planned_end``) is what the
suite's command does under a real ``sh``, and SIGTERM still ends it at once."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from kai_conformance.clusters.catalog import Catalog
from kai_conformance.clusters.suite_stack import EVICTED_EXIT_CODE, WORKLOAD_COMMAND, lifetime_env, planned_end
from kai_conformance.fixtures.waits import Observation, eventually
from kai_conformance.suites.support.detectors.lifecycle import (
    INDEX_LABEL,
    completing_gang_spared,
    jobset_restarts,
    nothing_left,
    podgroup_kept,
    pods_ended,
    queue_holds,
    queue_released,
    restarted_whole,
    took_freed_gpus,
    trainjob_ended,
    trainjob_suspended,
)
from kai_conformance.suites.support.expectations import expectations_for
from kai_conformance.suites.support.expectations.lifecycle import (
    JOBSET_LIFECYCLE_ROWS,
    KAI_LIFECYCLE_ROWS,
    RESTART_ATTEMPT_LABEL,
    STALE_GANG_ACTION,
)
from kai_conformance.suites.support.snapshot import Snapshot
from tests import builders as b

Q = "kcq-test-first"


def ended(name: str, index: int, phase: str = "Succeeded", code: int = 0, workload: str = "gang") -> dict:
    pod = b.pod(name, workload=workload, node="node-a", labels={INDEX_LABEL: str(index)})
    pod["metadata"]["uid"] = f"pod-{name}"  # one pod, whatever state it is shown in
    pod["status"] = {
        "phase": phase,
        "containerStatuses": [{"name": "node", "state": {"terminated": {"exitCode": code}}}],
    }
    return pod


def bound(name: str, index: int, workload: str = "gang", attempt: int = 0, **kwargs: Any) -> dict:
    labels = {INDEX_LABEL: str(index), RESTART_ATTEMPT_LABEL: str(attempt)}
    pod = b.pod(name, workload=workload, node="node-a", running=0, labels=labels, **kwargs)
    pod["metadata"]["uid"] = f"pod-{name}"
    return pod


def queue(gpus: float) -> dict:
    allocated = {"nvidia.com/gpu": f"{gpus:g}"} if gpus else {}
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": Q},
        "status": {"allocated": allocated},
    }


def snap(t: float, *pods: dict, gpus: float | None = None, **others: Any) -> Snapshot:
    queues = (queue(gpus),) if gpus is not None else ()
    return Snapshot(taken_at=t, pods=tuple(pods), queues=queues, **{k: tuple(v) for k, v in others.items()})


def with_conditions(obj: dict, *conditions: tuple[str, str, str], **status: Any) -> dict:
    obj["status"] = {
        "conditions": [{"type": t, "status": s, "reason": r, "message": f"{r} message"} for t, s, r in conditions],
        **status,
    }
    return obj


# ---------------------------------------------------------------------------------------------- one snapshot
def test_trainjob_ended_reads_the_terminal_condition_and_its_reason() -> None:
    done = with_conditions(b.trainjob(), ("Complete", "True", "AllJobsCompleted"))
    assert trainjob_ended(snap(0, trainjobs=[done]).of("gang"), "Complete", "AllJobsCompleted").ok
    failed = with_conditions(b.trainjob(), ("Failed", "True", "FailedJobs"))
    fired = trainjob_ended(snap(0, trainjobs=[failed]).of("gang"), "Complete")
    assert not fired.ok and "Failed, not Complete" in fired.explanation and "FailedJobs" in fired.explanation
    wrong = trainjob_ended(snap(0, trainjobs=[failed]).of("gang"), "Failed", "ReachedMaxRestarts")
    assert not wrong.ok and "expected 'ReachedMaxRestarts'" in wrong.explanation
    assert "not Complete yet" in trainjob_ended(snap(0, trainjobs=[b.trainjob()]).of("gang"), "Complete").explanation


def test_pods_ended_names_each_index_that_ended_otherwise() -> None:
    good = snap(0, ended("gang-0", 0), ended("gang-1", 1)).of("gang")
    assert pods_ended(good, 2, "Succeeded", 0).ok
    bad = snap(0, ended("gang-0", 0), ended("gang-1", 1, "Failed", 143)).of("gang")
    verdict = pods_ended(bad, 2, "Succeeded", 0)
    assert not verdict.ok and "index 1 Failed (exit 143)" in verdict.explanation
    assert not pods_ended(snap(0, ended("gang-0", 0)).of("gang"), 2, "Succeeded", 0).ok


def test_trainjob_suspended_wants_suspended_then_resumed() -> None:
    suspended = with_conditions(b.trainjob(), ("Suspended", "True", "Suspended"))
    assert trainjob_suspended(snap(0, trainjobs=[suspended]).of("gang"), True).ok
    assert not trainjob_suspended(snap(0, trainjobs=[suspended]).of("gang"), False).ok
    resumed = with_conditions(b.trainjob(), ("Suspended", "False", "Resumed"))
    assert trainjob_suspended(snap(0, trainjobs=[resumed]).of("gang"), False).ok


@pytest.mark.parametrize("minor", sorted(JOBSET_LIFECYCLE_ROWS))
def test_jobset_restarts_by_jobset_version(minor: str) -> None:
    row = JOBSET_LIFECYCLE_ROWS[minor]
    trainjob = with_conditions(b.trainjob(), ("Failed", "True", "ReachedMaxRestarts"))
    conditions = [("Failed", "True", "ReachedMaxRestarts")] + (
        [("RestartingJobSet", "False", "JobSetFailed")] if row.restarting_condition else []
    )
    jobset = with_conditions(b.jobset(trainjob), *conditions, restarts=1)
    assert jobset_restarts(snap(0, trainjobs=[trainjob], jobsets=[jobset]).of("gang"), 1, row).ok
    verdict = jobset_restarts(snap(0, trainjobs=[trainjob], jobsets=[jobset]).of("gang"), 2, row)
    assert not verdict.ok and "status.restarts 1, expected 2" in verdict.explanation
    other = JOBSET_LIFECYCLE_ROWS["v0.11" if row.restarting_condition else "v0.12"]
    assert not jobset_restarts(snap(0, trainjobs=[trainjob], jobsets=[jobset]).of("gang"), 1, other).ok


def test_nothing_left_names_what_a_deletion_left_behind() -> None:
    assert nothing_left(snap(0), "gang", {"gang-0"}).ok
    request = {"apiVersion": "scheduling.run.ai/v1alpha2", "kind": "BindRequest", "metadata": {"name": "gang-0"},
               "spec": {"podName": "gang-0"}}  # fmt: skip
    verdict = nothing_left(snap(0, bindrequests=[request]), "gang", {"gang-0"})
    assert not verdict.ok and "BindRequest gang-0" in verdict.explanation
    pg = b.podgroup(b.jobset(name="gang"))
    assert "PodGroup pg-gang" in nothing_left(snap(0, podgroups=[pg]), "gang").explanation


# ------------------------------------------------------------------------------------------------- episodes
def test_queue_released_needs_the_gpus_shown_while_bound_and_gone_within_the_grace() -> None:
    running = [bound("gang-0", 0), bound("gang-1", 1)]
    done = [ended("gang-0", 0), ended("gang-1", 1)]
    episode = [snap(0, *running, gpus=2), snap(1, *done, gpus=2), snap(2, *done, gpus=0)]
    verdict = queue_released(episode, Q, "gang", 2, 2, 5)
    assert verdict.ok and "none 1.0s after its last pod ended" in verdict.explanation
    assert not queue_released(episode, Q, "gang", 2, 2, 0.5).ok  # too late
    never_shown = [snap(0, *running, gpus=0), snap(1, *done, gpus=0)]
    assert "never showed the 2 GPUs" in queue_released(never_shown, Q, "gang", 2, 2, 5).explanation
    kept = [snap(0, *running, gpus=2), snap(9, *done, gpus=2)]
    assert "still holds 2 GPU(s) 0.0s after" in queue_released(kept, Q, "gang", 2, 2, 5).explanation
    assert "still has 2 live pod(s)" in queue_released(episode[:1], Q, "gang", 2, 2, 5).explanation


def test_queue_holds_waits_for_the_queue_controller() -> None:
    assert queue_holds(snap(0, gpus=2), Q, 2).ok
    assert "allocated 1 of 2" in queue_holds(snap(0, gpus=1), Q, 2).explanation
    assert "not read" in queue_holds(snap(0), Q, 2).explanation


def test_queue_released_judges_the_last_end_of_a_gang_that_came_back() -> None:
    """A restart (or a resume) in between starts a new stretch: a gap between attempts is not the release."""
    first, again = (
        [bound("gang-0", 0), bound("gang-1", 1)],
        [bound("gang-2", 0, attempt=1), bound("gang-3", 1, attempt=1)],
    )
    episode = [snap(0, *first, gpus=2), snap(1, gpus=0), snap(2, *again, gpus=2), snap(3, gpus=2), snap(4, gpus=0)]
    verdict = queue_released(episode, Q, "gang", 2, 2, 0.5)
    assert not verdict.ok and "none 1.0s after" in verdict.explanation


def test_podgroup_kept_after_the_end_holding_nothing() -> None:
    js = b.jobset(name="gang")
    pg = b.podgroup(js)
    holding = dict(pg, status={"resourcesStatus": {"allocated": {"nvidia.com/gpu": "2"}}})
    episode = [snap(0, bound("gang-0", 0), podgroups=[holding]), snap(1, ended("gang-0", 0), podgroups=[pg])]
    assert podgroup_kept(episode, "gang", True).ok
    stale = [episode[0], snap(1, ended("gang-0", 0), podgroups=[holding])]
    assert "holding 2 GPU(s)" in podgroup_kept(stale, "gang", True).explanation
    gone = [episode[0], snap(1, ended("gang-0", 0))]
    verdict = podgroup_kept(gone, "gang", True)
    assert not verdict.ok and "is gone after gang ended" in verdict.explanation
    assert podgroup_kept(gone, "gang", False).ok


def test_completing_gang_spared_sees_evictions_reruns_and_stale_events() -> None:
    fine = [snap(0, bound("gang-0", 0), bound("gang-1", 1)), snap(5, ended("gang-0", 0), bound("gang-1", 1)),
            snap(9, ended("gang-0", 0), ended("gang-1", 1))]  # fmt: skip
    assert completing_gang_spared(fine, "gang").ok
    evicted = [fine[1], snap(6, ended("gang-0", 0), bound("gang-1", 1, terminating=True))]
    assert "evicted while running: gang-1" in completing_gang_spared(evicted, "gang").explanation
    killed = [fine[1], snap(6, ended("gang-0", 0), ended("gang-1", 1, "Failed", 143))]
    assert "index 1 Failed (exit 143)" in completing_gang_spared(killed, "gang").explanation
    rerun = [snap(6, ended("gang-0", 0), ended("gang-1", 1, "Failed", 143), bound("gang-2", 1))]
    assert "indexes run more than once (a pod replaced): 1" in completing_gang_spared(rerun, "gang").explanation
    pg = b.podgroup(b.jobset(name="gang"))
    event = b.event(pg, "Evict", "Workload doesn't meet the minimum", {"evictor-action-type": STALE_GANG_ACTION})
    flagged = [snap(6, ended("gang-0", 0), bound("gang-1", 1), podgroups=[pg], events=[event])]
    assert f"Evict event(s) of {STALE_GANG_ACTION}" in completing_gang_spared(flagged, "gang").explanation


def test_took_freed_gpus_wants_a_whole_wait_then_a_whole_bind() -> None:
    holder = [bound(f"first-{i}", i, workload="first") for i in range(2)]
    waiting = [b.pod(f"waiting-{i}", workload="waiting", unschedulable="no room") for i in range(2)]
    taken = [bound(f"waiting-{i}", i, workload="waiting") for i in range(2)]
    good = [snap(0, *holder, *waiting), snap(1, ended("first-0", 0, workload="first"), *taken)]
    assert took_freed_gpus(good, "waiting", "first", 2, 2).ok
    overlap = [snap(0, *holder, *taken)]
    assert "while first still held all its 2" in took_freed_gpus(overlap, "waiting", "first", 2, 2).explanation
    never_waited = [snap(0, *holder), snap(1, *taken)]
    assert "never waited whole" in took_freed_gpus(never_waited, "waiting", "first", 2, 2).explanation
    half = [good[0], snap(1, taken[0], waiting[1])]
    assert "1 of 2 pods bound" in took_freed_gpus(half, "waiting", "first", 2, 2).explanation


def test_restarted_whole_wants_every_attempt_bound_whole_and_never_two_at_once() -> None:
    first, again = [bound("g-0", 0), bound("g-1", 1)], [bound("g-2", 0, attempt=1), bound("g-3", 1, attempt=1)]
    whole = [snap(0, *first), snap(1), snap(2, *again)]
    verdict = restarted_whole(whole, "gang", 2, 2)
    assert verdict.ok and "attempt 1: at most 2 of 2 bound" in verdict.explanation
    short = [snap(0, *first), snap(2, again[0])]
    assert "attempt 1: at most 1 of 2 bound" in restarted_whole(short, "gang", 2, 2).explanation
    mixed = [snap(0, first[0], again[0])]
    assert "pods of two attempts bound at once" in restarted_whole(mixed, "gang", 2, 2).explanation


# ------------------------------------------------------------------------------------------------------ rows
def test_every_catalogued_combination_has_lifecycle_rows() -> None:
    for combination in Catalog.load().combinations:
        rows = expectations_for(combination).lifecycle
        assert rows.kai.podgroup_kept
        assert rows.jobset.restarting_condition == (combination.jobset.version == "v0.12.0")
        if combination.kai.version.startswith("v0.16"):
            assert rows.kai.completing_gang_evicted and "#2012" in rows.kai.completing_gang_evicted
            assert not rows.kai.staleness_grace_annotation


@pytest.mark.parametrize(
    ("version", "gap"),
    [("v0.16.8", True), ("v0.16.9", True), ("v0.17.0", True), ("v0.17.1", False), ("v0.17.2", False),
     ("v0.17:main", False), ("v0.17:v0.17", False), ("v0.17:pr-42", False)],
)  # fmt: skip
def test_the_stale_gang_gap_is_per_patch_release(version: str, gap: bool) -> None:
    """A build has the fix where the known-bugs table says so: the read ``main`` and ``v0.17`` heads carry it, and an
    unread build (a PR's) counts as newer than every release; v0.16.9 has no backport."""
    minor, _, build = version.partition(":")
    row = KAI_LIFECYCLE_ROWS[minor if build else version.rsplit(".", 1)[0]]
    version = build or version
    found = row.completing_gang_gap(version)
    assert (found is not None) is gap
    if found:
        assert "#1968" in found and ("inferred" in found) is version.startswith("v0.17")


# ---------------------------------------------------------------------------------------- the workload itself
@pytest.mark.parametrize(
    ("env", "index", "expected"),
    [({}, 0, None), (lifetime_env(10), 3, (10.0, 0)), (lifetime_env(10, exit_code=1, exit_index=0), 1, None),
     (lifetime_env(10, exit_code=1, exit_index=0), 0, (10.0, 1)), (lifetime_env(10, stagger_seconds=5), 2, (20.0, 0))],
)  # fmt: skip
def test_planned_end_states_the_lifetime_contract(env: dict, index: int, expected) -> None:
    assert planned_end(env, index) == expected


def run_workload(env: dict[str, str], terminate: bool = False) -> tuple[int, float]:
    """The workload's exit code, and the seconds it took: from its start, or with ``terminate`` from the SIGTERM."""
    started = time.monotonic()
    process = subprocess.Popen(WORKLOAD_COMMAND, env={"PATH": os.environ.get("PATH", ""), **env})
    if terminate:  # once the script waits on its sleep (its trap is set by then), as a kubelet would find it
        children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
        eventually(
            lambda: Observation(bool(children.read_text().strip()), "the workload sleeps"),
            what="the workload to start sleeping",
            timeout=10,
        )
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
    return process.wait(timeout=60), time.monotonic() - started


def test_the_workload_command_ends_as_its_environment_says() -> None:
    code, took = run_workload({**lifetime_env(1, exit_code=3, exit_index=1), "JOB_COMPLETION_INDEX": "1"})
    # At its 1 s lifetime, not before; the upper bound is generous (a busy machine starts a shell slowly) and still
    # far below the 60 s a workload that ignored its lifetime would be waited for.
    assert code == 3 and 0.9 < took < 20


def test_the_workload_command_ends_at_once_on_sigterm_whatever_its_lifetime() -> None:
    for env in ({}, lifetime_env(30), {**lifetime_env(1, exit_index=1), "JOB_COMPLETION_INDEX": "0"}):
        code, took = run_workload(env, terminate=True)
        # Each lifetime here is 30 s or more: an exit within 10 s of the signal is the trap's, however busy the machine.
        assert code == EVICTED_EXIT_CODE and took < 10, env
