"""kind clusters: a config generated from the topology, created and deleted through pytest-kind-ng.

``pytest_kind.KindCluster`` runs ``kind create/delete cluster``; the suite gives it
the kind binary found on PATH or in ``.tools/bin`` (never its built-in download of an old kind) and the generated
config file. Where it falls short the kind CLI is called through :mod:`clusters.commands`: ``kind get clusters``
(to know whether this run creates the cluster, so it never deletes one it did not create), ``kind get
kubeconfig`` (a reused cluster's kubeconfig) and ``kind load docker-image`` of every image at once (KindCluster
loads one image per call). ``KindCluster`` does not capture what kind prints, so the suite
captures it around each call and quotes its tail when kind fails.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kai_conformance.clusters import commands, node_images
from kai_conformance.clusters.nodes import CGROUP_V1_KUBELET_PATCH
from kai_conformance.clusters.state import ClusterState
from kai_conformance.clusters.tools import find_tool
from kai_conformance.clusters.topology import WORKER_INDEX_LABEL, Topology
from kai_conformance.fixtures import errors, progress
from kai_conformance.fixtures.waits import TimeoutPolicy

KIND_CONFIG_API = "kind.x-k8s.io/v1alpha4"
#: Why a kind cluster may run cases marked ``disruptive`` (ClusterState.disruptive_opt_in).
KIND_OPT_IN = "kind cluster made for testing"
CREATE_HINT = (
    "check that Docker runs and has room (`docker info`; several GB of memory and disk); on Linux, kind needs "
    "`sysctl fs.inotify.max_user_watches=524288 fs.inotify.max_user_instances=512`; the node image {image} is "
    "pulled from Docker Hub on first use: behind a mirror or air-gapped, put an image in the local Docker and pass "
    "--node-image=IMAGE (docs/clusters.md, 'Air-gapped')"
)


LOAD_HINT = "build or pull the image first: `docker image inspect {image}` must succeed"
WORKLOAD_IMAGE_HINT = (
    "the cases' pods run {image} (--workload-image) and the kind nodes do not have it; get it into the local "
    "Docker: `docker pull {image}` where its registry is reachable, or on an air-gapped machine `docker save` it "
    "elsewhere and `docker load` it here; or pass --workload-image=<your mirror of it> (any image with a POSIX sh "
    "and sleep)"
)
SAVE_HINT = (
    "saving one platform of {image} needs Docker 28 or newer; or pull it with Docker's classic image store "
    "(see kubernetes-sigs/kind#3795)"
)
#: What `kind load docker-image` says when the local image lacks platforms it tries to import (kind#3795).
ONE_PLATFORM_STORED = "content digest"


def kind_config(topology: Topology, node_image: str, *, kubelet_cgroup_v1: bool = False) -> dict[str, Any]:
    """The kind ``Cluster`` config for ``topology``: node image, node labels, worker index labels; with
    ``kubelet_cgroup_v1`` every kubelet may run on a cgroup v1 host (clusters/nodes.py)."""
    nodes = []
    worker_index = 0
    for spec in topology.kind_nodes:
        node: dict[str, Any] = {"role": spec.role, "image": node_image}
        labels = dict(spec.labels)
        if spec.role == "worker":
            labels[WORKER_INDEX_LABEL] = str(worker_index)
            worker_index += 1
        if labels:
            node["labels"] = labels
        nodes.append(node)
    config = {"kind": "Cluster", "apiVersion": KIND_CONFIG_API, **topology.kind_extra, "nodes": nodes}
    if kubelet_cgroup_v1:
        config["kubeadmConfigPatches"] = [*config.get("kubeadmConfigPatches", []), CGROUP_V1_KUBELET_PATCH]
    return config


def render_config(topology: Topology, node_image: str, *, kubelet_cgroup_v1: bool = False) -> str:
    config = kind_config(topology, node_image, kubelet_cgroup_v1=kubelet_cgroup_v1)
    return yaml.safe_dump(config, sort_keys=False, default_flow_style=False)


def _kind_cluster_class() -> type:
    from pytest_kind import KindCluster

    return KindCluster


@dataclass
class KindProvider:
    """One named kind cluster, driven through ``KindCluster`` and the kind CLI."""

    name: str
    kubeconfig: Path
    timeouts: TimeoutPolicy
    runner: commands.Runner = commands.run
    cluster_class: Callable[..., Any] | None = None  # pytest_kind.KindCluster unless a test substitutes it

    def _kind(self) -> str:
        return commands.tool("kind")

    def _cluster(self) -> Any:
        cls = self.cluster_class or _kind_cluster_class()
        kubectl = find_tool("kubectl")
        return cls(
            self.name,
            kubeconfig=self.kubeconfig,
            kind_path=Path(self._kind()),
            kubectl_path=Path(kubectl) if kubectl else None,
        )

    def _kind_step(self, what: str, action: Callable[[Any], None], hint: str) -> None:
        """Run ``action(KindCluster)``, capturing kind's output; on failure raise with its tail and ``hint``."""
        cluster = self._cluster()
        failure: subprocess.CalledProcessError | None = None
        with commands.captured_output() as output:
            try:
                action(cluster)
            except subprocess.CalledProcessError as exc:
                failure = exc
        if failure is not None:
            raise commands.CommandFailed(
                [str(a) for a in failure.cmd], f"failed (exit {failure.returncode}) while {what}", output[0], hint
            )

    # ------------------------------------------------------------------------------------------------ queries
    def exists(self) -> bool:
        answer = self.runner(
            [self._kind(), "get", "clusters"],
            timeout=self.timeouts("api"),
            check=False,
        )
        if answer.returncode != 0:
            raise commands.CommandFailed(
                answer.argv,
                f"failed (exit {answer.returncode})",
                answer.stderr or answer.stdout,
                "kind needs a running Docker engine: start Docker and make sure `docker info` succeeds",
            )
        return self.name in answer.stdout.split()

    def write_kubeconfig(self) -> None:
        answer = self.runner([self._kind(), "get", "kubeconfig", "--name", self.name], timeout=self.timeouts("api"))
        self.kubeconfig.parent.mkdir(parents=True, exist_ok=True)
        self.kubeconfig.touch(0o600, exist_ok=True)
        self.kubeconfig.write_text(answer.stdout)

    # ------------------------------------------------------------------------------------------------ actions
    def create(
        self, topology: Topology, node_image: str, config_path: Path, *, kubelet_cgroup_v1: bool = False
    ) -> None:
        """Create the cluster; if creation fails or is interrupted, remove whatever kind left behind."""
        config_path.write_text(render_config(topology, node_image, kubelet_cgroup_v1=kubelet_cgroup_v1))
        self.kubeconfig.parent.mkdir(parents=True, exist_ok=True)
        progress.report(
            f"creating kind cluster {self.name} ({topology.name}: {topology.description}; {node_image.split('@', maxsplit=1)[0]})"
        )
        try:
            self._kind_step(
                f"creating kind cluster {self.name} from {config_path}",
                lambda cluster: cluster.create(config_file=config_path),
                CREATE_HINT.format(image=node_image),
            )
        except BaseException:
            # This run checked that no cluster of this name existed, so whatever exists now is its own.
            with contextlib.suppress(Exception):
                self.runner([self._kind(), "delete", "cluster", "--name", self.name], timeout=self.timeouts("api"))
            raise
        progress.report(f"kind cluster {self.name} created")

    def load_images(self, images: tuple[str, ...], hint: str = LOAD_HINT) -> None:
        """Put ``images`` from the local Docker on every node, in one ``kind load docker-image`` (kind saves them
        into one archive and imports it once per node, instead of once per image and node)."""
        if not images:
            return
        there = node_images.already_loaded(self.runner, self._kind(), self.name, images, self.timeouts("api"))
        if there:
            progress.report(f"{len(there)} image(s) already on every node of kind cluster {self.name}, with the local "
                            f"Docker's ID, not loaded again: {', '.join(there)}")  # fmt: skip
            images = tuple(image for image in images if image not in there)
            if not images:
                return
        progress.report(f"loading {len(images)} image(s) into kind cluster {self.name}: {', '.join(images)}")
        argv = [self._kind(), "load", "docker-image", "--name", self.name, *images]
        done = self.runner(argv, timeout=self.timeouts("install"), check=False)
        if done.returncode != 0:
            output = done.stderr or done.stdout
            missing = [image for image in images if image in output] or list(images)
            raise commands.CommandFailed(
                argv, f"failed (exit {done.returncode}) while loading images into kind cluster {self.name}", output,
                hint.format(image=missing[0]),
            )  # fmt: skip

    def load_workload_image(self, image: str) -> None:
        """Put the image of the cases' pods on every node before any case runs, so no case waits for a registry
        pull (or fails without one): taken from the local Docker, pulled into it first when it is not there.
        kind skips nodes that already have it."""
        docker = commands.tool("docker")
        present = self.runner([docker, "image", "inspect", "--format", "{{.Id}}", image],
                              timeout=self.timeouts("api"), check=False)  # fmt: skip
        if present.returncode != 0:
            progress.report(f"pulling the workload image {image} (not in the local Docker)")
            pulled = self.runner([docker, "pull", image], timeout=self.timeouts("install"), check=False)
            if pulled.returncode != 0:
                raise commands.CommandFailed(
                    pulled.argv, f"failed (exit {pulled.returncode})", pulled.stderr or pulled.stdout,
                    WORKLOAD_IMAGE_HINT.format(image=image),
                )  # fmt: skip
        try:
            self.load_images((image,), WORKLOAD_IMAGE_HINT)
        except commands.CommandFailed as failure:
            if ONE_PLATFORM_STORED not in failure.output:
                raise
            self._load_one_platform(docker, image)

    def _load_one_platform(self, docker: str, image: str) -> None:
        """kind#3795: `kind load docker-image` imports every platform of a multi-platform image, while Docker's
        containerd image store (the default of fresh Docker Engine 29 installs and of Docker Desktop) holds only
        this machine's. Save just that platform (Docker ≥ 28) and load the archive instead."""
        platform = self.runner([docker, "version", "--format", "{{.Server.Os}}/{{.Server.Arch}}"],
                               timeout=self.timeouts("api")).stdout.strip()  # fmt: skip
        archive = self.kubeconfig.parent / f"image-{self.name}.tar"
        progress.report(f"loading {image} into kind cluster {self.name} as a {platform} archive (kind#3795)")
        try:
            for argv, hint in (
                ([docker, "image", "save", "--platform", platform, "--output", str(archive), image], SAVE_HINT),
                ([self._kind(), "load", "image-archive", str(archive), "--name", self.name], LOAD_HINT),
            ):
                done = self.runner(argv, timeout=self.timeouts("install"), check=False)
                if done.returncode != 0:
                    raise commands.CommandFailed(
                        argv, f"failed (exit {done.returncode})", done.stderr or done.stdout, hint.format(image=image)
                    )
        finally:
            archive.unlink(missing_ok=True)

    def delete(self) -> None:
        progress.report(f"deleting kind cluster {self.name}")
        self._kind_step(
            f"deleting kind cluster {self.name}",
            lambda cluster: cluster.delete(),
            f"delete it by hand: kind delete cluster --name {self.name}",
        )


