"""From records to what the reports say: statuses, verdict, matrix cells, label states, timelines, Markdown."""

from __future__ import annotations

import json

import pytest

from kai_conformance.reports import markdown, sample
from kai_conformance.reports.model import (
    LabelCell,
    RunRecords,
    Status,
    WorkloadTimeline,
    build,
    exception_lines,
    status_of,
)
from kai_conformance.reports.records import CaseRecord, DetectorVerdict, LabelObservation, PodTimes
from kai_conformance.reports.runinfo import RunInfo, flatten, gpu_topology

RUN = RunInfo("run-1", combination="kai-v0.17.0+trainer-v2.3.0", versions={"kai": "v0.17.0", "kubernetes": "1.35"})


def record(name: str, outcome: str, kind: str = "", **extra) -> CaseRecord:
    fields = {"title": name, "area": "gang", "run_id": "run-1", **extra}
    return CaseRecord(f"suites/test_x.py::{name}", outcome=outcome, failure_kind=kind, **fields)


def report_of(*records: CaseRecord):
    return build([RunRecords(RUN, list(records))])


@pytest.mark.parametrize(
    ("outcome", "kind", "message", "status"),
    [
        ("passed", "", "", Status.PASSED),
        ("skipped", "", "needs 16 GPUs", Status.SKIPPED),
        ("failed", "product", "E   AssertionError", Status.FAILED),
        ("error", "product", "E   fixtures.waits.ConditionNotMet: x", Status.FAILED),
        ("failed", "infrastructure", "E   fixtures.errors.Unreachable: x", Status.BROKEN),
        ("error", "infrastructure", "E   fixtures.errors.WaitTimeout: x", Status.BROKEN),
        ("xfailed", "product", "known deviation: y", Status.XFAILED),
        # an xfail case that failed on infrastructure did not confirm the deviation
        ("xfailed", "infrastructure", "known deviation: y", Status.BROKEN),
        ("xpassed", "", "", Status.XPASSED),
        ("failed", "", "[XPASS(strict)] Trainer drops labels", Status.XPASSED),
        ("", "", "", Status.BROKEN),  # a record without an outcome: the run died under it
    ],
)
def test_status_of_each_outcome(outcome: str, kind: str, message: str, status: Status) -> None:
    assert status_of(record("t", outcome, kind, message=message)) is status


def test_verdict_puts_product_failures_before_infrastructure_before_unexpected_passes() -> None:
    ok, skipped = record("a", "passed"), record("s", "skipped")
    assert report_of(ok, skipped).verdict.code == "conformant"
    assert report_of(ok, skipped).verdict.headline == "Conformant: 1 case behaved as expected"
    assert report_of(skipped).verdict.code == "empty"
    assert report_of(ok, record("x", "xpassed")).verdict.code == "expectations-outdated"
    broken = record("b", "error", "infrastructure")
    assert report_of(ok, broken, record("x", "xpassed")).verdict.code == "inconclusive"
    failed = record("f", "failed", "product")
    verdict = report_of(ok, broken, failed, record("g", "failed", "product")).verdict
    assert (verdict.code, verdict.headline) == ("not-conformant", "Not conformant: 2 product failures")


def test_exception_lines_are_the_E_lines_of_a_traceback_else_its_tail() -> None:
    text = "def test():\n>   assert x\nE   AssertionError: gang split\nE     observed:\nE       bound: 2\n\nt.py:3"
    assert exception_lines(text) == ["AssertionError: gang split", "  observed:", "    bound: 2"]
    assert exception_lines("[XPASS(strict)] reason") == ["[XPASS(strict)] reason"]


def test_a_matrix_cell_shows_the_worst_status_and_what_behaved_as_expected() -> None:
    report = report_of(
        record("test_fit[a]", "passed"), record("test_fit[b]", "xfailed", "product"),
        record("test_fit[c]", "failed", "product"), record("test_fit[d]", "skipped"),
        record("test_other", "skipped"),
    )  # fmt: skip
    fit, other = report.behaviours
    (cell,) = fit.cells.values()
    assert (cell.status, cell.ratio) == (Status.FAILED, "2/3")
    assert cell.tooltip == "1 product failure, 1 known deviation, 1 passed, 1 skipped"
    assert cell.target.record.nodeid.endswith("test_fit[c]")
    assert next(iter(other.cells.values())).ratio == "skipped"


