"""At a run's start the suite removes what an earlier run, killed too hard to clean up, left on the cluster: only
objects whose owner process is provably gone, never a live run's, another machine's recent ones, kept ones or its
own (fixtures/removal/sweep.py)."""

from __future__ import annotations

import datetime as dt
import os
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from kai_conformance.fixtures import ownership
from kai_conformance.fixtures.kube import Obj, kinds
from kai_conformance.fixtures.kube.kinds import Kind
from kai_conformance.fixtures.ownership import OWNER_ANNOTATION, Owner, stamp
from kai_conformance.fixtures.removal import sweep
from kai_conformance.fixtures.removal.cleanup import KEPT_LABEL
from kai_conformance.fixtures.run import RUN_KEY, RunContext
from kai_conformance.fixtures.waits import TimeoutPolicy
from tests.fakes.kube import FakeKube

pytestmark = pytest.mark.usefixtures("fast_polling")

NOW = dt.datetime.now(dt.timezone.utc)
HOST = socket.gethostname()
THIS_RUN = "run-now"


def iso(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def made(kind: Kind, name: str, owner: Owner | None, *, run: str = "run-0", test: str | None = "suites/t.py::t",
         age: dt.timedelta = dt.timedelta(0), namespace: str | None = None, **labels: str) -> Obj:  # fmt: skip
    """An object as run ``run`` stamped it ``age`` ago, naming ``owner`` (an older suite named none)."""
    obj = stamp({"apiVersion": kind.api_version, "kind": kind.kind, "metadata": {"name": name}}, run, test)
    meta = obj["metadata"]
    meta["labels"].update(labels)
    meta["creationTimestamp"] = iso(NOW - age)
    if namespace:
        meta["namespace"] = namespace
    if owner is not None:
        meta.setdefault("annotations", {})[OWNER_ANNOTATION] = owner.annotation()
    return obj


def leave_a_case(fake: FakeKube, suffix: str, owner: Owner | None, **options) -> None:
    """What a case killed mid-way leaves: its namespace with a running Job and its pod, and its queue."""
    fake.put(made(kinds.NAMESPACE, f"kc-{suffix}", owner, **options))
    fake.put(made(kinds.JOB, "job", owner, namespace=f"kc-{suffix}", **options))
    fake.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "job-0", "namespace": f"kc-{suffix}"},
              "status": {"phase": "Running"}})  # fmt: skip
    fake.put(made(kinds.QUEUE, f"kcq-{suffix}", owner, **options))


def names(fake: FakeKube, kind: Kind, namespace: str | None = None) -> list[str]:
    return sorted(o["metadata"]["name"] for o in fake.objects(kind, namespace))


@pytest.fixture
def dead_pid() -> int:
    """The pid of a process that ran on this host and is gone (reaped)."""
    process = subprocess.Popen([sys.executable, "-c", ""])
    process.wait()
    return process.pid


