"""Merging several runs' report directories into one report and one matrix, with one command."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kai_conformance.reports import __main__ as cli
from kai_conformance.reports import allure_files, generate, sample

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="{e}"
 failures="{f}" skipped="0" tests="{t}" time="1.5"><testcase classname="suites.test_gang" name="test_a"/></testsuite>
</testsuites>"""


@pytest.fixture
def run_dirs(tmp_path: Path) -> list[Path]:
    """The two sample runs as report directories, each with JUnit XML and an Allure result of its own."""
    directories = sample.write_run_dirs(tmp_path / "in")
    for index, directory in enumerate(directories):
        (directory / "junit.xml").write_text(JUNIT.format(e=index, f=index, t=10 + index))
        results = directory / "allure-results"
        results.mkdir()
        (results / f"{index}0000000-result.json").write_text("{}")
        (results / "environment.properties").write_text(f"run=only-{index}\n")
    return directories


def test_one_command_merges_runs_into_one_matrix_with_every_file(tmp_path: Path, run_dirs: list[Path]) -> None:
    out = tmp_path / "merged"
    assert cli.main(["merge", str(out), *map(str, run_dirs)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["runs"]) == 2 and len(summary["columns"]) == 2
    assert summary["verdict"]["code"] == "not-conformant"
    gang = next(b for b in summary["matrix"] if b["behaviour"].endswith("does_not_fit_gets_no_pod_bound"))
    assert sorted(cell["status"] for cell in gang["cells"].values()) == ["failed", "passed"]
    # diagnostics are copied next to the merged report and linked from it
    failed = next(c for c in summary["cases"] if c["status"] == "failed")
    assert failed["attachments"] and all(
        a.startswith(f"runs/{failed['run_id']}/diagnostics/") for a in failed["attachments"]
    )
    for attachment in failed["attachments"]:
        assert (out / attachment).is_file()
        assert f'href="{attachment}"' in (out / "report.html").read_text()
    # one JUnit document, one suite per run, named after its combination
    root = ET.parse(out / "junit.xml").getroot()
    assert [s.get("name") for s in root] == [f"pytest [{d.name}]" for d in run_dirs]
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("21", "1", "1")
    # Allure results side by side; environment and categories written for the merged whole
    results = {p.name for p in (out / "allure-results").iterdir()}
    assert {"00000000-result.json", "10000000-result.json", "categories.json", "environment.properties"} <= results
    environment = (out / "allure-results" / "environment.properties").read_text()
    assert "KAI.Scheduler=v0.17.0 | v0.16.8" in environment and "only-" not in environment


def test_a_merged_report_merges_again_without_counting_a_run_twice(tmp_path: Path, run_dirs: list[Path]) -> None:
    first = generate.merge(tmp_path / "first", run_dirs[:1])
    again = generate.merge(tmp_path / "again", [tmp_path / "first", *run_dirs])
    assert len(first.report.runs) == 1 and len(again.report.runs) == 2
    assert len(again.report.cases) == sum(len(generate.load(d)[0].records) for d in run_dirs)
    for case in again.report.cases:
        for _, link in case.attachments:
            assert link.count("runs/") == 1 and (tmp_path / "again" / link).is_file()


def test_merging_into_an_input_or_from_an_empty_directory_says_why(tmp_path: Path, run_dirs: list[Path],
                                                                   capsys: pytest.CaptureFixture) -> None:  # fmt: skip
    assert cli.main(["merge", str(run_dirs[0]), *map(str, run_dirs)]) == 2
    assert "is also an input: merge into a new directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert cli.main(["merge", str(tmp_path / "out"), str(tmp_path / "empty")]) == 2
    assert (
        "holds no results: neither .state/records nor summary.json (is it a --report-dir?)" in capsys.readouterr().err
    )


def test_generate_rewrites_a_directorys_reports_and_appends_the_step_summary(
    tmp_path: Path, run_dirs: list[Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    step_summary = tmp_path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    assert cli.main(["generate", str(run_dirs[1])]) == 0
    output = capsys.readouterr().out
    assert output.startswith("Not conformant: 2 product failures\n") and "appended the Markdown summary" in output
    assert step_summary.read_text() == (run_dirs[1] / "summary.md").read_text() + "\n"
    assert (run_dirs[1] / "report.html").is_file()


def test_allure_environment_escapes_keys_and_values() -> None:
    from kai_conformance.reports.runinfo import RunInfo

    text = allure_files.environment_text([RunInfo("r", sources={"kai chart": "a=b\nc"})])
    assert "source.kai\\ chart=a=b\\nc\n" in text


def test_merging_or_regenerating_made_up_data_keeps_its_mark(tmp_path: Path, run_dirs: list[Path]) -> None:
    assert cli.main(["sample", str(tmp_path / "sample")]) == 0
    assert cli.main(["merge", str(tmp_path / "merged"), str(tmp_path / "sample")]) == 0
    merged = json.loads((tmp_path / "merged" / generate.JSON).read_text())
    assert merged["title"] == sample.TITLE
    assert cli.main(["merge", str(tmp_path / "mixed"), str(tmp_path / "merged"), str(run_dirs[0])]) == 0
    assert "(sample data)" in json.loads((tmp_path / "mixed" / generate.JSON).read_text())["title"]
    assert cli.main(["generate", str(tmp_path / "merged")]) == 0
    assert json.loads((tmp_path / "merged" / generate.JSON).read_text())["title"] == sample.TITLE
    assert cli.main(["merge", str(tmp_path / "named"), str(tmp_path / "sample"), "--title", "Mine"]) == 0
    assert json.loads((tmp_path / "named" / generate.JSON).read_text())["title"] == "Mine"
