"""Fake GPU nodes by kwok: the options and their refusals, the node objects, the suite's Stages (their fields
against kwok v0.8.0's Go types, and their effect on a deleted pod through a fake kwok), the install on kind,
the use of or refusal on an existing cluster, and the removal of every fake node, also after a failure."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from kai_conformance.clusters import provision
from kai_conformance.clusters.kwok import fake_nodes as kwok
from kai_conformance.clusters.kwok import sizing as kwok_sizing
from kai_conformance.clusters.kwok import stages as kwok_stages
from kai_conformance.clusters.provision import Toolbox, acquire, release
from kai_conformance.clusters.suite_stack import EVICTED_EXIT_CODE, KWOK_TOLERATION, NODE_FAILURE_TOLERATIONS, pod_spec
from kai_conformance.clusters.topology import MAX_FAKE_NODES, load_topology, with_fake_nodes
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.configuration.resolution import CATALOG, resolve_settings
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.ownership import MANAGED_BY, RUN_LABEL, SUITE
from kai_conformance.fixtures.run import RunContext
from kai_conformance.fixtures.waits import TimeoutPolicy
from tests.builders import unsliced
from tests.fakes.installation import SimulatedStack, deployment, make_settings, worker_node
from tests.fakes.kai.operator import kai_config
from tests.fakes.kube import FakeKube
from tests.fakes.kwok import (
    FakeKwok,
    ManualClock,
    ScaledClock,
    kwok_release_manifests,
    pod_delete_stage,
    pod_ready_stage,
    render_status,
    stage_fast_manifests,
)

pytestmark = pytest.mark.usefixtures("fast_polling")

RUN_ID = "20260101-000000-abcd"
TIMEOUTS = TimeoutPolicy(scale=0.01)

# kwok v0.8.0 pkg/apis/v1alpha1/stage_types.go: the JSON fields of the types the suite's stages use.
STAGE_FIELDS = {"apiVersion", "kind", "metadata", "spec"}
STAGE_SPEC_FIELDS = {"resourceRef", "selector", "weight", "weightFrom", "delay", "next", "immediateNextStage", "steps"}
RESOURCE_REF_FIELDS = {"apiGroup", "kind"}
SELECTOR_FIELDS = {"matchLabels", "matchAnnotations", "matchExpressions"}
EXPRESSION_FIELDS = {"cel", "jq", "key", "operator", "values"}  # SelectorRequirement (jq keys)
OPERATORS = {"In", "NotIn", "Exists", "DoesNotExist"}
DELAY_FIELDS = {"durationMilliseconds", "durationFrom", "jitterDurationMilliseconds", "jitterDurationFrom"}
EXPRESSION_FROM_FIELDS = {"cel", "jq", "expressionFrom"}  # ExpressionFrom
NEXT_FIELDS = {"event", "finalizers", "delete", "patches", "statusTemplate", "statusSubresource", "statusPatchAs"}


# ------------------------------------------------------------------------------------------------------ options
class Options:
    def __init__(self, tmp: Path, **given: Any) -> None:
        self.values = {"--cluster": "kind", "--cluster-name": "kc", "--topology": "pr-gate", "--timeout-scale": 1.0,
                       "--report-dir": str(tmp), "--install": "auto", "--workload-image": "busybox",
                       "--fake-nodes": None, "--fake-node-gpus": None, "--kwok-managed": False, **given}  # fmt: skip

    def getoption(self, name: str) -> Any:
        if name in ("--kai-values", "--kai-set", "--trainer-set", "--load-image"):
            return []
        return self.values.get(name)


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ({"--fake-nodes": -1}, "--fake-nodes -1: a fake-node count must be 0..1000, not -1"),
        ({"--fake-nodes": MAX_FAKE_NODES + 1}, "--fake-nodes 1001: a fake-node count must be 0..1000, not 1001"),
        ({"--fake-nodes": 4, "--fake-node-gpus": 0}, "--fake-nodes 4 --fake-node-gpus 0: GPUs per fake node must be"),
        ({"--kwok-managed": True}, "--kwok-managed declares a kwok on an existing cluster, but --cluster is kind"),
    ],
)
def test_bad_fake_node_options_are_problems_with_a_fix(tmp_path: Path, given: dict, problem: str) -> None:
    settings, problems = resolve_settings(Options(tmp_path, **given))  # type: ignore[arg-type]
    assert settings is None
    assert len(problems) == 1
    assert problems[0].what.startswith(problem)
    assert problems[0].fix


def test_fake_node_options_override_the_topology(tmp_path: Path) -> None:
    settings, problems = resolve_settings(Options(tmp_path, **{"--fake-nodes": 3, "--fake-node-gpus": 4}))  # type: ignore[arg-type]
    assert problems == []
    assert (settings.topology.fake_nodes.count, settings.topology.fake_nodes.gpus) == (3, 4)
    scale = with_fake_nodes(load_topology("scale-500"), None, None)
    assert (scale.fake_nodes.count, scale.fake_nodes.gpus) == (500, 8)
    assert with_fake_nodes(unsliced("pr-gate"), None, None).fake_nodes.count == 0


def test_scale_topologies_lay_out_their_fake_nodes_in_racks_and_zones() -> None:
    layout = load_topology("scale-100").layout("kc")
    fake = [n for n in layout.nodes if n.name.startswith("kc-kwok-")]
    assert (len(fake), sum(n.gpus for n in fake), layout.total) == (100, 800, 800)
    assert fake[0].labels["kai-conformance/rack"] == "rack-1" and fake[9].labels["kai-conformance/rack"] == "rack-1"
    assert fake[10].labels["kai-conformance/rack"] == "rack-2"
    assert fake[49].labels["kai-conformance/zone"] == "zone-1" and fake[50].labels["kai-conformance/zone"] == "zone-2"
    assert fake[0].labels["nvidia.com/gpu.product"] == "KAI-Conformance-Fake-GPU"


def test_a_topology_with_an_absurd_fake_node_count_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text(yaml.safe_dump({"nodes": [{"role": "control-plane"}], "fake_nodes": {"count": 100000}}))
    with pytest.raises(errors.UsageError, match=r"fake_nodes: a fake-node count must be 0\.\.1000, not 100000"):
        load_topology(str(path))


# ------------------------------------------------------------------------------------------------------ nodes
def test_a_fake_node_is_the_suites_own_kwok_node_with_gpus() -> None:
    topology = with_fake_nodes(load_topology("scale-100"), 2, 8)
    node = kwok.fake_nodes(topology, "kc", RUN_ID)[1]
    meta = node["metadata"]
    assert meta["name"] == "kc-kwok-0002"
    assert meta["annotations"] == {"kwok.x-k8s.io/node": "fake"}
    assert meta["labels"][MANAGED_BY] == SUITE and meta["labels"][RUN_LABEL] == RUN_ID
    assert meta["labels"][kwok.FAKE_NODE_LABEL] == "true"
    assert meta["labels"]["nvidia.com/gpu.product"] == "KAI-Conformance-Fake-GPU"
    assert node["spec"]["taints"] == [{"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}]
    assert node["status"]["capacity"]["nvidia.com/gpu"] == node["status"]["allocatable"]["nvidia.com/gpu"] == "8"


def test_workload_pods_tolerate_exactly_kwoks_taint_and_a_node_failure() -> None:
    taint = kwok.KWOK_TAINT
    toleration = pod_spec("busybox")["tolerations"]
    assert toleration == [KWOK_TOLERATION, *NODE_FAILURE_TOLERATIONS]
    assert {k: KWOK_TOLERATION[k] for k in ("key", "value", "effect")} == taint


def tolerated_for(tolerations: list[dict], taint: dict) -> float | None:
    """How long a pod with ``tolerations`` stays on a node with ``taint`` (Kubernetes' matching: key, operator
    Exists or Equal value, effect): inf without tolerationSeconds, None when not tolerated (evicted at once)."""
    for t in tolerations:
        if (
            t.get("key") == taint["key"]
            and t.get("effect") in (None, "", taint["effect"])
            and (t.get("operator") == "Exists" or t.get("value") == taint.get("value"))
        ):
            return float(t["tolerationSeconds"]) if "tolerationSeconds" in t else float("inf")
    return None


@pytest.mark.parametrize("key", ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"])
def test_a_workload_pod_stays_on_a_node_kwok_let_go_not_ready(key: str) -> None:
    """kube-controller-manager taints a NotReady node NoExecute and evicts what does not tolerate it; the admission
    plugin's default (300 s) applies only to pods without a toleration of their own."""
    taint = {"key": key, "effect": "NoExecute"}
    assert tolerated_for(pod_spec("busybox")["tolerations"], taint) == float("inf")
    assert tolerated_for([{**t, "tolerationSeconds": 300} for t in NODE_FAILURE_TOLERATIONS], taint) == 300
    assert tolerated_for([KWOK_TOLERATION], taint) is None


