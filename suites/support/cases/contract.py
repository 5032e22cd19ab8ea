"""What every case shares: the manifest type, the marks that say how a case shares the cluster
(:class:`WholeCluster`, :class:`SideBySide`), its GPU demand, and the skips for a layout that cannot express it."""

from __future__ import annotations

from typing import Any

import pytest

from kai_conformance.clusters.layout import GpuLayout

Manifest = dict[str, Any]
SERIAL = pytest.mark.serial
DISRUPTIVE = pytest.mark.disruptive
SLOW = pytest.mark.slow
#: Never in a slice (clusters/slices.py): what KAI's node pools do not partition places the case's pods.
SHARED_WORKERS = pytest.mark.shared_workers


def param(case: Any) -> Any:
    """``pytest.param`` of a case with its id and marks."""
    return pytest.param(case, id=case.id, marks=case.marks())


def skip_unless(condition: bool, reason: str) -> None:
    """Skip a case this cluster's layout cannot express (an existing cluster may be small or GPU-less)."""
    if not condition:
        pytest.skip(reason)


def require_gpus(layout: GpuLayout, gpus: int) -> None:
    skip_unless(layout.total >= gpus, f"needs {gpus} GPU(s); the cluster has {layout.total} ({layout.describe()})")


def held_if_fits(gpus: int, layout: GpuLayout) -> int:
    """GPUs a fixed-size case holds: all of them, or none on a cluster too small (its test then skips)."""
    return gpus if gpus <= layout.total else 0


class WholeCluster:
    """A case that at some point holds every GPU (it fills the cluster, evicts or reclaims): serial, disruptive.

    A subclass with a true ``slow`` field is also ``slow``: a long variant of a behaviour that a quicker case of the
    PR-gate selection (``-m "not slow"``) already covers.
    """

    def gpu_demand(self, layout: GpuLayout) -> int:
        return layout.total

    def marks(self) -> tuple[pytest.MarkDecorator, ...]:
        return (SERIAL, DISRUPTIVE, SLOW) if getattr(self, "slow", False) else (SERIAL, DISRUPTIVE)


class SideBySide:
    """A case that may run beside others: it holds only what its ``gpu_demand`` says, in its own quota."""

    def marks(self) -> tuple[pytest.MarkDecorator, ...]:
        return ()
