"""Writing a report directory's reports, and merging several report directories into one.

A report directory (``--report-dir``) holds, after a run::

    report.html        the self-contained conformance report (open it in any browser, offline)
    ai-conformance.yaml  the Kubernetes AI Conformance checklist, filled in (reports/sections/ai_conformance.py)
    summary.md         the Markdown summary (PR comment, $GITHUB_STEP_SUMMARY)
    summary.json       the same for machines: verdict, totals, matrix, runs, performance metrics, known bugs and every case record
    junit.xml          JUnit XML (pytest --junitxml) for CI systems
    allure-results/    Allure results (allure-pytest), plus environment.properties and categories.json
    diagnostics/<case>/  what failed cases left behind (events, pods, PodGroups, logs, objects)
    .state/            run state: run.json, records/ (one JSON per case), cluster.json

``summary.json`` is complete (runs and records, attachment paths relative to its directory), so a merged
directory can itself be merged again.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from kai_conformance.reports import allure_files, html, junit, markdown
from kai_conformance.reports.model import Case, Cell, Report, RunRecords, Status, build
from kai_conformance.reports.records import CaseRecord, read_all
from kai_conformance.reports.runinfo import RunInfo
from kai_conformance.reports.sections import ai_conformance, known_bugs, metrics, runtime_table

HTML = "report.html"
MARKDOWN = "summary.md"
JSON = "summary.json"
JUNIT = "junit.xml"
ALLURE = "allure-results"
DIAGNOSTICS = "diagnostics"
STATE = ".state"
SCHEMA = "kai-conformance/summary/v1"
DEFAULT_TITLE = "KAI Scheduler conformance report"


@dataclass(frozen=True)
class Written:
    html: Path
    markdown: Path
    json: Path
    report: Report


class NoResults(Exception):
    """A directory holds neither run state nor a summary."""


# -------------------------------------------------------------------------------------------------- loading
def load(directory: Path) -> list[RunRecords]:
    """The runs of a report directory: from its run state when present, else from its ``summary.json``."""
    state = directory / STATE
    info = RunInfo.load(state)
    records = read_all(state)
    if info is not None or records:
        if info is None:  # a run that died before writing its run info (SIGKILL, a crash): it never finished
            info = RunInfo(run_id=next((r.run_id for r in records if r.run_id), directory.name), interrupted=True)
        return [RunRecords(info, [r for r in records if not r.run_id or r.run_id == info.run_id])]
    summary = directory / JSON
    if summary.is_file():
        data = json.loads(summary.read_text())
        cases = [CaseRecord.from_json(c) for c in data.get("cases", [])]
        return [
            RunRecords(run, [c for c in cases if c.run_id == run.run_id])
            for run in (RunInfo.from_json(r) for r in data.get("runs", []))
        ]
    raise NoResults(f"{directory} holds no results: neither {STATE}/records nor {JSON} (is it a --report-dir?)")


# -------------------------------------------------------------------------------------------------- writing
def summary_json(report: Report) -> dict:
    verdict = report.verdict
    return {
        "schema": SCHEMA,
        "title": report.title,
        "generated": report.generated,
        "verdict": {"code": verdict.code, "headline": verdict.headline, "status": verdict.status.key},
        "assumptions": report.assumptions,
        "totals": {status.key: report.totals[status] for status in Status},
        "areas": [
            {"area": a.area, "title": a.title, "counts": {s.key: n for s, n in a.counts.items()}} for a in report.areas
        ],
        "columns": [
            {"key": c.key, "combination": c.combination, "versions": dict(c.versions), "kubernetes": c.kubernetes}
            for c in report.columns
        ],
        "matrix": [
            {
                "behaviour": b.key,
                "title": b.title,
                "area": b.area,
                "cells": {key: _cell_json(cell) for key, cell in b.cells.items()},
            }
            for b in report.behaviours
        ],
        "runs": [
            {**run.to_json(), "component_versions": [v.to_json() for v in run.component_versions()]}
            for run in report.runs
        ],
        "metrics": metrics.metrics_json(metrics.of_report(report)),
        "runtimes": (table.to_json() if (table := runtime_table.of_report(report)) else None),
        "known_bugs": known_bugs.to_json(known_bugs.of_report(report)),
        "cases": [_case_json(case) for case in report.cases],
    }


def _cell_json(cell: Cell) -> dict:
    return {
        "status": cell.status.key if cell.status else None,
        "ratio": cell.ratio,
        "counts": {s.key: n for s, n in cell.counts.items()},
    }


def _case_json(case: Case) -> dict:
    return {
        **case.record.to_json(),
        "run_id": case.run.run_id,
        "status": case.status.key,
        "category": case.category.name if case.category else "",
    }


def artifacts_of(directory: Path) -> dict[str, str]:
    """The other artifacts present in ``directory``, for the HTML's list (label → relative link)."""
    found = {
        "JUnit XML for CI systems": JUNIT,
        "Allure results: `allure serve` or `allure generate` them (Allure CLI)": ALLURE + "/",
        "Markdown summary": MARKDOWN,
        "JSON summary for machines": JSON,
        "diagnostics of failed cases": DIAGNOSTICS + "/",
        "Kubernetes AI Conformance checklist (YAML)": ai_conformance.CHECKLIST_FILE,
    }
    return {label: link for label, link in found.items() if link in (JSON, MARKDOWN) or (directory / link).exists()}