def kubeconfig_path(state_dir: Path, name: str) -> Path:
    return state_dir / f"kind-{name}.kubeconfig"


def up(
    name: str,
    *,
    reuse: bool,
    keep: bool,
    topology: Topology,
    node_image: str,
    state_dir: Path,
    provider: KindProvider,
    kubelet_cgroup_v1: bool = False,
) -> ClusterState:
    """Create the kind cluster ``name``, or with ``reuse`` use it when it exists; never adopt one silently."""
    if provider.exists():
        if not reuse:
            raise errors.UsageError(
                f"a kind cluster named {name} already exists and this run did not create it; pass "
                f"--reuse-cluster {name} to use it (a reused cluster is never deleted), delete it with "
                f"`kind delete cluster --name {name}`, or choose another --cluster-name"
            )
        progress.report(f"reusing kind cluster {name}")
        provider.write_kubeconfig()
        created = False
    else:
        provider.create(topology, node_image, state_dir / f"kind-{name}.yaml", kubelet_cgroup_v1=kubelet_cgroup_v1)
        created = True
    return ClusterState(
        provider="kind",
        name=name,
        kubeconfig=str(provider.kubeconfig),
        created_by_run=created,
        kept=keep or reuse,
        disruptive_opt_in=KIND_OPT_IN,
    )
