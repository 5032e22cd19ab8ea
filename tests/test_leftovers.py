"""The end-of-run check names everything this run's cases created and did not remove."""

from __future__ import annotations

from kai_conformance.fixtures import kinds
from kai_conformance.fixtures.ownership import stamp
from kai_conformance.fixtures.session import find_leftovers, kept_namespaces
from tests.fakes.kube import FakeKube


def case_object(kind: str, name: str, run: str = "run-1", **labels: str) -> dict:
    api = {"Namespace": "v1", "Queue": "scheduling.run.ai/v2", "PriorityClass": "scheduling.k8s.io/v1"}[kind]
    obj = stamp({"apiVersion": api, "kind": kind, "metadata": {"name": name}}, run, "suites/t.py::t")
    obj["metadata"]["labels"].update(labels)
    return obj


def test_a_clean_run_has_no_leftovers(fake: FakeKube) -> None:
    fake.put(case_object("Namespace", "other-run", run="run-0"))
    fake.put(stamp({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "stack"}}, "run-1"))
    assert find_leftovers(fake, "run-1", timeout=0.05) == []


def test_leftovers_are_named_after_waiting_for_termination(fake: FakeKube) -> None:
    fake.put(case_object("Namespace", "kc-stuck"))
    fake.put(case_object("Queue", "kc-q"))
    fake.put(case_object("Namespace", "kc-kept", **{"kai-conformance/kept": "true"}))
    assert find_leftovers(fake, "run-1", timeout=0.05) == ["Namespace kc-stuck", "Queue kc-q"]
    assert kept_namespaces(fake, "run-1") == ["kc-kept"]


def test_terminating_objects_that_go_away_during_the_wait_are_not_leftovers(fake: FakeKube) -> None:
    fake.put(case_object("Namespace", "kc-going"))
    fake.reactors.append(
        lambda kube, call: kube.store.pop(("v1", "Namespace", None, "kc-going"), None)
        if len(kube.operations("list")) > 3 else None
    )  # fmt: skip
    assert find_leftovers(fake, "run-1", timeout=2) == []


def test_kinds_whose_crd_is_absent_are_skipped(fake: FakeKube) -> None:
    fake.unserve(kinds.QUEUE)
    fake.put(case_object("Namespace", "kc-left"))
    assert find_leftovers(fake, "run-1", timeout=0.05) == ["Namespace kc-left"]


def test_a_namespace_whose_pods_keep_going_is_waited_for_and_one_that_stalls_is_not(fake: FakeKube) -> None:
    """A scale burst's namespace takes longer than one budget to empty: the check waits on while its pods fall."""
    fake.put(case_object("Namespace", "kc-burst"))
    for index in range(3):
        fake.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{index}", "namespace": "kc-burst"}})

    def one_pod_per_budget(kube: FakeKube, call) -> None:
        namespace_lists = [c for c in kube.operations("list") if c.kind == "Namespace"]
        pods = [key for key in kube.store if key[1] == "Pod" and key[2] == "kc-burst"]
        if len(namespace_lists) % 4 == 0 and pods:
            kube.store.pop(pods[0])
        if not pods:
            kube.store.pop(("v1", "Namespace", None, "kc-burst"), None)

    fake.reactors.append(one_pod_per_budget)
    assert find_leftovers(fake, "run-1", timeout=0.05) == []

    fake.reactors.clear()
    fake.put(case_object("Namespace", "kc-stuck"))
    fake.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "kc-stuck"}})
    assert find_leftovers(fake, "run-1", timeout=0.05) == ["Namespace kc-stuck"]


def test_a_leftover_namespace_is_named_with_what_holds_it(fake: FakeKube) -> None:
    """What a slow teardown hands on to the run's end and does not go is an error naming the objects."""
    fake.put(case_object("Namespace", "kc-held"))
    fake.put({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "kc-held"}})
    fake.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "kc-held",
                                                              "finalizers": ["batch.kubernetes.io/job-tracking"]}})  # fmt: skip
    fake.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "free", "namespace": "kc-held"}})
    assert find_leftovers(fake, "run-1", timeout=0.05) == [
        "Namespace kc-held (holding Job kc-held/j, Pod kc-held/p (finalizers ['batch.kubernetes.io/job-tracking']))"
    ]


def test_the_end_of_run_budget_grows_with_what_the_runs_namespaces_still_hold(fake: FakeKube) -> None:
    from kai_conformance.fixtures.session import end_budget
    from kai_conformance.fixtures.teardown import REMOVAL_RATE
    from kai_conformance.fixtures.waits import TimeoutPolicy

    assert end_budget(fake, "run-1", TimeoutPolicy()) == 120
    fake.put(case_object("Namespace", "kc-burst"))
    fake.put(case_object("Namespace", "kc-kept", **{"kai-conformance/kept": "true"}))
    for namespace in ("kc-burst", "kc-kept"):
        for index in range(10):
            fake.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{index}", "namespace": namespace}})
    assert end_budget(fake, "run-1", TimeoutPolicy()) == 120 + 10 / REMOVAL_RATE  # the kept namespace stays
