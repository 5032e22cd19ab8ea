"""End to end: a small fake suite run in suite mode under pytest-xdist leaves every report artifact.

The fake suite (written below) has a passing gang case with a timeline, a product failure with a detector
verdict and a workspace (so diagnostics and the case's objects are attached), an infrastructure error in the
test, an infrastructure error in a fixture, a strict xfail with a label observation, and a skipped case. It
runs against an in-memory ``FakeKube`` per process; the only HTTP is preflight's ``/version`` call to the
loopback API server. One ``pytest`` subprocess with two xdist workers, shared by every test here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kai_conformance.clusters.catalog import Catalog
from kai_conformance.reports import categories
from kai_conformance.reports.generate import load
from kai_conformance.reports.model import Status, build
from tests.fakes.apiserver import serve

REPO = Path(__file__).resolve().parents[2]
MARKERS = ("gang", "queue", "labels", "preemption", "podgrouper", "control", "serial", "disruptive", "slow")

INI = (
    "[pytest]\naddopts = -p no:pytest-kind-ng -p no:cacheprovider\nxfail_strict = true\n"
    # the conftest imports kai_conformance.fixtures.plugin to point suite mode at its own suites/ before pytest loads it
    "filterwarnings =\n    ignore:Module already imported:pytest.PytestAssertRewriteWarning\nmarkers =\n"
) + "".join(f"    {m}: {m}\n" for m in MARKERS)

CONFTEST = '''
from pathlib import Path

import pytest

import kai_conformance.fixtures.plugin
from kai_conformance.clusters.state import ClusterState
from tests.fakes.kube import FakeKube

# Suite mode means "paths under suites/": here, this directory's suites/ (set in every xdist worker too).
kai_conformance.fixtures.plugin.SUITES_DIR = Path(__file__).resolve().parent / "suites"
pytest_plugins = ["kai_conformance.fixtures.plugin"]


@pytest.fixture(scope="session")
def kube(cluster):
    fake = FakeKube()
    fake.git_version = "v1.35.5"
    return fake


@pytest.fixture(scope="session")
def cluster(settings, run):
    """What provisioning would leave: the cluster state, with its GPUs and what was installed."""
    state = ClusterState("existing", "fake", settings.kubeconfig, gpus={"node-a": 4, "node-b": 4},
                         stack={"kai": {"chart": "oci://example/kai-scheduler", "version": "v0.17.0"}})
    state.save(run.state_dir)
    return state
'''

SUITE = '''
"""Fake suite: one case per outcome the reports must show."""

import pytest

from kai_conformance.fixtures import errors
from kai_conformance.reports.records import DetectorVerdict, PodTimes


class Case:
    def __init__(self, id):
        self.id = id

    def manifests(self, ctx):
        return [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pod-{self.id}"},
                 "spec": {"containers": [{"name": "c", "image": ctx.workload_image}]}}]


GANG = [Case("two-pods")]


@pytest.mark.gang
@pytest.mark.parametrize("case", GANG, ids=lambda c: c.id)
def test_gang_that_fits(case, record):
    """A gang that fits is placed whole"""
    record.verdict(DetectorVerdict("gang-all-or-nothing", True, "both pods bound within 0.1 s"))
    record.timeline("tj-fits", [PodTimes("tj-fits-0", "tj-fits", "node-a", 100.0, 101.0, 102.0),
                                PodTimes("tj-fits-1", "tj-fits", "node-b", 100.1, 101.1, 102.2)])


@pytest.mark.gang
@pytest.mark.parametrize("case", GANG, ids=lambda c: c.id)
def test_gang_that_does_not_fit(case, record, workspace):
    """A gang that does not fit gets no pod bound"""
    workspace.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pod-two-pods"}, "spec": {}})
    record.verdict(DetectorVerdict("gang-all-or-nothing", False, "1 of 2 pods bound: partial placement"))
    record.timeline("tj-big", [PodTimes("tj-big-0", "tj-big", "node-a", 100.0, 103.0, 104.0),
                               PodTimes("tj-big-1", "tj-big", None, 100.1)])
    assert False, "gang-all-or-nothing: 1 of 2 pods bound"


@pytest.mark.queue
def test_queue_api_down(record):
    """A TrainJob lands in its queue"""
    raise errors.Unreachable("GET /apis/scheduling.run.ai/v2/queues", 0, "", "connection refused")


@pytest.fixture
def stuck_install():
    raise errors.WaitTimeout("KAI webhook to serve: not reached within 120s")


@pytest.mark.podgrouper
def test_podgroup_owner(stuck_install, record):
    """The PodGroup is owned by the TrainJob"""


@pytest.mark.labels
@pytest.mark.xfail(reason="Trainer drops podTemplateOverrides labels on pods")
def test_labels_reach_pods(record):
    """Runtime labels reach every level"""
    record.label("podTemplateOverrides", "team", "Pod", expected=True, observed=False)
    record.label("TrainJob labels", "team", "JobSet", expected=True, observed=True)
    assert False, "team missing on Pod"


@pytest.mark.preemption
@pytest.mark.skip(reason="needs 16 GPUs")
def test_reclaim():
    """Reclaim returns quota"""
'''

EXPECTED = {  # test name → (record outcome, report status, failure kind, category)
    "test_gang_that_fits[two-pods]": ("passed", Status.PASSED, "", ""),
    "test_gang_that_does_not_fit[two-pods]": (
        "failed", Status.FAILED, "product", "Product: detector verdicts and other assertions"),
    "test_queue_api_down": ("failed", Status.BROKEN, "infrastructure", "Infrastructure: cluster unreachable"),
    "test_podgroup_owner": (
        "error", Status.BROKEN, "infrastructure", "Infrastructure: wait for cluster, install or cleanup timed out"),
    "test_labels_reach_pods": ("xfailed", Status.XFAILED, "product", "Product: detector verdicts and other assertions"),
    "test_reclaim": ("skipped", Status.SKIPPED, "", ""),
}  # fmt: skip


SERVED = {"requests": 0}  # what the loopback API server answered (its /metrics says 1000 times as much)


def api_server(request) -> tuple[int, object]:
    """Preflight's /version, /metrics for the run's request count, and empty lists for the leftover check."""
    SERVED["requests"] += request.path != "/metrics"
    if request.path == "/version":
        return 200, {"gitVersion": "v1.35.5"}
    if request.path == "/metrics":
        text = f'apiserver_request_total{{resource="pods",subresource="",verb="LIST"}} {1000 * SERVED["requests"]}\n'
        return 200, text.encode()
    return 200, {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": []}


STALE_RECORD = {"nodeid": "suites/test_old.py::test_gone", "outcome": "failed", "run_id": "old-run"}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Run the fake suite once for the whole module (about two seconds, xdist included)."""
    directory = tmp_path_factory.mktemp("fake-suite")
    (directory / "pytest.ini").write_text(INI)
    (directory / "conftest.py").write_text(CONFTEST)
    (directory / "suites").mkdir()
    (directory / "suites" / "test_fake.py").write_text(SUITE)
    report = directory / "report"
    # What an earlier run into the same directory left: must not leak into this run's reports.
    (report / ".state" / "records").mkdir(parents=True)
    (report / ".state" / "records" / "gw9-00000.json").write_text(json.dumps(STALE_RECORD))
    (report / "diagnostics" / "test_old.py__test_gone").mkdir(parents=True)
    (report / "allure-results").mkdir()
    (report / "allure-results" / "stale-result.json").write_text("{}")
    step_summary = directory / "step-summary.md"
    step_summary.write_text("earlier step output\n")
    with serve(api_server) as api:
        kubeconfig = api.kubeconfig(directory)
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "suites", "-n", "2", "--cluster", "existing", "--kubeconfig",
             str(kubeconfig), "--report-dir", str(report)],
            cwd=directory, capture_output=True, text=True, timeout=120, check=False,
            env={**os.environ, "PYTHONPATH": str(REPO), "GITHUB_STEP_SUMMARY": str(step_summary)},
        )  # fmt: skip
    return {"result": result, "report": report, "step_summary": step_summary}


