"""Lanes (fixtures/plugin/lanes.py): under xdist with a slice, a serial case runs in the slice beside ordinary cases instead of
beside another serial case. A simulated xdist run drives the real scheduler (xdist's ``load`` with each case chosen
for the worker's lane) and the same run under plain ``load`` is the control."""

from __future__ import annotations

import heapq
from pathlib import Path
from types import SimpleNamespace

import pytest
from xdist.scheduler import LoadScheduling

from kai_conformance.fixtures.plugin import lanes
from kai_conformance.fixtures.plugin.lanes import (
    ONLY_LANE,
    ORDINARY,
    SHARED_LANE,
    SHARED_ONLY,
    SLICE_LANE,
    SLICEABLE,
    describe,
    make_scheduler,
    pick,
    preferences,
    write_ranks,
)

#: The PR gate's shape (bench of 2026-11-24): 4 serial cases that never take a slice, 33 that may, 65 ordinary.
GATE = [SHARED_ONLY] * 4 + [SLICEABLE] * 33 + [ORDINARY] * 65
SECONDS = {SHARED_ONLY: 1.0, SLICEABLE: 14.0, ORDINARY: 6.0}


class Worker:
    def __init__(self, worker_id: str) -> None:
        self.gateway = SimpleNamespace(id=worker_id)
        self.shutting_down = False

    def send_runtest_some(self, indices: list[int]) -> None:
        pass

    def shutdown(self) -> None:
        self.shutting_down = True


#: xdist's log producer, quiet.
QUIET = SimpleNamespace(loadsched=lambda *args: None)


def config(workers: int) -> SimpleNamespace:
    options = {"tx": [f"{workers}*popen"], "maxschedchunk": None}
    return SimpleNamespace(getvalue=options.get, getoption=options.get, hook=None)


def simulate(
    scheduler: LoadScheduling, ranks: list[int], workers: int, most_held: list[int] | None = None
) -> dict[str, list[tuple[float, float, int]]]:
    """Run the collection through ``scheduler`` as xdist does: a worker runs the first case it holds and reports it
    complete; returns what each worker ran, as (start, end, rank), and appends to ``most_held`` how many cases a
    worker held at each completion."""
    nodes = [Worker(f"gw{i}") for i in range(workers)]
    collection = [f"suites/test_x.py::case[{i}]" for i in range(len(ranks))]
    for node in nodes:
        scheduler.add_node(node)
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    ran: dict[str, list[tuple[float, float, int]]] = {n.gateway.id: [] for n in nodes}
    clock, running = 0.0, []
    for node in nodes:
        index = scheduler.node2pending[node][0]
        heapq.heappush(running, (SECONDS[ranks[index]], node.gateway.id, index, 0.0))
    by_id = {n.gateway.id: n for n in nodes}
    while running:
        clock, worker, index, started = heapq.heappop(running)
        node = by_id[worker]
        ran[worker].append((started, clock, ranks[index]))
        if most_held is not None:
            most_held.append(len(scheduler.node2pending[node]))
        scheduler.mark_test_complete(node, index, duration=clock - started)
        if scheduler.node2pending[node]:
            following = scheduler.node2pending[node][0]
            heapq.heappush(running, (clock + SECONDS[ranks[following]], worker, following, clock))
    return ran


def serial_beside_serial(ran: dict[str, list[tuple[float, float, int]]]) -> float:
    """Seconds during which two serial cases ran at once (the contention lanes avoid)."""
    first, second = ran.values()
    overlap = 0.0
    for a_start, a_end, a_rank in first:
        for b_start, b_end, b_rank in second:
            if ORDINARY not in (a_rank, b_rank):
                overlap += max(0.0, min(a_end, b_end) - max(a_start, b_start))
    return overlap


def lane_scheduler(tmp_path: Path, ranks: list[int], workers: int, slices: int) -> LoadScheduling:
    write_ranks(tmp_path, {f"suites/test_x.py::case[{i}]": rank for i, rank in enumerate(ranks)})
    return make_scheduler(config(workers), QUIET, slices, tmp_path)  # type: ignore[arg-type]


