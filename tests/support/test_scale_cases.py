"""The scale cases: their plans from the GPU layout (deterministic, every gang size and pod size, the filling burst fits
the empty cluster, the overload is larger than it), and the ``scale`` marker's opt-in selection: deselected (not
skipped) unless ``-m`` names it, so a plain ``pytest suites`` and the PR gate never run a scale case."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kai_conformance.clusters.layout import GpuLayout, GpuNode
from kai_conformance.clusters.topology import available_topologies, load_topology
from kai_conformance.fixtures.plugin.markers import not_opted_in, pytest_collection_modifyitems
from kai_conformance.suites.support.cases.scale import (
    GANG_SIZES,
    NON_PREEMPTIBLE,
    PREEMPTIBLE,
    DefaultSchedulerBurst,
    FillingBurst,
    OverloadBurst,
    whole_node,
    whole_nodes,
)

ROOT = Path(__file__).resolve().parents[2]
LAYOUTS = {name: load_topology(name).layout("kai-conformance") for name in available_topologies()}
LAYOUTS["mixed"] = GpuLayout((GpuNode("big-1", 8), GpuNode("big-2", 8), GpuNode("small", 2), GpuNode("cpu", 0)))


def first_fit_on_empty(layout: GpuLayout, shapes: list[tuple[int, int]]) -> bool:
    """Whether the pods fit the empty cluster, largest pods first (the burst's claim: it fits, whatever the order KAI
    takes under bin-packing, once whole-node pods have their nodes)."""
    free = {n.name: n.gpus for n in layout.gpu_nodes}
    for gpus in sorted((g for pods, g in shapes for _ in range(pods)), reverse=True):
        node = next((n for n, left in sorted(free.items(), key=lambda kv: kv[1]) if left >= gpus), None)
        if node is None:
            return False
        free[node] -= gpus
    return True


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_the_filling_burst_asks_for_its_fraction_and_fits_the_empty_cluster(name: str) -> None:
    layout = LAYOUTS[name]
    plan = FillingBurst().plan(layout)
    assert plan.gpus <= layout.total * 75 // 100
    assert plan.gpus >= layout.total * 75 // 100 - max(layout.max_per_node, 1), "the mix fills up to its target"
    assert sum(g.pods for g in plan.gangs if g.gpus == whole_node(layout) > 1) <= whole_nodes(layout)
    assert first_fit_on_empty(layout, [(g.pods, g.gpus) for g in plan.gangs])
    assert plan == FillingBurst().plan(layout), "deterministic: the same layout gives the same burst"
    assert {g.queue for g in plan.gangs} <= {"burst"} and plan.queue("burst").quota == plan.gpus


def test_at_500_nodes_the_filling_burst_has_every_gang_size_of_both_pod_sizes_and_over_a_thousand_pods() -> None:
    plan = FillingBurst().plan(LAYOUTS["scale-500"])
    assert plan.pods >= 1000 and plan.gpus == 3000
    assert {(g.pods, g.gpus) for g in plan.gangs} >= {(size, gpus) for size in GANG_SIZES for gpus in (1, 8)}
    assert plan.describe().startswith("276 TrainJobs, 1,691 pods, 3,000 GPUs (75% of the cluster's 4,000")


@pytest.mark.parametrize("name", ["pr-gate", "release", "scale-100", "scale-500"])
def test_the_overload_is_larger_than_the_cluster_from_two_limited_queues_of_both_priorities(name: str) -> None:
    layout = LAYOUTS[name]
    plan = OverloadBurst().plan(layout)
    assert plan.gpus > layout.total
    for queue in plan.queues:
        assert 0 < queue.quota < queue.limit < layout.total
        mine = [g for g in plan.gangs if g.queue == queue.role]
        assert {g.priority for g in mine} == {PREEMPTIBLE, NON_PREEMPTIBLE}
        assert sum(g.demand for g in mine) > queue.limit, "each queue asks for more than its limit"
        non_preemptible = [g for g in mine if not g.preemptible]
        assert all(g.demand <= queue.quota for g in non_preemptible), "every non-preemptible gang could run"
        assert sum(g.demand for g in non_preemptible) > queue.quota, "but not all of them at once"
    roles = [g.queue for g in plan.gangs[:4]]
    assert len(set(roles)) == 2, "submission order mixes the queues"


def test_the_control_is_one_whole_node_pod_more_than_the_nodes_that_hold_one() -> None:
    layout = LAYOUTS["scale-100"]
    (gang,) = DefaultSchedulerBurst().plan(layout).gangs
    assert (gang.pods, gang.gpus) == (101, 8)
    assert DefaultSchedulerBurst().plan(layout).queue("limited").limit == 400


def test_cases_too_big_for_a_tiny_cluster_plan_nothing_rather_than_fail() -> None:
    tiny = GpuLayout((GpuNode("only", 1),))
    assert FillingBurst().plan(tiny).gangs == ()
    assert OverloadBurst().plan(tiny).gangs == ()


# ---------------------------------------------------------------------------------------------- the scale marker
@pytest.mark.parametrize(
    ("expression", "deselected"),
    [("", True), ("not slow", True), ("gang", True), ("not serial", True), ("scale", False),
     ("scale and not control", False), ("gang or scale", False), ("not scale", False)],
)  # fmt: skip
def test_scale_cases_run_only_when_the_marker_expression_names_scale(expression: str, deselected: bool) -> None:
    assert ("scale" in not_opted_in(expression)) is deselected


class _Mark:
    def __init__(self, name: str) -> None:
        self.name = name


class _Item:
    def __init__(self, *marks: str) -> None:
        self.marks = [_Mark(m) for m in marks]

    def iter_markers(self):
        return iter(self.marks)


class _Config:
    def __init__(self, expression: str) -> None:
        self.expression, self.deselected = expression, []
        self.hook = self

    def getoption(self, name: str, default: str = "") -> str:
        return self.expression

    def pytest_deselected(self, items) -> None:
        self.deselected += items


def test_the_hook_deselects_scale_items_and_reports_them_as_deselected() -> None:
    items = [_Item("gang"), _Item("scale", "serial"), _Item("scale", "control")]
    config = _Config("not slow")
    pytest_collection_modifyitems(config, items)  # type: ignore[arg-type]
    assert [i.marks[0].name for i in items] == ["gang"] and len(config.deselected) == 2
    kept = [_Item("gang"), _Item("scale")]
    pytest_collection_modifyitems(_Config("scale or gang"), kept)  # type: ignore[arg-type]
    assert len(kept) == 2


def test_on_the_command_line_the_pr_gate_deselects_and_minus_m_scale_selects_the_scale_cases() -> None:
    """Offline, as a user runs it (a plain run: tests/test_rendered_objects.py)."""
    command = [sys.executable, "-m", "pytest", "suites", "--collect-only", "-q", "-p", "no:cacheprovider", "-m"]
    runs = {
        expression: subprocess.Popen(
            [*command, expression], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for expression in ("not slow", "scale")
    }
    out = {expression: run.communicate(timeout=60)[0] for expression, run in runs.items()}
    gate = [line for line in out["not slow"].splitlines() if "::" in line]
    assert gate and not any("test_scale.py" in line for line in gate), out["not slow"]
    assert "deselected" in out["not slow"]
    scale = [line for line in out["scale"].splitlines() if "::" in line]
    assert scale and all(line.startswith("suites/test_scale.py::") for line in scale), out["scale"]
    assert len(scale) == 3 and "skipped" not in out["scale"]
