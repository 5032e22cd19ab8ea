"""What a run would fetch from the network, named before anything is created, each with the option that supplies
it locally; --offline refuses the run while any remains. Real kind, built offline, met each of these: the node
image pull, `helm --dependency-update` on a chart directory that already held its dependencies, kwok's release
URLs, JobSet's release manifests, and the workload image pull."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from kai_conformance.clusters import commands, fetches
from kai_conformance.clusters.install import trainer
from kai_conformance.clusters.kwok import fake_nodes as kwok
from kai_conformance.clusters.topology import load_topology, with_fake_nodes
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.configuration import preflight
from kai_conformance.fixtures.configuration.settings import InstallSources
from tests.fakes.installation import SimulatedStack, install_context, make_settings
from tests.fakes.kwok import kwok_release_manifests, stage_fast_manifests
from tests.install.test_jobset_trainer import TRAINER_CHART_YAML, stack  # noqa: F401 (fixture)
from tests.kwok.test_fake_nodes import Options


def everything_local(tmp: Path) -> InstallSources:
    kai_chart = tmp / "kai-scheduler"
    kai_chart.mkdir()
    (kai_chart / "Chart.yaml").write_text("apiVersion: v2\nname: kai-scheduler\nversion: v0.17.0\n")
    trainer_chart = tmp / "kubeflow-trainer"
    (trainer_chart / "charts").mkdir(parents=True)
    (trainer_chart / "Chart.yaml").write_text(TRAINER_CHART_YAML)
    for archive in ("jobset-0.12.0.tgz", "lws-0.7.0.tgz"):
        (trainer_chart / "charts" / archive).write_bytes(b"")
    jobset = tmp / "jobset.yaml"
    jobset.write_text("kind: Namespace\n")
    return InstallSources(kai_chart=str(kai_chart), trainer_chart=str(trainer_chart), jobset_manifests=str(jobset),
                          load_images=("localhost/kai/scheduler:v0.17.0",))  # fmt: skip


def test_a_default_run_names_every_fetch_with_the_option_that_replaces_it(tmp_path: Path) -> None:
    planned = fetches.planned_fetches(make_settings(tmp_path), lambda image: False)
    assert [(f.what.split(" ")[1], f.instead.split("=")[0].split(" ")[0]) for f in planned] == [
        ("kind", "--node-image"),
        ("KAI", "--kai-chart"),
        ("Kubeflow", "--trainer-chart"),
        ("JobSet", "--jobset-manifests"),
        ("images", "--load-image"),
        ("workload", "`docker"),
    ]
    assert "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler v0.17.0" in planned[1].what
    assert "https://github.com/kubernetes-sigs/jobset/releases/download/v0.12.0/manifests.yaml" in planned[3].what


def test_a_run_with_everything_local_fetches_nothing(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, sources=everything_local(tmp_path))
    assert fetches.planned_fetches(settings, lambda image: True) == []


def test_a_chart_directory_without_its_dependencies_is_a_fetch(tmp_path: Path) -> None:
    sources = everything_local(tmp_path)
    (Path(sources.trainer_chart) / "charts" / "lws-0.7.0.tgz").unlink()
    (fetch,) = fetches.planned_fetches(make_settings(tmp_path, sources=sources), lambda image: True)
    assert fetch.what == f"the dependencies of the Kubeflow Trainer chart {sources.trainer_chart}: lws 0.7.0"
    assert f"helm dependency build {sources.trainer_chart}" in fetch.instead


def test_a_kustomize_overlay_that_includes_a_url_is_a_fetch(tmp_path: Path) -> None:
    overlay = tmp_path / "manifests" / "overlays" / "manager"
    base = tmp_path / "manifests" / "base"
    overlay.mkdir(parents=True)
    base.mkdir(parents=True)
    url = "https://github.com/kubernetes-sigs/jobset/releases/download/v0.12.0/manifests.yaml"
    (overlay / "kustomization.yaml").write_text("resources:\n  - ../../base\n")
    (base / "kustomization.yaml").write_text(f"resources:\n  - {url}\n  - crds.yaml\n")
    sources = dataclasses.replace(everything_local(tmp_path), trainer_chart=None, trainer_manifests=str(overlay))
    (fetch,) = fetches.planned_fetches(make_settings(tmp_path, sources=sources), lambda image: True)
    assert fetch.what == f"the Trainer manifests: the kustomize directory {overlay} includes {url}"
    assert f"kubectl kustomize {overlay} > FILE" in fetch.instead and "--trainer-manifests=FILE" in fetch.instead


def test_fake_nodes_on_kind_fetch_kwok_unless_its_assets_are_given(tmp_path: Path) -> None:
    topology = with_fake_nodes(load_topology("pr-gate"), 2, None)
    local = everything_local(tmp_path)
    planned = fetches.planned_fetches(make_settings(tmp_path, topology=topology, sources=local), lambda i: True)
    assert [f.what for f in planned] == ["kwok v0.8.0 release assets (kwok.yaml, stage-fast.yaml)"]
    given = make_settings(tmp_path, topology=topology, sources=local, kwok_manifests=str(tmp_path))
    assert fetches.planned_fetches(given, lambda image: True) == []


def test_offline_turns_each_fetch_into_a_problem_and_without_it_the_plan_is_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "kai_conformance")
    sources = dataclasses.replace(everything_local(tmp_path), jobset_manifests=None)
    assert preflight.check_fetches(make_settings(tmp_path, sources=sources), lambda image: True) == []
    assert "this run would fetch 1 thing(s) from the network:" in caplog.text
    (problem,) = preflight.check_fetches(make_settings(tmp_path, sources=sources, offline=True), lambda i: True)
    assert problem.what.startswith("--offline, but the JobSet manifests https://github.com/kubernetes-sigs/jobset/")
    assert problem.fix == "--jobset-manifests=FILE with the file downloaded elsewhere"


def test_kwok_manifests_must_hold_the_release_assets(tmp_path: Path) -> None:
    (tmp_path / "kwok.yaml").write_text(kwok_release_manifests())
    _, problems = resolve(tmp_path, **{"--kwok-manifests": str(tmp_path)})
    assert [p.what for p in problems] == [f"--kwok-manifests {tmp_path} lacks stage-fast.yaml"]


def resolve(tmp: Path, **given: object):
    from kai_conformance.fixtures.configuration.resolution import resolve_settings

    return resolve_settings(Options(tmp, **given))  # type: ignore[arg-type]


def test_kwok_is_read_from_the_given_directory_without_any_download(tmp_path: Path, stack: SimulatedStack) -> None:  # noqa: F811
    (tmp_path / "kwok.yaml").write_text(kwok_release_manifests())
    (tmp_path / "stage-fast.yaml").write_text(stage_fast_manifests())
    settings = make_settings(tmp_path, kwok_manifests=str(tmp_path))
    controller, stages = kwok.load_kwok(install_context(settings, stack))
    assert stack.fetched == []
    assert any(o["kind"] == "Deployment" for o in controller) and stages


def test_a_release_taking_over_objects_of_another_installer_names_that_not_the_registry(
    tmp_path: Path,
    stack: SimulatedStack,  # noqa: F811
) -> None:
    """Real kind: switching a reused cluster from --trainer-manifests to --trainer-chart failed in Helm, and the
    fix text blamed the chart reference and registry access."""
    stack.runner.on("helm", "upgrade", "--install", "kubeflow-trainer", returncode=1, stderr=(
        'Error: ServiceAccount "kubeflow-trainer-controller-manager" in namespace "kubeflow-system" exists and '
        "cannot be imported into the current release: invalid ownership metadata"))  # fmt: skip
    with pytest.raises(commands.CommandFailed) as failure:
        trainer.install(install_context(make_settings(tmp_path), stack))
    assert "objects that Helm release kubeflow-trainer did not install" in str(failure.value)
    assert "registry" not in str(failure.value).split("fix:", 1)[1]
    assert isinstance(failure.value, errors.InfrastructureError)


JOBSET_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: jobset-controller-manager, namespace: jobset-system}
spec:
  template:
    spec:
      containers:
        - name: manager
          image: us-central1-docker.pkg.dev/k8s-staging-images/jobset/jobset:v0.12.0
"""


