"""JobSet (release manifests by server-side apply, in dependency order) and Trainer (helm chart with the
bundled JobSet off, or PR manifests without JobSet's objects): command lines, order, races, failures."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kai_conformance.clusters.install import jobset, manifests, trainer
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.configuration.settings import InstallSources
from kai_conformance.fixtures.kube import kinds
from tests.fakes.commands import tools_on_path
from tests.fakes.installation import (
    EXPIRING,
    JOBSET_RELEASE_URL,
    SimulatedStack,
    install_context,
    jobset_manifests,
    make_settings,
)
from tests.fakes.kube import FakeKube

pytestmark = pytest.mark.usefixtures("fast_polling")


@pytest.fixture
def stack(fake: FakeKube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimulatedStack:
    tools_on_path(tmp_path / "bin", monkeypatch)
    return SimulatedStack(fake)


def applied(fake: FakeKube) -> list[str]:
    return [f"{c.kind} {c.name}" for c in fake.operations("apply")]


# ------------------------------------------------------------------------------------------------------ JobSet
def test_jobset_release_manifests_are_applied_in_dependency_order(stack: SimulatedStack, fake: FakeKube,
                                                                  tmp_path: Path) -> None:  # fmt: skip
    record = jobset.install(install_context(make_settings(tmp_path), stack))
    assert stack.fetched == [JOBSET_RELEASE_URL]
    assert applied(fake) == [
        "Namespace jobset-system",
        "CustomResourceDefinition jobsets.jobset.x-k8s.io",
        "ServiceAccount jobset-controller-manager",
        "Service jobset-webhook-service",
        "Deployment jobset-controller-manager",
        "ValidatingWebhookConfiguration jobset-validating-webhook-configuration",
    ]
    calls = [(c.operation, c.kind) for c in fake.calls]
    crd_established = calls.index(("get", "CustomResourceDefinition"))
    assert (
        calls.index(("apply", "ServiceAccount")) > crd_established > calls.index(("apply", "CustomResourceDefinition"))
    )
    assert all("status" not in c.detail for c in fake.operations("apply"))
    assert record == {
        "version": "v0.12.0", "version_source": "installed",
        "established": f"installed by this run from manifests {JOBSET_RELEASE_URL}", "expectations": "v0.12.0",
        "source": "release", "manifests": JOBSET_RELEASE_URL, "objects": 6,
        "deployments": ["jobset-system/jobset-controller-manager"], "ready_after_seconds": 0.0,
        "crds": "served: JobSet jobset.x-k8s.io/v1alpha2",
        "webhook": "rejected as expected: admission webhook \"vjobset.kb.io\" denied the request: spec.replicatedJobs: "
        "Invalid value: DependsOn can't be set for the first ReplicatedJob",
    }  # fmt: skip


def test_jobset_probe_is_schema_valid_and_only_a_dry_run(stack: SimulatedStack, fake: FakeKube, tmp_path: Path) -> None:
    jobset.install(install_context(make_settings(tmp_path), stack))
    probe = next(c.detail for c in fake.operations("create") if c.kind == "JobSet")
    first = probe["spec"]["replicatedJobs"][0]
    assert first["dependsOn"] == [{"name": "first", "status": "Ready"}]
    assert first["template"]["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.k8s.io/pause:3.10"
    assert fake.objects(kinds.JOB_SET) == []


def test_jobset_from_a_local_file_and_a_kustomize_directory(
    stack: SimulatedStack, fake: FakeKube, tmp_path: Path
) -> None:
    file = tmp_path / "manifests.yaml"
    file.write_text(jobset_manifests())
    record = jobset.install(
        install_context(make_settings(tmp_path, sources=InstallSources(jobset_manifests=str(file))), stack)
    )
    assert (record["source"], record["manifests"], stack.fetched) == ("pr", str(file), [])
    directory = tmp_path / "jobset" / "config" / "default"
    directory.mkdir(parents=True)
    stack.runner.on("kubectl", "kustomize", stdout=jobset_manifests())
    settings = make_settings(tmp_path, sources=InstallSources(jobset_manifests=str(directory)))
    assert jobset.install(install_context(settings, stack))["manifests"] == f"kubectl kustomize {directory}"
    assert stack.runner.commands("kubectl") == [("kubectl", "kustomize", str(directory))]


def test_manifests_that_cannot_be_found_or_read_are_named(tmp_path: Path) -> None:
    with pytest.raises(errors.UsageError, match=r"manifests '/nope' are neither a URL, a file nor a directory"):
        manifests.load("/nope", None, None, 1.0)  # type: ignore[arg-type]
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing\n")
    with pytest.raises(errors.UsageError, match=r"contain no Kubernetes objects"):
        manifests.load(str(empty), None, None, 1.0)  # type: ignore[arg-type]


def test_offline_download_names_the_url_and_the_fix() -> None:
    with pytest.raises(errors.InfrastructureError) as caught:
        manifests.download("http://127.0.0.1:9/manifests.yaml", timeout=2)
    message = str(caught.value)
    assert message.startswith("cannot download http://127.0.0.1:9/manifests.yaml: ")
    assert (
        "fix: check network access, or download it yourself and pass the file (e.g. --jobset-manifests=FILE)" in message
    )


def test_crds_never_established_fail_with_their_names(stack: SimulatedStack, fake: FakeKube, tmp_path: Path) -> None:
    fake.reactors.insert(0, lambda f, call: [o.setdefault("status", {}).__setitem__("conditions", [{"type": "Established", "status": "False"}])
                                             for o in f.store.values() if o["kind"] == "CustomResourceDefinition"])  # fmt: skip
    with pytest.raises(
        errors.WaitTimeout, match=r"(?s)JobSet CRDs to be Established.*not yet Established: jobsets.jobset.x-k8s.io"
    ):
        jobset.install(install_context(make_settings(tmp_path, timeouts=EXPIRING), stack))


def test_jobset_missing_crd(stack: SimulatedStack, fake: FakeKube, tmp_path: Path) -> None:
    with pytest.raises(errors.InfrastructureError, match=r"JobSet is not installed: CustomResourceDefinition "
                       r"jobsets.jobset.x-k8s.io \(JobSet\) missing. fix: install it \(on an existing cluster: "
                       r"--install always\)"):  # fmt: skip
        jobset.verify(install_context(make_settings(tmp_path), stack))


def test_jobset_webhook_of_an_unserved_kind(stack: SimulatedStack, fake: FakeKube, tmp_path: Path) -> None:
    stack.run_as_processes("jobset")  # the CRD object is there, but the API server does not serve the kind
    fake.unserve(kinds.JOB_SET)
    with pytest.raises(
        errors.InfrastructureError, match=r"JobSet is not installed: the API server does not serve JobSet"
    ):
        jobset.verify(install_context(make_settings(tmp_path), stack))


# ----------------------------------------------------------------------------------------------------- Trainer
def test_trainer_chart_command_line_turns_the_bundled_jobset_off(stack: SimulatedStack, tmp_path: Path) -> None:
    record = trainer.install(install_context(make_settings(tmp_path), stack))
    assert stack.runner.commands("helm", "upgrade") == [(
        "helm", "upgrade", "--install", "kubeflow-trainer", "oci://ghcr.io/kubeflow/charts/kubeflow-trainer",
        "--namespace", "kubeflow-system", "--create-namespace", "--version", "2.3.0", "--set", "jobset.install=false",
        "--timeout", "6s", "--kubeconfig", "/tmp/kc",
    )]  # fmt: skip
    assert record["deployments"] == ["kubeflow-system/kubeflow-trainer-controller-manager"]
    assert record["values"] == {"jobset": {"install": "false"}}
    assert record["webhook"].endswith("specified clusterTrainingRuntime must be created before the TrainJob is created")


TRAINER_CHART_YAML = """\
apiVersion: v2
name: kubeflow-trainer
version: 2.3.0
dependencies:
  - name: jobset
    version: 0.12.0
    repository: oci://registry.k8s.io/jobset/charts
    condition: jobset.install
  - name: lws
    version: 0.7.0
    repository: oci://registry.k8s.io/lws/charts
