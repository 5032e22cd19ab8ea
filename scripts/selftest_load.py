#!/usr/bin/env python3
"""Run the self-tests N times while every core is kept busy, and say which tests failed in which runs.

    python scripts/selftest_load.py                 # 10 runs of `pytest tests -n auto`, one CPU hog per core
    python scripts/selftest_load.py --runs 30 --hogs 4 -- tests/test_flows_chaos.py -n 0

A self-test that passes only on an idle machine is a defect (docs/performance.md, "The self-tests under load"):
this is the check. The hogs are busy loops in processes of their own, as many as ``--hogs`` (default: one per
core), started before the first run and stopped after the last, on Ctrl-C and on any error too; each also ends by
itself after ``--hog-seconds`` or as soon as this script is gone, so none outlives it. Each run writes a JUnit file;
the failed tests are counted per test over the runs. The last line is the summary; the exit status is 0 when
every run passed, 1 when one failed, 2 on a usage error.

Arguments after ``--`` replace the default pytest arguments (``tests -n auto -q -p no:cacheprovider``).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PYTEST_ARGS = ("tests", "-n", "auto", "-q", "-p", "no:cacheprovider")
#: A hog: spin until its deadline, or until its parent (this script) is gone (then it is re-parented).
HOG = """
import os, sys, time
deadline, parent = float(sys.argv[1]), os.getppid()
while time.time() < deadline and os.getppid() == parent:
    for _ in range(200_000):
        pass
"""


class UsageError(Exception):
    """A bad argument: one line naming the fix."""


@dataclass
class Settings:
    runs: int
    hogs: int
    hog_seconds: float
    pytest_args: tuple[str, ...]
    #: Where each run's JUnit file is kept (its failures' messages), or None: a scratch directory, removed.
    junit_dir: Path | None = None


def parse(argv: Sequence[str]) -> Settings:
    own, _, given = _split(list(argv))
    parser = argparse.ArgumentParser(prog="selftest_load.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="self-test runs (default 10)")
    parser.add_argument("--hogs", type=int, default=os.cpu_count() or 1, help="busy processes (default: one per core)")
    parser.add_argument("--hog-seconds", type=float, default=7200.0,
                        help="the longest a hog lives, whatever happens to this script (default 7200)")  # fmt: skip
    parser.add_argument("--junit-dir", type=Path, help="keep each run's JUnit file here (run-N.xml)")
    args = parser.parse_args(own)
    if args.runs < 1:
        raise UsageError(f"--runs {args.runs}: give at least 1 run")
    if args.hogs < 0:
        raise UsageError(f"--hogs {args.hogs}: give 0 (no load) or more busy processes")
    if args.hog_seconds <= 0:
        raise UsageError(f"--hog-seconds {args.hog_seconds:g}: give a positive bound")
    pytest_args = tuple(given) if given else DEFAULT_PYTEST_ARGS
    return Settings(args.runs, args.hogs, args.hog_seconds, pytest_args, args.junit_dir)


def _split(argv: list[str]) -> tuple[list[str], bool, list[str]]:
    if "--" not in argv:
        return argv, False, []
    at = argv.index("--")
    return argv[:at], True, argv[at + 1 :]


class Hogs:
    """``count`` busy processes, from ``with`` to its end (an exception or Ctrl-C included)."""

    def __init__(self, count: int, seconds: float) -> None:
        self.count, self.seconds = count, seconds
        self.processes: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Hogs:
        deadline = time.time() + self.seconds
        try:
            for _ in range(self.count):
                self.processes.append(subprocess.Popen([sys.executable, "-c", HOG, str(deadline)]))
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def alive(self) -> int:
        return sum(1 for p in self.processes if p.poll() is None)


@dataclass
class RunResult:
    code: int
    seconds: float
    failed: list[str] = field(default_factory=list)
    passed: int = 0


def failed_tests(junit: Path) -> tuple[list[str], int]:
    """(node ids of the failed or errored tests, how many passed) from a JUnit file; a run that wrote none (it
    crashed before the end) counts as one failure named after the file."""
    if not junit.is_file():
        return [f"(no test report: {junit.name})"], 0
    failed, passed = [], 0
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").replace(".", "/")
        parts = module.split("/")
        # pytest's classname is the dotted module path, then any class: tests.test_x.TestY
        path = next((i for i in range(len(parts), 0, -1) if (REPO_ROOT / ("/".join(parts[:i]) + ".py")).is_file()), 0)
        nodeid = "/".join(parts[:path]) + ".py" if path else module
        nodeid = "::".join([nodeid, *parts[path:], case.get("name", "")])
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(nodeid)
        elif case.find("skipped") is None:
            passed += 1
    return failed, passed


def run_pytest(pytest_args: Sequence[str], junit: Path) -> RunResult:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", *pytest_args, f"--junitxml={junit}"], cwd=REPO_ROOT,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)  # fmt: skip
    failed, passed = failed_tests(junit)
    if done.returncode != 0 and not failed:
        failed = [f"(pytest exited {done.returncode} with no failed test)"]
    return RunResult(done.returncode, time.monotonic() - started, failed, passed)


def summary(settings: Settings, results: list[RunResult], interrupted: bool = False) -> list[str]:
    counts = Counter(test for r in results for test in dict.fromkeys(r.failed))
    lines = [f"  {test}: failed in {n} of {len(results)} run(s)" for test, n in counts.most_common()]
    bad = sum(1 for r in results if r.code != 0)
    cores = os.cpu_count() or 1
    ended = f" (interrupted after {len(results)} of {settings.runs})" if interrupted else ""
    lines.append(f"selftest-load: {len(results)} run(s){ended} with {settings.hogs} CPU hog(s) on {cores} core(s): "
                 f"{bad} run(s) failed, {len(counts)} distinct test(s) failed")  # fmt: skip
    return lines


def main(argv: Sequence[str] | None = None, run: Callable[[Sequence[str], Path], RunResult] = run_pytest) -> int:
    try:
        settings = parse(sys.argv[1:] if argv is None else argv)
    except UsageError as error:
        print(f"selftest_load.py: {error}", file=sys.stderr)
        return 2
    # Ctrl-C, and a SIGTERM (a CI job cancelled), end the runs and stop the hogs (SIGINT is ignored where a shell
    # started this in the background: taken back here).
    before = {number: signal.signal(number, _interrupt) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _runs(settings, run)
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)


def _runs(settings: Settings, run: Callable[[Sequence[str], Path], RunResult]) -> int:
    results: list[RunResult] = []
    interrupted = False
    with tempfile.TemporaryDirectory(prefix="selftest-load-") as scratch, Hogs(settings.hogs, settings.hog_seconds):
        junits = settings.junit_dir or Path(scratch)
        junits.mkdir(parents=True, exist_ok=True)
        try:
            for number in range(1, settings.runs + 1):
                result = run(settings.pytest_args, junits / f"run-{number}.xml")
                results.append(result)
                verdict = "passed" if result.code == 0 else f"{len(result.failed)} failed: " + ", ".join(result.failed)
                print(f"run {number}/{settings.runs}: {result.passed} passed, {verdict} ({result.seconds:.0f}s)",
                      flush=True)  # fmt: skip
        except KeyboardInterrupt:
            interrupted = True
    print("\n".join(summary(settings, results, interrupted)), flush=True)
    if interrupted:
        return 130
    return 0 if all(r.code == 0 for r in results) else 1


def _interrupt(number: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
