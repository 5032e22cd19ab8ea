"""Informers over the in-memory API server: the initial list as ADDED, changes as they happen, reconnects when a
stream ends, a re-list after 410 Gone that delivers what was missed, and every way observation can stop (Forbidden,
kind not served, a handler's exception, transient errors beyond the limit) reported, never silent."""

from __future__ import annotations

import queue
import time

import pytest

from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import WatchEvent, kinds
from kai_conformance.fixtures.kube.informer import Informer, Watchers
from kai_conformance.fixtures.ownership import stamp
from tests.fakes.kube import Call, FakeKube

WAIT = 5.0  # seconds a test waits for an event that must come (each arrives in milliseconds)


def owned(obj: dict) -> dict:
    return stamp(obj, "r1", "tests/x.py::test_y")


def pod(name: str, namespace: str = "a", **labels: str) -> dict:
    return owned(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels}}
    )


class Recorder:
    """A handler that queues ``(type, name, observed_at)``; ``take(n)`` waits for the next n."""

    def __init__(self) -> None:
        self.events: queue.Queue[tuple[str, str, float]] = queue.Queue()

    def __call__(self, event: WatchEvent, observed_at: float) -> None:
        self.events.put((event.type, event.obj["metadata"]["name"], observed_at))

    def take(self, count: int) -> list[tuple[str, str]]:
        return [self.events.get(timeout=WAIT)[:2] for _ in range(count)]

    def nothing_more(self) -> bool:
        return self.events.empty()


@pytest.fixture
def fake() -> FakeKube:
    kube = FakeKube()
    for name in ("a", "b", "c"):
        kube.put(owned({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}))
    return kube


@pytest.fixture
def informers():
    """Informers a test made; each is stopped at the end even when the test fails."""
    made: list[Informer] = []
    yield made
    for informer in made:
        informer.stop()


def start(fake: FakeKube, made: list[Informer], **options) -> tuple[Informer, Recorder]:
    informer = Informer(fake, kinds.POD, **{"namespace": "a", "backoff": 0.01, **options})
    recorder = Recorder()
    informer.add_handler(recorder)
    made.append(informer)
    informer.start()
    informer.wait_synced(WAIT)
    return informer, recorder


def wait_for_failure(informer: Informer) -> BaseException:
    deadline = time.monotonic() + WAIT
    while informer.failure() is None and time.monotonic() < deadline:
        informer._synced.wait(0.01)  # the informer's own event: a short pause between looks, not a state wait
    failure = informer.failure()
    assert failure is not None, f"{informer!r} kept quiet about a watch that cannot continue"
    return failure


def test_initial_list_arrives_as_added_then_changes_as_they_happen(fake: FakeKube, informers) -> None:
    fake.apply(pod("first"))
    informer, seen = start(fake, informers)
    assert seen.take(1) == [("ADDED", "first")]
    before = time.time()
    fake.apply(pod("second"))
    fake.patch(kinds.POD, "first", {"metadata": {"labels": {"x": "1"}}}, namespace="a")
    fake.delete(kinds.POD, "second", "a")
    events = [seen.events.get(timeout=WAIT) for _ in range(3)]
    assert [e[:2] for e in events] == [("ADDED", "second"), ("MODIFIED", "first"), ("DELETED", "second")]
    assert all(before <= e[2] <= time.time() for e in events), "observed_at is when the event was read"
    assert [o["metadata"]["name"] for o in informer.objects()] == ["first"]
    assert informer.objects()[0]["metadata"]["labels"]["x"] == "1"
    assert informer.failure() is None


def test_objects_answer_from_the_store_without_an_api_call(fake: FakeKube, informers) -> None:
    fake.apply(pod("p"))
    informer, _ = start(fake, informers)
    calls = len(fake.calls)
    for _ in range(100):
        assert len(informer.objects()) == 1
    assert len(fake.calls) == calls


def test_a_stream_the_server_ends_is_reopened_from_the_last_resource_version(fake: FakeKube, informers) -> None:
    informer, seen = start(fake, informers, watch_timeout=0.02)
    for index in range(3):
        fake.apply(pod(f"p{index}"))
        assert seen.take(1) == [("ADDED", f"p{index}")]
        opened = informer.watches
        deadline = time.monotonic() + WAIT
        while informer.watches == opened and time.monotonic() < deadline:  # let at least one stream end
            informer._synced.wait(0.01)
    assert informer.watches > 3 and informer.lists == 1, "reconnects resume; they never re-list"
    assert seen.nothing_more(), "no change is delivered twice across reconnects"


def test_gone_relists_and_delivers_what_the_watch_missed_as_events(fake: FakeKube, informers) -> None:
    fake.apply(pod("kept"))
    fake.apply(pod("changed"))
    fake.apply(pod("removed"))

    def while_no_watch_sees_it(kube: FakeKube, call: Call) -> None:
        """On the first watch request: change things, then the server answers 410 (the failure set below)."""
        if call.operation == "watch" and not kube.operations("watch")[:-1]:
            kube.put(pod("added"))
            kube.patch(kinds.POD, "changed", {"metadata": {"labels": {"x": "1"}}}, namespace="a")
            kube.delete(kinds.POD, "removed", "a")

    fake.reactors.append(while_no_watch_sees_it)
    fake.fail("watch", 410, times=1)
    informer, seen = start(fake, informers)
    initial = sorted(seen.take(3))
    assert initial == [("ADDED", "changed"), ("ADDED", "kept"), ("ADDED", "removed")]
    assert sorted(seen.take(3)) == [("ADDED", "added"), ("DELETED", "removed"), ("MODIFIED", "changed")]
    assert informer.lists == 2
    assert sorted(o["metadata"]["name"] for o in informer.objects()) == ["added", "changed", "kept"]
    fake.apply(pod("after"))
    assert seen.take(1) == [("ADDED", "after")], "after the re-list the informer watches again"
    assert seen.nothing_more() and informer.failure() is None


