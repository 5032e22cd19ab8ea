"""The end-of-run check names everything this run's cases created and did not remove."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kai_conformance.fixtures import waits
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.ownership import stamp
from kai_conformance.fixtures.plugin import session
from kai_conformance.fixtures.plugin.session import find_leftovers, kept_namespaces
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


def test_a_namespace_whose_events_keep_going_after_its_pods_is_waited_for_and_named_when_they_stall(
    fake: FakeKube,
) -> None:
    """Real kind, 1,000 fake nodes: the burst's namespace had no pods left, yet stayed 3 min more while the namespace
    controller deleted its thousands of events (each collection delete cut off by the API server's request timeout).
    Counting only pods, the run's end called it left behind. Events that go are progress; events that stall are not,
    and the leftover says what the namespace controller reported."""
    fake.put(case_object("Namespace", "kc-burst"))
    for index in range(3):
        fake.put({"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"e{index}", "namespace": "kc-burst"}})

    def one_event_per_look_at_them(kube: FakeKube, call) -> None:
        """Driven by events, not time: each count of the namespace's events (one per budget) finds one fewer."""
        events = [key for key in kube.store if key[1] == "Event" and key[2] == "kc-burst"]
        if call.operation == "list" and call.kind == "Event" and events:
            kube.store.pop(events[0])
        if not events:
            kube.store.pop(("v1", "Namespace", None, "kc-burst"), None)

    fake.reactors.append(one_event_per_look_at_them)
    assert find_leftovers(fake, "run-1", timeout=0.05) == []

    fake.reactors.clear()
    stuck = case_object("Namespace", "kc-stuck")
    stuck["status"] = {"phase": "Terminating", "conditions": [
        {"type": "NamespaceDeletionContentFailure", "status": "True", "message": "Failed to delete all resource types, 1 remaining"},
        {"type": "NamespaceContentRemaining", "status": "False", "message": "All content successfully removed"},
    ]}  # fmt: skip
    fake.put(stuck)
    fake.put({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "kc-stuck"}})
    assert find_leftovers(fake, "run-1", timeout=0.05) == [
        "Namespace kc-stuck (NamespaceDeletionContentFailure: Failed to delete all resource types, 1 remaining; "
        "1 event(s) still in it)"
    ]


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
    from kai_conformance.fixtures.plugin.session import end_budget
    from kai_conformance.fixtures.removal.teardown import REMOVAL_RATE
    from kai_conformance.fixtures.waits import TimeoutPolicy

    assert end_budget(fake, "run-1", TimeoutPolicy()) == 120
    fake.put(case_object("Namespace", "kc-burst"))
    fake.put(case_object("Namespace", "kc-kept", **{"kai-conformance/kept": "true"}))
    for namespace in ("kc-burst", "kc-kept"):
        for index in range(10):
            fake.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{index}", "namespace": namespace}})
    assert end_budget(fake, "run-1", TimeoutPolicy()) == 120 + 10 / REMOVAL_RATE  # the kept namespace stays


def end_of_run(fake: FakeKube, monkeypatch: pytest.MonkeyPatch, exitstatus: int) -> tuple[SimpleNamespace, list]:
    """The end-of-run hook of a started run on ``fake``'s cluster (no real cluster, no budget to wait out)."""
    from kai_conformance.fixtures import progress
    from kai_conformance.fixtures.plugin import session
    from kai_conformance.fixtures.plugin.options import SETTINGS_KEY
    from kai_conformance.fixtures.removal import cleanup

    config = SimpleNamespace(stash=pytest.Stash())
    config.stash[SETTINGS_KEY] = SimpleNamespace(timeouts=None)  # type: ignore[assignment]
    monkeypatch.setattr(session, "_ran_cases", lambda config: True)
    monkeypatch.setattr(session, "run_context", lambda config: SimpleNamespace(run_id="run-1", state_dir=Path("s")))
    monkeypatch.setattr(session.ClusterState, "load", lambda state_dir: SimpleNamespace(kubeconfig="k", context="c"))
    monkeypatch.setattr(session, "ClusterKube", lambda kubeconfig, context: fake)
    monkeypatch.setattr(session, "end_budget", lambda kube, run_id, timeouts: 0.05)
    monkeypatch.setattr(cleanup, "finish_interrupted", lambda kube, run_id, timeouts: None)
    said: list[str] = []
    progress.set_sink(said.append)
    try:
        finished = SimpleNamespace(config=config, exitstatus=exitstatus)
        session.pytest_sessionfinish(finished)  # type: ignore[arg-type]
    finally:
        progress.set_sink(None)
    return finished, said


