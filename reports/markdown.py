"""The Markdown summary: short enough for a PR comment (GitHub's limit is 65,536 characters) and for
``$GITHUB_STEP_SUMMARY``; verdict first, failures with their explanation, the matrix when there are several
version combinations."""

from __future__ import annotations

from html import escape

from kai_conformance.reports.model import STATUS_ORDER, Case, Report, Status
from kai_conformance.reports.sections import ai_conformance, apiload, known_bugs, metrics, runtime_table

MAX_LISTED = 25
MAX_EXPLANATION = 600
MAX_HEADLINE = 160
MAX_CHARS = 60_000

VERDICT_ICON = {"not-conformant": "❌", "inconclusive": "⚠️", "expectations-outdated": "❕", "conformant": "✅",
                "conformant-assumed": "☑️", "empty": "⭕", "incomplete": "⏹️"}  # fmt: skip


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _case_line(case: Case, report: Report) -> str:
    param = f" `[{case.param_id}]`" if case.param_id else ""
    column = f" — {case.column.short}" if len(report.columns) > 1 else ""
    return f"**{_cell(case.title)}**{param}{column}"


def _details(case: Case) -> str:
    body = "\n\n".join(f"{v.heading}: {v.explanation}" for v in case.failing_verdicts) or case.exception_text
    body = _clip(body, MAX_EXPLANATION).replace("```", "ʼʼʼ")
    summary = _clip(_cell(case.headline), MAX_HEADLINE)
    diagnostics = "Diagnostics: " + ", ".join(f"`{link}`" for _, link in case.attachments) if case.attachments else ""
    if not body.strip() or body.strip() == case.headline.strip():  # nothing to fold away: no empty block
        return "\n".join(line for line in (escape(summary), diagnostics) if line)
    lines = [f"<details><summary>{escape(summary or 'details')}</summary>", "", "```text", body, "```"]
    lines += [diagnostics] if diagnostics else []
    lines += ["", "</details>"]
    return "\n".join(lines)


def _metrics_table(measured: list[metrics.Metric]) -> list[str]:
    if not measured:
        return []
    out = ["### Performance", "", "| Metric | Unit | Count | " + " | ".join(metrics.STATISTICS) + " |",
           "| --- | --- | ---: | " + " | ".join("---:" for _ in metrics.STATISTICS) + " |"]  # fmt: skip
    for metric in measured:
        stats = metric.stats
        values = " | ".join(f"{stats[name]:.3g}" for name in metrics.STATISTICS)
        out.append(f"| {metric.name} | {metric.unit} | {stats['count']} | {values} |")
    return [*out, "", "<sub>Nearest-rank percentiles; the HTML report plots them.</sub>", ""]


def render(report: Report, html_name: str = "report.html") -> str:
    verdict = report.verdict
    totals = report.totals
    out = [f"> **{a}**" for a in report.assumptions] + ([""] if report.assumptions else [])
    out += [f"## {VERDICT_ICON[verdict.code]} {report.title}: {verdict.headline}", "", verdict.detail, ""]
    out.append(
        " · ".join(f"{s.symbol} {totals[s]} {s.label}" for s in STATUS_ORDER if totals[s])
        or "No case records were found."
    )
    out.append("")
    out += ["| Area | " + " | ".join(f"{s.symbol} {s.label}" for s in STATUS_ORDER) + " |",
            "| --- | " + " | ".join("---:" for _ in STATUS_ORDER) + " |"]  # fmt: skip
    for area in report.areas:
        out.append(f"| {area.title} | " + " | ".join(str(area.counts[s] or "") for s in STATUS_ORDER) + " |")
    out.append("")
    sections = (
        ("❌ Product failures", "The system under test misbehaved.", report.product_failures),
        ("⚠️ Infrastructure failures", "Not observed (cluster, install or API); says nothing about the product.",
         report.infrastructure_failures),
        ("❕ Unexpected passes", "A documented deviation no longer happens: update the expectations.",
         report.with_status(Status.XPASSED)),
    )  # fmt: skip
    for heading, lede, cases in sections:
        if not cases:
            continue
        out += [f"### {heading} ({len(cases)})", "", lede, ""]
        for case in cases[:MAX_LISTED]:
            category = f" · _{case.category.name}_" if case.category and case.status is Status.BROKEN else ""
            out.append(f"- {_case_line(case, report)}{category}")
            out.append("")
            details = _details(case)
            if details:
                out += ["  " + details.replace("\n", "\n  "), ""]
        if len(cases) > MAX_LISTED:
            out.append(f"…and {len(cases) - MAX_LISTED} more: see the HTML report.")
            out.append("")
    if len(report.columns) > 1:
        out += ["### Matrix", "", "| Behaviour | " + " | ".join(_cell(c.short) for c in report.columns) + " |",
                "| --- | " + " | ".join(":---:" for _ in report.columns) + " |"]  # fmt: skip
        for area in report.areas:
            for behaviour in (b for b in report.behaviours if b.area == area.area):
                cells = []
                for column in report.columns:
                    cell = behaviour.cells.get(column.key)
                    cells.append(f"{cell.status.symbol} {cell.ratio}" if cell and cell.status else "·")
                out.append(f"| {_cell(behaviour.title)} | " + " | ".join(cells) + " |")
        out.append("")
    out += known_bugs.markdown(known_bugs.of_report(report))
    out += runtime_table.markdown(runtime_table.of_report(report))
    out += ai_conformance.markdown(ai_conformance.of_report(report), html_name)
    out += _metrics_table(metrics.of_report(report))
    for run in report.runs:
        versions = run.component_versions()
        if versions:
            where = f" (run `{run.run_id}`)" if len(report.runs) > 1 else ""
            out += [f"**Stack{where}:** " + " · ".join(_cell(f"{v.name} {v.text}") for v in versions), ""]
        if run.nodes:
            where = f" (run `{run.run_id}`)" if len(report.runs) > 1 else ""
            out += [f"**Nodes{where}:** " + _cell(run.nodes), ""]
        load = apiload.of_run(run.api_load)
        if load is not None:
            where = f" (run `{run.run_id}`)" if len(report.runs) > 1 else ""
            out += [f"**API load and overhead{where}:** " + _cell(apiload.markdown_line(load)), ""]
    runs = ", ".join(f"`{run.run_id}`" for run in report.runs)
    out.append(f"<sub>Runs {runs}. Full report: `{html_name}` (self-contained HTML, in the report artifact).</sub>")
    text = "\n".join(out) + "\n"
    if len(text) > MAX_CHARS:
        text = text[: MAX_CHARS - 200] + "\n\n…(truncated: see the HTML report)\n"
    return text
