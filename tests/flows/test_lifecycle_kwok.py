"""The lifecycle suite end to end with kwok in place of every kubelet (issue 19: "on the real controllers", whose nodes
are kwok's): the harness of tests/flows/test_lifecycle.py with every node a kwok node, played by the fake kwok with
the stages the suite installs on kind (the release's pod-ready and clusters/kwok/stages.py). Workloads end only by
the exit stage's jq and template; deleted pods by the terminate and remove stages. Every case passes as it does on
simulated kubelets, the known KAI gap (#1968) is the same strict xfail, and the control fires."""

from __future__ import annotations

import dataclasses

import pytest

from kai_conformance.clusters.kwok import stages as kwok_stages
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.waits import ConditionViolated
from kai_conformance.suites import test_lifecycle as suite
from kai_conformance.suites.support.expectations import jobset_row
from tests.fakes.jobset_lifecycle import JobSetLifecycle
from tests.fakes.kwok import KWOK_ANNOTATION, FakeKwok, plays_kwok_nodes, pod_ready_stage
from tests.flows import NAMESPACE, Harness
from tests.flows.test_lifecycle import Request, lifecycle, run, verdicts


def on_kwok(flow, monkeypatch) -> Harness:
    """The lifecycle harness with every node a kwok node."""
    h = lifecycle(flow, monkeypatch)
    assert h.controllers is not None
    for node in h.controllers.layout.nodes:  # the simulated scheduler places by the layout; kwok reads Node objects
        h.fake.put({"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": node.name, "labels": dict(node.labels), "annotations": {KWOK_ANNOTATION: "fake"}}})  # fmt: skip
    FakeKwok(h.fake)
    for stage in [pod_ready_stage(), *kwok_stages.suite_stages()]:
        h.fake.put(stage)
    assert plays_kwok_nodes(h.fake)  # the simulated kubelet leaves every pod to kwok
    return h


def played(h: Harness, stage: str) -> set[str]:
    """The pods kwok played ``stage`` on."""
    return {pod for name, _, pod in h.fake.fake_kwok.played if name == stage}  # type: ignore[attr-defined]


def test_a_completed_gang_releases_its_gpus_on_kwok_nodes(flow, monkeypatch) -> None:
    h = on_kwok(flow, monkeypatch)
    run(suite.test_a_completed_gang_releases_its_gpus_to_a_gang_that_waited_whole, suite.COMPLETION[0], h)
    seen = verdicts(h)
    for detector in ("trainjob-complete", "pods-ended", "queue-released", "took-the-freed-gpus"):
        assert seen[detector].ok, seen[detector]
    assert len(played(h, kwok_stages.EXIT_STAGE)) == h.ctx.layout.total  # the whole-cluster gang: 1 GPU a pod


def test_a_gang_completing_apart_on_kwok_nodes_is_the_same_strict_xfail(flow, monkeypatch) -> None:
    h = on_kwok(flow, monkeypatch)
    request = Request()
    with pytest.raises(ConditionViolated, match="completing-gang-spared"):
        run(suite.test_a_gang_completing_pod_by_pod_is_not_evicted_as_stale, suite.STAGGERED[0], h, request=request)
    (marker,) = request.markers
    assert marker.kwargs["strict"] and "#1968" in marker.kwargs["reason"]
    assert played(h, kwok_stages.EXIT_STAGE)  # pod 0 ended by the stage; pod 1, evicted, went with its deletion


def test_a_failed_pod_restarts_the_gang_on_kwok_nodes_until_it_fails(flow, monkeypatch) -> None:
    monkeypatch.setattr(JobSetLifecycle, "jobset_version", "v0.12.0")
    h = on_kwok(flow, monkeypatch)
    h.expect = dataclasses.replace(h.expect, jobset=jobset_row("v0.12.0"))
    run(suite.test_a_failed_pod_restarts_the_whole_gang_until_no_restart_is_left, suite.RESTART[0], h)
    seen = verdicts(h)
    assert seen["restarted-whole"].ok and seen["jobset-restarts"].ok and seen["queue-released"].ok
    jobset = h.fake.get(kinds.JOB_SET, "restarts", NAMESPACE)
    assert jobset["status"]["restarts"] == 1 and jobset["status"]["terminalState"] == "Failed"
    assert len(played(h, kwok_stages.EXIT_STAGE)) == 2  # pod 0 of each attempt exits 1; the others are deleted


@pytest.mark.parametrize("case", suite.SUSPEND, ids=lambda c: c.id)
def test_a_suspended_gang_on_kwok_nodes_comes_back_whole(flow, monkeypatch, case) -> None:
    h = on_kwok(flow, monkeypatch)
    run(suite.test_a_suspended_gang_releases_everything_and_resumes_whole_or_waits_whole, case, h, kube=h.fake)
    seen = verdicts(h)
    assert seen["queue-released"].ok and seen["trainjob-suspended"].ok
    assert played(h, kwok_stages.EXIT_STAGE) == set()  # these run until killed


@pytest.mark.parametrize("case", suite.DELETION, ids=lambda c: c.id)
def test_a_deleted_trainjob_on_kwok_nodes_leaves_nothing(flow, monkeypatch, case) -> None:
    h = on_kwok(flow, monkeypatch)
    run(suite.test_a_deleted_trainjob_leaves_nothing_behind_and_frees_its_gpus, case, h)
    seen = verdicts(h)
    assert seen["nothing-left"].ok and seen["queue-released"].ok
    assert played(h, kwok_stages.EXIT_STAGE) == set()


def test_the_control_fires_on_kwok_nodes(flow, monkeypatch) -> None:
    h = on_kwok(flow, monkeypatch)
    run(suite.test_control_the_completion_detector_fires_on_a_gang_that_failed, suite.CONTROL[0], h)
    fired, failed = h.record.record.verdicts[-2:]
    assert fired.detector == "trainjob-complete" and not fired.ok and fired.as_expected
    assert failed.detector == "trainjob-failed" and failed.ok
    assert len(played(h, kwok_stages.EXIT_STAGE)) == 1
