"""Bad input around fake nodes, end to end through pytest (in process, the cluster the in-memory fake behind a
loopback API server): an absurd --fake-nodes or --fake-node-gpus, or an existing cluster without kwok, ends the run
before anything starts in one message with its fix; no traceback, no state directory, no write to the cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from kai_conformance.fixtures.kube import kinds
from tests.clusters.test_plugin import cluster_world, run_suite  # noqa: F401  (fixture)
from tests.fakes.apiserver import serve
from tests.fakes.bridge import route_to
from tests.fakes.installation import SimulatedStack, deployment, worker_node
from tests.fakes.kube import FakeKube

pytestmark = pytest.mark.usefixtures("fast_polling")

WRITES = ("apply", "create", "patch", "delete")


def refused_run(tmp_path: Path, fake: FakeKube, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """Run the suite on the fake's existing cluster with ``args``; it must stop before starting. Returns stderr."""
    fake.put(worker_node("gpu-a", None, capacity=8))
    fake.calls.clear()
    with serve(route_to(fake)) as server:
        code, outcomes = run_suite(tmp_path, "existing", 8, "--kubeconfig", str(server.kubeconfig(tmp_path)), *args)
    err = capsys.readouterr().err
    assert code == pytest.ExitCode.USAGE_ERROR
    assert outcomes.reports == {}  # no case ran
    assert "Traceback" not in err
    assert err.count("ERROR:") == 1, err
    assert not (tmp_path / "report" / ".state").exists()  # the run never started
    assert [c for c in fake.calls if c.operation in WRITES] == []
    return err


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (("--fake-nodes", "-3"), "--fake-nodes -3: a fake-node count must be 0..1000, not -3"),
        (("--fake-nodes", "5000"), "--fake-nodes 5000: a fake-node count must be 0..1000, not 5000"),
        (("--fake-node-gpus", "1000"), "--fake-node-gpus 1000: GPUs per fake node must be 1..64, not 1000"),
        (("--fake-nodes", "4", "--fake-node-gpus", "0"), "GPUs per fake node must be 1..64, not 0"),
    ],
)
def test_an_absurd_fake_node_option_is_one_message_with_its_fix(
    tmp_path: Path,
    fake: FakeKube,
    cluster_world: SimulatedStack,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    args: tuple[str, ...],
    problem: str,
) -> None:
    err = refused_run(tmp_path, fake, capsys, *args)
    assert "kai-conformance cannot start (1 problem):" in err
    assert problem in err
    assert "fix: pass --fake-nodes with a count from 0 to 1000" in err
    assert "Nothing was created." in err


def test_a_fake_node_count_that_is_no_number_is_named_with_the_other_problems(
    tmp_path: Path,
    fake: FakeKube,
    cluster_world: SimulatedStack,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = refused_run(tmp_path, fake, capsys, "--fake-nodes", "lots", "--slices", "some")
    assert "--fake-nodes 'lots' is not a number" in err and "--slices 'some' is not a number" in err
    assert "fix: pass --fake-nodes with a whole number of nodes from 0 to" in err


@pytest.mark.parametrize("crd", [False, True])
def test_an_existing_cluster_without_kwok_is_one_message_before_anything_is_created(
    tmp_path: Path,
    fake: FakeKube,
    cluster_world: SimulatedStack,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    crd: bool,
) -> None:
    if not crd:
        fake.unserve(kinds.KWOK_STAGE)
    else:  # a Stage CRD, and a Deployment that is not kwok's
        fake.put(deployment("kwok-lookalike", "kube-system", "registry.k8s.io/notkwok/kwok-ish:v1"))
    err = refused_run(tmp_path, fake, capsys, "--fake-nodes", "2")
    missing = "no Deployment labelled app=kwok-controller or running kwok's image" if crd else "no kwok Stage CRD"
    assert f"1. --fake-nodes needs kwok on the existing cluster, and it has {missing}" in err
    assert (
        "fix: install kwok (`kubectl apply -f https://github.com/kubernetes-sigs/kwok/releases/download/v0.8.0/" in err
    )
    assert "or pass --kwok-managed" in err and "or drop --fake-nodes" in err
    assert fake.objects(kinds.NODE) == [fake.get(kinds.NODE, "gpu-a")]
