"""The pytest plugin end to end, in process, with no cluster: the "cluster" is the in-memory fake behind a
loopback API server (the real HTTP client talks to it), kind is the fake executable. Preflight, one
provisioning, the scheduling guard (a disruptive case refused on an existing cluster, a serial one run alone), the
fake GPUs, the leftovers check and the single teardown all happen through pytest's own hooks and fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _pytest.unraisableexception import gc_collect_iterations_key

from kai_conformance.clusters import tools
from kai_conformance.clusters.install.behaviour import COUNTED_FAILED, ENDED_FAILED
from kai_conformance.clusters.install.stack import install_stack
from kai_conformance.clusters.suite_stack import queue
from kai_conformance.fixtures import plugin
from kai_conformance.fixtures.kube import kinds
from tests.fakes.apiserver import serve
from tests.fakes.bridge import route_to
from tests.fakes.commands import FakeKind, executable, tools_on_path
from tests.fakes.installation import SimulatedStack, install_context, make_settings, worker_node
from tests.fakes.kube import FakeKube

pytestmark = pytest.mark.usefixtures("fast_polling")

SUITE = """
import pytest
from kai_conformance.fixtures.kube import kinds


def test_sees_the_verified_stack(cluster, kube, gpu_layout):
    assert cluster.stack["mode"] == "verified"
    assert sum(gpu_layout.by_name().values()) == {total}
    assert kube.get(kinds.QUEUE, "kai-conformance")["metadata"]["labels"]["kai-conformance/scope"] == "stack"


@pytest.mark.disruptive
def test_disruptive(cluster):
    assert cluster.provider == "kind"


@pytest.mark.serial
def test_alone(workspace):
    assert workspace.namespace.startswith("kc-test-alone-")
"""


class Outcomes:
    def __init__(self) -> None:
        self.reports: dict[str, tuple[str, str]] = {}

    def pytest_configure(self, config: pytest.Config) -> None:
        # As pytester's in-process runs do: no garbage collection of this whole process at the end of the inner run
        # (two full collections, a tenth of a second or more each), done only to report unraisable exceptions as
        # warnings, which the inner runs here ignore (-W ignore).
        config.stash[gc_collect_iterations_key] = 0

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or report.outcome != "passed":
            message = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else str(report.longrepr or "")
            self.reports[report.nodeid.rsplit("::", 1)[1]] = (report.outcome, message)


@pytest.fixture
def cluster_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeKube) -> SimulatedStack:
    """A pre-installed stack on the fake, a production queue that is not the suite's, a suite directory."""
    tools_on_path(tmp_path / "bin", monkeypatch)
    monkeypatch.setattr(tools, "TOOLS_BIN", tmp_path / "no-tools")
    stack = SimulatedStack(fake)
    install_stack(install_context(make_settings(tmp_path), stack))
    fake.put(queue("production"))  # the cluster's own, not the suite's
    fake.calls.clear()
    monkeypatch.setattr(plugin, "SUITES_DIR", tmp_path / "suites")
    monkeypatch.chdir(tmp_path)
    return stack


def run_suite(
    tmp_path: Path, provider: str, gpus: int, *args: str, name: str = "", suite: str = SUITE
) -> tuple[int, Outcomes]:
    suites = tmp_path / "suites"
    suites.mkdir(exist_ok=True)
    module = suites / f"test_e2e_{name or provider}.py"  # a name of its own: pytest keeps imported modules by name
    module.write_text(suite.replace("{total}", str(gpus)))
    outcomes = Outcomes()
    code = pytest.main(
        [str(module), "--cluster", provider, "-p", "kai_conformance.fixtures.plugin", "-p", "no:pytest-kind-ng", "-p", "no:cacheprovider",
         "--report-dir", str(tmp_path / "report"), "--timeout-scale", "0.01", "--install", "never", "-q",
         "-W", "ignore", *args],
        plugins=[outcomes],
    )  # fmt: skip
    return int(code), outcomes


def state_of(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "report" / ".state" / "cluster.json").read_text())