def test_two_runs_make_two_matrix_columns_keyed_by_combination_and_kubernetes() -> None:
    other = RunInfo("run-2", combination="kai-v0.16.8+trainer-v2.3.0", versions={"kai": "v0.16.8"})
    report = build([
        RunRecords(RUN, [record("t", "passed", versions={"kai": "v0.17.0", "kubernetes": "1.35"})]),
        RunRecords(other, [record("t", "failed", "product", run_id="run-2",
                                  versions={"kai": "v0.16.8", "kubernetes_server": "v1.34.2"})]),
    ])  # fmt: skip
    assert [c.key for c in report.columns] == ["kai-v0.17.0+trainer-v2.3.0@1.35", "kai-v0.16.8+trainer-v2.3.0@v1.34.2"]
    assert [c.short for c in report.columns] == ["KAI v0.17.0 / k8s 1.35", "KAI v0.16.8 / k8s v1.34.2"]
    (behaviour,) = report.behaviours
    assert [behaviour.cells[c.key].status for c in report.columns] == [Status.PASSED, Status.FAILED]


def test_records_left_by_an_earlier_run_are_not_counted() -> None:
    report = report_of(record("t", "passed"), record("old", "failed", "product", run_id="run-0"))
    assert [c.record.nodeid for c in report.cases] == ["suites/test_x.py::t"]


def test_a_label_cell_names_missing_and_unexpected_keys() -> None:
    report = report_of(
        record("l", "failed", "product", area="labels", labels=[
            LabelObservation("TrainJob labels", "team", "Pod", expected=True, observed=True),
            LabelObservation("TrainJob labels", "zone", "Pod", expected=True, observed=False),
            LabelObservation("TrainJob labels", "tier", "Pod", expected=False, observed=True),
            LabelObservation("TrainJob labels", "team", "PodGroup", expected=False, observed=False),
        ]),
    )  # fmt: skip
    (table,) = report.label_tables
    assert (table.sources, table.levels) == (["TrainJob labels"], ["Pod", "PodGroup"])
    pod = table.cells[("TrainJob labels", "Pod")]
    assert [(k, state, symbol) for k, state, symbol, _ in pod.keys] == [
        ("team", "arrived", "✓"), ("zone", "missing", "✗"), ("tier", "unexpected", "!")]  # fmt: skip
    assert not pod.ok and table.cells[("TrainJob labels", "PodGroup")].ok


def test_a_key_seen_wrong_in_any_case_is_shown_wrong() -> None:
    cell = LabelCell()
    good, bad = report_of(record("a", "passed"), record("b", "failed", "product")).cases
    cell.add(LabelObservation("s", "team", "Pod", True, True), good)
    cell.add(LabelObservation("s", "team", "Pod", True, False), bad)
    ((key, state, _, case),) = cell.keys
    assert (key, state, case) == ("team", "missing", bad)


def pods(*bound: float | None, evicted: float | None = None) -> list[PodTimes]:
    return [PodTimes(f"p{i}", "w", "n", 0.0, b, b, evicted) for i, b in enumerate(bound)]


def test_a_timeline_summary_calls_partial_placement_by_name() -> None:
    assert WorkloadTimeline("w", pods(1.0, 1.25, 1.5)).summary == "3/3 bound within 0.5 s"
    assert WorkloadTimeline("w", pods(None, None)).summary == "0/2 bound"
    partial = WorkloadTimeline("w", pods(1.0, None))
    assert partial.partial and partial.summary == "1/2 bound: partial placement"
    assert WorkloadTimeline("w", pods(1.0, 1.0, evicted=9.0)).summary == "2/2 bound within 0.0 s; 2 evicted"


