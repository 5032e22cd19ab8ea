"""The report's "Kubernetes AI Conformance" section and the checklist every run writes (``ai-conformance.yaml``).

Each requirement the suite judges (reports/sections/ai_requirements.py) gets a status from its cases in
suites/test_ai_conformance.py:

* **met**: every part of its test plan has a case that passed, and no case of it failed;
* **not met**: a case of it failed on the product (or is a known deviation): the case that saw it is named;
* **not assessed**: a part did not run, was skipped (the skip says why: e.g. the stack runs no GPU sharing) or hit
  an infrastructure error; nothing is claimed either way;
* **not applicable**: the requirement is not in the checklist of the cluster's Kubernetes minor.

Every other requirement of the checklist is listed as not assessed by this suite. The checklist is the program's for
the minor the API server reported (a minor without one takes the nearest older checklist, and says so); only the
fields a vendor fills are filled: ``status`` (Implemented / Not Implemented for met / not met, empty where the suite
did not assess), ``evidence`` (case ids, report anchors, versions tested) and ``notes``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kai_conformance.reports.model import Case, Report, Status
from kai_conformance.reports.sections.ai_requirements import (
    IMPLEMENTED,
    NOT_IMPLEMENTED,
    REQUIREMENTS,
    SOURCE,
    Requirement,
    checklist_minor,
    in_checklist,
    requirement_of,
)

AREA = "ai_conformance"
CHECKLIST_FILE = "ai-conformance.yaml"
MET, NOT_MET, NOT_ASSESSED, NOT_APPLICABLE = "met", "not met", "not assessed", "not applicable"
SYMBOLS = {MET: "✓", NOT_MET: "✗", NOT_ASSESSED: "○", NOT_APPLICABLE: "–"}
#: Statuses of a case that say the product does not do what the requirement asks.
_NOT_MET = (Status.FAILED, Status.XPASSED, Status.XFAILED)
SELECT_HINT = "run pytest suites -m ai_conformance (docs/clusters.md)"


@dataclass
class Row:
    requirement: Requirement
    level: str  # in the checklist used; empty when not in it
    status: str
    reason: str
    cases: list[Case] = field(default_factory=list)
    #: The cases that decided the status (the failed ones for "not met").
    deciding: list[Case] = field(default_factory=list)

    @property
    def symbol(self) -> str:
        return SYMBOLS[self.status]


@dataclass
class Conformance:
    """The section for the runs on one Kubernetes minor."""

    minor: str  # of the cluster ("" when no run recorded the API server's version)
    checklist: str  # the minor whose checklist is used
    note: str  # why another checklist than the cluster's minor (empty when none)
    rows: list[Row]
    versions: list[str]
    runs: list[str]

    @property
    def judged(self) -> list[Row]:
        return [r for r in self.rows if r.requirement.judged]


def minor_of(version: str) -> str:
    """``v1.35.5`` or ``1.35`` → ``1.35``; empty when unknown."""
    parts = version.strip().lstrip("v").split(".")
    return f"{parts[0]}.{parts[1].split('-')[0].split('+')[0]}" if len(parts) >= 2 and parts[0].isdigit() else ""


def _case_minor(case: Case) -> str:
    return minor_of(case.run.kubernetes_server or case.record.versions.get("kubernetes_server", "")) or minor_of(
        case.record.versions.get("kubernetes", "") or case.run.versions.get("kubernetes", "")
    )


def judge(requirement: Requirement, cases: list[Case], level: str) -> Row:
    """A requirement's row from the cases that judge it (module docstring)."""
    if not level:
        return Row(requirement, "", NOT_APPLICABLE, "not in this checklist", cases)
    if not requirement.judged:
        return Row(requirement, level, NOT_ASSESSED, "not assessed by this suite", cases)
    failed = [c for c in cases if c.status in _NOT_MET and not c.is_control]
    if failed:
        return Row(requirement, level, NOT_MET, "; ".join(f"{c.title}: {c.headline}" for c in failed), cases, failed)
    missing = []
    for part in requirement.parts:
        of_part = [c for c in cases if (requirement_of(c.record.nodeid) or (None, ""))[1] == part]
        if any(c.status is Status.PASSED for c in of_part):
            continue
        if not of_part:
            missing.append(f"{part}: no case ran ({SELECT_HINT})")
        else:
            missing.append(f"{part}: " + "; ".join(f"{c.status.label}: {c.headline}" for c in of_part))
    if missing:
        return Row(requirement, level, NOT_ASSESSED, " · ".join(missing), cases)
    return Row(requirement, level, MET, f"every part of {requirement.kar}'s test plan passed", cases, cases)


def of_report(report: Report) -> list[Conformance]:
    """The section per Kubernetes minor of the report's runs (one, unless runs on several minors were merged)."""
    cases = [c for c in report.cases if requirement_of(c.record.nodeid) and c.area == AREA]
    minors: dict[str, list[Case]] = {}
    for run in report.runs:
        minor = minor_of(run.kubernetes_server) or minor_of(run.versions.get("kubernetes", ""))
        minors.setdefault(minor, [])
    for case in cases:
        minors.setdefault(_case_minor(case), []).append(case)
    if "" in minors and len(minors) > 1 and not minors[""]:
        del minors[""]
    out = []
    for minor, of_minor in sorted(minors.items()):
        used = checklist_minor(minor) if minor else checklist_minor("99.0")
        if not minor:
            note = f"no run recorded the API server's version: the newest checklist (v{used}) is used"
        elif used != minor:
            note = f"no checklist for Kubernetes v{minor} is known: the nearest older one (v{used}) is used"
        else:
            note = ""
        levels = {r.id: r.levels[used] for r in in_checklist(used)}
        rows = [judge(r, [c for c in of_minor if requirement_of(c.record.nodeid)[0] is r],  # type: ignore[index]
                      levels.get(r.id, "")) for r in REQUIREMENTS if r.id in levels or r.judged]  # fmt: skip
        runs = sorted({c.run.run_id for c in of_minor} or {r.run_id for r in report.runs})
        out.append(Conformance(minor, used, note, rows, _versions(report, runs), runs))
    return out


