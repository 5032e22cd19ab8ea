"""The shipped-runtimes area offline: the runtimes read from a source (Trainer v2.3.0's shared upstream copy plus
shapes of the tests' own for what those files do not cover: an MPI launcher listed first without dependsOn, as
v2.2.0 ships it, and initializers a trainer dependsOn, as torchtune's), the case's copy changes only what it says,
the PodGroup shape and the outcome each KAI row predicts per runtime, and the report's runtime table."""

from __future__ import annotations

import copy
import dataclasses
import shutil
from pathlib import Path

import pytest
import yaml

from kai_conformance.clusters import trainer_runtimes
from kai_conformance.clusters.catalog import Catalog, Combination
from kai_conformance.clusters.suite_stack import KAI_SCHEDULER_NAME, KWOK_TOLERATION, WORKLOAD_COMMAND
from kai_conformance.clusters.tools import REPO_ROOT
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.reports import html, markdown
from kai_conformance.reports.generate import summary_json
from kai_conformance.reports.model import RunRecords, build
from kai_conformance.reports.records import CaseRecord
from kai_conformance.reports.runinfo import RunInfo
from kai_conformance.reports.sections import runtime_table
from kai_conformance.suites.support import shipped_runtimes as sr
from kai_conformance.suites.support.cases.runtimes import (
    Outcome,
    RuntimeCase,
    Step,
    outcome,
    workaround_gap,
    workaround_min_member,
)
from kai_conformance.suites.support.expectations import (
    KAI_ROWS,
    MIN_MEMBER_ANNOTATION,
    QUEUE_LABEL,
    ReplicatedJob,
    minor,
)
from tests.flows import LAYOUT

#: Shapes of the tests' own (not copies of upstream files), named like runtimes Trainer ships.
POD = "template:\n                spec:\n                  containers: [{name: node, image: example.org/x:1}]"
MPI_LAUNCHER_FIRST = f"""\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {{name: mlx-distributed}}
spec:
  mlPolicy: {{numNodes: 1, mpi: {{runLauncherAsNode: true}}}}
  template:
    spec:
      replicatedJobs:
        - name: launcher
          template:
            metadata: {{labels: {{trainer.kubeflow.org/trainjob-ancestor-step: trainer}}}}
            spec:
              {POD}
        - name: node
          template:
            spec:
              {POD}
"""
INITIALIZERS = f"""\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {{name: {{name}}}}
spec:
  mlPolicy: {{numNodes: 1, torch: {{}}}}
  template:
    spec:
      replicatedJobs:
        - name: dataset-initializer
          template:
            metadata: {{labels: {{trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer}}}}
            spec:
              {POD}
        - name: model-initializer
          template:
            metadata: {{labels: {{trainer.kubeflow.org/trainjob-ancestor-step: model-initializer}}}}
            spec:
              {POD}
        - name: node
          dependsOn: [{{name: dataset-initializer, status: Complete}}, {{name: model-initializer, status: Complete}}]
          template:
            metadata: {{labels: {{trainer.kubeflow.org/trainjob-ancestor-step: trainer}}}}
            spec:
              {POD}
"""
OWN = {
    "mlx_launcher_first.yaml": MPI_LAUNCHER_FIRST,
    "tune/kustomization.yaml": "resources: [llama/one.yaml, qwen/two.yaml]\n",
    "tune/llama/one.yaml": INITIALIZERS.replace("{name}", "torchtune-llama3.2-1b"),
    "tune/qwen/two.yaml": INITIALIZERS.replace("{name}", "torchtune-qwen2.5-1.5b"),
}
UPSTREAM_FILES = ("torch_distributed.yaml", "deepspeed_distributed.yaml", "jax_distributed.yaml")
#: What each runtime of the source is made of: replicatedJobs in order, and who dependsOn whom.
TORCHTUNE = (
    ["dataset-initializer", "model-initializer", "node"],
    {"node": ["dataset-initializer", "model-initializer"]},
)
SHAPES: dict[str, tuple[list[str], dict[str, list[str]]]] = {
    "torch-distributed": (["node"], {}),
    "jax-distributed": (["node"], {}),
    "deepspeed-distributed": (["node", "launcher"], {"launcher": ["node"]}),
    "mlx-distributed": (["launcher", "node"], {}),
    "torchtune-llama3.2-1b": TORCHTUNE,
    "torchtune-qwen2.5-1.5b": TORCHTUNE,
}
NAMES = list(SHAPES)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory, upstream_runtimes: Path) -> str:
    """A runtimes tree like Trainer's: the v2.3.0 upstream files and the tests' own, listed by kustomizations."""
    root = tmp_path_factory.mktemp("runtimes")
    for name in UPSTREAM_FILES:
        shutil.copy(upstream_runtimes / name, root / name)
    for rel, text in OWN.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    listed = [*UPSTREAM_FILES[:2], "mlx_launcher_first.yaml", UPSTREAM_FILES[2], "tune"]
    (root / "kustomization.yaml").write_text(yaml.safe_dump({"resources": listed}))
    return str(root)


