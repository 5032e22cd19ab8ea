"""ClusterKube's versioned list and watch over HTTP, against the loopback API server streaming chunked watch
responses: the reflector's query, events read as they arrive, bookmarks consumed, ERROR events mapped (410 → Gone),
close() from another thread, the connection pool left usable, request counts, and an informer over HTTP."""

from __future__ import annotations

import queue
import re
import threading
import time
from pathlib import Path

import pytest

from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import WatchEvent, kinds
from kai_conformance.fixtures.kube.http import ClusterKube
from kai_conformance.fixtures.kube.informer import Informer
from tests.fakes.apiserver import Request, Stream, serve, status

PODS = "/api/v1/namespaces/ns/pods"


def pod(name: str, version: str) -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": version}}


def event(type_: str, obj: dict) -> dict:
    return {"type": type_, "object": obj}


def bookmark(version: str) -> dict:
    return event("BOOKMARK", {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": version}})


class Routes:
    """Answers in order per (method, path): each test queues what the server says next."""

    def __init__(self) -> None:
        self.answers: dict[str, list[tuple[int, object]]] = {}

    def then(self, path: str, *answers: tuple[int, object]) -> None:
        self.answers.setdefault(path, []).extend(answers)

    def __call__(self, request: Request) -> tuple[int, object]:
        key = f"{request.path}?watch" if request.query.get("watch") else request.path
        queued = self.answers.get(key)
        if not queued:
            return status(500, "InternalError", f"unexpected {request.method} {key}")
        return queued.pop(0) if len(queued) > 1 else queued[0]


@pytest.fixture
def routes() -> Routes:
    return Routes()


@pytest.fixture
def server(routes: Routes):
    with serve(routes) as api:
        yield api


@pytest.fixture
def kube(server, tmp_path: Path) -> ClusterKube:
    return ClusterKube(str(server.kubeconfig(tmp_path)), None, retries=0)


def test_versioned_list_answers_the_lists_resource_version(routes: Routes, kube: ClusterKube) -> None:
    routes.then(PODS, (200, {"kind": "PodList", "metadata": {"resourceVersion": "41"}, "items": [pod("p", "40")]}))
    items, version = kube.list_versioned(kinds.POD, "ns", labels={"a": "1"})
    assert version == "41"
    assert items == [{**pod("p", "40"), "apiVersion": "v1", "kind": "Pod"}]


def test_watch_sends_the_reflectors_query_and_reads_events_as_they_arrive(
    routes: Routes, server, kube: ClusterKube
) -> None:
    go_on = threading.Event()
    half = b'{"type": "MODIFIED", "object": {"metadata": {"name": "p", "namespace": "ns", "resourceVersion": "43"'
    routes.then(f"{PODS}?watch", (200, Stream([
        event("ADDED", pod("p", "42")),
        go_on,  # the server holds the rest back until the client has handled the first event
        bookmark("42"),
        half, b'}}}\n',
        event("DELETED", pod("p", "44")),
        bookmark("50"),
    ])))  # fmt: skip
    stream = kube.watch(kinds.POD, "ns", labels={"app": "x"}, resource_version="41", timeout_seconds=7)
    sent = server.requests[-1]
    assert sent.method == "GET" and sent.path == PODS
    assert sent.query == {"watch": ["true"], "resourceVersion": ["41"], "allowWatchBookmarks": ["true"],
                          "timeoutSeconds": ["7"], "labelSelector": ["app=x"]}  # fmt: skip
    first = next(stream)
    assert first == WatchEvent("ADDED", {**pod("p", "42"), "apiVersion": "v1", "kind": "Pod"})
    assert stream.resource_version == "42"
    go_on.set()
    rest = list(stream)
    assert [(e.type, e.obj["metadata"]["resourceVersion"]) for e in rest] == [("MODIFIED", "43"), ("DELETED", "44")]
    assert stream.resource_version == "50", "a bookmark moves the resourceVersion on and is not yielded"
    routes.then(f"{PODS}/p", (200, pod("p", "50")))
    assert kube.get(kinds.POD, "p", "ns")["metadata"]["resourceVersion"] == "50"


@pytest.mark.parametrize(
    ("code", "reason", "expected"),
    [(410, "Expired", errors.Gone), (403, "Forbidden", errors.Forbidden), (500, "InternalError", errors.ServerError)],
)
def test_an_error_event_raises_the_mapped_error(routes: Routes, kube: ClusterKube, code, reason, expected) -> None:
    message = "too old resource version: 41 (60)" if code == 410 else "no"
    routes.then(f"{PODS}?watch", (200, Stream([
        event("ADDED", pod("p", "42")),
        event("ERROR", {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
                        "reason": reason, "code": code}),
    ])))  # fmt: skip
    stream = kube.watch(kinds.POD, "ns", resource_version="41")
    assert next(stream).type == "ADDED"
    with pytest.raises(expected, match=re.escape(message)) as raised:
        next(stream)
    assert raised.value.status == code and type(raised.value) is expected


def test_a_refused_watch_request_raises_when_opened(routes: Routes, kube: ClusterKube) -> None:
    routes.then(f"{PODS}?watch", status(410, "Expired", "too old resource version: 1 (60)"))
    with pytest.raises(errors.Gone):
        kube.watch(kinds.POD, "ns", resource_version="1")
    routes.answers[f"{PODS}?watch"] = [status(403, "Forbidden", 'pods is forbidden: cannot watch resource "pods"')]
    with pytest.raises(errors.Forbidden, match="cannot watch"):
        kube.watch(kinds.POD, "ns", resource_version="1")


def test_close_from_another_thread_ends_a_quiet_stream_and_the_client_stays_usable(
    routes: Routes, kube: ClusterKube
) -> None:
    never = threading.Event()
    routes.then(f"{PODS}?watch", (200, Stream([event("ADDED", pod("p", "42")), never, event("ADDED", pod("q", "43"))])))
    routes.then(f"{PODS}/p", (200, pod("p", "42")))
    stream = kube.watch(kinds.POD, "ns", resource_version="41", timeout_seconds=60)
    assert next(stream).obj["metadata"]["name"] == "p"
    threading.Timer(0.05, stream.close).start()
    started = time.monotonic()
    assert list(stream) == [], "nothing after close(), not even what the server sends later"
    assert time.monotonic() - started < 30  # half the watch's 60 s: close() ended it
    never.set()
    assert kube.get(kinds.POD, "p", "ns")["metadata"]["name"] == "p", "no later request reads the old stream"


def test_an_undecodable_event_is_a_server_error(routes: Routes, kube: ClusterKube) -> None:
    routes.then(f"{PODS}?watch", (200, Stream([event("ADDED", pod("p", "42")), b"not json\n"])))
    stream = kube.watch(kinds.POD, "ns", resource_version="41")
    next(stream)
    with pytest.raises(errors.ServerError, match="undecodable watch event"):
        next(stream)


def test_requests_are_counted_by_verb_and_resource(routes: Routes, kube: ClusterKube) -> None:
    routes.then(PODS, (200, {"metadata": {"resourceVersion": "41"}, "items": []}))
    routes.then(f"{PODS}?watch", (200, Stream([])))
    routes.then(f"{PODS}/p", (200, pod("p", "41")))
    _, version = kube.list_versioned(kinds.POD, "ns")
    assert list(kube.watch(kinds.POD, "ns", resource_version=version)) == []
    kube.get(kinds.POD, "p", "ns")
    assert kube.requests.snapshot() == {("list", "pods"): 1, ("watch", "pods"): 1, ("get", "pods"): 1}


def test_an_informer_over_http_relists_after_gone_and_delivers_the_difference(
    routes: Routes, server, kube: ClusterKube
) -> None:
    routes.then(
        PODS,
        (200, {"metadata": {"resourceVersion": "41"}, "items": [pod("kept", "40"), pod("removed", "40")]}),
        (200, {"metadata": {"resourceVersion": "60"}, "items": [pod("kept", "45"), pod("added", "55")]}),
    )
    gone = event("ERROR", {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"})
    hold = threading.Event()
    routes.then(
        f"{PODS}?watch",
        (200, Stream([event("MODIFIED", pod("kept", "45"))])),  # the server ends the stream: reconnect from 45
        (200, Stream([gone])),
        (200, Stream([hold])),
    )
    seen: queue.Queue[tuple[str, str, str]] = queue.Queue()
    informer = Informer(kube, kinds.POD, namespace="ns", backoff=0.01)
    informer.add_handler(
        lambda e, _: seen.put((e.type, e.obj["metadata"]["name"], e.obj["metadata"]["resourceVersion"]))
    )
    informer.start()
    try:
        informer.wait_synced(5)
        got = [seen.get(timeout=5) for _ in range(5)]
        assert sorted(got[:2]) == [("ADDED", "kept", "40"), ("ADDED", "removed", "40")]
        assert got[2] == ("MODIFIED", "kept", "45")
        assert sorted(got[3:]) == [("ADDED", "added", "55"), ("DELETED", "removed", "40")]
        assert sorted(o["metadata"]["name"] for o in informer.objects()) == ["added", "kept"]
        deadline = time.monotonic() + 5
        while informer.watches < 3 and time.monotonic() < deadline:
            hold.wait(0.01)  # a short pause between looks at the third watch being opened
    finally:
        informer.stop()
        hold.set()
    assert informer.failure() is None and seen.empty()
    assert informer.lists == 2 and informer.watches == 3
    watches = [r.query["resourceVersion"][0] for r in server.requests if r.query.get("watch")]
    assert watches == ["41", "45", "60"], "resume from the last event seen; after Gone, from the re-list"
    assert kube.requests.snapshot() == {("list", "pods"): 2, ("watch", "pods"): 3}


def test_an_informer_over_http_on_the_bridged_in_memory_api_server(tmp_path: Path) -> None:
    """The same informer, ClusterKube and HTTP streams against the fake the plugin's end-to-end runs use."""
    from kai_conformance.fixtures.ownership import stamp
    from tests.fakes.bridge import route_to
    from tests.fakes.kube import FakeKube

    fake = FakeKube()
    fake.put(stamp({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}, "r1"))
    fake.put({**pod("before", "0"), "apiVersion": "v1", "kind": "Pod"})
    seen: queue.Queue[tuple[str, str]] = queue.Queue()
    with serve(route_to(fake)) as api:
        kube = ClusterKube(str(api.kubeconfig(tmp_path)), None, retries=0)
        informer = Informer(kube, kinds.POD, namespace="ns", backoff=0.01)
        informer.add_handler(lambda e, _: seen.put((e.type, e.obj["metadata"]["name"])))
        informer.start()
        try:
            informer.wait_synced(5)
            assert seen.get(timeout=5) == ("ADDED", "before")
            fake.put({**pod("after", "0"), "apiVersion": "v1", "kind": "Pod"})
            fake._delete(kinds.POD, "ns", "before", "Background")
            assert [seen.get(timeout=5) for _ in range(2)] == [("ADDED", "after"), ("DELETED", "before")]
            fake.compact()  # the open stream ends with an ERROR event (410): the informer re-lists
            fake.put({**pod("later", "0"), "apiVersion": "v1", "kind": "Pod"})
            assert seen.get(timeout=5) == ("ADDED", "later")
        finally:
            informer.stop()
    assert informer.failure() is None and informer.lists == 2