def test_a_suite_run_on_an_existing_cluster(tmp_path: Path, fake: FakeKube, cluster_world: SimulatedStack) -> None:
    fake.put(worker_node("gpu-a", None, capacity=8))
    with serve(route_to(fake)) as server:
        code, outcomes = run_suite(tmp_path, "existing", 8, "--kubeconfig", str(server.kubeconfig(tmp_path)))
    assert outcomes.reports["test_sees_the_verified_stack"][0] == "passed"
    assert outcomes.reports["test_alone"][0] == "passed"
    outcome, reason = outcomes.reports["test_disruptive"]
    assert outcome == "skipped"
    assert "disruptive case refused on existing cluster" in reason
    assert "kubectl label namespace kube-system kai-conformance/allow-disruptive=true" in reason
    assert code == 0
    state = state_of(tmp_path)
    assert (state["provider"], state["ready"], state["gpus"]) == ("existing", True, {"gpu-a": 8})
    assert state["name"] == "fake"  # the kubeconfig's current context
    # over HTTP: the Deployments found name the versions, and KAI grouped, bound, ran and evicted the probe
    assert {c["version_source"] for c in state["stack"]["components"].values()} == {"detected"}
    assert state["stack"]["behaviour"]["evicted_pod"] in (ENDED_FAILED, COUNTED_FAILED)
    assert [q["metadata"]["name"] for q in fake.objects(kinds.QUEUE)] == ["production"]  # only the run's went
    assert fake.objects(kinds.CLUSTER_TRAINING_RUNTIME) == []
    assert [n for n in fake.objects(kinds.NAMESPACE) if n["metadata"]["name"].startswith("kc-")] == []
    assert len([c for c in fake.operations("create") if c.kind == "Queue"]) == 1  # verified once
    assert fake.operations("patch") == []  # no GPU faking on an existing cluster


def test_a_suite_run_on_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeKube,
                             cluster_world: SimulatedStack) -> None:  # fmt: skip
    fake_kind = FakeKind.install(tmp_path / "bin", monkeypatch)
    executable(tmp_path / "bin", "docker", "print('27.3.1')\n")
    cluster_world.add_workers(3, prefix="kai-conformance-worker")
    with serve(route_to(fake)) as server:
        fake_kind.update(server=server.url)
        code, outcomes = run_suite(tmp_path, "kind", 12, "--slices", "0")  # with a slice: tests/clusters/test_slices.py
    assert {name: outcome for name, (outcome, _) in outcomes.reports.items()} == {
        "test_sees_the_verified_stack": "passed", "test_disruptive": "passed", "test_alone": "passed",
    }  # fmt: skip
    assert code == 0
    assert len(fake_kind.calls("create", "cluster")) == 1
    assert fake_kind.calls("delete") == [
        [
            "delete",
            "cluster",
            "--name=kai-conformance",
            f"--kubeconfig={tmp_path / 'report/.state/kind-kai-conformance.kubeconfig'}",
        ]
    ]
    state = state_of(tmp_path)
    assert (state["provider"], state["created_by_run"], state["kept"]) == ("kind", True, False)
    assert state["gpus"] == {"kai-conformance-worker": 4, "kai-conformance-worker2": 4, "kai-conformance-worker3": 4}
    assert len(fake.operations("patch")) == 3  # one GPU patch per worker; the per-case checks found them in place


def test_a_cluster_that_cannot_be_provisioned_is_one_message_and_no_further_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeKube
) -> None:
    tools_on_path(tmp_path / "bin", monkeypatch)
    monkeypatch.setattr(plugin, "SUITES_DIR", tmp_path / "suites")
    monkeypatch.chdir(tmp_path)
    fake.put(worker_node("gpu-a", None, capacity=8))  # a cluster with GPUs but no stack: nothing to verify
    with serve(route_to(fake)) as server:
        code, outcomes = run_suite(
            tmp_path, "existing", 8, "--kubeconfig", str(server.kubeconfig(tmp_path)), name="unprovisioned"
        )
    assert code == pytest.ExitCode.INTERRUPTED
    ((name, (outcome, message)),) = outcomes.reports.items()  # the first case only: no further case is run
    assert (name, outcome) == ("test_sees_the_verified_stack", "failed")
    assert message.startswith("kai_conformance.fixtures.errors.") and "not installed" in message, message
    assert "def cluster" not in message and ".py:" not in message, message  # the message, not a traceback
    # Nobody interrupted it (pytest's own word for a stopped run): the report says why nothing was observed.
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["verdict"]["code"] == "inconclusive", summary["verdict"]
    assert summary["verdict"]["headline"] == (
        "Inconclusive: the run's cluster could not be provisioned, so no case was observed"
    )
    assert "not installed" in (tmp_path / "report" / "summary.md").read_text()  # the reason and its fix