def test_failed_cases_lead_with_the_detector_explanation() -> None:
    verdicts = [DetectorVerdict("gang", True, "ok"), DetectorVerdict("order", False, "victim evicted late\nmore")]
    (case,) = report_of(record("t", "failed", "product", verdicts=verdicts, message="E   AssertionError")).cases
    assert case.headline == "order: victim evicted late"
    control = DetectorVerdict("gang", False, "3 of 5 bound", expect_violation=True)
    (case,) = report_of(record("c", "passed", markers=["control"], verdicts=[control])).cases
    assert case.failing_verdicts == [] and case.is_control


def test_a_control_verdict_says_whether_its_detector_fired() -> None:
    fired = DetectorVerdict("gang", False, "3 of 5 bound", expect_violation=True)
    assert fired.heading == "gang (control: detector fired as expected)"
    silent = DetectorVerdict("gang", True, "all 5 bound", expect_violation=True)
    assert silent.heading == "gang (control: detector did not fire)"
    assert DetectorVerdict("gang", False, "3 of 5 bound").heading == "gang"
    failed = record("c", "failed", "product", markers=["control"], verdicts=[silent], message="E   AssertionError")
    (case,) = report_of(failed).cases
    assert case.headline == "gang (control: detector did not fire): all 5 bound"
    assert "gang (control: detector did not fire): all 5 bound" in markdown.render(report_of(failed))


def test_markdown_fits_a_pr_comment_and_escapes_table_cells() -> None:
    many = [
        record(f"t{i}", "failed", "product", title=f"a | b {i}", message="E   AssertionError: " + "x" * 2000)
        for i in range(80)
    ]
    text = markdown.render(report_of(*many))
    assert len(text) < markdown.MAX_CHARS
    assert "a \\| b 0" in text and "…and 55 more" in text
    assert text.startswith("## ❌ KAI Scheduler conformance report: Not conformant: 80 product failures")


def test_markdown_shows_the_matrix_only_for_several_combinations() -> None:
    single = markdown.render(report_of(record("t", "passed")))
    assert "### Matrix" not in single
    merged = build([RunRecords(info, records) for info, records in sample.runs()])
    text = markdown.render(merged)
    assert "### Matrix" in text and "| KAI v0.17.0 / Trainer v2.3.0 / k8s v1.35.5 |" in text
    assert "### ⚠️ Infrastructure failures (1)" in text and "_Infrastructure: API server or webhook error (5xx)_" in text


def test_records_and_run_info_tolerate_fields_from_newer_versions() -> None:
    data = record("t", "passed", timelines={"w": pods(1.0)}).to_json()
    data["added_later"] = 1
    data["timelines"]["w"][0]["added_later"] = 2
    assert CaseRecord.from_json(json.loads(json.dumps(data))).timelines["w"][0].bound == 1.0
    assert RunInfo.from_json({**RUN.to_json(), "added_later": 3}) == RUN


def test_environment_helpers() -> None:
    assert gpu_topology({"w2": 4, "w1": 1}) == "5 GPUs on 2 nodes (w1: 1, w2: 4)"
    assert gpu_topology({}) == "unknown"
    flat = flatten({"kai": {"chart": "oci://x", "set": ["a=1", "b=2"], "values": [{"k": 1}]}, "long": "y" * 500})
    assert flat["kai.chart"] == "oci://x" and flat["kai.set"] == "a=1, b=2" and flat["kai.values[0].k"] == "1"
    assert len(flat["long"]) == 240