def test_a_real_node_with_a_fake_nodes_name_is_never_changed(fake: FakeKube) -> None:
    fake.put(worker_node("kc-kwok-0001", None))
    topology = with_fake_nodes(unsliced("pr-gate"), 1, 8)
    with pytest.raises(errors.UsageError, match="node kc-kwok-0001 already exists and is not the suite's"):
        kwok.create_fake_nodes(fake, topology, "kc", RUN_ID, TIMEOUTS)
    assert "kwok.x-k8s.io/node" not in (fake.get(kinds.NODE, "kc-kwok-0001")["metadata"].get("annotations") or {})


def test_nodes_kwok_never_reports_ready_end_in_a_timeout_naming_kwok(fake: FakeKube) -> None:
    topology = with_fake_nodes(unsliced("pr-gate"), 2, 8)
    with pytest.raises(errors.WaitTimeout, match=r"(?s)0/2 Ready.*kwok-controller"):
        kwok.create_fake_nodes(fake, topology, "kc", RUN_ID, TimeoutPolicy(scale=0.001))


NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
UNREACHABLE_TAINT = {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}


class NodeLifecycle:
    """kube-controller-manager's node lifecycle controller as it lagged at 1,000 fake nodes on kind: every node is
    created with its ``not-ready`` taint, and each list of the nodes finds it lifted from ``per_look`` more (none
    with 0); with ``flapping``, a node whose taint was lifted is tainted ``unreachable`` at the next look (kwok
    renewing its lease late)."""

    def __init__(self, fake: FakeKube, per_look: int, *, flapping: bool = False) -> None:
        self.per_look, self.flapping = per_look, flapping
        self.lifted: list[str] = []
        self.registered: set[str] = set()
        fake.reactors.append(self._react)

    def _react(self, fake: FakeKube, call: Any) -> None:
        if call.kind != "Node":
            return
        nodes = [n for n in fake.stored(kinds.NODE) if kwok.FAKE_NODE_LABEL in n["metadata"].get("labels", {})]
        for node in nodes:  # a node stored since the last call: the controller's first look taints it
            if node["metadata"]["name"] not in self.registered:
                self.registered.add(node["metadata"]["name"])
                node["spec"]["taints"].append(dict(NOT_READY_TAINT))
        if call.operation != "list":
            return
        for node in nodes:
            if self.flapping and node["metadata"]["name"] in self.lifted:
                node["spec"]["taints"] = [dict(kwok.KWOK_TAINT), dict(UNREACHABLE_TAINT)]
        for node in [n for n in nodes if NOT_READY_TAINT in n["spec"]["taints"]][: self.per_look]:
            node["spec"]["taints"].remove(NOT_READY_TAINT)
            self.lifted.append(node["metadata"]["name"])


