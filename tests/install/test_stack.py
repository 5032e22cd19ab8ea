"""The whole stack: KAI in parallel with JobSet → Trainer, verification without install (versions checked),
the record of images and digests, and the suite's own run-wide objects (applied, retried, removed)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kai_conformance.clusters.install import stack as stack_install
from kai_conformance.clusters.install.suite import apply_suite_objects, remove_suite_objects
from kai_conformance.clusters.suite_stack import DEFAULT_SCHEDULER_RUNTIME, PARENT_QUEUE, RUNTIME
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.ownership import stamp
from kai_conformance.fixtures.waits import TimeoutPolicy
from tests.fakes.commands import tools_on_path
from tests.fakes.installation import SimulatedStack, install_context, make_settings
from tests.fakes.kube import FakeKube

pytestmark = pytest.mark.usefixtures("fast_polling")

TIMEOUTS = TimeoutPolicy(scale=0.01)


@pytest.fixture
def stack(fake: FakeKube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimulatedStack:
    tools_on_path(tmp_path / "bin", monkeypatch)
    return SimulatedStack(fake)


def test_kai_installs_in_parallel_with_jobset_then_trainer(stack: SimulatedStack, tmp_path: Path) -> None:
    jobset_fetched = threading.Event()
    fetch = stack.fetch

    def fetch_and_signal(url: str, timeout: float) -> str:
        jobset_fetched.set()
        return fetch(url, timeout)

    stack.fetch = fetch_and_signal  # type: ignore[method-assign]
    kai_saw_jobset_start = []
    install_kai = stack._install_kai

    def kai_waits_for_jobset(argv: tuple[str, ...]) -> None:
        # Sequential installs would never see JobSet start while KAI's helm runs.
        kai_saw_jobset_start.append(jobset_fetched.wait(timeout=5))
        install_kai(argv)

    stack.runner.on("helm", "upgrade", "--install", "kai-scheduler", action=kai_waits_for_jobset)
    components = stack_install.install_stack(install_context(make_settings(tmp_path), stack))
    assert kai_saw_jobset_start == [True]
    assert list(components) == ["kai", "jobset", "trainer"]
    order = [c.argv[3] for c in stack.runner.calls if c.argv[:3] == ("helm", "upgrade", "--install")]
    assert sorted(order) == ["kai-scheduler", "kubeflow-trainer"]
    assert components["jobset"]["images"] == {
        "registry.k8s.io/jobset/jobset:v0.12.0": "registry.k8s.io/jobset/jobset@sha256:" + "ab" * 32
    }
    assert "ghcr.io/kai-scheduler/kai-scheduler/operator:v0.17.0" in components["kai"]["images"]


def test_trainer_waits_for_jobset(stack: SimulatedStack, tmp_path: Path) -> None:
    events: list[str] = []
    stack.fake.reactors.append(lambda f, call: events.append("jobset webhook") if call.kind == "JobSet" else None)
    stack.runner.on("helm", "upgrade", "--install", "kubeflow-trainer",
                    action=lambda argv: (events.append("trainer helm"), stack._install_trainer(argv))[1])  # fmt: skip
    stack_install.install_stack(install_context(make_settings(tmp_path), stack))
    assert events.index("jobset webhook") < events.index("trainer helm")


def test_one_failing_branch_fails_the_install_and_names_it(stack: SimulatedStack, tmp_path: Path) -> None:
    stack.runner.on("helm", "upgrade", "--install", "kubeflow-trainer", returncode=1, stderr="Error: timed out")
    with pytest.raises(Exception, match=r"`helm upgrade --install kubeflow-trainer .*failed \(exit 1\)"):
        stack_install.install_stack(install_context(make_settings(tmp_path), stack))


def test_several_failures_are_all_named() -> None:
    def boom(message: str):
        def task() -> None:
            raise errors.InfrastructureError(message)

        return task

    with pytest.raises(errors.InfrastructureError, match=r"several steps failed:\n- a: first\n- b: second"):
        stack_install.in_parallel({"a": boom("first"), "b": boom("second")})


def test_verify_checks_an_installed_stack_without_installing(stack: SimulatedStack, tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    stack_install.install_stack(install_context(settings, stack))
    installs = len(stack.runner.calls)
    verified = stack_install.verify_stack(install_context(make_settings(tmp_path, install=False), stack))
    assert len(stack.runner.calls) == installs  # no helm, no kubectl
    assert {name: (c["version"], c["source"]) for name, c in verified.items()} == {
        "kai": ("v0.17.0", "verified"), "jobset": ("v0.12.0", "verified"), "trainer": ("v2.3.0", "verified"),
    }  # fmt: skip
    assert verified["kai"]["deployments"][0] == "kai-scheduler/admission"


def test_verify_refuses_a_cluster_running_other_versions(stack: SimulatedStack, tmp_path: Path) -> None:
    stack_install.install_stack(install_context(make_settings(tmp_path), stack))
    older = make_settings(tmp_path, install=False, combination=make_settings(tmp_path).catalog.combination(
        "kai-v0.16.8+trainer-v2.3.0"))  # fmt: skip
    with pytest.raises(errors.UsageError, match=r"the cluster runs KAI Scheduler v0.17.0 but this run expects v0.16.8; "
                       r"pass --kai-version v0.17.0"):  # fmt: skip
        stack_install.verify_stack(install_context(older, stack))


# ------------------------------------------------------------------------------------------------ suite objects
def test_suite_objects_are_stamped_for_the_run_and_retried_while_webhooks_start(fake: FakeKube) -> None:
    fake.fail(
        "apply", 500, kind="ClusterTrainingRuntime", message='failed calling webhook "validator.clustertrainingruntime"'
    )
    applied = apply_suite_objects(fake, "run-1", "registry.k8s.io/pause:3.10", TIMEOUTS)
    assert applied == [f"ClusterTrainingRuntime {RUNTIME}", f"ClusterTrainingRuntime {DEFAULT_SCHEDULER_RUNTIME}",
                       f"Queue {PARENT_QUEUE}"]  # fmt: skip
    labels = fake.get(kinds.QUEUE, PARENT_QUEUE)["metadata"]["labels"]
    assert labels == {"app.kubernetes.io/managed-by": "kai-conformance", "kai-conformance/run": "run-1",
                      "kai-conformance/scope": "stack"}  # fmt: skip
    runtime = fake.get(kinds.CLUSTER_TRAINING_RUNTIME, RUNTIME)
    assert runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "schedulerName"] == "kai-scheduler"  # fmt: skip


def test_a_foreign_object_with_a_suite_name_is_never_changed(fake: FakeKube) -> None:
    fake.put(
        {"apiVersion": kinds.QUEUE.api_version, "kind": "Queue", "metadata": {"name": PARENT_QUEUE}, "spec": {"x": 1}}
    )
    with pytest.raises(
        errors.UsageError, match=rf"Queue {PARENT_QUEUE} already exists on the cluster and is not the suite's"
    ):
        apply_suite_objects(fake, "run-1", "img", TIMEOUTS)
    assert fake.get(kinds.QUEUE, PARENT_QUEUE)["spec"] == {"x": 1}


def test_removal_takes_only_this_runs_stack_objects(fake: FakeKube) -> None:
    apply_suite_objects(fake, "run-1", "img", TIMEOUTS)
    other = stamp({"apiVersion": kinds.QUEUE.api_version, "kind": "Queue", "metadata": {"name": "other-run"}}, "run-2")
    fake.apply(other)
    fake.put({"apiVersion": kinds.QUEUE.api_version, "kind": "Queue", "metadata": {"name": "default-queue"}})
    assert remove_suite_objects(fake, "run-1", TIMEOUTS) == []
    assert [q["metadata"]["name"] for q in fake.objects(kinds.QUEUE)] == ["default-queue", "other-run"]
    assert fake.objects(kinds.CLUSTER_TRAINING_RUNTIME) == []
    order = [c.kind for c in fake.operations("delete")]
    assert order == ["ClusterTrainingRuntime", "ClusterTrainingRuntime", "Queue"]


def test_removal_reports_a_parent_queue_the_webhook_keeps(fake: FakeKube) -> None:
    apply_suite_objects(fake, "run-1", "img", TIMEOUTS)

    fake.fail(
        "delete",
        403,
        kind="Queue",
        times=10**6,
        message="cannot delete queue kai-conformance: it has child queues [q1]",
    )
    problems = remove_suite_objects(fake, "run-1", TimeoutPolicy(scale=0.0005))
    assert len(problems) == 1
    assert "removal of the suite's Queue objects: not reached" in problems[0]
    assert "deletion refused: cannot delete queue kai-conformance: it has child queues [q1]" in problems[0]


def test_an_interrupted_run_waits_for_a_task_still_running_though_the_interruption_broke_its_join(
    ctrl_c_raises: None,
) -> None:
    """A Ctrl-C that breaks the main thread's ``Thread.join`` leaves the thread marked stopped while it still runs
    (CPython 3.11, bpo-45274's handling), so a second join returns at once: the wait is on each task's own end. The
    task here ends 1 s after the interruption (a stated margin: with a second join the main thread went on at once,
    long before it); the main thread must not go on before."""
    import signal
    import time

    running, ended = threading.Event(), []

    def slow_to_remove() -> None:
        running.set()
        time.sleep(1.0)  # what it made takes a second to remove, whatever the interruption
        ended.append("removed")

    main = threading.main_thread().ident
    assert main is not None

    def interrupt_once_running() -> None:
        running.wait(30)
        time.sleep(0.05)  # the main thread is in its join
        signal.pthread_kill(main, signal.SIGINT)

    threading.Thread(target=interrupt_once_running, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        stack_install.in_parallel({"probe": slow_to_remove}, cancellable=True)
    assert ended == ["removed"], "the main thread went on while the task was still removing what it made"


def test_an_interrupted_cancellable_step_removes_what_it_made_before_the_run_goes_on(
    fast_polling: None, ctrl_c_raises: None
) -> None:
    """A Ctrl-C (SIGTERM alike) reaches only the main thread: it is passed on to each step's wait, nested steps
    included (the slices' probes inside the slices' step), and the main thread raises only once each has removed
    what it made."""
    import signal
    import time

    from kai_conformance.fixtures.waits import Observation, eventually

    made: set[str] = set()
    waiting = threading.Barrier(4, timeout=5)

    def step(name: str) -> None:
        made.add(name)
        try:
            waiting.wait()
            eventually(lambda: Observation(False, "never"), what=name, timeout=30, failure=errors.WaitTimeout)
        finally:  # the removal waits as usual after the interruption
            eventually(lambda: Observation(True, "gone"), what=f"removal of {name}", timeout=1)
            made.discard(name)

    def nested() -> None:
        stack_install.in_parallel({"inner-a": lambda: step("inner-a"), "inner-b": lambda: step("inner-b")},
                                  cancellable=True)  # fmt: skip

    main = threading.main_thread().ident
    assert main is not None

    def interrupt_once_all_wait() -> None:
        waiting.wait()
        signal.pthread_kill(main, signal.SIGINT)  # a real signal: it breaks the main thread's join

    threading.Thread(target=interrupt_once_all_wait, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        stack_install.in_parallel({"probe": lambda: step("probe"), "slices": nested}, cancellable=True)
    assert made == set(), "every step removed what it made before the main thread went on"
    assert time.monotonic() - started < 10, "the steps' waits ended at the interruption, not at their 30 s timeout"