def allure_results(report: Path) -> dict[str, dict]:
    results = {}
    for path in (report / "allure-results").glob("*-result.json"):
        data = json.loads(path.read_text())
        results[data["fullName"].rsplit("#", 1)[-1] + _param_suffix(data)] = data
    return results


def _param_suffix(data: dict) -> str:
    case = next((p["value"] for p in data.get("parameters", []) if p["name"] == "case"), None)
    return f"[{case}]" if case else ""


def test_the_run_ends_with_pytests_verdict_and_says_where_the_reports_are(run: dict) -> None:
    result = run["result"]
    output = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, output
    assert "2 failed, 1 passed, 1 skipped, 1 xfailed, 1 error in" in output, output
    assert "kai-conformance: reports" in output
    assert "Not conformant: 1 product failure" in output
    for line in ("HTML report (open in a browser)", "Markdown summary", "JSON summary", "JUnit XML",
                 "Allure results (allure serve DIR)", "Diagnostics of failed cases"):  # fmt: skip
        assert line in output
    assert str(Path("report") / "report.html") in output


def test_records_carry_outcome_kind_category_and_run(run: dict) -> None:
    (entry,) = load(run["report"])
    assert entry.run.exit_status == pytest.ExitCode.TESTS_FAILED
    records = {r.nodeid.split("::", 1)[1]: r for r in entry.records}
    assert set(records) == set(EXPECTED), "stale records of an earlier run must be gone"
    report = build([entry])
    statuses = {c.record.nodeid.split("::", 1)[1]: c.status for c in report.cases}
    for name, (outcome, status, kind, category) in EXPECTED.items():
        record = records[name]
        seen = (record.outcome, statuses[name], record.failure_kind, record.category)
        assert seen == (outcome, status, kind, category), name
        assert record.run_id == entry.run.run_id and record.worker.startswith("gw")
    assert records["test_queue_api_down"].exception == "kai_conformance.fixtures.errors.Unreachable"
    assert records["test_labels_reach_pods"].message.startswith("known deviation: Trainer drops")
    assert records["test_reclaim"].message == "needs 16 GPUs"
    assert entry.run.versions["kai"] and entry.run.combination
    assert entry.run.kubernetes_server == "v1.35.5"  # seen through the cases' kube fixture
    assert entry.run.gpus == {"node-a": 4, "node-b": 4}
    assert entry.run.stack["kai"]["version"] == "v0.17.0" and entry.run.leftovers == []