def test_fake_nodes_are_ready_once_the_node_lifecycle_controller_has_lifted_their_not_ready_taint(
    fake: FakeKube,
) -> None:
    """At 1,000 fake nodes on kind the filling burst, a minute after every node was Ready, found 312 closed and
    skipped: a node is ready for the run once it is Ready *and* open to the workload pods."""
    FakeKwok(fake)
    lifecycle = NodeLifecycle(fake, per_look=1)
    topology = with_fake_nodes(unsliced("pr-gate"), 4, 8)
    kwok.create_fake_nodes(fake, topology, "kc", RUN_ID, TIMEOUTS)
    assert sorted(lifecycle.lifted) == [f"kc-kwok-000{i}" for i in range(1, 5)]
    assert not [n for n in fake.objects(kinds.NODE) if NOT_READY_TAINT in n["spec"]["taints"]]


def test_a_fake_node_closing_again_after_it_opened_does_not_hold_up_the_run(fake: FakeKube) -> None:
    """kwok renews a thousand leases late and some node is always closing: each must have opened once, not all at
    the same look."""
    FakeKwok(fake)
    lifecycle = NodeLifecycle(fake, per_look=1, flapping=True)
    kwok.create_fake_nodes(fake, with_fake_nodes(unsliced("pr-gate"), 3, 8), "kc", RUN_ID, TIMEOUTS)
    assert len(lifecycle.lifted) == 3


def test_a_fake_node_whose_taint_is_never_lifted_ends_the_wait_naming_it_and_the_taint(fake: FakeKube) -> None:
    FakeKwok(fake)
    NodeLifecycle(fake, per_look=0)
    topology = with_fake_nodes(unsliced("pr-gate"), 2, 8)
    with pytest.raises(errors.WaitTimeout, match=r"(?s)0/2 Ready and open to workloads; e.g. kc-kwok-0001 \(taint "
                       r"node.kubernetes.io/not-ready:NoSchedule\).*describe node"):  # fmt: skip
        kwok.create_fake_nodes(fake, topology, "kc", RUN_ID, TimeoutPolicy(scale=0.001))


