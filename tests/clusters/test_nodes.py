"""The kind node image a run asks for (--node-image), the cgroup v1 refusal (--kubelet-cgroup-v1), and what the
report says the nodes run: read from the cluster, never the pin (real kind reported kindest/node:v1.34.8, the pin,
while a reused cluster's nodes ran v1.34.12)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from kai_conformance.clusters.kind import render_config
from kai_conformance.clusters.nodes import kubelet_refuses_cgroup_v1, minor_of_image, nodes_running
from kai_conformance.clusters.provision import acquire
from kai_conformance.fixtures.configuration import preflight
from kai_conformance.fixtures.configuration.resolution import CATALOG, resolve_settings
from kai_conformance.reports.runinfo import RunInfo
from tests.builders import unsliced
from tests.clusters.test_provision import World, world  # noqa: F401 (fixture)
from tests.fakes.installation import NODE_CONTAINER_IMAGE, make_settings, worker_node
from tests.fakes.kube import FakeKube
from tests.kwok.test_fake_nodes import Options

PIN_1_35 = CATALOG.node_image("1.35")


@pytest.mark.parametrize(
    ("image", "minor"),
    [
        ("kindest/node:v1.34.12-local", "1.34"),
        (PIN_1_35, "1.35"),
        ("mirror.example:5000/kindest/node:v1.37.0", "1.37"),
        ("kindest/node:1.36.4", "1.36"),
        ("kindest/node:latest", None),
        ("kindest/node@sha256:abc", None),
    ],
)
def test_the_minor_of_a_node_image_comes_from_its_tag(image: str, minor: str | None) -> None:
    assert minor_of_image(image) == minor


def test_the_kubelet_refuses_cgroup_v1_from_1_35() -> None:
    assert [kubelet_refuses_cgroup_v1(m) for m in ("1.33", "1.34", "1.35", "1.37", "2.0")] == [
        False, False, True, True, True,
    ]  # fmt: skip


def test_node_image_sets_the_minor_and_refuses_a_contradicting_k8s_version(tmp_path: Path) -> None:
    settings, problems = resolve_settings(Options(tmp_path, **{"--node-image": "kindest/node:v1.34.12-local"}))  # type: ignore[arg-type]
    assert problems == []
    assert (settings.kubernetes, settings.node_image) == ("1.34", "kindest/node:v1.34.12-local")
    assert settings.node_image_pin.startswith("kindest/node:v1.34.")
    settings, problems = resolve_settings(
        Options(tmp_path, **{"--node-image": "kindest/node:v1.34.12-local", "--k8s-version": "1.35"})  # type: ignore[arg-type]
    )
    assert settings is None
    assert problems[0].what == "--node-image kindest/node:v1.34.12-local runs Kubernetes 1.34 but --k8s-version is 1.35"


def test_node_options_only_apply_to_kind(tmp_path: Path) -> None:
    _, problems = resolve_settings(Options(tmp_path, **{"--cluster": "existing", "--node-image": "x:v1.35.0"}))  # type: ignore[arg-type]
    assert [p.what for p in problems] == [
        "--reuse-cluster, --keep-cluster, --load-image, --node-image and --kubelet-cgroup-v1 only apply to --cluster kind"
    ]


def test_the_cgroup_v1_opt_in_patches_every_kubelet_and_nothing_else() -> None:
    topology = unsliced("pr-gate")
    plain = yaml.safe_load(render_config(topology, PIN_1_35))
    patched = yaml.safe_load(render_config(topology, PIN_1_35, kubelet_cgroup_v1=True))
    assert "kubeadmConfigPatches" not in plain
    (patch,) = patched.pop("kubeadmConfigPatches")
    assert yaml.safe_load(patch) == {
        "kind": "KubeletConfiguration", "apiVersion": "kubelet.config.k8s.io/v1beta1", "failCgroupV1": False,
    }  # fmt: skip
    assert patched == plain


def engine(cgroup: str):
    def run(argv, timeout):
        return subprocess.CompletedProcess(argv, 0, f"{cgroup}\n", "")

    return run


def test_preflight_refuses_1_35_nodes_on_a_cgroup_v1_engine_and_names_the_ways_out() -> None:
    found = lambda tool: f"/usr/bin/{tool}"  # noqa: E731
    (problem,) = preflight.check_cgroup_v1("1.35", False, engine("1"), found)
    assert "the kubelet of Kubernetes 1.35 refuses cgroup v1" in problem.what
    assert all(way in problem.fix for way in ("--k8s-version 1.34", "cgroup v2", "--kubelet-cgroup-v1"))
    assert preflight.check_cgroup_v1("1.34", False, engine("1"), found) == []
    assert preflight.check_cgroup_v1("1.37", False, engine("2"), found) == []
    assert preflight.check_cgroup_v1("1.37", True, engine("1"), found) == []


def test_what_the_nodes_run_is_read_per_node_and_fake_nodes_are_left_out(fake: FakeKube) -> None:
    for index, (name, version) in enumerate((("w1", "v1.34.12"), ("w2", "v1.34.12"), ("w3", "v1.34.11"))):
        node = worker_node(name, index)
        node["status"]["nodeInfo"] = {**node["status"]["nodeInfo"], "kubeletVersion": version}
        fake.put(node)
    kwok = worker_node("kwok-0", None)
    kwok["metadata"]["annotations"] = {"kwok.x-k8s.io/node": "fake"}
    fake.put(kwok)
    running = nodes_running(fake, {"w1": "img:a", "w2": "img:a", "w3": "img:b"})
    assert running["count"] == 3
    assert running["kubelet"] == "v1.34.11 (1 nodes), v1.34.12 (2 nodes)"
    assert running["image"] == "img:a (2 nodes), img:b (1 nodes)"


def test_a_reused_cluster_is_reported_by_what_its_nodes_run_and_the_pin_only_as_a_pin(world: World) -> None:  # noqa: F811
    world.kind.state["clusters"] = ["kc-test"]
    world.stack.runner.on("docker", "inspect", "--format", "{{.Config.Image}}", stdout="kindest/node:v1.34.12\n")
    state = acquire(make_settings(world.tmp, reuse_cluster="kc-test"), world.run(), world.tools())
    assert state.stack["nodes"]["image"] == "kindest/node:v1.34.12"
    assert state.stack["nodes"]["kubelet"] == "v1.35.5"
    assert state.stack["node_image_pin"] == PIN_1_35
    assert "node_image" not in state.stack
    text = RunInfo("r", stack=state.stack).nodes
    assert text.startswith("kindest/node:v1.34.12 · kubelet v1.35.5 · containerd://2.1.1 · 3 nodes")
    assert f"the suite's pin for this minor, {PIN_1_35}, is not what runs" in text


def test_a_created_cluster_reports_its_image_and_a_kubelet_override(world: World) -> None:  # noqa: F811
    settings = make_settings(world.tmp, node_image_override=NODE_CONTAINER_IMAGE, kubelet_cgroup_v1=True)
    state = acquire(settings, world.run(), world.tools())
    config = yaml.safe_load((world.run().state_dir / "kind-kc-test.yaml").read_text())
    assert {node["image"] for node in config["nodes"]} == {NODE_CONTAINER_IMAGE}
    assert state.stack["node_image_requested"] == NODE_CONTAINER_IMAGE
    text = RunInfo("r", stack=state.stack).nodes
    assert f"{NODE_CONTAINER_IMAGE} · kubelet v1.35.5" in text
    assert f"(--node-image; the suite's pin for this minor is {PIN_1_35})" in text
    assert text.endswith("kubelet configuration changed by the suite: failCgroupV1: false")


def test_a_build_needs_its_chart_and_a_release_the_tables_do_not_know_does_not(tmp_path: Path) -> None:
    _, problems = resolve_settings(Options(tmp_path, **{"--kai-version": "main"}))  # type: ignore[arg-type]
    assert [p.what for p in problems] == [
        "--kai-version main is a build, not a release: there is no released chart or manifests to install"
    ]
    assert problems[0].fix.startswith(
        "pass --kai-chart=... with that build's (the run takes the expectations of v0.17.0)"
    )
    (tmp_path / "chart").mkdir()
    (tmp_path / "chart" / "Chart.yaml").write_text("name: kai-scheduler\nversion: 0.0.0\n")
    given = {"--kai-version": "main", "--kai-chart": str(tmp_path / "chart")}
    settings, problems = resolve_settings(Options(tmp_path, **given))  # type: ignore[arg-type]
    assert problems == [] and settings.assumptions == [
        "KAI main is not in the expectation tables: expectations assumed from v0.17.0"
    ]
    settings, problems = resolve_settings(Options(tmp_path, **{"--kai-version": "v0.18.1"}))  # type: ignore[arg-type]
    assert problems == [] and settings.combination.kai.assumed_from == "v0.17.0"


def test_a_kubernetes_minor_without_a_pinned_image_runs_with_a_node_image_and_assumes_the_newest(
    tmp_path: Path,
) -> None:
    _, problems = resolve_settings(Options(tmp_path, **{"--k8s-version": "1.99"}))  # type: ignore[arg-type]
    assert [p.what for p in problems] == ["Kubernetes 1.99 has no kind node image pinned in clusters/versions.yaml"]
    assert "--node-image=IMAGE" in problems[0].fix
    given = {"--node-image": "kindest/node:v1.99.0-local"}
    settings, problems = resolve_settings(Options(tmp_path, **given))  # type: ignore[arg-type]
    assert problems == []
    assert (settings.kubernetes, settings.node_image, settings.node_image_pin) == ("1.99", given["--node-image"], None)
    newest = max(settings.combination.kubernetes, key=lambda m: tuple(map(int, m.split("."))))
    assert settings.assumptions == [
        f"Kubernetes 1.99 is not in the expectation tables: expectations assumed from {newest}"
    ]


def test_a_reused_cluster_is_only_checked_for_cgroup_v1_when_it_does_not_exist_yet() -> None:
    """--reuse-cluster NAME creates NAME when it is absent: that creation must meet the cgroup v1 check too."""
    found = lambda tool: f"/usr/bin/{tool}"  # noqa: E731

    def kind(listed: str):
        return lambda argv, timeout: subprocess.CompletedProcess(argv, 0, listed, "")

    assert preflight.kind_cluster_exists("kc-gate", kind("kc-gate\nother\n"), found)
    assert not preflight.kind_cluster_exists("kc-gate", kind("kc-gate-old\n"), found)
    assert not preflight.kind_cluster_exists("kc-gate", kind(""), lambda tool: None)