@pytest.mark.parametrize(
    ("exitstatus", "leftover", "expected"),
    [
        (pytest.ExitCode.OK, True, pytest.ExitCode.TESTS_FAILED),  # a green run that left objects is not green
        (pytest.ExitCode.OK, False, pytest.ExitCode.OK),
        (pytest.ExitCode.TESTS_FAILED, True, pytest.ExitCode.TESTS_FAILED),
        (pytest.ExitCode.INTERRUPTED, True, pytest.ExitCode.INTERRUPTED),  # how it ended stays what it says
    ],
)
def test_a_leftover_fails_a_run_that_would_otherwise_pass(
    fake: FakeKube, monkeypatch: pytest.MonkeyPatch, exitstatus: int, leftover: bool, expected: int
) -> None:
    from kai_conformance.fixtures.plugin.session import LEFTOVERS_KEY

    fake.put(case_object("Namespace", "kc-kept", **{"kai-conformance/kept": "true"}))  # kept: never a leftover
    if leftover:
        fake.put(case_object("Queue", "kc-q"))
    finished, said = end_of_run(fake, monkeypatch, exitstatus)
    assert finished.exitstatus == expected
    assert said == (["this run left objects behind: Queue kc-q"] if leftover else [])
    assert finished.config.stash[LEFTOVERS_KEY] == [
        *([("left behind", "Queue kc-q")] if leftover else []), ("kept for inspection", "kc-kept"),
    ]  # fmt: skip


def test_a_cluster_that_cannot_be_checked_fails_a_passing_run_too(
    fake: FakeKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not knowing whether the run cleaned up is no green: the run names why it could not check."""
    fake.fail("list", 0, message="connection refused", times=1000)
    finished, said = end_of_run(fake, monkeypatch, pytest.ExitCode.OK)
    assert finished.exitstatus == pytest.ExitCode.TESTS_FAILED
    assert len(said) == 1 and said[0].startswith("this run left objects behind: could not check for leftovers: ")
    assert "connection refused" in said[0]


def test_the_wait_for_a_terminating_namespace_says_how_many_pods_are_left_and_how_fast_they_go(
    fake: FakeKube, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "kai_conformance")
    monkeypatch.setattr(waits, "PROGRESS_EVERY", 0.0)  # a progress line at every look
    monkeypatch.setattr(session, "LEFTOVER_POD_COUNT_EVERY", 0.0)
    fake.put(case_object("Namespace", "kc-going"))
    for i in range(3):
        fake.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "kc-going"}})

    def one_pod_goes_per_look(kube: FakeKube, call: Any) -> None:
        if call.operation == "list" and call.kind == "Pod":
            pods = sorted(k for k in kube.store if k[1] == "Pod")
            if pods:
                kube.store.pop(pods[0])
            else:
                kube.store.pop(("v1", "Namespace", None, "kc-going"), None)

    fake.reactors.append(one_pod_goes_per_look)
    assert session.find_leftovers(fake, "run-1", timeout=5) == []
    lines = [r.getMessage() for r in caplog.records if "removal of everything the cases created" in r.getMessage()]
    assert re.search(r"Namespace kc-going \([23] pod\(s\) left in them\)$", lines[0]), lines  # the first count
    assert any(
        re.search(r"Namespace kc-going \([12] pod\(s\) left in them, going at [0-9.]+/s\)", line) for line in lines
    )