def daemonset_pod(name: str, node: str) -> dict:
    """A pod of a DaemonSet that tolerates every taint (kind's kindnet, kube-proxy), bound to ``node``."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"nodeName": node, "tolerations": [{"operator": "Exists"}]}, "status": {"phase": "Running"}}  # fmt: skip


def with_fake_nodes_and_daemonset_pods(fake: FakeKube, count: int) -> list[str]:
    topology = with_fake_nodes(unsliced("pr-gate"), count, 8)
    for node in kwok.fake_nodes(topology, "kc", RUN_ID):
        fake.put(node)
        fake.put(daemonset_pod(f"kindnet-{node['metadata']['name']}", node["metadata"]["name"]))
    fake.put(worker_node("kc-worker", None))
    fake.put(daemonset_pod("kindnet-real", "kc-worker"))  # on a real node: not the run's to wait for
    return [n["metadata"]["name"] for n in kwok.fake_nodes(topology, "kc", RUN_ID)]


def pod_gc(fake: FakeKube, monkeypatch: pytest.MonkeyPatch, per_look: int) -> list[int]:
    """kube-controller-manager's pod GC, removing ``per_look`` pods bound to a node that is gone each time the suite
    lists pods; returns how many such pods each list saw."""
    seen: list[int] = []
    listing = fake.list

    def list_and_collect(kind, *args, **kwargs):
        if kind == kinds.POD:
            nodes = {n["metadata"]["name"] for n in fake.objects(kinds.NODE)}
            orphans = [p for p in fake.objects(kinds.POD) if p["spec"].get("nodeName") not in nodes]
            seen.append(len(orphans))
            for pod in orphans[:per_look]:
                fake._remove(kinds.POD, "kube-system", pod["metadata"]["name"])  # the GC is not the suite
        return listing(kind, *args, **kwargs)

    monkeypatch.setattr(fake, "list", list_and_collect)
    return seen


def test_removing_the_fake_nodes_waits_until_the_pod_gc_removed_the_daemonsets_pods_on_them(
    fake: FakeKube, monkeypatch: pytest.MonkeyPatch, fast_polling: None
) -> None:
    names = with_fake_nodes_and_daemonset_pods(fake, 3)
    monkeypatch.setattr(kwok, "POD_GC_POLL", 0.01)
    seen = pod_gc(fake, monkeypatch, per_look=1)
    assert kwok.remove_fake_nodes(fake, RUN_ID, TIMEOUTS) == names
    assert [p["metadata"]["name"] for p in fake.objects(kinds.POD)] == ["kindnet-real"]
    assert seen[0] == 3 and len(seen) >= 3  # waited while the GC removed them one by one


def test_pods_the_pod_gc_never_removes_end_the_wait_naming_them(
    fake: FakeKube, monkeypatch: pytest.MonkeyPatch, fast_polling: None
) -> None:
    with_fake_nodes_and_daemonset_pods(fake, 2)
    monkeypatch.setattr(kwok, "POD_GC_POLL", 0.01)
    pod_gc(fake, monkeypatch, per_look=0)  # no pod GC (kube-controller-manager down)
    with pytest.raises(
        errors.WaitTimeout, match=r"2 pod\(s\) still on removed fake nodes, e.g. kube-system/kindnet-kc-kwok"
    ):
        kwok.remove_fake_nodes(fake, RUN_ID, TimeoutPolicy(scale=0.001))
    assert fake_node_names(fake) == []  # the nodes themselves are gone


# ------------------------------------------------------------------------------------------------------ stages
def test_the_suites_stages_use_only_fields_of_kwoks_stage_types() -> None:
    for stage in kwok_stages.suite_stages():
        assert set(stage) == STAGE_FIELDS and stage["apiVersion"] == "kwok.x-k8s.io/v1alpha1"
        spec = stage["spec"]
        assert set(spec) <= STAGE_SPEC_FIELDS
        assert set(spec["resourceRef"]) <= RESOURCE_REF_FIELDS
        assert set(spec["selector"]) <= SELECTOR_FIELDS
        for expression in spec["selector"]["matchExpressions"]:
            assert set(expression) <= EXPRESSION_FIELDS and expression["operator"] in OPERATORS
        assert set(spec.get("delay", {})) <= DELAY_FIELDS
        for source in ("durationFrom", "jitterDurationFrom"):
            assert set(spec.get("delay", {}).get(source, {})) <= EXPRESSION_FROM_FIELDS
        assert set(spec["next"]) <= NEXT_FIELDS
        yaml.safe_load(yaml.safe_dump(stage))  # serialisable as the manifest kwok reads


def test_the_terminate_template_gives_the_workloads_exit_code_and_phase_failed() -> None:
    terminate = next(s for s in kwok_stages.suite_stages() if s["metadata"]["name"] == kwok_stages.TERMINATE_STAGE)
    pod = {"spec": {"containers": [{"name": "node", "image": "busybox"}, {"name": "side", "image": "busybox"}]}}
    status = render_status(terminate["spec"]["next"]["statusTemplate"], pod)
    assert status["phase"] == "Failed"
    assert [c["state"]["terminated"]["exitCode"] for c in status["containerStatuses"]] == [EVICTED_EXIT_CODE] * 2
    assert [c["name"] for c in status["containerStatuses"]] == ["node", "side"]


def fake_pod(name: str, node: str, finalizers: list[str] | None = None) -> dict:
    meta: dict = {"name": name, "namespace": "default"}
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node, "containers": [{"name": "node", "image": "busybox"}]},
            "status": {"phase": "Running"}}  # fmt: skip


def test_a_deleted_pod_on_a_fake_node_ends_failed_and_goes_only_after_its_finalizers() -> None:
    clock = ManualClock()
    fake = FakeKube(clock=clock)
    FakeKwok(fake)
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    for stage in kwok_stages.suite_stages():
        fake.put(stage)
    fake.put({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "kc-kwok-0001",
              "annotations": {"kwok.x-k8s.io/node": "fake"}}})  # fmt: skip
    fake.put(fake_pod("held", "kc-kwok-0001", ["example.com/hold"]))
    fake.put(fake_pod("plain", "kc-kwok-0001"))
    fake.delete(kinds.POD, "held", "default", allow_foreign=True)
    assert fake.get(kinds.POD, "held", "default")["status"]["phase"] == "Running"  # Terminating, as on a node
    clock.advance(kwok_stages.TERMINATE_DELAY_MS / 1000)
    held = fake.get(kinds.POD, "held", "default")
    assert held["status"]["phase"] == "Failed"
    assert held["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == EVICTED_EXIT_CODE
    fake.patch(kinds.POD, "held", {"metadata": {"finalizers": None}}, namespace="default", allow_foreign=True)
    fake.list(kinds.POD, "default")  # kwok acts on the next event
    assert fake.find(kinds.POD, "held", "default") is None
    # Without a finalizer the API server removes the pod at once (grace is the kubelet's, not modelled here).
    fake.delete(kinds.POD, "plain", "default", allow_foreign=True)
    assert fake.find(kinds.POD, "plain", "default") is None


def test_a_stage_that_deletes_at_once_is_caught(fake: FakeKube) -> None:
    """The detector above fires on kwok's own fast pod-delete (kustomize/stage/pod/fast/pod-delete.yaml)."""
    FakeKwok(fake)
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    fake.put({"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": "pod-delete"},
              "spec": {"resourceRef": {"apiGroup": "v1", "kind": "Pod"}, "next": {"delete": True},
                       "selector": {"matchExpressions": [{"key": ".metadata.deletionTimestamp",
                                                          "operator": "Exists"}]}}})  # fmt: skip
    fake.put({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "kc-kwok-0001",
              "annotations": {"kwok.x-k8s.io/node": "fake"}}})  # fmt: skip
    fake.put(fake_pod("held", "kc-kwok-0001", ["example.com/hold"]))
    fake.delete(kinds.POD, "held", "default", allow_foreign=True)
    assert fake.find(kinds.POD, "held", "default") is None  # gone with its finalizer: what the suite's stages avoid


