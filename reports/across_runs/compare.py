"""``python -m kai_conformance.reports compare BASE NEW``: gate a change on "no slower than the base".

BASE and NEW are report directories (or their ``summary.json``). For every metric both sides measured, and each
gated statistic, print base, new and the ratio new / base; a statistic *regresses* when it moved in the metric's
worse direction by more than the threshold:

* lower is better (latencies): ``new > base × (1 + threshold)``;
* higher is better (throughput): ``new < base / (1 + threshold)``, i.e. base / new past the same factor;
* and, for metrics in seconds, the slowdown ``new − base`` exceeds ``min_seconds`` (default 1 s). The
  timestamps behind the latencies (a pod's creationTimestamp, its PodScheduled transition, a container's
  startedAt) are whole seconds in the Kubernetes API, so a latency of 1 s against 2 s is within the clock's
  resolution, not a slowdown of 100 %.

Gated by default: **p50 and p95**. A conformance run measures tens of gangs, so p99 and max are one or two
samples each: a single slow gang (a node's image pull, a noisy neighbour on the CI machine) moves them by any
factor, and a gate on them would fail at random. p50 catches a general slowdown, p95 a fattened tail. p99 and max
are still printed, and ``--statistic`` gates on them where runs are large enough (scale cases).

Metrics present on one side only are listed and not gated. A side whose verdict is ``incomplete`` (an interrupted
run) measured part of its cases only: the comparison is printed, and the gate fails. Exit status: 0 no regression,
1 a regression or an incomplete side, 2 a usage error (a missing or unreadable summary, no metric in common).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kai_conformance.reports.sections.metrics import HIGHER, STATISTICS
from kai_conformance.reports.verdict import INCOMPLETE

SUMMARY = "summary.json"
DEFAULT_THRESHOLD = 0.2
DEFAULT_STATISTICS = ("p50", "p95")
#: Kubernetes API timestamps have a resolution of one second (metav1.Time is RFC 3339 without fractions).
DEFAULT_MIN_SECONDS = 1.0
SECONDS = "s"
OK, REGRESSED, USAGE = 0, 1, 2


class CompareError(Exception):
    """A usage error: the message names the fix."""


@dataclass(frozen=True)
class Row:
    metric: str
    unit: str
    statistic: str
    base: float
    new: float
    gated: bool
    regressed: bool

    @property
    def ratio(self) -> float:
        if self.base == 0:
            return 1.0 if self.new == 0 else math.inf
        return self.new / self.base


@dataclass(frozen=True)
class Comparison:
    rows: list[Row]
    only_base: list[str]
    only_new: list[str]
    threshold: float
    statistics: tuple[str, ...]
    min_seconds: float = 0.0

    @property
    def regressions(self) -> list[Row]:
        return [row for row in self.rows if row.regressed]


def verdict_code(path: Path) -> str:
    """The ``verdict.code`` of a report directory's ``summary.json`` (or of that file); "" when it has none."""
    summary = path / SUMMARY if path.is_dir() else path
    try:
        verdict = json.loads(summary.read_text()).get("verdict")
    except (OSError, ValueError, AttributeError):
        return ""
    return str(verdict.get("code", "")) if isinstance(verdict, dict) else ""


def load_metrics(path: Path) -> dict[str, dict]:
    """The ``metrics`` of a report directory's ``summary.json`` (or of that file)."""
    summary = path / SUMMARY if path.is_dir() else path
    if not summary.is_file():
        raise CompareError(
            f"{path} is neither a report directory with {SUMMARY} nor a {SUMMARY}: pass the --report-dir of a run"
        )
    try:
        data = json.loads(summary.read_text())
    except (OSError, ValueError) as exc:
        raise CompareError(f"{summary} is not readable JSON ({exc}): regenerate it with `reports generate`") from exc
    metrics = data.get("metrics") if isinstance(data, dict) else None
    if not isinstance(metrics, dict):
        return {}
    for name, stats in metrics.items():
        values = [stats.get(s) for s in STATISTICS if s in stats] if isinstance(stats, dict) else [None]
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            raise CompareError(f"{summary}: metric {name!r} is malformed: regenerate it with `reports generate`")
    return metrics


def regressed(base: float, new: float, better: str, threshold: float, floor: float = 0.0) -> bool:
    """Moved the worse way past ``threshold`` (a fraction) and, for lower-is-better, by more than ``floor``."""
    if better == HIGHER:
        return new * (1 + threshold) < base
    return new > base * (1 + threshold) and new - base > floor