def test_a_failed_case_has_diagnostics_and_its_objects_attached(run: dict) -> None:
    report = run["report"]
    (entry,) = load(report)
    failed = next(r for r in entry.records if r.outcome == "failed" and r.failure_kind == "product")
    names = {Path(a).name for a in failed.attachments}
    assert {"events.txt", "pods.txt", "podgroups.yaml", "case-objects.yaml", "applied-objects.yaml"} <= names
    for attachment in failed.attachments:
        assert (report / attachment).is_file()
    rendered = (report / next(a for a in failed.attachments if a.endswith("case-objects.yaml"))).read_text()
    assert (
        "pod-two-pods" in rendered
        and "kai-conformance/run" in rendered
        and Catalog.load().defaults["workload_image"] in rendered
    )
    assert not (report / "diagnostics" / "test_old.py__test_gone").exists()


def test_junit_xml_holds_every_case_with_its_area_and_failure_category(run: dict) -> None:
    root = ET.parse(run["report"] / "junit.xml").getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert set(cases) == set(EXPECTED)
    properties = {name: {p.get("name"): p.get("value") for p in case.iter("property")} for name, case in cases.items()}
    assert properties["test_queue_api_down"]["kai.area"] == "queue"
    assert properties["test_queue_api_down"]["kai.failure_category"] == "Infrastructure: cluster unreachable"
    assert cases["test_gang_that_does_not_fit[two-pods]"].find("failure") is not None


