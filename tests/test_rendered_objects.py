"""Every case renders valid objects for every supported combination and topology, and declares honest marks.

Objects are validated against the upstream CRD OpenAPI schemas of the combination's versions (see
tests/crd_schemas.py for where they come from) and, for core kinds, structurally. The command line itself
(``pytest suites --collect-only`` and ``--render-manifests``) is exercised once, offline.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kai_conformance.clusters.catalog import Catalog
from kai_conformance.clusters.layout import GpuLayout, GpuNode
from kai_conformance.clusters.suite_stack import stack_manifests
from kai_conformance.clusters.topology import available_topologies, load_topology
from kai_conformance.fixtures.kube import kinds
from kai_conformance.fixtures.plugin.markers import AREA_MARKERS, OPT_IN_MARKERS
from kai_conformance.fixtures.render import RenderContext
from kai_conformance.fixtures.workspace import prepare
from tests import crd_schemas, upstream
from tests.suite_cases import SUITE_MODULES, SuiteCase, suite_cases

ROOT = Path(__file__).resolve().parent.parent
CATALOG = Catalog.load()
IMAGE = CATALOG.defaults["workload_image"]
CASES = suite_cases()
#: The read branch heads a pull request targets (clusters/builds.py), judged like releases: KAI main with Trainer
#: master and JobSet main, and KAI's v0.17 branch with the default Trainer.
BUILD_COMBINATIONS = [
    CATALOG.resolve(kai="main", trainer="master", jobset="main"),
    CATALOG.resolve(kai="v0.17"),
]
#: Trainer's runtimes for the runtimes area's cases: the shared upstream copy (v2.3.0), when present; without it
#: those cases render nothing (as render mode does without --trainer-runtimes), and nothing is fetched.
_RUNTIMES_ROOT = upstream.upstream_root()
RUNTIMES = _RUNTIMES_ROOT / upstream.TRAINER_RUNTIMES if _RUNTIMES_ROOT else None
# scale-500 renders like scale-100 (same fake-node layout, 5× the pods of the cases that fill every GPU): left out so
# the self-tests stay fast.
LAYOUTS = {
    name: load_topology(name).layout("kai-conformance") for name in available_topologies() if name != "scale-500"
}
#: Layouts no topology file has, to exercise the symbolic sizes: uneven nodes, one small node.
ODD_LAYOUTS = {
    "uneven": GpuLayout((GpuNode("big", 8), GpuNode("small", 2), GpuNode("cpu", 0))),
    "tiny": GpuLayout((GpuNode("only", 1),)),
}
AREAS = set(AREA_MARKERS)


def rendered(entry: SuiteCase, combination, layout: GpuLayout) -> list[dict]:
    """The case's objects exactly as the workspace would apply them (labels, namespace)."""
    namespace = "kc-render-check"
    runtimes = str(RUNTIMES) if RUNTIMES is not None and RUNTIMES.is_dir() else None
    ctx = RenderContext(namespace, combination, layout, "render", IMAGE, runtimes, runtimes_default=False)
    return [prepare(obj, "render", f"suites/{entry.test}", namespace) for obj in entry.case.manifests(ctx)]


def load_schemas(combination, root: Path) -> crd_schemas.SchemaSet:
    try:
        return crd_schemas.schemas_for(combination, root)
    except crd_schemas.MissingSchemas as exc:
        if combination in BUILD_COMBINATIONS:  # fetch_crds.py fetches releases; the builds' folders are shared only
            pytest.skip(f"{exc} (a branch head's schemas: ../shared/crds)")
        pytest.fail(str(exc))


@pytest.mark.parametrize("combination", [*CATALOG.combinations, *BUILD_COMBINATIONS], ids=lambda c: c.name)
def test_every_case_renders_schema_valid_objects(combination, schema_root: Path) -> None:
    schemas = load_schemas(combination, schema_root)
    problems = []
    checked = 0
    documents = [("_stack", prepare(obj, "render", "", "")) for obj in stack_manifests(IMAGE)]
    for layout_name, layout in LAYOUTS.items():
        documents += [
            (f"{entry.test} on {layout_name}", obj) for entry in CASES for obj in rendered(entry, combination, layout)
        ]
    for where, obj in documents:
        found = crd_schemas.metadata_problems(obj) + crd_schemas.core_problems(obj)
        if schemas.covers(obj):
            found += schemas.problems(obj)
            checked += 1
        elif kinds.known(obj["apiVersion"], obj["kind"]) not in (
            kinds.NAMESPACE,
            kinds.POD,
            kinds.JOB,
            kinds.PRIORITY_CLASS,
        ):
            found.append(f"no schema for {obj['apiVersion']}/{obj['kind']} in {schema_root} and no structural check")
        problems += [f"{where}: {obj['kind']} {obj['metadata'].get('name')}: {p}" for p in found]
    assert checked > len(CASES), "the CRD schemas validated almost nothing: wrong schema directory?"
    assert not problems, f"{len(problems)} problem(s):\n" + "\n".join(problems[:30])


