"""``reports diff BASE NEW`` on made-up runs: an unchanged pair (different only in what differs from run to run by
construction) exits 0 and says so; a changed verdict and a case on one side only are listed and exit 1; differing
observations (PodGroup shape, a label's arrival, placement, eviction order, expectation rows, notes) are listed
without changing the exit status; a metric regression is listed and exits 1; the versions of both sides are
shown; misuse ends in one message (exit 2); the HTML page is self-contained and shows the same changes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kai_conformance.reports import generate
from kai_conformance.reports.__main__ import main
from kai_conformance.reports.across_runs import diff
from kai_conformance.reports.records import CaseRecord, DetectorVerdict, LabelObservation, PodTimes, write
from kai_conformance.reports.runinfo import RunInfo
from tests.reports.test_compare import run_dir

T0 = 1_800_000_000.0
SHAPE = "suites/test_podgrouper.py::test_the_podgroup_has_the_shape_the_row_predicts[gang-of-4]"
LABELS = "suites/test_labels.py::test_runtime_labels_reach_every_level[trainjob-and-runtime]"
PREEMPT = "suites/test_preemption.py::test_a_higher_priority_trainjob_preempts_a_lower_one[train-over-train]"
GANG = "suites/test_gang.py::test_a_gang_that_fits_is_placed_whole[4x2-gpus]"


def pods(workload: str, suffix: str, nodes: list[str], evicted_at: float | None = None) -> list[PodTimes]:
    """A gang bound on ``nodes`` (one pod each), its pod names ending in a generated ``suffix``."""
    return [
        PodTimes(f"{workload}-node-0-{i}-{suffix}", workload, node, T0 + i, T0 + 2 + i, T0 + 3 + i,
                 evicted_at + i if evicted_at is not None else None)
        for i, node in enumerate(nodes)
    ]  # fmt: skip


def records(
    run: str,
    *,
    uid: str = "0f3c9d2e-1111-4a2b-9c3d-123456789abc",
    suffix: str = "x7k2p",
    namespace: str = "kc-a-gang-that-fits-a1b2c3",
    took: float = 3.4,
    **changed,
) -> list:
    """One run's records. ``uid`` … ``took``: what differs between two runs by construction; the other keyword
    arguments change what the run observed (a made-up release's behaviour)."""
    shape = changed.get("shape", f"PodGroup pg-gang-{uid} has the shape KAI v0.17+ (SubGroups) predicts")
    return [
        CaseRecord(GANG, title="A gang that fits is placed whole", area="gang", outcome=changed.get("gang", "passed"),
                   failure_kind="product" if changed.get("gang") == "failed" else "", run_id=run,
                   expectations="KAI v0.17+ (SubGroups)",
                   message="E   AssertionError: gang-bound: 3 of 4 pods bound" if changed.get("gang") else "",
                   verdicts=[DetectorVerdict("gang-bound", changed.get("gang") != "failed",
                                             f"all 4 pods bound in {namespace} within {took / 8:.1f} s")],
                   timelines={"gang": pods("gang", suffix, ["w1", "w1", "w2", "w2"])}),
        CaseRecord(SHAPE, title="The PodGroup has the shape the row predicts", area="podgrouper", outcome="passed",
                   run_id=run, expectations=changed.get("rows", "KAI v0.17+ (SubGroups)"),
                   verdicts=[DetectorVerdict("podgroup-shape", True, shape)],
                   notes=[f"garbage collection after the TrainJob was gone took {took:.1f}s",
                          *changed.get("notes", [])]),
        CaseRecord(LABELS, title="Runtime labels reach every level", area="labels", outcome="passed", run_id=run,
                   labels=[LabelObservation("TrainJob labels", "team", level, True, True) for level in ("JobSet", "Pod")]
                   + [LabelObservation("podTemplateOverrides", "example.com/zone", "Pod", True,
                                       changed.get("zone_arrives", True))]),
        CaseRecord(PREEMPT, title="A higher-priority TrainJob preempts a lower one", area="preemption",
                   outcome="passed", run_id=run,
                   timelines={"low": pods("low", suffix, ["w1", "w2"], T0 + changed.get("low_evicted_at", 10)),
                              "mid": pods("mid", suffix, ["w1", "w2"], T0 + 20),
                              "high": pods("high", suffix, ["w1", "w1", "w2", "w2"])}),
        *changed.get("extra", []),
    ]  # fmt: skip


def report_dir(base: Path, name: str, kai: str, cases: list[CaseRecord], assumptions: tuple[str, ...] = ()) -> Path:
    versions = {"kai": kai, "trainer": "v2.3.0", "jobset": "v0.12.0", "kubernetes": "1.35"}
    stack = {"components": {"kai": {"version": kai, "version_source": "installed",
                                    "established": f"installed by this run from chart kai-scheduler {kai}"}},
             "nodes": {"image": "kindest/node:v1.35.5", "kubelet": "v1.35.5", "count": 3}}  # fmt: skip
    info = RunInfo(run_id=cases[0].run_id, versions=versions, kubernetes_server="v1.35.5", stack=stack,
                   gpus={"w1": 4, "w2": 4}, assumptions=list(assumptions))  # fmt: skip
    directory = base / name
    for sequence, record in enumerate(cases):  # the run state a run leaves (no report written: the diff reads it)
        write(record, directory / generate.STATE, "gw0", sequence)
    info.save(directory / generate.STATE)
    return directory


def version_row(out: str, what: str) -> str:
    """The BASE → NEW text of one row of the summary's Versions (the column width follows the longest name)."""
    return next(line.strip().removeprefix(what).strip() for line in out.splitlines() if line.startswith(f"  {what} "))


def run_diff(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    status = main(["diff", *map(str, args)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_an_unchanged_pair_exits_0_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Same behaviour, but every run-specific text differs: run ids, PodGroup uids, generated pod name suffixes,
    # namespaces, durations. None of it is a change.
    base = report_dir(tmp_path, "v0.17.0", "v0.17.0", records("20261121-142501-3fa9"))
    again = records("20261122-090000-b7c1", uid="9a8b7c6d-2222-4e5f-8a9b-abcdefabcdef", suffix="q9zt4",
                    namespace="kc-a-gang-that-fits-0f9e8d", took=11.0)  # fmt: skip
    new = report_dir(tmp_path, "again", "v0.17.0", again)
    before_new, before_base = {p.name for p in new.iterdir()}, {p.name for p in base.iterdir()}
    status, out, err = run_diff(capsys, base, new)
    assert (status, err) == (diff.UNCHANGED, "")
    assert "Verdicts: 0 changes of 4 cases" in out and "Observations: 0 cases differ" in out
    assert "No verdict changed (4 cases) and no metric regressed." in out
    assert (
        version_row(out, "KAI Scheduler") == "v0.17.0 (installed by this run from chart kai-scheduler v0.17.0) (same)"
    )
    assert "HTML: not written (pass --out FILE.html for the full page)" in out
    assert {p.name for p in new.iterdir()} == before_new and {p.name for p in base.iterdir()} == before_base


def test_a_changed_verdict_is_listed_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    added = CaseRecord("suites/test_gang.py::test_new_in_this_release", area="gang", outcome="passed", run_id="n")
    base = report_dir(tmp_path, "v0.17.0", "v0.17.0", records("b"))
    assumed = "KAI v0.18.1 is not in the expectation tables: assumed the expectations of v0.17.0"
    new = report_dir(tmp_path, "v0.18.1", "v0.18.1", records("n", gang="failed", extra=[added]), (assumed,))
    status, out, _ = run_diff(capsys, base, new)
    assert status == diff.CHANGED
    changed_row = next(line for line in out.splitlines() if f"✓ passed → ✗ product failure  {GANG}" in line)
    assert changed_row.endswith(
        "[BASE KAI v0.17.0 / Trainer v2.3.0 / k8s v1.35.5 → NEW KAI v0.18.1 / Trainer v2.3.0 / k8s v1.35.5]"
    ), changed_row
    assert "why: gang-bound: all 4 pods bound" in out  # the failing detector, as the report names it
    assert (
        "only in NEW: ✓ passed  suites/test_gang.py::test_new_in_this_release  [KAI v0.18.1 / Trainer v2.3.0 / k8s v1.35.5]"
        in out
    )
    assert "Verdicts: 2 changes of 5 cases" in out and "2 verdicts changed." in out
    assert version_row(out, "KAI Scheduler").startswith("v0.17.0 (installed by this run from chart kai-scheduler "
                                                        "v0.17.0) → v0.18.1 (installed")  # fmt: skip
    assert version_row(out, "Kubernetes") == "v1.35.5 (same)"
    assert version_row(out, "Nodes") == "kindest/node:v1.35.5 · kubelet v1.35.5 · 3 nodes (same)"
    assert version_row(out, "GPUs") == "8 GPUs on 2 nodes (w1: 4, w2: 4) (same)"
    assert version_row(out, "Assumed expectations") == f"— → {assumed}"


def test_differing_observations_are_listed_without_failing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = report_dir(tmp_path, "v0.17.0", "v0.17.0", records("b"))
    changed = records("n", zone_arrives=False, low_evicted_at=30, rows="KAI v0.18+ (SubGroups, minSubGroup)",
                      shape="PodGroup pg-gang-1 has the shape KAI v0.18+ predicts: subGroups[0].minMember 2",
                      notes=["placement strategy: spread"])  # fmt: skip
    new = report_dir(tmp_path, "v0.18.1", "v0.18.1", changed)
    result = diff.diff(base, new)
    changes = {(c.key, o.observation): (o.base, o.new) for c in result.observation_changes for o in c.observations}
    assert changes[(SHAPE, "detector podgroup-shape")][1].endswith("subGroups[0].minMember 2")
    assert changes[(SHAPE, "expectation rows")] == ("KAI v0.17+ (SubGroups)", "KAI v0.18+ (SubGroups, minSubGroup)")
    assert changes[(SHAPE, "note")] == ("", "placement strategy: spread")  # the timing note is no change
    assert changes[(LABELS, "label example.com/zone (podTemplateOverrides) at Pod")] == (
        "✓ arrived", "✗ missing (expected to arrive)")  # fmt: skip
    assert changes[(PREEMPT, "eviction order")] == ("low (2 pods) → mid (2 pods)", "mid (2 pods) → low (2 pods)")
    assert (GANG, "pods of gang") not in changes and not result.verdict_changes
    status, out, _ = run_diff(capsys, base, new)
    assert status == diff.UNCHANGED  # observations inform; only verdicts and metrics gate
    assert "Observations: 3 cases differ" in out and "      NEW:  ✗ missing (expected to arrive)" in out


def test_placement_names_the_shape_not_the_nodes() -> None:
    spread = pods("g", "x7k2p", ["w1", "w2", "w3", "w4"])
    assert diff._placement(spread) == "4/4 bound on 4 nodes (1+1+1+1)"
    packed = [*pods("g", "x7k2p", ["w2", "w2"]), PodTimes("g-3", "g", None, T0)]
    packed[0].evicted = T0 + 9
    assert diff._placement(packed) == "2/3 bound on 1 node (2); 1 evicted"
    assert diff.masked("pg-gang-0f3c9d2e-1111-4a2b-9c3d-123456789abc in kc-gang-fits-a1b2c3 after 12.5 s") == (
        "pg-gang-<uid> in <namespace> after <duration>"
    )
    # Two real kind runs of two KAI versions named their clusters kc-gate and kc-lts: the same placement.
    assert diff.masked("all 2 pods bound (kc-gate-worker×2)") == diff.masked("all 2 pods bound (kc-lts-worker3×2)")


def test_a_metric_regression_is_listed_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, slower = run_dir(tmp_path, "base", 1.0), run_dir(tmp_path, "slower", 1.5)
    status, out, _ = run_diff(capsys, base, slower)
    assert status == diff.CHANGED
    assert "Metrics (p50, p95 past 20% and 1 s)" in out
    assert "time_to_schedule p50: 5 → 7.5 s (×1.50)  REGRESSED" in out
    assert "No verdict changed (1 case)" not in out and "metric statistics regressed" in out
    status, out, _ = run_diff(capsys, slower, base)
    assert status == diff.UNCHANGED and "time_to_schedule p50: 7.5 → 5 s (×0.67)  improved" in out
    assert run_diff(capsys, base, slower, "--threshold", "0.6")[0] == diff.UNCHANGED


def test_misuse_ends_in_one_clear_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    new = report_dir(tmp_path, "new", "v0.18.1", records("n"))
    status, out, err = run_diff(capsys, tmp_path / "missing", new)
    assert (status, out) == (diff.USAGE, "")
    assert err == f"error: BASE {tmp_path / 'missing'} is not a directory: pass the --report-dir of a run\n"

    (tmp_path / "empty").mkdir()
    status, out, err = run_diff(capsys, new, tmp_path / "empty")
    assert (status, out) == (diff.USAGE, "") and err.count("\n") == 1 and "NEW" in err and "holds no results" in err

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "summary.json").write_text("{not json")
    status, _, err = run_diff(capsys, broken, new)
    assert status == diff.USAGE and err.count("\n") == 1 and "unreadable results" in err and "Traceback" not in err

    status, _, err = run_diff(capsys, new, new, "--out", tmp_path / "no" / "such" / "dir" / "diff.html")
    assert status == diff.USAGE and "cannot write the HTML page" in err
    assert run_diff(capsys, new, new, "--threshold", "-1")[0] == diff.USAGE


def test_the_html_page_is_self_contained_and_shows_the_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hostile = '<script>alert("x")</script>'
    base = report_dir(tmp_path, "v0.17.0", "v0.17.0", records("b"))
    new = report_dir(tmp_path, "v0.18.1", "v0.18.1", records("n", gang="failed", zone_arrives=False,
                                                              notes=[hostile]))  # fmt: skip
    page = tmp_path / "page.html"
    assert run_diff(capsys, base, new, "--out", page)[0] == diff.CHANGED
    html = page.read_text()
    assert not (new / "diff.html").exists()
    assert not re.search(r"<(link|img|iframe|object|embed|script)\b|\bsrc=|url\(|@import|@font-face", html)
    assert not re.search(r"href=\"(?!#)", html)  # only links within the page
    assert hostile not in html and "&lt;script&gt;" in html
    assert GANG in html and "badge s-passed" in html and "badge s-failed" in html
    assert "label example.com/zone (podTemplateOverrides) at Pod" in html and "✗ missing (expected to arrive)" in html
    assert "v0.17.0 (installed by this run from chart kai-scheduler v0.17.0)" in html and 'tr class="changed"' in html
    assert sorted(p.name for p in new.iterdir()) == [generate.STATE]  # the inputs are left as they were