"""


def test_trainer_pr_chart_and_sets(stack: SimulatedStack, tmp_path: Path) -> None:
    chart = tmp_path / "trainer" / "charts" / "kubeflow-trainer"
    chart.mkdir(parents=True)
    (chart / "Chart.yaml").write_text(TRAINER_CHART_YAML)
    sources = InstallSources(trainer_chart=str(chart), trainer_set=("image.tag=pr-7",))
    record = trainer.install(install_context(make_settings(tmp_path, sources=sources), stack))
    assert stack.runner.commands("helm", "upgrade")[0][4:13] == (
        str(chart), "--namespace", "kubeflow-system", "--create-namespace", "--dependency-update", "--set",
        "jobset.install=false", "--set", "image.tag=pr-7",
    )  # fmt: skip
    assert (record["source"], record["chart"]) == ("pr", str(chart))


def test_a_chart_directory_holding_its_dependencies_installs_without_fetching_them(
    stack: SimulatedStack, tmp_path: Path
) -> None:
    """Real kind: a --trainer-chart directory went to `helm --dependency-update`, which reaches the registries even
    when charts/ already holds JobSet and LeaderWorkerSet."""
    chart = tmp_path / "kubeflow-trainer"
    (chart / "charts" / "jobset").mkdir(parents=True)
    (chart / "charts" / "lws-0.7.0.tgz").write_bytes(b"")
    (chart / "Chart.yaml").write_text(TRAINER_CHART_YAML)
    trainer.install(install_context(make_settings(tmp_path, sources=InstallSources(trainer_chart=str(chart))), stack))
    assert "--dependency-update" not in stack.runner.commands("helm", "upgrade")[0]


def test_trainer_webhook_race_right_after_install_is_retried(stack: SimulatedStack, tmp_path: Path) -> None:
    stack.trainer_webhook_failures = 1
    record = trainer.install(install_context(make_settings(tmp_path), stack))
    assert "must be created before the TrainJob is created" in record["webhook"]
    assert len([c for c in stack.fake.operations("create") if c.kind == "TrainJob"]) == 2


def test_trainer_manifests_leave_the_bundled_jobset_out(stack: SimulatedStack, fake: FakeKube, tmp_path: Path) -> None:
    directory = tmp_path / "trainer" / "manifests" / "overlays" / "manager"
    directory.mkdir(parents=True)
    settings = make_settings(tmp_path, sources=InstallSources(trainer_manifests=str(directory)))
    record = trainer.install(install_context(settings, stack))
    assert applied(fake) == [
        "Namespace kubeflow-system",
        "CustomResourceDefinition trainjobs.trainer.kubeflow.org",
        "CustomResourceDefinition trainingruntimes.trainer.kubeflow.org",
        "CustomResourceDefinition clustertrainingruntimes.trainer.kubeflow.org",
        "Deployment kubeflow-trainer-controller-manager",
    ]
    assert (record["jobset_objects_left_out"], record["objects"]) == (2, 5)
    assert record["established"] == f"installed by this run from manifests kubectl kustomize {directory}"
    assert stack.runner.commands("helm") == []


def test_trainer_webhook_that_never_serves_times_out(stack: SimulatedStack, tmp_path: Path) -> None:
    stack.trainer_webhook_failures = 10**6
    with pytest.raises(errors.WaitTimeout) as caught:
        trainer.install(install_context(make_settings(tmp_path, timeouts=EXPIRING), stack))
    message = str(caught.value)
    assert "webhook not serving yet: Internal error occurred: failed calling webhook" in message
    assert "fix: check the kubeflow-trainer-controller-manager Deployment" in message


def test_manifest_apply_order_puts_webhooks_last() -> None:
    docs = [*list(yaml.safe_load_all(jobset_manifests())), {"kind": "Widget", "metadata": {"name": "w"}}]
    assert [d["kind"] for d in manifests.ordered(docs)] == [
        "Namespace", "CustomResourceDefinition", "ServiceAccount", "Service", "Deployment", "Widget",
        "ValidatingWebhookConfiguration",
    ]  # fmt: skip
