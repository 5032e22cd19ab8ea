"""The real API client (ClusterKube) speaks the right HTTP: checked against a loopback fake API server."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.kube.http import ClusterKube
from kai_conformance.fixtures.ownership import FIELD_MANAGER, stamp
from tests.fakes.apiserver import Request, serve, status

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "labels": {}}}


def route(request: Request) -> tuple[int, object]:
    path = request.path
    if path == "/version":
        return 200, {"gitVersion": "v1.35.0"}
    if path == "/api/v1/namespaces/ns/pods/p/log":
        return 200, b"line1\nline2\n"
    if path == "/api/v1/namespaces/ns/pods/p":
        return 200, POD
    if path == "/api/v1/namespaces/ns/pods/gone":
        return status(404, "NotFound", 'pods "gone" not found', name="gone")
    if path == "/api/v1/namespaces/ns":
        return 200, stamp({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}, "run")
    if path == "/api/v1/namespaces/theirs":
        return 200, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "theirs"}}
    if path == "/apis/batch/v1/namespaces/ns/jobs" and request.method == "DELETE":
        return 200, {"kind": "Status", "status": "Success"}
    if path.startswith("/apis/trainer.kubeflow.org/"):
        return status(404, "NotFound", "the server could not find the requested resource")
    if path == "/api/v1/namespaces/ns/pods":
        return 200, {"kind": "PodList", "items": [{"metadata": {"name": "p"}}]}
    if path == "/apis/scheduling.run.ai/v2/queues" and request.body["metadata"]["name"] == "denied":
        return status(403, "Forbidden", 'admission webhook "queue.kai" denied the request: resources must be specified')
    if path == "/apis/scheduling.run.ai/v2/queues/flaky":
        return status(503, "ServiceUnavailable", "etcd leader changed")
    if path.startswith("/apis/scheduling.run.ai/v2/queues/") and request.method == "GET":
        return status(404, "NotFound", "queue not found", name=path.rsplit("/", 1)[1])
    if path.startswith("/apis/scheduling.run.ai/v2/queues"):
        return 200, request.body or {}
    if path == "/apis/authorization.k8s.io/v1/subjectaccessreviews":
        return 201, {**request.body, "status": {"allowed": True, "reason": "RBAC: allowed by ClusterRole"}}
    if path == "/apis/example.com/v1":
        return 200, {"resources": [{"name": "widgets", "kind": "Widget", "namespaced": True},
                                   {"name": "widgets/status", "kind": "Widget", "namespaced": True}]}  # fmt: skip
    if path.startswith("/apis/example.com/v1/namespaces/ns/widgets"):
        return 200, request.body or {}
    return status(500, "InternalError", f"unexpected {request.method} {path}")


@pytest.fixture
def server():
    with serve(route) as api:
        yield api


@pytest.fixture
def kube(server, tmp_path: Path) -> ClusterKube:
    return ClusterKube(str(server.kubeconfig(tmp_path)), None, retries=0)


def test_get_and_list_use_core_paths_selectors_and_bearer_token(server, kube: ClusterKube) -> None:
    assert kube.get(kinds.POD, "p", "ns")["metadata"]["name"] == "p"
    items = kube.list(kinds.POD, "ns", labels={"a": "1"}, fields="spec.nodeName=n1")
    assert items == [{"metadata": {"name": "p"}, "apiVersion": "v1", "kind": "Pod"}]
    listed = server.requests[-1]
    assert listed.query == {"labelSelector": ["a=1"], "fieldSelector": ["spec.nodeName=n1"]}
    assert listed.headers["authorization"] == "Bearer t0ken"


def test_apply_is_server_side_apply_with_the_suite_field_manager(server, kube: ClusterKube) -> None:
    queue = stamp({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "q1"},
                   "spec": {"resources": {}}}, "run")  # fmt: skip
    kube.apply(queue, dry_run=True, allow_foreign=True)
    request = server.requests[-1]
    assert request.method == "PATCH"
    assert request.path == "/apis/scheduling.run.ai/v2/queues/q1"
    assert request.headers["content-type"] == "application/apply-patch+yaml"
    assert request.query == {"fieldManager": [FIELD_MANAGER], "force": ["true"], "dryRun": ["All"]}
    assert request.body == queue


def test_guarded_apply_reads_the_current_object_first(server, kube: ClusterKube) -> None:
    queue = stamp({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "q2"}}, "run")
    kube.apply(queue)
    assert [(r.method, r.path) for r in server.requests] == [
        ("GET", "/apis/scheduling.run.ai/v2/queues/q2"),
        ("PATCH", "/apis/scheduling.run.ai/v2/queues/q2"),
    ]


def test_status_patch_delete_and_dry_run_create(server, kube: ClusterKube) -> None:
    kube.patch(kinds.QUEUE, "q3", {"status": {}}, subresource="status", allow_foreign=True)
    patch = server.requests[-1]
    assert (patch.path, patch.headers["content-type"]) == (
        "/apis/scheduling.run.ai/v2/queues/q3/status",
        "application/merge-patch+json",
    )
    kube.delete(kinds.QUEUE, "q3", propagation="Foreground", allow_foreign=True)
    delete = server.requests[-1]
    assert (delete.method, delete.body["propagationPolicy"]) == ("DELETE", "Foreground")
    kube.create({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "probe"}}, dry_run=True)
    create = server.requests[-1]
    assert (create.method, create.path, create.query["dryRun"]) == (
        "POST",
        "/apis/scheduling.run.ai/v2/queues",
        ["All"],
    )


def test_a_collection_delete_is_one_request_in_a_namespace_of_the_suites_own(server, kube: ClusterKube) -> None:
    kube.delete_collection(kinds.JOB, "ns", labels={"a": "1"})
    guard, delete = server.requests[-2:]
    assert (guard.method, guard.path) == ("GET", "/api/v1/namespaces/ns")
    assert (delete.method, delete.path, delete.query) == ("DELETE", "/apis/batch/v1/namespaces/ns/jobs",
                                                          {"labelSelector": ["a=1"]})  # fmt: skip
    assert delete.body["propagationPolicy"] == "Background"
    assert kube.requests.snapshot()[("deletecollection", "jobs.batch")] == 1
    sent = len(server.requests)
    with pytest.raises(errors.ForeignObject):
        kube.delete_collection(kinds.JOB, "theirs")
    with pytest.raises(errors.UsageError):
        kube.delete_collection(kinds.QUEUE, "ns")
    assert [r.method for r in server.requests[sent:]] == ["GET"]  # nothing deleted in a namespace not the suite's


def test_errors_are_mapped_with_the_servers_message(kube: ClusterKube) -> None:
    assert kube.find(kinds.POD, "gone", "ns") is None
    with pytest.raises(errors.KindNotServed, match="could not find the requested resource"):
        kube.list(kinds.TRAIN_JOB, "ns")
    with pytest.raises(errors.Forbidden, match="resources must be specified"):
        kube.create({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "denied"}})
    with pytest.raises(errors.ServerError) as flaky:
        kube.get(kinds.QUEUE, "flaky")
    assert flaky.value.transient


def test_logs_version_access_review_and_discovery(server, kube: ClusterKube) -> None:
    assert kube.pod_logs("p", "ns", container="node", tail_lines=10) == "line1\nline2\n"
    assert server.requests[-1].query == {"container": ["node"], "tailLines": ["10"]}
    assert kube.server_version() == "v1.35.0"
    review = kube.access_review(
        "system:serviceaccount:kai-scheduler:pod-grouper", "watch", "jobsets", "jobset.x-k8s.io"
    )
    assert review.allowed
    sent = server.requests[-1].body["spec"]
    assert sent["groups"] == ["system:serviceaccounts", "system:serviceaccounts:kai-scheduler"]
    assert sent["resourceAttributes"] == {"verb": "watch", "resource": "jobsets", "group": "jobset.x-k8s.io"}
    widget = stamp(
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "ns"}}, "r"
    )
    kube.apply(widget, allow_foreign=True)
    assert server.requests[-1].path == "/apis/example.com/v1/namespaces/ns/widgets/w"


def test_unreachable_cluster_is_reported_quickly(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: u, user: {token: x}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    with pytest.raises(errors.Unreachable, match=f"127.0.0.1:{port}"):
        ClusterKube(str(config), retries=0).server_version()


@pytest.mark.parametrize("content", ["not: [valid", "apiVersion: v1\nkind: Config\nclusters: []\n"])
def test_unusable_kubeconfig_is_a_usage_error(tmp_path: Path, content: str) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(content)
    with pytest.raises(errors.UsageError, match="cannot load kubeconfig"):
        ClusterKube(str(config))
    with pytest.raises(errors.UsageError, match="context nope"):
        ClusterKube(str(config), "nope")
