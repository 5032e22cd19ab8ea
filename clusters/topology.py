"""Cluster topologies (``clusters/topologies/*.yaml``): the nodes of a kind cluster, their GPUs and labels, and the
kwok fake nodes a scale topology adds. Loading validates a file and raises :class:`UsageError` naming the problem.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kai_conformance.clusters.layout import GpuLayout, GpuNode
from kai_conformance.fixtures.errors import UsageError

CLUSTERS_DIR = Path(__file__).resolve().parent
TOPOLOGIES_DIR = CLUSTERS_DIR / "topologies"
#: Label the suite puts on each worker (kind config) so GPU counts map onto nodes by index, not by name.
WORKER_INDEX_LABEL = "kai-conformance/worker-index"
#: The topology levels of the suite's clusters (docs/clusters.md, "Topologies").
ZONE_LABEL = "kai-conformance/zone"
RACK_LABEL = "kai-conformance/rack"
#: kind sets node labels through kubelet ``--node-labels``, which refuses keys in the kubernetes.io / k8s.io
#: namespaces except these (kubelet flag validation; kubernetes-sigs/kind#3536): ``kind create cluster`` fails.
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
KUBELET_LABELS = frozenset({
    "beta.kubernetes.io/arch", "beta.kubernetes.io/instance-type", "beta.kubernetes.io/os",
    "failure-domain.beta.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone", "kubernetes.io/arch",
    "kubernetes.io/hostname", "kubernetes.io/os", "node.kubernetes.io/instance-type", "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
})  # fmt: skip
#: KAI's node-pool label (``global.nodePoolLabelKey``, default ``kai.scheduler/node-pool``): a SchedulingShard whose
#: ``partitionLabelValue`` is a slice's name schedules only the nodes, queues and PodGroups carrying it (KAI §2.5).
NODE_POOL_LABEL = "kai.scheduler/node-pool"
SLICE_PREFIX = "kc-slice-"
#: Each slice is a full copy of the topology's workers: more than this many copies on one machine is a cluster,
#: not a slice (each one is as many kind nodes as the topology has workers, plus a scheduler).
MAX_SLICES = 8
#: Top-level fields of the kind config the suite writes itself; a topology's ``kind:`` section may not set them.
KIND_OWN_FIELDS = ("kind", "apiVersion", "name", "nodes")


@dataclass(frozen=True)
class NodeSpec:
    role: str  # control-plane | worker
    gpus: int = 0
    labels: dict[str, str] = field(default_factory=dict, compare=False, hash=False)


#: The most fake nodes one run may add (--fake-nodes, a topology's fake_nodes.count): kwok itself handles thousands,
#: but every fake node is a Node object the API server, KAI's scheduler cache and the suite's polls carry; past this
#: the run measures the control plane of a laptop-sized kind cluster, not scheduling.
MAX_FAKE_NODES = 1000
#: The most GPUs one fake node may advertise (a DGX-class node has 8; 64 leaves room for odd layouts).
MAX_FAKE_NODE_GPUS = 64


@dataclass(frozen=True)
class FakeNodes:
    """kwok-managed nodes added to the cluster (clusters/kwok/fake_nodes.py): ``count`` × ``gpus`` fake GPUs, spread over racks
    of ``nodes_per_rack`` nodes and zones of ``racks_per_zone`` racks (labels as the kind workers carry them)."""

    count: int = 0
    gpus: int = 8
    nodes_per_rack: int = 8
    racks_per_zone: int = 4
    labels: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    def node_labels(self, index: int) -> dict[str, str]:
        rack = index // self.nodes_per_rack
        zone = rack // self.racks_per_zone
        return {**self.labels, ZONE_LABEL: f"zone-{zone + 1}", RACK_LABEL: f"rack-{rack + 1}"}


def fake_nodes_problem(count: int, gpus: int) -> str | None:
    """Why ``count`` fake nodes of ``gpus`` GPUs cannot be made, or ``None``."""
    if count < 0 or count > MAX_FAKE_NODES:
        return f"a fake-node count must be 0..{MAX_FAKE_NODES}, not {count}"
    if gpus < 1 or gpus > MAX_FAKE_NODE_GPUS:
        return f"GPUs per fake node must be 1..{MAX_FAKE_NODE_GPUS}, not {gpus}"
    return None


@dataclass(frozen=True)
class Topology:
    name: str
    description: str
    nodes: tuple[NodeSpec, ...]
    kind_extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    fake_nodes: FakeNodes = field(default_factory=FakeNodes)
    #: Copies of the workers, each a node pool of its own with its own KAI scheduler (clusters/slices.py), where a
    #: case that needs "the whole cluster" runs beside the others instead of alone (fixtures/plugin/scheduling.py).
    slices: int = 0

    @property
    def workers(self) -> tuple[NodeSpec, ...]:
        """Every worker kind creates: the topology's own, then each slice's copy of them (in slice order)."""
        own = self.own_workers
        copies = tuple(
            NodeSpec(w.role, w.gpus, {**w.labels, NODE_POOL_LABEL: name}) for name in self.slice_names for w in own
        )
        return own + copies

    @property
    def own_workers(self) -> tuple[NodeSpec, ...]:
        return tuple(n for n in self.nodes if n.role == "worker")

    @property
    def slice_names(self) -> tuple[str, ...]:
        return tuple(f"{SLICE_PREFIX}{index + 1}" for index in range(self.slices))

    @property
    def kind_nodes(self) -> tuple[NodeSpec, ...]:
        """The kind config's nodes: control planes first, then :attr:`workers`."""
        return tuple(n for n in self.nodes if n.role != "worker") + self.workers

    def kind_node_names(self, cluster_name: str) -> list[str]:
        """Names kind gives the workers: ``<name>-worker``, ``<name>-worker2``, ..."""
        return [f"{cluster_name}-worker{'' if i == 0 else i + 1}" for i in range(len(self.workers))]

    def layout(self, cluster_name: str) -> GpuLayout:
        """The GPU layout this topology gives a kind cluster named ``cluster_name``, slices left out: the nodes
        the cluster's default scheduler places on (kind workers and kwok fake nodes)."""
        own = self._kind_layout(cluster_name)[: len(self.own_workers)]
        return GpuLayout(own + self.fake_layout(cluster_name).nodes)

    def slice_layouts(self, cluster_name: str) -> dict[str, GpuLayout]:
        """Each slice's nodes, by slice name: a copy of :meth:`layout`'s kind workers."""
        nodes = self._kind_layout(cluster_name)
        return {
            name: GpuLayout(tuple(n for n in nodes if n.labels.get(NODE_POOL_LABEL) == name))
            for name in self.slice_names
        }

    def _kind_layout(self, cluster_name: str) -> tuple[GpuNode, ...]:
        names = self.kind_node_names(cluster_name)
        return tuple(GpuNode(name, w.gpus, dict(w.labels)) for name, w in zip(names, self.workers, strict=True))

    def fake_layout(self, cluster_name: str) -> GpuLayout:
        """The kwok nodes of this topology (named by :func:`fake_node_name`)."""
        fake = self.fake_nodes
        return GpuLayout(
            tuple(GpuNode(fake_node_name(cluster_name, i), fake.gpus, fake.node_labels(i)) for i in range(fake.count))
        )


