"""Named detectors: pure functions over snapshots that return a :class:`~.verdict.Verdict` with an explanation.

One module per area: :mod:`.verdict` (the core: ``Verdict``, ``all_of``, ``fires``), :mod:`.gang`,
:mod:`.queues`, :mod:`.labels`, :mod:`.eviction`, :mod:`.podgrouper`, and the later areas' own (e.g.
:mod:`.lifecycle`, which judges whole episodes). Every detector is shown to fire on a violating snapshot in
``tests/detectors/test_core.py`` and the areas' ``tests/detectors/test_*.py``.
"""
