"""Watches and request counts of the API layer, through the in-memory API server: versioned lists, events after a
resourceVersion in order, selector entry/exit, blocking until a change or the timeout, 410 Gone past the kept
window, close() from another thread, and the per-verb request counts."""

from __future__ import annotations

import threading
import time

import pytest

from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import WatchEvent, kinds
from kai_conformance.fixtures.kube.apiload import RequestCounts
from kai_conformance.fixtures.ownership import stamp
from tests.fakes.kube import FakeKube


def owned(obj: dict) -> dict:
    return stamp(obj, "r1", "tests/x.py::test_y")


def pod(name: str, namespace: str = "a", **labels: str) -> dict:
    return owned(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels}}
    )


def summary(events: list[WatchEvent]) -> list[tuple[str, str]]:
    return [(e.type, e.obj["metadata"]["name"]) for e in events]


@pytest.fixture
def fake() -> FakeKube:
    kube = FakeKube()
    for name in ("a", "b"):
        kube.put(owned({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}))
    return kube


def test_watch_yields_the_changes_after_the_lists_resource_version_in_order(fake: FakeKube) -> None:
    fake.apply(pod("before"))
    items, version = fake.list_versioned(kinds.POD, "a")
    assert [p["metadata"]["name"] for p in items] == ["before"]
    assert version == str(fake.resource_version)
    fake.apply(pod("p1"))
    fake.patch(kinds.POD, "p1", {"metadata": {"labels": {"x": "1"}}}, namespace="a")
    fake.delete(kinds.POD, "before", "a")
    fake.apply(pod("elsewhere", "b"))
    with fake.watch(kinds.POD, "a", resource_version=version, timeout_seconds=0) as stream:
        events = list(stream)
    assert summary(events) == [("ADDED", "p1"), ("MODIFIED", "p1"), ("DELETED", "before")]
    versions = [int(e.obj["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions) and versions[0] > int(version)
    assert events[1].obj["metadata"]["labels"]["x"] == "1"
    # Changes the watch does not select still move its resourceVersion on (as bookmarks do on a real server).
    assert stream.resource_version == str(fake.resource_version) != str(versions[-1])


def test_an_object_leaving_or_entering_the_selector_arrives_as_deleted_or_added(fake: FakeKube) -> None:
    fake.apply(pod("p", tier="gpu"))
    _, version = fake.list_versioned(kinds.POD, "a", labels={"tier": "gpu"})
    fake.patch(kinds.POD, "p", {"metadata": {"labels": {"tier": "cpu"}}}, namespace="a")
    fake.patch(kinds.POD, "p", {"metadata": {"labels": {"tier": "gpu"}}}, namespace="a")
    events = list(fake.watch(kinds.POD, "a", labels={"tier": "gpu"}, resource_version=version, timeout_seconds=0))
    assert summary(events) == [("DELETED", "p"), ("ADDED", "p")]
    left = events[0].obj
    assert left["metadata"]["labels"]["tier"] == "gpu", "the DELETED event carries the object as it last matched"
    assert int(left["metadata"]["resourceVersion"]) < int(events[1].obj["metadata"]["resourceVersion"])


def test_a_finalizer_turns_delete_into_a_modification_then_a_deletion(fake: FakeKube) -> None:
    held = pod("held")
    held["metadata"]["finalizers"] = ["x/y"]
    fake.apply(held)
    _, version = fake.list_versioned(kinds.POD, "a")
    fake.delete(kinds.POD, "held", "a")
    fake.patch(kinds.POD, "held", {"metadata": {"finalizers": None}}, namespace="a")
    events = list(fake.watch(kinds.POD, "a", resource_version=version, timeout_seconds=0))
    assert summary(events) == [("MODIFIED", "held"), ("MODIFIED", "held"), ("DELETED", "held")]
    assert events[0].obj["metadata"]["deletionTimestamp"]


def test_a_watch_waits_for_the_next_change_and_ends_at_its_timeout(fake: FakeKube) -> None:
    _, version = fake.list_versioned(kinds.POD, "a")
    writer = threading.Timer(0.05, lambda: fake.apply(pod("late")))
    writer.start()
    started = time.monotonic()
    stream = fake.watch(kinds.POD, "a", resource_version=version, timeout_seconds=5)
    assert summary([next(stream)]) == [("ADDED", "late")]
    assert time.monotonic() - started < 4  # before the watch's 5 s timeout: the write woke it
    quiet = fake.watch(kinds.POD, "a", resource_version=stream.resource_version, timeout_seconds=0.05)  # type: ignore[arg-type]
    assert list(quiet) == []
    assert time.monotonic() - started >= 0.05


def test_close_from_another_thread_ends_a_blocked_watch_at_once(fake: FakeKube) -> None:
    _, version = fake.list_versioned(kinds.POD, "a")
    stream = fake.watch(kinds.POD, "a", resource_version=version, timeout_seconds=60)
    threading.Timer(0.05, stream.close).start()
    started = time.monotonic()
    assert list(stream) == []
    assert time.monotonic() - started < 30  # half the watch's 60 s: close() ended it


def test_a_resource_version_older_than_the_kept_window_is_gone() -> None:
    fake = FakeKube(watch_window=3)
    fake.put(owned({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}))
    _, version = fake.list_versioned(kinds.POD, "a")
    for index in range(3):
        fake.apply(pod(f"p{index}"))
    assert len(list(fake.watch(kinds.POD, "a", resource_version=version, timeout_seconds=0))) == 3
    fake.apply(pod("p3"))
    with pytest.raises(errors.Gone, match="too old resource version") as gone:
        list(fake.watch(kinds.POD, "a", resource_version=version, timeout_seconds=0))
    assert gone.value.status == 410 and isinstance(gone.value, errors.KubeError)


def test_compaction_ends_an_open_watch_with_gone(fake: FakeKube) -> None:
    _, version = fake.list_versioned(kinds.POD, "a")
    stream = fake.watch(kinds.POD, "a", resource_version=version, timeout_seconds=60)
    threading.Timer(0.05, fake.compact).start()
    with pytest.raises(errors.Gone):
        next(stream)


def test_changes_before_the_first_versioned_request_are_not_kept(fake: FakeKube) -> None:
    """The fake records changes only once someone lists with a version or watches: a watch from before is Gone."""
    early = fake.resource_version
    fake.apply(pod("p"))
    fake.list_versioned(kinds.POD, "a")
    with pytest.raises(errors.Gone):
        next(fake.watch(kinds.POD, "a", resource_version=str(early), timeout_seconds=0))


def test_watch_errors_come_from_the_call_forbidden_not_served_and_no_version(fake: FakeKube) -> None:
    fake.fail("watch", 403, kind="Pod")
    with pytest.raises(errors.Forbidden):
        fake.watch(kinds.POD, "a", resource_version="1")
    fake.unserve(kinds.POD_GROUP)
    with pytest.raises(errors.KindNotServed, match="is its CRD installed"):
        fake.watch(kinds.POD_GROUP, "a", resource_version="1")
    with pytest.raises(errors.UsageError, match="list_versioned"):
        fake.watch(kinds.POD, "a", resource_version="")


def test_every_request_is_counted_by_verb_and_resource(fake: FakeKube) -> None:
    fake.requests = RequestCounts()
    fake.apply(pod("p"))  # the ownership guard reads first: get + apply
    fake.get(kinds.POD, "p", "a")
    fake.list(kinds.POD, "a")
    _, version = fake.list_versioned(kinds.POD, "a")
    fake.watch(kinds.POD, "a", resource_version=version, timeout_seconds=0).close()
    fake.patch(kinds.POD, "p", {"status": {"phase": "Running"}}, namespace="a", subresource="status")
    fake.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "a"}})
    fake.set_logs("a", "p", "hello")
    fake.pod_logs("p", "a")
    fake.server_version()
    fake.delete(kinds.POD, "p", "a")
    assert fake.requests.snapshot() == {
        ("get", "pods"): 4,  # apply's, get, patch's and delete's guard reads
        ("apply", "pods"): 1,
        ("list", "pods"): 2,
        ("watch", "pods"): 1,
        ("patch", "pods/status"): 1,
        ("create", "configmaps"): 1,
        ("get", "pods/log"): 1,
        ("get", "/version"): 1,
        ("delete", "pods"): 1,
    }
    assert fake.requests.total() == 13
    assert fake.requests.total(exclude=["/version"]) == 12
    assert fake.requests.by_verb()["get"] == 6


def test_request_counts_are_exact_under_concurrent_counting() -> None:
    counts = RequestCounts()
    threads = [threading.Thread(target=lambda: [counts.add("get", "pods") for _ in range(2000)]) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counts.snapshot() == {("get", "pods"): 8000}