def compare(
    base: dict[str, dict],
    new: dict[str, dict],
    threshold: float = DEFAULT_THRESHOLD,
    statistics: Sequence[str] = DEFAULT_STATISTICS,
    only: Sequence[str] = (),
    min_seconds: float = DEFAULT_MIN_SECONDS,
) -> Comparison:
    if threshold < 0:
        raise CompareError(f"--threshold {threshold} is negative: give a fraction such as 0.2 for 20 %")
    if min_seconds < 0:
        raise CompareError(f"--min-seconds {min_seconds} is negative: give 0 to gate on the ratio alone")
    unknown = [s for s in statistics if s not in STATISTICS]
    if unknown:
        raise CompareError(f"unknown statistic {', '.join(unknown)}: choose from {', '.join(STATISTICS)}")
    if only:
        missing = [name for name in only if name not in base and name not in new]
        if missing:
            known = ", ".join(sorted({*base, *new})) or "none"
            raise CompareError(f"no metric named {', '.join(missing)} on either side (measured: {known})")
        base = {k: v for k, v in base.items() if k in only}
        new = {k: v for k, v in new.items() if k in only}
    common = [name for name in base if name in new]
    if not common:
        raise CompareError(
            "BASE and NEW have no metric in common: both must be report directories of runs whose cases "
            "recorded pod timelines (summary.json `metrics`)"
        )
    rows = []
    for name in common:
        better = new[name].get("better", base[name].get("better", ""))
        unit = new[name].get("unit", base[name].get("unit", ""))
        floor = min_seconds if unit == SECONDS else 0.0
        for statistic in STATISTICS:
            if statistic not in base[name] or statistic not in new[name]:
                continue
            b, n = float(base[name][statistic]), float(new[name][statistic])
            gated = statistic in statistics
            rows.append(Row(name, unit, statistic, b, n, gated, gated and regressed(b, n, better, threshold, floor)))
    return Comparison(
        rows,
        only_base=[name for name in base if name not in new],
        only_new=[name for name in new if name not in base],
        threshold=threshold,
        statistics=tuple(statistics),
        min_seconds=min_seconds,
    )


def render(comparison: Comparison) -> str:
    header = f"{'metric [unit]':<30} {'stat':<4} {'base':>10} {'new':>10} {'ratio':>7}  verdict"
    lines = [header, "-" * len(header)]
    for row in comparison.rows:
        verdict = "REGRESSED" if row.regressed else ("ok" if row.gated else "(not gated)")
        ratio = "inf" if math.isinf(row.ratio) else f"{row.ratio:.2f}"
        label = f"{row.metric} [{row.unit}]" if row.unit else row.metric
        lines.append(f"{label:<30} {row.statistic:<4} {row.base:>10.4g} {row.new:>10.4g} {ratio:>7}  {verdict}")
    for side, names in (("base", comparison.only_base), ("new", comparison.only_new)):
        if names:
            lines.append(f"only in {side} (not gated): {', '.join(names)}")
    gate = f"{', '.join(comparison.statistics)} past {comparison.threshold:.0%}"
    if comparison.min_seconds:
        gate += f" and {comparison.min_seconds:g} s"
    if comparison.regressions:
        names = ", ".join(f"{r.metric} {r.statistic} ×{r.ratio:.2f}" for r in comparison.regressions)
        lines.append(f"REGRESSION ({gate}): {names}")
    else:
        lines.append(f"no regression ({gate})")
    return "\n".join(lines)


def run(
    base: Path,
    new: Path,
    threshold: float = DEFAULT_THRESHOLD,
    statistics: Sequence[str] = DEFAULT_STATISTICS,
    only: Sequence[str] = (),
    min_seconds: float = DEFAULT_MIN_SECONDS,
) -> int:
    """Print the comparison; the exit status (0 no regression, 1 regression). Raises CompareError on misuse."""
    comparison = compare(load_metrics(base), load_metrics(new), threshold, statistics, only, min_seconds)
    print(render(comparison))
    incomplete = [f"{side} {path}" for side, path in (("BASE", base), ("NEW", new)) if verdict_code(path) == INCOMPLETE]
    for side in incomplete:
        print(f"INCOMPLETE: {side} is an interrupted run: its metrics cover only the cases that ran, so the gate "
              "cannot pass on them; run it again to the end")  # fmt: skip
    return REGRESSED if comparison.regressions or incomplete else OK
