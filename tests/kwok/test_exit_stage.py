"""The suite's exit stage (clusters/kwok/stages.py ``EXIT_STAGE``): on a kwok fake node a pod whose workload has a
lifetime ends as ``WORKLOAD_SCRIPT`` ends on a kubelet, played by the fake kwok from the Stage's own jq and Go
template (tests/fakes/kwok.py), on a clock the test moves. Every pod is the suite's runtime pod as the Job controller
makes it: the ``node`` container with Trainer's env, ``JOB_COMPLETION_INDEX`` a fieldRef, the index annotated."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

import pytest
import yaml

from kai_conformance.clusters.kwok import stages as kwok_stages
from kai_conformance.clusters.suite_stack import (
    COMPLETION_INDEX_ENV,
    EVICTED_EXIT_CODE,
    RUNTIME,
    lifetime_env,
    planned_end,
    replicated_job,
)
from kai_conformance.fixtures.kube import kinds
from tests.fakes.kube import FakeKube
from tests.fakes.kwok import FakeKwok, ManualClock, choose, pod_ready_stage, query, render_status, served_json

NODE = "kc-kwok-0001"
NS = "default"


def cluster() -> tuple[FakeKube, ManualClock]:
    """kwok with the stages the suite installs on kind: the release's pod-ready and the suite's own."""
    clock = ManualClock()
    fake = FakeKube(clock=clock)
    FakeKwok(fake)
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    fake.put(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "annotations": {"kwok.x-k8s.io/node": "fake"}}}
    )
    for stage in [pod_ready_stage(), *kwok_stages.suite_stages()]:
        fake.put(stage)
    return fake, clock


def workload_pod(name: str, index: int | None, env: dict[str, str], *, finalizers: list[str] | None = None) -> dict:
    """A pod of the suite's runtime, as the Job controller creates it and KAI binds it."""
    spec = replicated_job("node", "busybox")["template"]["spec"]["template"]["spec"]
    container = spec["containers"][0]
    container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    meta: dict[str, Any] = {"name": name, "namespace": NS, "labels": {"app": RUNTIME}}
    if index is not None:
        container["env"].append({"name": COMPLETION_INDEX_ENV, "valueFrom": {"fieldRef": {
            "fieldPath": f"metadata.annotations['{kwok_stages.COMPLETION_INDEX_ANNOTATION}']"}}})  # fmt: skip
        meta["annotations"] = {kwok_stages.COMPLETION_INDEX_ANNOTATION: str(index)}
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {**spec, "nodeName": NODE}}


def start(fake: FakeKube, *pods: dict) -> None:
    for pod in pods:
        fake.put(pod)
    assert {phase(fake, p["metadata"]["name"]) for p in pods} == {"Running"}  # pod-ready played on the next call


def phase(fake: FakeKube, name: str) -> str | None:
    pod = fake.find(kinds.POD, name, NS)
    return None if pod is None else pod["status"]["phase"]


def terminated(fake: FakeKube, name: str) -> list[dict]:
    return [s["state"].get("terminated") for s in fake.get(kinds.POD, name, NS)["status"]["containerStatuses"]]