def test_an_open_watch_told_gone_relists_and_carries_on(fake: FakeKube, informers) -> None:
    informer, seen = start(fake, informers)
    fake.apply(pod("p"))
    assert seen.take(1) == [("ADDED", "p")]
    fake.compact()
    fake.apply(pod("q"))
    assert seen.take(1) == [("ADDED", "q")]
    assert informer.lists == 2 and seen.nothing_more()


def test_a_forbidden_watch_is_reported_not_silent(fake: FakeKube, informers) -> None:
    fake.fail("watch", 403, kind="Pod", message='pods is forbidden: User "x" cannot watch resource "pods"')
    informer, _ = start(fake, informers)
    failure = wait_for_failure(informer)
    assert isinstance(failure, errors.Forbidden) and "cannot watch" in str(failure)
    with pytest.raises(errors.Forbidden):
        informer.check()


def test_a_forbidden_or_unserved_list_fails_wait_synced(fake: FakeKube) -> None:
    fake.fail("list", 403, kind="Pod")
    forbidden = Informer(fake, kinds.POD, namespace="a")
    forbidden.start()
    with pytest.raises(errors.Forbidden):
        forbidden.wait_synced(WAIT)
    fake.unserve(kinds.POD_GROUP)
    unserved = Informer(fake, kinds.POD_GROUP, namespace="a")
    unserved.start()
    with pytest.raises(errors.KindNotServed, match="CRD"):
        unserved.wait_synced(WAIT)


def test_transient_errors_are_retried_then_reported_once_they_last(fake: FakeKube, informers) -> None:
    fake.fail("watch", 500, times=2)
    informer, seen = start(fake, informers)
    fake.apply(pod("p"))
    assert seen.take(1) == [("ADDED", "p")]
    assert informer.failure() is None
    fake.fail("watch", 503, times=10_000)
    stubborn, _ = start(fake, informers, give_up_after=0.05)
    assert isinstance(wait_for_failure(stubborn), errors.ServerError)


def test_a_handler_that_raises_stops_the_informer_with_its_exception(fake: FakeKube, informers) -> None:
    def broken(event: WatchEvent, observed_at: float) -> None:
        if event.obj["metadata"]["name"] == "bad":
            raise ValueError("handler bug")

    informer, _ = start(fake, informers)
    informer.add_handler(broken)
    fake.apply(pod("bad"))
    failure = wait_for_failure(informer)
    assert isinstance(failure, ValueError) and str(failure) == "handler bug"


def test_a_late_handler_gets_what_the_informer_holds_as_added(fake: FakeKube, informers) -> None:
    fake.apply(pod("p"))
    informer, _ = start(fake, informers)
    late = Recorder()
    informer.add_handler(late)
    assert late.take(1) == [("ADDED", "p")]


def test_stop_ends_a_waiting_watch_at_once(fake: FakeKube) -> None:
    informer = Informer(fake, kinds.POD, namespace="a", watch_timeout=300)
    informer.start()
    informer.wait_synced(WAIT)
    started = time.monotonic()
    informer.stop()
    assert time.monotonic() - started < 30  # a tenth of the watch's 300 s: ended by stop(), however busy the machine
    assert informer._thread is not None and not informer._thread.is_alive()
    assert informer.failure() is None


def test_watchers_run_one_watch_per_kind_over_a_namespace_set(fake: FakeKube) -> None:
    fake.apply(pod("in-a", "a"))
    fake.apply(pod("in-c", "c"))
    pods, groups = Recorder(), Recorder()
    with Watchers(fake, namespaces={"a", "b"}) as watchers:
        watchers.watch(kinds.POD, pods)
        watchers.watch(kinds.POD_GROUP, groups)
        watchers.wait_synced(WAIT)
        assert pods.take(1) == [("ADDED", "in-a")]
        fake.apply(pod("in-b", "b"))
        fake.apply(pod("in-c2", "c"))
        fake.apply(owned({"apiVersion": kinds.POD_GROUP.api_version, "kind": "PodGroup",
                          "metadata": {"name": "g", "namespace": "b"}}))  # fmt: skip
        assert pods.take(1) == [("ADDED", "in-b")]
        assert groups.take(1) == [("ADDED", "g")]
        assert sorted(o["metadata"]["name"] for o in watchers[kinds.POD].objects()) == ["in-a", "in-b"]
        watchers.check()
        assert watchers.failures() == {}
    assert pods.nothing_more(), "objects outside the namespace set are never delivered"
    watch_calls = fake.operations("watch")
    assert sorted(c.kind for c in watch_calls) == ["Pod", "PodGroup"], "one watch per kind, all namespaces"
    assert all(c.namespace is None for c in watch_calls)
    assert all(not i._thread.is_alive() for i in (watchers[kinds.POD], watchers[kinds.POD_GROUP]))  # type: ignore[union-attr]


def test_watchers_check_raises_a_stopped_informers_failure(fake: FakeKube) -> None:
    fake.fail("watch", 403, kind="PodGroup")
    with Watchers(fake, namespace="a") as watchers:
        watchers.watch(kinds.POD)
        groups = watchers.watch(kinds.POD_GROUP)
        watchers.wait_synced(WAIT)
        wait_for_failure(groups)
        assert list(watchers.failures()) == ["PodGroup"]
        with pytest.raises(errors.Forbidden):
            watchers.check()
