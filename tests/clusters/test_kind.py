"""kind provider: generated config, creation through pytest-kind-ng's KindCluster with a fake `kind` on PATH,
reuse, refusal to adopt a foreign cluster, and every failure message (no docker, kind missing, create fails)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kai_conformance.clusters import commands, kind, node_images, tools
from kai_conformance.clusters.commands import CommandFailed
from kai_conformance.clusters.topology import load_topology, with_slices
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.waits import TimeoutPolicy
from tests.fakes.commands import FakeKind, FakeRunner, tools_on_path

IMAGE = "kindest/node:v1.35.5@sha256:ce977ae6d65918d0b58a5f8b5e940429c2ce42fa3a5619ec2bbc60b949c0ac95"
GPU_LABELS = {"nvidia.com/gpu.product": "KAI-Conformance-Fake-GPU", "nvidia.com/gpu.memory": "11441",
              "run.ai/fake.gpu": "true", "kai-conformance/zone": "zone-a"}  # fmt: skip
RACKS = ("rack-1", "rack-1", "rack-2")  # pr-gate: two workers in rack-1, one in rack-2


@pytest.fixture
def fake_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeKind:
    monkeypatch.chdir(tmp_path)  # KindCluster keeps a working directory under the current one
    tools_on_path(tmp_path / "bin", monkeypatch, names=())
    monkeypatch.setattr(tools, "TOOLS_BIN", tmp_path / "no-tools")
    return FakeKind.install(tmp_path / "bin", monkeypatch)


def provider(tmp_path: Path, name: str = "kc-test") -> kind.KindProvider:
    return kind.KindProvider(name, kind.kubeconfig_path(tmp_path, name), TimeoutPolicy(0.1))


def up(tmp_path: Path, *, reuse: bool = False, keep: bool = False, name: str = "kc-test"):
    return kind.up(name, reuse=reuse, keep=keep, topology=load_topology("pr-gate"), node_image=IMAGE,
                   state_dir=tmp_path, provider=provider(tmp_path, name))  # fmt: skip


def test_kind_config_has_pinned_image_topology_labels_and_worker_indexes() -> None:
    config = kind.kind_config(with_slices(load_topology("pr-gate"), 0), IMAGE)

    def worker(i):
        return {
            "role": "worker",
            "image": IMAGE,
            "labels": {**GPU_LABELS, "kai-conformance/rack": RACKS[i], "kai-conformance/worker-index": str(i)},
        }

    assert config == {
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "nodes": [{"role": "control-plane", "image": IMAGE}, worker(0), worker(1), worker(2)],
    }
    release = kind.kind_config(load_topology("release"), IMAGE)
    assert [n.get("labels", {}).get("kai-conformance/worker-index") for n in release["nodes"]] == [
        None, "0", "1", "2", "3", "4",
    ]  # fmt: skip
    assert release["nodes"][-1]["labels"] == {"kai-conformance/worker-index": "4"}  # the CPU-only worker


def test_rendered_config_text_is_exact() -> None:
    text = kind.render_config(load_topology("pr-gate"), IMAGE)
    assert text.startswith(
        "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n"
        f"  image: {IMAGE}\n- role: worker\n  image: {IMAGE}\n  labels:\n"
        "    nvidia.com/gpu.product: KAI-Conformance-Fake-GPU\n    nvidia.com/gpu.memory: '11441'\n"
        "    run.ai/fake.gpu: 'true'\n    kai-conformance/zone: zone-a\n    kai-conformance/rack: rack-1\n"
        "    kai-conformance/worker-index: '0'\n"
    )
    assert yaml.safe_load(text) == kind.kind_config(load_topology("pr-gate"), IMAGE)


def test_topology_kind_section_is_merged_at_the_top(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("nodes: [{role: control-plane}, {role: worker, gpus: 2}]\nkind: {networking: {ipFamily: ipv4}}\n")
    config = kind.kind_config(load_topology(str(path)), IMAGE)
    assert config["networking"] == {"ipFamily": "ipv4"}
    assert list(config) == ["kind", "apiVersion", "networking", "nodes"]


@pytest.mark.parametrize(
    ("label", "message"),
    [
        ("node-role.kubernetes.io/gpu-worker", "kubelet refuses in --node-labels"),
        ("kubernetes.io/role", "kubelet refuses in --node-labels"),
        ("foo.k8s.io/x", "kubelet refuses in --node-labels"),
        ("kai-conformance/worker-index", "is set by the suite on every worker"),
        ("bad key/x", "not a valid label key"),
    ],
)
def test_topology_rejects_labels_kind_cannot_set(tmp_path: Path, label: str, message: str) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({"nodes": [{"role": "control-plane"}, {"role": "worker", "labels": {label: "x"}}]}))
    with pytest.raises(errors.UsageError, match=message):
        load_topology(str(path))


@pytest.mark.parametrize("label", ["node.kubernetes.io/pool", "kubernetes.io/os", "topology.kubernetes.io/zone",
                                   "nvidia.com/gpu.product", "example.com/role"])  # fmt: skip
def test_topology_accepts_labels_kubelet_allows(tmp_path: Path, label: str) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({"nodes": [{"role": "control-plane"}, {"role": "worker", "labels": {label: "x"}}]}))
    assert load_topology(str(path)).workers[0].labels == {label: "x"}


def test_topology_kind_section_may_not_set_nodes(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("nodes: [{role: control-plane}]\nkind: {nodes: []}\n")
    with pytest.raises(errors.UsageError, match=r"may not set \['nodes'\]"):
        load_topology(str(path))


def test_up_creates_the_cluster_through_kindcluster_with_the_generated_config(
    fake_kind: FakeKind, tmp_path: Path
) -> None:
    state = up(tmp_path)
    kubeconfig = str(kind.kubeconfig_path(tmp_path, "kc-test"))
    assert fake_kind.calls("create") == [
        [
            "create",
            "cluster",
            "--name=kc-test",
            f"--kubeconfig={kubeconfig}",
            "--config",
            str(tmp_path / "kind-kc-test.yaml"),
        ]
    ]
    assert fake_kind.state["configs"] == [kind.render_config(load_topology("pr-gate"), IMAGE)]
    assert "current-context: kind-kc-test" in Path(kubeconfig).read_text()
    assert (state.provider, state.name, state.kubeconfig) == ("kind", "kc-test", kubeconfig)
    assert state.created_by_run
    assert not state.kept
    assert state.disruptive_opt_in == kind.KIND_OPT_IN


def test_a_cluster_of_that_name_is_never_adopted_without_reuse(fake_kind: FakeKind, tmp_path: Path) -> None:
    fake_kind.update(clusters=["kc-test"])
    with pytest.raises(
        errors.UsageError, match=r"already exists and this run did not create it; pass --reuse-cluster kc-test"
    ):
        up(tmp_path)
    assert fake_kind.calls("create") == []
    assert fake_kind.calls("delete") == []


def test_reuse_uses_the_existing_cluster_and_marks_it_kept(fake_kind: FakeKind, tmp_path: Path) -> None:
    fake_kind.update(clusters=["kc-test"])
    state = up(tmp_path, reuse=True)
    assert not state.created_by_run
    assert state.kept
    assert fake_kind.calls("create") == []
    assert fake_kind.calls("get", "kubeconfig") == [["get", "kubeconfig", "--name", "kc-test"]]
    assert "kind-kc-test" in Path(state.kubeconfig).read_text()


def test_reuse_creates_the_cluster_when_absent_and_still_keeps_it(fake_kind: FakeKind, tmp_path: Path) -> None:
    state = up(tmp_path, reuse=True)
    assert state.created_by_run
    assert state.kept
    assert len(fake_kind.calls("create")) == 1


def test_create_failure_quotes_kind_and_removes_what_it_left(fake_kind: FakeKind, tmp_path: Path) -> None:
    fake_kind.update(fail={"create cluster": "ERROR: failed to create cluster: could not find a log line that matches"})
    with pytest.raises(CommandFailed) as caught:
        up(tmp_path)
    message = str(caught.value)
    assert "`kind create cluster --name=kc-test" in message
    assert "failed (exit 1) while creating kind cluster kc-test" in message
    assert "ERROR: failed to create cluster: could not find a log line that matches" in message
    assert "fix: check that Docker runs" in message
    assert "max_user_watches" in message
    assert fake_kind.calls("delete") == [["delete", "cluster", "--name", "kc-test"]]


def test_no_docker_engine_is_named_with_its_fix(fake_kind: FakeKind, tmp_path: Path) -> None:
    fake_kind.update(fail={"get clusters": 'ERROR: failed to list clusters: command "docker ps -a" failed'})
    with pytest.raises(CommandFailed) as caught:
        up(tmp_path)
    assert str(caught.value) == (
        '`kind get clusters` failed (exit 1):\n  ERROR: failed to list clusters: command "docker ps -a" failed\n'
        "fix: kind needs a running Docker engine: start Docker and make sure `docker info` succeeds"
    )


def test_kind_missing_names_the_fetch_command(fake_kind: FakeKind, tmp_path: Path) -> None:
    (fake_kind.bin_dir / "kind").unlink()
    with pytest.raises(
        errors.UsageError, match=r"kind is not on PATH; fix: python -m kai_conformance.clusters.fetch_tools kind"
    ):
        up(tmp_path)


def test_images_are_loaded_and_a_missing_image_is_named(fake_kind: FakeKind, tmp_path: Path) -> None:
    up(tmp_path)
    fake_kind.update(missing_images=["localhost/kai/admission:pr-1"])
    p = provider(tmp_path)
    p.load_images(("localhost/kai/operator:pr-1", "localhost/kai/binder:pr-1"))
    assert fake_kind.state["loaded"] == ["localhost/kai/operator:pr-1", "localhost/kai/binder:pr-1"]
    assert fake_kind.calls("load") == [  # one archive for all, imported once per node
        ["load", "docker-image", "--name", "kc-test", "localhost/kai/operator:pr-1", "localhost/kai/binder:pr-1"]
    ]
    with pytest.raises(
        CommandFailed, match=r"(?s)not present locally.*docker image inspect localhost/kai/admission:pr-1"
    ):
        p.load_images(("localhost/kai/admission:pr-1",))


def test_delete_runs_kind_delete_with_the_kubeconfig(fake_kind: FakeKind, tmp_path: Path) -> None:
    up(tmp_path)
    provider(tmp_path).delete()
    assert fake_kind.calls("delete") == [
        ["delete", "cluster", "--name=kc-test", f"--kubeconfig={kind.kubeconfig_path(tmp_path, 'kc-test')}"]
    ]
    assert fake_kind.state["clusters"] == []


WORKLOAD_IMAGE = "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"


def docker_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeRunner:
    """docker answered by a fake runner (the image is local, Docker's platform is linux/amd64), kind by the fake."""
    tools_on_path(tmp_path / "bin", monkeypatch, names=("docker",))
    runner = FakeRunner()
    runner.on("kind", action=lambda argv: commands.run(argv, timeout=10, check=False))
    runner.on("docker", "image", "inspect", stdout="sha256:0b5e\n")
    runner.on("docker", "version", stdout="linux/amd64\n")

    def save(argv: tuple[str, ...]) -> None:
        Path(argv[argv.index("--output") + 1]).write_text(argv[-1])

    runner.on("docker", "image", "save", action=save)
    return runner


def test_the_workload_image_is_loaded_from_local_docker(fake_kind: FakeKind, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    up(tmp_path)
    runner = docker_world(tmp_path, monkeypatch)
    p = kind.KindProvider("kc-test", kind.kubeconfig_path(tmp_path, "kc-test"), TimeoutPolicy(0.1), runner)
    p.load_workload_image(WORKLOAD_IMAGE)
    assert fake_kind.state["loaded"] == [WORKLOAD_IMAGE]
    assert runner.commands("docker", "pull") == []


def test_a_one_platform_image_store_is_loaded_as_a_single_platform_archive(
    fake_kind: FakeKind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Docker's containerd image store keeps one platform of a multi-platform image; `kind load docker-image`
    then fails (kind#3795), so the image goes in as an archive of that one platform."""
    up(tmp_path)
    fake_kind.update(one_platform_images=[WORKLOAD_IMAGE])
    runner = docker_world(tmp_path, monkeypatch)
    p = kind.KindProvider("kc-test", kind.kubeconfig_path(tmp_path, "kc-test"), TimeoutPolicy(0.1), runner)
    p.load_workload_image(WORKLOAD_IMAGE)
    archive = str(tmp_path / "image-kc-test.tar")
    assert runner.commands("docker", "image", "save") == [
        ("docker", "image", "save", "--platform", "linux/amd64", "--output", archive, WORKLOAD_IMAGE)
    ]
    assert fake_kind.calls("load", "image-archive") == [["load", "image-archive", archive, "--name", "kc-test"]]
    assert fake_kind.state["loaded"] == [WORKLOAD_IMAGE]
    assert not Path(archive).exists()


def test_an_old_docker_that_cannot_save_one_platform_says_what_to_do(
    fake_kind: FakeKind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    up(tmp_path)
    fake_kind.update(one_platform_images=[WORKLOAD_IMAGE])
    runner = docker_world(tmp_path, monkeypatch)
    runner.on("docker", "image", "save", returncode=125, stderr="unknown flag: --platform")
    p = kind.KindProvider("kc-test", kind.kubeconfig_path(tmp_path, "kc-test"), TimeoutPolicy(0.1), runner)
    with pytest.raises(
        CommandFailed, match=r"(?s)unknown flag: --platform\nfix: saving one platform of .* needs Docker 28"
    ):
        p.load_workload_image(WORKLOAD_IMAGE)
    assert fake_kind.state["loaded"] == []


# ------------------------------------------------------------------------------------------ images already there
KAI_IMAGES = ("localhost/kai/binder:v0.17.0", "registry.k8s.io/kwok/kwok:v0.8.0", "busybox")
LOCAL_IDS = {"localhost/kai/binder:v0.17.0": "sha256:b1", "registry.k8s.io/kwok/kwok:v0.8.0": "sha256:k1",
             "busybox": "sha256:bb"}  # fmt: skip


def crictl_images(*held: tuple[str, str]) -> str:
    """``crictl images -o json`` of a node holding (name, ID) pairs."""
    return json.dumps({"images": [{"id": image_id, "repoTags": [name], "size": "1"} for name, image_id in held]})


ALL_HELD = crictl_images(("localhost/kai/binder:v0.17.0", "sha256:b1"), ("registry.k8s.io/kwok/kwok:v0.8.0", "sha256:k1"),
                         ("docker.io/library/busybox:latest", "sha256:bb"))  # fmt: skip


def images_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_kind: FakeKind,
                 listings: dict[str, str | None]) -> tuple[kind.KindProvider, FakeRunner]:  # fmt: skip
    """docker by a fake runner: the local IDs above, each node's ``crictl images`` (None: the exec fails)."""
    up(tmp_path)
    fake_kind.update(nodes=list(listings))
    runner = docker_world(tmp_path, monkeypatch)
    runner.on("docker", "image", "inspect", action=lambda argv: "".join(f"{LOCAL_IDS[i]}\n" for i in argv[5:]))
    for node, listing in listings.items():
        runner.on("docker", "exec", node, stdout=listing or "", returncode=0 if listing is not None else 1)
    return kind.KindProvider("kc-test", kind.kubeconfig_path(tmp_path, "kc-test"), TimeoutPolicy(0.1), runner), runner


def test_images_every_node_holds_with_the_local_id_are_not_loaded_again(
    fake_kind: FakeKind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale_kwok = crictl_images(("localhost/kai/binder:v0.17.0", "sha256:b1"), ("registry.k8s.io/kwok/kwok:v0.8.0", "sha256:OLD"),
                               ("docker.io/library/busybox:latest", "sha256:bb"))  # fmt: skip
    p, runner = images_world(
        tmp_path, monkeypatch, fake_kind, {"kc-test-control-plane": ALL_HELD, "kc-test-worker": stale_kwok}
    )
    p.load_images(KAI_IMAGES)
    assert fake_kind.calls("load") == [
        ["load", "docker-image", "--name", "kc-test", "registry.k8s.io/kwok/kwok:v0.8.0"]
    ]
    assert len(runner.commands("docker", "exec")) == 2  # one look per node, not one per image and node


def test_nothing_is_loaded_when_every_node_holds_every_image(
    fake_kind: FakeKind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p, _ = images_world(
        tmp_path, monkeypatch, fake_kind, {"kc-test-control-plane": ALL_HELD, "kc-test-worker": ALL_HELD}
    )
    p.load_images(KAI_IMAGES)
    assert fake_kind.calls("load") == []


@pytest.mark.parametrize(
    "listings",
    [{"kc-test-control-plane": ALL_HELD, "kc-test-worker": None}, {"kc-test-control-plane": "not json"}, {}],
    ids=["an-exec-fails", "unreadable-listing", "no-nodes"],
)
def test_when_a_node_cannot_be_asked_kind_decides_for_every_image(
    fake_kind: FakeKind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listings: dict[str, str | None]
) -> None:
    p, _ = images_world(tmp_path, monkeypatch, fake_kind, listings)
    p.load_images(KAI_IMAGES)
    assert fake_kind.calls("load") == [["load", "docker-image", "--name", "kc-test", *KAI_IMAGES]]


@pytest.mark.parametrize(
    ("image", "listed"),
    [
        ("busybox", "docker.io/library/busybox:latest"),
        ("busybox:1.37", "docker.io/library/busybox:1.37"),
        ("kubeflow/trainer:v2", "docker.io/kubeflow/trainer:v2"),
        ("localhost/kai/binder:v0.17.0", "localhost/kai/binder:v0.17.0"),
        ("localhost:5000/kai/binder", "localhost:5000/kai/binder:latest"),
        ("us-central1-docker.pkg.dev/k8s-staging-images/jobset/jobset:v0.12.0",
         "us-central1-docker.pkg.dev/k8s-staging-images/jobset/jobset:v0.12.0"),
        ("ghcr.io/x/y@sha256:ab", None),
    ],
)  # fmt: skip
def test_an_image_is_looked_for_under_the_name_containerd_lists(image: str, listed: str | None) -> None:
    assert node_images.normalized(image) == listed
