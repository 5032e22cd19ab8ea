"""The kwok probe: once the fake nodes are Ready, a pod pinned to one of them must run, and with the suite's stages
end as a kubelet ends it; a kwok that does not is named, with its stages and the fix, within the probe's budget
(30 s, so within the first minute) instead of every case timing out. Each fault below is one the probe must name."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kai_conformance.clusters.kwok import stages as kwok_stages
from kai_conformance.clusters.kwok.probe import FINALIZER, prove_kwok_runs_pods
from kai_conformance.clusters.provision import acquire, release
from kai_conformance.clusters.suite_stack import EVICTED_EXIT_CODE
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.ownership import stamp
from kai_conformance.fixtures.waits import TimeoutPolicy
from tests.fakes.installation import SimulatedStack
from tests.fakes.kube import FakeKube
from tests.fakes.kwok import (
    FakeKwok,
    ScaledClock,
    pod_delete_stage,
    pod_ready_stage,
    stage,
    stage_fast_manifests,
)
from tests.kwok.test_fake_nodes import (
    RUN_ID,
    cluster_kwok_stages,
    existing_settings,
    fake_node_names,
    run_context,
    stack,  # noqa: F401  (fixture)
    toolbox,
    with_nodes,
)

pytestmark = pytest.mark.usefixtures("fast_polling")

TIMEOUTS = TimeoutPolicy(scale=0.01)  # the probe's budget: 0.3 s


@dataclass(frozen=True)
class BudgetsAsked(TimeoutPolicy):
    """A timeout policy that records the name of every budget it is asked for."""

    names: list[str] = field(default_factory=list)

    def __call__(self, budget: str) -> float:
        self.names.append(budget)
        return super().__call__(budget)


NODE = "kc-kwok-0001"


def kwok_cluster(fake: FakeKube, *stages: dict[str, Any], config_stages: list[dict[str, Any]] | None = None) -> None:
    """A fake node kwok manages, and kwok playing ``stages`` (Stage objects) and ``config_stages`` (its config)."""
    fake.clock = ScaledClock(1 / 0.01)  # TIMEOUTS' scale: the terminate stage's 500 ms take 5 ms here
    FakeKwok(fake, stages=config_stages)
    fake.put({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE,
              "annotations": {"kwok.x-k8s.io/node": "fake"}}})  # fmt: skip
    for each in stages:
        fake.put(each)


def suite_kwok(fake: FakeKube, *, exit_code: int = EVICTED_EXIT_CODE) -> None:
    """kwok as the suite installs it on kind: the release's pod-ready and the suite's own pod-ending stages."""
    kwok_cluster(fake, pod_ready_stage(), *(stamp(s, RUN_ID) for s in kwok_stages.suite_stages(exit_code)))


def probe(fake: FakeKube, *, suite_stages: bool) -> dict[str, Any]:
    return prove_kwok_runs_pods(fake, RUN_ID, "busybox", NODE, TIMEOUTS, suite_stages=suite_stages, suffix="t")


def nothing_left(fake: FakeKube) -> bool:
    return fake.find(kinds.NAMESPACE, "kc-kwok-probe-t") is None and fake.objects(kinds.POD) == []


def test_with_the_suites_stages_the_probe_pod_runs_then_ends_failed_with_the_workloads_exit_code(
    fake: FakeKube,
) -> None:
    suite_kwok(fake)
    seen = probe(fake, suite_stages=True)
    assert seen["node"] == NODE
    assert seen["deleted_pod"] == (
        f"phase Failed, every container terminated with exit code {EVICTED_EXIT_CODE}; held by its finalizer, "
        "removed once released"
    )
    assert seen["stages"] == sorted(["pod-ready", kwok_stages.TERMINATE_STAGE, kwok_stages.REMOVE_STAGE,
                                     kwok_stages.EXIT_STAGE])  # fmt: skip
    applied = next(c.detail for c in fake.operations("apply") if c.kind == "Pod")
    assert applied["spec"]["nodeName"] == NODE and "schedulerName" not in applied["spec"]  # only kwok moves it
    assert applied["metadata"]["finalizers"] == [FINALIZER]
    assert applied["spec"]["tolerations"][0]["key"] == "kwok.x-k8s.io/node"
    assert nothing_left(fake)


def test_a_kwok_whose_stages_never_make_a_pod_running_is_named_with_its_stages_and_the_fix(fake: FakeKube) -> None:
    kwok_cluster(fake, *(stamp(s, RUN_ID) for s in kwok_stages.suite_stages()))  # pod-ready missing
    asked = BudgetsAsked(scale=TIMEOUTS.scale)
    with pytest.raises(errors.InfrastructureError) as failed:
        prove_kwok_runs_pods(fake, RUN_ID, "busybox", NODE, asked, suite_stages=True, suffix="t")
    assert set(asked.names) == {"api"}  # its own budget, not the cases' many timeouts (asked, not timed: load-proof)
    message = str(failed.value)
    assert "kwok did not run the probe pod kc-kwok-probe-t/kwok-probe on fake node kc-kwok-0001" in message
    assert "(phase Pending, no container status)" in message
    stages = ", ".join(sorted(s["metadata"]["name"] for s in kwok_stages.suite_stages()))
    assert f"kwok's pod stages: {stages}." in message
    assert "fix: the suite installed kwok with the pod stages pod-ready," in message
    assert nothing_left(fake)


def test_on_an_existing_cluster_a_kwok_without_pod_stages_is_told_to_apply_them(fake: FakeKube) -> None:
    kwok_cluster(fake)
    with pytest.raises(
        errors.InfrastructureError, match=r"kwok's pod stages: none\. fix: give the cluster's kwok"
    ) as e:
        probe(fake, suite_stages=False)
    assert "kubectl apply -f https://github.com/kubernetes-sigs/kwok/releases/download/v0.8.0/stage-fast.yaml" in str(
        e.value
    )
    assert nothing_left(fake)


def test_a_kwok_without_the_stage_crd_is_judged_by_what_it_does(fake: FakeKube) -> None:
    fake.unserve(kinds.KWOK_STAGE)
    kwok_cluster(fake, config_stages=[pod_ready_stage(), pod_delete_stage()])
    seen = probe(fake, suite_stages=False)
    assert seen["stages"] is None and seen["deleted_pod"].startswith("not judged")
    assert nothing_left(fake)
    fake.fake_kwok.stages = []  # type: ignore[attr-defined]
    with pytest.raises(
        errors.InfrastructureError, match=r"unknown \(the Stage CRD stages\.kwok\.x-k8s\.io is not served"
    ):
        probe(fake, suite_stages=False)


def test_a_fast_pod_delete_that_ignores_finalizers_is_named(fake: FakeKube) -> None:
    kwok_cluster(fake, pod_ready_stage(), pod_delete_stage())
    with pytest.raises(errors.InfrastructureError, match=f"while its finalizer {FINALIZER} still held it") as failed:
        probe(fake, suite_stages=True)
    assert "a 'fast' pod-delete stage plays this cluster's pods" in str(failed.value)
    assert nothing_left(fake)


def test_a_deleted_pod_that_ends_with_another_exit_code_is_named(fake: FakeKube) -> None:
    suite_kwok(fake, exit_code=0)
    with pytest.raises(errors.InfrastructureError) as failed:
        probe(fake, suite_stages=True)
    message = str(failed.value)
    assert f"did not end the deleted probe pod kc-kwok-probe-t/kwok-probe within 0s as a kubelet would (phase " \
           f"Failed, every container terminated with exit code {EVICTED_EXIT_CODE}; seen: phase Failed, container " \
           "node terminated (exit code 0), being deleted)" in message  # fmt: skip
    assert nothing_left(fake)


def test_a_pod_ended_at_once_is_named(fake: FakeKube) -> None:
    complete = stage("pod-complete", "Pod", [{"key": ".status.phase", "operator": "In", "values": ["Pending"]}],
                     {"statusTemplate": "phase: Succeeded\n"})  # fmt: skip
    kwok_cluster(fake, complete)
    with pytest.raises(errors.InfrastructureError, match="on fake node kc-kwok-0001 Succeeded at once"):
        probe(fake, suite_stages=False)
    assert nothing_left(fake)


# ------------------------------------------------------------------------------------------------ the run
def test_on_kind_a_kwok_that_never_runs_pods_stops_provisioning_and_the_fake_nodes_go(
    stack: SimulatedStack,  # noqa: F811
    fake: FakeKube,
    tmp_path: Path,
) -> None:
    from kai_conformance.fixtures.plugin.options import CATALOG
    from tests.fakes.installation import make_settings

    tools = toolbox(stack)
    fetch = tools.fetch
    tools.fetch = lambda url, timeout: (
        stage_fast_manifests(pod_ready=False) if url == CATALOG.kwok["stages"] else fetch(url, timeout)
    )
    settings = with_nodes(make_settings(tmp_path, reuse_cluster="kc-test"), 2)
    with pytest.raises(errors.InfrastructureError, match="kwok did not run the probe pod") as failed:
        acquire(settings, run_context(tmp_path), tools)
    assert (
        "kwok's pod stages: kai-conformance-pod-exit, kai-conformance-pod-remove, kai-conformance-pod-terminate, "
        "pod-ready." in str(failed.value)
    )
    assert fake_node_names(fake) == ["kc-test-kwok-0001", "kc-test-kwok-0002"]
    assert [n for n in fake.objects(kinds.NAMESPACE) if n["metadata"]["name"].startswith("kc-kwok-probe-")] == []
    release(settings, run_context(tmp_path), toolbox(stack))
    assert fake_node_names(fake) == []
    with pytest.raises(errors.InfrastructureError, match="failed earlier in this run: kwok did not run the probe pod"):
        acquire(settings, run_context(tmp_path), toolbox(stack))  # another worker: the same message at once


def test_the_probe_budget_is_within_the_first_minute() -> None:
    assert TimeoutPolicy()("api") <= 30  # Running, or one clear failure, 30 s after the nodes are Ready


def test_on_an_existing_cluster_with_its_own_stages_the_probe_passes(
    stack: SimulatedStack,  # noqa: F811
    fake: FakeKube,
    tmp_path: Path,
) -> None:
    cluster_kwok_stages(fake)
    settings = with_nodes(existing_settings(tmp_path, kwok_managed=True), 1)
    state = acquire(settings, run_context(tmp_path), toolbox(stack))
    assert state.stack["kwok"]["probe"]["node"] == "prod-kwok-0001"
    assert state.stack["kwok"]["probe"]["removed"] == "everything"
