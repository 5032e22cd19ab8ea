"""The performance section's plots, drawn with :mod:`reports.plot` (inline SVG, no external asset).

* a latency CDF: for each latency metric (unit seconds), the fraction of samples at or below each latency,
  drawn as a staircase (an empirical CDF steps at every sample);
* latency by gang size: every sample of each latency metric as a point at its gang size.
"""

from __future__ import annotations

from collections.abc import Sequence

from kai_conformance.reports.sections import plot
from kai_conformance.reports.sections.metrics import Metric

SECONDS = "s"


def _latencies(metrics: Sequence[Metric]) -> list[Metric]:
    return [m for m in metrics if m.unit == SECONDS and m.samples]


def cdf_points(values: Sequence[float]) -> list[tuple[float, float]]:
    """The empirical CDF as a staircase: (x, fraction ≤ x), a vertical step at each sample."""
    ordered = sorted(values)
    points: list[tuple[float, float]] = []
    n = len(ordered)
    for index, value in enumerate(ordered):
        points.append((value, index / n))
        points.append((value, (index + 1) / n))
    return points


def latency_cdf(metrics: Sequence[Metric]) -> str:
    """The CDF plot of the latency metrics, or "" when there is none."""
    series = {f"{m.name} ({len(m.samples)})": cdf_points(m.values) for m in _latencies(metrics)}
    return plot.render(series, "latency CDF: fraction of gangs at or below each latency", origin=0.0)


def latency_by_gang_size(metrics: Sequence[Metric]) -> str:
    """Each latency sample at its gang size (x: pods in the gang), or "" when no sample has a gang size."""
    series = {
        m.name: [(float(size), value) for size, values in m.by_gang_size.items() for value in values]
        for m in _latencies(metrics)
    }
    sizes = [size for points in series.values() for size, _ in points]
    return plot.render(series, "latency by gang size (x: pods in the gang)", origin=0.0, x_unit="", y_unit=" s",
                       lines=False, x_min_step=1.0, x_max=max(sizes, default=0.0) + 1)  # fmt: skip
