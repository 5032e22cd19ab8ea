"""Trainer's shipped runtimes read at run time (clusters/trainer_runtimes.py): from a directory (a kustomization
tree, nested ones included, or bare files), from a URL through the fetch function, refused clearly when unreadable;
the fetch plan lists the download only when the runtimes area may run, and --offline names --trainer-runtimes."""

from __future__ import annotations

from pathlib import Path

import pytest

from kai_conformance.clusters import fetches, trainer_runtimes
from kai_conformance.fixtures import errors
from kai_conformance.fixtures.configuration import preflight
from kai_conformance.fixtures.plugin.markers import AREA_MARKERS
from kai_conformance.fixtures.plugin.session import RUNTIMES_MODULE
from kai_conformance.suites.support import shipped_runtimes
from tests.clusters.test_fetches import everything_local
from tests.clusters.test_plugin import cluster_world, run_suite  # noqa: F401 (fixture)
from tests.fakes.apiserver import serve
from tests.fakes.bridge import route_to
from tests.fakes.installation import make_settings, worker_node
from tests.fakes.kube import FakeKube

RUNTIME = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: {name}
spec:
  mlPolicy: {{numNodes: 1}}
  template:
    spec:
      replicatedJobs:
        - name: node
          template:
            spec:
              template:
                spec:
                  containers: [{{name: node, image: example.org/x:1}}]
