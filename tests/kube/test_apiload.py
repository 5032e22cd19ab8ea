"""The suite's own API load: requests counted by verb and resource in every client and per process, the per-process
files merged, the API server's /metrics parsed (its own reads left out) or its absence said in words, and the
"API load and overhead" section of the HTML, Markdown and JSON reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.kube.apiload import PROCESS, RequestCounts, process_usage
from kai_conformance.fixtures.plugin import accounting
from kai_conformance.reports import generate, html
from kai_conformance.reports.model import RunRecords
from kai_conformance.reports.records import CaseRecord
from kai_conformance.reports.runinfo import RunInfo
from kai_conformance.reports.sections import apiload
from kai_conformance.reports.sections.apiload import ApiLoad, ProcessLoad, ServerReading
from tests.fakes.kube import FakeKube

METRICS = """\
# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 120
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 7
apiserver_request_total{code="404",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="GET",version="v1"} 3
apiserver_request_total{code="201",component="apiserver",dry_run="",group="scheduling.run.ai",resource="podgroups",scope="namespace",subresource="status",verb="PATCH",version="v2alpha2"} 2.0
apiserver_request_total{code="200",component="",dry_run="",group="",resource="",scope="",subresource="/healthz",verb="GET",version=""} 50
apiserver_request_total{code="200",component="",dry_run="",group="",resource="",scope="",subresource="/metrics",verb="GET",version=""} 9
# HELP apiserver_request_duration_seconds [STABLE] Response latency distribution.
# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{verb="LIST",le="0.1"} 1000
apiserver_request_duration_seconds_count{verb="LIST"} 1000
"""


# --------------------------------------------------------------------------------------------- /metrics
def test_the_servers_total_sums_every_series_but_its_own_metrics_reads() -> None:
    assert apiload.server_request_total(METRICS) == 120 + 7 + 3 + 2 + 50


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("<html>nope</html>", "not Prometheus text"),
        ("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 3\n", "has no apiserver_request_total"),
    ],
)
def test_metrics_without_the_request_counter_are_unreadable_not_zero(text: str, problem: str) -> None:
    with pytest.raises(apiload.MetricsUnreadable, match=problem):
        apiload.server_request_total(text)


def test_the_in_memory_api_server_serves_its_own_request_count() -> None:
    fake = FakeKube(other_requests=1000)
    fake.list(kinds.POD, "a")
    assert fake.find(kinds.NODE, "n") is None  # a 404 is a request served too
    first = apiload.server_request_total(fake.server_metrics())
    fake.list(kinds.POD, "a")
    second = apiload.server_request_total(fake.server_metrics())
    assert first == 1000 + 2  # the list and the find; the /metrics read itself is left out
    assert second - first == 1


def test_reading_the_server_says_why_when_it_cannot() -> None:
    fake = FakeKube(other_requests=10)
    assert accounting.read_server(lambda: fake).requests == 10
    fake.fail("metrics", 403, message='forbidden: User "ci" cannot get path "/metrics"')
    forbidden = accounting.read_server(lambda: fake)
    assert forbidden.requests is None and "forbidden" in forbidden.unavailable and '"/metrics"' in forbidden.unavailable
    fake.fail("metrics", 404)
    assert accounting.read_server(lambda: fake).unavailable == "the API server does not serve /metrics"
    fake.fail("metrics", 0, message="connection refused")
    assert "connection refused" in accounting.read_server(lambda: fake).unavailable


# ---------------------------------------------------------------------------------------------- counting
def test_every_client_counts_into_the_process_total() -> None:
    before = PROCESS.snapshot().get(("list", "pods"), 0)
    first, second = FakeKube(), FakeKube()
    first.list(kinds.POD, "a")
    second.list(kinds.POD, "b")
    second.list(kinds.POD, "b")
    assert first.requests.snapshot() == {("list", "pods"): 1}
    assert PROCESS.snapshot()[("list", "pods")] - before == 3


def test_a_child_count_adds_to_its_parent() -> None:
    parent = RequestCounts()
    child = RequestCounts(parent=parent)
    child.add("watch", "pods", 2)
    parent.add("get", "nodes")
    assert parent.snapshot() == {("watch", "pods"): 2, ("get", "nodes"): 1}
    assert child.snapshot() == {("watch", "pods"): 2}


def test_process_usage_is_this_processes_memory_and_cpu() -> None:
    usage = process_usage()
    assert 10 * 2**20 < usage["peak_rss_bytes"] < 64 * 2**30, "a Python process running pytest: MiB to GiB"
    assert usage["cpu_seconds"] > 0 and usage["children_cpu_seconds"] >= 0


# ------------------------------------------------------------------------------------------------ merging
def load_of_three_processes() -> ApiLoad:
    main = ProcessLoad.from_counts("main", {("get", "/metrics"): 2, ("list", "namespaces"): 4}, peak_rss_bytes=80 * 2**20,
                                   cpu_seconds=1.5)  # fmt: skip
    gw0 = ProcessLoad.from_counts("gw0", {("list", "pods"): 100, ("watch", "pods"): 2, ("apply", "trainjobs"): 10},
                                  peak_rss_bytes=200 * 2**20, cpu_seconds=30.0, children_cpu_seconds=2.0)  # fmt: skip
    gw1 = ProcessLoad.from_counts("gw1", {("list", "pods"): 80, ("delete", "trainjobs"): 4, ("get", "pods"): 0},
                                  peak_rss_bytes=150 * 2**20, cpu_seconds=20.0)  # fmt: skip
    return ApiLoad([main, gw0, gw1], ServerReading(1000, 1.0), ServerReading(11000, 2.0))


def test_the_run_sums_its_processes_and_compares_with_the_server() -> None:
    load = load_of_three_processes()
    assert load.suite_requests == 4 + 112 + 84, "the suite's own /metrics reads are not its load"
    assert load.by_verb() == {"list": 184, "watch": 2, "apply": 10, "delete": 4}
    assert load.by_resource(2) == [("list", "pods", 180), ("apply", "trainjobs", 10)]
    assert load.server_requests == 10000
    assert load.fraction == pytest.approx(200 / 10000)
    assert load.overhead_text() == "200 of 10,000 requests (2.0%)"
    assert load.peak_rss_bytes == 200 * 2**20 and load.cpu_seconds == pytest.approx(51.5)


def test_without_a_server_count_the_share_is_not_available_with_its_reason() -> None:
    load = load_of_three_processes()
    load.server_end = ServerReading(unavailable="reading /metrics is forbidden to the suite's credentials (no)")
    assert load.server_requests is None and load.fraction is None
    assert load.overhead_text() == (
        "200 requests; the run's total: not available: reading /metrics is forbidden to the suite's credentials (no)"
    )
    load.server_start = ServerReading(unavailable="the cluster existed before the run and its count was not read")
    load.server_end = ServerReading(5, 2.0)
    assert "not available: the cluster existed before the run" in load.overhead_text()


def test_process_files_are_merged_main_first_and_survive_json(tmp_path: Path) -> None:
    for process in reversed(load_of_three_processes().processes):
        apiload.write_process(tmp_path, process)
    apiload.write_process(tmp_path, ProcessLoad("gw10", {"get": {"pods": 1}}))
    apiload.write_server_start(tmp_path, ServerReading(7, 1.0), {("get", "/version"): 1})
    merged = apiload.read_processes(tmp_path)
    assert [p.process for p in merged] == ["main", "gw0", "gw1", "gw10"]
    assert merged[1] == load_of_three_processes().processes[1]
    assert apiload.read_server_start(tmp_path) == (ServerReading(7, 1.0), {("get", "/version"): 1})
    load = ApiLoad(merged, ServerReading(7, 1.0), ServerReading(9, 2.0))
    again = ApiLoad.from_json(json.loads(json.dumps(load.to_json())))
    assert again == load


def test_run_load_at_the_end_of_a_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The main process's own file (less what preflight sent before the start reading), the end reading, the
    merge; and what the start reading is when none was taken."""
    fake = FakeKube(other_requests=500)
    monkeypatch.setattr(accounting, "_connect", lambda kubeconfig, context: fake)
    apiload.write_process(tmp_path, ProcessLoad("gw0", {"list": {"pods": 40}}))
    apiload.write_server_start(tmp_path, ServerReading(100, 1.0), PROCESS.snapshot())
    fake.list(kinds.POD, "a")  # counted in this (main) process, after the start reading
    load = accounting.run_load(tmp_path, {"kubeconfig": "k", "created_by_run": False})
    assert [p.process for p in load.processes] == ["main", "gw0"]
    assert load.processes[0].requests == {"get": {"/metrics": 1}, "list": {"pods": 1}}
    assert load.suite_requests == 41
    assert load.server_start.requests == 100 and load.server_end.requests == 500 + 1
    created = accounting.start_reading(tmp_path / "none", {"kubeconfig": "k", "created_by_run": True})
    assert created.requests == 0 and "started within this run" in created.note
    reused = accounting.start_reading(tmp_path / "none", {"kubeconfig": "k", "created_by_run": False})
    assert reused.requests is None and "existed before the run" in reused.unavailable
    never = accounting.run_load(tmp_path / "none", {})
    assert never.server_requests is None and never.server_unavailable == "the run never reached a cluster"


