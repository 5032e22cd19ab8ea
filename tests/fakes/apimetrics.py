"""The in-memory API server's ``/metrics``: ``apiserver_request_total`` in Prometheus text, counted from the calls
the fake served (as the API server counts every request it answered), plus the requests of clients that are not
simulated (``FakeKube.other_requests``: KAI, the kubelets, kube-controller-manager on a real cluster)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

#: The fake's operations as the API server's metric labels them (verb, resource, subresource); a resource-less
#: request names its path in ``subresource``, as the API server does.
_LABELS = {
    "get": ("GET", None, ""), "list": ("LIST", None, ""), "watch": ("WATCH", None, ""),
    "apply": ("APPLY", None, ""), "create": ("POST", None, ""), "patch": ("PATCH", None, ""),
    "delete": ("DELETE", None, ""), "logs": ("GET", "pods", "log"), "version": ("GET", "", "/version"),
    "discover": ("GET", "", "/apis"), "metrics": ("GET", "", "/metrics"),
}  # fmt: skip


def render(calls: Iterable[Any], other_requests: int, resource_of: dict[str, str]) -> str:
    """``calls``: :class:`tests.fakes.kube.Call`; ``resource_of``: kind name → plural."""
    counts: Counter[tuple[str, str, str]] = Counter()
    for call in calls:
        verb, resource, subresource = _LABELS.get(call.operation, ("GET", "", f"/{call.operation}"))
        counts[
            (verb, resource_of.get(call.kind, call.kind.lower()) if resource is None else resource, subresource)
        ] += 1
    if other_requests:
        counts[("WATCH", "nodes", "")] += other_requests
    lines = [
        "# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, dry run "
        "value, group, version, resource, scope, component, and HTTP response code.",
        "# TYPE apiserver_request_total counter",
    ]
    for (verb, resource, subresource), count in sorted(counts.items()):
        lines.append(
            f'apiserver_request_total{{code="200",component="apiserver",dry_run="",group="",resource="{resource}",'
            f'scope="",subresource="{subresource}",verb="{verb}",version="v1"}} {count}'
        )
    return "\n".join(lines) + "\n"
