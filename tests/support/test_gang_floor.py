"""The gang floor on hand-made objects (suites/support/gang_floor.py): the floor read from every PodGroup shape, the
floor each KAI row's podgrouper makes of the chain, and the culprit a failed gang verdict names — the podgrouper, the
TrainJob or the scheduler. tests/flows/test_diagnosis.py shows the same end to end on a broken simulated stack."""

from __future__ import annotations

import dataclasses
from typing import Any

from kai_conformance.suites.support import components as comp
from kai_conformance.suites.support import diagnosis as dg
from kai_conformance.suites.support.expectations import MIN_MEMBER_ANNOTATION, kai_row
from kai_conformance.suites.support.gang_floor import Floor, asked, culprit, podgroup_floor
from kai_conformance.suites.support.snapshot import Snapshot, parse_time
from tests import builders as b

T0 = parse_time(b.T0) or 0.0
KEY = MIN_MEMBER_ANNOTATION


def leaf(name: str, parent: str, min_member: int) -> dict[str, Any]:
    return {"name": name, "parent": parent, "minMember": min_member}


def workload(
    *,
    pods: int = 2,
    bound: int = 0,
    spec: dict[str, Any],
    replicated_jobs: list[dict[str, Any]] | None = None,
    trainjob_annotations: dict[str, str] | None = None,
) -> Snapshot:
    """TrainJob → JobSet (``replicated_jobs``, default one ``node`` of ``pods``) → pods (``bound`` of them) →
    PodGroup (``spec``), as the diagnosis reads it."""
    tj = b.trainjob()
    tj["metadata"]["annotations"] = dict(trainjob_annotations or {})
    js = b.jobset(tj)
    js["spec"] = {"replicatedJobs": replicated_jobs or [{"name": "node", "template": {"spec": {"parallelism": pods}}}]}
    job = b.job(js)
    job["metadata"]["labels"][dg.REPLICATED_JOB_LABEL] = "node"
    pg = b.podgroup(js, spec=spec)
    return Snapshot(
        taken_at=T0,
        pods=tuple(b.gang(pods, bound)),
        podgroups=(pg,),
        trainjobs=(tj,),
        jobsets=(js,),
        jobs=(job,),
    )


SUBGROUPS_OF_2 = {
    "minSubGroup": 1,
    "subGroups": [{"name": "node", "minSubGroup": 1}, leaf("node-replica-0", "node", 2)],
}
SUBGROUPS_OF_1 = {
    "minSubGroup": 1,
    "subGroups": [{"name": "node", "minSubGroup": 1}, leaf("node-replica-0", "node", 1)],
}


# ------------------------------------------------------------------------------------------------- the floor
def test_the_floor_is_read_from_every_shape() -> None:
    assert podgroup_floor(b.podgroup(b.jobset(), spec={"minMember": 3})) == Floor(3, ("spec.minMember = 3",))
    assert podgroup_floor(b.podgroup(b.jobset(), spec={})) is None
    assert podgroup_floor(b.podgroup(b.jobset(), spec=SUBGROUPS_OF_2)) == Floor(
        2, ("spec.subGroups[node-replica-0].minMember = 2",)
    )
    two_replicated_jobs = {
        "minSubGroup": 1,  # one of the two replicatedJobs is enough (the JobSet's annotation caps the root)
        "subGroups": [
            {"name": "node", "minSubGroup": 2},
            leaf("node-replica-0", "node", 2),
            leaf("node-replica-1", "node", 2),
            {"name": "aux", "minSubGroup": 1},
            leaf("aux-replica-0", "aux", 1),
        ],
    }
    floor = podgroup_floor(b.podgroup(b.jobset(), spec=two_replicated_jobs))
    assert floor is not None and floor.value == 1, "the cheapest replicatedJob: aux's one pod"
    assert floor.where.endswith("spec.subGroups[aux-replica-0].minMember = 1, spec.minSubGroup = 1")
    two_replicated_jobs["minSubGroup"] = 2
    assert podgroup_floor(b.podgroup(b.jobset(), spec=two_replicated_jobs)) == Floor(
        5,
        (
            "spec.subGroups[node-replica-0].minMember = 2",
            "spec.subGroups[node-replica-1].minMember = 2",
            "spec.subGroups[aux-replica-0].minMember = 1",
        ),
    )