# ------------------------------------------------------------------------------------------------------------ data
def test_the_source_gives_its_runtimes_with_their_replicated_jobs(source: str) -> None:
    runtimes = sr.shipped(source)
    assert [r.name for r in runtimes] == ["torch-distributed", "deepspeed-distributed", "mlx-distributed",
                                          "jax-distributed", "torchtune-llama3.2-1b", "torchtune-qwen2.5-1.5b"]  # fmt: skip
    for rt in runtimes:
        assert rt.origin == source and rt.obj["kind"] == "ClusterTrainingRuntime"
        assert rt.source.startswith(sr.RUNTIMES_PATH) and rt.source.endswith(".yaml")
        jobs, deps = SHAPES[rt.name]
        assert rt.replicated_job_names == jobs
        assert {k: [d["name"] for d in v] for k, v in rt.depends_on.items()} == deps
    assert sr.runtime(source, "torchtune-qwen2.5-1.5b").source == sr.RUNTIMES_PATH + "tune/qwen/two.yaml"
    assert sr.uncovered(source) == [] and set(sr.names(source)) <= set(sr.KNOWN)


def test_the_runtimes_equal_the_upstream_files(source: str, upstream_runtimes: Path) -> None:
    for path in sorted(upstream_runtimes.glob("*.yaml")):
        upstream = yaml.safe_load(path.read_text())
        rt = sr.runtime(source, upstream["metadata"]["name"])
        assert rt.obj == upstream and rt.source == sr.RUNTIMES_PATH + path.name


def test_no_runtime_files_are_kept_in_the_repository() -> None:
    assert not (REPO_ROOT / "suites" / "support" / "data").exists()
    assert "support.data" not in (REPO_ROOT / "pyproject.toml").read_text()


def test_an_unknown_runtime_is_named_and_a_case_without_one_creates_nothing(source: str) -> None:
    with pytest.raises(KeyError, match="ships no runtime mpi-distributed; it ships torch-distributed"):
        sr.runtime(source, "mpi-distributed")
    combination = Catalog.load().combinations[0]
    ctx = RenderContext("kc-ns", combination, LAYOUT, "run", "busybox", source)
    assert RuntimeCase("xgboost-distributed").found(ctx) is None
    assert RuntimeCase("xgboost-distributed").manifests(ctx) == []


def test_without_the_option_the_release_is_fetched_and_render_mode_fetches_nothing() -> None:
    combination = Catalog.load().combinations[0]
    ctx = RenderContext("kc-ns", combination, LAYOUT, "run", "busybox")
    assert sr.source_of(ctx) == trainer_runtimes.default_source(combination.trainer.version)
    with pytest.raises(trainer_runtimes.RuntimesUnavailable, match="--trainer-runtimes"):
        RuntimeCase("torch-distributed").found(ctx)  # the self-tests' fetch refuses: a network error
    render = dataclasses.replace(ctx, runtimes_default=False)
    assert sr.source_of(render) is None and RuntimeCase("torch-distributed").manifests(render) == []


# --------------------------------------------------------------------------------------------------- the copy
def _strip(obj: dict) -> dict:
    """The object without what :data:`shipped_runtimes.CHANGES` may touch."""
    out = copy.deepcopy(obj)
    out.pop("kind")
    out["metadata"].pop("namespace", None)
    for rjob in out["spec"]["template"]["spec"]["replicatedJobs"]:
        pod = rjob["template"]["spec"]["template"]["spec"]
        pod.pop("schedulerName", None)
        pod["tolerations"] = [t for t in pod.get("tolerations") or [] if t != KWOK_TOLERATION] or None
        for c in pod["containers"]:
            for key in ("image", "imagePullPolicy", "command", "args", "readinessProbe"):
                c.pop(key, None)
            c["env"] = [e for e in c.get("env") or [] if not e["name"].startswith("KC_")] or None
    return out


