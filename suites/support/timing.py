"""How long things may take, all derived from KAI's scheduling period (``fixtures.waits``).

* "Never happens" checks hold for ``timeouts.hold`` (10 periods + 5 s margin, scaled), documented in
  :mod:`fixtures.waits`, and start only once the workload is visible to KAI. Over a workload KAI must refuse they
  end earlier, on ``timeouts.refusals``: 3 further refusals counted, 2 s after the last, 5 periods at least.
* :func:`settle` is how long a gang may legitimately look partial: KAI allocates a gang in one cycle and evicts a
  victim gang in one statement, but the binder binds and the evictor deletes pod by pod, and API timestamps have
  1 s resolution. It bounds the bind-time spread of a gang and how long a partial gang may be observed.
"""

from __future__ import annotations

from kai_conformance.fixtures.waits import KAI_SCHEDULE_PERIOD, TimeoutPolicy

SETTLE_PERIODS = 5


def settle(timeouts: TimeoutPolicy) -> float:
    return SETTLE_PERIODS * KAI_SCHEDULE_PERIOD * timeouts.scale