def test_each_row_reads_the_floor_where_its_podgrouper_does() -> None:
    v17, v15, v14, v13 = (kai_row(v) for v in ("v0.17.0", "v0.15.3", "v0.14.7", "v0.13.0"))
    plain = workload(spec={})
    assert (wanted := asked(plain, v17)) is not None and wanted.value == 2
    assert "from its replicatedJob template's annotation kai.scheduler/batch-min-member, else the Job's" in wanted.reads
    assert wanted.carries == f"replicatedJob node: parallelism 2, no {KEY}"
    annotated = workload(
        spec={},
        replicated_jobs=[
            {"name": "node", "template": {"metadata": {"annotations": {KEY: "1"}}, "spec": {"parallelism": 2}}}
        ],
    )
    assert (wanted := asked(annotated, v17)) is not None and (wanted.value, wanted.carries) == (
        1,
        f"replicatedJob node: {KEY}=1",
    )
    assert (wanted := asked(plain, v15)) is not None and wanted.value == 1
    assert "the suite's gang TrainJobs carry it: KaiRow.gang_annotations" in wanted.carries
    on_trainjob = workload(spec={}, trainjob_annotations={KEY: "2"})
    assert (wanted := asked(on_trainjob, v15)) is not None and (wanted.value, wanted.carries) == (
        2,
        f"the TrainJob carries {KEY}=2",
    )
    assert (wanted := asked(plain, v14)) is not None and wanted.value == 2
    assert (wanted := asked(on_trainjob, v13)) is not None and wanted.value == 2
    assert "reads no annotation" in wanted.reads
    assert asked(Snapshot(taken_at=T0), v17) is None


# ---------------------------------------------------------------------------------------------- the culprit
def test_a_floor_below_the_gang_names_the_podgrouper_with_the_value_and_where_kai_reads_it() -> None:
    snap = workload(bound=1, spec=SUBGROUPS_OF_1)
    found = culprit(snap, 2, kai_row("v0.17.0"))
    assert found is not None and found.component is comp.PODGROUPER
    text = str(found)
    assert text.startswith("gang floor: KAI podgrouper (groups the pods into a PodGroup): PodGroup pg-gang-")
    assert "sets the gang's floor to 1 (spec.subGroups[node-replica-0].minMember = 1), below the gang's 2 pods" in text
    assert "1 of 2 pods are bound" in text
    assert "the chain asks for 2 (replicatedJob node: parallelism 2, no kai.scheduler/batch-min-member)" in text
    unknown = culprit(snap, 2)
    assert unknown is not None and unknown.component is comp.PODGROUPER, "no row: still the podgrouper, unexplained"


def test_a_flat_floor_the_trainjob_never_asked_for_names_the_trainjob() -> None:
    found = culprit(workload(bound=1, spec={"minMember": 1}), 2, kai_row("v0.15.3"))
    assert found is not None and found.component is None
    assert "sets the gang's floor to 1 (spec.minMember = 1), below the gang's 2 pods, as the chain asks" in str(found)
    assert f"neither the JobSet nor the TrainJob carries {KEY}: a gang of every pod needs it on KAI v0.15" in str(found)
    podgrouper = culprit(workload(spec={"minMember": 1}, trainjob_annotations={KEY: "2"}), 2, kai_row("v0.15.3"))
    assert podgrouper is not None and podgrouper.component is comp.PODGROUPER
    assert f"the chain asks for 2 (the TrainJob carries {KEY}=2)" in str(podgrouper)


def test_a_right_floor_with_part_of_the_gang_bound_names_the_scheduler() -> None:
    found = culprit(workload(bound=1, spec=SUBGROUPS_OF_2), 2, kai_row("v0.17.0"))
    assert found is not None and found.component is comp.SCHEDULER
    assert (
        "which holds the gang's 2 pods, yet 1 of 2 pods are bound: it placed part of a gang whose floor is right"
        in (str(found))
    )
    assert culprit(workload(bound=2, spec=SUBGROUPS_OF_2), 2, kai_row("v0.17.0")) is None
    assert culprit(workload(bound=0, spec=SUBGROUPS_OF_2), 2, kai_row("v0.17.0")) is None


