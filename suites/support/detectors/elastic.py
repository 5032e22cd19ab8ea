"""Elastic-gang detectors: a gang whose minimum is below its pod count runs with at least its minimum or not at all,
holds exactly as many pods as the GPUs allow, loses its surplus before its core, and its PodGroup carries the
minimum where the KAI version puts it (:mod:`suites.support.expectations.elastic`).

Unlike :func:`~.gang.gang_all_or_nothing`, a partly bound elastic gang is conforming as long as the bound part is at
least the minimum: the surplus pods pending are KAI's elastic phase, not a gang violation.
"""

from __future__ import annotations

from kai_conformance.suites.support.detectors.verdict import Verdict, one_podgroup
from kai_conformance.suites.support.expectations.elastic import ElasticRow
from kai_conformance.suites.support.snapshot import Snapshot, name_of, node_summary, uid_of


def elastic_minimum_held(snap: Snapshot, minimum: int, pods: int) -> Verdict:
    """Either no pod of the gang is bound, or at least its ``minimum`` (of ``pods``) is."""
    bound, pending = snap.bound_pods, snap.pending_pods
    if not bound:
        return Verdict("elastic-minimum", True, f"none of the {pods} pods bound ({len(pending)} pending)")
    if len(bound) >= minimum:
        surplus = len(bound) - minimum
        return Verdict(
            "elastic-minimum",
            True,
            f"{len(bound)} of {pods} pods bound ({node_summary(bound)}): the minimum {minimum} and {surplus} of the "
            f"surplus; {len(pending)} pending",
        )
    return Verdict(
        "elastic-minimum",
        False,
        f"{len(bound)} of {pods} pods bound ({node_summary(bound)}), below the gang's minimum {minimum}, while "
        f"{len(pending)} pending",
    )


class ElasticMinimumWatch:
    """Fires when an elastic gang stays bound below its minimum (but above none) for longer than ``grace`` seconds.

    The binder binds the minimum pod by pod and the evictor deletes pod by pod, so one observation may catch the
    gang half-way; a gang *staying* below its minimum while running is the violation (KAI's stale-gang eviction
    exists for exactly that state, kai-scheduler.md §5).
    """

    def __init__(self, minimum: int, pods: int, grace: float) -> None:
        self.minimum, self.pods, self.grace = minimum, pods, grace
        self.since: float | None = None
        self.observations = 0

    def observe(self, snap: Snapshot) -> Verdict:
        self.observations += 1
        verdict = elastic_minimum_held(snap, self.minimum, self.pods)
        if verdict.ok:
            self.since = None
        else:
            self.since = snap.taken_at if self.since is None else self.since
            lasted = snap.taken_at - self.since
            if lasted > self.grace:
                return Verdict(
                    "elastic-never-below-minimum",
                    False,
                    f"{verdict.explanation}, for {lasted:.1f}s (more than the {self.grace:.0f}s a gang may take to "
                    "bind or be evicted)",
                )
        return Verdict(
            "elastic-never-below-minimum",
            True,
            f"never below the minimum {self.minimum} for more than {self.grace:.0f}s in {self.observations} "
            "observation(s)",
        )


def elastic_bound_exactly(snap: Snapshot, bound: int, pods: int) -> Verdict:
    """Exactly ``bound`` pods of the gang bound and the other ``pods - bound`` pending (created, not bound)."""
    found, pending = snap.bound_pods, snap.pending_pods
    text = f"{len(found)} of {pods} pods bound ({node_summary(found)}), {len(pending)} pending"
    if len(found) == bound and len(pending) == pods - bound:
        return Verdict("elastic-size", True, text)
    return Verdict("elastic-size", False, text + f"; expected {bound} bound and {pods - bound} pending")


def surplus_evicted_first(snap: Snapshot, original: frozenset[str], minimum: int) -> Verdict:
    """Of the pods bound before an eviction (``original`` uids), at least ``minimum`` are still bound: whatever the
    gang lost came out of its surplus, never out of its core."""
    kept = {uid_of(p) for p in snap.bound_pods} & original
    lost, surplus = len(original) - len(kept), max(0, len(original) - minimum)
    if len(kept) >= minimum:
        return Verdict(
            "surplus-first",
            True,
            f"{len(kept)} of the {len(original)} pods bound before still bound (minimum {minimum}): lost {lost}, "
            f"within the surplus of {surplus}",
        )
    return Verdict(
        "surplus-first",
        False,
        f"only {len(kept)} of the {len(original)} pods bound before still bound, below the minimum {minimum}: lost "
        f"{lost} although the surplus was {surplus}, so core pods were evicted",
    )


def podgroup_elastic_minimum(
    snap: Snapshot, row: ElasticRow, minimum: int, pods: int, replicated_job: str = "node"
) -> Verdict:
    """The PodGroup sets ``minimum`` for ``replicated_job`` (of ``pods`` pods) in the field the KAI version uses."""
    pg = one_podgroup(snap, "elastic-podgroup")
    if isinstance(pg, Verdict):
        return pg
    found, field = row.minimum_in(pg, replicated_job), row.field(replicated_job)
    text = f"PodGroup {name_of(pg)} {field} = {found} for {pods} pods"
    if found == minimum:
        return Verdict("elastic-podgroup", True, text + f" (elastic: {pods - minimum} surplus)")
    return Verdict("elastic-podgroup", False, text + f", expected {minimum} ({row.describe()})")