"""
#: A tree shaped like Trainer's manifests/base/runtimes/: files listed by a kustomization, a subfolder with its own.
TREE = {
    "kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n"
    "  - b_runtime.yaml\n  - a_runtime.yaml\n  - tune\n",
    "b_runtime.yaml": RUNTIME.format(name="b-distributed"),
    "a_runtime.yaml": RUNTIME.format(name="a-distributed")
    + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
    "not_listed.yaml": RUNTIME.format(name="not-listed"),
    "tune/kustomization.yaml": "resources:\n  - model/small.yaml\n  - model/large.yaml\n",
    "tune/model/small.yaml": RUNTIME.format(name="tune-small"),
    "tune/model/large.yaml": RUNTIME.format(name="tune-large"),
}
EXPECTED = [
    ("b_runtime.yaml", "b-distributed"),
    ("a_runtime.yaml", "a-distributed"),
    ("tune/model/small.yaml", "tune-small"),
    ("tune/model/large.yaml", "tune-large"),
]
BASE = "https://example.org/trainer/manifests/base/runtimes/"


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def unreachable(url: str, timeout: float) -> str:
    raise AssertionError(f"a directory source fetched {url}")


def test_a_directory_gives_the_runtimes_its_kustomizations_list_in_their_order(tmp_path: Path) -> None:
    loaded = trainer_runtimes.load(str(write_tree(tmp_path, TREE)), unreachable)
    assert [(rel, obj["metadata"]["name"]) for rel, obj in loaded] == EXPECTED


def test_a_directory_without_a_kustomization_gives_every_yaml_file(tmp_path: Path) -> None:
    write_tree(tmp_path, {"z.yaml": RUNTIME.format(name="z"), "a.yml": RUNTIME.format(name="a"), "x.txt": "no"})
    assert [rel for rel, _ in trainer_runtimes.load(str(tmp_path), unreachable)] == ["a.yml", "z.yaml"]


def test_the_upstream_copy_loads_as_its_files(upstream_runtimes: Path) -> None:
    loaded = trainer_runtimes.load(str(upstream_runtimes), unreachable)
    files = sorted(p.name for p in upstream_runtimes.glob("*.yaml"))
    assert [rel for rel, _ in loaded] == files
    assert {obj["metadata"]["name"] for _, obj in loaded} >= {"torch-distributed", "deepspeed-distributed"}


def test_a_url_reads_the_kustomization_then_every_file_it_lists(tmp_path: Path) -> None:
    asked: list[tuple[str, float]] = []

    def fetch(url: str, timeout: float) -> str:
        asked.append((url, timeout))
        rel = url.removeprefix(BASE)
        if rel not in TREE:
            raise errors.InfrastructureError(f"cannot download {url}: HTTP Error 404: Not Found")
        return TREE[rel]

    loaded = trainer_runtimes.load(BASE.rstrip("/"), fetch)
    assert [(rel, obj["metadata"]["name"]) for rel, obj in loaded] == EXPECTED
    assert [url.removeprefix(BASE) for url, _ in asked] == [
        "kustomization.yaml", "b_runtime.yaml", "a_runtime.yaml", "tune/kustomization.yaml", "tune/model/small.yaml",
        "tune/model/large.yaml",
    ]  # fmt: skip
    assert {timeout for _, timeout in asked} == {trainer_runtimes.FETCH_TIMEOUT}


def test_the_default_is_the_tested_release_on_github() -> None:
    assert trainer_runtimes.default_source("v2.3.0") == (
        "https://raw.githubusercontent.com/kubeflow/trainer/v2.3.0/manifests/base/runtimes/"
    )


def test_a_network_error_is_one_message_naming_the_option() -> None:
    def offline(url: str, timeout: float) -> str:
        raise errors.InfrastructureError(f"cannot download {url}: <urlopen error [Errno -3] name resolution>\nfix: x")

    url = trainer_runtimes.default_source("v2.3.0")
    with pytest.raises(trainer_runtimes.RuntimesUnavailable) as caught:
        trainer_runtimes.load(url, offline)
    text = str(caught.value)
    assert text.startswith(f"cannot read Trainer's shipped runtimes from {url} (--trainer-runtimes): cannot download")
    assert "--trainer-runtimes=DIR" in text and "--branch v2.3.0" in text
    assert isinstance(caught.value, errors.InfrastructureError) and caught.value.explained


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"kustomization.yaml": "resources: [gone.yaml]\n"}, "lists gone.yaml, which is missing"),
        ({"kustomization.yaml": "resources: [bad.yaml]\n", "bad.yaml": "a: [\n"}, "bad.yaml .* not valid YAML"),
        ({"kustomization.yaml": "resources: []\n"}, r"no ClusterTrainingRuntime in .* \(--trainer-runtimes\)"),
    ],
)
def test_a_broken_tree_is_named(tmp_path: Path, files: dict[str, str], message: str) -> None:
    with pytest.raises(trainer_runtimes.RuntimesUnavailable, match=message):
        trainer_runtimes.load(str(write_tree(tmp_path, files)), unreachable)
    with pytest.raises(trainer_runtimes.RuntimesUnavailable, match=r"--trainer-runtimes .*missing is not a directory"):
        trainer_runtimes.load(str(tmp_path / "missing"), unreachable)


def test_the_area_reads_once_per_process_and_a_failure_once_too(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def fetch(url: str, timeout: float) -> str:
        calls.append(url)
        raise errors.InfrastructureError(f"cannot download {url}: timed out")

    monkeypatch.setattr(shipped_runtimes, "FETCH", fetch)
    monkeypatch.setattr(shipped_runtimes, "_LOADED", {})
    with pytest.raises(trainer_runtimes.RuntimesUnavailable) as first:
        shipped_runtimes.shipped(BASE)
    with pytest.raises(trainer_runtimes.RuntimesUnavailable) as second:
        shipped_runtimes.shipped(BASE)
    assert first.value is second.value and calls == [BASE + "kustomization.yaml"]


# ------------------------------------------------------------------------------------------ fetch plan, offline
def test_the_fetch_plan_lists_the_runtimes_only_when_the_area_may_run(tmp_path: Path) -> None:
    local = everything_local(tmp_path)
    settings = make_settings(tmp_path, sources=local)
    assert fetches.planned_fetches(settings, lambda image: True) == []
    (fetch,) = fetches.planned_fetches(settings, lambda image: True, runtimes=True)
    assert fetch.what == f"Trainer's shipped runtimes {trainer_runtimes.default_source('v2.3.0')}"
    assert fetch.instead.startswith("--trainer-runtimes=DIR with Trainer's manifests/base/runtimes/")
    given = make_settings(tmp_path, sources=local, trainer_runtimes=str(tmp_path))
    assert fetches.planned_fetches(given, lambda image: True, runtimes=True) == []
    url = make_settings(tmp_path, sources=local, trainer_runtimes=BASE)
    assert BASE in fetches.planned_fetches(url, lambda image: True, runtimes=True)[0].what


def test_offline_refuses_the_area_without_a_runtimes_directory(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, sources=everything_local(tmp_path), offline=True)
    assert preflight.check_fetches(settings, lambda image: True) == []
    (problem,) = preflight.check_fetches(settings, lambda image: True, runtimes=True)
    assert problem.what.startswith("--offline, but Trainer's shipped runtimes https://raw.githubusercontent.com/")
    assert "--trainer-runtimes=DIR" in problem.fix


@pytest.mark.parametrize(
    ("args", "expression", "may"),
    [
        ([], "", True),
        (["suites"], "not slow", True),
        (["suites"], "gang", False),
        (["suites"], "runtimes and not control", True),
        (["suites/test_gang.py"], "", False),
        (["suites/test_runtimes.py::test_a_shipped_runtime_runs_under_kai[jax-distributed]"], "", True),
        (["suites/test_gang.py", "suites/test_runtimes.py"], "", True),
        (["kai_conformance.suites"], "", True),  # --pyargs: not a path, may select anything
    ],
)
def test_the_area_may_run_by_arguments_and_marker_expression(args: list[str], expression: str, may: bool) -> None:
    cwd = RUNTIMES_MODULE.parent.parent
    assert preflight.area_may_run(args, expression, "runtimes", RUNTIMES_MODULE, cwd, list(AREA_MARKERS)) is may


# ------------------------------------------------------------------------------------ a case's report, in a run
UNREADABLE = """
from kai_conformance.clusters.trainer_runtimes import RuntimesUnavailable


