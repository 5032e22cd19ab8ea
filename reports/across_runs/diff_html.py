"""The self-contained HTML page of ``reports diff``: one file, the report's inline CSS, no external asset.

Rendered with Jinja2 (autoescaped: every text comes from records) from ``reports/templates/diff.html.j2``
with the conformance report's stylesheet ``reports/templates/report.css`` inlined, so statuses keep their
colours and symbols.
"""

from __future__ import annotations

import time

import jinja2
from markupsafe import Markup

from kai_conformance.reports.across_runs.diff import Diff
from kai_conformance.reports.html import TEMPLATES, base_environment


def _environment() -> jinja2.Environment:
    return base_environment()


def render(result: Diff) -> str:
    css = (TEMPLATES / "report.css").read_text()
    return _environment().get_template("diff.html.j2").render(diff=result, css=Markup(css), generated=time.time())
