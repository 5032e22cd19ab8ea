"""An HTTP API server backed by :class:`FakeKube`: the real client (``ClusterKube``) talks to the in-memory fake.

Used to run the suite's pytest plugin end to end against an "existing cluster" with no cluster at all: the
plugin connects over HTTP exactly as it would to a real API server, and the fake (with its simulated stack)
answers. Only the REST shapes the suite uses are routed, watches (as chunked streams) and ``/metrics`` included.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kai_conformance.fixtures import errors
from kai_conformance.fixtures.kube import Watch
from kai_conformance.fixtures.kube.kinds import Kind
from tests.fakes.apiserver import Request, Stream, status
from tests.fakes.kube import FakeKube


def _split(path: str) -> tuple[str, list[str]] | None:
    """``/apis/g/v/namespaces/ns/plural/name/sub`` → (``g/v``, [``namespaces``, ``ns``, ``plural``, …])."""
    parts = path.strip("/").split("/")
    if parts[0] == "api" and len(parts) >= 2:
        return parts[1], parts[2:]
    if parts[0] == "apis" and len(parts) >= 3:
        return f"{parts[1]}/{parts[2]}", parts[3:]
    return None


def _kind(fake: FakeKube, api_version: str, plural: str) -> Kind | None:
    return next((k for k in fake.served.values() if k.api_version == api_version and k.plural == plural), None)


def route_to(fake: FakeKube):
    def route(request: Request) -> tuple[int, Any]:
        if request.path == "/version":
            return 200, {"gitVersion": fake.git_version}
        if request.path == "/metrics":
            return 200, fake._metrics().encode()
        split = _split(request.path)
        if split is None:
            return status(404, "NotFound", f"no route {request.path}")
        api_version, rest = split
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest and namespace is None:  # discovery: the APIResourceList of a group version
            served = [k for k in fake.served.values() if k.api_version == api_version]
            if not served:
                return status(404, "NotFound", "the server could not find the requested resource")
            return 200, {"kind": "APIResourceList", "groupVersion": api_version, "resources": [
                {"name": k.resource, "kind": k.kind, "namespaced": k.namespaced} for k in served]}  # fmt: skip
        if not rest:
            return status(404, "NotFound", "the server could not find the requested resource")
        kind = _kind(fake, api_version, rest[0])
        if kind is None:
            return status(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        subresource = rest[2] if len(rest) > 2 else None
        try:
            return 200, _call(fake, request, kind, namespace, name, subresource)
        except errors.KubeError as exc:
            code = exc.status or 503
            return status(code, exc.reason, exc.message, name if isinstance(exc, errors.NotFound) else None)

    return route


def _events(stream: Watch) -> Iterator[dict]:
    """A watch's events as the API server writes them; a failure mid-stream (Gone) as its ERROR event."""
    try:
        for event in stream:
            yield {"type": event.type, "object": event.obj}
    except errors.KubeError as exc:
        yield {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                           "code": exc.status, "reason": exc.reason, "message": exc.message}}  # fmt: skip


def _call(fake: FakeKube, request: Request, kind: Kind, namespace: str | None, name: str | None,
          subresource: str | None) -> Any:  # fmt: skip
    query = {key: values[0] for key, values in request.query.items()}
    if request.method == "GET" and name:
        return fake._get(kind, namespace, name)
    if request.method == "GET" and query.get("watch") == "true":
        stream = fake._watch(kind, namespace, query.get("labelSelector"), query.get("fieldSelector"),
                             query.get("resourceVersion", ""), int(query.get("timeoutSeconds", 60)))  # fmt: skip
        return Stream(_events(stream))
    if request.method == "GET":
        items, version = fake._list_versioned(kind, namespace, query.get("labelSelector"), query.get("fieldSelector"))
        return {"kind": f"{kind.kind}List", "metadata": {"resourceVersion": version}, "items": items}
    if request.method == "POST":
        return fake._create(kind, request.body, dry_run=query.get("dryRun") == "All")
    if request.method == "PATCH" and request.headers.get("content-type") == "application/apply-patch+yaml":
        return fake._apply(kind, request.body, dry_run=query.get("dryRun") == "All", force=query.get("force") == "true")
    if request.method == "PATCH":
        return fake._patch(kind, namespace, name or "", request.body, request.headers["content-type"], subresource)
    if request.method == "DELETE" and not name and namespace:
        fake._delete_collection(
            kind, namespace, query.get("labelSelector"), (request.body or {}).get("propagationPolicy", "Background")
        )
        return {"kind": "Status", "status": "Success"}
    if request.method == "DELETE":
        fake._delete(kind, namespace, name or "", (request.body or {}).get("propagationPolicy", "Background"))
        return {"kind": "Status", "status": "Success"}
    raise errors.KubeError(request.method, 405, "MethodNotAllowed", f"{request.method} is not routed")
