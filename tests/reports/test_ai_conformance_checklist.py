"""The suite's table of the Kubernetes AI Conformance requirements and the checklists it writes, against the
program's own checklists (the shared copies in ../shared/ai-conformance, never copied into the repository): every
id in its category, in order, at its level; only the vendor fields filled; a minor without a checklist takes the
nearest older one and says so; each status follows from the cases (reports/sections/ai_conformance.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from kai_conformance.reports import sample
from kai_conformance.reports.generate import write_reports
from kai_conformance.reports.model import RunRecords, build
from kai_conformance.reports.records import CaseRecord
from kai_conformance.reports.runinfo import RunInfo
from kai_conformance.reports.sections import ai_conformance
from kai_conformance.reports.sections.ai_requirements import (
    CHECKLIST_MINORS,
    METADATA_FIELDS,
    VENDOR_FIELDS,
    checklist_minor,
    in_checklist,
    requirement_of,
)
from tests import crd_schemas

CHECKLISTS_ENV = "KAI_CONFORMANCE_AI_CHECKLISTS"
MODULE = "suites/test_ai_conformance.py"


def checklists_root() -> Path | None:
    """``$KAI_CONFORMANCE_AI_CHECKLISTS``, else ``ai-conformance/`` beside ``$KAI_CONFORMANCE_CRDS`` (CI's
    ../shared/crds), else ../shared/ai-conformance beside the clone (as tests/upstream.py finds its copies)."""
    configured = os.environ.get(CHECKLISTS_ENV)
    if configured:
        return Path(configured)
    crds = os.environ.get(crd_schemas.CRDS_ENV)
    candidates = ([Path(crds).parent / "ai-conformance"] if crds else []) + [
        crd_schemas.ROOT.parent / "shared" / "ai-conformance"
    ]
    return next((c for c in candidates if c.is_dir()), None)


@pytest.fixture(scope="module")
def upstream() -> dict[str, dict]:
    root = checklists_root()
    if root is None:
        reason = (
            f"no AI conformance checklists (set {CHECKLISTS_ENV}, or keep ../shared/ai-conformance beside the clone)"
        )
        if crd_schemas.schemas_required():
            pytest.fail(f"{crd_schemas.REQUIRE_ENV}=1 but {reason}")
        pytest.skip(reason)
    return {m: yaml.safe_load((root / f"KubernetesAIConformance-{m}.yaml").read_text()) for m in CHECKLIST_MINORS}


def assert_fills_only_vendor_fields(written: dict, checklist: dict) -> None:
    """Same categories, the same ids in the same order at the same levels; nothing but vendor fields differ."""
    assert list(written["metadata"]) == list(checklist["metadata"]) == list(METADATA_FIELDS)
    assert written["metadata"]["kubernetesVersion"] == checklist["metadata"]["kubernetesVersion"]
    assert list(written["spec"]) == list(checklist["spec"])
    for category, entries in checklist["spec"].items():
        mine = written["spec"][category]
        assert [e["id"] for e in mine] == [e["id"] for e in entries], category
        for ours, theirs in zip(mine, entries, strict=True):
            assert ours["level"] == theirs["level"], ours["id"]
            # Descriptions are the program's: left out, never rewritten; every other key is a vendor field.
            assert set(ours) - {"id", "level"} <= set(VENDOR_FIELDS) and set(ours) <= set(theirs), ours["id"]
            assert isinstance(ours["evidence"], list) and ours["status"] in ("", "Implemented", "Not Implemented")


@pytest.mark.parametrize("minor", CHECKLIST_MINORS)
def test_the_table_holds_every_requirement_of_each_checklist_in_order_at_its_level(
    minor: str, upstream: dict[str, dict]
) -> None:
    spec = upstream[minor]["spec"]
    assert [(c, e["id"], e["level"]) for c in spec for e in spec[c]] == [
        (r.category, r.id, r.levels[minor]) for r in in_checklist(minor)
    ]


def record(function: str, param: str, outcome: str, kubernetes: str = "v1.36.1", message: str = "") -> CaseRecord:
    return CaseRecord(nodeid=f"{MODULE}::{function}[{param}]", area="ai_conformance", markers=["ai_conformance"],
                      outcome=outcome, failure_kind="product" if outcome == "failed" else "", message=message,
                      run_id="r1", versions={"kubernetes_server": kubernetes})  # fmt: skip


PASSING = [
    ("test_gang_scheduling_positive_x", "a"), ("test_gang_scheduling_negative_x", "b"),
    ("test_robust_controller_controllers_x", "trainer"), ("test_robust_controller_webhook_x", "podgroup"),
    ("test_robust_controller_reconciled_x", "c"), ("test_gpu_sharing_fractions_x", "d"),
]  # fmt: skip


def sections(records: list[CaseRecord], server: str = "v1.36.1") -> list[ai_conformance.Conformance]:
    return ai_conformance.of_report(build([RunRecords(RunInfo(run_id="r1", kubernetes_server=server), records)]))


def test_a_run_on_1_36_writes_the_1_36_checklist_with_only_vendor_fields(tmp_path: Path, upstream: dict) -> None:
    write_reports(tmp_path, [RunRecords(RunInfo(run_id="r1", kubernetes_server="v1.36.1"),
                                        [record(f, p, "passed") for f, p in PASSING])])  # fmt: skip
    written = yaml.safe_load((tmp_path / ai_conformance.CHECKLIST_FILE).read_text())
    assert_fills_only_vendor_fields(written, upstream["1.36"])
    by_id = {e["id"]: e for entries in written["spec"].values() for e in entries}
    assert {i for i, e in by_id.items() if e["status"] == "Implemented"} == {"gang_scheduling", "robust_controller",
                                                                             "gpu_sharing"}  # fmt: skip
    assert any("report.html#case-" in line for line in by_id["gang_scheduling"]["evidence"])
    assert any(line.startswith("versions tested:") for line in by_id["gang_scheduling"]["evidence"])
    assert by_id["ai_inference"]["status"] == "" and "Not assessed" in by_id["ai_inference"]["notes"]
    summary = (tmp_path / "summary.md").read_text()
    html = (tmp_path / "report.html").read_text()
    assert "### Kubernetes AI Conformance (checklist v1.36)" in summary and "✓ met" in summary
    assert "<h2>Kubernetes AI Conformance</h2>" in html and 'href="#case-' in html


def test_a_minor_without_a_checklist_takes_the_nearest_older_one_and_says_so(upstream: dict) -> None:
    assert checklist_minor("1.37") == "1.36" and checklist_minor("1.35") == "1.35"
    [section] = sections([record(f, p, "passed", "v1.37.0") for f, p in PASSING], server="v1.37.0")
    assert section.checklist == "1.36" and "no checklist for Kubernetes v1.37" in section.note
    written = ai_conformance.checklist(section)
    assert_fills_only_vendor_fields(written, upstream["1.36"])
    assert "nearest older one (v1.36)" in written["metadata"]["description"]


def test_gpu_sharing_is_not_applicable_before_1_35(upstream: dict) -> None:
    [section] = sections([record(f, p, "passed", "v1.34.2") for f, p in PASSING], server="v1.34.2")
    rows = {r.requirement.id: r for r in section.rows}
    assert rows["gpu_sharing"].status == ai_conformance.NOT_APPLICABLE
    assert rows["gang_scheduling"].status == ai_conformance.MET
    assert_fills_only_vendor_fields(ai_conformance.checklist(section), upstream["1.34"])


def test_a_failed_part_is_not_met_a_skipped_or_missing_part_not_assessed() -> None:
    failing = [record(f, p, "failed" if "negative" in f else "passed", message="E   partial placement")
               for f, p in PASSING]  # fmt: skip
    [section] = sections(failing)
    rows = {r.requirement.id: r for r in section.rows}
    assert rows["gang_scheduling"].status == ai_conformance.NOT_MET
    assert [c.record.nodeid for c in rows["gang_scheduling"].deciding] == [
        f"{MODULE}::test_gang_scheduling_negative_x[b]"
    ]
    skipped = [record(f, p, "skipped" if "sharing" in f else "passed", message="GPU sharing is off")
               for f, p in PASSING if "reconciled" not in f]  # fmt: skip
    [section] = sections(skipped)
    rows = {r.requirement.id: r for r in section.rows}
    assert (
        rows["gpu_sharing"].status == ai_conformance.NOT_ASSESSED and "GPU sharing is off" in rows["gpu_sharing"].reason
    )
    assert rows["robust_controller"].status == ai_conformance.NOT_ASSESSED
    assert "reconciled: no case ran" in rows["robust_controller"].reason


def test_every_case_of_the_suite_names_a_requirement_part() -> None:
    from kai_conformance.suites import test_ai_conformance as suite

    tests = [name for name in dir(suite) if name.startswith("test_")]
    assert tests and all(requirement_of(f"{MODULE}::{name}") for name in tests), tests
    found = [requirement_of(f"{MODULE}::{name}") for name in tests]
    parts = {(judged[0].id, judged[1]) for judged in found if judged}
    assert parts == {(r.id, p) for r in ai_conformance.REQUIREMENTS for p in r.parts}


def test_the_sample_writes_a_checklist(tmp_path: Path, upstream: dict) -> None:
    from kai_conformance.reports.generate import merge

    merge(tmp_path / "out", sample.write_run_dirs(tmp_path / "runs"), sample.TITLE)
    written = yaml.safe_load((tmp_path / "out" / ai_conformance.CHECKLIST_FILE).read_text())
    assert_fills_only_vendor_fields(written, upstream["1.35"])
    gang = next(e for e in written["spec"]["schedulingOrchestration"] if e["id"] == "gang_scheduling")
    assert gang["status"] == "Not Implemented" and "negative" in gang["evidence"][0]
