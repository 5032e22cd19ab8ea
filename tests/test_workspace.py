"""The per-test workspace: unique labelled namespace, reverse-order cleanup on pass, fail and Ctrl-C,
diagnostics on failure, --keep-namespaces, and a clear error when cleanup itself fails."""

from __future__ import annotations

from collections import Counter

import pytest

from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.ownership import (
    CASE_LABEL,
    MANAGED_BY,
    RUN_LABEL,
    TEST_ID_ANNOTATION,
    case_label_value,
    stamp,
)
from kai_conformance.fixtures.workspace import namespace_name
from tests import builders
from tests.fakes import shared
from tests.fakes.kube import FakeKube

pytest_plugins = ["pytester"]

CONFTEST = """
import pytest
from kai_conformance.fixtures.run import RunContext
from tests.fakes import shared

pytest_plugins = ["kai_conformance.fixtures.plugin"]

@pytest.fixture(scope="session")
def kube():
    return shared.current

@pytest.fixture(scope="session")
def run(tmp_path_factory):
    base = tmp_path_factory.getbasetemp()
    return RunContext("run-1", base / "report", base / "report" / ".state", "main")
"""

QUEUE = {
    "apiVersion": "scheduling.run.ai/v2",
    "kind": "Queue",
    "metadata": {"name": "{name}"},
    "spec": {"resources": {}},
}
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}}

TESTS = f"""
import json, pytest
QUEUE = {QUEUE!r}
POD = {POD!r}

def make(workspace, name):
    queue = json.loads(json.dumps(QUEUE).replace("{{name}}", name))
    workspace.apply(queue)
    workspace.apply(POD)
    return workspace.namespace

def test_passes(workspace):
    make(workspace, "q-pass")

def test_fails(workspace):
    make(workspace, "q-fail")
    assert False, "product misbehaved"

def test_interrupted(workspace):
    make(workspace, "q-int")
    raise KeyboardInterrupt
"""


@pytest.fixture
def fake() -> FakeKube:
    shared.current = FakeKube()
    yield shared.current
    shared.current = None


@pytest.fixture
def pytester(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\naddopts = -p no:pytest-kind-ng\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_ws=TESTS)
    return pytester


def deletes(fake: FakeKube) -> list[tuple[str, str]]:
    return [(c.kind, c.name) for c in fake.operations("delete")]


def test_namespace_names_are_unique_valid_dns_labels() -> None:
    long = "test_gang_fits[" + "x" * 100 + "]"
    name = namespace_name(long)
    assert len(name) <= 63 and name.startswith("kc-test-gang-fits-x") and name[-7] == "-"
    assert namespace_name("t") != namespace_name("t")