def test_only_the_node_stages_and_pod_ready_of_the_release_are_kept() -> None:
    kept = kwok_stages.release_stages_kept(list(yaml.safe_load_all(stage_fast_manifests())))
    assert [s["metadata"]["name"] for s in kept] == ["node-initialize", "node-heartbeat-with-lease", "pod-ready"]


# ------------------------------------------------------------------------------------------------------ provisioning
@pytest.fixture
def stack(fake: FakeKube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimulatedStack:
    from kai_conformance.clusters import commands, tools
    from tests.fakes.commands import FakeKind, tools_on_path

    monkeypatch.chdir(tmp_path)
    tools_on_path(tmp_path / "bin", monkeypatch, names=("helm", "kubectl", "docker"))
    monkeypatch.setattr(tools, "TOOLS_BIN", tmp_path / "no-tools")
    FakeKind.install(tmp_path / "bin", monkeypatch)
    simulated = SimulatedStack(fake)
    simulated.add_workers(3)
    simulated.runner.on("kind", action=lambda argv: commands.run(argv, timeout=10, check=False))
    simulated.runner.on("docker", "image", "inspect", stdout="sha256:0b5e\n")
    fake.clock = ScaledClock(1 / 0.01)  # the settings' TimeoutPolicy(scale=0.01): kwok's delays scaled alike
    FakeKwok(fake)
    return simulated


def toolbox(stack: SimulatedStack) -> Toolbox:
    def fetch(url: str, timeout: float) -> str:
        stack.fetched.append(url)
        if url == CATALOG.kwok["controller"]:
            return kwok_release_manifests()
        if url == CATALOG.kwok["stages"]:
            return stage_fast_manifests()
        return stack.fetch(url, timeout)

    return Toolbox(runner=stack.runner, kube=lambda kubeconfig, context: stack.fake, fetch=fetch)


def run_context(tmp: Path) -> RunContext:
    return RunContext(RUN_ID, tmp / "report", tmp / "report" / ".state", "main")


def fake_node_names(fake: FakeKube) -> list[str]:
    return sorted(n["metadata"]["name"] for n in fake.objects(kinds.NODE) if "-kwok-" in n["metadata"]["name"])


def with_nodes(settings: Any, count: int) -> Any:
    return dataclasses.replace(settings, topology=with_fake_nodes(settings.topology, count, 8))


def test_on_kind_the_pinned_kwok_and_the_suites_stages_are_installed_then_nodes_added(
    stack: SimulatedStack, fake: FakeKube, tmp_path: Path
) -> None:
    settings = with_nodes(make_settings(tmp_path, reuse_cluster="kc-test"), 3)
    state = acquire(settings, run_context(tmp_path), toolbox(stack))
    assert CATALOG.kwok["version"] == "v0.8.0"
    assert {CATALOG.kwok["controller"], CATALOG.kwok["stages"]} <= set(stack.fetched)
    stages = sorted(s["metadata"]["name"] for s in fake.objects(kinds.KWOK_STAGE))
    assert stages == sorted([*kwok_stages.KEPT_RELEASE_STAGES, kwok_stages.TERMINATE_STAGE, kwok_stages.REMOVE_STAGE,
                             kwok_stages.EXIT_STAGE])  # fmt: skip
    assert [n for n in state.gpus if "kwok" in n] == ["kc-test-kwok-0001", "kc-test-kwok-0002", "kc-test-kwok-0003"]
    assert all(state.gpus[n] == 8 for n in state.gpus if "kwok" in n)
    assert state.stack["kwok"]["fake_nodes"] == 3
    assert state.stack["kwok"]["probe"]["deleted_pod"].startswith(f"phase Failed, every container terminated with "
                                                                   f"exit code {EVICTED_EXIT_CODE}")  # fmt: skip
    assert state.stack["components"]["kai"]["sizing"].startswith("KAI's scale-test limits (--kai-sizing auto): ")
    binder = fake.get(kinds.DEPLOYMENT, "binder", "kai-scheduler")["spec"]["template"]["spec"]["containers"][0]
    assert binder["resources"]["limits"] == {"cpu": "400m", "memory": "2500Mi"}  # sized before KAI was proven
    release(settings, run_context(tmp_path), toolbox(stack))  # a reused cluster stays; its fake nodes go
    assert fake_node_names(fake) == []
    assert fake.get(kinds.NODE, "kc-test-worker")  # real workers untouched
    assert fake.get(kinds.KAI_CONFIG, "kai-config")["spec"] == kai_config()["spec"]  # and KAI's sizes are its own


def kwok_configuration(fake: FakeKube) -> dict:
    return yaml.safe_load(fake.get(kinds.CONFIG_MAP, "kwok", "kube-system")["data"]["kwok.yaml"])


def test_on_kind_kwok_gets_lease_workers_for_its_fake_nodes_and_is_rolled_out_with_them(
    stack: SimulatedStack, fake: FakeKube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 1,000 fake nodes on kind the release's 4 lease workers renewed 8.9 leases/s, each lease every ~112 s
    instead of 10 s, and up to 506 nodes were NotReady at once (clusters/kwok/sizing.py)."""
    monkeypatch.setattr(kwok_sizing, "NODES_PER_LEASE_WORKER", 1)  # 5 nodes stand for 100
    settings = with_nodes(make_settings(tmp_path, reuse_cluster="kc-test"), 5)
    state = acquire(settings, run_context(tmp_path), toolbox(stack))
    options = kwok_configuration(fake)["options"]
    assert options["nodeLeaseParallelism"] == 5
    assert options["manageNodesWithAnnotationSelector"] == "kwok.x-k8s.io/node=fake"  # the rest as released
    controller = fake.get(kinds.DEPLOYMENT, "kwok-controller", "kube-system")
    assert controller["spec"]["template"]["metadata"]["annotations"] == {kwok_sizing.SIZED_ANNOTATION: "5"}
    assert state.stack["kwok"]["node_lease_parallelism"] == 5


@pytest.mark.parametrize(("nodes", "workers"), [(1, 4), (80, 4), (81, 5), (300, 15), (1000, 50)])
def test_lease_workers_grow_with_the_fake_nodes_never_below_the_release(nodes: int, workers: int) -> None:
    objects = yaml.safe_load_all(kwok_release_manifests())
    sized, given = kwok_sizing.sized([o for o in objects if o], nodes)
    (config_map,) = [o for o in sized if o["kind"] == "ConfigMap"]
    assert given == yaml.safe_load(config_map["data"]["kwok.yaml"])["options"]["nodeLeaseParallelism"] == workers


def test_kwok_manifests_without_a_configuration_are_left_as_they_are() -> None:
    objects = [o for o in yaml.safe_load_all(kwok_release_manifests()) if o and o["kind"] != "ConfigMap"]
    assert kwok_sizing.sized(objects, 1000) == (objects, None)


def test_a_kwok_still_rolling_out_its_new_size_is_waited_for(fake: FakeKube) -> None:
    """Two kwoks would both play the nodes: the install waits until the old pod is gone."""
    controller = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "kwok-controller", "namespace": "kube-system", "generation": 2},
        "spec": {"replicas": 1, "template": {"metadata": {"annotations": {kwok_sizing.SIZED_ANNOTATION: "50"}}}},
        "status": {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 1, "availableReplicas": 1},
    }  # fmt: skip
    fake.put(controller)
    refs = [("kube-system", "kwok-controller")]
    with pytest.raises(errors.WaitTimeout, match=r"rolling out \(1 of 1 updated, 1 available, 1 old\)"):
        kwok_sizing.wait_rolled_out(fake, refs, 50, TimeoutPolicy(scale=0.001))
    with pytest.raises(errors.WaitTimeout, match="not yet given 60 lease workers"):
        kwok_sizing.wait_rolled_out(fake, refs, 60, TimeoutPolicy(scale=0.001))
    controller["status"].update(replicas=1)
    fake.put(controller)
    kwok_sizing.wait_rolled_out(fake, refs, 50, TimeoutPolicy(scale=0.001))


def kwok_args(fake: FakeKube) -> list[str]:
    controller = fake.get(kinds.DEPLOYMENT, "kwok-controller", "kube-system")
    return controller["spec"]["template"]["spec"]["containers"][0]["args"]


def test_on_kind_kwok_gives_the_fake_nodes_no_address_for_kindnetd_to_route_through(
    stack: SimulatedStack, fake: FakeKube, tmp_path: Path
) -> None:
    assert "--node-ip=$(POD_IP)" in kwok_release_manifests()  # what the release asks for
    settings = with_nodes(make_settings(tmp_path, reuse_cluster="kc-test"), 1)
    acquire(settings, run_context(tmp_path), toolbox(stack))
    assert kwok_args(fake) == ["--config=/root/.kwok/kwok.yaml"]
    release(settings, run_context(tmp_path), toolbox(stack))


@pytest.mark.parametrize(
    ("args", "kept"),
    [
        (["--config=c", "--node-ip=$(POD_IP)"], ["--config=c"]),
        (["--node-ip", "10.0.0.1", "--config=c"], ["--config=c"]),
        (["--config=c"], ["--config=c"]),
        (["--node-ip-pool=x", "--config=c"], ["--node-ip-pool=x", "--config=c"]),
    ],
    ids=["equals", "separate-value", "absent", "another-flag-with-that-prefix"],
)
def test_only_kwoks_node_ip_flag_is_taken_from_its_controller(args: list[str], kept: list[str]) -> None:
    kwok_container = {"name": "kwok-controller", "image": "registry.k8s.io/kwok/kwok:v0.8.0", "args": list(args)}
    other = {"name": "sidecar", "image": "example.com/sidecar:1", "args": ["--node-ip=1.2.3.4"]}
    release = [
        {"kind": "CustomResourceDefinition", "metadata": {"name": "stages.kwok.x-k8s.io"}},
        {"kind": "Deployment", "spec": {"template": {"spec": {"containers": [kwok_container, other]}}}},
    ]
    changed = kwok.without_node_ip(release)
    assert changed[0] == release[0]
    assert changed[1]["spec"]["template"]["spec"]["containers"][0]["args"] == kept
    assert changed[1]["spec"]["template"]["spec"]["containers"][1] == other  # not kwok's: left alone
    assert release[1]["spec"]["template"]["spec"]["containers"][0]["args"] == args  # the release is not changed


def cluster_kwok_stages(fake: FakeKube) -> list[dict]:
    """The existing cluster's own kwok stages (release pod-ready and fast pod-delete), which the suite leaves alone."""
    stages = [pod_ready_stage(), pod_delete_stage()]
    for stage in stages:
        fake.put(stage)
    return fake.objects(kinds.KWOK_STAGE)


def test_on_kind_a_kwok_release_that_cannot_be_read_stops_the_run_before_the_stack_is_installed(
    stack: SimulatedStack, fake: FakeKube, tmp_path: Path
) -> None:
    tools = toolbox(stack)
    fetch = tools.fetch

    def offline(url: str, timeout: float) -> str:
        if "kwok" in url:
            from kai_conformance.clusters.install.manifests import download

            return download("http://127.0.0.1:9/kwok.yaml", 0.5)  # nothing listens: as on an air-gapped machine
        return fetch(url, timeout)

    tools.fetch = offline
    settings = with_nodes(make_settings(tmp_path, reuse_cluster="kc-test"), 2)
    with pytest.raises(errors.InfrastructureError) as failed:
        acquire(settings, run_context(tmp_path), tools)
    message = str(failed.value)
    assert message.startswith("--fake-nodes needs kwok v0.8.0, and its release manifests cannot be read: cannot "
                              "download http://127.0.0.1:9/kwok.yaml")  # fmt: skip
    assert "fix: let this machine reach github.com" in message and "--cluster existing" in message
    assert "--jobset-manifests" not in message  # the generic download hint names no option that helps here
    assert stack.runner.commands("helm") == [] and fake.operations("apply") == []  # nothing installed
    assert fake_node_names(fake) == []


def existing_settings(tmp: Path, **overrides: Any) -> Any:
    kubeconfig = tmp / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\n")
    return make_settings(tmp, cluster="existing", kubeconfig=str(kubeconfig), context="prod", install=True,
                         cluster_name="kc", **overrides)  # fmt: skip


def test_an_existing_cluster_without_kwok_is_refused_in_one_message_and_nothing_is_created(
    stack: SimulatedStack, fake: FakeKube, tmp_path: Path
) -> None:
    fake.unserve(kinds.KWOK_STAGE)
    settings = with_nodes(existing_settings(tmp_path), 2)
    with pytest.raises(errors.UsageError) as refused:
        acquire(settings, run_context(tmp_path), toolbox(stack))
    message = str(refused.value)
    assert "no kwok Stage CRD" in message and "--kwok-managed" in message and "No fake node was created" in message
    assert fake_node_names(fake) == []
    assert fake.operations("apply") == []


def test_an_existing_cluster_with_a_stage_crd_but_no_controller_is_refused(
    stack: SimulatedStack, fake: FakeKube, tmp_path: Path
) -> None:
    fake.put(deployment("kwok-lookalike", "kube-system", "registry.k8s.io/notkwok/kwok-ish:v1"))
    with pytest.raises(errors.UsageError, match="no Deployment labelled app=kwok-controller or running kwok's image"):
        acquire(with_nodes(existing_settings(tmp_path), 2), run_context(tmp_path), toolbox(stack))


@pytest.mark.parametrize("how", ["found", "found by image", "declared"])
def test_an_existing_clusters_kwok_is_used_and_its_stages_left_alone(
    stack: SimulatedStack, fake: FakeKube, tmp_path: Path, how: str
) -> None:
    if how == "found":
        fake.put(deployment("kwok-controller", "kube-system", "registry.k8s.io/kwok/kwok:v0.8.0",
                            {"app": "kwok-controller"}))  # fmt: skip
    if how == "found by image":
        fake.put(deployment("fake-kubelet", "sim", "mirror.example.com/kwok/kwok:v0.7.0"))
    own = cluster_kwok_stages(fake)
    settings = with_nodes(existing_settings(tmp_path, kwok_managed=how == "declared"), 2)
    state = acquire(settings, run_context(tmp_path), toolbox(stack))
    assert state.stack["kwok"]["origin"].startswith(
        {"found": "found: Deployment kube-system/", "found by image": "found: Deployment sim/", "declared": "declared"}[
            how
        ]
    )
    # the suite installs and changes no stage on a cluster it does not own
    assert [(s["metadata"], s["spec"]) for s in fake.objects(kinds.KWOK_STAGE)] == [
        (s["metadata"], s["spec"]) for s in own
    ]
    probe = state.stack["kwok"]["probe"]
    assert (probe["node"], probe["stages"]) == ("prod-kwok-0001", ["pod-delete", "pod-ready"])
    assert probe["deleted_pod"].startswith("not judged")
    assert fake_node_names(fake) == ["prod-kwok-0001", "prod-kwok-0002"]  # named after the context
    release(settings, run_context(tmp_path), toolbox(stack))
    assert fake_node_names(fake) == []


def test_fake_nodes_are_removed_when_provisioning_fails_after_creating_them(
    stack: SimulatedStack, fake: FakeKube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> list[str]:
        raise errors.InfrastructureError("the suite's runtimes could not be applied")

    monkeypatch.setattr(provision, "apply_suite_objects", broken)
    cluster_kwok_stages(fake)
    settings = with_nodes(existing_settings(tmp_path, kwok_managed=True), 3)
    with pytest.raises(errors.InfrastructureError, match="runtimes could not be applied"):
        acquire(settings, run_context(tmp_path), toolbox(stack))
    assert len(fake_node_names(fake)) == 3  # created before the failure
    fake.put(worker_node("gpu-real", None, capacity=8))
    release(settings, run_context(tmp_path), toolbox(stack))
    assert fake_node_names(fake) == []
    assert fake.get(kinds.NODE, "gpu-real")