@pytest.mark.parametrize("name", NAMES)
def test_the_case_copy_changes_only_scheduler_images_and_command(source: str, name: str) -> None:
    rt = sr.runtime(source, name)
    before = copy.deepcopy(rt.obj)
    made = sr.case_copy(rt, "kc-ns", "example.org/busybox:1")
    assert rt.obj == before  # the shipped data is never changed
    assert made["kind"] == "TrainingRuntime" and made["metadata"]["namespace"] == "kc-ns"
    assert made["metadata"]["name"] == name and made["spec"]["mlPolicy"] == rt.obj["spec"]["mlPolicy"]
    for rjob in made["spec"]["template"]["spec"]["replicatedJobs"]:
        pod = rjob["template"]["spec"]["template"]["spec"]
        assert pod["schedulerName"] == KAI_SCHEDULER_NAME and KWOK_TOLERATION in pod["tolerations"]
        for c in pod["containers"]:
            assert c["image"] == "example.org/busybox:1" and c["command"] == WORKLOAD_COMMAND
            assert "args" not in c and "readinessProbe" not in c
            ends = any(e["name"] == "KC_RUN_SECONDS" for e in c.get("env") or [])
            assert ends == (rjob["name"] in ("dataset-initializer", "model-initializer"))
    assert _strip(made) == _strip(rt.obj)


# ------------------------------------------------------------------------------------- shape and outcome per row
def test_pods_per_replicated_job_follow_trainer(source: str) -> None:
    assert sr.runtime(source, "torch-distributed").replicated_jobs() == [ReplicatedJob("node", 2)]
    assert sr.runtime(source, "deepspeed-distributed").replicated_jobs() == [
        ReplicatedJob("node", 1), ReplicatedJob("launcher", 1)]  # fmt: skip
    assert sr.runtime(source, "deepspeed-distributed").replicated_jobs(4)[0] == ReplicatedJob("node", 3)
    assert sr.runtime(source, "mlx-distributed").replicated_jobs() == [
        ReplicatedJob("launcher", 1), ReplicatedJob("node", 1)]  # fmt: skip
    tune = sr.runtime(source, "torchtune-qwen2.5-1.5b")
    assert tune.replicated_jobs() == [ReplicatedJob("dataset-initializer", 1), ReplicatedJob("model-initializer", 1),
                                      ReplicatedJob("node", 2)]  # fmt: skip
    assert tune.up_front == ["dataset-initializer", "model-initializer"] and tune.pods_of(tune.up_front) == 2


def test_the_podgroup_shape_per_row_counts_every_replicated_job(source: str) -> None:
    rt = sr.runtime(source, "deepspeed-distributed")
    spec = KAI_ROWS["v0.17"].podgroup_spec(rt.replicated_jobs())
    assert spec["minSubGroup"] == 2
    assert KAI_ROWS["v0.14"].podgroup_spec(rt.replicated_jobs())["minMember"] == 2
    capped = KAI_ROWS["v0.17"].podgroup_spec(rt.replicated_jobs(), workaround_min_member(KAI_ROWS["v0.17"], rt))
    assert capped["minSubGroup"] == 1


EXPECTED = {  # runtime → KAI minor → outcome (v0.16+: KAI's scheduler stops the workaround, workaround_gap)
    "torch-distributed": dict.fromkeys(KAI_ROWS, Outcome.WORKS),
    "deepspeed-distributed": {"v0.13": Outcome.FAILS, "v0.14": Outcome.WORKAROUND, "v0.15": Outcome.WORKS,
                              "v0.16": Outcome.FAILS, "v0.17": Outcome.FAILS},
    "torchtune-llama3.2-1b": {"v0.13": Outcome.FAILS, "v0.14": Outcome.WORKAROUND, "v0.15": Outcome.WORKS,
                              "v0.16": Outcome.FAILS, "v0.17": Outcome.FAILS},
}  # fmt: skip


@pytest.mark.parametrize("name", list(EXPECTED))
@pytest.mark.parametrize("minor", list(KAI_ROWS))
def test_each_row_predicts_works_fails_or_workaround(source: str, name: str, minor: str) -> None:
    got, why = outcome(KAI_ROWS[minor], sr.runtime(source, name))
    assert got is EXPECTED[name][minor]
    assert ("#1209" in why) == (got is Outcome.FAILS) or MIN_MEMBER_ANNOTATION in why
    # an MPI runtime without dependsOn (v2.2's shape) works everywhere
    assert outcome(KAI_ROWS[minor], sr.runtime(source, "mlx-distributed"))[0] is Outcome.WORKS


