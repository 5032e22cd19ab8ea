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
