"""The report's known-bugs section (reports/sections/known_bugs.py): per version column, each known bug of the versions under
test, whether they have it and whether this run saw it, in the Markdown, the HTML and a line per bug in
summary.json; "seen" only where the bug's case failed as its strict xfail naming the bug."""

from __future__ import annotations

import json
from pathlib import Path

from kai_conformance.reports.generate import write_reports
from kai_conformance.reports.model import RunRecords, build
from kai_conformance.reports.records import CaseRecord
from kai_conformance.reports.runinfo import RunInfo
from kai_conformance.reports.sections import known_bugs

STALE = "suites/test_lifecycle.py::test_a_gang_completing_pod_by_pod_is_not_evicted_as_stale[2-pods]"
WAITED = "suites/test_lifecycle_terminal.py::test_a_gang_that_waited_sheds_its_unschedulable_condition_once_bound[w]"
GONE_TTL = (
    "suites/test_lifecycle_terminal.py::test_a_failed_trainjob_does_not_make_its_deleted_jobset_again[ttl-failed]"
)
GONE_HAND = (
    "suites/test_lifecycle_terminal.py::test_a_failed_trainjob_does_not_make_its_deleted_jobset_again[by-hand-failed]"
)

NO_GANG = "suites/test_podgroup_api.py::test_a_podgroup_without_a_gang_is_accepted[min-member-0-and-min-subgroup-0]"


def _run(versions: dict[str, str], *records: CaseRecord) -> RunRecords:
    run = RunInfo("run-1", combination="c", versions={**versions, "kubernetes": "1.35"})
    return RunRecords(run, [CaseRecord(r.nodeid, outcome=r.outcome, failure_kind=r.failure_kind, message=r.message,
                                       run_id="run-1", versions=run.versions) for r in records])  # fmt: skip


def _xfailed(nodeid: str, reason: str) -> CaseRecord:
    return CaseRecord(nodeid, outcome="xfailed", failure_kind="product", message=f"known deviation: {reason}\n\nE ...")


def _by_key(results: list[known_bugs.BugResult]) -> dict[str, known_bugs.BugResult]:
    return {r.bug.key: r for r in results}


def test_on_v0_17_0_and_v2_3_0_the_cases_xfailed_for_their_bugs_are_seen() -> None:
    report = build([_run(
        {"kai": "v0.17.0", "trainer": "v2.3.0", "jobset": "v0.12.0"},
        _xfailed(STALE, "KAI v0.17 lifecycle: KAI #1968: the scheduler's pod informer drops Succeeded pods"),
        CaseRecord(WAITED, outcome="passed"),
        _xfailed(GONE_TTL, "Trainer #3779 in v2.3.0: once its JobSet failed"),
        _xfailed(GONE_HAND, "KAI #1209 in v0.17.0: something else entirely"),
        _xfailed(NO_GANG, "KAI #1944 in v0.17.0: the PodGroup CRD refuses minMember 0 and minSubGroup 0 (no gang)"),
    )])  # fmt: skip
    found = _by_key(known_bugs.of_report(report))
    assert (found["KAI #1968"].applies, found["KAI #1968"].result) == (True, known_bugs.SEEN)
    assert (found["KAI #1888"].applies, found["KAI #1888"].result) == (False, known_bugs.NOT_SEEN)
    assert found["Trainer #3779"].result == known_bugs.SEEN
    # an xfail for another bug's reason is not this bug seen
    assert found["Trainer #3737"].result.startswith("not judged")
    assert found["KAI #1944"].result == known_bugs.SEEN and found["KAI #1448"].result == known_bugs.NO_CASE
    assert found["KAI PR #2096"].result == known_bugs.NOT_RUN and found["KAI PR #2096"].applies
    assert found["Trainer #3008"].applies is None
    assert "JobSet" not in {r.bug.component for r in found.values()}  # no known JobSet bug yet


def test_a_pass_where_the_table_says_the_version_has_the_bug_and_a_failure_are_never_seen() -> None:
    report = build([_run(
        {"kai": "v0.16.8", "trainer": "v2.3.0"},
        CaseRecord(WAITED, outcome="failed", failure_kind="product", message="XPASS(strict) KAI #1888"),
        CaseRecord(GONE_TTL, outcome="failed", failure_kind="product", message="E  failed-stays-failed #3779"),
    )])  # fmt: skip
    found = _by_key(known_bugs.of_report(report))
    assert found["KAI #1888"].applies and found["KAI #1888"].result == known_bugs.UNEXPECTED_PASS
    assert found["Trainer #3779"].result.startswith("failed")


def test_main_and_master_builds_are_judged_by_what_they_carry() -> None:
    report = build([_run({"kai": "main", "trainer": "master", "jobset": "main"}, CaseRecord(STALE, outcome="passed"),
                         CaseRecord(NO_GANG, outcome="passed"))])  # fmt: skip
    found = _by_key(known_bugs.of_report(report))
    assert (found["KAI #1944"].applies, found["KAI #1944"].result) == (False, known_bugs.NOT_SEEN)
    assert (found["KAI #1968"].applies, found["KAI #1968"].result) == (False, known_bugs.NOT_SEEN)
    assert found["KAI PR #2096"].applies and found["KAI #1209"].applies
    assert not found["Trainer #3779"].applies and not found["Trainer #3737"].applies


def test_summary_json_has_a_line_per_bug_and_the_markdown_and_html_a_section(tmp_path: Path) -> None:
    run = _run({"kai": "v0.17.0", "trainer": "v2.3.0", "jobset": "v0.12.0"}, _xfailed(STALE, "KAI #1968: evicted"))
    written = write_reports(tmp_path, [run])
    lines = json.loads(written.json.read_text())["known_bugs"]
    assert {line["bug"] for line in lines} == {b.key for b in known_bugs.KNOWN_BUGS if b.component != "jobset"}
    stale = next(line for line in lines if line["bug"] == "KAI #1968")
    assert stale["applies"] is True and stale["result"] == "seen" and stale["version"] == "v0.17.0"
    assert stale["cases"] == [{"nodeid": STALE, "status": "xfailed"}] and "2012" in stale["source"]
    markdown = written.markdown.read_text()
    assert "### Known upstream bugs (this run saw 1 of the " in markdown and "| [KAI #1968](" in markdown
    assert 'id="known-bugs"' in written.html.read_text()
