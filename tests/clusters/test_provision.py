"""One cluster per run: provisioned by the first process, read by the others (xdist workers simulated by
RunContexts sharing a state directory), a failure shared instead of repeated, torn down exactly once by the
main process, never when kept or reused; existing clusters: nothing faked, only the run's objects removed."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from kai_conformance.clusters import commands, tools
from kai_conformance.clusters.existing import OPT_IN_LABEL
from kai_conformance.clusters.install import kai_sizing
from kai_conformance.clusters.install.behaviour import COUNTED_FAILED, ENDED_FAILED
from kai_conformance.clusters.provision import Toolbox, acquire, release
from kai_conformance.clusters.state import ClusterState
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.configuration.resolution import version_origins
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.run import RunContext
from tests.fakes.commands import FakeKind, FakeRunner, tools_on_path
from tests.fakes.installation import SimulatedStack, deployment, make_settings, worker_node
from tests.fakes.kai.operator import DEFAULT_LIMITS, kai_config
from tests.fakes.kube import FakeKube

pytestmark = pytest.mark.usefixtures("fast_polling")

RUN_ID = "20260101-000000-abcd"
WORKLOAD_IMAGE = "registry.k8s.io/pause:3.10"  # tests.fakes.installation.make_settings


@dataclass
class World:
    kind: FakeKind
    stack: SimulatedStack
    tmp: Path

    def tools(self) -> Toolbox:
        return Toolbox(
            runner=self.stack.runner, kube=lambda kubeconfig, context: self.stack.fake, fetch=self.stack.fetch
        )

    def run(self, worker: str = "main") -> RunContext:
        return RunContext(RUN_ID, self.tmp / "report", self.tmp / "report" / ".state", worker)


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeKube) -> World:
    monkeypatch.chdir(tmp_path)
    tools_on_path(tmp_path / "bin", monkeypatch, names=("helm", "kubectl", "docker"))
    monkeypatch.setattr(tools, "TOOLS_BIN", tmp_path / "no-tools")
    fake_kind = FakeKind.install(tmp_path / "bin", monkeypatch)
    stack = SimulatedStack(fake)
    stack.add_workers(3)
    stack.runner.on("kind", action=lambda argv: commands.run(argv, timeout=10, check=False))
    stack.runner.on("docker", "image", "inspect", stdout="sha256:0b5e\n")  # the workload image is in local Docker
    return World(fake_kind, stack, tmp_path)


def nothing_allowed() -> Toolbox:
    """What a process that must only read the state gets: any command or API call fails the test."""

    def no_api(kubeconfig: str, context: str | None) -> FakeKube:
        raise AssertionError("a reading process touched the cluster")

    return Toolbox(runner=FakeRunner(), kube=no_api, fetch=lambda url, timeout: pytest.fail("fetched"))


def test_the_first_process_provisions_and_workers_read_the_state(world: World) -> None:
    state = acquire(make_settings(world.tmp), world.run("main"), world.tools())
    assert state.ready
    assert state.created_by_run
    assert not state.kept
    assert state.gpus == {"kc-test-worker": 4, "kc-test-worker2": 4, "kc-test-worker3": 4}
    assert state.stack["mode"] == "installed"
    assert state.stack["topology"] == "pr-gate"
    assert list(state.stack["components"]) == ["kai", "jobset", "trainer"]
    assert state.stack["suite_objects"][-2:] == [
        "Queue kai-conformance",
        "RuntimeClass nvidia (handler runc, for KAI's fractional GPU pods on fake GPUs)",  # kind has no `nvidia`
    ]
    assert {c["version_source"] for c in state.stack["components"].values()} == {"installed"}
    assert state.stack["behaviour"]["evicted_pod"] in (ENDED_FAILED, COUNTED_FAILED)  # proven on kind too
    assert acquire(make_settings(world.tmp), world.run("gw0"), nothing_allowed()) == state
    assert ClusterState.load(world.run().state_dir) == state


def test_concurrent_workers_provision_once(world: World) -> None:
    results: dict[str, ClusterState] = {}

    def work(worker: str) -> None:
        results[worker] = acquire(make_settings(world.tmp), world.run(worker), world.tools())

    threads = [threading.Thread(target=work, args=(w,)) for w in ("gw0", "gw1")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["gw0"] == results["gw1"]
    assert len(world.kind.calls("create")) == 1
    assert len(world.stack.runner.commands("helm", "upgrade", "--install", "kai-scheduler")) == 1


def test_teardown_happens_once_in_the_main_process(world: World) -> None:
    settings = make_settings(world.tmp)
    acquire(settings, world.run("gw0"), world.tools())
    release(settings, world.run("gw0"))
    release(settings, world.run("gw1"))
    assert world.kind.calls("delete") == []
    release(settings, world.run("main"))
    release(settings, world.run("main"))
    assert len(world.kind.calls("delete")) == 1
    assert world.kind.state["clusters"] == []


def test_kept_and_reused_clusters_are_never_deleted(world: World, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "kai_conformance")
    kept = make_settings(world.tmp, keep_cluster=True)
    acquire(kept, world.run(), world.tools())
    release(kept, world.run())
    assert world.kind.calls("delete") == []
    assert "kept kind cluster kc-test" in caplog.text
    assert "kind delete cluster --name kc-test" in caplog.text
    other = World(world.kind, world.stack, world.tmp / "second")
    reused = make_settings(other.tmp, reuse_cluster="kc-test")
    state = acquire(reused, other.run(), other.tools())
    assert not state.created_by_run
    assert state.kept
    release(reused, other.run())
    assert world.kind.calls("delete") == []
    assert world.kind.state["clusters"] == ["kc-test"]


def test_a_run_without_fake_nodes_removes_the_kai_sizes_a_killed_run_left(world: World, fake: FakeKube) -> None:
    killed = make_settings(world.tmp, reuse_cluster="kc-test")
    acquire(killed, world.run(), world.tools())
    kai_sizing.size(fake, killed.timeouts)  # a run with fake nodes, killed before its end
    other = World(world.kind, world.stack, world.tmp / "second")
    state = acquire(make_settings(other.tmp, reuse_cluster="kc-test"), other.run(), other.tools())
    assert fake.get(kinds.KAI_CONFIG, "kai-config")["spec"] == kai_config()["spec"]
    binder = fake.get(kinds.DEPLOYMENT, "binder", "kai-scheduler")["spec"]["template"]["spec"]["containers"][0]
    assert binder["resources"]["limits"] == DEFAULT_LIMITS["binder"]  # rolled back before KAI was proven
    assert "sizing" not in state.stack["components"]["kai"]


def test_a_failure_is_shared_not_repeated_and_the_cluster_still_goes(world: World) -> None:
    world.stack.runner.on(
        "helm", "upgrade", "--install", "kai-scheduler", returncode=1, stderr="Error: chart not found"
    )
    settings = make_settings(world.tmp)
    with pytest.raises(commands.CommandFailed, match="Error: chart not found"):
        acquire(settings, world.run("gw0"), world.tools())
    with pytest.raises(errors.InfrastructureError, match=r"(?s)provisioning the cluster failed earlier in this run: `helm "
                       r"upgrade --install kai-scheduler .*Error: chart not found"):  # fmt: skip
        acquire(settings, world.run("gw1"), nothing_allowed())
    state = ClusterState.load(world.run().state_dir)
    assert state is not None
    assert state.created_by_run
    assert not state.ready
    release(settings, world.run("main"))
    assert len(world.kind.calls("delete")) == 1


def test_a_usage_error_stays_one_for_every_worker(world: World) -> None:
    world.kind.update(clusters=["kc-test"])
    settings = make_settings(world.tmp)
    with pytest.raises(errors.UsageError, match="pass --reuse-cluster kc-test"):
        acquire(settings, world.run("gw0"), world.tools())
    with pytest.raises(
        errors.UsageError, match="failed earlier in this run: a kind cluster named kc-test already exists"
    ):
        acquire(settings, world.run("gw1"), nothing_allowed())
    release(settings, world.run("main"))
    assert world.kind.calls("delete") == []


def test_a_cluster_this_run_began_is_finished_not_refused(world: World) -> None:
    run = world.run()
    run.state_dir.mkdir(parents=True)
    world.kind.update(clusters=["kc-test"])
    ClusterState("kind", "kc-test", str(run.state_dir / "kind-kc-test.kubeconfig"), created_by_run=True).save(
        run.state_dir
    )
    state = acquire(make_settings(world.tmp), run, world.tools())
    assert state.ready
    assert state.created_by_run
    assert not state.kept
    assert world.kind.calls("create") == []


def test_loaded_images_go_in_before_the_install(world: World) -> None:
    from kai_conformance.fixtures.configuration.settings import InstallSources

    images = ("localhost/kai/operator:pr-1", "localhost/kai/scheduler:pr-1")
    sources = InstallSources(kai_image_registry="localhost/kai", kai_image_tag="pr-1", load_images=images)
    state = acquire(make_settings(world.tmp, sources=sources), world.run(), world.tools())
    assert world.kind.state["loaded"] == [*images, WORKLOAD_IMAGE]
    assert state.stack["loaded_images"] == list(images)
    assert state.stack["components"]["kai"]["values"]["global"] == {"registry": "localhost/kai", "tag": "pr-1"}


def test_the_workload_image_is_pulled_when_absent_then_loaded(world: World) -> None:
    world.stack.runner.on("docker", "image", "inspect", returncode=1, stderr="Error: No such image")
    world.stack.runner.on("docker", "pull")
    acquire(make_settings(world.tmp), world.run(), world.tools())
    assert world.stack.runner.commands("docker", "pull") == [("docker", "pull", WORKLOAD_IMAGE)]
    assert world.kind.state["loaded"] == [WORKLOAD_IMAGE]


def test_a_workload_image_that_cannot_be_had_names_the_air_gapped_fixes(world: World) -> None:
    world.stack.runner.on("docker", "image", "inspect", returncode=1, stderr="Error: No such image")
    world.stack.runner.on("docker", "pull", returncode=1, stderr="dial tcp: lookup registry.k8s.io: no such host")
    with pytest.raises(commands.CommandFailed) as failure:
        acquire(make_settings(world.tmp), world.run(), world.tools())
    message = str(failure.value)
    assert message.startswith(f"`docker pull {WORKLOAD_IMAGE}` failed (exit 1):\n  dial tcp: lookup registry.k8s.io")
    assert f"fix: the cases' pods run {WORKLOAD_IMAGE} (--workload-image)" in message
    assert "`docker save` it elsewhere and `docker load` it here" in message
    assert "--workload-image=<your mirror of it> (any image with a POSIX sh and sleep)" in message
    assert world.kind.state["loaded"] == []
    assert world.kind.calls("delete") == [], "the created cluster stays for teardown, which deletes it"


# ------------------------------------------------------------------------------------------------ existing
def existing(world: World, **overrides) -> object:
    kubeconfig = world.tmp / "kubeconfig"
    kubeconfig.parent.mkdir(parents=True, exist_ok=True)
    kubeconfig.write_text("apiVersion: v1\n")
    fields = {"cluster": "existing", "kubeconfig": str(kubeconfig), "context": "prod", "install": False, **overrides}
    return make_settings(world.tmp, **fields)


def test_existing_cluster_gpus_are_discovered_not_faked(world: World, fake: FakeKube) -> None:
    for name in ("kc-test-worker", "kc-test-worker2", "kc-test-worker3"):
        fake.store.pop(("v1", "Node", None, name))
    fake.put(worker_node("gpu-a", None, capacity=8))
    fake.put(worker_node("gpu-b", None, capacity=2))
    world.stack.runner.calls.clear()
    state = acquire(existing(world, install=True), world.run(), world.tools())
    assert (state.provider, state.name, state.context, state.created_by_run) == ("existing", "prod", "prod", False)
    assert state.gpus == {"gpu-a": 8, "gpu-b": 2}
    assert fake.operations("patch") == []
    assert world.kind.calls() == []
    assert state.disruptive_opt_in == ""


def test_existing_cluster_is_verified_unless_install_is_asked(world: World) -> None:
    acquire(make_settings(world.tmp), world.run(), world.tools())  # a stack to verify
    other = World(world.kind, world.stack, world.tmp / "second")
    world.stack.runner.calls.clear()
    state = acquire(existing(other), other.run(), other.tools())
    assert state.stack["mode"] == "verified"
    assert world.stack.runner.calls == []


def test_existing_cluster_opt_in_label_and_flag(world: World, fake: FakeKube) -> None:
    fake.put(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system", "labels": {OPT_IN_LABEL: "true"}}}
    )
    state = acquire(existing(world, install=True), world.run(), world.tools())
    assert state.disruptive_opt_in == "label kai-conformance/allow-disruptive=true on namespace kube-system"
    other = World(world.kind, world.stack, world.tmp / "second")
    assert (
        acquire(existing(other, allow_disruptive=True), other.run(), other.tools()).disruptive_opt_in
        == "--allow-disruptive"
    )


def test_existing_cluster_release_removes_only_this_runs_objects(world: World, fake: FakeKube) -> None:
    settings = existing(world, install=True)
    acquire(settings, world.run(), world.tools())
    fake.put({"apiVersion": kinds.QUEUE.api_version, "kind": "Queue", "metadata": {"name": "production"}})
    release(settings, world.run(), world.tools())
    assert [q["metadata"]["name"] for q in fake.objects(kinds.QUEUE)] == ["production"]
    assert fake.objects(kinds.CLUSTER_TRAINING_RUNTIME) == []
    assert fake.objects(kinds.DEPLOYMENT, "kai-scheduler")  # the stack stays
    assert world.kind.calls() == []


def test_unreachable_existing_cluster_is_named_with_its_fix(world: World, fake: FakeKube) -> None:
    fake.fail("version", 0, message="connection refused")
    settings = existing(world)
    with pytest.raises(errors.InfrastructureError) as caught:
        acquire(settings, world.run(), world.tools())
    message = str(caught.value)
    assert message.startswith(f"the cluster in {settings.kubeconfig} (context prod) is unreachable: ")
    assert message.endswith(
        "connection refused\nfix: check the cluster is up and the kubeconfig points at it (`kubectl cluster-info`)"
    )


# ------------------------------------------------------------------------------------------ judged by behaviour
DEFAULT_ORIGIN = "the default combination kai-v0.17.0+trainer-v2.3.0 (clusters/versions.yaml)"


def test_an_existing_cluster_whose_kai_runs_without_deployments_is_accepted_by_behaviour(world: World,
                                                                                        fake: FakeKube) -> None:  # fmt: skip
    world.stack.run_as_processes("kai", "jobset", "trainer")  # as in the real-stack run: processes, no Deployments
    origins = version_origins(None, {"kai": "v0.17.0", "trainer": None, "jobset": None})
    state = acquire(existing(world, version_origins=origins), world.run(), world.tools())
    assert state.ready
    assert fake.objects(kinds.DEPLOYMENT) == []
    components = state.stack["components"]
    assert {name: (c["version"], c["version_source"], c["established"]) for name, c in components.items()} == {
        "kai": ("v0.17.0", "declared", "declared by --kai-version v0.17.0"),
        "jobset": ("v0.12.0", "declared", f"declared by {DEFAULT_ORIGIN}"),
        "trainer": ("v2.3.0", "declared", f"declared by {DEFAULT_ORIGIN}"),
    }  # fmt: skip
    assert not any("deployments" in c or "images" in c for c in components.values())  # nothing claimed of binaries
    behaviour = state.stack["behaviour"]
    assert behaviour["evicted_pod"] in (ENDED_FAILED, COUNTED_FAILED) and behaviour["removed"] == "everything"
    assert [n for n in fake.objects(kinds.NAMESPACE) if n["metadata"]["name"].startswith("kc-")] == []


def test_versions_are_detected_from_deployments_found_in_any_namespace(world: World, fake: FakeKube) -> None:
    world.stack.run_as_processes("kai", "jobset", "trainer")
    fake.put(deployment("sched", "gpu-platform", "registry.example/kai-scheduler/scheduler:v0.17.0"))
    state = acquire(existing(world), world.run(), world.tools())
    kai, trainer = state.stack["components"]["kai"], state.stack["components"]["trainer"]
    assert (kai["version_source"], kai["deployments"]) == ("detected", ["gpu-platform/sched"])
    assert kai["established"] == "detected from image registry.example/kai-scheduler/scheduler:v0.17.0 of " \
        "Deployment gpu-platform/sched"  # fmt: skip
    assert kai["images"] == {"registry.example/kai-scheduler/scheduler:v0.17.0":
                             "registry.example/kai-scheduler/scheduler@sha256:" + "ab" * 32}  # fmt: skip
    assert trainer["version_source"] == "declared"
    assert trainer["established"] == "declared by the combination kai-v0.17.0+trainer-v2.3.0"  # no option recorded


def test_a_stack_that_does_not_schedule_stops_the_run_before_any_case(world: World, fake: FakeKube) -> None:
    world.stack.run_as_processes("kai", "jobset", "trainer")
    world.stack.faults.podgrouper_down = True
    settings = existing(world)
    with pytest.raises(errors.InfrastructureError, match=r"^KAI podgrouper made no PodGroup for the probe pod"):
        acquire(settings, world.run(), world.tools())
    assert not ClusterState.load(world.run().state_dir).ready
    release(settings, world.run(), world.tools())
    assert fake.objects(kinds.QUEUE) == [] and fake.objects(kinds.CLUSTER_TRAINING_RUNTIME) == []
    assert [n for n in fake.objects(kinds.NAMESPACE) if n["metadata"]["name"].startswith("kc-")] == []