def write_reports(directory: Path, runs: list[RunRecords], title: str = DEFAULT_TITLE) -> Written:
    """Write the HTML, Markdown and JSON reports of ``runs`` into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    report = build(runs, title)
    paths = Written(directory / HTML, directory / MARKDOWN, directory / JSON, report)
    paths.json.write_text(json.dumps(summary_json(report), indent=1, sort_keys=False))
    paths.markdown.write_text(markdown.render(report, HTML))
    ai_conformance.write(directory, report, HTML)
    paths.html.write_text(html.render(report, artifacts_of(directory)))
    return paths


def append_step_summary(markdown_file: Path) -> Path | None:
    """Append the Markdown summary to ``$GITHUB_STEP_SUMMARY`` when that is set (GitHub Actions)."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    with open(target, "a", encoding="utf-8") as out:
        out.write(markdown_file.read_text() + "\n")
    return Path(target)


# -------------------------------------------------------------------------------------------------- merging
def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)


SAMPLE_MARK = "(sample data)"


def inherited_title(directories: list[Path]) -> str:
    """The title the inputs' reports had (``summary.json``): kept when they agree, else the default; made-up data
    keeps its mark whatever it is merged with, so a sample is never mistaken for a run."""
    titles = set()
    for directory in directories:
        try:
            titles.add(str(json.loads((directory / JSON).read_text()).get("title") or DEFAULT_TITLE))
        except (OSError, ValueError, AttributeError):
            titles.add(DEFAULT_TITLE)
    if any(SAMPLE_MARK in t for t in titles):
        return (
            next(t for t in sorted(titles) if SAMPLE_MARK in t)
            if len(titles) == 1
            else f"{DEFAULT_TITLE} {SAMPLE_MARK}"
        )
    return titles.pop() if len(titles) == 1 else DEFAULT_TITLE


def merge(out: Path, directories: list[Path], title: str | None = None) -> Written:
    """One report (and one matrix) from several report directories; their files are copied under ``out``.
    ``title``: None keeps the inputs' (:func:`inherited_title`)."""
    title = title or inherited_title(directories)
    out = out.resolve()
    for directory in directories:
        if directory.resolve() == out:
            raise NoResults(f"the output {out} is also an input: merge into a new directory")
    merged: list[RunRecords] = []
    seen: set[str] = set()
    junit_sources: list[tuple[Path, str]] = []
    for directory in directories:
        runs = load(directory)
        for entry in runs:
            if entry.run.run_id in seen:
                continue
            seen.add(entry.run.run_id)
            prefix = f"runs/{entry.run.run_id}/"
            for record in entry.records:
                moved = []
                for attachment in record.attachments:
                    target = attachment if attachment.startswith(prefix) else prefix + attachment
                    if (directory / attachment).is_file():
                        _copy(directory / attachment, out / target)
                    moved.append(target)
                record.attachments = moved
            merged.append(entry)
        results = directory / ALLURE
        for path in sorted(results.glob("*")) if results.is_dir() else ():
            if path.is_file() and path.name not in allure_files.OWN_FILES:
                _copy(path, out / ALLURE / path.name)
        if (directory / JUNIT).is_file():
            label = ", ".join(e.run.combination or e.run.run_id for e in runs) or directory.name
            junit_sources.append((directory / JUNIT, label))
    if junit_sources:
        junit.merge(junit_sources, out / JUNIT)
    if (out / ALLURE).is_dir():
        allure_files.write(out / ALLURE, [entry.run for entry in merged])
    return write_reports(out, merged, title)