def test_with_a_slice_a_serial_case_runs_beside_ordinary_ones_not_beside_another_serial_case(tmp_path: Path) -> None:
    held: list[int] = []
    ran = simulate(lane_scheduler(tmp_path, GATE, 2, 1), GATE, 2, held)
    assert max(held) <= 2, "a worker holds the case it runs and the next one: the lane decides one case ahead"
    assert sum(len(cases) for cases in ran.values()) == len(GATE), "every case runs once"
    slice_lane = [rank for _, _, rank in ran["gw0"]]
    assert slice_lane[: GATE.count(SLICEABLE) // 2] == [SLICEABLE] * (GATE.count(SLICEABLE) // 2)
    shared_lane = [rank for _, _, rank in ran["gw1"]]
    assert shared_lane[: GATE.count(SHARED_ONLY)] == [SHARED_ONLY] * GATE.count(SHARED_ONLY)
    lanes_overlap = serial_beside_serial(ran)
    ends = [cases[-1][1] for cases in ran.values()]
    # The control: xdist's own load scheduling of the same seat order pairs serial cases for most of their time.
    control = simulate(LoadScheduling(config(2), QUIET), GATE, 2)  # type: ignore[arg-type]
    assert serial_beside_serial(control) > 3 * max(lanes_overlap, 1.0), (serial_beside_serial(control), lanes_overlap)
    assert max(ends) - min(ends) <= max(SECONDS.values()), "no worker idles while cases wait"


def test_the_run_says_which_worker_takes_which_cases() -> None:
    said = describe(preferences(["gw0", "gw1"], 1), GATE)
    assert said == (
        "lanes: gw0 takes the 33 serial cases that may run in a slice; gw1 the 4 that never do, then the 65 "
        "ordinary ones (then any case left)"
    )
    assert describe(preferences(["gw0", "gw1"], 0), GATE) == ""


def test_lanes_by_worker_count_and_slices() -> None:
    assert preferences(["gw1", "gw0"], 1) == {"gw0": SLICE_LANE, "gw1": SHARED_LANE}
    assert preferences([f"gw{i}" for i in (10, 2, 0, 1)], 3) == {
        "gw0": SLICE_LANE, "gw1": SLICE_LANE, "gw2": SLICE_LANE, "gw10": SHARED_LANE,
    }  # fmt: skip
    assert preferences(["gw0", "gw1"], 3) == {"gw0": SLICE_LANE, "gw1": SHARED_LANE}, "one lane stays shared"
    assert preferences(["gw0", "gw1"], 0) == {"gw0": ONLY_LANE, "gw1": ONLY_LANE}
    assert preferences(["gw0"], 1) == {"gw0": ONLY_LANE}


def test_a_lane_takes_its_own_cases_first_then_any_in_collection_order() -> None:
    rank_of = [ORDINARY, SLICEABLE, SHARED_ONLY, SLICEABLE, ORDINARY]
    pending = list(range(5))
    assert pick(pending, rank_of, SLICE_LANE, 1) == [1]
    assert pick(pending, rank_of, SHARED_LANE, 2) == [2, 0]
    assert pick(pending, rank_of, SHARED_LANE, 5) == [4, 3]
    assert pending == []


def test_without_a_ranks_file_the_run_goes_on_in_collection_order(tmp_path: Path) -> None:
    scheduler = make_scheduler(config(2), QUIET, 1, tmp_path / "absent")  # type: ignore[arg-type]
    ranks = [SLICEABLE, ORDINARY, SLICEABLE, ORDINARY, ORDINARY]
    ran = simulate(scheduler, ranks, 2)
    assert scheduler.rank_of == [ORDINARY] * 5, "every case counts as ordinary"
    assert sum(len(cases) for cases in ran.values()) == 5
    assert [rank for _, _, rank in ran["gw0"][:2]] == [SLICEABLE, ORDINARY], "cases 0 and 1, not the slice lane's pick"


def test_the_hook_leaves_other_distributions_and_runs_alone(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from kai_conformance.fixtures import plugin, run
    from kai_conformance.fixtures.plugin import options

    settings = SimpleNamespace(cluster="kind", topology=SimpleNamespace(slices=1))
    monkeypatch.setattr(plugin, "in_suite_mode", lambda config: True)
    monkeypatch.setattr(run, "run_context", lambda config: SimpleNamespace(state_dir=tmp_path))

    def configured(dist: str, with_settings: bool = True) -> SimpleNamespace:
        values = {"dist": dist, "tx": ["2*popen"], "maxschedchunk": None}
        stash = {options.SETTINGS_KEY: settings} if with_settings else {}
        return SimpleNamespace(getvalue=values.get, getoption=values.get, hook=None, stash=stash)

    assert lanes.pytest_xdist_make_scheduler(configured("load"), QUIET) is not None  # type: ignore[arg-type]
    assert lanes.pytest_xdist_make_scheduler(configured("loadscope"), None) is None  # type: ignore[arg-type]
    assert lanes.pytest_xdist_make_scheduler(configured("load", False), None) is None  # type: ignore[arg-type]
    monkeypatch.setattr(plugin, "in_suite_mode", lambda config: False)
    assert lanes.pytest_xdist_make_scheduler(configured("load"), None) is None  # type: ignore[arg-type]