def bindrequest(pod: str, phase: str | None) -> dict[str, Any]:
    return {"metadata": {"name": pod}, "spec": {"podName": pod}, "status": {"phase": phase} if phase else {}}


def test_a_gang_the_scheduler_placed_whole_and_the_binder_has_part_bound_does_not_name_the_scheduler() -> None:
    """Real kind, 1,000 fake nodes (2026-11-27): 13 of 16 pods bound, the other 3 named by BindRequests without a
    phase. The scheduler placed the whole gang; the chain's binder link names the binder, the gang floor nobody."""
    snap = workload(bound=1, spec=SUBGROUPS_OF_2)
    pods = [p["metadata"]["name"] for p in snap.pods]
    placed = dataclasses.replace(snap, bindrequests=(bindrequest(pods[0], "Succeeded"), bindrequest(pods[1], None)))
    assert culprit(placed, 2, kai_row("v0.17.0")) is None
    failed = dataclasses.replace(snap, bindrequests=(bindrequest(pods[0], "Succeeded"), bindrequest(pods[1], "Failed")))
    found = culprit(failed, 2, kai_row("v0.17.0"))
    assert found is not None and found.component is comp.SCHEDULER  # nothing is binding the rest


def test_the_diagnosis_reads_the_bindrequests_it_gathered_apart_from_the_snapshot() -> None:
    """As in a real run (1,000 fake nodes on kind): the snapshot holds no BindRequest, the diagnosis' facts do."""
    snap = workload(bound=1, spec=SUBGROUPS_OF_2)
    pods = [p["metadata"]["name"] for p in snap.pods]
    requests = (bindrequest(pods[0], "Succeeded"), bindrequest(pods[1], None))
    assert not snap.bindrequests
    found = dg.diagnose(dg.Facts(snap, bindrequests=requests, access={}), "gang", 2, kai=kai_row("v0.17.0"))
    assert found.gang is None, found.text()
    unread = dg.diagnose(dg.Facts(snap, bindrequests=None, access={}), "gang", 2, kai=kai_row("v0.17.0"))
    assert unread.gang is not None and unread.gang.component is comp.SCHEDULER  # none read: as before


def test_an_elastic_gang_is_judged_against_its_minimum() -> None:
    elastic = workload(pods=4, bound=2, spec={"minMember": 2})
    assert culprit(elastic, 4, kai_row("v0.15.3"), minimum=2) is None, "bound at its minimum: the elastic phase"
    below = culprit(workload(pods=4, bound=1, spec={"minMember": 2}), 4, kai_row("v0.15.3"), minimum=2)
    assert below is not None and below.component is comp.SCHEDULER
    assert "which holds the elastic gang's minimum of 2 pods, yet 1 of 4 pods are bound" in str(below)


def test_the_diagnosis_carries_the_culprit_one_object_away() -> None:
    snap = workload(bound=2, spec=SUBGROUPS_OF_1)
    facts = dg.Facts(snap, access={})
    found = dg.diagnose(facts, "gang", 2, kai=kai_row("v0.17.0"))
    assert found.gang is not None and found.gang.component is comp.PODGROUPER
    lines = found.text().splitlines()
    assert lines[1] == "  every link is there, but the PodGroup does not carry what the chain asks for:"
    assert lines[-1].startswith("  gang floor: KAI podgrouper"), "after what the PodGroup got"
    no_provenance = dg.Diagnosis("gang", found.chain, None, gang=found.gang).text().splitlines()
    assert no_provenance[1:] == [
        "  every link is there, but the gang is one object away from right:",
        f"  {found.gang}",
    ]
    assert dg.diagnose(dg.Facts(workload(bound=2, spec=SUBGROUPS_OF_2), access={}), "gang", 2).gang is None