def test_pod_0_exits_1_after_its_lifetime_and_pod_1_runs_on() -> None:
    fake, clock = cluster()
    env = lifetime_env(2, exit_code=1, exit_index=0)
    start(fake, workload_pod("w-0", 0, env), workload_pod("w-1", 1, env))
    started = fake.get(kinds.POD, "w-0", NS)["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
    clock.advance(1.9)
    assert phase(fake, "w-0") == "Running"
    clock.advance(0.1)
    pod = fake.get(kinds.POD, "w-0", NS)
    assert pod["status"]["phase"] == "Failed"
    assert terminated(fake, "w-0") == [{"exitCode": 1, "reason": "Error", "startedAt": started,
                                        "finishedAt": fake._now()}]  # fmt: skip
    ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert ready == {"Initialized": "True", "Ready": "False", "ContainersReady": "False"}
    clock.advance(3600)
    assert phase(fake, "w-1") == "Running"


def test_a_workload_without_a_lifetime_never_ends() -> None:
    fake, clock = cluster()
    start(fake, workload_pod("w-0", 0, {}), workload_pod("plain", None, {"OTHER": "1"}))
    clock.advance(86400)
    assert (phase(fake, "w-0"), phase(fake, "plain")) == ("Running", "Running")


def test_staggered_pods_end_one_stagger_apart_and_exit_0_is_succeeded() -> None:
    fake, clock = cluster()
    env = lifetime_env(2, stagger_seconds=3)
    start(fake, *(workload_pod(f"w-{i}", i, env) for i in range(3)))
    ended: dict[str, float] = {}
    for tick in range(1, 20):
        clock.advance(0.5)
        for i in range(3):
            if f"w-{i}" not in ended and phase(fake, f"w-{i}") != "Running":
                ended[f"w-{i}"] = tick * 0.5
    assert ended == {"w-0": 2.0, "w-1": 5.0, "w-2": 8.0}
    for i in range(3):
        assert phase(fake, f"w-{i}") == "Succeeded"
        assert [(t["exitCode"], t["reason"]) for t in terminated(fake, f"w-{i}")] == [(0, "Completed")]


def test_a_pod_deleted_before_its_end_is_terminated_143_and_its_end_never_plays() -> None:
    fake, clock = cluster()
    start(fake, workload_pod("w-0", 0, lifetime_env(5), finalizers=["example.com/hold"]))
    clock.advance(1)
    fake.delete(kinds.POD, "w-0", NS, allow_foreign=True)
    assert phase(fake, "w-0") == "Running"  # Terminating: kwok has seen the deletion (FakeKwok: at the next call)
    clock.advance(kwok_stages.TERMINATE_DELAY_MS / 1000)
    assert [t["exitCode"] for t in terminated(fake, "w-0")] == [EVICTED_EXIT_CODE]
    clock.advance(60)
    assert phase(fake, "w-0") == "Failed" and [t["exitCode"] for t in terminated(fake, "w-0")] == [EVICTED_EXIT_CODE]
    fake.patch(kinds.POD, "w-0", {"metadata": {"finalizers": None}}, namespace=NS, allow_foreign=True)
    assert phase(fake, "w-0") is None


def test_the_end_is_counted_from_the_start_whenever_kwok_looks_again() -> None:
    """kwok matches a pod again at every new version (and after its own restart): the delay runs to the same
    time, not from the new look."""
    fake, clock = cluster()
    start(fake, workload_pod("w-0", 0, lifetime_env(4)))
    for _ in range(3):
        clock.advance(1)
        fake.patch(kinds.POD, "w-0", {"metadata": {"labels": {"seen": str(clock.now.second)}}}, namespace=NS,
                   allow_foreign=True)  # fmt: skip
    assert phase(fake, "w-0") == "Running"
    clock.advance(1)
    assert phase(fake, "w-0") == "Succeeded"


def test_the_first_container_with_a_lifetime_ends_the_pod_with_its_code() -> None:
    """Unlike a kubelet, kwok ends every container of the pod at once (the suite's pods have one)."""
    fake, clock = cluster()
    pod = workload_pod("init-0", 0, {})
    side = {**pod["spec"]["containers"][0], "name": "side"}
    initializer = {**side, "name": "dataset-initializer",
                   "env": [{"name": k, "value": v} for k, v in lifetime_env(2, exit_code=3).items()]}  # fmt: skip
    pod["spec"]["containers"] = [side, initializer]
    start(fake, pod)
    clock.advance(2)
    assert phase(fake, "init-0") == "Failed"
    assert [t["exitCode"] for t in terminated(fake, "init-0")] == [3, 3]


# ------------------------------------------------------------------------------------------- the contract
ENVS = [
    {}, lifetime_env(7), lifetime_env(7, exit_code=1, exit_index=0), lifetime_env(7, exit_code=1, exit_index=2),
    lifetime_env(3, stagger_seconds=4), lifetime_env(3, exit_code=257), {"KC_RUN_SECONDS": ""},
    {"KC_RUN_SECONDS": "5", "KC_EXIT_INDEX": "", "KC_STAGGER_SECONDS": "", "KC_EXIT_CODE": ""},
]  # fmt: skip


@pytest.mark.parametrize(("env", "index"), list(itertools.product(ENVS, [0, 2])))
def test_the_stage_ends_a_pod_when_and_how_planned_end_says(env: dict[str, str], index: int) -> None:
    """The Stage's jq and template against :func:`clusters.suite_stack.planned_end`, the workload's contract."""
    stage = kwok_stages.exit_stage()
    pod = workload_pod("w", index, env)
    start_time = "2026-11-24T12:00:00Z"
    pod["status"] = {"phase": "Running", "startTime": start_time, "containerStatuses": [
        {"name": "node", "state": {"running": {"startedAt": start_time}}}]}  # fmt: skip
    planned = planned_end(env, index)
    deadline = query(kwok_stages.PLANNED_EXIT_JQ, served_json(pod))
    assert (choose([stage], pod) is not None) is (planned is not None)
    if planned is None:
        assert deadline == []
        return
    begun = dt.datetime.fromisoformat(start_time.replace("Z", "+00:00"))
    assert deadline == [(begun + dt.timedelta(seconds=planned[0])).strftime("%Y-%m-%dT%H:%M:%SZ")]
    status = render_status(stage["spec"]["next"]["statusTemplate"], pod, "2026-11-24T12:10:00Z")
    assert status["phase"] == ("Succeeded" if planned[1] == 0 else "Failed")
    assert [s["state"]["terminated"]["exitCode"] for s in status["containerStatuses"]] == [planned[1]]


def test_no_two_of_the_stages_the_suite_installs_compete_for_a_pod() -> None:
    """kwok would pick one at random (lifecycle.go ``Match``); ``choose`` fails on that."""
    stages = [pod_ready_stage(), *kwok_stages.suite_stages()]
    playing = set()
    for phase_, deleted, env, held in itertools.product(
        ("Pending", "Running", "Succeeded", "Failed"), (False, True), ({}, lifetime_env(1)), (False, True)
    ):
        pod = workload_pod("w", 0, env, finalizers=["example.com/hold"] if held else None)
        pod["status"] = {"phase": phase_, "startTime": "2026-11-24T12:00:00Z"}
        if deleted:
            pod["metadata"]["deletionTimestamp"] = "2026-11-24T12:00:01Z"
        chosen = choose(stages, pod)
        playing.add(chosen["metadata"]["name"] if chosen else None)
        if chosen is not None and chosen["metadata"]["name"] == kwok_stages.EXIT_STAGE:
            assert (phase_, deleted, bool(env)) == ("Running", False, True)
    assert playing == {None, "pod-ready", *(s["metadata"]["name"] for s in kwok_stages.suite_stages())}


def test_the_stages_print_as_yaml_for_an_operator(capsys: pytest.CaptureFixture[str]) -> None:
    assert kwok_stages.main([]) == 0
    printed = capsys.readouterr().out
    assert list(yaml.safe_load_all(printed)) == kwok_stages.suite_stages()
    assert "statusTemplate: |\n      {{ $now := Now }}" in printed  # templates as blocks, as kwok's own files


# ------------------------------------------------------------------------------------------- the fake itself
@pytest.mark.parametrize("obj", [{"a": {"b": 1}}, {"a": None}, {"a": "x"}, {}, {"a": {"b": []}}, {"a": [1]}])
def test_the_fake_kwok_reads_a_plain_path_as_jq_does(obj: dict) -> None:
    import jq

    try:
        expected = [v for v in jq.compile(".a.b").input_value(obj).all() if v is not None]
    except ValueError:
        expected = None
    assert query(".a.b", obj) == expected


def test_the_fake_go_template_keeps_gos_scopes_and_truth() -> None:
    from tests.fakes.gotemplate import TemplateError, render

    text = "{{ $n := 0 }}{{ range .xs }}{{ $seen := . }}{{ if and $seen (not $n) }}{{ $n = $seen }}{{ end }}{{ end }}{{ $n }}"
    assert render(text, {"xs": [0, "", 7, 9]}) == "7"  # `=` reaches the outer $n; 0 and "" are false
    assert render("{{ .missing }}|{{ .a.b | Quote }}", {"a": {"b": 2}}) == '<no value>|"2"'
    with pytest.raises(TemplateError, match="seen"):
        render("{{ range .xs }}{{ $seen := . }}{{ end }}{{ $seen }}", {"xs": [1]})  # scoped to the range
