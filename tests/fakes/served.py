"""The nulls a real API server writes, put into what the in-memory API answers.

Go fields without ``omitempty`` (and struct-typed ones such as ``metav1.Time``, which ``omitempty`` never omits)
are serialized as ``null`` when unset. The suite met the first of these on a real cluster: a
CustomResourceDefinition read right after its creation answered ``status.conditions: null``, and a reader that
expected a list died on it. The fake answers with the same nulls so that every self-test reads them as the suite
does against a real server (``fixtures/kube/wire.py``). Sources (k8s.io/api v0.36.1 ``core/v1/types.go``,
apiextensions-apiserver v0.37.2 ``pkg/apis/apiextensions/v1/types.go``):

- ``CustomResourceDefinitionStatus.Conditions`` ``json:"conditions"``, no omitempty: ``null`` until the
  apiextensions controllers set the first condition.
- ``ObjectMeta.CreationTimestamp`` is a ``metav1.Time``: the pod template inside a Deployment, Job or
  JobSet answers ``metadata.creationTimestamp: null``.
- ``Event.EventTime`` is a ``metav1.MicroTime``: a core/v1 Event written through the old API answers
  ``eventTime: null``.
- ``PodCondition.LastProbeTime`` is a ``metav1.Time``: the kubelet's and the scheduler's pod conditions answer
  ``lastProbeTime: null``.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def as_served(obj: Obj) -> Obj:
    """``obj`` (a copy the caller owns) with the server's nulls filled in where it would send them."""
    kind, spec, status = obj.get("kind"), obj.get("spec"), obj.get("status")
    if kind == "CustomResourceDefinition":
        served = obj.setdefault("status", {})
        if not served.get("conditions"):
            served["conditions"] = None
    elif kind == "Event":
        obj.setdefault("eventTime", None)
    elif kind == "Pod" and isinstance(status, dict):
        for condition in status.get("conditions") or []:
            condition.setdefault("lastProbeTime", None)
    if isinstance(spec, dict):
        for template in _pod_templates(spec):
            template.setdefault("metadata", {}).setdefault("creationTimestamp", None)
    return obj


def _pod_templates(spec: Obj) -> list[Obj]:
    """The pod templates of a Deployment or Job (``spec.template``) and of a JobSet's replicatedJobs."""
    found = []
    if isinstance(spec.get("template"), dict) and "spec" in spec["template"]:
        template = spec["template"]
        found.append(template)
        inner = template["spec"] if isinstance(template["spec"], dict) else {}
        if isinstance(inner.get("template"), dict):  # a JobSet replicatedJob's Job template holds the pod template
            found.append(inner["template"])
    for replicated in spec.get("replicatedJobs") or []:
        job = (replicated.get("template") or {}).get("spec") or {}
        if isinstance(job.get("template"), dict):
            found.append(job["template"])
    return found