def test_what_the_suite_stamps_for_a_run_names_the_runs_owner() -> None:
    run_id = f"run-{uuid.uuid4().hex}"  # registered for good in this process: a run id no other test uses
    owner = Owner("ci-7", 4242, "2026-11-21T14:25:01Z")
    ownership.register_owner(run_id, owner)
    stamped = stamp({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kc-a"}}, run_id, "t.py::t")
    assert Owner.parse(stamped["metadata"]["annotations"][OWNER_ANNOTATION]) == owner
    other = stamp({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kc-b"}}, "another-run")
    assert OWNER_ANNOTATION not in (other["metadata"].get("annotations") or {})
    assert [Owner.parse(value) for value in (None, "", "{}", '{"host":"h","pid":0,"started":"x"}')] == [None] * 4


def test_a_dead_owners_namespace_job_probe_and_queues_are_removed_and_named(
    fake: FakeKube, fast_timeouts: TimeoutPolicy, dead_pid: int
) -> None:
    owner = Owner(HOST, dead_pid, iso(NOW))
    leave_a_case(fake, "a", owner)
    fake.put(made(kinds.NAMESPACE, "kc-stack-probe-abc", owner, test=None))
    fake.put(made(kinds.JOB, "kai-conformance-probe", owner, test=None, namespace="kc-stack-probe-abc"))
    fake.put(made(kinds.QUEUE, "kai-conformance-probe-abc", owner, test=None))
    fake.put(made(kinds.QUEUE, "kai-conformance", owner, test=None))  # a run-wide object: the next run reapplies it
    lines = sweep.sweep(fake, THIS_RUN, fast_timeouts)
    assert lines == [
        f"removed 4 objects an earlier run (pid {dead_pid} on this host, no longer running) left: Namespace kc-a, "
        "Namespace kc-stack-probe-abc, Queue kai-conformance-probe-abc, Queue kcq-a"
    ]
    assert names(fake, kinds.NAMESPACE) == [] and names(fake, kinds.JOB) == [] and names(fake, kinds.POD) == []
    assert names(fake, kinds.QUEUE) == ["kai-conformance"]
    deleted = [(c.operation, c.kind, c.namespace or c.name) for c in fake.calls if c.operation.startswith("delete")]
    # the workspace's teardown order: the namespace's Jobs by one collection delete, then the namespace
    assert deleted.index(("deletecollection", "Job", "kc-a")) < deleted.index(("delete", "Namespace", "kc-a"))


def test_a_job_that_outlives_the_budget_is_reported_and_its_namespace_still_goes(
    fake: FakeKube, fast_timeouts: TimeoutPolicy, dead_pid: int
) -> None:
    """A Job held by a finalizer nobody removes outlives the budget: named, and its namespace goes all the same.
    Everything in a suite's namespace goes, a controller's Job too (it carries no suite label)."""
    fake.put(made(kinds.NAMESPACE, "kc-stuck", Owner(HOST, dead_pid, iso(NOW))))
    fake.put({"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "made-by-jobset", "namespace": "kc-stuck", "finalizers": ["example.com/never-removed"]}})  # fmt: skip
    removing, problem = sweep.sweep(fake, THIS_RUN, fast_timeouts)
    assert removing.startswith("began removing 1 object an earlier run") and removing.endswith(": Namespace kc-stuck")
    assert problem.startswith("could not finish sweeping what earlier runs left: the Jobs of earlier runs'")
    assert "Job kc-stuck/made-by-jobset" in problem and "none went" in problem
    deletions = [(c.operation, c.kind) for c in fake.calls if c.operation.startswith("delete")]
    assert deletions == [("deletecollection", "TrainJob"), ("deletecollection", "JobSet"),
                         ("deletecollection", "Job"), ("delete", "Namespace")]  # fmt: skip


def test_a_live_owners_objects_are_kept_and_named(fake: FakeKube, fast_timeouts: TimeoutPolicy) -> None:
    leave_a_case(fake, "live", Owner(HOST, os.getpid(), iso(NOW)), age=dt.timedelta(days=2))
    assert sweep.sweep(fake, THIS_RUN, fast_timeouts) == [
        f"kept 2 objects an earlier run (pid {os.getpid()} on this host, still running) left, since it may still be "
        "running: Namespace kc-live, Queue kcq-live"
    ]
    assert fake.operations("delete") == []


def test_another_hosts_objects_go_only_once_older_than_any_run(fake: FakeKube, fast_timeouts: TimeoutPolicy) -> None:
    leave_a_case(fake, "recent", Owner("ci-7", 99, iso(NOW)), run="run-7", age=dt.timedelta(hours=1))
    leave_a_case(fake, "old", Owner("ci-8", 99, iso(NOW)), run="run-8", age=sweep.STALE_AFTER + dt.timedelta(hours=1))
    assert sweep.sweep(fake, THIS_RUN, fast_timeouts) == [
        "removed 2 objects an earlier run (pid 99 on ci-8, older than 6h) left: Namespace kc-old, Queue kcq-old",
        "kept 2 objects an earlier run (pid 99 on ci-7, under 6h old) left, since it may still be running: "
        "Namespace kc-recent, Queue kcq-recent",
    ]
    assert names(fake, kinds.NAMESPACE) == ["kc-recent"] and names(fake, kinds.QUEUE) == ["kcq-recent"]


def test_objects_of_a_suite_that_recorded_no_owner_go_once_older_than_any_run(
    fake: FakeKube, fast_timeouts: TimeoutPolicy
) -> None:
    leave_a_case(fake, "old", None, age=dt.timedelta(hours=7))
    leave_a_case(fake, "new", None, run="run-2", age=dt.timedelta(minutes=5))
    lines = sweep.sweep(fake, THIS_RUN, fast_timeouts)
    assert lines[0] == (
        "removed 2 objects an earlier run (made by a suite that recorded no owner, older than 6h) left: "
        "Namespace kc-old, Queue kcq-old"
    )
    assert lines[1].startswith("kept 2 objects") and "Namespace kc-new, Queue kcq-new" in lines[1]
    assert names(fake, kinds.NAMESPACE) == ["kc-new"]


def test_a_kept_namespace_and_its_cases_objects_are_never_removed(
    fake: FakeKube, fast_timeouts: TimeoutPolicy, dead_pid: int
) -> None:
    owner = Owner(HOST, dead_pid, iso(NOW))
    leave_a_case(fake, "kept", owner, age=dt.timedelta(days=3), test="t.py::kept", **{KEPT_LABEL: "true"})
    fake.put(made(kinds.QUEUE, "kcq-of-the-kept-case", owner, test="t.py::kept"))
    fake.put(made(kinds.QUEUE, "kcq-of-another-case", owner, test="t.py::other"))
    assert sweep.sweep(fake, THIS_RUN, fast_timeouts) == [
        f"removed 1 object an earlier run (pid {dead_pid} on this host, no longer running) left: "
        "Queue kcq-of-another-case"
    ]
    assert names(fake, kinds.NAMESPACE) == ["kc-kept"] and names(fake, kinds.JOB, "kc-kept") == ["job"]
    assert names(fake, kinds.QUEUE) == ["kcq-kept", "kcq-of-the-kept-case"]


def test_the_current_runs_objects_are_never_touched(
    fake: FakeKube, fast_timeouts: TimeoutPolicy, dead_pid: int
) -> None:
    leave_a_case(fake, "mine", Owner(HOST, dead_pid, iso(NOW)), run=THIS_RUN, age=dt.timedelta(days=1))
    leave_a_case(fake, "unowned", None, run=THIS_RUN, age=dt.timedelta(days=1))
    assert sweep.sweep(fake, THIS_RUN, fast_timeouts) == []
    assert fake.operations("delete") == []


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="process start times come from /proc")
def test_a_pid_now_held_by_a_process_started_after_the_run_is_a_dead_owner(
    fake: FakeKube, fast_timeouts: TimeoutPolicy
) -> None:
    long_before_this_process = iso(NOW - dt.timedelta(days=30))
    leave_a_case(fake, "reused", Owner(HOST, os.getpid(), long_before_this_process))
    [line] = sweep.sweep(fake, THIS_RUN, fast_timeouts)
    assert "(its pid now belongs to a later process)" in line and line.startswith("removed 2 objects")


def test_a_real_owner_process_keeps_its_objects_while_it_runs_and_loses_them_once_killed(
    fake: FakeKube, fast_timeouts: TimeoutPolicy
) -> None:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        owner = Owner(HOST, process.pid, iso(dt.datetime.now(dt.timezone.utc)))
        leave_a_case(fake, "real", owner)
        [kept] = sweep.sweep(fake, THIS_RUN, fast_timeouts)
        assert kept.startswith(f"kept 2 objects an earlier run (pid {process.pid} on this host, still running)")
        process.send_signal(signal.SIGKILL)
        if hasattr(os, "waitid") and Path("/proc").is_dir():  # killed, not yet reaped by its parent: a zombie
            os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
            assert sweep.process_gone(owner) == "no longer running"
        process.wait()
        assert sweep.sweep(fake, THIS_RUN, fast_timeouts) == [
            f"removed 2 objects an earlier run (pid {process.pid} on this host, no longer running) left: "
            "Namespace kc-real, Queue kcq-real"
        ]
        assert names(fake, kinds.NAMESPACE) == [] and names(fake, kinds.QUEUE) == []
    finally:
        process.kill()
        process.wait()


def test_the_sweep_runs_once_per_run_and_workers_stamp_the_controllers_owner(
    tmp_path: Path, fake: FakeKube, fast_timeouts: TimeoutPolicy, dead_pid: int
) -> None:
    leave_a_case(fake, "a", Owner(HOST, dead_pid, iso(NOW)))
    connected = []

    def connect() -> FakeKube:
        connected.append(1)
        return fake

    for _ in range(2):  # the first process to reach the cluster sweeps; the others find it done
        sweep.once_per_run(tmp_path, THIS_RUN, connect, fast_timeouts)
    assert connected == [1] and names(fake, kinds.NAMESPACE) == []

    run = RunContext(f"run-{uuid.uuid4().hex}", tmp_path, tmp_path, "main")
    controller = SimpleNamespace(stash=pytest.Stash())
    controller.stash[RUN_KEY] = run
    sweep.register_run_owner(controller)
    assert ownership.owner_of(run.run_id) == Owner(HOST, os.getpid(), ownership.owner_of(run.run_id).started)
    node = SimpleNamespace(config=controller, workerinput={})
    sweep.hand_owner_to_worker(node)
    worker = SimpleNamespace(stash=pytest.Stash(), workerinput=node.workerinput)
    worker.stash[RUN_KEY] = RunContext(f"run-{uuid.uuid4().hex}", tmp_path, tmp_path, "gw0")
    sweep.register_run_owner(worker)
    assert ownership.owner_of(worker.stash[RUN_KEY].run_id) == ownership.owner_of(run.run_id)
