"""Fair share between sibling queues, per KAI version: the rules the fairness detector computes shares with.

KAI's proportion plugin divides each resource among sibling queues every scheduling cycle
(``pkg/scheduler/plugins/proportion/resource_division/resource_division.go``, identical at v0.16.8 and v0.17.0:
``git diff v0.16.8 v0.17.0 -- pkg/scheduler/plugins/proportion/resource_division`` is empty; ``docs/fairness/README.md``
is identical too):

1. ``setDeservedResource`` (l. 96–113): every queue first gets ``min(quota, requested)`` (quota -1 = the whole
   amount), whatever its priority.
2. ``divideOverQuotaResource`` (l. 115–151): the rest goes to queues by ``priority`` bucket, highest first
   (``getQueuesByPriority``: default ``DefaultQueuePriority`` = 100, ``pkg/common/constants/constants.go`` l. 16);
   a lower bucket only gets what the higher ones did not request.
3. ``divideUpToFairShare`` (l. 169–226): within a bucket, rounds of ``amount × weight / Σ weights`` over the queues
   not yet satisfied, each round rounded down to whole units (``getResourceToGiveInCurrentRound`` l. 287–309),
   until every queue is satisfied or nothing is left; ``overQuotaWeight`` 0 gets nothing over quota. The weight is
   ``w/Σw + k·(w/Σw − usage)`` (``calcShareWeights`` l. 228–255): without a usage database (the default, no
   ``usageDBConfig`` in the SchedulingShard) usage is 0, so the shares follow the weights whatever ``kValue`` is.
4. ``divideRemainingResource`` (l. 268–285): what rounding left over goes one unit at a time to the queues with the
   largest rounded-off remainder (ties: the older queue, then the name).

Reclaim moves GPUs toward these shares (``reclaimable/strategies/strategies.go``, ``reclaimable.go``): a queue may
reclaim for a gang only while its allocation plus the gang stays within its fair share
(``CanReclaimResources``), and takes whole preemptible gangs of a sibling only while that sibling is above its fair
share (``MaintainFairShare``) or above its quota while the reclaimer is within its own (``GuaranteeDeservedQuota``):
"In-quota resources are always protected from reclamation" (docs/fairness). So once both queues ask for more than
the cluster, each settles within one gang of its share, and a queue's deserved quota is never taken from it
(checked with gangs of equal size, which a quota of whole gangs makes exact).
"""

from __future__ import annotations

from dataclasses import dataclass

from kai_conformance.suites.support.expectations.version_rows import row_for

#: ``Queue.spec.priority`` when unset (``pkg/common/constants/constants.go`` l. 16, v0.16.8 and v0.17.0).
DEFAULT_QUEUE_PRIORITY = 100


@dataclass(frozen=True)
class FairShareRow:
    minor: str
    #: Priority buckets and over-quota weights divide GPUs beyond quotas (docs/fairness at the tag).
    priority_buckets: bool
    #: The reclaim strategies that move GPUs toward fair share (strategies.go at the tag).
    reclaim_strategies: tuple[str, ...]
    source: str

    @property
    def name(self) -> str:
        return f"KAI {self.minor} fair share"


_STRATEGIES = ("MaintainFairShare", "GuaranteeDeservedQuota")
FAIR_SHARE_ROWS: dict[str, FairShareRow] = {
    row.minor: row
    for row in (
        FairShareRow("v0.16", True, _STRATEGIES, "resource_division.go, strategies.go at v0.16.8"),
        FairShareRow("v0.17", True, _STRATEGIES, "resource_division.go, strategies.go at v0.17.0 (unchanged)"),
    )
}


def fair_share_row(version: str) -> FairShareRow:
    return row_for(FAIR_SHARE_ROWS, "fair-share", version, "suites/support/expectations/fairness.py")
