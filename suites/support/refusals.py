"""KAI's own evidence that it considered a workload and refused it: what lets a "never happens" hold end early.

The rule that uses it is in :mod:`fixtures.waits` ("Holds that end on the scheduler's own evidence"); this module
counts. Upstream facts (KAI v0.16.8 and v0.17.0 alike, both built with client-go v0.35):

* **One refusal per scheduling cycle.** The scheduler runs a session every ``--schedule-period`` (1 s;
  pkg/scheduler/scheduler.go ``wait.Until(s.runOnce, s.schedulePeriod)``). ``closeSession``
  (pkg/scheduler/framework/session.go) calls ``RecordJobStatusEvent`` for every PodGroup of the session, after
  every action (allocate, consolidation, reclaim, preempt, stalegangeviction) has run. For a PodGroup ready for
  scheduling that still has pending pods (pkg/scheduler/cache/status_updater/default_status_updater.go
  ``RecordJobStatusEvent``) it records a Normal ``Unschedulable`` event on the PodGroup
  (``markPodGroupUnschedulable``, always, even when pods of it are allocated) and a Warning ``Unschedulable`` event
  on each pending pod (``markTaskUnschedulable``). A PodGroup whose queue does not exist stays in the session with
  a ``QueueDoesNotExist`` fit error (pkg/scheduler/cache/cluster_info/cluster_info.go ``snapshotPodGroups``), so
  it is refused the same way. A gang placed in a cycle has no pending pod left at its end (its pods are
  allocated, pipelined or binding; the BindRequests are created during the cycle, cache.go ``Bind``): no event.
* **The count.** KAI records through client-go's legacy recorder (cache.go ``record.NewBroadcaster``), whose
  EventCorrelator (tools/record/events_cache.go) sends a repeat of the same event (same source, object, type,
  reason and message) as a PATCH of the existing Event with ``count`` + 1; after 10 distinct messages of one
  reason within 10 minutes it sends a "(combined from similar events)" Event that counts on instead. Every
  occurrence raises exactly one Event's count, so the sum of the counts of one object's ``Unschedulable`` Events
  is the number of cycles that refused it, as far as they were sent.
* **Where the count stalls.** The spam filter lets one source send 25 events per object and type, then one every
  5 minutes (``defaultSpamBurst`` 25, ``defaultSpamQPS`` 1/300; key: source, object, type — on a PodGroup shared
  with ``NotReady``, ``Evict`` and ``StaleJob``, on a pod with ``FailedBinding``); a filtered occurrence still
  raises the correlator's own count, so the next one sent jumps. The broadcaster drops events while 1000 are
  queued. So the count may stop rising — the hold then lasts its wall time — but it never rises without refusals.
* **Not per attempt.** ``status.schedulingConditions`` is rewritten only when the condition changes (type, node
  pool, reason, message or status: ``shouldUpdateCondition``/``equalSchedulingConditions``); its ``transitionID``
  and ``lastTransitionTime`` move only then. A refusal repeated every cycle leaves them as they are.

The count of a workload is the highest of its PodGroup's and its pods' sums (each is a lower bound on the cycles
that refused it; the pods' keep rising when the PodGroup's budget of 25 went to ``Evict`` events).
"""

from __future__ import annotations

from kai_conformance.suites.support.expectations import UNSCHEDULABLE_REASON
from kai_conformance.suites.support.snapshot import Obj, Snapshot


def occurrences(event: Obj) -> int:
    """How many times an Event happened: ``count`` (core/v1), or ``series.count`` (events.k8s.io/v1), else 1."""
    series = (event.get("series") or {}).get("count") or 0
    return max(int(event.get("count") or 1), int(series))


def kai_refusals(snap: Snapshot) -> int | None:
    """Scheduling cycles that refused the workload of ``snap`` (narrowed with :meth:`Snapshot.of`, taken with
    events): the highest sum of ``Unschedulable`` occurrences over its PodGroup and its pods. None while it has no
    PodGroup (KAI has not seen it, so nothing can have been refused)."""
    if snap.podgroup is None:
        return None
    objects = [snap.podgroup, *snap.pods]
    return max(sum(occurrences(e) for e in snap.events_for(obj, UNSCHEDULABLE_REASON)) for obj in objects)
