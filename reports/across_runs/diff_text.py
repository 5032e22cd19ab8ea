"""The terminal summary of ``reports diff``: versions, verdict changes, differing observations (first lines),
metrics past the threshold. The HTML page (``reports/across_runs/diff_html.py``) has the full texts."""

from __future__ import annotations

from kai_conformance.reports.across_runs import compare
from kai_conformance.reports.across_runs.diff import Diff
from kai_conformance.reports.model import plural


def _first_line(text: str, limit: int = 150) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "—"
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _metric_line(row: compare.Row, verdict: str) -> str:
    unit = f" {row.unit}" if row.unit else ""
    return f"  {row.metric} {row.statistic}: {row.base:.4g} → {row.new:.4g}{unit} (×{row.ratio:.2f})  {verdict}"


def render(result: Diff) -> str:
    """The terminal summary (the HTML page has the full texts)."""
    lines = [f"What changed: BASE {result.base_dir} → NEW {result.new_dir}", "", "Versions"]
    width = max(len(row.what) for row in result.versions)
    for row in result.versions:
        change = f"{row.base} → {row.new}" if row.changed else f"{row.new} (same)"
        lines.append(f"  {row.what:<{width}}  {change}")
    changes = result.verdict_changes
    lines += ["", f"Verdicts: {plural(len(changes), 'change')} of {plural(len(result.cases), 'case')}"]
    for case in changes:
        lines.append(f"  {case.change}  {case.key}" + (f"  [{case.combination}]" if case.combination else ""))
        if case.reason:
            lines.append(f"      why: {_first_line(case.reason)}")
    differing = result.observation_changes
    lines += ["", f"Observations: {plural(len(differing), 'case')} differ"]
    for case in differing:
        lines.append(f"  {case.key}" + (f"  [{case.combination}]" if case.combination else ""))
        for change in case.observations:
            lines += [f"    {change.observation}", f"      BASE: {_first_line(change.base)}",
                      f"      NEW:  {_first_line(change.new)}"]  # fmt: skip
    found = result.metrics
    lines += ["", f"Metrics ({found.gate})" if found.comparison else "Metrics: no metric in common, not compared"]
    lines += [_metric_line(row, "REGRESSED") for row in found.regressions]
    lines += [_metric_line(row, "improved") for row in found.improvements]
    if found.comparison and not found.regressions and not found.improvements:
        lines.append("  nothing past the threshold")
    for side, names in (("BASE", found.only_base), ("NEW", found.only_new)):
        if names:
            lines.append(f"  only in {side} (not gated): {', '.join(names)}")
    return "\n".join([*lines, "", result.headline + ".", result.detail])
