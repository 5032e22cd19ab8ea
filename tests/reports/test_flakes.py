"""``reports flakes`` over made-up histories: a case whose verdict changed on the same versions is flagged, one whose
versions changed with it is not; an incomplete run's missing cases count for nothing; ``reports merge`` marks the
same flips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kai_conformance.reports import __main__ as cli
from kai_conformance.reports import generate
from kai_conformance.reports.across_runs import flakes
from kai_conformance.reports.model import RunRecords
from kai_conformance.reports.records import CaseRecord
from kai_conformance.reports.runinfo import RunInfo

GANG = "suites/test_gang.py::test_a_gang_that_fits_is_bound_whole[4x1]"
QUEUE = "suites/test_queues.py::test_a_trainjob_lands_in_its_queue"
UPGRADED = "suites/test_preemption.py::test_a_higher_priority_gang_preempts"
K8S = "v1.34.2"
OUTCOMES = {"passed": ("passed", ""), "failed": ("failed", "product"), "broken": ("failed", "infrastructure"),
            "skipped": ("skipped", "")}  # fmt: skip


def run_dir(base: Path, run_id: str, started: float, kai: str, verdicts: dict[str, str], *,
            interrupted: bool = False) -> Path:  # fmt: skip
    """A report directory (its summary.json) of one run on KAI ``kai``: ``verdicts`` case → passed | failed | broken
    | skipped."""
    versions = {"kai": kai, "trainer": "v2.3.0", "jobset": "v0.12.0", "kubernetes": "1.34"}
    info = RunInfo(run_id, started=started, finished=started + 600, combination=f"kai-{kai}+trainer-v2.3.0",
                   versions=versions, kubernetes_server=K8S, interrupted=interrupted)  # fmt: skip
    failing = {"failed", "broken"}
    records = [
        CaseRecord(nodeid, outcome=OUTCOMES[v][0], failure_kind=OUTCOMES[v][1], run_id=run_id,
                   message="AssertionError: boom" if v in failing else "")
        for nodeid, v in verdicts.items()
    ]  # fmt: skip
    directory = base / run_id
    generate.write_reports(directory, [RunRecords(info, records)])
    return directory


@pytest.fixture
def nightly(tmp_path: Path) -> list[Path]:
    """Five nights: KAI v0.16.8 then v0.17.0 (the upgrade fixed UPGRADED); GANG failed once on v0.17.0; the fourth
    night was interrupted before QUEUE."""
    return [
        run_dir(tmp_path, "n1", 1000.0, "v0.16.8", {GANG: "passed", QUEUE: "passed", UPGRADED: "failed"}),
        run_dir(tmp_path, "n2", 2000.0, "v0.17.0", {GANG: "passed", QUEUE: "passed", UPGRADED: "passed"}),
        run_dir(tmp_path, "n3", 3000.0, "v0.17.0", {GANG: "failed", QUEUE: "passed", UPGRADED: "passed"}),
        run_dir(tmp_path, "n4", 4000.0, "v0.17.0", {GANG: "passed"}, interrupted=True),
        run_dir(tmp_path, "n5", 5000.0, "v0.17.0", {GANG: "passed", QUEUE: "skipped", UPGRADED: "passed"}),
    ]


def rows_by_case(found: flakes.History) -> dict[tuple[str, str], flakes.Row]:
    return {(row.nodeid, dict(row.versions)["kai"]): row for row in found.rows}


def test_a_verdict_that_changed_on_the_same_versions_is_a_flip_and_one_that_changed_with_them_is_not(
    nightly: list[Path],
) -> None:
    found = flakes.history(*flakes.load(list(reversed(nightly))))  # given newest first: shown oldest first
    assert [run.info.run_id for run in found.runs] == ["n1", "n2", "n3", "n4", "n5"]
    rows = rows_by_case(found)
    assert found.cells(rows[GANG, "v0.17.0"]) == ["-", "passed", "failed", "passed", "passed"]
    assert rows[GANG, "v0.17.0"].flipped
    assert dict(rows[GANG, "v0.17.0"].versions) == {"kai": "v0.17.0", "trainer": "v2.3.0", "jobset": "v0.12.0",
                                                    "kubernetes": K8S}  # fmt: skip
    # failed on v0.16.8, passed on every v0.17.0 night: two rows, neither flipped
    assert found.cells(rows[UPGRADED, "v0.16.8"]) == ["failed", "-", "-", "-", "-"]
    assert found.cells(rows[UPGRADED, "v0.17.0"]) == ["-", "passed", "passed", "?", "passed"]
    assert not rows[UPGRADED, "v0.16.8"].flipped and not rows[UPGRADED, "v0.17.0"].flipped
    # missing from the interrupted night, skipped on the last: neither is a verdict
    assert found.cells(rows[QUEUE, "v0.17.0"]) == ["-", "passed", "passed", "?", "skipped"]
    assert [row.nodeid for row in found.flips] == [GANG]


def test_the_command_prints_the_history_marks_the_flip_and_exits_1(
    nightly: list[Path], capsys: pytest.CaptureFixture
) -> None:
    assert cli.main(["flakes", *map(str, nightly)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Verdicts of 6 case(s) over 5 run(s), oldest first:"
    assert out[4] == "  #4 n4 (1970-01-01 01:06, incomplete)"
    flagged = [line for line in out if line.startswith(flakes.FLIP)]
    assert flagged == [f"FLIP {GANG} [kai v0.17.0, trainer v2.3.0, jobset v0.12.0, kubernetes {K8S}]: "
                       "- passed failed passed passed"]  # fmt: skip
    assert out[-1] == "1 case(s) changed verdict with the versions unchanged (FLIP)"


def test_without_a_flip_it_says_so_and_exits_0(nightly: list[Path], capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["flakes", *map(str, nightly[:2]), str(nightly[4])]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "No case changed verdict with the versions unchanged."


def test_a_run_whose_verdict_code_is_incomplete_is_shown_so_and_its_missing_cases_do_not_count(
    tmp_path: Path, nightly: list[Path]
) -> None:
    cut = run_dir(tmp_path, "n6", 6000.0, "v0.17.0", {UPGRADED: "passed"})
    summary = cut / generate.JSON
    data = json.loads(summary.read_text())
    data["verdict"]["code"] = flakes.INCOMPLETE
    summary.write_text(json.dumps(data))
    found = flakes.history(*flakes.load([nightly[1], cut]))
    assert [run.incomplete for run in found.runs] == [False, True]
    assert found.cells(rows_by_case(found)[GANG, "v0.17.0"]) == ["passed", "?"] and not found.flips


def test_an_infrastructure_error_beside_passes_is_a_flip_too(tmp_path: Path) -> None:
    """A cluster that fails now and then is what a gate must see as flaky as much as a flaky product."""
    runs = [run_dir(tmp_path, f"r{i}", 100.0 * i, "v0.17.0", {GANG: v}) for i, v in enumerate(["passed", "broken"])]
    found = flakes.history(*flakes.load(runs))
    assert found.cells(found.flips[0]) == ["passed", "broken"]


def test_merge_marks_the_same_flips(tmp_path: Path, nightly: list[Path], capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["merge", str(tmp_path / "merged"), *map(str, nightly)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2:] == [
        "  1 case(s) changed verdict with the versions unchanged:",
        f"FLIP {GANG} [kai v0.17.0, trainer v2.3.0, jobset v0.12.0, kubernetes {K8S}]: - passed failed passed passed",
    ]
    # and the merged directory, read again, gives the same history
    found = flakes.history(*flakes.load([tmp_path / "merged"]))
    assert [row.nodeid for row in found.flips] == [GANG]


def test_a_directory_that_is_no_report_is_one_line_naming_the_fix(tmp_path: Path, capsys) -> None:
    (tmp_path / "empty").mkdir()
    assert cli.main(["flakes", str(tmp_path / "empty")]) == 2
    assert capsys.readouterr().err == (
        f"error: {tmp_path / 'empty'} holds no results: neither .state/records nor summary.json "
        "(is it a --report-dir?)\n"
    )
    assert cli.main(["flakes", str(tmp_path / "nowhere")]) == 2
    assert "is not a directory: pass report directories" in capsys.readouterr().err