def test_unreadable(cluster):
    raise RuntimesUnavailable("cannot read Trainer's shipped runtimes from X (--trainer-runtimes): down\\nfix: Y")
"""


@pytest.mark.usefixtures("fast_polling", "cluster_world")
def test_unreadable_runtimes_fail_the_case_with_their_message_alone(tmp_path: Path, fake: FakeKube) -> None:
    fake.put(worker_node("gpu-a", None, capacity=8))
    with serve(route_to(fake)) as server:
        kubeconfig = str(server.kubeconfig(tmp_path))
        _, outcomes = run_suite(tmp_path, "existing", 8, "--kubeconfig", kubeconfig, name="runtimes", suite=UNREADABLE)
    outcome, message = outcomes.reports["test_unreadable"]
    assert outcome == "failed"
    assert message == (
        "kai_conformance.clusters.trainer_runtimes.RuntimesUnavailable: cannot read Trainer's shipped runtimes from X "
        "(--trainer-runtimes): down\nfix: Y"
    )


@pytest.mark.parametrize(
    ("files", "what"),
    [
        ({"kustomization.yaml": "resources: [gone.yaml]\n"}, "kustomization.yaml of manifests/base/runtimes/ lists "
         "gone.yaml, which is missing"),
        ({"a.yaml": "x: 1\n"}, "no ClusterTrainingRuntime in {root}"),
        ({"a.yaml": "kind: ClusterTrainingRuntime\n"}, "a.yaml in {root} is a ClusterTrainingRuntime without "
         "metadata.name"),
        ({"a.yaml": RUNTIME.format(name="x").replace("replicatedJobs:", "replicatedJobz:")}, "a.yaml in {root} is a "
         "ClusterTrainingRuntime without spec.template.spec.replicatedJobs"),
        ({"a.yaml": "kind: [\n"}, "a.yaml of Trainer's runtimes is not valid YAML"),
    ],
)  # fmt: skip
def test_a_runtimes_directory_the_area_cannot_read_is_a_preflight_problem(
    tmp_path: Path, files: dict[str, str], what: str
) -> None:
    """Found before anything is created (render mode too), not when the area's first case runs, nor as a traceback."""
    from kai_conformance.fixtures.configuration.resolution import runtimes_problems

    root = write_tree(tmp_path, files)
    (problem,) = runtimes_problems(str(root))
    assert problem.what.startswith(f"--trainer-runtimes {root}: " + what.format(root=root)), problem.what
    assert "--trainer-runtimes" in problem.fix
    assert runtimes_problems(str(write_tree(tmp_path / "good", {"a.yaml": RUNTIME.format(name="a")}))) == []
    (root / "file").write_text("")
    assert [p.what for p in runtimes_problems(str(root / "file"))] == [
        f"--trainer-runtimes {root / 'file'} is a file, not a directory"
    ]
    assert runtimes_problems("https://") and not runtimes_problems("https://example.org/r/")


def test_render_mode_names_runtimes_it_cannot_download_once_and_writes_nothing(tmp_path: Path) -> None:
    from tests.configuration.test_preflight import run_suite as run_suites

    out = tmp_path / "out"
    result = run_suites(
        [f"--render-manifests={out}", "--trainer-runtimes=http://127.0.0.1:9/runtimes/", "suites/test_runtimes.py"],
        tmp_path, path=str(tmp_path),
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 4, output
    assert "INTERNALERROR" not in output and "Traceback" not in output
    assert "cannot read Trainer's shipped runtimes from http://127.0.0.1:9/runtimes/" in output
    assert "fix: check network access, or pass --trainer-runtimes=DIR" in output
    assert not out.exists()