# ------------------------------------------------------------------------------------------------ reports
def reports_of(load: ApiLoad | None, tmp_path: Path) -> tuple[str, str, dict]:
    run = RunInfo(run_id="r1", api_load=load.to_json() if load else {})
    written = generate.write_reports(tmp_path, [RunRecords(run, [CaseRecord("suites/test_x.py::test_y", run_id="r1",
                                                                            outcome="passed")])])  # fmt: skip
    return written.html.read_text(), written.markdown.read_text(), json.loads(written.json.read_text())


def test_the_reports_show_the_load_beside_the_run(tmp_path: Path) -> None:
    page, summary, data = reports_of(load_of_three_processes(), tmp_path)
    assert "API load and overhead" in page
    assert "200 of 10,000 requests (2.0%)" in page
    assert "list 184 · watch 2 · apply 10 · delete 4" in page
    assert "10,000 (1,000 at the start; 11,000 at the end; reads of /metrics left out)" in page
    assert "200 MiB (largest process: gw0)" in page and "51.5 s in 3 processes (and 2.0 s in the CLIs they ran)" in page
    assert "gw1: 84 requests, 150 MiB, 20.0 s CPU" in page
    assert "**API load and overhead:** 200 of 10,000 requests (2.0%) · list 184" in summary
    (run,) = data["runs"]
    assert run["api_load"]["fraction"] == pytest.approx(0.02)
    assert run["api_load"]["suite_requests"] == 200 and run["api_load"]["server_requests"] == 10000
    assert [p["process"] for p in run["api_load"]["processes"]] == ["main", "gw0", "gw1"]


