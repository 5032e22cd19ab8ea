"""Ctrl-C mid-run: a real SIGINT, sent to the main thread when the API server sees the Nth write of a burst (or of
the fake-node creation), interrupts a suite run in process against the in-memory fake behind a loopback API server.
The run says once what happens next, and afterwards nothing this run made is left: no namespace, workload, queue,
fake node or run-wide object. The cleanup stack's own behaviour under a (second) Ctrl-C is proven on its own."""

from __future__ import annotations

import json
import signal
import socketserver
import threading
from pathlib import Path
from typing import Any

import pytest

from kai_conformance.clusters.install.behaviour import JOB_NAME, NAMESPACE_PREFIX
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.ownership import RUN_LABEL
from kai_conformance.fixtures.removal import cleanup
from tests.clusters.test_plugin import Outcomes, cluster_world  # noqa: F401  (fixture)
from tests.fakes.apiserver import serve
from tests.fakes.bridge import route_to
from tests.fakes.installation import SimulatedStack, worker_node
from tests.fakes.kube import Call, FakeKube
from tests.fakes.kwok import FakeKwok, pod_delete_stage, pod_ready_stage

pytestmark = pytest.mark.usefixtures("fast_polling", "quiet_loopback_server", "ctrl_c_raises")


@pytest.fixture
def quiet_loopback_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """The interrupted client drops its request; the loopback server (socketserver) would print that to stderr.
    It is the fake's complaint, not the suite's output, which must show no traceback."""
    monkeypatch.setattr(socketserver.BaseServer, "handle_error", lambda self, request, client_address: None)


BURST = 16
FAKE_NODES = 3
SUITE = f"""
import pytest

from kai_conformance.clusters.suite_stack import queue

pytestmark = pytest.mark.scale  # fake nodes are for the scale area alone


def test_before():
    pass  # a case that ran to its verdict before the interruption: the report counts it, and only it


def test_a_burst(workspace, cluster):
    nodes = sorted(name for name in cluster.gpus if "-kwok-" in name)
    for index in range({BURST}):
        workspace.apply(queue(f"burst-{{index}}", parent="kai-conformance"))
        workspace.apply({{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": f"burst-{{index}}"}},
                         "spec": {{"nodeName": nodes[index % len(nodes)], "containers": [
                             {{"name": "node", "image": "busybox", "command": ["sleep", "3600"]}}]}}}})
    raise AssertionError("the burst was not interrupted")


def test_after(workspace):
    raise AssertionError("a case after the interruption ran")
"""


def ctrl_c_at(fake: FakeKube, kind: str, count: int, prefix: str = "", sig: int = signal.SIGINT) -> None:
    """Send SIGINT to the main thread (as a terminal's Ctrl-C does; or ``sig``, e.g. a CI runner's SIGTERM) when
    the API server sees the ``count``-th apply of ``kind`` named ``prefix…``: the run is then inside that request,
    mid-burst."""
    main = threading.main_thread().ident
    seen = []

    def react(kube: FakeKube, call: Call) -> None:
        if call.operation == "apply" and call.kind == kind and (call.name or "").startswith(prefix):
            seen.append(call.name)
            if len(seen) == count:
                signal.pthread_kill(main, sig)

    fake.reactors.append(react)


def interrupted_run(tmp_path: Path, fake: FakeKube, capfd: pytest.CaptureFixture[str], name: str) -> tuple[int, str]:
    """Run the suite above on an existing cluster with kwok and fake nodes; returns the exit code and stderr."""
    fake.put(worker_node("gpu-a", None, capacity=8))
    FakeKwok(fake)
    for stage in (pod_ready_stage(), pod_delete_stage()):  # the cluster's own kwok stages
        fake.put(stage)
    suites = tmp_path / "suites"
    suites.mkdir()
    module = suites / f"test_e2e_interrupted_{name}.py"  # a name of its own: pytest keeps imported modules by name
    module.write_text(SUITE)
    with serve(route_to(fake)) as server:
        code = pytest.main(
            [str(module), "--cluster", "existing", "--kubeconfig", str(server.kubeconfig(tmp_path)), "--kwok-managed",
             "--fake-nodes", str(FAKE_NODES), "-m", "scale", "-p", "kai_conformance.fixtures.plugin", "-p", "no:pytest-kind-ng",
             "-p", "no:cacheprovider", "--report-dir", str(tmp_path / "report"), "--timeout-scale", "0.01",
             "--install", "never", "-q", "-W", "ignore"],
            plugins=[Outcomes()],
        )  # fmt: skip
    return int(code), capfd.readouterr().err


def left_of_the_run(fake: FakeKube, run_id: str) -> list[str]:
    """Every object labelled with the run, and every pod outside the stack's namespaces (the cluster's own
    controllers run there) and kube-system."""
    stack_namespaces = {"kube-system", "jobset-system", "kubeflow-system", "kai-scheduler"}
    left = []
    for key, obj in list(fake.store.items()):
        labels = obj["metadata"].get("labels") or {}
        if labels.get(RUN_LABEL) == run_id or (key[1] == "Pod" and key[2] not in stack_namespaces):
            left.append(f"{key[1]} {key[2] + '/' if key[2] else ''}{key[3]}")
    return sorted(left)


