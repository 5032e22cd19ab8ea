"""Where a PodGroup's queue, priority class and labels came from, and why they differ from what the chain asks.

KAI's podgrouper resolves the queue from the top owner's label, then the pod's, then ``default-queue``
(kai-scheduler.md §3.2 ``CalcPodGroupQueue``), and the priority class from the top owner's ``priorityClassName``
label, then the pod's label and ``spec.priorityClassName``, then ``train`` (§3.3). For a TrainJob the top owner is
the JobSet with the TrainJob's labels merged under its own (skip-top-owner, §4.2): only when the podgrouper's
service account may read TrainJobs. Without that permission its owner walk stops at the JobSet (§4.6) and the
TrainJob's labels never reach the PodGroup. A failed queue, priority or label verdict quotes a
:class:`Provenance`: what the PodGroup got, from which object, and what kept the asked-for value away.
"""

from __future__ import annotations

from dataclasses import dataclass

from kai_conformance.suites.support.expectations import (
    DEFAULT_PRIORITY_CLASS,
    DEFAULT_QUEUE,
    PODGROUPER_USER,
    PRIORITY_LABEL,
    QUEUE_LABEL,
)
from kai_conformance.suites.support.snapshot import Obj, Snapshot, labels_of, name_list, name_of

TRAINJOBS = "trainjobs.trainer.kubeflow.org"
JOBSETS = "jobsets.jobset.x-k8s.io"
JOBS = "jobs.batch"
PODGROUPS = "podgroups.scheduling.run.ai"
#: Verbs the podgrouper needs per resource (kai-scheduler.md §4.6), asked by SubjectAccessReview on a failure.
PODGROUPER_NEEDS = {
    TRAINJOBS: ("get", "list", "watch"),
    JOBSETS: ("get", "list", "watch"),
    JOBS: ("get", "list", "watch"),
    PODGROUPS: ("create",),
}
#: How the reference is cited in messages.
WALK = "kai-scheduler.md §4.6"
#: The suite's own labels on everything it creates: named last among a TrainJob's missing labels.
SUITE_LABEL_PREFIXES = ("kai-conformance/", "app.kubernetes.io/")


@dataclass(frozen=True)
class Access:
    """What SubjectAccessReviews said about the podgrouper and one resource: the verbs denied, or why unknown."""

    resource: str
    denied: tuple[str, ...] = ()
    unknown: str = ""

    @property
    def granted(self) -> bool | None:
        return None if self.unknown else not self.denied

    def __str__(self) -> str:
        if self.unknown:
            return f"whether the podgrouper may read {self.resource} is unknown ({self.unknown})"
        if self.denied:
            return f"the podgrouper ({PODGROUPER_USER}) may not {', '.join(self.denied)} {self.resource}"
        return f"the podgrouper may {', '.join(PODGROUPER_NEEDS.get(self.resource, ('read',)))} {self.resource}"


@dataclass(frozen=True)
class Source:
    """One place along the chain the podgrouper reads a field from, in its precedence order."""

    owner: str  # "the JobSet"
    name: str  # "the JobSet's label kai.scheduler/queue"
    value: str | None


@dataclass(frozen=True)
class Reading:
    """What the PodGroup got for one field, from where, and what the chain asks for."""

    field: str
    actual: str | None
    origin: str
    asked: str
    asked_from: str
    why: str = ""

    @property
    def as_asked(self) -> bool:
        return self.actual == self.asked

    def __str__(self) -> str:
        text = f"{self.field} {self.actual} from {self.origin}"
        return text if self.as_asked else f"{text}, but the chain asks for {self.asked} ({self.asked_from})"


def _first(objs: tuple[Obj, ...]) -> Obj | None:
    return objs[0] if objs else None


def _pod_value(pods: list[Obj], key: str) -> str | None:
    return next((labels_of(p)[key] for p in pods if key in labels_of(p)), None)


def sources(snap: Snapshot, key: str, *, pod_spec_field: str | None = None) -> list[Source]:
    """The JobSet's label, the TrainJob's label (merged under the JobSet's), the pods' label (and spec field)."""
    jobset, trainjob, pods = _first(snap.jobsets), _first(snap.trainjobs), snap.live_pods
    found = [
        Source("the JobSet", f"the JobSet's label {key}", labels_of(jobset).get(key) if jobset else None),
        Source("the TrainJob", f"the TrainJob's label {key}", labels_of(trainjob).get(key) if trainjob else None),
        Source("the pods", f"the pods' label {key}", _pod_value(pods, key)),
    ]
    if pod_spec_field:
        spec_value = next((p["spec"][pod_spec_field] for p in pods if (p.get("spec") or {}).get(pod_spec_field)), None)
        found.append(Source("the pods", f"the pods' spec.{pod_spec_field}", spec_value))
    return found


def _walk_stopped(trainjobs: Access) -> str:
    return f"{trainjobs}: its owner walk stopped at the JobSet, so no TrainJob label reached the PodGroup ({WALK})"


