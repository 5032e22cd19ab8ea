"""scripts/benchmark/gate.py without a cluster: the JUnit figures per area and slot wait, the Markdown and JSON it
writes, the 4-worker estimate, and a Ctrl-C or SIGTERM forwarded to a fake pytest's process group."""

from __future__ import annotations

import io
import json
import signal
import sys
from pathlib import Path

import pytest

from scripts.benchmark import gate
from scripts.benchmark.gate_figures import ModeResult, _nodeid_and_area, estimate, figures_of, parse_junit, write

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="4" time="60.0">
<testcase classname="suites.test_gang" name="test_fits[two-pods]" time="10.5"><properties>
  <property name="kai.area" value="gang"/><property name="slot-wait-seconds" value="2.5"/></properties></testcase>
<testcase classname="suites.test_gang" name="test_blocked" time="20.0"><failure message="boom">trace</failure></testcase>
<testcase classname="suites.test_queue" name="test_routing" time="5.5"><properties>
  <property name="slot-wait-seconds" value="1.0"/></properties></testcase>
<testcase classname="suites.test_queue" name="test_depends_on" time="0.0"><skipped type="pytest.xfail" message="gap"/>
</testcase>
</testsuite></testsuites>
"""
NONE_WAITED = """<testsuites><testsuite name="pytest">
<testcase classname="suites.test_labels" name="test_owner" time="3.0"><properties>
  <property name="slot-wait-seconds" value="0.0"/></properties></testcase></testsuite></testsuites>"""
NO_SLOT_WAITS = """<testsuites><testsuite name="pytest">
<testcase classname="suites.test_labels" name="test_owner" time="3.0"/></testsuite></testsuites>"""


def report_dir(root: Path, mode: str, junit: str, serial_cases: tuple[str, ...] = ()) -> Path:
    directory = root / mode
    (directory / ".state" / "records").mkdir(parents=True)
    (directory / "junit.xml").write_text(junit)
    for number, nodeid in enumerate(serial_cases):
        record = {"nodeid": nodeid, "markers": ["serial", "gang"], "duration": 1.0}
        (directory / ".state" / "records" / f"main-{number:05d}.json").write_text(json.dumps(record))
    return directory


def test_junit_cases_carry_area_outcome_and_slot_wait(tmp_path: Path) -> None:
    cases = parse_junit(report_dir(tmp_path, "serial", JUNIT) / "junit.xml")
    assert [(c.nodeid, c.area, c.seconds, c.slot_wait, c.outcome) for c in cases] == [
        ("suites/test_gang.py::test_fits[two-pods]", "gang", 10.5, 2.5, "passed"),
        ("suites/test_gang.py::test_blocked", "gang", 20.0, None, "failed"),
        ("suites/test_queue.py::test_routing", "queue", 5.5, 1.0, "passed"),
        ("suites/test_queue.py::test_depends_on", "queue", 0.0, None, "xfailed"),
    ]
    assert _nodeid_and_area("suites.test_x.TestY", "test_z") == ("suites/test_x.py::TestY::test_z", "x")
    (tmp_path / "cut.xml").write_text(JUNIT[:200])  # a run killed while writing it
    assert parse_junit(tmp_path / "cut.xml") == []
    assert parse_junit(tmp_path / "missing.xml") == []


def test_figures_per_area_comparison_and_estimate(tmp_path: Path) -> None:
    serial = report_dir(tmp_path, "serial", JUNIT, serial_cases=("suites/test_gang.py::test_blocked",))
    n2 = report_dir(tmp_path, "n2", NO_SLOT_WAITS)
    results = [ModeResult("serial", ["pytest"], str(serial), 60.0, 1), ModeResult("n2", ["pytest"], str(n2), 30.0, 0)]
    figures = figures_of({"cpus": 2}, results)
    first, second = figures["modes"]
    assert (first["cases"], first["case_seconds"], first["slot_wait_seconds"], first["slot_wait_reported"]) == (
        4, 36.0, 3.5, 2)  # fmt: skip
    assert first["outcomes"] == {"failed": 1, "passed": 2, "xfailed": 1}
    assert first["areas"] == [
        {"area": "gang", "cases": 2, "case_seconds": 30.5, "slot_wait_seconds": 2.5},
        {"area": "queue", "cases": 2, "case_seconds": 5.5, "slot_wait_seconds": 1.0},
    ]
    assert first["slot_waits"] == [{"nodeid": "suites/test_gang.py::test_fits[two-pods]", "seconds": 2.5},
                                   {"nodeid": "suites/test_queue.py::test_routing", "seconds": 1.0}]  # fmt: skip
    assert first["whole_cluster"] == {"cases": 1, "case_seconds": 20.0}
    assert second["slot_wait_reported"] == 0 and not second["markers_known"]
    assert figures["comparison"] == [{"mode": "n2", "against": "serial", "wall_ratio": 0.5, "case_time_ratio": 0.08}]
    # O = 60 − 36 = 24 outside cases, S = 20 (the serial case), P = 16: 24 + 20 + 16 / 4 = 48.
    assert figures["estimate"] == {"workers": 4, "formula": "T(4) ≈ O + S + P / 4", "from_mode": "serial", "O": 24.0,
                                   "S": 20.0, "P": 16.0, "slices": 0, "whole_cluster_cases": 1, "seconds": 48.0}  # fmt: skip
    assert estimate(figures["modes"], workers=2)["seconds"] == 24 + 20 + 8
    # With one slice two serial cases run at once, beside the others: 24 + max(20 / 2, 36 / 4) = 34.
    sliced = estimate(figures["modes"], workers=4, slices=1)
    assert (sliced["formula"], sliced["seconds"]) == ("T(4) ≈ O + max(S / 2, (S + P) / 4)  (1 slice(s))", 34.0)
    assert estimate(figures["modes"], workers=4, slices=3)["seconds"] == 24 + max(20 / 4, 36 / 4)

    text = write(tmp_path, figures)
    assert (tmp_path / "benchmark.md").read_text() == text
    assert json.loads((tmp_path / "benchmark.json").read_text()) == json.loads(json.dumps(figures))
    assert "| serial | 60.0 s (1 min 0 s) | 1 | 4 | 1 failed, 2 passed, 1 xfailed | 36.0 s | 3.5 s | – → – |" in text
    assert "| n2 | serial | 0.5 | 0.08 |" in text
    assert "| gang | 2 | 30.5 s | 2.5 s |" in text
    assert "* serial: `pytest`" in text
    assert "2 of 4 cases reported `slot-wait-seconds` (the others count 0); the longest waits:" in text
    assert "* 2.5 s `suites/test_gang.py::test_fits[two-pods]`" in text
    assert "No case reported `slot-wait-seconds`: slot waits are counted as 0." in text
    assert "## Estimate for `-n 4` on 4 cores (an estimate, not measured)" in text and "**≈ 48.0 s**" in text


def test_cases_that_reported_no_wait_are_said_to_have_waited_for_none(tmp_path: Path) -> None:
    n2 = report_dir(tmp_path, "n2", NONE_WAITED)
    text = write(tmp_path, figures_of({"cpus": 2}, [ModeResult("n2", ["pytest"], str(n2), 30.0, 0)]))
    assert "1 of 1 cases reported `slot-wait-seconds` (the others count 0); none of them waited for a slot." in text


def test_no_estimate_without_what_it_needs(tmp_path: Path) -> None:
    plain = report_dir(tmp_path, "serial", NO_SLOT_WAITS)
    (plain / ".state" / "records").rmdir()
    assert estimate(figures_of({}, [ModeResult("serial", [], str(plain), 10.0, 0)])["modes"])["why_not"].startswith(
        "no case markers")  # fmt: skip
    assert estimate(figures_of({}, [ModeResult("n2", [], str(plain), 10.0, 0)])["modes"])["seconds"] is None
    missing = figures_of({}, [ModeResult("serial", [], str(tmp_path / "none"), 1.0, 4)])
    assert "No cases in" in write(tmp_path, missing) and "needs a serial mode with cases" in write(tmp_path, missing)


def test_modes_and_the_options_the_benchmark_owns() -> None:
    assert gate.parse_modes("serial, 2,4") == ["serial", "n2", "n4"]
    for bad in ("serial,serial", "0", "two", ""):
        with pytest.raises(ValueError):
            gate.parse_modes(bad)
    extra = ["--reuse-cluster", "kc", "-n4", "--report-dir=x", "-k", "gang", "--junitxml", "j.xml", "-mslow"]
    assert gate.owned_options(extra) == ["-n4", "--report-dir=x", "--junitxml", "-mslow"]
    argv = gate.pytest_command(["--reuse-cluster", "kc"])("n2", Path("/out/n2"))
    assert argv == [sys.executable, "-m", "pytest", "suites", "-m", "not slow", "-n", "2", "--report-dir=/out/n2",
                    "--reuse-cluster", "kc"]  # fmt: skip
    assert "-n" not in gate.pytest_command([])("serial", Path("/out/serial"))


# A fake pytest: prints, writes a JUnit file; told to, it starts a grandchild (as xdist starts workers), signals
# the benchmark (its parent) and waits for the forwarded signal, then writes what it got and exits as the suite does.
FAKE_PYTEST = r"""
import os, signal, subprocess, sys, time
from pathlib import Path
report, behaviour = Path(sys.argv[1]), sys.argv[2]
report.mkdir(parents=True, exist_ok=True)
case = '<testcase classname="suites.test_gang" name="test_{}" time="1.5"/>'
print("collected 2 items", flush=True)
if behaviour == "normal":
    (report / "junit.xml").write_text("<testsuites><testsuite>" + case.format("a") + case.format("b") + "</testsuite></testsuites>")
    sys.exit(0)