def run_id_of(fake: FakeKube) -> str:
    """The run's id, from the first object it applied (a fake node)."""
    return next(c.detail for c in fake.operations("apply") if c.kind == "Node")["metadata"]["labels"][RUN_LABEL]


def test_ctrl_c_mid_burst_removes_every_namespace_workload_and_fake_node_of_the_run(
    tmp_path: Path,
    fake: FakeKube,
    cluster_world: SimulatedStack,  # noqa: F811
    capfd: pytest.CaptureFixture[str],
) -> None:
    ctrl_c_at(fake, "Pod", BURST // 2, prefix="burst-")
    code, err = interrupted_run(tmp_path, fake, capfd, "burst")
    assert code == pytest.ExitCode.INTERRUPTED
    run_id = run_id_of(fake)
    assert len([c for c in fake.operations("apply") if c.kind == "Pod" and c.name.startswith("burst-")]) == BURST // 2
    assert len([c for c in fake.operations("apply") if c.kind == "Node"]) == FAKE_NODES  # they existed
    assert left_of_the_run(fake, run_id) == []
    assert [n["metadata"]["name"] for n in fake.objects(kinds.NODE)] == ["gpu-a"]
    assert "Traceback" not in err
    assert err.count("interrupted (Ctrl-C): removing everything run") == 1
    assert "kubectl delete namespaces,queues.scheduling.run.ai," in err and f"-l {RUN_LABEL}={run_id}" in err
    assert "interrupted: removing what 1 running case(s) made" in err
    assert f"fake nodes: removed {FAKE_NODES}" in err
    assert "left objects behind" not in err and "could not remove" not in err


def test_sigterm_mid_burst_is_a_ctrl_c_that_exits_as_terminated(
    tmp_path: Path,
    fake: FakeKube,
    cluster_world: SimulatedStack,  # noqa: F811
    capfd: pytest.CaptureFixture[str],
) -> None:
    """What a CI runner sends on cancel or timeout. Before, a SIGTERM killed the run on the spot and left the stack
    probe's namespace, a running Job and two queues on the cluster."""
    previous = signal.getsignal(signal.SIGTERM)
    ctrl_c_at(fake, "Pod", BURST // 2, prefix="burst-", sig=signal.SIGTERM)
    code, err = interrupted_run(tmp_path, fake, capfd, "sigterm")
    assert code == 143
    assert left_of_the_run(fake, run_id_of(fake)) == []
    assert [n["metadata"]["name"] for n in fake.objects(kinds.NODE)] == ["gpu-a"]
    assert "Traceback" not in err
    assert err.count("interrupted (SIGTERM): removing everything run") == 1
    assert "a second SIGTERM leaves them behind" in err
    assert signal.getsignal(signal.SIGTERM) is previous  # the run gives the handler back
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["verdict"]["code"] == "incomplete"  # never "conformant", though the one case that ran passed
    assert summary["verdict"]["headline"] == "Incomplete: the run was interrupted after 1 case ran to a verdict"
    assert {k: n for k, n in summary["totals"].items() if n} == {"passed": 1}  # pytest's line: 1 passed


def test_sigterm_during_the_behaviour_probe_removes_the_probes_namespace_job_and_queue(
    tmp_path: Path,
    fake: FakeKube,
    cluster_world: SimulatedStack,  # noqa: F811
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The probe runs in a thread of its own (beside the slices' probes, clusters/provision.py): the SIGTERM reaches
    the main thread, which passes it on to the probe's wait; the probe removes what it made before the run goes on
    interrupted."""
    ctrl_c_at(fake, "Job", 1, prefix=JOB_NAME, sig=signal.SIGTERM)
    code, err = interrupted_run(tmp_path, fake, capfd, "probe")
    assert code == 143
    assert any(c.kind == "Job" and c.name == JOB_NAME for c in fake.operations("apply")), "the probe had begun"
    assert left_of_the_run(fake, run_id_of(fake)) == []
    assert not [n for n in fake.objects(kinds.NAMESPACE) if n["metadata"]["name"].startswith(NAMESPACE_PREFIX)]
    assert "interrupted: KAI behaviour probe, slices removing what they made" in err
    assert "Traceback" not in err


def test_ctrl_c_during_fake_node_creation_removes_the_nodes_made_so_far(
    tmp_path: Path,
    fake: FakeKube,
    cluster_world: SimulatedStack,  # noqa: F811
    capfd: pytest.CaptureFixture[str],
) -> None:
    ctrl_c_at(fake, "Node", 2)
    code, err = interrupted_run(tmp_path, fake, capfd, "nodes")
    assert code == pytest.ExitCode.INTERRUPTED
    assert len([c for c in fake.operations("apply") if c.kind == "Node"]) == 2  # stopped mid-creation
    assert left_of_the_run(fake, run_id_of(fake)) == []
    assert [n["metadata"]["name"] for n in fake.objects(kinds.NODE)] == ["gpu-a"]
    assert "Traceback" not in err
    assert err.count("interrupted (Ctrl-C): removing everything run") == 1
    assert "fake nodes: removed 2" in err
    failure = json.loads((tmp_path / "report" / ".state" / "cluster.failed.json").read_text())
    assert failure["message"] == "interrupted (Ctrl-C) while provisioning"  # what another worker would be told
    assert failure["interrupted"]  # so the report says incomplete, not "could not be provisioned"
    assert json.loads((tmp_path / "report" / "summary.json").read_text())["verdict"]["code"] == "incomplete"


# ------------------------------------------------------------------------------------------------ the cleanup stack
def interrupting(done: list[str], name: str, times: int = 1) -> Any:
    left = [times]

    def action() -> None:
        if left[0] > 0:
            left[0] -= 1
            raise KeyboardInterrupt
        done.append(name)

    return action


def test_an_action_interrupted_by_ctrl_c_stays_on_its_stack_and_runs_at_the_sessions_end() -> None:
    done: list[str] = []
    stack = cleanup.open_stack("suites/t.py::t")
    stack.push("Namespace kc-a", lambda: done.append("namespace"))
    stack.push("Queue q", interrupting(done, "queue"))
    stack.push("Pod p", lambda: done.append("pod"))
    with pytest.raises(KeyboardInterrupt):
        cleanup.close_stack(stack)  # the test's teardown, interrupted while removing the queue
    assert done == ["pod"]
    assert cleanup.drain_all() == []  # the session's end runs the rest, the interrupted action included
    assert done == ["pod", "queue", "namespace"]


def test_a_second_ctrl_c_stops_the_drain_and_names_what_was_abandoned() -> None:
    done: list[str] = []
    first = cleanup.open_stack("suites/t.py::first")
    first.push("Namespace kc-first", lambda: done.append("first"))
    second = cleanup.open_stack("suites/t.py::second")
    second.push("Namespace kc-second", lambda: done.append("second"))
    second.push("Queue q", interrupting(done, "queue"))
    assert cleanup.drain_all() == [
        "suites/t.py::second: abandoned (Ctrl-C): Queue q",
        "suites/t.py::second: abandoned (Ctrl-C): Namespace kc-second",
        "suites/t.py::first: abandoned (Ctrl-C): Namespace kc-first",
    ]
    assert done == [] and cleanup.open_stacks() == 0


def test_the_sweep_removes_what_cases_left_but_kept_namespaces(fake: FakeKube) -> None:
    from kai_conformance.clusters.suite_stack import queue
    from kai_conformance.fixtures.ownership import stamp
    from kai_conformance.fixtures.waits import TimeoutPolicy

    for name in ("kc-a", "kc-kept"):
        fake.put(stamp({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}, "run-1", "t.py::t"))
    fake.patch(kinds.NAMESPACE, "kc-kept", {"metadata": {"labels": {cleanup.KEPT_LABEL: "true"}}})
    fake.put(stamp(queue("kcq-parent"), "run-1", "t.py::t"))
    fake.put(stamp(queue("kcq-child", parent="kcq-parent"), "run-1", "t.py::t"))
    fake.put(stamp(queue("kai-conformance"), "run-1"))  # run-wide (scope stack): the teardown's, not the sweep's
    fake.put(stamp(queue("other-run"), "run-0", "t.py::t"))
    removed, problems = cleanup.sweep_run(fake, "run-1", TimeoutPolicy(scale=0.01))
    assert (removed, problems) == (["Namespace kc-a", "Queue kcq-child", "Queue kcq-parent"], [])
    assert sorted(q["metadata"]["name"] for q in fake.objects(kinds.QUEUE)) == ["kai-conformance", "other-run"]
    assert [n["metadata"]["name"] for n in fake.objects(kinds.NAMESPACE)] == ["kc-kept"]


def test_the_interrupted_sweep_deletes_a_namespace_only_once_its_jobs_are_gone(fake: FakeKube) -> None:
    """On real kind a SIGTERM mid-case left a namespace Terminating: it was deleted while its Indexed Jobs still held
    Failed pods by their tracking finalizers. The sweep removes in the workspace's teardown order."""
    from kai_conformance.fixtures.ownership import stamp
    from kai_conformance.fixtures.waits import TimeoutPolicy

    fake.put(stamp({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kc-a"}}, "run-1", "t.py::t"))
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "victim-node-0", "namespace": "kc-a"}}
    fake.put(stamp(job, "run-1", "t.py::t"))
    removed, problems = cleanup.sweep_run(fake, "run-1", TimeoutPolicy(scale=0.01))
    assert (removed, problems) == (["Namespace kc-a"], [])
    deletions = [(c.operation, c.kind) for c in fake.calls if c.operation.startswith("delete")]
    assert deletions.index(("deletecollection", "Job")) < deletions.index(("delete", "Namespace")), deletions