def available_topologies(directory: Path = TOPOLOGIES_DIR) -> list[str]:
    return sorted(p.stem for p in directory.glob("*.yaml"))


def load_topology(name_or_path: str, directory: Path = TOPOLOGIES_DIR) -> Topology:
    """A topology by name (a file in ``clusters/topologies``) or by path to a YAML file."""
    path = Path(name_or_path)
    if path.suffix and not path.is_file():  # a path, not a name
        why = "is a directory, not a file" if path.is_dir() else "does not exist"
        raise UsageError(f"--topology {name_or_path}: the topology file {why}")
    if not path.suffix:
        path = directory / f"{name_or_path}.yaml"
    if not path.is_file():
        raise UsageError(
            f"unknown topology {name_or_path!r}; known: {', '.join(available_topologies(directory))} "
            "(or a path to a topology YAML file)"
        )
    raw = _read_yaml(path)
    if not isinstance(raw, dict) or not isinstance(raw.get("nodes"), list) or not raw["nodes"]:
        raise UsageError(f"topology {path} has no nodes: list (a mapping with nodes:, each with a role:)")
    nodes = tuple(_node(path, index, entry) for index, entry in enumerate(raw["nodes"]))
    if "control-plane" not in {n.role for n in nodes}:
        raise UsageError(f"topology {path}: nodes: has no control-plane (at least one node needs role: control-plane)")
    kind_extra = dict(raw.get("kind") or {})
    clashing = sorted(set(kind_extra) & set(KIND_OWN_FIELDS))
    if clashing:
        raise UsageError(
            f"topology {path}: its kind: section may not set {clashing}; the suite writes them from nodes: "
            "and the --cluster-name / --k8s-version options"
        )
    slices = raw.get("slices", 0)
    problem = slices_problem(slices)
    if problem:
        raise UsageError(f"topology {path}: slices: {problem}")
    if slices and any(n.labels.get(NODE_POOL_LABEL) for n in nodes):
        raise UsageError(f"topology {path}: with slices:, no node may set {NODE_POOL_LABEL} (each slice sets it)")
    return Topology(path.stem, str(raw.get("description", "")), nodes, kind_extra, _fake_nodes(path, raw), slices)


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except OSError as exc:
        raise UsageError(f"topology {path} cannot be read: {exc.strerror or exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        what = getattr(exc, "problem", None) or "not a text file"
        raise UsageError(f"topology {path} is not valid YAML{where}: {what}") from None


def _node(path: Path, index: int, entry: object) -> NodeSpec:
    """``nodes[index]`` of the file, each problem naming the node (``nodes[2] (worker)``)."""
    role = entry.get("role") if isinstance(entry, dict) else None
    where = f"topology {path}: nodes[{index}]" + (f" ({role})" if isinstance(role, str) else "")
    if not isinstance(entry, dict):
        raise UsageError(f"{where} is not a mapping (role:, gpus:, labels:)")
    if role not in ("control-plane", "worker"):
        raise UsageError(f"{where}: role must be control-plane or worker, not {role!r}")
    gpus = entry.get("gpus", 0)
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 0:
        raise UsageError(f"{where}: gpus must be a whole number of 0 or more, not {gpus!r}")
    if gpus and role != "worker":
        raise UsageError(f"{where}: only workers may carry fake GPUs (gpus: {gpus})")
    labels = entry.get("labels") or {}
    if not isinstance(labels, dict):
        raise UsageError(f"{where}: labels must be a mapping of label keys to values")
    for key in labels:
        problem = node_label_problem(str(key))
        if problem:
            raise UsageError(f"{where}: node label {key!r} {problem}")
    return NodeSpec(role, gpus, {str(k): str(v) for k, v in labels.items()})


def slices_problem(count: object) -> str | None:
    """Why ``count`` slices cannot be made, or ``None``."""
    if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= MAX_SLICES:
        return f"a slice count must be a whole number from 0 to {MAX_SLICES}, not {count!r}"
    return None


def with_slices(topology: Topology, count: int | None) -> Topology:
    """The topology with --slices applied (overrides the topology's own ``slices:``)."""
    if count is None:
        return topology
    problem = slices_problem(count)
    if problem:
        raise UsageError(f"--slices {count}: {problem}")
    return dataclasses.replace(topology, slices=count)


def _fake_nodes(path: Path, raw: dict[str, Any]) -> FakeNodes:
    section = raw.get("fake_nodes")
    if section is None:
        return FakeNodes()
    try:
        fake = FakeNodes(
            count=int(section.get("count", 0)),
            gpus=int(section.get("gpus", 8)),
            nodes_per_rack=int(section.get("nodes_per_rack", 8)),
            racks_per_zone=int(section.get("racks_per_zone", 4)),
            labels={str(k): str(v) for k, v in (section.get("labels") or {}).items()},
        )
    except (AttributeError, TypeError, ValueError) as exc:
        raise UsageError(f"topology {path}: fake_nodes is malformed: {exc}") from exc
    problem = fake_nodes_problem(fake.count, fake.gpus)
    if problem:
        raise UsageError(f"topology {path}: fake_nodes: {problem}")
    if fake.nodes_per_rack < 1 or fake.racks_per_zone < 1:
        raise UsageError(f"topology {path}: fake_nodes: nodes_per_rack and racks_per_zone must be at least 1")
    return fake


def with_fake_nodes(topology: Topology, count: int | None, gpus: int | None) -> Topology:
    """The topology with --fake-nodes / --fake-node-gpus applied (each overrides the topology's own value)."""
    fake = topology.fake_nodes
    wanted = dataclasses.replace(
        fake, count=fake.count if count is None else count, gpus=fake.gpus if gpus is None else gpus
    )
    problem = fake_nodes_problem(wanted.count, wanted.gpus)
    if problem:
        given = " ".join(f"{o} {v}" for o, v in (("--fake-nodes", count), ("--fake-node-gpus", gpus)) if v is not None)
        raise UsageError(f"{given or 'topology ' + topology.name}: {problem}")
    return dataclasses.replace(topology, fake_nodes=wanted)


def fake_node_name(cluster_name: str, index: int) -> str:
    """``<cluster>-kwok-0001``: one per index, so a re-run of the same cluster finds (and replaces) its own. An
    existing cluster's name is its kubeconfig context's, which may hold what a node name may not (``admin@lab``,
    ``arn:aws:eks:...:cluster/gpu``): the stem keeps only what RFC 1123 allows (lowercase letters, digits, ``-``)."""
    stem = re.sub(r"[^a-z0-9-]+", "-", cluster_name.lower()).strip("-")[:200] or "cluster"
    return f"{stem}-kwok-{index + 1:04d}"


def node_label_problem(key: str) -> str | None:
    """Why ``key`` cannot be a node label in a kind config, or ``None`` when it can."""
    if key == WORKER_INDEX_LABEL:
        return "is set by the suite on every worker; remove it from the topology"
    prefix, _, name = key.rpartition("/")
    valid_prefix = not prefix or (len(prefix) <= 253 and re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", prefix))
    if not valid_prefix or not re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?", name):
        return "is not a valid label key"
    restricted = any(prefix == ns or prefix.endswith("." + ns) for ns in ("kubernetes.io", "k8s.io"))
    allowed = key in KUBELET_LABELS or any(prefix == ns or prefix.endswith("." + ns) for ns in KUBELET_LABEL_NAMESPACES)
    if restricted and not allowed:
        return (
            "is in the kubernetes.io/k8s.io namespace, which kubelet refuses in --node-labels, so `kind create "
            "cluster` would fail (kubernetes-sigs/kind#3536); use a key outside it (e.g. example.com/role) or "
            "one under node.kubernetes.io/"
        )
    return None
