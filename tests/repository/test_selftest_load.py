"""scripts/selftest_load.py without running the self-tests: its arguments, its hogs started and always stopped (after
the runs, on Ctrl-C, on an error), the failures counted per test from JUnit files, and the summary line."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from scripts import selftest_load
from scripts.selftest_load import Hogs, RunResult, Settings


def test_the_defaults_are_ten_runs_of_the_whole_self_tests_with_a_hog_per_core() -> None:
    settings = selftest_load.parse([])
    assert (settings.runs, settings.hogs) == (10, os.cpu_count())
    assert settings.pytest_args == ("tests", "-n", "auto", "-q", "-p", "no:cacheprovider")
    assert settings.junit_dir is None
    given = selftest_load.parse(["--runs", "3", "--hogs", "0", "--junit-dir", "out", "--", "tests/test_waits.py"])
    assert (given.runs, given.hogs, given.pytest_args, given.junit_dir) == (3, 0, ("tests/test_waits.py",), Path("out"))


def test_the_runs_junit_files_are_kept_where_asked(tmp_path: Path) -> None:
    written: list[Path] = []

    def run(args: Sequence[str], junit: Path) -> RunResult:
        written.append(junit)
        return RunResult(0, 0.0)

    selftest_load.main(["--runs", "2", "--hogs", "0", "--junit-dir", str(tmp_path / "junit")], run=run)
    assert written == [tmp_path / "junit" / "run-1.xml", tmp_path / "junit" / "run-2.xml"]
    assert (tmp_path / "junit").is_dir()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--runs", "0"], "--runs 0: give at least 1 run"),
        (["--hogs", "-1"], "--hogs -1: give 0 (no load) or more busy processes"),
        (["--hog-seconds", "0"], "--hog-seconds 0: give a positive bound"),
    ],
)
def test_a_bad_argument_is_one_line_naming_the_fix(argv: list[str], message: str, capsys) -> None:
    assert selftest_load.main(argv, run=_never) == 2
    assert capsys.readouterr().err == f"selftest_load.py: {message}\n"


def _never(args: Sequence[str], junit: Path) -> RunResult:
    raise AssertionError("no run on a usage error")


def test_the_hogs_run_inside_the_block_and_are_gone_after_it() -> None:
    with Hogs(2, 60) as hogs:
        assert hogs.alive() == 2
    assert hogs.alive() == 0 and all(p.returncode is not None for p in hogs.processes)


def test_the_hogs_are_stopped_when_a_run_is_interrupted_and_the_runs_so_far_are_summed_up(capsys) -> None:
    seen: list[Hogs] = []
    original = selftest_load.Hogs

    class Watched(original):  # type: ignore[misc,valid-type]
        def __enter__(self) -> Hogs:
            seen.append(super().__enter__())
            return seen[-1]

    calls = iter([RunResult(0, 1.0, passed=5), KeyboardInterrupt()])

    def run(args: Sequence[str], junit: Path) -> RunResult:
        assert seen[0].alive() == 2, "the runs happen under load"
        step = next(calls)
        if isinstance(step, BaseException):
            raise step
        return step

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(selftest_load, "Hogs", Watched)
        code = selftest_load.main(["--runs", "5", "--hogs", "2"], run=run)
    assert code == 130 and seen[0].alive() == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "run 1/5: 5 passed, passed (1s)"
    assert out[-1].startswith("selftest-load: 1 run(s) (interrupted after 1 of 5) with 2 CPU hog(s) on ")
    assert out[-1].endswith("0 run(s) failed, 0 distinct test(s) failed")


def test_an_error_in_a_run_stops_the_hogs_too() -> None:
    made: list[Hogs] = []

    def run(args: Sequence[str], junit: Path) -> RunResult:
        raise OSError("disk full")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(selftest_load, "Hogs", lambda n, s: made.append(Hogs(n, s)) or made[-1])
        with pytest.raises(OSError, match="disk full"):
            selftest_load.main(["--runs", "2", "--hogs", "1"], run=run)
    assert made[0].alive() == 0 and made[0].processes


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_waits" name="test_ok" />
<testcase classname="tests.test_waits" name="test_bad[a]"><failure message="x" /></testcase>
<testcase classname="tests.test_waits" name="test_broken"><error message="y" /></testcase>
<testcase classname="tests.test_waits" name="test_skipped"><skipped message="z" /></testcase>
</testsuite></testsuites>"""


def test_failures_are_counted_per_test_over_the_runs_and_summed_up(tmp_path: Path, capsys) -> None:
    junit = tmp_path / "run.xml"
    junit.write_text(JUNIT)
    failed, passed = selftest_load.failed_tests(junit)
    assert failed == ["tests/test_waits.py::test_bad[a]", "tests/test_waits.py::test_broken"] and passed == 1
    assert selftest_load.failed_tests(tmp_path / "none.xml") == (["(no test report: none.xml)"], 0)

    results = iter([RunResult(1, 2.0, ["t::a", "t::b"], 7), RunResult(0, 2.0, [], 9), RunResult(1, 2.0, ["t::a"], 8)])
    code = selftest_load.main(["--runs", "3", "--hogs", "0"], run=lambda args, junit: next(results))
    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    assert lines[:3] == ["run 1/3: 7 passed, 2 failed: t::a, t::b (2s)", "run 2/3: 9 passed, passed (2s)",
                         "run 3/3: 8 passed, 1 failed: t::a (2s)"]  # fmt: skip
    assert lines[3:5] == ["  t::a: failed in 2 of 3 run(s)", "  t::b: failed in 1 of 3 run(s)"]
    assert lines[5] == (
        f"selftest-load: 3 run(s) with 0 CPU hog(s) on {os.cpu_count()} core(s): 2 run(s) failed, "
        "2 distinct test(s) failed"
    )


def test_the_summary_of_clean_runs_says_so() -> None:
    settings = Settings(2, 2, 60.0, ())
    assert selftest_load.summary(settings, [RunResult(0, 1.0, [], 3)] * 2)[-1].endswith(
        "0 run(s) failed, 0 distinct test(s) failed"
    )
