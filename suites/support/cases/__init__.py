"""The cases: parametrize values that know what they create (the render contract of :mod:`fixtures.render`).

Each case is a frozen dataclass with

* ``id`` – its pytest id (symbolic, so collection is the same on every xdist worker and every cluster),
* ``manifests(ctx)`` – every object the case applies over its life, in apply order; a test applies exactly these
  (phase by phase, through the named methods ``manifests`` is made of),
* ``gpu_demand(layout)`` – the most GPUs it holds at once, so GPU cases can run side by side,
* ``marks()`` – ``serial``/``disruptive`` when it needs whole nodes or the whole cluster.

Numbers come from the GPU layout in ``ctx`` (the cluster's at run time, the topology's in render mode).
Queues: every case has its own leaf queues under the suite's parent queue. A case that may run beside others gets
GPU quota and limit equal to what it uses: a queue at or below its quota is never reclaimed and such a case never
borrows, so cases running side by side cannot take GPUs from each other. Serial cases size their queues for what
they test (a whole-cluster quota, or quotas that split the cluster).

One module per suite area (:mod:`.gang`, :mod:`.queues`, :mod:`.labels`, :mod:`.preemption`, :mod:`.podgrouper`,
:mod:`.elastic`, :mod:`.placement`, :mod:`.topology`, :mod:`.sharing`, :mod:`.fairness`, :mod:`.consolidation`,
:mod:`.lifecycle`), the
control cases of the first five areas (:mod:`.control`; the later areas keep theirs in their own module), and what
they all share (:mod:`.contract`).
"""