WORKER = "import signal, sys, time; signal.signal(int(sys.argv[1]), lambda s, f: (open(sys.argv[2], 'w').write(str(s)), sys.exit(0))); print('ready', flush=True); time.sleep(5)"
sig = int(behaviour)
worker = subprocess.Popen([sys.executable, "-c", WORKER, str(sig), str(report / "worker")], stdout=subprocess.PIPE, text=True)
worker.stdout.readline()
got = []
signal.signal(sig, lambda s, f: got.append(s))
os.kill(os.getppid(), sig)
deadline = time.monotonic() + 5
while not got and time.monotonic() < deadline:
    time.sleep(0.01)
worker.wait(5)
(report / "got").write_text(str(got))
(report / "junit.xml").write_text("<testsuites><testsuite>" + case.format("a") + "</testsuite></testsuites>")
print("cleaned up", flush=True)
sys.exit(128 + sig if got else 0)
"""


def fake_pytest(behaviour: str) -> gate.Command:
    return lambda mode, directory: [sys.executable, "-c", FAKE_PYTEST, str(directory), behaviour]


def fake_docker(directory: Path, script: str) -> str:
    """A PATH holding only a ``docker`` shell script (the machine's docker may be slow to answer, or absent)."""
    directory.mkdir()
    (directory / "docker").write_text("#!/bin/sh\n" + script + "\n")
    (directory / "docker").chmod(0o755)
    return str(directory)


def test_the_machine_names_dockers_cgroup_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", fake_docker(tmp_path / "v2", 'test "$*" = "info --format {{.CgroupVersion}}" && echo 2'))
    assert gate.machine()["docker"] == "cgroup v2"
    monkeypatch.setenv("PATH", fake_docker(tmp_path / "down", "echo 'Cannot connect to the Docker daemon' >&2; exit 1"))
    assert gate.machine()["docker"] == "docker info failed: Cannot connect to the Docker daemon"
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert gate.machine()["docker"] == "no docker"


def test_a_run_of_every_mode_writes_the_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", fake_docker(tmp_path / "bin", "echo 1"))
    assert gate.main(["--modes", "serial,2", "--out", str(tmp_path)], command=fake_pytest("normal")) == 0
    out = capsys.readouterr().out
    assert "[serial] collected 2 items" in out and "[n2] collected 2 items" in out
    figures = json.loads((tmp_path / "benchmark.json").read_text())
    assert [(m["mode"], m["exit_code"], m["cases"], m["case_seconds"]) for m in figures["modes"]] == [
        ("serial", 0, 2, 3.0), ("n2", 0, 2, 3.0)]  # fmt: skip
    assert set(figures["machine"]) >= {"cpus", "cpu model", "memory", "kernel"}
    assert figures["machine"]["docker"] == "cgroup v1"
    assert all(len(m["load_before"]) == len(m["load_after"]) == 3 for m in figures["modes"])
    assert figures["comparison"][0]["mode"] == "n2" and "written:" in out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_goes_to_the_running_pytest_and_what_was_measured_is_written(tmp_path: Path, sig: int) -> None:
    previous = signal.getsignal(sig)
    stream = io.StringIO()
    results, text, received = gate.run(["serial", "n2"], tmp_path, fake_pytest(str(int(sig))), {}, stream)
    assert received == sig and signal.getsignal(sig) is previous
    assert (tmp_path / "serial" / "got").read_text() == f"[{int(sig)}]"  # forwarded to pytest, once
    assert (tmp_path / "serial" / "worker").read_text() == str(int(sig))  # and to its process group
    assert "[serial] cleaned up" in stream.getvalue()  # the benchmark waited for it
    assert [(r.mode, r.exit_code, r.interrupted) for r in results] == [("serial", 128 + sig, signal.Signals(sig).name)]
    assert not (tmp_path / "n2").exists()  # no further mode
    figures = json.loads((tmp_path / "benchmark.json").read_text())
    assert [(m["mode"], m["cases"], m["interrupted"]) for m in figures["modes"]] == [
        ("serial", 1, signal.Signals(sig).name)
    ]
    assert figures["estimate"]["why_not"] == "the serial mode was interrupted"
    assert text == (tmp_path / "benchmark.md").read_text()
    assert f"| {128 + sig} ({signal.Signals(sig).name}) |" in text


def test_the_slices_a_run_used_come_from_its_cases_partition(tmp_path: Path) -> None:
    sliced = JUNIT.replace(
        '<property name="slot-wait-seconds" value="1.0"/>',
        '<property name="slot-wait-seconds" value="1.0"/><property name="partition" value="kc-slice-1"/>',
    )
    serial = report_dir(tmp_path, "serial", sliced, serial_cases=("suites/test_gang.py::test_blocked",))
    figures = figures_of({}, [ModeResult("serial", ["pytest"], str(serial), 60.0, 0)])
    assert figures["modes"][0]["slices"] == ["kc-slice-1"]
    assert figures["estimate"]["slices"] == 1 and figures["estimate"]["seconds"] == 24 + max(20 / 2, 36 / 4)