def test_a_passing_test_removes_everything_in_reverse_order(pytester: pytest.Pytester, fake: FakeKube) -> None:
    result = pytester.runpytest_inprocess("-k", "test_passes", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    namespace = next(c.name for c in fake.operations("apply") if c.kind == "Namespace")
    assert deletes(fake) == [("Pod", "p"), ("Queue", "q-pass"), ("Namespace", namespace)]
    assert fake.objects(kinds.NAMESPACE) == fake.objects(kinds.QUEUE) == fake.objects(kinds.POD) == []
    applied_ns = next(c.detail for c in fake.operations("apply") if c.kind == "Namespace")
    labels, annotations = applied_ns["metadata"]["labels"], applied_ns["metadata"]["annotations"]
    assert labels[MANAGED_BY] == "kai-conformance" and labels[RUN_LABEL] == "run-1"
    assert annotations[TEST_ID_ANNOTATION] == "test_ws.py::test_passes"
    assert labels[CASE_LABEL] == case_label_value("test_ws.py::test_passes")


def test_a_failing_test_leaves_diagnostics_then_cleans_up(pytester: pytest.Pytester, fake: FakeKube) -> None:
    result = pytester.runpytest_inprocess("-k", "test_fails", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    diagnostics = next(pytester.path.parent.glob("**/report/diagnostics/test_ws.py__test_fails"))
    names = sorted(p.name for p in diagnostics.iterdir())
    assert {"events.txt", "pods.txt", "podgroups.yaml", "queues.yaml", "gpus.txt", "logs-kai-scheduler.txt"} <= set(
        names
    )
    assert "p " in (diagnostics / "pods.txt").read_text()
    assert "q-fail" in (diagnostics / "queues.yaml").read_text()
    assert fake.objects(kinds.NAMESPACE) == fake.objects(kinds.QUEUE) == []


def test_ctrl_c_still_removes_what_the_test_made(pytester: pytest.Pytester, fake: FakeKube) -> None:
    result = pytester.runpytest_inprocess("-k", "test_interrupted", "-p", "no:cacheprovider", no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert fake.objects(kinds.NAMESPACE) == fake.objects(kinds.QUEUE) == []


def test_keep_namespaces_keeps_a_failed_tests_objects_labelled(pytester: pytest.Pytester, fake: FakeKube) -> None:
    result = pytester.runpytest_inprocess("-k", "test_fails", "--keep-namespaces", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    (namespace,) = fake.objects(kinds.NAMESPACE)
    assert namespace["metadata"]["labels"]["kai-conformance/kept"] == "true"
    assert [q["metadata"]["name"] for q in fake.objects(kinds.QUEUE)] == ["q-fail"]


@pytest.mark.usefixtures("fast_polling")
def test_a_cleanup_that_cannot_finish_is_an_error_naming_what_is_stuck(
    pytester: pytest.Pytester, fake: FakeKube
) -> None:
    fake.fail("delete", 500, kind="Queue", times=10_000, message="webhook unavailable")
    result = pytester.runpytest_inprocess("-k", "test_passes", "--timeout-scale", "0.002", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*cleanup of test_ws.py::test_passes failed:*", "*removal of Queue q-pass*"])
    assert fake.objects(kinds.NAMESPACE) == []  # the rest was still removed


@pytest.mark.usefixtures("fast_polling")
def test_the_jobs_of_a_namespace_are_gone_before_it_is_deleted(pytester: pytest.Pytester, fake: FakeKube) -> None:
    """Real kind: a namespace deleted while a Job still owned a Failed pod stayed Terminating, because the Job
    controller keeps the pod's tracking finalizer until a replacement exists and a terminating namespace takes none.
    The Job here stays a few API calls after its deletion (its controller's finalizer), as the GC and the Job
    controller take their time; the namespace must not be deleted before it is gone."""
    at_namespace_delete: list[list[str]] = []

    def job_controller(kube: FakeKube, call) -> None:
        for key, obj in list(kube.store.items()):
            meta = obj["metadata"]
            if obj["kind"] == "Job" and not meta.get("deletionTimestamp"):
                meta["finalizers"] = ["kai-conformance.test/slow-controller"]
            elif obj["kind"] == "Job":
                meta["deletionTimestamp"] += "."  # counts the calls since the deletion in the timestamp's tail
                if meta["deletionTimestamp"].endswith("...."):
                    kube.store.pop(key)
        if call.operation == "delete" and call.kind == "Namespace":
            at_namespace_delete.append([o["metadata"]["name"] for o in kube.stored(kinds.JOB)])

    fake.reactors.append(job_controller)
    pytester.makepyfile(
        test_job="""
JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"template": {"spec": {}}}}

def test_a_job(workspace):
    workspace.apply(JOB)
"""
    )
    result = pytester.runpytest_inprocess("test_job.py", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert at_namespace_delete == [[]]
    assert fake.objects(kinds.JOB) == [] and fake.objects(kinds.NAMESPACE) == []


# ------------------------------------------------------------------------------ Trainer's cache behind the API
def _workspace(fake: FakeKube):
    from kai_conformance.fixtures.removal.cleanup import CleanupStack
    from kai_conformance.fixtures.waits import TimeoutPolicy
    from kai_conformance.fixtures.workspace import Workspace

    workspace = Workspace(fake, "run", "suites/test_x.py::case", "ns", TimeoutPolicy(scale=0.01), CleanupStack("case"))
    workspace.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}})
    return workspace


def _trainjob(runtime: str) -> dict:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "tj"},
            "spec": {"runtimeRef": {"name": runtime, "apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime"}}}  # fmt: skip


REFUSED = (
    'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: spec.runtimeRef: Invalid value: '
    '{"name":"rt"}: TrainingRuntime.trainer.kubeflow.org "rt" not found: specified trainingRuntime must be created '
    "before the TrainJob is created"
)


def test_a_trainjob_is_applied_again_while_trainers_cache_has_not_seen_the_runtime_the_test_just_made(
    fast_polling,
) -> None:
    """Seen on real kind under -n 2: Trainer's validator reads runtimes from its cache, which trails the API."""
    fake = FakeKube()
    workspace = _workspace(fake)
    workspace.apply({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime", "metadata": {"name": "rt"},
                     "spec": {}})  # fmt: skip
    fake.fail("apply", 403, kind="TrainJob", times=2, message=REFUSED)
    stored = workspace.apply(_trainjob("rt"))
    assert stored["metadata"]["name"] == "tj" and fake.find(kinds.TRAIN_JOB, "tj", "ns") is not None


def test_a_trainjob_naming_a_runtime_the_test_did_not_make_is_refused_at_once() -> None:
    from kai_conformance.fixtures import errors

    fake = FakeKube()
    workspace = _workspace(fake)
    fake.fail("apply", 403, kind="TrainJob", times=1, message=REFUSED)
    with pytest.raises(errors.Forbidden, match="must be created before the TrainJob"):
        workspace.apply(_trainjob("rt"))


# ------------------------------------------------------------------------ teardown budgets (fixtures/removal/teardown.py)
SLOW_JOBS = """
def test_many_jobs(workspace, kube):
    for index in range({count}):
        kube.put({{"apiVersion": "batch/v1", "kind": "Job", "metadata": {{
            "name": f"j{{index}}", "namespace": workspace.namespace, "finalizers": ["kai-conformance.test/gc"]}}}})
"""


def slow_garbage_collector(kube: FakeKube, call) -> None:
    """A garbage collector far slower than the teardown's budget, driven by events, not by time: each look at a
    namespace's Jobs finds one more deleted Job gone. A wait of budget B polls at most B / POLL_INTERVAL + 1 times,
    so however fast or slow the machine, it sees some go and never all."""
    if call.operation == "list" and call.kind == "Job":
        deleted = [
            key for key, o in kube.store.items() if o["kind"] == "Job" and o["metadata"].get("deletionTimestamp")
        ]
        if deleted:
            kube.store.pop(deleted[0])


@pytest.mark.usefixtures("fast_polling")
def test_a_teardown_that_overruns_while_its_jobs_still_go_keeps_the_cases_verdict(
    pytester: pytest.Pytester, fake: FakeKube
) -> None:
    """Real kind, 300 fake nodes: a case whose verdicts all held ended in error because its Jobs took longer to go
    than a fixed 120 s. A slow deletion is noted, not a failure: the case passes, its namespace still goes, and the
    note says how many were left and how fast they went."""
    fake.reactors.append(slow_garbage_collector)
    pytester.makepyfile(test_slow=SLOW_JOBS.format(count=300))
    result = pytester.runpytest_inprocess(
        "test_slow.py", "--timeout-scale", "0.002", "-p", "no:cacheprovider", "--junitxml", "junit.xml"
    )
    result.assert_outcomes(passed=1)
    junit = (pytester.path / "junit.xml").read_text()
    assert 'name="teardown-overrun"' in junit and " of 300 left, going at " in junit
    assert "(300 Jobs; 5/s allowed); still going" in junit
    deletes = [(c.operation, c.kind) for c in fake.calls if c.operation.startswith("delete")]
    # 300 Jobs are more than one collection delete is trusted with (teardown.COLLECTION_LIMIT): one by one
    assert deletes == [("deletecollection", "TrainJob"), ("deletecollection", "JobSet"), *[("delete", "Job")] * 300,
                       ("delete", "Namespace")]  # fmt: skip
    assert fake.objects(kinds.NAMESPACE) == []


def lagging_jobset_controller(remake: int):
    """A JobSet controller whose cache lags minutes behind (1,000 fake nodes on kind): after the teardown's collection
    delete of the Jobs it makes ``remake`` of them again, one at each of the next looks, for JobSets already gone."""
    made: list[str] = []

    def react(kube: FakeKube, call) -> None:
        deleted = any(c.operation == "deletecollection" and c.kind == "Job" for c in kube.calls)
        if call.operation == "list" and call.kind == "Job" and deleted and len(made) < remake:
            namespace = next(o["metadata"]["name"] for o in kube.objects(kinds.NAMESPACE))
            made.append(f"late{len(made)}")
            kube.put({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": made[-1], "namespace": namespace}})

    return react


@pytest.mark.usefixtures("fast_polling")
def test_jobs_a_lagging_controller_makes_again_during_the_teardown_are_deleted_again(
    pytester: pytest.Pytester, fake: FakeKube
) -> None:
    """Real kind, 1,000 fake nodes: after the collection deletes, the Jobs left grew (609 → 786) as the JobSet
    controller, minutes behind, made Jobs for JobSets already gone. More left than at the look before: delete again."""
    fake.reactors.append(lagging_jobset_controller(remake=2))
    pytester.makepyfile(
        test_lagging=SLOW_JOBS.replace(', "finalizers": ["kai-conformance.test/gc"]', "").format(count=3)
    )
    # The budget only bounds a stuck removal (it ends when the Jobs are gone): room for 3 looks on a busy machine.
    result = pytester.runpytest_inprocess("test_lagging.py", "--timeout-scale", "0.05", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    job_deletes = [c for c in fake.calls if c.operation == "deletecollection" and c.kind == "Job"]
    # the teardown's; then the first look finds late0 (fewer than the 3 Jobs there were), the next late0 and late1:
    # more than the look before, so every workload kind is deleted again, and the look after finds none
    assert len(job_deletes) == 2
    assert fake.objects(kinds.JOB) == [] and fake.objects(kinds.NAMESPACE) == []


@pytest.mark.usefixtures("fast_polling")
def test_a_job_that_never_goes_is_an_error_naming_it(pytester: pytest.Pytester, fake: FakeKube) -> None:
    """The other side of the rule: a Job held by a finalizer nobody removes is a real leftover, not a slow one."""
    pytester.makepyfile(test_stuck=SLOW_JOBS.format(count=1))
    result = pytester.runpytest_inprocess("test_stuck.py", "--timeout-scale", "0.002", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*cleanup of test_stuck.py::test_many_jobs failed:*",
                                 "*the Jobs of namespace kc-test-many-jobs-* to be gone: not reached within*",
                                 "*1 of 1 left, going at 0.0/s: Job kc-test-many-jobs-*/j0*", "*none went in*stuck*"])  # fmt: skip
    assert "overran" not in result.stdout.str()
    assert fake.objects(kinds.NAMESPACE) == []  # the namespace still goes


def test_the_budget_grows_with_the_work_and_never_below_the_cleanup_budget() -> None:
    from kai_conformance.fixtures.removal.teardown import REMOVAL_RATE, removal_budget
    from kai_conformance.fixtures.waits import TimeoutPolicy

    assert removal_budget(TimeoutPolicy(), 0) == 120
    assert removal_budget(TimeoutPolicy(), 3_150) == 120 + 3_150 / REMOVAL_RATE  # issue 34's overload: 750 s
    assert removal_budget(TimeoutPolicy(scale=2), 100) == 2 * (120 + 100 / REMOVAL_RATE)


def cancelled_after(fake: FakeKube, per_request: int) -> None:
    """The API server deletes a collection one object at a time within the request; on real kind at 1,000 fake nodes
    the client's read timeout cancelled each collection delete of 1,116 TrainJobs after about 330. Here each one
    deletes ``per_request`` and the client sees the timeout."""
    deleting = fake._delete_collection

    def cancelled(kind, namespace, labels, propagation):
        stored = [o["metadata"]["name"] for o in fake.stored(kind, namespace)]
        if len(stored) <= per_request:
            return deleting(kind, namespace, labels, propagation)
        for name in stored[:per_request]:
            fake._remove(kind, namespace, name)
        raise errors.Unreachable(f"delete {kind.kind} objects in {namespace}", 0, "Unreachable", "Read timed out.")

    fake._delete_collection = cancelled  # type: ignore[method-assign]


def test_a_collection_larger_than_one_delete_is_trusted_with_goes_object_by_object(fake: FakeKube) -> None:
    """A TrainJob a cancelled collection delete left behind has its JobSet made again by Trainer (real kind, 1,000
    fake nodes: 790 of 1,116 TrainJobs left, JobSets 670 → 639 → 668 while the teardown re-sent its deletes). More
    than teardown.COLLECTION_LIMIT objects of a kind are deleted one by one, teardown.IN_FLIGHT at once."""
    from kai_conformance.fixtures.removal import teardown

    namespace = "kc-test-overload"
    fake.put(stamp({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}, "run"))
    for index in range(teardown.COLLECTION_LIMIT + 50):
        trainjob = builders.trainjob(f"t{index}")
        fake.put({**trainjob, "metadata": {**trainjob["metadata"], "namespace": namespace}})
    cancelled_after(fake, per_request=30)
    counted = teardown.count_workloads(fake, [namespace])
    assert teardown.delete_workloads(fake, namespace, counted) == []
    assert fake.objects(kinds.TRAIN_JOB, namespace) == []
    deletes = Counter((c.operation, c.kind) for c in fake.calls if c.operation.startswith("delete"))
    assert deletes == {("delete", "TrainJob"): 150, ("deletecollection", "JobSet"): 1, ("deletecollection", "Job"): 1}