def test_a_run_is_described_from_its_cluster_state_else_from_its_topology() -> None:
    from types import SimpleNamespace

    from kai_conformance.clusters.topology import load_topology
    from kai_conformance.fixtures.configuration.settings import InstallSources
    from kai_conformance.fixtures.plugin.options import CATALOG
    from kai_conformance.fixtures.plugin.reporting import describe_run

    settings = SimpleNamespace(
        combination=CATALOG.combination("kai-v0.16.8+trainer-v2.2.0"), kubernetes="1.34", cluster="kind",
        kind_cluster_name="kc", context=None, topology=load_topology("pr-gate"),
        sources=InstallSources(kai_chart="./deployments/kai-scheduler", load_images=("kai:pr-1", "binder:pr-1")),
        assumptions=["KAI main is not in the expectation tables: expectations assumed from v0.17.0"],
    )  # fmt: skip
    planned = describe_run("r", settings, {})
    assert planned.assumptions == settings.assumptions
    assert planned.versions == {"kai": "v0.16.8", "trainer": "v2.2.0", "jobset": "v0.11.1", "kubernetes": "1.34"}
    assert planned.gpus == {"kc-worker": 4, "kc-worker2": 4, "kc-worker3": 4}
    assert planned.cluster == {"provider": "kind", "name": "kc"} and planned.topology == "pr-gate"
    assert planned.sources == {"kai_chart": "./deployments/kai-scheduler", "load_images": "kai:pr-1, binder:pr-1"}
    state = {"provider": "kind", "name": "kc", "created_by_run": True, "gpus": {"kc-worker": 2},
             "stack": {"kai": {"image_tag": "pr-1"}}, "added_later": {"x": 1}}  # fmt: skip
    seen = describe_run("r", settings, state)
    assert seen.gpus == {"kc-worker": 2} and seen.stack == {"kai": {"image_tag": "pr-1"}}
    assert seen.cluster == {"provider": "kind", "name": "kc", "created_by_run": True}
    assert describe_run("r", None, {}).versions == {}


def test_reports_say_which_versions_were_detected_declared_or_installed() -> None:
    from kai_conformance.reports import generate, html

    stack = {"components": {
        "kai": {"version": "v0.17.0", "version_source": "declared", "established": "declared by --kai-version v0.17.0"},
        "trainer": {"version": "v2.3.0", "version_source": "detected",
                    "established": "detected from image ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.3.0 "
                                   "of Deployment ml/trainer"},
    }}  # fmt: skip
    run = RunInfo("run-1", versions={"kai": "v0.17.0", "trainer": "v2.3.0", "jobset": "v0.12.0"}, stack=stack)
    assert [(v.component, v.source, v.text) for v in run.component_versions()] == [
        ("kai", "declared", "v0.17.0 (declared by --kai-version v0.17.0)"),
        ("trainer", "detected", "v2.3.0 (detected from image ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.3.0 "
                                "of Deployment ml/trainer)"),
        ("jobset", "", "v0.12.0"),  # nothing recorded: the requested version, with no claim about how it is known
    ]  # fmt: skip
    report = build([RunRecords(run, [record("t", "passed")])])
    text = markdown.render(report)
    assert "**Stack:** KAI Scheduler v0.17.0 (declared by --kai-version v0.17.0) · Kubeflow Trainer v2.3.0 (detected " \
        "from image ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.3.0 of Deployment ml/trainer) · JobSet " \
        "v0.12.0" in text  # fmt: skip
    page = html.render(report)
    assert 'v0.17.0 <span class="muted">(declared by --kai-version v0.17.0)</span>' in page
    summary = generate.summary_json(report)
    assert summary["runs"][0]["component_versions"][0] == {
        "component": "kai", "name": "KAI Scheduler", "version": "v0.17.0", "source": "declared",
        "established": "declared by --kai-version v0.17.0",
    }  # fmt: skip


def test_a_run_against_an_assumed_version_says_so_first_and_has_its_own_verdict_code() -> None:
    assumption = "KAI v0.18.1 is not in the expectation tables: expectations assumed from v0.17.0"
    run = RunInfo("run-1", assumptions=[assumption])
    report = build([RunRecords(run, [record("a", "passed", expectations=f"KAI v0.17 [assumed: {assumption}]")])])
    assert report.verdict.code == "conformant-assumed"
    assert assumption in report.verdict.detail
    assert markdown.render(report).splitlines()[0] == f"> **{assumption}**"
    failed = build([RunRecords(run, [record("a", "failed", "product")])])
    assert failed.verdict.code == "not-conformant"  # an assumption never softens a failure
