"""An interrupted run is never conformant: its verdict code is ``incomplete`` (short of a product failure it saw),
in summary.json, summary.md, the HTML banner and the GitHub Action's outputs; ``reports merge``, ``diff`` and
``compare`` treat it as incomplete; its counts are the cases pytest counted, and a case that finished on a worker
after the interrupt is named, not counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kai_conformance.fixtures.github_action import Outcome
from kai_conformance.fixtures.plugin.reporting import counted_by_pytest, uncounted
from kai_conformance.reports import generate
from kai_conformance.reports.__main__ import main
from kai_conformance.reports.model import RunRecords, build
from kai_conformance.reports.records import CaseRecord
from kai_conformance.reports.runinfo import RunInfo
from kai_conformance.reports.verdict import INCOMPLETE
from tests.reports.test_compare import run_dir

LATE = "suites/test_gang.py::test_late[2]"


def case(name: str, outcome: str, kind: str = "", run_id: str = "run-1") -> CaseRecord:
    return CaseRecord(f"suites/test_gang.py::{name}", outcome=outcome, failure_kind=kind, run_id=run_id, area="gang")


def interrupted_run(*records: CaseRecord, late: tuple[str, ...] = (), run_id: str = "run-1") -> RunRecords:
    """A made-up run that SIGTERM ended: six cases passed and three were skipped as pytest counted them; the
    ``late`` cases finished on a worker after the interrupt, so their records exist but pytest never counted them."""
    counted = [case(f"test_ok[{i}]", "passed", run_id=run_id) for i in range(6)]
    counted += [case(f"test_skip[{i}]", "skipped", run_id=run_id) for i in range(3)]
    late_records = [CaseRecord(nodeid, outcome="passed", run_id=run_id, area="gang") for nodeid in late]
    info = RunInfo(run_id, exit_status=143, interrupted=True, uncounted=list(late))
    return RunRecords(info, [*counted, *records, *late_records])


def test_an_interrupted_run_without_a_failure_is_incomplete_never_conformant() -> None:
    report = build([interrupted_run(late=(LATE, "suites/test_gang.py::test_late[3]"))])
    verdict = report.verdict
    assert verdict.code == INCOMPLETE and verdict.status.key != "passed"
    assert verdict.headline == "Incomplete: the run was interrupted after 9 cases ran to a verdict"
    # pytest's line said "6 passed, 3 skipped": the report counts the same, the late cases named but not counted
    assert {s.key: n for s, n in report.totals.items()} == {"passed": 6, "skipped": 3}
    assert "Counted as pytest counted them: 6 passed, 3 skipped." in verdict.detail
    late = "2 cases finished on a worker after the interrupt and are not counted, as pytest did not count them: "
    assert f"{late}{LATE}, suites/test_gang.py::test_late[3]." in verdict.detail
    assert all(c.record.nodeid != LATE for c in report.cases)


def test_the_same_cases_run_to_the_end_are_conformant() -> None:
    """The control: the incomplete verdict comes from the interruption alone."""
    run = interrupted_run()
    run.run.interrupted = False
    assert build([run]).verdict.code == "conformant"


def test_a_failure_seen_in_an_interrupted_run_still_makes_it_not_conformant() -> None:
    verdict = build([interrupted_run(case("test_split", "failed", "product"))]).verdict
    assert verdict.code == "not-conformant"
    assert "The run was interrupted" in verdict.detail


def test_an_interrupted_run_with_infrastructure_errors_is_incomplete_too() -> None:
    assert build([interrupted_run(case("test_api", "error", "infrastructure"))]).verdict.code == INCOMPLETE


def test_every_report_and_the_action_s_outputs_say_incomplete(tmp_path: Path) -> None:
    written = generate.write_reports(tmp_path, [interrupted_run(late=(LATE,))])
    summary = json.loads(written.json.read_text())
    assert summary["verdict"]["code"] == INCOMPLETE and summary["verdict"]["status"] != "passed"
    assert summary["totals"]["passed"] == 6 and summary["runs"][0]["uncounted"] == [LATE]
    markdown = written.markdown.read_text()
    assert "Incomplete: the run was interrupted after 9 cases" in markdown and "Conformant" not in markdown
    page = written.html.read_text()
    assert "Incomplete: the run was interrupted after 9 cases" in page and 'class="verdict v-broken"' in page
    outcome = Outcome.read(tmp_path, 143, started=0)
    outputs = outcome.outputs(tmp_path)
    assert outputs["verdict"] == INCOMPLETE and outputs["passed"] == "6"
    assert outputs["failure"].startswith("Incomplete: the run was interrupted after 9 cases ran to a verdict")
    # the same directory generated again from its run state keeps the late case out of the counts
    again = build(generate.load(tmp_path))
    assert again.verdict.code == INCOMPLETE and sum(again.totals.values()) == 9


def test_a_merge_with_an_interrupted_run_is_incomplete(tmp_path: Path) -> None:
    finished = interrupted_run(run_id="run-2")
    finished.run.interrupted, finished.run.uncounted = False, []
    generate.write_reports(tmp_path / "a", [interrupted_run(late=(LATE,))])
    generate.write_reports(tmp_path / "b", [finished])
    merged = generate.merge(tmp_path / "out", [tmp_path / "a", tmp_path / "b"])
    assert merged.report.verdict.code == INCOMPLETE
    assert sum(merged.report.totals.values()) == 18  # the late case of run-1 stays uncounted after the merge
    assert build(generate.load(tmp_path / "b")).verdict.code == "conformant"  # the control


def test_diff_against_an_interrupted_run_fails_and_says_why(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    finished = interrupted_run()
    finished.run.interrupted = False
    generate.write_reports(tmp_path / "base", [finished])
    generate.write_reports(tmp_path / "same", [finished])
    generate.write_reports(tmp_path / "new", [interrupted_run()])
    assert main(["diff", str(tmp_path / "base"), str(tmp_path / "same")]) == 0  # the control
    capsys.readouterr()
    assert main(["diff", str(tmp_path / "base"), str(tmp_path / "new")]) == 1
    out = capsys.readouterr().out
    assert "NEW is an interrupted run (verdict incomplete): 0 verdicts changed among the cases that ran" in out


def test_compare_against_an_interrupted_run_fails_the_gate(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    base, new = run_dir(tmp_path, "base", 1.0), run_dir(tmp_path, "new", 1.0)
    assert main(["compare", str(base), str(new)]) == 0  # the control: the same timings pass
    summary = json.loads((new / generate.JSON).read_text())
    summary["verdict"]["code"] = INCOMPLETE
    (new / generate.JSON).write_text(json.dumps(summary))
    capsys.readouterr()
    assert main(["compare", str(base), str(new)]) == 1
    assert f"INCOMPLETE: NEW {new} is an interrupted run" in capsys.readouterr().out


class _Reporter:
    def __init__(self, stats: dict) -> None:
        self.stats = stats


class _Plugins:
    def __init__(self, reporter: _Reporter | None) -> None:
        self.reporter = reporter

    def get_plugin(self, name: str) -> _Reporter | None:
        return self.reporter if name == "terminalreporter" else None


class _Config:
    def __init__(self, reporter: _Reporter | None) -> None:
        self.pluginmanager = _Plugins(reporter)


def _report(nodeid: str, when: str, outcome: str) -> pytest.TestReport:
    return pytest.TestReport(nodeid, ("x.py", 0, nodeid), {}, outcome, None, when)


def test_the_cases_pytest_counted_are_those_it_filed_under_an_outcome() -> None:
    """A passed setup is filed under "" and counts for nothing in pytest's line: a case whose call report never
    reached the main process is not counted, though its worker wrote its record."""
    stats = {"": [_report("a", "setup", "passed"), _report("late", "setup", "passed")],
             "passed": [_report("a", "call", "passed")], "skipped": [_report("s", "setup", "skipped")],
             "deselected": ["an item, not a report"]}  # fmt: skip
    counted = counted_by_pytest(_Config(_Reporter(stats)))  # type: ignore[arg-type]
    assert counted == {"a", "s"}
    records = [CaseRecord(nodeid) for nodeid in ("a", "s", "late")]
    assert uncounted(records, counted) == ["late"]
    assert uncounted(records, counted_by_pytest(_Config(None))) == []  # type: ignore[arg-type]  # no terminal


def test_a_run_that_died_before_writing_its_run_info_is_incomplete(tmp_path: Path) -> None:
    """SIGKILL (or a crash) mid-run: the cases' records are there, the run info the session's end writes is not, so
    `reports generate` must not call the cases that happened to finish conformant."""
    from kai_conformance.reports.records import write

    for sequence, record in enumerate(interrupted_run().records):
        write(record, tmp_path / generate.STATE, "gw0", sequence)
    assert build(generate.load(tmp_path)).verdict.code == INCOMPLETE
    RunInfo("run-1").save(tmp_path / generate.STATE)  # the control: the run's end wrote that it finished
    assert build(generate.load(tmp_path)).verdict.code == "conformant"


def test_a_run_whose_cluster_could_not_be_provisioned_is_inconclusive_with_the_reason_not_interrupted() -> None:
    """pytest calls the stopped run "Interrupted", but nobody interrupted it: the headline says what stopped it."""
    reason = "KAI Scheduler is not installed. fix: pass --install always"
    info = RunInfo("run-1", exit_status=2, interrupted=True, not_provisioned=reason)
    verdict = build([RunRecords(info, [case("test_gang[0]", "failed", "infrastructure")])]).verdict
    assert verdict.code == "inconclusive" and verdict.status.key != "passed"
    assert verdict.headline == "Inconclusive: the run's cluster could not be provisioned, so no case was observed"
    assert verdict.detail.startswith(reason)
    interrupted = build([RunRecords(RunInfo("run-1", exit_status=2, interrupted=True), [])]).verdict
    assert interrupted.code == INCOMPLETE  # the same stop without the provisioning failure stays incomplete