def _either(owners: list[str]) -> str:
    owners = list(dict.fromkeys(owners))
    return owners[0] if len(owners) == 1 else ", ".join(owners[:-1]) + " or " + owners[-1]


def read_field(
    field: str,
    actual: str | None,
    found: list[Source],
    default: str,
    trainjobs: Access | None,
    *,
    other_key: str = "",
) -> Reading:
    """Explain ``actual`` by the first source (in precedence order) carrying it, or by KAI's default; when it is
    not what the chain asks for, say what kept the asked-for value away."""
    unread_trainjob = trainjobs is not None and trainjobs.granted is False
    given = [s for s in found if s.value is not None]
    asked = given[0] if given else Source("KAI", f"KAI's default: no source sets a {field}", default)
    origin_source = next((s for s in given if s.value == actual), None)
    if origin_source is not None:
        origin = origin_source.name
    elif actual == default:
        read = [s.owner for s in found if not (unread_trainjob and s.owner == "the TrainJob")]
        origin = f"KAI's default (no {field} set on {_either(read)})"
    else:
        origin = "no object of the chain (none carries that value)"
    if actual == asked.value:
        return Reading(field, actual, origin, default if asked.value is None else asked.value, asked.name)
    if asked.owner == "the TrainJob" and trainjobs is not None and unread_trainjob:
        why = _walk_stopped(trainjobs)
    elif asked.owner == "KAI":
        why = f"no object of the chain sets a {field}, so KAI's default {default} applies (kai-scheduler.md §3.2, §3.3)"
    elif other_key:
        why = f"KAI is configured to read the {field} from label {other_key} (KAI Config spec.global.queueLabelKey)"
    elif origin_source is None and actual not in (None, default) and field == "queue":
        why = (
            "no object of the chain carries that queue now: KAI keeps a PodGroup's queue from its creation "
            "(podgroup/handler.go, kai-scheduler.md §3.2), so a label may have changed since"
        )
    elif origin_source is not None and given.index(origin_source) > 0:
        why = (
            f"the podgrouper ranked {origin_source.name} above {asked.name}; KAI's precedence is the JobSet, then the "
            "TrainJob's labels merged under it, then the pods, then the default (kai-scheduler.md §3.2, §3.3)"
        )
    else:
        access = f" although {trainjobs}" if trainjobs is not None and trainjobs.granted else ""
        why = f"the podgrouper did not take it from {asked.name}{access} (does it read another label key?)"
    return Reading(field, actual, origin, default if asked.value is None else asked.value, asked.name, why)


@dataclass(frozen=True)
class Provenance:
    podgroup: str
    readings: tuple[Reading, ...]
    #: TrainJob label keys the PodGroup lacks (skip-top-owner merges every one the JobSet does not carry).
    missing_labels: tuple[str, ...]
    trainjobs: Access | None

    @property
    def as_asked(self) -> bool:
        return all(r.as_asked for r in self.readings) and not self.missing_labels

    def lines(self) -> list[str]:
        """``PodGroup … got`` one line per field (and the TrainJob labels it lacks), then each reason once."""
        out = [f"PodGroup {self.podgroup} got:"] + [f"  {r}" for r in self.readings]
        whys = [r.why for r in self.readings if not r.as_asked]
        if self.missing_labels:
            out.append(f"  none of the TrainJob's labels {name_list(self.missing_labels, str)}")
            if self.trainjobs is not None and self.trainjobs.granted is False:
                whys.append(_walk_stopped(self.trainjobs))
        out += [f"why: {why}" for why in dict.fromkeys(whys)]
        if self.trainjobs is not None and not any(str(self.trainjobs) in line for line in out):
            out.append(str(self.trainjobs))
        return out


def provenance(
    snap: Snapshot, trainjobs: Access | None = None, queue_label_key: str = QUEUE_LABEL
) -> Provenance | None:
    """The provenance of the workload's PodGroup (``snap`` narrowed to the workload, with its owners read)."""
    pg = snap.podgroup
    if pg is None:
        return None
    spec = pg.get("spec") or {}
    other_key = queue_label_key if queue_label_key != QUEUE_LABEL else ""
    queue = read_field("queue", spec.get("queue"), sources(snap, QUEUE_LABEL), DEFAULT_QUEUE, trainjobs,
                       other_key=other_key)  # fmt: skip
    priority = read_field(
        "priority class",
        spec.get("priorityClassName"),
        sources(snap, PRIORITY_LABEL, pod_spec_field="priorityClassName"),
        DEFAULT_PRIORITY_CLASS,
        trainjobs,
    )
    jobset, trainjob = _first(snap.jobsets), _first(snap.trainjobs)
    on_jobset, on_pg = labels_of(jobset) if jobset else {}, labels_of(pg)
    missing = tuple(
        sorted(
            (k for k in (labels_of(trainjob) if trainjob else {}) if k not in on_jobset and k not in on_pg),
            key=lambda k: (k.startswith(SUITE_LABEL_PREFIXES), k),
        )
    )
    return Provenance(name_of(pg), (queue, priority), missing, trainjobs)
