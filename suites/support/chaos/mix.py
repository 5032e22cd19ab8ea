"""What a chaos run draws: Hypothesis strategies for mixes over the shapes the suite knows, sized from the cluster's
GPU layout, and for the smaller mixes a violating one shrinks to.

Hypothesis generates and shrinks (suites/support/chaos/search.py drives it from the run's seed); this module only says
what a mix may be. Every value shrinks toward a simpler mix: fewer queues and workloads, smaller gangs of 1-GPU pods,
earlier arrivals, no ending (``runs`` is first of :data:`~suites.support.cases.chaos.ENDINGS`), the preemptible
priority. Times are whole seconds, so a reproducer file reads plainly.

**GPU sharing.** Given ``fractions`` (the cluster shares GPUs: suites/test_chaos.py), a workload's pods are 1-GPU,
whole-node or one of those fractions of a GPU; without, the draw is exactly what it was before fractions existed,
so a seed draws the same mixes on a cluster without sharing. A fractional gang has at most as many pods as the
cluster has GPUs, so the same gang of 1-GPU pods fits too: shrinking (:func:`submixes`) drops a fractional workload
like any other, and tries each kept one as 1-GPU pods, so a violation that does not need GPU sharing is reported
without it, and one that does keeps its fractions.

**Coverage.** Every mix restarts every component the run may restart, once each, at drawn moments (plus up to
:data:`EXTRA_RESTARTS` more): a run of a few mixes under a 10-minute budget restarts each of them. Shrinking keeps
those restarts and moves them in time; it drops workloads (:func:`submixes`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from hypothesis import strategies as st

from kai_conformance.clusters.layout import GpuLayout
from kai_conformance.suites.support.cases.chaos import ENDINGS, ChaosMix, ChaosQueue, ChaosWorkload, Fault
from kai_conformance.suites.support.cases.scale import NON_PREEMPTIBLE, PREEMPTIBLE, whole_node, whole_nodes
from kai_conformance.suites.support.workloads import UNLIMITED

#: Gang sizes a mix draws from (pods per TrainJob), capped by what the cluster holds.
GANG_SIZES = (1, 2, 3, 4)
MAX_QUEUES = 3
EXTRA_RESTARTS = 2
#: Chance of keeping each element when a shrink draws a smaller mix at random (kept unless the draw is 0 of 0..3):
#: most of a violating mix is kept at first, so a violation that needs a few of its elements is met again quickly.
KEEP_DRAW = 3


def mixes(
    layout: GpuLayout,
    components: Sequence[str],
    *,
    horizon: int = 60,
    max_workloads: int = 10,
    min_workloads: int = 2,
    seed: int | None = None,
    fractions: Sequence[float] = (),
) -> st.SearchStrategy[ChaosMix]:
    """Mixes for a cluster of ``layout``'s GPUs: ``min_workloads`` to ``max_workloads`` TrainJobs arriving in the
    first half of ``horizon`` seconds, endings within it, and a restart of each of ``components`` within it; pods of
    ``fractions`` of a GPU too when given (module docstring). At least
    ``min_workloads``: Hypothesis tries the simplest mix first, and on a cluster a mix of restarts alone costs a
    minute of the budget for nothing (shrinking draws from :func:`submixes`, which may drop every workload)."""
    total, width, wide_nodes = layout.total, whole_node(layout), whole_nodes(layout)

    @st.composite
    def draw(draw: st.DrawFn) -> ChaosMix:
        queues = tuple(draw(st.lists(queue(total), min_size=1, max_size=MAX_QUEUES)))
        queues = tuple(ChaosQueue(f"q{i}", q.quota, q.limit, q.weight) for i, q in enumerate(queues))
        shapes = draw(st.lists(workload(queues, total, width, wide_nodes, horizon, fractions),
                               min_size=min(min_workloads, max_workloads), max_size=max_workloads))  # fmt: skip
        workloads = tuple(dataclasses.replace(shape, name=f"w{i:02d}") for i, shape in enumerate(shapes))
        order = draw(st.permutations(list(components)))
        moments = st.integers(0, horizon)
        faults = [Fault(c, draw(moments)) for c in order]
        faults += [Fault(draw(st.sampled_from(list(components))), draw(moments))
                   for _ in range(draw(st.integers(0, EXTRA_RESTARTS if components else 0)))]  # fmt: skip
        return ChaosMix(queues, workloads, tuple(sorted(faults, key=lambda f: f.at)), total, seed)

    return draw()


def queue(total: int) -> st.SearchStrategy[ChaosQueue]:
    """A leaf queue: a GPU quota of up to half the cluster, no limit or one at or above the quota, weight 1 to 3."""

    @st.composite
    def draw(draw: st.DrawFn) -> ChaosQueue:
        quota = draw(st.integers(0, max(total // 2, 0)))
        limit = draw(st.one_of(st.just(UNLIMITED), st.integers(max(quota, 1), max(total, 1))))
        return ChaosQueue("", quota, limit, draw(st.integers(1, 3)))

    return draw()


def workload(
    queues: Sequence[ChaosQueue], total: int, width: int, wide_nodes: int, horizon: int,
    fractions: Sequence[float] = (),
) -> st.SearchStrategy[ChaosWorkload]:  # fmt: skip
    """One TrainJob (named by the mix) that fits the empty cluster: 1-GPU pods, whole-node pods no more than the
    nodes that hold one, or pods of one of ``fractions`` of a GPU no more than the cluster's GPUs."""
    sizes: list[float] = [1, width] if width > 1 else [1]

    @st.composite
    def draw(draw: st.DrawFn) -> ChaosWorkload:
        size = draw(st.sampled_from([*sizes, *fractions]))
        fraction = float(size) if size < 1 else 0.0
        gpus = 0 if fraction else int(size)
        most = min(max(GANG_SIZES), total // max(gpus, 1), wide_nodes if gpus == width > 1 else total)
        pods = draw(st.integers(1, max(most, 1)))
        role = draw(st.sampled_from([q.role for q in queues]))
        priority = draw(st.sampled_from([PREEMPTIBLE, NON_PREEMPTIBLE]))
        arrive = draw(st.integers(0, horizon // 2))
        ending = draw(st.sampled_from(ENDINGS))
        after = draw(st.integers(5, max(horizon // 2, 5))) if ending != "runs" else 0
        resume = draw(st.one_of(st.none(), st.integers(5, max(horizon // 4, 5)))) if ending == "suspended" else None
        return ChaosWorkload("", pods, gpus, role, priority, float(arrive), ending, float(after), resume,
                             fraction=fraction)  # fmt: skip

    return draw()


def submixes(mix: ChaosMix) -> st.SearchStrategy[ChaosMix]:
    """Mixes made of some of ``mix``'s workloads (each kept unless its draw is 0, :data:`KEEP_DRAW`), each kept
    fractional one as it is unless a second draw is 0 (then as 1-GPU pods): shrinking turns draws to 0, so
    Hypothesis drops what the violation does not need and keeps fractions only where it needs them. The restarts
    stay (module docstring). A mix without fractional workloads draws as it did before fractions existed."""
    names = [w.name for w in mix.workloads]
    fractional = [w.name for w in mix.workloads if w.fraction]

    @st.composite
    def draw(draw: st.DrawFn) -> ChaosMix:
        kept = [draw(st.integers(0, KEEP_DRAW)) > 0 for _ in names]
        whole = frozenset(n for n in fractional if draw(st.integers(0, KEEP_DRAW)) == 0)
        smaller = mix.without(frozenset(n for n, keep in zip(names, kept, strict=True) if not keep))
        return smaller.unshared(whole) if whole else smaller

    return draw()