def _renamed(rt: sr.ShippedRuntime, old: str, new: str) -> sr.ShippedRuntime:
    """``rt`` with replicatedJob ``old`` called ``new`` (and every dependsOn on it): only the names differ."""
    text = yaml.safe_dump(rt.obj).replace(f"name: {old}\n", f"name: {new}\n")
    return dataclasses.replace(rt, obj=yaml.safe_load(text))


@pytest.mark.parametrize("minor", ["v0.16", "v0.17"])
def test_the_subgroup_rows_say_where_kai_stops_the_workaround(source: str, minor: str) -> None:
    row = KAI_ROWS[minor]
    deepspeed = sr.runtime(source, "deepspeed-distributed")
    first = workaround_gap(row, deepspeed)
    assert first is not None and first.step is Step.FIRST
    assert "from the first 1 SubGroup(s) by name while none is placed (launcher)" in first.reason
    assert "launcher has no pod until node is Ready" in first.reason and "#1209" in first.reason
    tune = sr.runtime(source, "torchtune-qwen2.5-1.5b")
    later = workaround_gap(row, tune)
    assert later is not None and later.step is Step.LATER
    assert "dataset-initializer, model-initializer bind under root minSubGroup 2" in later.reason
    assert (
        "1 replicatedJob(s) with pods stay below minSubGroup 2" in later.reason and "node never binds" in later.reason
    )
    # the same runtimes with the dependent replicatedJob named to sort last: nothing in KAI's source stops them
    assert workaround_gap(row, _renamed(deepspeed, "launcher", "zlauncher")) is None
    # initializers the trainer waits Ready for keep their pods, so they keep counting toward the cap
    ready = yaml.safe_load(yaml.safe_dump(tune.obj).replace("status: Complete", "status: Ready"))
    assert workaround_gap(row, dataclasses.replace(tune, obj=ready)) is None
    why = outcome(row, deepspeed)[1]
    assert why.startswith(row.depends_on_gap) and first.reason in why


@pytest.mark.parametrize("minor", ["v0.13", "v0.14", "v0.15"])
def test_flat_rows_have_no_workaround_gap(source: str, minor: str) -> None:
    for name in ("deepspeed-distributed", "torchtune-llama3.2-1b", "torch-distributed"):
        assert workaround_gap(KAI_ROWS[minor], sr.runtime(source, name)) is None


def _ctx(combination: Combination, source: str) -> RenderContext:
    return RenderContext("kc-ns", combination, LAYOUT, "run", "busybox", source)


def test_the_trainjob_is_queued_and_annotated_per_row(source: str) -> None:
    combinations = [c for c in Catalog.load().combinations if minor(c.trainer.expectations_version) == "v2.3"]
    by_kai = {minor(c.kai.expectations_version): c for c in combinations}
    ctx17 = _ctx(by_kai["v0.17"], source)
    queue, copied, job = RuntimeCase("deepspeed-distributed").manifests(ctx17)
    assert job["metadata"]["labels"][QUEUE_LABEL] == queue["metadata"]["name"]
    assert copied["metadata"]["namespace"] == "kc-ns"
    assert job["spec"]["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime",
                                         "name": "deepspeed-distributed"}  # fmt: skip
    assert job["spec"]["trainer"]["numNodes"] == 1 and "annotations" not in job["metadata"]
    assert job["spec"]["trainer"]["resourcesPerNode"]["limits"] == {"nvidia.com/gpu": "1"}
    *_, fixed = RuntimeCase("deepspeed-distributed", workaround=True).manifests(ctx17)
    assert fixed["metadata"]["annotations"] == {MIN_MEMBER_ANNOTATION: "1"}
    if "v0.15" in by_kai:
        *_, flat = RuntimeCase("torchtune-llama3.2-1b").manifests(_ctx(by_kai["v0.15"], source))
        assert flat["metadata"]["annotations"] == {MIN_MEMBER_ANNOTATION: "2"}


# -------------------------------------------------------------------------------------------------- the report
def _record(test: str, runtime: str, outcome_: str, kai: str, message: str = "") -> CaseRecord:
    return CaseRecord(f"suites/test_runtimes.py::{test}[{runtime}]", area="runtimes", outcome=outcome_,
                      params={"case": runtime}, versions={"kai": kai}, message=message, run_id="r",
                      failure_kind="product" if outcome_ in ("failed", "xfailed") else "")  # fmt: skip