def _versions(report: Report, run_ids: Iterable[str]) -> list[str]:
    found = []
    for run in report.runs:
        if run.run_id not in run_ids:
            continue
        parts = [f"{v.name} {v.version}" for v in run.component_versions()]
        if run.kubernetes_server:
            parts.append(f"Kubernetes {run.kubernetes_server}")
        if parts:
            found.append(", ".join(parts))
    return sorted(set(found))


# ------------------------------------------------------------------------------------------------ the checklist
def _evidence(row: Row, conformance: Conformance, html_name: str) -> list[str]:
    cases = row.deciding or row.cases
    lines = [f"{c.record.nodeid}: {c.status.label} ({html_name}#{c.anchor})" for c in cases]
    if lines:
        lines += [f"versions tested: {v}" for v in conformance.versions]
    return lines


def _notes(row: Row) -> str:
    if row.status == NOT_ASSESSED and not row.requirement.judged:
        return "Not assessed by kai-conformance (it judges gang_scheduling, robust_controller, gpu_sharing)."
    what = {MET: "Met", NOT_MET: "Not met", NOT_ASSESSED: "Not assessed"}[row.status]
    return f"{what} by kai-conformance ({row.requirement.kar}, KAI Scheduler with Kubeflow Trainer): {row.reason}"


def checklist(conformance: Conformance, html_name: str = "report.html") -> dict[str, Any]:
    """The program's checklist of the minor used, with the vendor fields of the suite's requirements filled."""
    description = (
        f"Evidence from kai-conformance runs {', '.join(conformance.runs)} (KAI Scheduler as the gang scheduler, "
        f"Kubeflow Trainer TrainJobs as the workload). Requirement descriptions: the program's checklist "
        f"KubernetesAIConformance-{conformance.checklist}.yaml."
    )
    if conformance.note:
        description += f" {conformance.note[0].upper()}{conformance.note[1:]}."
    metadata = {"kubernetesVersion": f"v{conformance.checklist}", "platformName": "", "platformVersion": "",
                "vendorName": "", "websiteUrl": "", "repoUrl": "", "documentationUrl": "", "productLogoUrl": "",
                "description": description, "contactEmailAddress": ""}  # fmt: skip
    spec: dict[str, list[dict[str, Any]]] = {}
    for row in conformance.rows:
        if not row.level:
            continue
        status = {MET: IMPLEMENTED, NOT_MET: NOT_IMPLEMENTED}.get(row.status, "")
        spec.setdefault(row.requirement.category, []).append(
            {
                "id": row.requirement.id,
                "level": row.level,
                "status": status,
                "evidence": _evidence(row, conformance, html_name),
                "notes": _notes(row),
            }
        )
    return {"metadata": metadata, "spec": spec}


def header(conformance: Conformance) -> str:
    return (
        f"# Kubernetes AI Conformance checklist v{conformance.checklist}, filled in by kai-conformance.\n"
        f"# Requirements, categories and levels: {SOURCE}; descriptions are the program's (not repeated here).\n"
        "# status: Implemented (met), Not Implemented (not met), empty (not assessed by this suite: yours to fill).\n"
    )


def file_name(conformance: Conformance, count: int) -> str:
    return CHECKLIST_FILE if count == 1 else f"ai-conformance-v{conformance.minor or conformance.checklist}.yaml"


def write(directory: Path, report: Report, html_name: str = "report.html") -> list[Path]:
    """Write the checklist(s) beside the report; returns their paths."""
    sections = of_report(report)
    paths = []
    for conformance in sections:
        path = directory / file_name(conformance, len(sections))
        body = yaml.safe_dump(checklist(conformance, html_name), sort_keys=False, allow_unicode=True, width=120)
        path.write_text(header(conformance) + "\n" + body)
        paths.append(path)
    return paths


# ------------------------------------------------------------------------------------------------ the summary
def markdown(sections: list[Conformance], html_name: str) -> list[str]:
    out: list[str] = []
    for conformance in sections:
        where = f" (checklist v{conformance.checklist})"
        out += [f"### Kubernetes AI Conformance{where}", ""]
        if conformance.note:
            out += [f"_{conformance.note[0].upper()}{conformance.note[1:]}._", ""]
        out += ["| Requirement | Level | Status | Cases |", "| --- | --- | --- | --- |"]
        for row in conformance.rows:
            if not row.requirement.judged and row.status == NOT_ASSESSED:
                continue
            cases = ", ".join(f"[{c.param_id or c.title}]({html_name}#{c.anchor})" for c in row.deciding or row.cases)
            reason = row.reason.replace("|", "\\|").replace("\n", " ")
            level = row.level or "—"
            out.append(f"| `{row.requirement.id}` | {level} | {row.symbol} {row.status}: {reason} | {cases or '—'} |")
        others = [r.requirement.id for r in conformance.rows if not r.requirement.judged and r.status == NOT_ASSESSED]
        if others:
            out += ["", f"Not assessed by this suite: {', '.join(f'`{o}`' for o in others)}."]
        out += ["", f"<sub>Written out as `{file_name(conformance, len(sections))}` beside this report.</sub>", ""]
    return out