def test_an_image_of_local_manifests_that_no_load_image_gives_is_a_fetch(tmp_path: Path) -> None:
    """Real kind, offline: JobSet's kustomize rendering named its image after the staging registry while the image
    loaded into the nodes had the release's name; --offline passed and the controller sat in ImagePullBackOff."""
    sources = everything_local(tmp_path)
    Path(sources.jobset_manifests).write_text(JOBSET_DEPLOYMENT)
    (fetch,) = fetches.planned_fetches(make_settings(tmp_path, sources=sources), lambda image: True)
    assert (
        fetch.what
        == "the image us-central1-docker.pkg.dev/k8s-staging-images/jobset/jobset:v0.12.0 of the JobSet manifests"
    )
    assert fetch.instead.startswith("--load-image=us-central1-docker.pkg.dev/k8s-staging-images/jobset/jobset:v0.12.0")
    loaded = dataclasses.replace(sources, load_images=(*sources.load_images, fetch.what.split()[2]))
    assert fetches.planned_fetches(make_settings(tmp_path, sources=loaded), lambda image: True) == []


def test_kwok_s_untagged_image_is_given_by_its_latest_tag(tmp_path: Path) -> None:
    topology = with_fake_nodes(load_topology("pr-gate"), 2, None)
    (tmp_path / "kwok.yaml").write_text(kwok_release_manifests())
    images = fetches.manifest_images(tmp_path / "kwok.yaml")
    local = everything_local(tmp_path)
    settings = make_settings(tmp_path, topology=topology, sources=local, kwok_manifests=str(tmp_path))
    assert [f.what for f in fetches.planned_fetches(settings, lambda i: True)] == [f"the image {images[0]} of kwok"]
    given = dataclasses.replace(local, load_images=(*local.load_images, f"{images[0]}:latest"))
    settings = make_settings(tmp_path, topology=topology, sources=given, kwok_manifests=str(tmp_path))
    assert fetches.planned_fetches(settings, lambda image: True) == []
