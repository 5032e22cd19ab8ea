"""The self-contained HTML conformance report: one file, inline CSS and SVG, no external asset, opens offline.

Rendered with Jinja2 (autoescaped) from ``reports/templates/report.html.j2``; the stylesheet
``reports/templates/report.css`` is inlined. Links to diagnostics are relative to the report file, so they
work from a CI artifact as well as from a local directory.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path

import jinja2
from markupsafe import Markup

from kai_conformance.reports.model import STATUS_ORDER, Case, Report, Status, area_heading, without_module_paths
from kai_conformance.reports.runinfo import RunInfo, gpu_topology
from kai_conformance.reports.sections import (
    ai_conformance,
    apiload,
    known_bugs,
    metrics,
    perfplots,
    plot,
    runtime_table,
    timeline,
)

TEMPLATES = Path(__file__).resolve().parent / "templates"


def when(epoch: float | None) -> str:
    return "—" if epoch is None else time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def svg_timeline(case: Case) -> Markup:
    return Markup(timeline.render(case.timelines, f"pod timeline of {case.title}"))  # the SVG escapes its texts


def svg_series(case: Case) -> Markup:
    return Markup(plot.render(case.record.series, f"observed over time in {case.title}"))  # the SVG escapes its texts


def svg_latency_cdf(measured: list[metrics.Metric]) -> Markup:
    return Markup(perfplots.latency_cdf(measured))  # the SVG escapes its texts


def svg_latency_by_gang_size(measured: list[metrics.Metric]) -> Markup:
    return Markup(perfplots.latency_by_gang_size(measured))  # the SVG escapes its texts


def api_load_rows(run: RunInfo) -> list[tuple[str, str]]:
    load = apiload.of_run(run.api_load)
    return apiload.rows(load) if load is not None else []


def base_environment() -> jinja2.Environment:
    """The Jinja environment of every page of reports/templates: autoescaped (every text comes from records),
    strict about undefined names, with the ``when`` filter."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=when)
    return env


@functools.cache
def _environment() -> jinja2.Environment:
    """One environment for every report: the template is compiled once (a twentieth of a second), and again only
    when its file changes (Jinja's ``auto_reload`` checks the file's time on every use)."""
    env = base_environment()
    env.filters.update(duration=duration, gpu_topology=gpu_topology, readable=without_module_paths)
    env.globals.update(
        svg_timeline=svg_timeline,
        svg_series=svg_series,
        svg_latency_cdf=svg_latency_cdf,
        svg_latency_by_gang_size=svg_latency_by_gang_size,
        api_load_rows=api_load_rows,
        Status=Status,
        STATUS_ORDER=STATUS_ORDER,
        area_heading=area_heading,
        STATISTICS=metrics.STATISTICS,
    )
    return env


def render(report: Report, artifacts: dict[str, str] | None = None) -> str:
    """The report as one HTML document. ``artifacts``: other files of the report directory (label → link)."""
    env = _environment()
    css = (TEMPLATES / "report.css").read_text()
    return env.get_template("report.html.j2").render(
        report=report,
        css=Markup(css),
        artifacts=artifacts or {},
        verdict=report.verdict,
        measured=metrics.of_report(report),
        runtimes=runtime_table.of_report(report),
        ai_sections=ai_conformance.of_report(report),
        AI_CHECKLIST=ai_conformance.CHECKLIST_FILE,
        known_bugs=known_bugs.of_report(report),
    )