def test_the_reports_say_not_available_and_never_make_a_number_up(tmp_path: Path) -> None:
    load = load_of_three_processes()
    load.server_start = ServerReading(unavailable="the API server does not serve /metrics")
    page, summary, data = reports_of(load, tmp_path)
    assert "not available: the API server does not serve /metrics" in page
    assert "not available: the API server does not serve /metrics" in summary
    assert data["runs"][0]["api_load"]["fraction"] is None
    assert data["runs"][0]["api_load"]["server_requests"] is None
    assert "%)" not in html.api_load_rows(RunInfo("r", api_load=load.to_json()))[0][1]


def test_a_run_without_accounting_shows_no_section(tmp_path: Path) -> None:
    page, summary, _ = reports_of(None, tmp_path)
    assert "API load and overhead" not in page and "API load" not in summary


def test_over_http_metrics_is_a_plain_get_and_a_refusal_is_its_reason(tmp_path: Path) -> None:
    from kai_conformance.fixtures.kube.http import ClusterKube
    from tests.fakes.apiserver import serve, status

    answers = [(200, METRICS.encode()), status(403, "Forbidden", 'forbidden: User "ci" cannot get path "/metrics"')]
    clients: list[ClusterKube] = []

    def connect() -> ClusterKube:
        clients.append(ClusterKube(str(server.kubeconfig(tmp_path)), None, retries=0))
        return clients[-1]

    with serve(lambda request: answers.pop(0)) as server:
        assert accounting.read_server(connect).requests == 182
        refused = accounting.read_server(connect)
    (first, _) = server.requests
    assert (first.method, first.path, first.headers["accept"]) == ("GET", "/metrics", "text/plain")
    assert refused.requests is None and 'cannot get path "/metrics"' in refused.unavailable
    assert [c.requests.snapshot() for c in clients] == [{("get", "/metrics"): 1}] * 2
