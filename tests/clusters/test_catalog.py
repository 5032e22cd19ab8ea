"""The version catalog and topologies: what is supported, and clear errors for what is not."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from kai_conformance.clusters.catalog import VERSIONS_FILE, Catalog
from kai_conformance.clusters.topology import fake_node_name, load_topology
from kai_conformance.fixtures.errors import UsageError

CATALOG = Catalog.load()


def test_the_default_combination_is_supported_on_its_default_kubernetes() -> None:
    combo = CATALOG.combination(CATALOG.defaults["combination"])
    assert CATALOG.kubernetes_minor(None, combo) == str(CATALOG.defaults["kubernetes"])
    assert CATALOG.node_image("1.35").startswith("kindest/node:v1.35.")


def test_every_combination_pairs_trainer_with_the_jobset_it_ships() -> None:
    for combo in CATALOG.combinations:
        assert combo.trainer.fields["jobset"] == combo.jobset.version
        assert set(combo.kubernetes) <= set(CATALOG.kubernetes)


def test_node_images_are_pinned_by_digest() -> None:
    for minor, entry in CATALOG.kubernetes.items():
        assert f":v{minor}." in entry["node_image"] and "@sha256:" in entry["node_image"]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, "kai-v0.17.0+trainer-v2.3.0"),
        ({"kai": "v0.16.8"}, "kai-v0.16.8+trainer-v2.3.0"),
        ({"trainer": "v2.2.0"}, "kai-v0.17.0+trainer-v2.2.0"),
        ({"jobset": "v0.11.1"}, "kai-v0.17.0+trainer-v2.2.0"),
        ({"combination": "kai-v0.16.8+trainer-v2.2.0"}, "kai-v0.16.8+trainer-v2.2.0"),
    ],
)
def test_resolution_by_name_or_component_versions(kwargs: dict, expected: str) -> None:
    assert CATALOG.resolve(kwargs.pop("combination", None), **kwargs).name == expected


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kai": "v0.12.0"}, "kai v0.12.0 is older than the oldest version the suite supports (v0.16.8)"),
        ({"trainer": "v1.9.0"}, "trainer v1.9.0 is older than the oldest version the suite supports (v2.2.0)"),
        ({"combination": "nope"}, "unknown version combination 'nope'. Known combinations: kai-v0.17.0"),
        ({"trainer": "v2.3.0", "jobset": "v0.11.1"}, "is not a supported combination"),
        ({"combination": "kai-v0.17.0+trainer-v2.3.0", "kai": "v0.16.8"}, "pass one or the other"),
    ],
)
def test_unknown_or_incompatible_versions_are_rejected_clearly(kwargs: dict, message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        CATALOG.resolve(kwargs.pop("combination", None), **kwargs)


def test_kubernetes_minor_accepts_patch_versions_and_rejects_unsupported_ones() -> None:
    combo = CATALOG.combination(CATALOG.defaults["combination"])
    assert CATALOG.kubernetes_minor("v1.34.8", combo) == "1.34"
    with pytest.raises(UsageError, match=r"Kubernetes 1.20 is not supported .*: older than the oldest supported minor"):
        CATALOG.kubernetes_minor("1.20", combo)
    with pytest.raises(UsageError, match=r"Kubernetes 'latest' is not a version"):
        CATALOG.kubernetes_minor("latest", combo)


def test_a_catalog_pairing_trainer_with_the_wrong_jobset_is_refused(tmp_path: Path) -> None:
    raw = yaml.safe_load(VERSIONS_FILE.read_text())
    raw["combinations"][0]["jobset"] = "v0.11.1"
    broken = tmp_path / "versions.yaml"
    broken.write_text(yaml.safe_dump(raw))
    with pytest.raises(UsageError, match=r"but that Trainer ships JobSet v0\.12\.0"):
        Catalog.load(broken)


def test_topologies_give_gpu_layouts_with_kind_node_names() -> None:
    layout = load_topology("pr-gate").layout("kc")
    assert layout.by_name() == {"kc-worker": 4, "kc-worker2": 4, "kc-worker3": 4}
    assert (layout.total, layout.max_per_node, layout.pods_that_fit(3)) == (12, 4, 3)
    release = load_topology("release").layout("kc")
    assert release.total == 32 and release.gpu_nodes[0].name == "kc-worker"
    assert release.by_name()["kc-worker5"] == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("nodes: [{role: worker, gpus: 2}]", "at least one node needs role: control-plane"),
        ("nodes: [{role: control-plane, gpus: 2}]", r"nodes\[0\] \(control-plane\): only workers may carry fake GPUs"),
        ("nodes: [{gpus: 2}]", r"nodes\[0\]: role must be control-plane or worker, not None"),
        (
            "nodes: [{role: control-plane}, {role: worker, gpus: -1}]",
            r"nodes\[1\] \(worker\): gpus must be a whole number of 0 or more, not -1",
        ),
        ("nodes: [{role: control-plane}, {role: worker, gpus: four}]", r"nodes\[1\] \(worker\): gpus must be"),
        (
            "nodes: [{role: control-plane}, {role: worker, labels: {'bad key!': x}}]",
            r"nodes\[1\] \(worker\): node label",
        ),
        ("nodes: [\n  - role: worker\n  gpus: [", "is not valid YAML at line 2, column 3"),
        ("just a string", "has no nodes: list"),
        ("", "has no nodes: list"),
    ],
)
def test_bad_topologies_are_rejected(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(UsageError, match=message):
        load_topology(str(path))


def test_unknown_topology_names_the_known_ones() -> None:
    with pytest.raises(UsageError, match="unknown topology 'huge'; known: pr-gate, release"):
        load_topology("huge")


@pytest.mark.parametrize(
    ("cluster", "name"),
    [
        ("kind-kai", "kind-kai-kwok-0001"),
        ("admin@realstack", "admin-realstack-kwok-0001"),  # seen on the real stack: '@' made the API refuse the nodes
        ("arn:aws:eks:us-east-1:1234:cluster/GPU_lab", "arn-aws-eks-us-east-1-1234-cluster-gpu-lab-kwok-0001"),
        ("@@", "cluster-kwok-0001"),
    ],
)
def test_fake_node_names_are_valid_node_names_whatever_the_context(cluster: str, name: str) -> None:
    assert fake_node_name(cluster, 0) == name
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name)


@pytest.mark.parametrize(
    ("kwargs", "name", "assumed"),
    [
        ({"kai": "v0.18.1"}, "kai-v0.18.1+trainer-v2.3.0", {"kai": "v0.17.0"}),
        ({"kai": "0.18.1"}, "kai-v0.18.1+trainer-v2.3.0", {"kai": "v0.17.0"}),
        ({"kai": "v0.16.9"}, "kai-v0.16.9+trainer-v2.3.0", {"kai": "v0.16.8"}),
        ({"kai": "main"}, "kai-main+trainer-v2.3.0", {"kai": "v0.17.0"}),
        ({"trainer": "v2.4.0"}, "kai-v0.17.0+trainer-v2.4.0", {"trainer": "v2.3.0"}),
        ({"jobset": "v0.13.0"}, "kai-v0.17.0+trainer-v2.3.0", {"jobset": "v0.12.0"}),
        ({"kai": "v0.18.1", "trainer": "v2.2.0"}, "kai-v0.18.1+trainer-v2.2.0", {"kai": "v0.17.0"}),
    ],
)
def test_a_version_the_tables_do_not_know_assumes_the_nearest_lower_known_one(
    kwargs: dict, name: str, assumed: dict
) -> None:
    combo = CATALOG.resolve(None, **kwargs)
    assert combo.name == name
    found = {c.name: c.assumed_from for c in (combo.kai, combo.trainer, combo.jobset) if c.assumed_from}
    assert found == assumed
    base = CATALOG.combination(f"kai-{combo.kai.expectations_version}+trainer-{combo.trainer.expectations_version}")
    assert combo.kubernetes == base.kubernetes
    assert combo.trainer.fields["jobset"] == combo.jobset.expectations_version


def test_an_assumed_release_is_installed_from_its_own_artifacts() -> None:
    combo = CATALOG.resolve(None, kai="v0.18.1", trainer="v2.4.0", jobset="v0.13.0")
    assert (combo.kai.fields["chart"], combo.kai.fields["chart_version"]) == (
        "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler", "v0.18.1",
    )  # fmt: skip
    assert combo.trainer.fields["chart_version"] == "2.4.0"
    assert combo.jobset.fields["manifests"].endswith("/releases/download/v0.13.0/manifests.yaml")
    assert [c.fields["crds"] for c in (combo.kai, combo.trainer, combo.jobset)] == [
        "kai-scheduler/v0.18.1", "trainer/v2.4.0", "jobset/v0.13.0",
    ]  # fmt: skip
    assert combo.assumptions == [
        "KAI v0.18.1 is not in the expectation tables: expectations assumed from v0.17.0",
        "Trainer v2.4.0 is not in the expectation tables: expectations assumed from v2.3.0",
        "JobSet v0.13.0 is not in the expectation tables: expectations assumed from v0.12.0",
    ]


def test_a_newer_kubernetes_minor_assumes_the_newest_supported_one() -> None:
    combo = CATALOG.combination(CATALOG.defaults["combination"])
    newest = max(combo.kubernetes, key=lambda m: tuple(map(int, m.split("."))))
    assert CATALOG.kubernetes_minor("v1.99.0", combo) == "1.99"
    assert CATALOG.kubernetes_assumed_from("1.99", combo) == newest
    assert CATALOG.kubernetes_assumed_from(newest, combo) is None
    assert CATALOG.node_image("1.99") is None


def test_a_topology_path_that_is_no_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"--topology .*absent\.yaml: the topology file does not exist"):
        load_topology(str(tmp_path / "absent.yaml"))
    (tmp_path / "dir.yaml").mkdir()
    with pytest.raises(UsageError, match=r"--topology .*dir\.yaml: the topology file is a directory, not a file"):
        load_topology(str(tmp_path / "dir.yaml"))
