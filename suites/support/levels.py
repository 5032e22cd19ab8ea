"""Where a label or annotation is found along TrainJob → JobSet → Job → Pod (and the PodGroup).

An :class:`~suites.support.detectors.labels.Arrival` says whether a key set at a source was found at a level. "Found"
is framed to catch the violation: where the key must arrive, every object of the level must carry it (and the
level must not be empty); where it must not arrive, any object carrying it counts as found.
"""

from __future__ import annotations

from kai_conformance.suites.support.detectors.labels import Arrival
from kai_conformance.suites.support.expectations import LEVELS
from kai_conformance.suites.support.snapshot import Obj, Snapshot, annotations_of, labels_of


def objects_at(snap: Snapshot, level: str) -> list[Obj]:
    return list(
        {
            "TrainJob": snap.trainjobs,
            "JobSet": snap.jobsets,
            "Job": snap.jobs,
            "Pod": snap.live_pods,
            "PodGroup": snap.podgroups,
        }[level]
    )


def carries(obj: Obj, key: str, value: str | None = None, *, annotation: bool = False) -> bool:
    found = (annotations_of(obj) if annotation else labels_of(obj)).get(key)
    return found is not None and (value is None or found == value)


def arrival(
    snap: Snapshot,
    source: str,
    key: str,
    level: str,
    expected: bool,
    *,
    value: str | None = None,
    annotation: bool = False,
) -> Arrival:
    objs = objects_at(snap, level)
    hits = [carries(o, key, value, annotation=annotation) for o in objs]
    observed = bool(objs) and all(hits) if expected else any(hits)
    shown = f"annotation {key}" if annotation else f"label {key}"
    return Arrival(source, shown + (f"={value}" if value is not None else ""), level, expected, observed)


def arrivals(
    snap: Snapshot,
    source: str,
    key: str,
    expected_levels: frozenset[str],
    *,
    value: str | None = None,
    annotation: bool = False,
    levels: tuple[str, ...] = LEVELS,
) -> list[Arrival]:
    """One arrival per level (every level of the chain unless ``levels`` narrows it), in chain order."""
    return [
        arrival(snap, source, key, level, level in expected_levels, value=value, annotation=annotation)
        for level in levels
    ]
