"""KAI sized for a run with fake nodes as KAI's own scale tests size it: only unset kai-config fields filled, the
rollout awaited (old pods gone), the fields removed again at the run's end or after a killed run, a stuck operator
named with its fix; on kind with fake nodes only, and never with --kai-sizing operator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kai_conformance.clusters.install import kai_sizing
from kai_conformance.clusters.install.kai_sizing import FILLED_ANNOTATION, SCALE_TEST_LIMITS, rollout_pending
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.plugin.options import CATALOG
from kai_conformance.fixtures.waits import TimeoutPolicy
from tests import crd_schemas
from tests.fakes.installation import KAI_REGISTRY, deployment
from tests.fakes.kai.operator import DEFAULT_LIMITS, SimulatedOperator, kai_config
from tests.fakes.kube import FakeKube

pytestmark = pytest.mark.usefixtures("fast_polling")

TIMEOUTS = TimeoutPolicy(scale=0.05)
OPERANDS = {"binder": "binder", "pod-grouper": "podgrouper", "podgroup-controller": "podgroupcontroller",
            "kai-scheduler-default": "scheduler", "kai-scheduler-kc-slice-1": "scheduler",
            "queue-controller": "queuecontroller"}  # fmt: skip


@pytest.fixture
def operator(fake: FakeKube) -> SimulatedOperator:
    fake.put(kai_config())
    for name, image in OPERANDS.items():
        fake.put(deployment(name, "kai-scheduler", f"{KAI_REGISTRY}/{image}:v0.17.0"))
    return SimulatedOperator(fake, lag_calls=2).install()


def limits(fake: FakeKube, name: str) -> dict[str, str]:
    container = fake.get(kinds.DEPLOYMENT, name, "kai-scheduler")["spec"]["template"]["spec"]["containers"][0]
    return (container.get("resources") or {}).get("limits") or {}


def config(fake: FakeKube) -> dict[str, Any]:
    return fake.get(kinds.KAI_CONFIG, "kai-config")


def filled(fake: FakeKube) -> list[str]:
    return json.loads(config(fake)["metadata"].get("annotations", {}).get(FILLED_ANNOTATION, "[]"))


def test_the_scale_test_limits_are_filled_and_rolled_out_on_every_operand_and_shard(
    fake: FakeKube, operator: SimulatedOperator
) -> None:
    record = kai_sizing.size(fake, TIMEOUTS)
    assert limits(fake, "binder") == {"cpu": "400m", "memory": "2500Mi"}
    assert limits(fake, "pod-grouper") == {"cpu": "200m", "memory": "2000Mi"}
    assert limits(fake, "podgroup-controller") == {"cpu": "200m", "memory": "8000Mi"}
    assert limits(fake, "kai-scheduler-default") == limits(fake, "kai-scheduler-kc-slice-1") == {"cpu": "5",
                                                                                                 "memory": "7Gi"}  # fmt: skip
    assert not limits(fake, "queue-controller")  # no section of the scale-test limits
    binder = config(fake)["spec"]["binder"]
    assert (binder["maxConcurrentReconciles"], binder["service"]["k8sClientConfig"]) == (100, {"qps": 500,
                                                                                              "burst": 2000})  # fmt: skip
    assert binder["service"]["enabled"] is True  # what the chart set stays
    assert sorted(filled(fake)) == sorted(SCALE_TEST_LIMITS)
    assert "binder.service.resources.limits.memory=2500Mi" in record["sizing"]
    assert "sizing_kept" not in record
    for name in ("binder", "kai-scheduler-kc-slice-1"):  # rolled out: no old pod left when size() returns
        status = fake.get(kinds.DEPLOYMENT, name, "kai-scheduler")["status"]
        assert status["replicas"] == status["updatedReplicas"] == 1


def test_a_limit_the_user_set_is_kept_and_never_removed(fake: FakeKube, operator: SimulatedOperator) -> None:
    fake.patch(kinds.KAI_CONFIG, "kai-config", {"spec": {"binder": {"service": {"resources": {"limits": {
        "memory": "4Gi"}}}}}}, allow_foreign=True)  # fmt: skip
    record = kai_sizing.size(fake, TIMEOUTS)
    assert limits(fake, "binder") == {"cpu": "400m", "memory": "4Gi"}
    assert "binder.service.resources.limits.memory" not in filled(fake)
    assert record["sizing_kept"].endswith("binder.service.resources.limits.memory")
    assert kai_sizing.unsize(fake, TIMEOUTS) == filled_before(record)
    assert config(fake)["spec"]["binder"]["service"]["resources"] == {"limits": {"memory": "4Gi"}}
    assert FILLED_ANNOTATION not in config(fake)["metadata"].get("annotations", {})
    assert limits(fake, "binder") == {"cpu": DEFAULT_LIMITS["binder"]["cpu"], "memory": "4Gi"}


def filled_before(record: dict[str, str]) -> list[str]:
    return sorted(p for p in SCALE_TEST_LIMITS if f"{p}=" in record["sizing"])


def test_unsizing_removes_every_filled_field_and_waits_for_the_defaults(
    fake: FakeKube, operator: SimulatedOperator
) -> None:
    kai_sizing.size(fake, TIMEOUTS)
    assert sorted(kai_sizing.unsize(fake, TIMEOUTS)) == sorted(SCALE_TEST_LIMITS)
    assert config(fake)["spec"] == kai_config()["spec"]
    assert limits(fake, "binder") == DEFAULT_LIMITS["binder"]
    assert limits(fake, "kai-scheduler-default") == DEFAULT_LIMITS["scheduler"]
    assert kai_sizing.unsize(fake, TIMEOUTS) == []  # nothing left to remove


def test_a_killed_runs_fields_are_taken_over_not_mistaken_for_the_users(
    fake: FakeKube, operator: SimulatedOperator
) -> None:
    kai_sizing.size(fake, TIMEOUTS)  # the killed run's: its end never came
    record = kai_sizing.size(fake, TIMEOUTS)
    assert "sizing_kept" not in record
    assert sorted(filled(fake)) == sorted(SCALE_TEST_LIMITS)
    assert sorted(kai_sizing.unsize(fake, TIMEOUTS)) == sorted(SCALE_TEST_LIMITS)


def test_an_operator_that_never_renders_the_limits_ends_in_a_timeout_naming_the_way_out(
    fake: FakeKube, operator: SimulatedOperator
) -> None:
    operator.renders = False
    with pytest.raises(errors.WaitTimeout, match=r"binder not yet given cpu=400m, memory=2500Mi") as caught:
        kai_sizing.size(fake, TimeoutPolicy(scale=0.001))
    assert "--kai-sizing operator" in str(caught.value)
    assert filled(fake)  # named on the Config, so the run's end removes them


def test_a_cluster_without_kai_config_is_not_sized_and_says_so(fake: FakeKube) -> None:
    assert kai_sizing.size(fake, TIMEOUTS) == {"sizing": "as installed: no Config kai-config to size"}
    assert kai_sizing.unsize(fake, TIMEOUTS) == []


@pytest.mark.parametrize(
    ("status", "generation", "pending"),
    [
        ({"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}, 2, ""),
        ({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}, 2,
         "rollout not observed yet"),
        ({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 1, "availableReplicas": 1}, 2,
         "rolling out (1 of 1 updated, 1 available, 1 old)"),
        ({"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 0}, 2,
         "rolling out (1 of 1 updated, 0 available, 0 old)"),
    ],
    ids=["done", "not-observed", "old-pod-left", "new-pod-not-available"],
)  # fmt: skip
def test_a_rollout_is_done_only_when_every_replica_runs_the_limits(
    status: dict[str, int], generation: int, pending: str
) -> None:
    sized = deployment("binder", "kai-scheduler", "binder:v0.17.0")
    sized["metadata"]["generation"] = generation
    sized["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "400m", "memory": "2500Mi"}}
    sized["status"] = status
    assert rollout_pending(sized, {"cpu": "400m", "memory": "2500Mi"}) == pending
    assert rollout_pending(sized, {"memory": "1Gi"}) == "not yet given memory=1Gi"
    assert rollout_pending(sized, {"memory": "2500Mi"}, removed=True) == "still given memory=2500Mi"


@pytest.mark.parametrize(
    ("kai_sizing_option", "fake_nodes", "sized"),
    [("auto", 1000, True), ("auto", 0, False), ("operator", 1000, False)],
)
def test_only_a_run_with_fake_nodes_is_sized_unless_told_not_to(
    kai_sizing_option: str, fake_nodes: int, sized: bool
) -> None:
    assert kai_sizing.wanted(kai_sizing_option, fake_nodes) is sized


def test_the_filled_config_passes_the_config_schema_of_every_combination(schema_root: Path) -> None:
    sized = kai_config()
    sized["metadata"]["annotations"] = {FILLED_ANNOTATION: json.dumps(sorted(SCALE_TEST_LIMITS))}
    sized["spec"] = kai_sizing.nested(SCALE_TEST_LIMITS) | {"namespace": "kai-scheduler"}
    for combination in CATALOG.combinations:
        schemas = crd_schemas.schemas_for(combination, schema_root)
        assert schemas.covers(sized), combination.name
        assert schemas.problems(sized) == [], combination.name
