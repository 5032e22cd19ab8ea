"""KAI Scheduler install: exact helm command lines (release and PR sources), waiting for the operator's
asynchronous operands, the negative webhook probe, the record, idempotence and each failure message."""

from __future__ import annotations

from pathlib import Path

import pytest

from kai_conformance.clusters.commands import CommandFailed
from kai_conformance.clusters.install import kai
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.configuration.settings import InstallSources
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.plugin.options import CATALOG
from tests.fakes.commands import tools_on_path
from tests.fakes.installation import EXPIRING, SimulatedStack, install_context, make_settings
from tests.fakes.kube import FakeKube

pytestmark = pytest.mark.usefixtures("fast_polling")

OPERANDS = [f"kai-scheduler/{name}" for name in kai.OPERANDS]


@pytest.fixture
def stack(fake: FakeKube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimulatedStack:
    tools_on_path(tmp_path / "bin", monkeypatch)
    return SimulatedStack(fake)


def test_release_chart_command_line(stack: SimulatedStack, tmp_path: Path) -> None:
    kai.install(install_context(make_settings(tmp_path), stack, context="kind-kc-test"))
    assert stack.runner.commands("helm", "upgrade") == [(
        "helm", "upgrade", "--install", "kai-scheduler", "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler",
        "--namespace", "kai-scheduler", "--create-namespace", "--version", "v0.17.0", "--timeout", "6s",
        "--kubeconfig", "/tmp/kc", "--kube-context", "kind-kc-test",
    )]  # fmt: skip


def test_pr_chart_directory_with_image_overrides_command_line(stack: SimulatedStack, tmp_path: Path) -> None:
    chart = tmp_path / "kai" / "deployments" / "kai-scheduler"
    chart.mkdir(parents=True)
    sources = InstallSources(kai_chart=str(chart), kai_values=("extra.yaml",), kai_set=("scheduler.args.v=4",),
                             kai_image_registry="localhost/kai", kai_image_tag="pr-42")  # fmt: skip
    record = kai.install(install_context(make_settings(tmp_path, sources=sources), stack))
    assert stack.runner.commands("helm", "upgrade") == [(
        "helm", "upgrade", "--install", "kai-scheduler", str(chart), "--namespace", "kai-scheduler",
        "--create-namespace", "--values", "extra.yaml", "--set", "global.registry=localhost/kai",
        "--set", "global.tag=pr-42", "--set", "scheduler.args.v=4", "--timeout", "6s", "--kubeconfig", "/tmp/kc",
    )]  # fmt: skip
    assert (record["source"], record["version"], record["expectations"]) == (
        "pr", "PR build pr-42 (expectations v0.17.0)", "v0.17.0",
    )  # fmt: skip
    assert record["values"] == {
        "global": {"registry": "localhost/kai", "tag": "pr-42"},
        "scheduler": {"args": {"v": "4"}},
    }
    assert "chart_version" not in record


def test_install_waits_for_the_operands_the_operator_creates_later(stack: SimulatedStack, tmp_path: Path) -> None:
    stack.operator_delay = 4
    record = kai.install(install_context(make_settings(tmp_path), stack))
    assert record["deployments"] == ["kai-scheduler/kai-operator", *OPERANDS]
    assert record["webhook"].startswith("rejected as expected: admission webhook")
    assert record["webhook"].endswith("resources must be specified")
    assert (record["version"], record["source"], record["chart_version"]) == ("v0.17.0", "release", "v0.17.0")
    probes = [c for c in stack.fake.operations("create") if c.kind == "Queue"]
    assert probes
    assert all(c.detail["spec"] == {} for c in probes)
    assert stack.fake.objects(kinds.QUEUE) == []  # every probe was a dry-run


def test_install_is_idempotent(stack: SimulatedStack, tmp_path: Path) -> None:
    ctx = install_context(make_settings(tmp_path), stack)
    first = kai.install(ctx)
    second = kai.install(ctx)
    assert {k: v for k, v in first.items() if k != "ready_after_seconds"} == {
        k: v for k, v in second.items() if k != "ready_after_seconds"
    }
    assert len(stack.runner.commands("helm", "upgrade", "--install")) == 2
    assert len(stack.fake.objects(kinds.DEPLOYMENT, "kai-scheduler")) == 7


def test_helm_failure_quotes_helm_and_names_the_fix(stack: SimulatedStack, tmp_path: Path) -> None:
    stack.runner.on(
        "helm", "upgrade", returncode=1, stderr="Error: INSTALLATION FAILED: failed to pull chart: 403 Forbidden"
    )
    with pytest.raises(CommandFailed) as caught:
        kai.install(install_context(make_settings(tmp_path), stack))
    message = str(caught.value)
    assert message.startswith(
        "`helm upgrade --install kai-scheduler oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler"
    )
    assert (
        "failed (exit 1):\n  Error: INSTALLATION FAILED: failed to pull chart: 403 Forbidden\nfix: check the chart"
        in message
    )


def test_queue_webhook_never_registered_times_out_with_its_story(stack: SimulatedStack, tmp_path: Path) -> None:
    stack.queue_webhook = False
    ctx = install_context(make_settings(tmp_path, timeouts=EXPIRING), stack)
    with pytest.raises(errors.WaitTimeout) as caught:
        kai.install(ctx)
    message = str(caught.value)
    assert message.startswith("KAI Scheduler webhook kai-queue-validation-v2 to reject an invalid Queue: not reached")
    assert "an invalid Queue was admitted: webhook kai-queue-validation-v2 is not registered yet" in message
    assert "fix: check the queue-controller Deployment" in message


def test_missing_queue_crd_fails_at_once(stack: SimulatedStack, fake: FakeKube, tmp_path: Path) -> None:
    fake.unserve(kinds.QUEUE)
    with pytest.raises(errors.InfrastructureError, match=r"KAI Scheduler is not installed: the API server does not "
                       r"serve Queue .*its CRD is missing"):  # fmt: skip
        kai.install(install_context(make_settings(tmp_path), stack))


def test_operands_never_available_are_named(stack: SimulatedStack, tmp_path: Path) -> None:
    stack.operator_delay = 10**6
    ctx = install_context(make_settings(tmp_path, timeouts=EXPIRING), stack)
    with pytest.raises(errors.WaitTimeout) as caught:
        kai.install(ctx)
    message = str(caught.value)
    assert "kai-scheduler/admission not created yet; kai-scheduler/binder not created yet" in message
    assert "fix: look at the pods and events of KAI Scheduler (`kubectl get pods,events -n kai-scheduler`)" in message


def test_unexpected_webhook_answer_is_not_retried(stack: SimulatedStack, fake: FakeKube, tmp_path: Path) -> None:
    def deny(operation: str, obj: dict, dry_run: bool) -> None:
        if obj["kind"] == "Queue":
            raise errors.Forbidden(
                "create", 403, "Forbidden", 'queues.scheduling.run.ai is forbidden: User "ci" cannot create'
            )

    fake.admission.insert(0, deny)
    with pytest.raises(errors.InfrastructureError, match=r"a dry-run of an invalid Queue was answered .*forbidden.* but "
                       r"the webhook kai-queue-validation-v2 rejects it with 'resources must be specified'"):  # fmt: skip
        kai.install(install_context(make_settings(tmp_path), stack))
    assert len([c for c in fake.operations("create") if c.kind == "Queue"]) == 1


def test_a_release_the_tables_do_not_know_is_installed_by_its_tag_and_recorded_as_assumed(
    stack: SimulatedStack, tmp_path: Path
) -> None:
    combo = CATALOG.resolve(None, kai="v0.18.1")
    record = kai.install(install_context(make_settings(tmp_path, combination=combo), stack))
    (command,) = stack.runner.commands("helm", "upgrade")
    assert command[4:5] == ("oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler",)
    assert command[command.index("--version") + 1] == "v0.18.1"
    assert (record["version"], record["expectations"]) == ("v0.18.1", "v0.17.0")
    assert record["assumption"] == "KAI v0.18.1 is not in the expectation tables: expectations assumed from v0.17.0"