def test_strict_schemas_reject_an_unknown_field_and_a_wrong_type(schema_root: Path) -> None:
    """Proof that validation can fail: a misspelt TrainJob field and a string quota are rejected."""
    combination = CATALOG.combination(CATALOG.defaults["combination"])
    schemas = load_schemas(combination, schema_root)
    entry = next(e for e in CASES if "test_a_gang_that_fits_is_bound_together" in e.test)
    queue, trainjob = rendered(entry, combination, LAYOUTS["pr-gate"])
    trainjob["spec"]["trainer"]["numNode"] = 2
    assert any("numNode" in p for p in schemas.problems(trainjob))
    queue["spec"]["resources"]["gpu"]["quota"] = "two"
    assert any("quota" in p for p in schemas.problems(queue))


def test_core_and_metadata_checks_fire() -> None:
    bad = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "9-Bad"}}
    found = crd_schemas.metadata_problems(bad)
    assert any("not a valid TrainJob name" in p for p in found)
    assert any("namespace missing" in p for p in found)
    label = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns", "labels": {"a/b/c": "x" * 64}}}
    assert len(crd_schemas.metadata_problems(label)) == 2
    assert crd_schemas.core_problems({"kind": "Pod", "spec": {"containers": []}})
    assert crd_schemas.core_problems({"kind": "PriorityClass", "value": "high"})
    assert crd_schemas.metadata_problems({"apiVersion": "v9", "kind": "Gadget"})


def test_every_area_has_cases_and_a_control_case() -> None:
    areas = {mark for entry in CASES for mark in entry.marks} & AREAS
    assert areas == AREAS
    controlled = {mark for entry in CASES if "control" in entry.marks for mark in entry.marks} & AREAS
    # The AI conformance cases reuse the gang, lifecycle and sharing detectors (whose areas have controls); their own
    # are shown firing on the simulated cluster (tests/flows/test_ai_conformance.py).
    uncontrolled = {"ai_conformance"}
    assert controlled == AREAS - uncontrolled, f"areas without a control case: {sorted(AREAS - controlled)}"


@pytest.mark.parametrize("layout_name", [*LAYOUTS, *ODD_LAYOUTS])
def test_gpu_demand_fits_the_cluster_and_whole_cluster_cases_are_serial(layout_name: str) -> None:
    layout = {**LAYOUTS, **ODD_LAYOUTS}[layout_name]
    combination = CATALOG.combination(CATALOG.defaults["combination"])
    for entry in CASES:
        demand = entry.case.gpu_demand(layout)
        assert 0 <= demand <= layout.total, f"{entry.test}: demand {demand} on {layout.describe()}"
        reserves = getattr(entry.case, "reserves_every_gpu", False)
        if demand == layout.total and demand > 2 and not reserves:
            assert "serial" in entry.marks, f"{entry.test} may hold every GPU but is not marked serial"
        if reserves:  # binds nothing, but only while every GPU is idle: it leases them all
            assert demand == layout.total, f"{entry.test} must lease every GPU of {layout.describe()}"
        if "disruptive" in entry.marks:
            assert "serial" in entry.marks, f"{entry.test}: disruptive cases must also be serial"
        rendered(entry, combination, layout)  # every symbolic size resolves on every layout


def test_case_ids_are_unique_and_object_names_unique_within_a_case() -> None:
    tests = [entry.test for entry in CASES]
    assert len(tests) == len(set(tests))
    combination = CATALOG.combination(CATALOG.defaults["combination"])
    for entry in CASES:
        keys = [
            (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])
            for o in rendered(entry, combination, LAYOUTS["pr-gate"])
        ]
        assert len(keys) == len(set(keys)), f"{entry.test} creates the same object twice: {keys}"


def test_the_command_line_collects_and_renders_offline(tmp_path: Path) -> None:
    """``pytest suites --collect-only`` and ``--render-manifests`` need no cluster and list/render every case."""
    collect = subprocess.run(
        [sys.executable, "-m", "pytest", "suites", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert collect.returncode == 0, collect.stdout + collect.stderr
    listed = [line for line in collect.stdout.splitlines() if "::" in line]
    # Opt-in cases (fixtures/plugin/markers.py) are deselected unless -m names their marker: never listed by default.
    opt_in = [entry for entry in CASES if entry.marks & set(OPT_IN_MARKERS)]
    assert opt_in and f"({len(opt_in)} deselected)" in collect.stdout
    assert len(listed) >= len(CASES) - len(opt_in)
    for module in SUITE_MODULES:
        if module not in ("test_scale", "test_chaos"):  # opt-in areas
            assert any(line.startswith(f"suites/{module}.py::") for line in listed), module
    assert not any("test_scale.py" in line or "test_chaos.py" in line for line in listed)

    out = tmp_path / "rendered"
    render = subprocess.run(
        [sys.executable, "-m", "pytest", "suites", "--render-manifests", str(out), "-q", "-p", "no:cacheprovider"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert render.returncode == 0, render.stdout + render.stderr
    files = sorted(out.glob("*.yaml"))
    assert len(files) == len(listed) + 1  # one per case plus _stack.yaml
    # One line says what happened; only the opt-in cases were deselected, as in a run without -m.
    (last,) = render.stdout.strip().splitlines()
    rendered_line = f"{len(opt_in)} deselected, {len(listed)} case(s) rendered for KAI "
    assert last.startswith(rendered_line) and f"into {out} (no cluster touched)" in last
    for path in files:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        assert docs, path
        for doc in docs:
            assert not crd_schemas.metadata_problems(doc), (path, doc["kind"])