def test_allure_results_read_as_behaviour_with_categories_and_environment(run: dict) -> None:
    report = run["report"]
    results = allure_results(report)
    assert "stale-result.json" not in {p.name for p in (report / "allure-results").iterdir()}
    assert set(results) == set(EXPECTED)
    fails = results["test_gang_that_does_not_fit[two-pods]"]
    assert fails["name"] == "A gang that does not fit gets no pod bound [two-pods]"
    labels = {(label["name"], label["value"]) for label in fails["labels"]}
    assert {("epic", "Gang scheduling (all-or-nothing)"), ("story", "A gang that does not fit gets no pod bound"),
            ("feature", "Fake suite: one case per outcome the reports must show.")} <= labels  # fmt: skip
    params = {p["name"]: p["value"] for p in fails["parameters"]}
    assert params["case"] == "two-pods" and params["versions"].startswith("kai-")
    assert "gang-all-or-nothing" in fails["descriptionHtml"] and "partial placement" in fails["descriptionHtml"]
    attached = {a["name"] for a in fails.get("attachments", [])} | {
        a["name"] for step in _fixture_steps(report) for a in step.get("attachments", [])
    }
    assert {"case-objects.yaml", "applied-objects.yaml", "events.txt", "logs-kai-scheduler.txt"} <= attached
    # categories.json sorts each failure as Allure would, from the message allure-pytest recorded
    for name, (_, status, kind, category) in EXPECTED.items():
        result = results[name]
        if status in (Status.FAILED, Status.BROKEN):
            matched = categories.match(result["status"], result["statusDetails"]["message"])
            assert matched is not None and matched.name == category, name
            assert matched.kind == kind
    assert [c["name"] for c in json.loads((report / "allure-results" / "categories.json").read_text())] == [
        c.name for c in categories.CATEGORIES
    ]
    environment = (report / "allure-results" / "environment.properties").read_text()
    assert "KAI.Scheduler=v0." in environment and "Kubernetes.server=v1.35.5" in environment
    assert "GPU.topology=8 GPUs on 2 nodes (node-a: 4, node-b: 4)" in environment
    assert "installed.kai.chart=oci://example/kai-scheduler" in environment


def _fixture_steps(report: Path) -> list[dict]:
    steps = []
    for path in (report / "allure-results").glob("*-container.json"):
        data = json.loads(path.read_text())
        steps += data.get("befores", []) + data.get("afters", [])
    return steps


def test_html_markdown_json_and_the_step_summary(run: dict) -> None:
    report = run["report"]
    html = (report / "report.html").read_text()
    assert "Not conformant: 1 product failure" in html and "<svg" in html
    assert "Infrastructure: cluster unreachable" in html
    summary = json.loads((report / "summary.json").read_text())
    assert summary["verdict"]["code"] == "not-conformant"
    assert summary["totals"] == {"failed": 1, "broken": 2, "xpassed": 0, "xfailed": 1, "passed": 1, "skipped": 1}
    markdown = (report / "summary.md").read_text()
    assert markdown.startswith("## ❌") and "A gang that does not fit gets no pod bound" in markdown
    assert run["step_summary"].read_text() == "earlier step output\n" + markdown + "\n"


def test_the_runs_api_load_merges_every_process_and_the_servers_count(run: dict) -> None:
    report = run["report"]
    load = json.loads((report / "summary.json").read_text())["runs"][0]["api_load"]
    processes = {p["process"]: p for p in load["processes"]}
    assert sorted(processes) == ["gw0", "gw1", "main"], "every xdist worker and the main process reported"
    assert load["processes"][0]["process"] == "main"
    workers = [processes["gw0"], processes["gw1"]]
    assert any("apply" in p["requests"] for p in workers), "the failing case's workspace applied through its kube"
    assert processes["main"]["requests"]["list"]["namespaces"] >= 1, "the main process's leftover check"
    assert "/version" not in processes["main"]["requests"].get("get", {}), "preflight came before the start reading"
    assert all(p["peak_rss_bytes"] > 2**20 and p["cpu_seconds"] > 0 for p in load["processes"])
    start, end = load["server_start"]["requests"], load["server_end"]["requests"]
    assert start >= 1000 and end > start, "read at the start (after preflight's /version) and at the end"
    assert load["server_requests"] == end - start
    assert load["fraction"] == pytest.approx(load["suite_requests"] / load["server_requests"])
    assert "API load and overhead" in (report / "report.html").read_text()
    assert "**API load and overhead:**" in (report / "summary.md").read_text()