def test_the_report_shows_runtime_by_kai_version() -> None:
    gap = "known deviation: KAI v0.17: KAI issue #1209: the podgrouper ignores JobSet dependsOn"
    records = [
        _record(runtime_table.SHIPPED, "torch-distributed", "passed", "v0.17.0"),
        _record(runtime_table.SHIPPED, "deepspeed-distributed", "xfailed", "v0.17.0", gap),
        _record(runtime_table.WORKAROUND, "deepspeed-distributed", "passed", "v0.17.0"),
        _record(runtime_table.SHIPPED, "torchtune-llama3.2-1b", "xfailed", "v0.17.0", gap),
        _record(runtime_table.WORKAROUND, "torchtune-llama3.2-1b", "skipped", "v0.17.0"),
    ]
    report = build([RunRecords(RunInfo("r", versions={"kai": "v0.17.0"}), records)])
    table = runtime_table.of_report(report)
    assert table is not None and table.kai_versions == ["v0.17.0"]
    assert table.rows == {
        "torch-distributed": {"v0.17.0": "works"},
        "deepspeed-distributed": {"v0.17.0": "works with workaround (KAI #1209)"},
        "torchtune-llama3.2-1b": {"v0.17.0": "fails (KAI #1209)"},
    }
    text = markdown.render(report)
    assert "### Trainer's shipped runtimes" in text and "| deepspeed-distributed | works with workaround" in text
    page = html.render(report)
    assert 'id="runtimes"' in page and "fails (KAI #1209)" in page
    assert summary_json(report)["runtimes"]["rows"]["torch-distributed"] == {"v0.17.0": "works"}


def test_a_report_without_runtime_cases_has_no_table() -> None:
    report = build([RunRecords(RunInfo("r"), [CaseRecord("suites/test_gang.py::t", area="gang", outcome="passed")])])
    assert runtime_table.of_report(report) is None and summary_json(report)["runtimes"] is None
    assert "shipped runtimes" not in markdown.render(report) and 'id="runtimes"' not in html.render(report)


def test_a_workaround_case_that_did_not_bind_reads_as_a_failure_in_the_table() -> None:
    gap = "known deviation: KAI v0.17: KAI issue #1209: the podgrouper ignores JobSet dependsOn"
    records = [
        _record(runtime_table.SHIPPED, "mlx-distributed", "xfailed", "v0.17.0", gap),
        _record(runtime_table.WORKAROUND, "mlx-distributed", "xfailed", "v0.17.0", "known deviation: not seen"),
    ]
    table = runtime_table.of_report(build([RunRecords(RunInfo("r", versions={"kai": "v0.17.0"}), records)]))
    assert table is not None
    assert table.rows == {"mlx-distributed": {"v0.17.0": "fails (KAI #1209); the workaround does not help either"}}


def _table(kai: str, *records: CaseRecord) -> dict[str, dict[str, str]]:
    table = runtime_table.of_report(build([RunRecords(RunInfo("r", versions={"kai": kai}), list(records))]))
    assert table is not None
    return table.rows


def test_a_workaround_case_the_cluster_could_not_judge_says_so_in_the_table() -> None:
    gap = "known deviation: KAI v0.17: KAI issue #1209: the podgrouper ignores JobSet dependsOn"
    pvc = "torchtune-llama3.2-1b: PersistentVolumeClaim initializer-shipped is Pending …; KAI is not judged; run …"
    assert _table(
        "v0.17.0",
        _record(runtime_table.SHIPPED, "torchtune-llama3.2-1b", "xfailed", "v0.17.0", gap),
        _record(runtime_table.WORKAROUND, "torchtune-llama3.2-1b", "skipped", "v0.17.0", pvc),
    ) == {"torchtune-llama3.2-1b": {"v0.17.0": "fails (KAI #1209); workaround not judged on this cluster"}}
    # a row without a workaround skips its case too, and that says nothing about the cluster
    assert _table(
        "v0.13.0",
        _record(runtime_table.SHIPPED, "deepspeed-distributed", "xfailed", "v0.13.0", gap),
        _record(runtime_table.WORKAROUND, "deepspeed-distributed", "skipped", "v0.13.0", "no workaround: ignores"),
    ) == {"deepspeed-distributed": {"v0.13.0": "fails (KAI #1209)"}}
