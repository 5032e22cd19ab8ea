"""Every case of a run appears in every view of the report (HTML "All cases" and matrix, summary.md's area rows
and matrix), under its area's heading: an area marker without a heading once left 7 cases out of report.html."""

from __future__ import annotations

import re

from kai_conformance.fixtures.plugin.markers import AREA_MARKERS
from kai_conformance.reports import html, markdown
from kai_conformance.reports.model import AREAS, RunRecords, build
from kai_conformance.reports.records import CaseRecord
from kai_conformance.reports.runinfo import RunInfo

RUNS = [
    RunInfo("run-1", combination="kai-v0.17.0+trainer-v2.3.0", versions={"kai": "v0.17.0", "kubernetes": "1.35"}),
    RunInfo("run-2", combination="kai-v0.16.8+trainer-v2.3.0", versions={"kai": "v0.16.8", "kubernetes": "1.35"}),
]
UNKNOWN_AREA = "quantum"  # records of a newer suite may name an area this report does not know


def test_every_area_marker_has_a_heading_and_every_heading_a_marker() -> None:
    assert [m for m in AREA_MARKERS if m not in AREAS] == [], "area markers without a heading in reports/model.py"
    assert set(AREAS) - set(AREA_MARKERS) == {"control", ""}  # control cases without an area; records without one


def records(run: RunInfo) -> list[CaseRecord]:
    areas = [*AREA_MARKERS, UNKNOWN_AREA]
    made = [
        CaseRecord(f"suites/test_{area}.py::test_{area}_case[{i}]", outcome=outcome, title=f"{area} behaves {i}",
                   area=area, run_id=run.run_id, markers=[area])
        for area in areas
        for i, outcome in enumerate(("passed", "skipped"))
    ]  # fmt: skip
    made.append(CaseRecord("suites/test_gang.py::test_control", outcome="passed", title="a control", area="",
                           markers=["control"], run_id=run.run_id))  # fmt: skip
    return made


def test_every_case_of_a_run_appears_in_every_view() -> None:
    report = build([RunRecords(run, records(run)) for run in RUNS])
    cases = report.cases
    assert len(cases) == 2 * (2 * (len(AREA_MARKERS) + 1) + 1)
    page = html.render(report)
    all_cases = page.split('<section id="cases">', 1)[1].split("</section>", 1)[0]
    assert sorted(re.findall(r'<details class="case [^"]*" id="([^"]+)"', all_cases)) == sorted(c.anchor for c in cases)
    for anchor in re.findall(r'href="#(case-[^"]+)"', page):  # every link to a case finds it
        assert f'id="{anchor}"' in page, anchor
    matrix = page.split('<section id="matrix">', 1)[1].split("</section>", 1)[0]
    behaviours = {c.record.nodeid.split("[", 1)[0].removeprefix("suites/") for c in cases}
    assert {key for key in behaviours if f'<code class="b-key">{key}</code>' not in matrix} == set()
    summary = markdown.render(report)
    area_rows = [line.split(" | ", 1)[0].removeprefix("| ") for line in summary.splitlines() if line.startswith("| ")]
    for area in [*AREA_MARKERS, UNKNOWN_AREA]:
        heading = AREAS.get(area, f"Area “{area}”")
        assert heading in area_rows, f"summary.md names no area row {heading!r}"
        assert area not in area_rows, f"summary.md's area row for {area!r} is the bare marker"
    matrix_rows = summary.split("### Matrix", 1)[1]
    assert len(report.behaviours) == len(AREA_MARKERS) + 2
    assert all(f"| {b.title} |" in matrix_rows for b in report.behaviours), (
        "a behaviour missing from summary.md's matrix"
    )
    assert "<details>\n\n</details>" not in summary and not re.search(
        r"<details>\s*<summary>[^<]*</summary>\s*</details>", summary
    )


def test_failure_text_names_the_exception_not_the_module_it_lives_in() -> None:
    failed = CaseRecord("suites/test_gang.py::test_x", outcome="failed", failure_kind="infrastructure", area="gang",
                        title="x", run_id="run-1", exception="kai_conformance.fixtures.errors.ServerError",
                        message="E   fixtures.errors.ServerError: apply Queue q → 500\nE     raised by "
                        "kai_conformance.fixtures.waits.WaitTimeout")  # fmt: skip
    report = build([RunRecords(RUNS[0], [failed])])
    (case,) = report.cases
    assert case.headline == "ServerError: apply Queue q → 500"
    for text in (html.render(report), markdown.render(report)):
        assert "fixtures.errors" not in text and "fixtures.waits" not in text
        assert "ServerError: apply Queue q → 500" in text


def test_the_environment_shows_readable_rows_not_the_stack_record_s_keys() -> None:
    from kai_conformance.reports import sample

    report = build([RunRecords(info, recs) for info, recs in sample.runs()])
    environment = html.render(report).split('<section id="environment">', 1)[1].split("</section>", 1)[0]
    assert "components." not in environment and "version_source" not in environment
    assert "Install mode" in environment and "KAI Scheduler" in environment
    stack = {"mode": "installed", "components": {"kai": {"version": "v1", "version_source": "installed",
                                                         "chart": "oci://x", "established": "installed"}},
             "nodes": {"image": "kindest/node"}, "loaded_images": ["a", "b"]}  # fmt: skip
    info = RunInfo("r", stack=stack)
    assert info.installed_details() == [("Install mode", "installed"), ("KAI Scheduler chart", "oci://x"),
                                        ("Loaded images", "a, b")]  # fmt: skip


def test_summary_md_has_no_empty_or_repeating_details_block() -> None:
    bare = CaseRecord("suites/test_gang.py::test_bare", outcome="failed", failure_kind="product", area="gang",
                      title="bare", run_id="run-1", message="")  # fmt: skip
    one_line = CaseRecord("suites/test_gang.py::test_one", outcome="failed", failure_kind="product", area="gang",
                          title="one", run_id="run-1", message="E   AssertionError: gang split")  # fmt: skip
    deep = CaseRecord("suites/test_gang.py::test_deep", outcome="failed", failure_kind="product", area="gang",
                      title="deep", run_id="run-1", message="E   AssertionError: gang split\nE     bound: 2")  # fmt: skip
    summary = markdown.render(build([RunRecords(RUNS[0], [bare, one_line, deep])]))
    blocks = re.findall(r"<details><summary>(.*?)</summary>(.*?)</details>", summary, re.S)
    assert len(blocks) == 1 and "bound: 2" in blocks[0][1]
    assert all(re.sub(r"[`\s]|text", "", body) for _, body in blocks)
    assert "AssertionError: gang split" in summary.split("**one**", 1)[1]
